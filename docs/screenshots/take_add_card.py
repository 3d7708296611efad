"""Take the "Add a card…" screenshots: the dialog over the window, and the card it added listed,
checked and fitted, at 1280x720 and 1920x1080 (``add-card-dialog-WxH.png``,
``add-card-listed-WxH.png``).

Under Xvfb (the dialog is a window of its own, so the screen is grabbed):
``Xvfb :103 -screen 0 1920x1080x24 &`` then
``DISPLAY=:103 QT_QPA_PLATFORM=xcb python docs/screenshots/take_add_card.py [OUT_FOLDER]``.
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

SIZES = ((1280, 720), (1920, 1080))


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    qapp = app.create_application(sys.argv[:1])
    window = app.build_window(app.real_services(), app.settings())
    window.move(0, 0)
    window.show()
    panel = window.gpu_panel
    sizes = list(SIZES)

    def when(ready: object, then: object) -> None:
        QTimer.singleShot(100, lambda: then() if ready() else when(ready, then))

    def save(name: str, width: int, height: int) -> None:
        screen = window.screen()
        screen.grabWindow(0, 0, 0, width, height).save(str(out / name))
        print(f"wrote {out / name}")

    def next_size() -> None:
        if not sizes:
            qapp.quit()
            return
        width, height = sizes.pop(0)
        for card in panel.cards():
            panel.remove_card(card.name)
        window.resize(width, height)
        dialog = panel.open_add_dialog()
        dialog.memory.setValue(16)
        dialog.bandwidth.setValue(896)
        dialog.tflops.setValue(87.9)
        dialog.name.setText("My RTX 5070 Ti laptop box")
        QTimer.singleShot(1500, lambda: shoot_dialog(width, height))

    def shoot_dialog(width: int, height: int) -> None:
        save(f"add-card-dialog-{width}x{height}.png", width, height)
        panel.dialog.accept()
        when(
            lambda: window.controller.analysis is not None and bool(panel.cards()),
            lambda: QTimer.singleShot(1500, lambda: shoot_listed(width, height)),
        )

    def shoot_listed(width: int, height: int) -> None:
        save(f"add-card-listed-{width}x{height}.png", width, height)
        next_size()

    when(lambda: window.controller.outlook is not None, next_size)
    return qapp.exec()


if __name__ == "__main__":
    raise SystemExit(main())
