"""Take the README screenshots of the real window: ``python docs/screenshots/take_screenshots.py``.

Runs on any Qt platform; for the committed images, under Xvfb:
``Xvfb :117 -screen 0 1600x1000x24 & DISPLAY=:117 QT_QPA_PLATFORM=xcb python docs/screenshots/...``.
User settings go to a temporary folder, so the window opens as on a first run (no network needed).
The committed PNGs are reduced to 256 colours (``convert X.png -colors 256 PNG8:X.png``) to stay
small.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ["VRAMGUI_HOME"] = tempfile.mkdtemp(prefix="vramgui-shots-")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QTimer  # noqa: TID251 - it drives the window

from vramgui.ui import app
from vramgui.ui.main_window import MainWindow, build_window

HERE = Path(__file__).resolve().parent
SETUPS = {
    "inference.png": {"mode": "inference", "seq": 16384, "batch": 1, "quant": "none"},
    "training.png": {
        "mode": "training",
        "method": "qlora",
        "batch": 4,
        "seq": 2048,
        "grad_checkpointing": True,
        "optimizer": "adamw-8bit",
    },
}
COMPARE = ("RTX 4090", "RTX 3060 12GB")
# The offload view of docs/offload.md: Llama-2-7B Q4_K_M in 4 GiB of an RTX 3060, 16 GiB of RAM.
OFFLOAD = ("offload.png", "llama-2-7b", "RTX 3060", 4, 16)


def offload_shot() -> None:
    """The offload view alone, as docs/offload.md shows it."""
    from vramgui.answers.host import UNKNOWN_HOST, choose_host
    from vramgui.answers.offload import bandwidths_for
    from vramgui.core.units import GiB
    from vramgui.core.workload import Workload
    from vramgui.hardware.gpus import find_gpu
    from vramgui.sources.resolve import load_model
    from vramgui.ui.offload_view import GpuChoice, OffloadView

    name, model, gpu, vram_gib, ram_gib = OFFLOAD
    view = OffloadView()
    budget = GpuChoice(
        f"{gpu}, {vram_gib} GiB budget", vram_gib * GiB, bandwidths_for(find_gpu(gpu), UNKNOWN_HOST)
    )
    view.set_inputs(
        load_model(model).spec,
        Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048),
        gpus=[budget],
        host=choose_host(UNKNOWN_HOST, ram_gib * GiB),
    )
    view.resize(1400, 900)
    view.show()
    QTimer.singleShot(
        300, lambda: (view.grab().save(str(HERE / name)), print(f"wrote {HERE / name}"))
    )


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    window.resize(1600, 1000)
    window.show()
    pending = list(SETUPS.items())

    def wait_for_outlook(then: object) -> None:
        before = window.controller.outlook

        def check() -> None:
            if window.controller.outlook is before:
                QTimer.singleShot(100, check)
            else:
                QTimer.singleShot(300, then)  # let the last paint land

        check()

    def next_setup() -> None:
        if not pending:
            offload_shot()
            QTimer.singleShot(600, qapp.quit)
            return
        name, changes = pending.pop(0)
        window.controller.update(**changes)

        def save() -> None:
            # The QLoRA recipe's notice stands where the time / cost line is: the README shows
            # the line.
            window.banner_close.click()
            window.grab().save(str(HERE / name))
            print(f"wrote {HERE / name}")
            next_setup()

        wait_for_outlook(save)

    def start() -> None:
        for gpu in COMPARE:
            window.gpu_panel.set_checked(gpu)
        next_setup()

    wait_for_outlook(start)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
