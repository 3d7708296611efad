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


def test_the_test_command_asks_for_the_cpu_build_of_torch_alone():
    words = _readme_commands()[1].split(" && ")[1].split()
    after = words[words.index("install") + 1 :]
    assert after[after.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert "--no-deps" in after
    # Only torch is asked of that index: the next command brings its dependencies from PyPI.
    values = {after[after.index("--extra-index-url") + 1]}
    assert [w for w in after if not w.startswith("-") and w not in values] == ["torch==2.13.0"]


def test_the_app_is_installed_the_same_way_everywhere_the_readme_says():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = _readme_commands()[0]
    row = next(ln for ln in text.splitlines() if ln.startswith("| Linux, macOS |"))
    install, run = re.findall(r"`([^`]+)`", row)
    assert setup == f"{install} && {run}"
    assert "source .venv/bin/activate" in _setup_section()


def test_the_readme_counts_the_catalogs_as_they_are():
    from vramgui.hardware.gpus import load_catalog as gpu_catalog
    from vramgui.sources.catalog import load_catalog as model_catalog

    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"catalog of {len(model_catalog())} models" in text
    assert f"any of the {len(gpu_catalog())} GPUs of the catalog" in text
