"""Training throughput: the speed estimate against tokens per second measured by others.

benchmarks/data/training_throughput.json holds the published measurements (llm-foundry's MPT
tables, torchtitan, NeMo AutoModel, fms-acceleration's A100 runs, Answer.AI's FSDP+QLoRA runs on
RTX 4090s, 3090s, A100s and H100s, Qwen's LoRA profile), each with its conditions and source, and the figures llm-analysis and gpu_poor give for the
same setups where they give one (how each was computed: the data file's "other_tools").
The "tuning" cases set the default utilizations of vramgui/core/speed.py; the "held-out" cases
were not used for that and are reported apart. Each line: the measured tokens per second per
GPU, the estimate, the error, the estimate's model FLOPs utilization and what bounds it.

    .venv/bin/python -m benchmarks.throughput            # the table
    .venv/bin/python -m benchmarks.throughput --markdown # the table for docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from vramgui.core.families import spec_from_config
from vramgui.core.model import ModelSpec
from vramgui.core.speed import TrainingSpeed, training_speed
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "training_throughput.json"
# The bound the issue sets: every case within this relative error.
TOLERANCE = 0.30


def load_cases(path: Path = DATA) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["cases"])


def case_spec(case: dict[str, Any]) -> ModelSpec:
    """The model of a case: its inline config, else the catalog entry it names."""
    if "config" in case:
        return spec_from_config(case["config"], case["model"])
    entry = catalog.find(case["model"])
    if entry is None:
        raise SystemExit(f"{case['id']}: {case['model']!r} is not in the catalog")
    return entry.spec()


def case_speed(case: dict[str, Any]) -> TrainingSpeed:
    w = Workload.from_dict(case["settings"])
    gpu = find_gpu(case["gpu"])
    return training_speed(case_spec(case), w, speed_hardware(gpu, w.dtype))


def rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for case in cases:
        speed = case_speed(case)
        measured = float(case["measured"]["tokens_per_second_per_gpu"])
        estimate = speed.tokens_per_second_per_gpu
        out.append(
            {
                "id": case["id"],
                "set": case["set"],
                "method": case["method"],
                "gpu": f"{case['gpu_count']} x {case['gpu']}",
                "measured": measured,
                "estimate": estimate,
                "error": estimate / measured - 1.0,
                "mfu": speed.mfu,
                "bound": speed.bound,
                "llm_analysis": _other(case, "llm-analysis"),
                "gpu_poor": _other(case, "gpu_poor"),
            }
        )
    return out


def _other(case: dict[str, Any], tool: str) -> float | None:
    """Another tool's figure for the case (recorded in the data file), or None."""
    return case.get("other_tools", {}).get(tool, {}).get("tokens_per_second_per_gpu")


def _cell(value: float | None, measured: float) -> str:
    return "-" if value is None else f"{value:,.0f} ({value / measured - 1:+.0%})"


def _summary(chosen: list[dict[str, Any]]) -> str:
    errors = [abs(r["error"]) for r in chosen]
    inside = sum(e <= TOLERANCE for e in errors)
    return (
        f"{inside} of {len(chosen)} within {TOLERANCE:.0%}; median |error| "
        f"{statistics.median(errors):.1%}, largest {max(errors):.1%}"
    )


def table(all_rows: list[dict[str, Any]], markdown: bool) -> str:
    lines = []
    for split in ("tuning", "held-out"):
        chosen = [r for r in all_rows if r["set"] == split]
        if not chosen:
            continue
        if markdown:
            lines += [
                f"**{split}** ({_summary(chosen)})",
                "",
                "| Case | Method | GPUs | Measured tok/s/GPU | Estimate | Error | MFU | Bound "
                "| llm-analysis | gpu_poor |",
                "|---|---|---|---:|---:|---:|---:|---|---:|---:|",
            ]
            for r in chosen:
                lines.append(
                    f"| {r['id']} | {r['method']} | {r['gpu']} | {r['measured']:,.0f} | "
                    f"{r['estimate']:,.0f} | {r['error']:+.1%} | {r['mfu']:.0%} | {r['bound']} | "
                    f"{_cell(r['llm_analysis'], r['measured'])} | "
                    f"{_cell(r['gpu_poor'], r['measured'])} |"
                )
            lines.append("")
        else:
            lines.append(f"{split}: {_summary(chosen)}")
            lines.append(
                f"  {'case':<44}{'method':<7}{'GPUs':<22}{'measured':>10}{'estimate':>10}"
                f"{'error':>9}{'MFU':>6}  bound"
            )
            for r in chosen:
                lines.append(
                    f"  {r['id']:<44}{r['method']:<7}{r['gpu']:<22}{r['measured']:>10,.0f}"
                    f"{r['estimate']:>10,.0f}{r['error']:>+9.1%}{r['mfu']:>6.0%}  {r['bound']}"
                )
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    all_rows = rows(load_cases())
    print(table(all_rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
