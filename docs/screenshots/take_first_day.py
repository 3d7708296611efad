"""Take the first-day screenshots: ``python docs/screenshots/take_first_day.py``.

At 1280x720, 1366x768 and 1920x1080: the Estimate tab after opening an Ollama GGUF and then a
safetensors checkpoint of the Hugging Face cache (``first-day-WxH.png``: the second model at the
settings the user had, not the GGUF's), Verify's result on it (``verify-WxH.png``; needs the
measure extra) and what Verify says without the measure extra (``verify-missing-WxH.png``). The
stores are ``on_this_machine.py``'s (real headers, sparse weights, in a temporary folder). Under
Xvfb: ``Xvfb :127 -screen 0 1920x1200x24 &`` then
``DISPLAY=:127 QT_QPA_PLATFORM=xcb python docs/screenshots/take_first_day.py [OUT_FOLDER]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import on_this_machine  # noqa: E402 - sets the stores' environment before vramgui is imported
from PySide6.QtCore import QTimer  # noqa: E402, TID251 - it drives the window

from vramgui.ui import app  # noqa: E402

SIZES = ((1280, 720), (1366, 768), (1920, 1080))
GGUF = "llama3.1:8b"
SAFETENSORS = "meta-llama/Llama-3.1-8B"
MISSING = ("torch is not installed", "transformers is not installed", "peft is not installed")
TIMEOUT_MS = 240_000


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    on_this_machine.build_stores()
    qapp = app.create_application(sys.argv[:1])
    window = app.build_window(app.real_services(), app.settings())
    window.show()
    view = window.model_panel.result_area.currentWidget()
    bar = window.verify_bar
    sizes = list(SIZES)

    def when(ready: object, then: object) -> None:
        QTimer.singleShot(100, lambda: then() if ready() else when(ready, then))

    def drawn(name: str) -> bool:
        c = window.controller
        return (
            c.spec is not None
            and c.spec.name == name
            and c.analysis is not None
            and c.outlook is not None
            and not view.busy
        )

    def open_listed(name: str, then: object) -> None:
        model = view.table_model
        row = next(r for r in range(model.rowCount()) if model.index(r, 0).data() == name)
        view.table.selectRow(row)
        view.table.clicked.emit(model.index(row, 0))
        when(lambda: drawn(name), lambda: QTimer.singleShot(700, then))

    def save(name: str) -> None:
        path = out / name
        window.grab().save(str(path))
        print(f"wrote {path}")

    def next_size() -> None:
        if not sizes:
            qapp.quit()
            return
        w, h = sizes.pop(0)
        window.resize(w, h)
        open_listed(GGUF, lambda: open_listed(SAFETENSORS, lambda: shoot_estimate(w, h)))

    def shoot_estimate(w: int, h: int) -> None:
        save(f"first-day-{w}x{h}.png")
        real = bar._missing
        bar._missing = lambda: MISSING
        bar.fake_action.trigger()
        bar._missing = real
        QTimer.singleShot(700, lambda: missing(w, h))

    def missing(w: int, h: int) -> None:
        save(f"verify-missing-{w}x{h}.png")
        bar.finished.connect(lambda _measured: QTimer.singleShot(700, lambda: verified(w, h)))
        bar.fake_action.trigger()

    def verified(w: int, h: int) -> None:
        bar.finished.disconnect()
        save(f"verify-{w}x{h}.png")
        next_size()

    when(lambda: view.table_model.rowCount() and not view.busy, next_size)
    QTimer.singleShot(TIMEOUT_MS, lambda: qapp.exit(1))
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
