"""Test-wide isolation: offscreen Qt, no network, every user directory in a temp dir.

The home directory itself is a temporary folder for the whole run, set before anything is
imported: libraries that read their folders once at import (huggingface_hub's cache, torch's)
never see the real one. Each test then gets folders of its own. tests/test_isolation.py checks
that a run leaves the home directory untouched.
"""

import atexit
import os
import shutil
import tempfile

_RUN_HOME = tempfile.mkdtemp(prefix="vramgui-tests-home-")
atexit.register(shutil.rmtree, _RUN_HOME, ignore_errors=True)
# Where the user's tools keep models or settings: the tests see none of them.
_FROM_THE_USER = (
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_ASSETS_CACHE",
    "HF_XET_CACHE",
    "HF_TOKEN",
    "HF_TOKEN_PATH",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "OLLAMA_MODELS",
)


def _home_env(root: str) -> dict[str, str]:
    return {
        "HOME": os.path.join(root, "home"),
        "HF_HOME": os.path.join(root, "hf"),
        "VRAMGUI_HOME": os.path.join(root, "vramgui"),
        "XDG_CONFIG_HOME": os.path.join(root, "config"),
        "XDG_DATA_HOME": os.path.join(root, "data"),
        "XDG_CACHE_HOME": os.path.join(root, "cache"),
        "XDG_STATE_HOME": os.path.join(root, "state"),
    }


for _name in _FROM_THE_USER:
    os.environ.pop(_name, None)
os.environ.update(_home_env(_RUN_HOME))
os.makedirs(os.environ["HOME"], exist_ok=True)
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["PYQTGRAPH_QT_LIB"] = "PySide6"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import pytest  # noqa: E402 (after the environment above, which imports must see)


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch):
    """Every test gets its own home, HF_HOME, data, cache, config and state dirs."""
    root = tmp_path_factory.mktemp("home")
    for name, value in _home_env(str(root)).items():
        monkeypatch.setenv(name, value)
    os.makedirs(os.environ["HOME"], exist_ok=True)
    for name in _FROM_THE_USER:
        monkeypatch.delenv(name, raising=False)
