"""The package type-checks: mypy, strict on vramgui.core, the default checks elsewhere.

The settings are pyproject.toml's ``[tool.mypy]``; running them here puts the type checker in the
README's test command, and so in CI.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error():
    pytest.importorskip("mypy", reason="mypy comes with the test extra")
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    done = subprocess.run(
        [*command, "--cache-dir", str(ROOT / ".mypy_cache"), str(ROOT / "vramgui")],
        capture_output=True,
        check=False,
        text=True,
        timeout=280,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
