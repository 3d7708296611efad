"""The command line imports only the subcommand that runs, and that one only what its options need.

How fast it starts is measured by ``benchmarks/speed.py --only cli``; here, what it imports.
"""

import json
import subprocess
import sys

import pytest

from vramgui.cli import SUBCOMMANDS, build_parser

# Modules a subcommand imports when it runs, never to build its options.
HEAVY = (
    "vramgui.core.estimate",
    "vramgui.core.report",
    "vramgui.sources",
    "vramgui.hardware",
    "vramgui.profiles.reopen",
    "vramgui.measure.compare",
    "vramgui.ui",
    "huggingface_hub",
    "torch",
    "PySide6",
    "importlib.metadata",
)
# Subcommands whose options other subcommands share.
SHARED = {"vramgui.cli.estimate", "vramgui.cli.text"}


def _imported_by(*argv: str) -> set[str]:
    code = (
        "import json, sys\n"
        "from vramgui.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)}


def test_the_top_level_help_imports_no_subcommand():
    modules = _imported_by("--help")
    # vramgui.cli.text writes every run's output (escaped, in any encoding): no subcommand.
    assert not {m for m in modules if m.startswith("vramgui.cli.")} - {"vramgui.cli.text"}
    assert not _heavy(modules)


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_a_subcommand_imports_itself_and_what_its_options_need(name):
    modules = _imported_by(name, "--help")
    assert f"vramgui.cli.{name}" in modules
    others = {m for m in modules if m.startswith("vramgui.cli.")} - SHARED - {f"vramgui.cli.{name}"}
    assert not others
    assert not _heavy(modules)


def test_help_lists_every_subcommand_with_its_line(capsys):
    with pytest.raises(SystemExit):
        build_parser(["--help"]).parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, summary in SUBCOMMANDS.items():
        assert f"{name} {summary}" in text


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_a_subcommand_parser_keeps_its_help_line(name):
    parser = build_parser([name])
    sub = next(a for a in parser._actions if a.dest == "command")
    line = next(a.help for a in sub._choices_actions if a.dest == name)
    assert line == SUBCOMMANDS[name]
    assert sub.choices[name]._actions[1:]  # its own options, not an empty stand-in


def test_a_mistyped_subcommand_is_named_with_the_choices(capsys):
    from vramgui.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["estimat", "x"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'estimat'" in err and "estimate" in err
