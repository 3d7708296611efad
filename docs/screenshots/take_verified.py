"""Take docs/screenshots/verified.png: the window after Verify, the measured peak on the chart.

Needs the measure extra (the Verify run imports PyTorch in its own process). For the committed
image, under Xvfb: ``Xvfb :94 -screen 0 1600x1000x24 &`` then
``DISPLAY=:94 QT_QPA_PLATFORM=xcb python docs/screenshots/take_verified.py``. User settings go to a
temporary folder, so the window opens as on a first run (no network needed).
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
SETUP = {"mode": "inference", "seq": 16384, "batch": 1, "quant": "none"}
COMPARE = ("RTX 4090",)
TIMEOUT_MS = 180_000


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    window.resize(1600, 1000)
    window.show()

    def save(measured: object) -> None:
        if measured is None:
            print(f"Verify failed: {window.verify_bar.message[0]}", file=sys.stderr)
            qapp.exit(1)
            return

        def grab() -> None:
            window.grab().save(str(HERE / "verified.png"))
            print(f"wrote {HERE / 'verified.png'}")
            qapp.quit()

        QTimer.singleShot(500, grab)  # let the last paint land

    def verify() -> None:
        if window.controller.outlook is None:
            QTimer.singleShot(100, verify)
            return
        window.verify_bar.finished.connect(save)
        window.verify_bar.fake_action.trigger()

    def start() -> None:
        if window.controller.outlook is None:
            QTimer.singleShot(100, start)
            return
        for gpu in COMPARE:
            window.gpu_panel.set_checked(gpu)
        window.controller.update(**SETUP)
        QTimer.singleShot(1500, verify)

    start()
    QTimer.singleShot(TIMEOUT_MS, lambda: qapp.exit(2))
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
