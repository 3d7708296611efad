"""The project built as a wheel, offline, from a copy of its sources (no earlier build/ folder
lends it a file, and the checkout is left as it was)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def build_wheel(where: Path) -> Path:
    """The wheel of the checkout, built in ``where`` with the build backend of this environment
    (the test extra installs it) and no index: what ``pip install .`` installs."""
    for requirement in map(Requirement, PYPROJECT["build-system"]["requires"]):
        installed = importlib.metadata.version(requirement.name)
        assert installed in requirement.specifier, (
            f"{requirement.name} {installed} cannot build vramgui ({requirement}): "
            'pip install -e ".[test]" installs the build backend'
        )
    source = where / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("vramgui", "resources", "docs"):
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*command, "--no-index", "-q", "-w", str(where / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (wheel,) = (where / "dist").glob("vramgui-*.whl")
    return wheel
