"""``vramgui search QUERY``: Hub models by downloads, or the bundled catalog when offline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.text import table

if TYPE_CHECKING:
    from vramgui.sources.hub import HubClient
    from vramgui.sources.results import HubModel

SCHEMA = "vramgui.search/1"


def client_factory() -> HubClient:
    """The client this command uses; tests replace it with one pointed at a fake Hub."""
    from vramgui.sources.hub import HubClient

    return HubClient()


def add_parser(subparsers: Any) -> None:
    """Register ``vramgui search`` on the top-level subparsers."""
    parser = subparsers.add_parser(
        "search",
        help=SUBCOMMANDS["search"],
        description="Search Hugging Face Hub models, most downloaded first. Without a network, "
        "recent results saved earlier or the bundled catalog answer, with a notice.",
    )
    parser.add_argument("query", help="words to look for, e.g. 'qwen 7b'")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--limit", type=_positive, default=20, help="most results (default 20)")
    parser.set_defaults(run=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def run(args: argparse.Namespace) -> int:
    """Print the results; an unreachable Hub is a notice, not an error."""
    from vramgui.sources.resolve import search_models

    found = search_models(args.query, hub=client_factory(), limit=args.limit)
    if args.json:
        document = {
            "schema": SCHEMA,
            "query": args.query,
            "notice": found.offline_notice,
            "results": [model.to_dict() for model in found.results],
        }
        print(json.dumps(document, indent=2))
        return 0
    if found.offline_notice:
        print(f"note: {found.offline_notice}", file=sys.stderr)
    if not found.results:
        print(f"No models match {args.query!r}.")
        return 0
    print(_table(found.results))
    return 0


def _count(n: int | None) -> str:
    if n is None:
        return "?"
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.1f}{suffix}"
    return str(n)


def _table(models: tuple[HubModel, ...]) -> str:
    header = ("model", "params", "downloads", "likes", "gated", "library", "task", "from")
    rows = [
        (
            m.id,
            _count(m.parameters),
            "-" if m.source == "catalog" else f"{m.downloads:,}",
            "-" if m.source == "catalog" else f"{m.likes:,}",
            "yes" if m.gated else "",
            m.library,
            m.pipeline_tag,
            m.source,
        )
        for m in models
    ]
    return table(header, rows)
