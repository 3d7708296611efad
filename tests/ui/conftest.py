"""Fixtures for the window tests: the real composition with fakes where the world would be."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, QThreadPool

from tests.fakehub.fixtures import fake_hub  # noqa: F401 - a fixture for the tests here
from vramgui.hardware import GpuSnapshot
from vramgui.ui import app
from vramgui.ui.compat import keep_singletons_alive
from vramgui.ui.main_window import MainWindow, Services, build_window

# The tests call PySide6 often enough to exhaust None and True on Python 3.11 (see compat).
keep_singletons_alive()

NO_DRIVER = "No NVIDIA driver found. Install the NVIDIA driver, or pick a GPU from the catalog."


class FakeProbe:
    """A GPU probe by scenario: no driver, unless a test sets ``snapshot_value``."""

    def __init__(self) -> None:
        self.snapshot_value = GpuSnapshot(reason=NO_DRIVER)
        self.calls = 0

    def snapshot(self) -> GpuSnapshot:
        self.calls += 1
        return self.snapshot_value


@pytest.fixture
def probe() -> FakeProbe:
    return FakeProbe()


@pytest.fixture
def services(probe, fake_hub) -> Services:  # noqa: F811 - the fixture above
    """The application's own services, pointed at the fake Hub, with a scripted GPU probe."""
    return replace(app.real_services(), probe=probe.snapshot, gpu_refresh_ms=0)


@pytest.fixture
def log_file():
    """The application's log file (``app.setup_logging``), its handler removed afterwards."""
    path: Path = app.setup_logging()
    yield path
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "baseFilename", None) == str(path):
            root.removeHandler(handler)
            handler.close()


@pytest.fixture
def settings(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def make_window(qtbot, services, settings):
    """Builds windows like ``app.main`` does and waits until the first estimate is drawn."""
    windows: list[MainWindow] = []

    def make(services: Services = services, settings: QSettings = settings, wait: bool = True):
        window = build_window(services, settings)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        if wait:
            qtbot.waitUntil(lambda: window.controller.outlook is not None, timeout=10000)
        return window

    yield make
    for window in windows:
        window.close()
    QThreadPool.globalInstance().waitForDone(5000)
