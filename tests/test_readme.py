"""The README's set-up commands are the ones CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", section)


def test_readme_has_two_setup_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("vramgui")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == _readme_commands()[1]


def _setup_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## Set-up", 1)[1].split("\n## ", 1)[0]


def test_setup_gives_the_linux_packages_in_one_line_before_the_commands():
    section = _setup_section()
    line = next(ln for ln in section.splitlines() if ln.startswith("`sudo apt install "))
    assert section.index(line) < section.index("```")
    packages = set(line.strip("`").split()[3:])
    # What the window needs on X11 (the xcb cursor library above all) and what CI installs.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_packages = set(re.search(r"qt_libs=\(([^)]*)\)", ci).group(1).split())
    assert ci_packages <= packages
    assert {"libxcb-cursor0", "libxkbcommon-x11-0", "libegl1"} <= packages
