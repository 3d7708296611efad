"""The headless front end: ``vramgui [estimate|gpus|search|local|profile|plan|measure|explain] ...``.

Each subcommand lives in its own module exposing ``add_parser(subparsers)`` and ``run(args) -> int``.
Only the module of the subcommand that runs is imported, and each module imports what its work
needs when it runs, not at import: the command line starts in about twice a bare interpreter's
time (docs/performance.md). User errors exit 2 with one line on stderr; no subcommand opens the
window.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from vramgui import __version__
from vramgui.core.errors import VramguiError

# Each subcommand's one line in `vramgui --help`, there without importing its module.
SUBCOMMANDS = {
    "estimate": "GPU memory a model needs for a workload",
    "gpus": "local NVIDIA GPUs (and why none, when none)",
    "search": "search the Hub (the bundled catalog when offline)",
    "local": "list the models downloaded to this machine (Hugging Face cache, Ollama, LM Studio)",
    "profile": "save, list, show, compare, export and import estimate profiles",
    "plan": "per-layer offload plan: GPU layers, host RAM, disk, tokens/s, launch settings",
    "measure": "run the setup and compare what it used with the estimate",
    "explain": "read an engine's log (llama.cpp, Ollama, vLLM, SGLang, a PyTorch OOM) and lay it beside the estimate",
}


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


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser for the command line ``argv``.

    The subcommand ``argv`` names gets its module's options; the others get their name and help
    line only, enough for ``vramgui --help`` and for a mistyped name's error, without importing
    their modules.
    """
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    parser = _Parser(prog="vramgui", description="GPU memory estimates for LLMs.")
    parser.add_argument("--version", action="version", version=f"vramgui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, summary in SUBCOMMANDS.items():
        if name == chosen:
            importlib.import_module(f"vramgui.cli.{name}").add_parser(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vramgui`` script; with no arguments it opens the window."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        from vramgui.ui.app import main as gui_main

        return gui_main()
    from vramgui.cli.text import SafeStream

    streams = sys.stdout, sys.stderr
    # Every line goes through one escaping, encoding-proof writer (text read from files).
    sys.stdout, sys.stderr = (SafeStream(s) if s is not None else s for s in streams)
    try:
        return _run(args_list)
    finally:
        sys.stdout, sys.stderr = streams


def _run(args_list: list[str]) -> int:
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args))
    except VramguiError as exc:
        from vramgui.cli.text import printable  # a message may quote a name read from a file

        print(f"vramgui: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`vramgui estimate ... | head`): not an error worth a traceback.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
