"""Take docs/screenshots/multimodal.png: a multimodal checkpoint, its vision tower counted.

Qwen3-VL 8B from the bundled catalog (its published config.json), served with a 32k context.
Run under Xvfb for the committed image, as ``take_screenshots.py`` says; user settings go to a
temporary folder and no network is needed.
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
MODEL = "Qwen/Qwen3-VL-8B-Instruct"
SETUP = {"mode": "inference", "quant": "none", "engine": "transformers", "seq": 32768, "batch": 1}


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    window.resize(1600, 1000)
    window.show()

    def save() -> None:
        window.grab().save(str(HERE / "multimodal.png"))
        print(f"wrote {HERE / 'multimodal.png'}")
        qapp.quit()

    def start() -> None:
        window.controller.update(**SETUP)
        window.controller.load_source(MODEL)
        QTimer.singleShot(3000, save)

    QTimer.singleShot(2500, start)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
