"""``vramgui local``: the models other tools downloaded to this machine.

The Hugging Face cache, Ollama and LM Studio, each read where its tool keeps it and never
written to. Each line's SOURCE is what ``vramgui estimate SOURCE`` opens it by.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.text import printable, table
from vramgui.core.units import format_bytes

if TYPE_CHECKING:
    from vramgui.sources.results import LocalModel

SCHEMA = "vramgui.local/1"


def add_parser(subparsers: Any) -> None:
    """Register ``vramgui local`` on the top-level subparsers."""
    parser = subparsers.add_parser(
        "local",
        help=SUBCOMMANDS["local"],
        description="List the models in the Hugging Face cache (HF_HUB_CACHE or HF_HOME), "
        "Ollama's store (OLLAMA_MODELS) and LM Studio's models folder, with their sizes. Each "
        "SOURCE can be passed to `vramgui estimate`.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print what the stores hold; an absent store is not an error."""
    from vramgui.sources import on_disk

    found = on_disk.scan()
    if args.json:
        document = {
            "schema": SCHEMA,
            "models": [model.to_dict() for model in found.models],
            "problems": list(found.problems),
        }
        print(json.dumps(document, indent=2))
        return 0
    for problem in found.problems:
        print(f"note: {printable(problem)}", file=sys.stderr)
    if not found.models:
        print("No models found in the Hugging Face cache, Ollama or LM Studio.")
        return 0
    print(_table(found.models))
    return 0


def _table(models: tuple[LocalModel, ...]) -> str:
    header = ("source", "where", "format", "size")
    rows = [(m.source, m.where, m.format, format_bytes(m.size_bytes, "GB")) for m in models]
    return table(header, rows)
