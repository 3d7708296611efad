"""llama.cpp speed: the estimate against published ``llama-bench`` rows, each row of
benchmarks/data/llama_bench.json (ppN prompt processing, tgN generation, ``@ dN`` depth).

For every row: the measured tokens/s, the estimate of ``vramgui.core.llamacpp_speed`` (its
basis: measured or extrapolated), the error, and the roofline the plan used before it (the
offload model at 80 % of the peak bandwidth and the datasheet tensor peak). Then the share of
rows within 20 % (generation) and 25 % (prompt), the median and the worst error. Rows the data
marks anomalous are listed and left out of the figures.

    .venv/bin/python -m benchmarks.llama_bench             # the summary and the misses
    .venv/bin/python -m benchmarks.llama_bench --markdown  # every row, for docs/performance.md
    .venv/bin/python -m benchmarks.llama_bench --fit       # the least squares behind the shares
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from vramgui.core import llamacpp_speed as lcs
from vramgui.core import offload
from vramgui.core.model import ModelSpec
from vramgui.core.speed import Hardware
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import CatalogGpu, find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "llama_bench.json"
# The bounds: generation within 20 %, prompt processing within 25 %.
BOUNDS = {"tg": 0.20, "pp": 0.25}


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["rows"])


@cache
def _spec(model: str) -> ModelSpec:
    entry = catalog.find(model)
    if entry is None:
        raise SystemExit(f"{model!r} is not in the catalog")
    return entry.spec()


@cache
def _gpu(name: str) -> CatalogGpu:
    gpu = find_gpu(name)
    if gpu is None:
        raise SystemExit(f"{name!r} is not in the GPU catalog")
    return gpu


def hardware(name: str) -> Hardware:
    """The speed model's view of a catalog GPU, at the 16-bit rate llama.cpp multiplies in."""
    return speed_hardware(_gpu(name), "fp16")


def parse_test(test: str) -> tuple[str, int]:
    """("pp", 512) from "pp512"."""
    return test[:2], int(test[2:])


def workload(row: dict[str, Any], seq: int = 1) -> Workload:
    return Workload(mode="inference", engine="llamacpp", quant=row["quant"], seq=seq,
                    ubatch_size=row["ubatch"], attention="flash" if row["fa"] else "eager")  # fmt: skip


@dataclass(frozen=True)
class Result:
    row: dict[str, Any]
    kind: str  # "pp" or "tg"
    estimate: float
    basis: str
    before: float | None

    @property
    def error(self) -> float:
        return self.estimate / self.row["measured_tps"] - 1

    @property
    def before_error(self) -> float | None:
        return None if self.before is None else self.before / self.row["measured_tps"] - 1


def _before(row: dict[str, Any], kind: str, tokens: int) -> float | None:
    """The offload roofline's figure (what ``vramgui plan`` gave): at the full context for
    generation, the prompt's prefill time for prompt processing."""
    gpu = _gpu(row["gpu"])
    tflops = gpu.bf16_tflops
    if tflops is None or row["gpus"] > 1:
        return None  # Apple (no bf16 rate); several GPUs: the plan's own setup, not compared
    depth = row["depth"] + tokens
    w = workload(row, seq=depth)
    placement = offload.plan("llamacpp", _spec(row["model"]), w, gpu.memory_bytes * 4)
    bw = offload.expected_bandwidths(
        gpu_peak_bytes_per_s=gpu.memory_bandwidth_bytes_per_s, pcie_bytes_per_s=25e9,
        gpu_flops=tflops * 1e12, disk_bytes_per_s=1e9,
    )  # fmt: skip
    if kind == "tg":
        return offload.decode_throughput(placement, bw).tokens_per_second
    return tokens / offload.prefill_seconds(placement, bw, tokens)


def evaluate(row: dict[str, Any], with_before: bool = True) -> Result:
    kind, tokens = parse_test(row["test"])
    spec, hw, w = _spec(row["model"]), hardware(row["gpu"]), workload(row)
    if kind == "tg":
        speed = lcs.decode(
            spec, w, hw, row["depth"], tokens, gpus=row["gpus"], prompt_path=row["prompt_path"]
        )
    else:
        speed = lcs.prefill(spec, w, hw, tokens, row["depth"], prompt_path=row["prompt_path"])
    before = _before(row, kind, tokens) if with_before else None
    return Result(row, kind, speed.tokens_per_second, speed.basis, before)


def evaluate_all(rows: Sequence[dict[str, Any]], with_before: bool = True) -> list[Result]:
    return [evaluate(r, with_before) for r in rows]


def summary(
    results: Sequence[Result], kind: str, before: bool = False, several: bool | None = None
) -> dict[str, Any]:
    """Share within the bound, median and worst absolute error of one kind's counted rows (of
    one GPU or of several only, where ``several`` says which)."""
    chosen = [
        (r.before_error if before else r.error)
        for r in results
        if r.kind == kind
        and "anomalous" not in r.row
        and (several is None or (r.row["gpus"] > 1) == several)
    ]
    errors = [abs(e) for e in chosen if e is not None]
    if not errors:
        return {"rows": 0}
    return {
        "rows": len(errors),
        "within": sum(e <= BOUNDS[kind] for e in errors) / len(errors),
        "median": statistics.median(errors),
        "worst": max(errors),
    }


def _label(row: dict[str, Any]) -> str:
    depth = f" @ d{row['depth']}" if row["depth"] else ""
    gpus = f" x {row['gpus']}" if row["gpus"] > 1 else ""
    flags = (" -fa 1" if row["fa"] else "") + (
        f" -ub {row['ubatch']}" if row["ubatch"] != 512 else ""
    )
    return f"{row['gpu']}{gpus} | {row['model']} {row['quant']} | {row['test']}{depth}{flags}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.0%}"


def print_summary(results: Sequence[Result]) -> None:
    for kind, several, name in (
        ("tg", None, "generation"),
        ("tg", False, "  on one GPU"),
        ("tg", True, "  split over several GPUs"),
        ("pp", None, "prompt processing (one GPU)"),
    ):
        now = summary(results, kind, several=several)
        was = summary(results, kind, before=True, several=several)
        if not now["rows"]:
            continue

        def then(key: str, was: dict[str, Any] = was) -> str:
            return f" (before {was[key]:.0%})" if was["rows"] else ""

        print(f"{name}: {now['rows']} rows, within {BOUNDS[kind]:.0%}: {now['within']:.0%}"
              f"{then('within')}, median error {now['median']:.0%}{then('median')}, "
              f"worst {now['worst']:.0%}{then('worst')}")  # fmt: skip
    misses = [
        r for r in results
        if abs(r.error) > BOUNDS[r.kind] and "anomalous" not in r.row
    ]  # fmt: skip
    print(f"\nmisses ({len(misses)}):")
    for r in misses:
        print(f"  {_label(r.row)}: measured {r.row['measured_tps']:,.1f}, estimate "
              f"{r.estimate:,.1f} ({_pct(r.error)})")  # fmt: skip
    anomalous = [r for r in results if "anomalous" in r.row]
    print(f"\nleft out as anomalous ({len(anomalous)}):")
    for r in anomalous:
        print(f"  {_label(r.row)}: {r.row['anomalous']}")


def markdown_cells(r: Result) -> tuple[str, str]:
    """One row of the table, split where the roofline used before begins: the first part is the
    current estimate (docs/performance.md must hold it), the second the figure before."""
    est = f"{r.estimate:,.1f}"
    before = "n/a" if r.before is None else f"{r.before:,.1f}"
    note = " (anomalous, not counted)" if "anomalous" in r.row else ""
    now = f"| {_label(r.row)} | {r.row['measured_tps']:,.1f} | {est} | {_pct(r.error)}{note} | {r.basis} |"
    return now, f" {before} | {_pct(r.before_error)} |"


def print_markdown(results: Sequence[Result]) -> None:
    print(
        "| GPU | model | test | measured tok/s | estimate | error | basis | before | error before |"
    )
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    for r in results:
        print("".join(markdown_cells(r)))
    sources = sorted({r.row["source"] for r in results})
    print("\nSources: " + ", ".join(sources))


def fit(rows: Sequence[dict[str, Any]]) -> None:
    """The least squares (relative errors) behind each kind's shares in core/llamacpp_speed,
    over the dense models' rows of the GPUs each kind names as measured, rows of current builds
    only where the kind names their GPU as current (others are kept out to check the shares on):

    - generation on weight bytes / peak, cache bytes / peak and blocks (a kind whose rows cover
      fewer settings than that takes GeForce's per-block time and fits the two shares);
    - prompt processing by builds that dequantize for cuBLAS on FLOPs / fp16-accumulate peak,
      score bytes / peak, dequantized bytes / peak and blocks x micro-batches;
    - prompt processing by builds with MMQ on the weights' FLOPs (/ fp16-accumulate peak) and
      the flash-attention FLOPs (/ flash attention's rate), once the kind's other terms are
      taken off;
    - generation by current builds, on a kind whose shares May 2024 builds set: cache bytes /
      peak (flash attention's cache read) and blocks (the current per-block time), once the
      weights' time at the kind's share is taken off.

    Then each of those GPUs held out in turn: its rows against the shares the kind's other GPUs
    give (how a GPU without rows fares). Needs numpy (not a dependency)."""
    import numpy as np

    groups: dict[tuple[str, str], list[tuple[str, list[float], float]]] = {}
    # Kinds whose generation shares May 2024 builds set: their current-build rows fit only the
    # two figures current builds change (per-block time, the cache read under flash attention).
    may_2024 = {
        lcs.kernel_shares(hardware(r["gpu"])).kind
        for r in rows
        if r["test"].startswith("tg") and r["prompt_path"] == lcs.DEQUANTIZE_CUBLAS
    }
    for row in rows:
        if "anomalous" in row or row["gpus"] > 1:
            continue  # the shares are one GPU's; several GPUs check the hand-over on them
        kind, tokens = parse_test(row["test"])
        hw, spec, w = hardware(row["gpu"]), _spec(row["model"]), workload(row)
        shares = lcs.kernel_shares(hw)
        if row["gpu"] not in shares.measured_gpus:
            continue  # a GPU kept out of the shares, to check them on (the RTX 3070)
        if row["prompt_path"] == lcs.MMQ and row["gpu"] not in shares.current_gpus:
            continue  # a current build's row on a kind set on May 2024 builds: a check
        if spec.facts.num_experts:
            continue  # mixture of experts: costed as dense products, checked, not fitted
        peak = hw.memory_bytes_per_s
        if kind == "tg":
            weights, kv, blocks = lcs.generation_terms(spec, w, row["depth"] + (tokens - 1) / 2)
            seconds = 1.0 / row["measured_tps"]
            features = [weights / peak, kv / peak, blocks]
            key = "tg"
            if row["prompt_path"] == lcs.MMQ and shares.kind in may_2024:
                seconds -= lcs.gpu_kernels(hw).weights_seconds(weights)
                features, key = [kv / peak, blocks], "tg current"
        else:
            weights, attention, scores, dequant, blocks = lcs.prompt_terms(
                spec, w, tokens, row["depth"]
            )
            acc = lcs.fp16_accumulate_flops(hw)
            seconds = tokens / row["measured_tps"]
            if not shares.dequant_copy:
                # Metal: quantized products dequantize inside the kernel, at their own share;
                # the score matrix at the kind's streaming share (the fit cannot tell it from
                # the per-block time).
                seconds -= lcs.gpu_kernels(hw).prompt_memory_seconds(scores, 0.0)
                q = lcs.quantized(w)
                features = [(attention + (0.0 if q else weights)) / acc,
                            (weights if q else 0.0) / acc, blocks]  # fmt: skip
                key = "pp in-kernel"
            elif row["prompt_path"] == lcs.MMQ:
                kernels = lcs.gpu_kernels(hw)
                flash = row["fa"]
                seconds -= kernels.prompt_memory_seconds(scores, 0.0)
                seconds -= kernels.ubatch_blocks_seconds(blocks)
                if not flash:
                    seconds -= kernels.matmul_seconds(attention)
                features = [weights / acc, attention / kernels.flash_flops if flash else 0.0]
                key = "pp MMQ"
            else:
                features = [(weights + attention) / acc, scores / peak, dequant / peak, blocks]
                key = "pp"
        groups.setdefault((shares.kind, key), []).append((row["gpu"], features, seconds))

    def solve(points: list[tuple[str, list[float], float]]) -> Any:
        matrix = np.array([p[1] for p in points])
        target = np.array([p[2] for p in points])
        return np.linalg.lstsq(matrix / target[:, None], np.ones(len(target)), rcond=None)[0]

    for (gpu_kind, key), group in sorted(groups.items()):
        points = group
        if key == "tg" and len({tuple(p[1]) for p in group}) < 3:
            # A kind with rows of current builds only (AMD): GeForce's current per-block time.
            fixed = lcs.GEFORCE.current_block_seconds or lcs.GEFORCE.block_seconds
            points = [(g, f[:2], t - f[2] * fixed) for g, f, t in group]
            print(f"{gpu_kind:32} {key}: GeForce's {fixed * 1e6:.0f} us per block taken")
        coef = solve(points)
        blocks = key in ("tg current", "pp in-kernel") or (
            key in ("tg", "pp") and len(coef) in (3, 4)
        )
        shares_of = [f"{1 / c:.3f}" if c > 0 else "n/a" for c in (coef[:-1] if blocks else coef)]
        tail = f"; {coef[-1] * 1e6:.0f} us per block" if blocks else ""
        print(f"{gpu_kind:32} {key}: shares {', '.join(shares_of)}{tail}; {len(points)} rows")
        for gpu in sorted({p[0] for p in points}):
            rest = [p for p in points if p[0] != gpu]
            if len({p[0] for p in rest}) < 1 or len(rest) < len(coef):
                continue
            held = solve(rest)
            errors = [p[2] / float(np.dot(p[1], held)) - 1 for p in points if p[0] == gpu]
            bound = BOUNDS[key[:2]]
            within = sum(abs(e) <= bound for e in errors)
            print(f"    {gpu} held out: {within} of {len(errors)} rows within "
                  f"{bound:.0%}, worst {max(errors, key=abs):+.0%}")  # fmt: skip


# The rows that set ``lcs.MOE_TOKEN_FLOPS``: the RTX 3090's Gemma 4 26B-A4B pp2048 of pull request
# 22298's master column at -ub 256 and more (where every expert's tokens fit one tile, so the
# time beyond the tiles is per token). Every other mixture's prompt row checks it.
MOE_TOKEN_TRAINING = (
    "RTX 3090",
    "gemma-4-26b-a4b",
    "https://github.com/ggml-org/llama.cpp/pull/22298",
)


def fit_moe_tokens(rows: Sequence[dict[str, Any]]) -> None:
    """Least squares (relative errors) of the FLOPs at MMQ's rate that cost what a mixture of
    experts' token takes in each block with experts beyond the estimate's terms, on the rows
    ``MOE_TOKEN_TRAINING`` names; then every mixture's prompt row on a card it applies to, with
    the figure fitted, and each row's own figure (what it would take to fit alone)."""
    points = []
    for row in rows:
        kind, tokens = parse_test(row["test"])
        spec, hw, w = _spec(row["model"]), hardware(row["gpu"]), workload(row)
        if kind != "pp" or not spec.facts.num_experts or "anomalous" in row:
            continue
        k = lcs.gpu_kernels(hw, row["prompt_path"])
        if not k.moe_token_flops:
            continue
        speed = lcs.prefill(spec, w, hw, tokens, row["depth"], prompt_path=row["prompt_path"])
        token_blocks = tokens * lcs.moe_blocks(spec, w)
        term = k.moe_tokens_seconds(token_blocks, quantized=lcs.quantized(w))
        per_flop = term / k.moe_token_flops
        measured = tokens / row["measured_tps"]
        training = (row["gpu"], row["model"], row["source"]) == MOE_TOKEN_TRAINING
        points.append(
            (row, training and row["ubatch"] >= 256, speed.seconds - term, per_flop, measured)
        )
    fit_on = [(rest, unit, t) for _, train, rest, unit, t in points if train]
    num = sum(unit / t * (1 - rest / t) for rest, unit, t in fit_on)
    den = sum((unit / t) ** 2 for _, unit, t in fit_on)
    flops = num / den
    print(f"mixture of experts, per token and block: {flops / 1e6:.0f} MFLOP at MMQ's rate; "
          f"{len(fit_on)} rows")  # fmt: skip
    for row, train, rest, unit, t in points:
        own = (t - rest) / unit
        error = t / (rest + unit * flops) - 1
        tag = "fitted" if train else "held out"
        print(f"    {_label(row)} ({tag}): {error:+.0%}, "
              f"its own {own / 1e6:.0f} MFLOP")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="every row, as a table")
    parser.add_argument("--fit", action="store_true", help="the least squares behind the shares")
    args = parser.parse_args(argv)
    rows = load_rows()
    if args.fit:
        fit(rows)
        fit_moe_tokens(rows)
        return 0
    results = evaluate_all(rows)
    if args.markdown:
        print_markdown(results)
    else:
        print_summary(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
