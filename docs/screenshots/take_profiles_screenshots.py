"""Take the Profiles tab screenshots: ``python docs/screenshots/take_profiles_screenshots.py``.

The whole window at 1280x720 and 1366x768 on the Profiles tab, with four saved profiles and three
of them compared; then the tab alone, wide (1400x1160: the comparison side by side), with a
half-written file listed as unreadable. Run under Xvfb for the committed images:
``Xvfb :117 -screen 0 1600x1000x24 & DISPLAY=:117 QT_QPA_PLATFORM=xcb python docs/screenshots/...``.
User settings and profiles go to a temporary folder; every model is from the bundled catalog, so
no network is needed. The committed PNGs are reduced to 256 colours
(``convert X.png -colors 256 PNG8:X.png``) to stay small.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ["VRAMGUI_HOME"] = tempfile.mkdtemp(prefix="vramgui-shots-")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QTimer  # noqa: TID251 - it drives the window

from vramgui.core.workload import Workload
from vramgui.hardware.capacity import resolve_capacities
from vramgui.profiles import ProfileStore
from vramgui.sources.resolve import load_model
from vramgui.ui import app, extra_views
from vramgui.ui.main_window import MainWindow, build_window
from vramgui.ui.profiles_view import ProfilesView, profile_from_setup

HERE = Path(__file__).resolve().parent
SIZES = ((1280, 720), (1366, 768))
WIDE = ("profiles-compare.png", 1400, 1160)
GPUS = ("RTX 4090", "RTX 3060 12GB")
PROFILES = (
    ("Llama 3.1 8B chat, 8k context", "llama-3.1-8b", Workload(seq=8192, batch=1)),
    ("Llama 3.1 8B QLoRA on one 4090", "llama-3.1-8b",
     Workload(mode="training", method="qlora", quant="nf4", seq=2048, batch=4,
              grad_checkpointing=True)),
    ("Qwen2.5 7B long context, fp8 KV", "qwen2.5-7b",
     Workload(seq=32768, batch=1, engine="vllm", kv_dtype="fp8")),
    ("Qwen2.5 0.5B batch serving", "qwen2.5-0.5b", Workload(seq=4096, batch=16)),
)  # fmt: skip
COMPARED = 3


def save_profiles() -> None:
    store = ProfileStore()
    capacities = resolve_capacities(list(GPUS))
    for name, source, workload in PROFILES:
        notes = "shared with the team" if "QLoRA" in name else ""
        store.save(profile_from_setup(name, load_model(source), workload, capacities, notes))
    (store.directory / "half-written.json").write_text('{"format": "vramgui.profile", "na')


def main() -> int:
    save_profiles()
    qapp = app.create_application(sys.argv[:1])
    window: MainWindow = build_window(app.real_services(), app.settings())
    for gpu in GPUS:
        window.gpu_panel.set_checked(gpu)
    window.show()
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    window.tabs.setCurrentIndex(titles.index("Profiles"))
    view = extra_views.view_of(window.extra_tabs["Profiles"])
    assert isinstance(view, ProfilesView)
    view.select([name for name, _, _ in PROFILES[:COMPARED]])
    view.compare_selected()
    pending = list(SIZES)

    def next_size() -> None:
        if not pending:
            wide_shot(view)
            return
        width, height = pending.pop(0)
        window.resize(width, height)
        QTimer.singleShot(800, lambda: shoot(width, height))

    def shoot(width: int, height: int) -> None:
        path = HERE / f"profiles-{width}x{height}.png"
        window.grab().save(str(path))
        size = window.size()
        print(f"wrote {path} (window {size.width()}x{size.height()})")
        next_size()

    def wide_shot(view: ProfilesView) -> None:
        name, width, height = WIDE
        window.tabs.setCurrentIndex(0)  # the view leaves the window for its own picture
        view.setParent(None)
        view.resize(width, height)
        view.show()

        def shoot() -> None:
            view.grab().save(str(HERE / name))
            print(f"wrote {HERE / name} ({width}x{height})")
            qapp.quit()

        QTimer.singleShot(800, shoot)

    QTimer.singleShot(1500, next_size)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
