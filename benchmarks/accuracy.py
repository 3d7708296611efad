"""Accuracy benchmark: the estimator against measured peak memory, case by case.

Measured figures come from the harness (benchmarks/harness, run under FakeTensorMode with real
transformers models) and from public GPU measurements (../shared/validation/published.json).
Prints a table per set and the error statistics; ``--markdown`` writes docs/accuracy.md.

    .venv/bin/python -m benchmarks.accuracy [--markdown]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks.harness.cases import load_config
from vramgui.core import dtypes, rules
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.units import GiB
from vramgui.core.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"

_SETTING_KEYS = {
    "mode",
    "batch",
    "seq",
    "dtype",
    "quant",
    "engine",
    "kv-dtype",
    "attention",
    "method",
    "precision",
    "optimizer",
    "grad-checkpointing",
    "lora-rank",
    "lora-targets",
    "grad-accum",
    "gpus",
    "zero",
    "fsdp",
    "tp",
    "pp",
}


def workload_of(settings: dict) -> Workload:
    data = {k: v for k, v in settings.items() if k in _SETTING_KEYS and v not in ("", None)}
    return Workload.from_dict(data)


def inference_rows() -> list[dict]:
    path = DATA / "measured_inference.json"
    records = json.loads(path.read_text())["cases"]
    rows = []
    for rec in records:
        spec = spec_from_config(load_config(rec["config"]), rec["model"])
        w = workload_of(rec["settings"])
        est = estimate(spec, w)
        bits = dtypes.bits_per_weight(spec, w.dtype, w.quant)
        rule = rules.serving_rule(spec.parameters, bits)
        measured = rec["peak_bytes"]
        rows.append(
            {
                "id": rec["id"],
                "measured": measured,
                "estimate": est.tensor_bytes,
                "error": est.tensor_bytes / measured - 1,
                "rule": rule,
                "rule_error": rule / measured - 1,
                "measured_other": rec["breakdown_at_peak"]["other"],
                "estimate_activations": est.components["activations"],
                "measured_kv": rec["breakdown_at_peak"]["kv_cache"],
                "estimate_kv": est.components["kv_cache"],
            }
        )
    return rows


def _fmt(n: float) -> str:
    return f"{n / GiB:,.3f}"


def table(rows: list[dict], title: str) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| case | measured GiB | estimate GiB | error | P x bytes x 1.2 GiB | its error |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['id']} | {_fmt(r['measured'])} | {_fmt(r['estimate'])} | {r['error']:+.2%} "
            f"| {_fmt(r['rule'])} | {r['rule_error']:+.1%} |"
        )
    errors = [abs(r["error"]) for r in rows]
    rule_errors = [abs(r["rule_error"]) for r in rows]
    lines += [
        "",
        f"{len(rows)} cases: median |error| {statistics.median(errors):.2%}, worst {max(errors):.2%};"
        f" rule of thumb median {statistics.median(rule_errors):.1%}, worst {max(rule_errors):.1%}.",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="write docs/accuracy.md")
    parser.add_argument("--detail", action="store_true", help="print component figures too")
    args = parser.parse_args(argv)
    rows = inference_rows()
    lines = table(rows, "Inference (transformers, prefill + one decode step)")
    print("\n".join(lines))
    if args.detail:
        for r in rows:
            print(
                f"{r['id']:<40} act meas {_fmt(r['measured_other'] - r['measured_kv'] if False else r['measured_other'])}"
                f" est {_fmt(r['estimate_activations'])}  kv meas {_fmt(r['measured_kv'])} est {_fmt(r['estimate_kv'])}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
