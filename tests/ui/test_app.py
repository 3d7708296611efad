"""The application object as ``vramgui`` creates it."""

from __future__ import annotations

import linecache
import os
import subprocess
import sys

import pytest

from vramgui.ui import app
from vramgui.ui.compat import forget_imported_sources


def test_the_application_has_its_identity_and_a_short_switch_interval(qapp):
    before = sys.getswitchinterval()
    try:
        created = app.create_application([])
        assert created is qapp
        assert created.applicationName() == app.APP_NAME
        assert created.desktopFileName() == app.DESKTOP_FILE
        # The GUI thread gets the interpreter lock back from a busy worker within 1 ms, not 5.
        assert sys.getswitchinterval() == app.SWITCH_INTERVAL_S < 0.005
    finally:
        sys.setswitchinterval(before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 / Wayland are Linux's")
def test_without_a_display_the_window_says_so_and_how_to_go_on(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    env["VRAMGUI_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "vramgui"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "no display" in done.stderr
    assert "vramgui estimate" in done.stderr and "xvfb-run vramgui" in done.stderr
    assert "xcb" not in done.stderr  # not Qt's misleading plugin message


def test_a_display_or_a_chosen_platform_is_enough():
    assert app.missing_display({"DISPLAY": ":0"}) is None
    assert app.missing_display({"WAYLAND_DISPLAY": "wayland-0"}) is None
    assert app.missing_display({"QT_QPA_PLATFORM": "offscreen"}) is None
    if sys.platform.startswith("linux"):
        assert app.missing_display({}) == app.NO_DISPLAY
        assert app.missing_display({"QT_QPA_PLATFORM": "xcb"}) == app.NO_DISPLAY


def test_modules_imported_late_leave_no_source_in_memory(qapp, tmp_path, monkeypatch):
    # PySide6 reads every new module's source; the window must not keep it (10 MiB of lines in
    # the first hundred actions of the soak test).
    module = tmp_path / "late_import_probe.py"
    module.write_text("VALUE = 1\n" * 200)
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_imported_sources()
    import late_import_probe  # noqa: F401 - imported for its side effect on linecache

    assert str(module) not in linecache.cache
