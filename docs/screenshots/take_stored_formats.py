"""Take docs/screenshots/stored-format.png (and -1280x720): a model estimated as it ships.

gpt-oss-120b from the bundled catalog (its published config.json, MXFP4 experts), served by
vLLM with an 8k context and held against one H100 SXM: the precision panel shows the checkpoint's
own format, the weights are its 65,248,815,744 stored bytes, and it fits. Run under Xvfb for the
committed images, as ``take_screenshots.py`` says; user settings go to a temporary folder and no
network is needed.
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
MODEL = "gpt-oss-120b"
SETUP = {"mode": "inference", "quant": "none", "engine": "vllm", "seq": 8192, "batch": 1}
SIZES = {"stored-format.png": (1600, 1000), "stored-format-1280x720.png": (1280, 720)}


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    shots = list(SIZES.items())
    window.resize(*shots[0][1])
    window.show()

    def save() -> None:
        name, _ = shots.pop(0)
        window.grab().save(str(HERE / name))
        print(f"wrote {HERE / name}")
        if not shots:
            qapp.quit()
            return
        window.resize(*shots[0][1])
        QTimer.singleShot(1500, save)

    def start() -> None:
        window.gpu_panel.set_checked(app.DEFAULT_GPU, False)
        window.gpu_panel.set_checked("H100 SXM", True)
        window.controller.update(**SETUP)
        window.controller.load_source(MODEL)
        QTimer.singleShot(3500, save)

    QTimer.singleShot(2500, start)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
