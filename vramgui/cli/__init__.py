"""The headless front end: ``vramgui [estimate|gpus|search|local|profile|plan|measure] ...``.

Each subcommand lives in its own module exposing ``add_parser(subparsers)`` and ``run(args) -> int``.
User errors exit 2 with one line on stderr; no subcommand opens the window.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from vramgui import __version__
from vramgui.core.errors import VramguiError

SUBCOMMANDS = ("estimate", "gpus", "search", "local", "profile", "plan", "measure")


class _DefaultsShown(argparse.HelpFormatter):
    """Help that ends each option with its default, where it has a value worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        empty = default is None or default is False or default in ([], argparse.SUPPRESS)
        shown = action.option_strings and not empty
        if shown and "default:" not in text and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"vramgui: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vramgui", description="GPU memory estimates for LLMs.")
    parser.add_argument("--version", action="version", version=f"vramgui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"vramgui.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"vramgui.cli.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vramgui`` script; with no arguments it opens the window."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        from vramgui.ui.app import main as gui_main

        return gui_main()
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args))
    except VramguiError as exc:
        print(f"vramgui: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`vramgui estimate ... | head`): not an error worth a traceback.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
