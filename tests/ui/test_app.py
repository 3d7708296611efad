"""The application object as ``vramgui`` creates it."""

from __future__ import annotations

import sys

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
