"""Take the Offloading tab screenshots of docs/offload.md: a mixture of experts with its experts in
host RAM, and a model spread over two GPUs of different sizes.

``Xvfb :128 -screen 0 1600x1000x24 & DISPLAY=:128 QT_QPA_PLATFORM=xcb PYQTGRAPH_QT_LIB=PySide6
python docs/screenshots/take_offload_screenshots.py``. The committed PNGs are reduced to 256
colours (``convert X.png -colors 256 PNG8:X.png``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ["VRAMGUI_HOME"] = tempfile.mkdtemp(prefix="vramgui-shots-")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QTimer  # noqa: TID251 - it drives the view

from vramgui.answers.host import UNKNOWN_HOST, choose_host
from vramgui.answers.offload import bandwidths_for
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.sources.resolve import load_model
from vramgui.ui import app
from vramgui.ui.offload_view import GpuChoice, OffloadView

HERE = Path(__file__).resolve().parent
Q4_32K = Workload(quant="Q4_K_M", engine="llamacpp", seq=32768)
# 64 GiB of host RAM as a user types it in the Host RAM box (the line then says "set").
RAM_64G = choose_host(UNKNOWN_HOST, 64 * GiB)


def choice(name: str) -> GpuChoice:
    gpu = find_gpu(name)
    return GpuChoice(gpu.name, gpu.capacity_bytes(), bandwidths_for(gpu, UNKNOWN_HOST))


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    shots = []

    # Qwen3-30B-A3B at 32k on a 12 GB card, every layer's experts in host RAM (--cpu-moe).
    experts = OffloadView()
    experts.set_inputs(
        load_model("qwen3-30b-a3b").spec,
        Q4_32K,
        gpus=[choice("RTX 3060 12GB")],
        host=RAM_64G,
    )
    experts.set_gpu_layers(49)
    experts.experts_slider.setValue(experts.experts_slider.maximum())
    shots += [
        (experts, "offload-experts.png", (1400, 900)),
        (experts, "offload-experts-1280x720.png", (1280, 720)),
    ]

    # Llama-3.1-70B at 8k over an RTX 4090 and an RTX 3060 12GB, fitted like llama.cpp.
    two = OffloadView()
    two.set_inputs(
        load_model("llama-3.1-70b").spec,
        Q4_32K.with_(seq=8192),
        gpus=[choice("RTX 4090"), choice("RTX 3060 12GB")],
        host=RAM_64G,
    )
    two._toggle_gpu(1, True)
    two.fit_like_llamacpp()
    shots.append((two, "offload-two-gpus.png", (1400, 900)))

    def take() -> None:
        if not shots:
            qapp.quit()
            return
        view, name, (width, height) = shots.pop(0)
        view.resize(width, height)
        view.show()

        def save() -> None:
            view.grab().save(str(HERE / name))
            print(f"wrote {HERE / name}")
            take()

        QTimer.singleShot(2500, save)  # the curves and the fit run on workers

    QTimer.singleShot(300, take)
    return qapp.exec()


if __name__ == "__main__":
    raise SystemExit(main())
