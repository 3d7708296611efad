"""Take the laptop-screen screenshots of the window: ``python docs/screenshots/take_laptop_screenshots.py``.

The Estimate and Offloading tabs at 1280x720 and 1366x768 (``estimate-1280x720.png``...), and the
badge of an approximate estimate (``approximate.png``, a config.json of a type vramgui does not
model). Run under Xvfb for the committed images, as ``take_screenshots.py`` says; user settings go
to a temporary folder and no network is needed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ["VRAMGUI_HOME"] = tempfile.mkdtemp(prefix="vramgui-shots-")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import Qt, QTimer  # noqa: TID251 - it drives the window

from vramgui.ui import app
from vramgui.ui.main_window import MainWindow, build_window

HERE = Path(__file__).resolve().parent
SIZES = ((1280, 720), (1366, 768))
GPUS = ("RTX 3060 12GB",)  # beside the default RTX 4090
# The Estimate tab: QLoRA of Llama 3.1 8B from its recipe (the breakdown has the most rows).
ESTIMATE = {"mode": "training", "method": "qlora", "batch": 4, "seq": 4096}
# The Offloading tab: Llama 3.1 8B Q4_K_M with a 64k context, partly offloaded on an RTX 3060.
OFFLOAD = {"mode": "inference", "quant": "Q4_K_M", "seq": 65536, "batch": 1}
# A model type vramgui does not model: the estimate is approximate and says so.
UNKNOWN = {
    "architectures": ["NovaForCausalLM"],
    "model_type": "nova",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    window.show()
    shots = [
        (f"{tab}-{w}x{h}.png", (w, h), index, changes)
        for w, h in SIZES
        for tab, index, changes in (
            ("estimate", "Estimate", ESTIMATE),
            ("offload", "Offloading", OFFLOAD),
        )
    ]
    unknown = Path(tempfile.mkdtemp(prefix="vramgui-nova-")) / "nova-8b" / "config.json"
    unknown.parent.mkdir()
    unknown.write_text(json.dumps(UNKNOWN))

    def settle(then: object) -> None:
        # Two quiet seconds after the last change: estimate, outlook and the offload view drawn.
        QTimer.singleShot(2500, then)

    def next_shot() -> None:
        if not shots:
            approximate()
            return
        name, size, index, changes = shots.pop(0)
        window.resize(*size)
        window.controller.update(**changes)
        titles = [window.tabs.tabText(i).replace("&", "") for i in range(window.tabs.count())]
        window.tabs.setCurrentIndex(titles.index(index))
        if index == "Offloading":
            offload = window.extra_tabs["Offloading"]
            choose = getattr(offload, "view", None)
            QTimer.singleShot(1500, lambda: choose_gpu(choose))
        settle(lambda: save(name, next_shot))

    def choose_gpu(view_of_tab: object) -> None:
        view = view_of_tab() if callable(view_of_tab) else None
        if view is not None:
            view.gpu.setCurrentIndex(
                max(view.gpu.findText(GPUS[0], flags=Qt.MatchFlag.MatchContains), 0)
            )

    def approximate() -> None:
        window.resize(*SIZES[0])
        window.tabs.setCurrentIndex(0)
        window.controller.update(mode="inference", quant="none", engine="transformers", seq=8192)
        window.statusBar().clearMessage()  # a message of the previous shot's
        window.controller.load_source(str(unknown))
        settle(lambda: save("approximate.png", qapp.quit))

    def save(name: str, then: object) -> None:
        window.grab().save(str(HERE / name))
        print(f"wrote {HERE / name}")
        then()  # type: ignore[operator]

    def start() -> None:
        for gpu in GPUS:
            window.gpu_panel.set_checked(gpu)
        next_shot()

    settle(start)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
