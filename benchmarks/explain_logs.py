"""`vramgui explain` over the published logs of tests/data/logs: each figure an engine printed
beside vramgui's estimate of it.

Each log (tests/data/logs/sources.json: URL, engine, and for a log that does not say them, the
model, GPU and quantization the report names, as a user would pass ``--model``, ``--gpu`` and
``--quant``) is read and explained as the command does. The table lists every component with an
estimate; the summary counts the logs read, the engines named, the logs explained (at least one
component beside its estimate), and the median and worst difference per kind of component. A
component beyond its stated accuracy is a miss; sources.json's ``misses`` gives each one's cause.

    .venv/bin/python -m benchmarks.explain_logs              # the table and the summary
    .venv/bin/python -m benchmarks.explain_logs --markdown   # rewrite the table in docs/accuracy.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.percent import signed
from vramgui.answers.explain import explain_text
from vramgui.core.logs import ENGINE_NAMES, LogUnreadable
from vramgui.core.units import MiB

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "logs"
DOC = ROOT / "docs" / "accuracy.md"
BEGIN = "<!-- explain-logs:begin -->"
END = "<!-- explain-logs:end -->"
# The kinds the summary holds to an accuracy: KV cache (the pool's bytes per token too), compute
# buffers, vLLM's KV pool.
KINDS = ("kv_cache", "compute_buffer", "kv_pool", "weights")


def sources() -> dict[str, dict[str, Any]]:
    return json.loads((LOGS / "sources.json").read_text(encoding="utf-8"))


def explain_all() -> list[dict[str, Any]]:
    """One entry per log: its engine, whether it was read and explained, its compared rows."""
    out = []
    for name, src in sources().items():
        entry: dict[str, Any] = {"log": name, "url": src["url"], "rows": [], "read": True}
        try:
            e = explain_text(
                (LOGS / name).read_text(encoding="utf-8"),
                model_name=src.get("model", ""),
                gpu=src.get("gpu", ""),
                quant=src.get("quant", ""),
            )
        except LogUnreadable as exc:
            entry.update(read=False, engine=None, reason=str(exc))
            out.append(entry)
            continue
        entry["engine"] = e.setup.engine
        entry["model"] = e.model_name
        misses = src.get("misses", {})
        for r in e.components:
            if r.estimated_bytes is None:
                continue
            entry["rows"].append(
                {
                    "name": r.name,
                    "device": r.device,
                    "logged_bytes": r.logged_bytes,
                    "estimated_bytes": r.estimated_bytes,
                    "difference": r.difference,
                    "flagged": r.flagged,
                    "held": r.accuracy is not None,
                    "note": r.note,
                    "cause": misses.get(
                        f"{r.name}@{r.device}", misses.get(r.name, misses.get("*", ""))
                    ),
                }
            )
        out.append(entry)
    return out


def summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    read = [e for e in entries if e["read"]]
    out: dict[str, Any] = {
        "logs": len(entries),
        "read": len(read),
        "engine_named": sum(e.get("engine") is not None for e in entries),
        "explained": sum(bool(e["rows"]) for e in entries),
    }
    for kind in KINDS:
        diffs = [
            abs(r["difference"])
            for e in entries
            for r in e["rows"]
            if r["name"] == kind and r["difference"] is not None and r["held"]
        ]
        if diffs:
            out[kind] = {
                "rows": len(diffs),
                "median": statistics.median(diffs),
                "worst": max(diffs),
                "within_2pct": sum(d <= 0.02 for d in diffs),
                "within_10pct": sum(d <= 0.10 for d in diffs),
            }
    return out


def print_table(entries: list[dict[str, Any]]) -> None:
    print(
        f"{'log':58} {'component':15} {'device':7} {'logged MiB':>11} {'estimate MiB':>13} {'diff':>8}"
    )
    for e in entries:
        if not e["read"]:
            print(f"{e['log']:58} not read: {e['reason']}")
            continue
        if not e["rows"]:
            print(f"{e['log']:58} {ENGINE_NAMES[e['engine']]}: no component beside an estimate")
        for r in e["rows"]:
            mark = " !" if r["flagged"] else ""
            print(
                f"{e['log']:58} {r['name']:15} {r['device']:7} {r['logged_bytes'] / MiB:11.1f} "
                f"{r['estimated_bytes'] / MiB:13.1f} {r['difference']:+8.1%}{mark}"
            )


def write_markdown(entries: list[dict[str, Any]], stats: dict[str, Any]) -> None:
    lines = [
        BEGIN,
        "| log | engine | component | device | logged MiB | estimate MiB | difference | miss: cause |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for e in entries:
        label = f"[{e['log'].removesuffix('.log')}]({e['url']})"
        if not e["read"]:
            lines.append(f"| {label} | - | not read | | | | | {e['reason']} |")
            continue
        engine = ENGINE_NAMES[e["engine"]]
        if not e["rows"]:
            lines.append(f"| {label} | {engine} | no estimate | | | | | |")
        for r in e["rows"]:
            cause = r["cause"] if r["flagged"] else ""
            lines.append(
                f"| {label} | {engine} | {r['name']} | {r['device']} | "
                f"{r['logged_bytes'] / MiB:,.1f} | {r['estimated_bytes'] / MiB:,.1f} | "
                f"{signed(r['difference'], 1)} | {cause} |"
            )
    lines.append("")
    lines.append(
        f"{stats['logs']} logs: {stats['read']} read, the engine named on {stats['engine_named']}, "
        f"{stats['explained']} explained with at least one component beside its estimate."
    )
    for kind in KINDS:
        if kind in stats:
            k = stats[kind]
            lines.append(
                f"- {kind}: {k['rows']} figures, median |difference| {k['median']:.1%}, worst "
                f"{k['worst']:.1%}; {k['within_2pct']} within 2 %, {k['within_10pct']} within 10 %"
            )
    lines.append(END)
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + "\n".join(lines) + text[end:], encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="rewrite docs/accuracy.md's table")
    parser.add_argument("--json", action="store_true", help="print the entries as JSON")
    args = parser.parse_args(argv)
    entries = explain_all()
    stats = summary(entries)
    if args.json:
        json.dump({"entries": entries, "summary": stats}, sys.stdout, indent=1)
        return 0
    print_table(entries)
    print(json.dumps(stats, indent=1))
    if args.markdown:
        write_markdown(entries, stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
