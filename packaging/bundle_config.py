"""What goes into the PyInstaller bundle, as plain data and functions the spec and the tests share.

The spec (``vramgui.spec``) is executed by PyInstaller and cannot be imported by tests; the decisions
live here instead: the name and version from pyproject.toml, the icon per OS, the modules left out,
and the driver libraries that must never be bundled.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP_ID = "io.github.vramgui.vramgui"
ICON_DIR = ROOT / "resources" / "icons"
ENTRY_SCRIPT = Path(__file__).resolve().parent / "entry.py"

# Validation tools, test tools and optional back ends of our dependencies that the app never uses;
# analysis would otherwise follow their lazy imports and pull in gigabytes (torch) or other Qt bindings.
EXCLUDES = (
    "torch",
    "torchvision",
    "transformers",
    "peft",
    "accelerate",
    "safetensors.torch",
    "tensorflow",
    "jax",
    "pytest",
    "pytestqt",
    "hypothesis",
    "_pytest",
    "ruff",
    "tkinter",
    "_tkinter",
    "IPython",
    "matplotlib",
    "scipy",
    "pandas",
    "sympy",
    "numba",
    "cupy",
    "h5py",
    "OpenGL",
    "pyqtgraph.opengl",
    "PyQt5",
    "PyQt6",
    "PySide2",
    "sentencepiece",
)

# The NVIDIA driver provides NVML (and CUDA); a bundled copy would not match the installed driver.
_DRIVER_LIBRARY = re.compile(
    r"(^|[\\/])(lib)?(nvidia-ml|nvml|cuda)([.\d]*\.(so|dylib)|\.dll)", re.I
)


def project_metadata(pyproject: Path = ROOT / "pyproject.toml") -> tuple[str, str]:
    """The project's (name, version) from pyproject.toml."""
    with pyproject.open("rb") as handle:
        project = tomllib.load(handle)["project"]
    return project["name"], project["version"]


def icon_path(platform: str) -> Path | None:
    """The executable's icon for ``platform`` (``sys.platform``): .ico, .icns, or None on Linux.

    Linux executables carry no icon; the desktop entry names the installed PNGs instead.
    """
    if platform.startswith("win"):
        return ICON_DIR / "vramgui.ico"
    if platform == "darwin":
        return ICON_DIR / "vramgui.icns"
    return None


def is_driver_library(path: str) -> bool:
    """Whether ``path`` (a file name or bundle destination) is a driver library (NVML, CUDA)."""
    return _DRIVER_LIBRARY.search(path) is not None
