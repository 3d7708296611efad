"""The README's `vramgui profile` lines work as printed, in order, on a fresh profile folder."""

import re
import shlex
from pathlib import Path

from vramgui.cli import main

ROOT = Path(__file__).resolve().parents[2]


def readme_profile_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.+?)\n```", text, flags=re.DOTALL)
    lines = [line for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("vramgui profile ")]


def test_the_readme_profile_commands_run_as_printed(capsys, monkeypatch):
    # No network in tests: the models of the example come from the bundled catalog.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commands = readme_profile_commands()
    assert [c[1] for c in commands] == ["save", "save", "compare"]
    for argv in commands:
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, f"vramgui {shlex.join(argv)}: {err}"
    # The comparison lays out both saved setups and what differs between them.
    header = out.splitlines()[0]
    assert all(name in header for name in commands[-1][2:])
    assert "* tp" in out and "total per GPU" in out
