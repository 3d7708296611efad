"""The application object as ``vramgui`` creates it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vramgui.ui import app


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
