"""Test-wide isolation: offscreen Qt, no network, every user directory in a temp dir."""

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["PYQTGRAPH_QT_LIB"] = "PySide6"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch):
    """Every test gets its own HF_HOME, data, cache and config dirs; nothing touches the real ones."""
    root = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HF_HOME", str(root / "hf"))
    monkeypatch.setenv("VRAMGUI_HOME", str(root / "vramgui"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(root / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
