"""Take the Serving tab's screenshot: ``python docs/screenshots/take_serving.py``.

vLLM serving Llama 3.1 8B at a 131,072-token --max-model-len on an H100 SXM, an RTX 5090 and an
RTX 4090 (``serving.png``, 1600x1000). Run under Xvfb for the committed image, as
``take_screenshots.py`` says; user settings go to a temporary folder and no network is needed.
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
GPUS = ("H100 SXM", "RTX 5090")  # beside the default RTX 4090
SERVING = {"mode": "inference", "engine": "vllm", "quant": "none", "seq": 131072, "batch": 1}


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    window.resize(1600, 1000)
    window.show()

    def start() -> None:
        for gpu in GPUS:
            window.gpu_panel.set_checked(gpu)
        window.controller.update(**SERVING)
        titles = [window.tabs.tabText(i).replace("&", "") for i in range(window.tabs.count())]
        window.tabs.setCurrentIndex(titles.index("Serving"))
        QTimer.singleShot(3000, save)

    def save() -> None:
        window.grab().save(str(HERE / "serving.png"))
        print(f"wrote {HERE / 'serving.png'}")
        qapp.quit()

    QTimer.singleShot(2500, start)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
