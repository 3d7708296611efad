"""SGLang start-up logs against the estimate: the KV pool in tokens, the memory behind it.

Each published log (benchmarks/data/sglang_logs.json: URL, command line, GPU, SGLang version)
printed what SGLang's start-up decided: the free memory before and after loading the weights,
the pool in tokens ("KV Cache is allocated. #tokens") and its size. The estimate rebuilds the
same start-up from the model's inventory with the log's settings and the version's default
``--mem-fraction-static`` (core/sglang_startup.py), and the table puts the two side by side.
The *arithmetic* column takes the free memory the log printed and applies SGLang's formula
with the estimate's cell size: it checks the pool rule and the KV layout apart from the memory
model (the weights, the memory used before loading). No constant was fitted to these logs;
"tune" logs were read while the model was written, "held-out" ones only after.

    .venv/bin/python -m benchmarks.sglang_logs            # the table
    .venv/bin/python -m benchmarks.sglang_logs --json     # every row as JSON
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.percent import signed
from benchmarks.vllm_logs import log_spec, summary
from vramgui.core import sglang_startup
from vramgui.core.inference import engine_kv_workload
from vramgui.core.rank_weights import rank_tensor_bytes
from vramgui.core.units import GiB, MiB
from vramgui.core.workload import Workload

DATA = Path(__file__).resolve().parent / "data" / "sglang_logs.json"


def load() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def estimate_log(log: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """The estimate of one logged start-up, beside what the log printed."""
    spec = log_spec(log.get("estimated_as", log["model"]), doc.get("configs", {}))
    settings = {"engine": "sglang", "sglang-version": log["rules"], **log["settings"]}
    logged = log["logged"]
    if "mem_fraction_static" in logged:
        settings["mem-fraction-static"] = logged["mem_fraction_static"]
    # Under --kv-cache-dtype auto SGLang caches in the checkpoint's KV scheme, as the estimate does.
    workload = engine_kv_workload(spec, Workload.from_dict(settings))
    capacity = doc["gpus"][log["gpu"]]["memory_mib"] * MiB
    engine = sglang_startup.SglangEngine(spec, workload, rank_tensor_bytes(spec, workload))
    plan = engine.plan()
    up = plan.startup(workload, capacity, workload.seq)
    cell = max(s.cell_bytes for s in plan.stages)
    row: dict[str, Any] = {
        "id": log["id"],
        "kind": log["kind"],
        "split": log["split"],
        "sglang": log["sglang"],
        "rules": log["rules"],
        "gpu": log["gpu"],
        "gpus": log["gpus"],
        "fraction_logged": logged.get("mem_fraction_static"),
        "fraction_estimate": up.mem_fraction_static,
        "free_before_logged_gib": _free_before(logged),
        "free_before_estimate_gib": up.free_bytes / GiB,
        "weights_logged_gib": _weights(logged),
        "weights_estimate_gib": plan.weights_bytes / GiB,
        "k_size_logged_gib": logged.get("k_size_gib"),
        "k_size_estimate_gib": up.available_bytes / 2 / GiB,
        "tokens_logged": logged["kv_tokens"],
        "tokens_estimate": up.pool_tokens,
        "cell_bytes": cell,
    }
    row["error"] = up.pool_tokens / logged["kv_tokens"] - 1
    before, after = row["free_before_logged_gib"], logged.get("free_after_gib")
    if before is not None and after is not None:
        # SGLang's own formula on the figures the log printed (GB there is GiB), with the
        # fraction the log ran with (the version's default where it printed none).
        rest = after - before * (1 - up.mem_fraction_static)
        row["tokens_from_logged_memory"] = int(rest * GiB // cell)
        row["arithmetic_error"] = row["tokens_from_logged_memory"] / logged["kv_tokens"] - 1
    return row


def _free_before(logged: dict[str, Any]) -> float | None:
    """ "Load weight begin. avail mem=", or the free memory after loading plus the weights."""
    if "free_before_gib" in logged:
        return float(logged["free_before_gib"])
    if "free_after_gib" in logged and "weights_gib" in logged:
        return round(logged["free_after_gib"] + logged["weights_gib"], 2)
    return None


def _weights(logged: dict[str, Any]) -> float | None:
    """ "Load weight end. ... mem usage=", or the free memory the load took."""
    if "weights_gib" in logged:
        return float(logged["weights_gib"])
    if "free_before_gib" in logged and "free_after_gib" in logged:
        return round(logged["free_before_gib"] - logged["free_after_gib"], 2)
    return None


def rows() -> list[dict[str, Any]]:
    doc = load()
    return [estimate_log(log, doc) for log in doc["logs"]]


def _pair(logged: float | None, estimate: float, sep: str, digits: int = 2) -> str:
    """A logged / estimated pair; "-" where the log did not print the figure."""
    return f"{'-' if logged is None else f'{logged:.{digits}f}'}{sep}{estimate:.{digits}f}"


def format_table(table: list[dict[str, Any]]) -> str:
    head = (
        f"{'log':<34}{'split':<9}{'rules':<7}{'fraction':>13}{'free GiB':>14}{'weights GiB':>14}"
        f"{'pool tokens':>20}{'error':>8}{'arith.':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in table:
        fraction = _pair(r["fraction_logged"], r["fraction_estimate"], "/", 3)
        free = _pair(r["free_before_logged_gib"], r["free_before_estimate_gib"], "/")
        weights = _pair(r["weights_logged_gib"], r["weights_estimate_gib"], "/")
        tokens = f"{r['tokens_logged']:,}/{r['tokens_estimate']:,}"
        arithmetic = signed(r["arithmetic_error"], 1) if "arithmetic_error" in r else ""
        lines.append(
            f"{r['id']:<34}{r['split']:<9}{r['rules']:<7}{fraction:>13}{free:>14}{weights:>14}"
            f"{tokens:>20}{r['error']:>+8.1%}{arithmetic:>8}"
        )
    for key, what in (("error", "start-up"), ("arithmetic_error", "arithmetic (logged memory)")):
        for split in ("tune", "held-out", None):
            s = summary(table, split, key)
            if s:
                lines.append(
                    f"{what}, {split or 'all'}: {s['logs']} logs, median |error| "
                    f"{s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%}, "
                    f"{s['within_10pct']} within 10 %"
                )
    return "\n".join(lines)


def markdown_section(table: list[dict[str, Any]] | None = None) -> list[str]:
    """docs/accuracy.md's SGLang section: every log against the estimate, the summaries."""
    table = rows() if table is None else table
    doc = load()
    logs = {log["id"]: log for log in doc["logs"]}
    lines = [
        "### SGLang's start-up against its own logs (benchmarks/sglang_logs.py)",
        "",
        "SGLang profiles nothing (core/sglang_startup.py, read in the 0.4.4.post1, 0.4.9.post2",
        "and 0.5.6 wheels): it measures the free memory before loading the weights (`Load weight",
        "begin. avail mem`), loads them, and keeps `--mem-fraction-static` of that free memory",
        "for weights and KV pool: pool = free after loading - free before x (1 - fraction)",
        "(`ModelRunner.profile_max_num_token`), in tokens of one K and V over the rank's layers",
        "(MLA's compressed latent; sliding-window layers at full length; Mamba and",
        "linear-attention states first take 0.9 / 1.9 of it). A pool of no tokens refuses to",
        "start (`Not enough memory. Please try to increase --mem-fraction-static`); one shorter",
        "than `--context-length` starts and rejects the longer requests. The default fraction",
        "is what changed between versions: by tensor-parallel size up to 0.4.8 (0.88 on one",
        "GPU, 0.85 on four), from the GPU's memory in 0.4.9 and 0.4.10, and from the chunked",
        "prefill and CUDA graph sizes it picks for the GPU in the 0.5 line (0.847 on an RTX",
        "4090, 0.835 on an H100); `--sglang-version` picks the rules, 0.5.6 by default. The",
        "memory used before loading is vLLM's CUDA context figure (0.45 GiB, plus vLLM's 0.55",
        "GiB of communication buffers under tensor parallelism); the weights are the",
        "inventory's, with the rotary table SGLang loads beside them.",
        "",
        "The pool in tokens is the figure compared. *fraction*, *free* (before loading) and",
        "*weights* show where a difference comes from; the *arithmetic* column applies SGLang's",
        "formula to the free memory the log printed, with the estimate's cell size, and so",
        "checks the pool rule and KV layout apart from the memory model. No constant was fitted",
        "to these logs.",
        "",
        "| log | model | GPU | SGLang | fraction log / est. | free GiB log / est. "
        "| weights GiB log / est. | pool tokens log / est. | error | arithmetic | split |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        log = logs[r["id"]]
        gpu = f"{r['gpus']} x {r['gpu']}" if r["gpus"] > 1 else r["gpu"]
        arithmetic = signed(r["arithmetic_error"], 1) if "arithmetic_error" in r else ""
        lines.append(
            f"| [{r['id']}]({log['url']}) | {log['model']} ({r['kind']}) | {gpu} | "
            f"{r['sglang']} | {_pair(r['fraction_logged'], r['fraction_estimate'], ' / ', 3)} | "
            f"{_pair(r['free_before_logged_gib'], r['free_before_estimate_gib'], ' / ')} | "
            f"{_pair(r['weights_logged_gib'], r['weights_estimate_gib'], ' / ')} | "
            f"{r['tokens_logged']:,} / {r['tokens_estimate']:,} | {signed(r['error'], 1)} | "
            f"{arithmetic} | {r['split']} |"
        )
    lines.append("")
    for split, name in (("tune", "Read while writing"), ("held-out", "Held out"), (None, "All")):
        s = summary(table, split)
        if s:
            lines.append(
                f"- {name}: {s['logs']} logs, median |error| {s['median_abs_error']:.1%}, "
                f"largest {s['max_abs_error']:.1%}, {s['within_10pct']} within 10 %."
            )
    s = summary(table, None, "arithmetic_error")
    if s:
        lines.append(
            f"- SGLang's formula on the logged memory: {s['logs']} logs, median |error| "
            f"{s['median_abs_error']:.2%}, largest {s['max_abs_error']:.2%}."
        )
    gaps = [(log["id"], log["gap"]) for log in doc["logs"] if log.get("gap")]
    if gaps:
        lines += ["", "Where the estimate misses, from the logs' own figures:", ""]
        lines += [f"- {name}: {gap}." for name, gap in gaps]
    stand_ins = [log for log in doc["logs"] if "estimated_as" in log]
    if stand_ins:
        lines += ["", "Models estimated from the configuration of an identical architecture:", ""]
        lines += [
            f"- {log['estimated_as']} for {doc['configs'][log['estimated_as']]['for']}."
            for log in stand_ins
        ]
    lines += ["", "Commands of the logs:", ""]
    lines += [
        f"- {log['id']}: `{log['what']}` ({log['gpus']} x {log['gpu']}, SGLang {log['sglang']})"
        for log in doc["logs"]
    ]
    unnamed = [
        (name, gpu["source"]) for name, gpu in doc["gpus"].items() if "unnamed" in gpu["source"]
    ]
    lines += [f"- {name}: {source}." for name, source in unnamed]
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print every row as JSON")
    args = parser.parse_args(argv)
    table = rows()
    print(json.dumps(table, indent=2) if args.json else format_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
