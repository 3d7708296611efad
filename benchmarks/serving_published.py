"""vLLM and SGLang serving: the estimate beside published serving benchmarks, each row of
benchmarks/data/serving_published.json (a client's measurement at a fixed concurrency, with the
requests' input and output lengths, the GPU and the engine's version).

What a row measured is what the estimate is held to. Most rows give the mean or median time
per output token after the first (TPOT, or the inter-token latency): the benchmark's run is
played step by step (``core.serving_steps.simulate_run``: ``concurrency`` requests in flight,
a new one as each finishes, their prompts in chunks of ``--max-num-batched-tokens`` between the
running sequences' decodes, vLLM's default unless the row states one) and its TPOT compared, as
the decode rate ``concurrency x 1000 / TPOT``. Rows that give only the output rate (prefill
included) are compared with the run's output rate. Where a source does not state the lengths,
the row says what was taken (``lengths_taken``, else 1,024 input and 128 output tokens).

The step's shares and times (``core.serving_steps``) are fitted on the rows marked ``train``
(``--fit`` prints the least-squares figures); every other row is held out. Rows whose
measurement is limited by something other than the engine's step are listed with the evidence
(``anomalous``, as in benchmarks/llama_bench.py) and left out of the counts.

    .venv/bin/python -m benchmarks.serving_published             # summary and every row
    .venv/bin/python -m benchmarks.serving_published --markdown  # the table of docs/performance.md
    .venv/bin/python -m benchmarks.serving_published --fit       # the training set's best figures
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from vramgui.core import serving_steps
from vramgui.core.serving_speed import serving_rates, serving_speed
from vramgui.core.serving_steps import (
    FAST_HOST,
    FIRST_TOKEN,
    SLOW_HOST,
    FirstTokenFigures,
    RunResult,
    StepFigures,
    host_class,
    simulate_run,
    step_work,
)
from vramgui.core.speed import Utilization
from vramgui.core.vllm.profile import scheduler_settings
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import CatalogGpu, find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

DATA = Path(__file__).resolve().parent / "data" / "serving_published.json"
STAND_IN = (1024, 128)  # input and output tokens where the source states none
CLOSE, FAR = 0.20, 0.50  # issue 41's bounds on the decode rate
TRAIN = "train"
# vLLM before 0.8 ran its V0 engine (FlashAttention 2's paged decode, the V0 scheduler), which
# read the paged KV cache at a far smaller share; the estimate is for the engines of today
# (``serving_steps.VLLM_HOSTS``), these figures only read the published rows of vLLM 0.7.3
# (AccelMark's), fitted on them as the current ones are on theirs: the shares on every row, the
# fixed time on each host class's own.
VLLM_V0_HOSTS = {
    SLOW_HOST: StepFigures(
        weight_share=0.85, kv_share=0.67, step_seconds=4.0e-3, sequence_seconds=0
    ),
    FAST_HOST: StepFigures(
        weight_share=0.85, kv_share=0.67, step_seconds=2.7e-3, sequence_seconds=0
    ),
}
V0 = "vLLM V0 (before 0.8)"
CURRENT = "vLLM V1 and SGLang"


def generation(row: dict[str, Any]) -> str:
    """Which engine generation's figures read the row."""
    major, minor = [*row["version"].split("."), "", ""][:2]
    old = row["engine"] == "vllm" and major == "0" and minor.isdigit() and int(minor) < 8
    return V0 if old else CURRENT


def host(row: dict[str, Any]) -> str:
    """The row's host class: its stated CPU's base clock's, else the default."""
    return host_class(row["host_base_ghz"])


FIGURES = {V0: VLLM_V0_HOSTS, CURRENT: serving_steps.VLLM_HOSTS}


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["rows"])


def lengths(row: dict[str, Any]) -> tuple[int, int]:
    """The requests' input and output tokens: as stated, else as the row takes them."""
    taken = row.get("lengths_taken") or STAND_IN
    return row["input_tokens"] or taken[0], row["output_tokens"] or taken[1]


def _gpu(row: dict[str, Any]) -> CatalogGpu:
    gpu = find_gpu(row["gpu"])
    if gpu is None or catalog.find(row["model"]) is None:
        raise SystemExit(f"{row['model']!r} or {row['gpu']!r} is not in the catalogs")
    return gpu


def workload(row: dict[str, Any]) -> Workload:
    """The row's setup at the decode's mean context (input + half the output)."""
    prompt, output = lengths(row)
    gpus = row["gpus"]
    return Workload(mode="inference", engine=row["engine"], batch=row["concurrency"],
                    seq=prompt + output // 2, prompt=prompt, dtype=row["dtype"], gpus=gpus,
                    tp=gpus, max_num_batched_tokens=row.get("batched_tokens"))  # fmt: skip


def simulate(row: dict[str, Any], figures: StepFigures | None = None) -> RunResult:
    """The row's benchmark run at ``figures`` (its generation's and host class's unless
    given)."""
    gpu = _gpu(row)
    w = workload(row)
    hardware = speed_hardware(gpu, row["dtype"])
    scheduler = scheduler_settings(w, gpu.memory_bytes, gpu.name)
    prompt, output = lengths(row)
    return simulate_run(
        _work(row["model"], w),
        serving_rates(hardware, figures=figures or FIGURES[generation(row)][host(row)]),
        concurrency=row["concurrency"],
        requests=row.get("requests") or row["concurrency"],
        input_tokens=prompt,
        output_tokens=output,
        batched_tokens=scheduler.max_num_batched_tokens,
        max_sequences=scheduler.max_num_seqs,
    )


@cache
def _work(model: str, w: Workload) -> serving_steps.StepWork:
    entry = catalog.find(model)
    assert entry is not None
    return step_work(entry.spec(), w)


def previous_estimate(row: dict[str, Any]) -> float:
    """What the estimate gave before the step model: the datasheet roofline at the default
    shares (``serving_speed`` with the shares set, as a user's calibration would), the decode
    of ``concurrency`` sequences at the decode's mean context."""
    gpu = _gpu(row)
    hardware = speed_hardware(gpu, row["dtype"])
    u = replace(Utilization.default_for(hardware.architecture), source="set")
    entry = catalog.find(row["model"])
    assert entry is not None
    return serving_speed(entry.spec(), workload(row), hardware, u).tokens_per_second


def measured_decode(row: dict[str, Any]) -> float | None:
    """The decode rate the row's TPOT gives (``concurrency x 1000 / TPOT``), where it gives one."""
    tpot = row.get("tpot_ms")
    return None if tpot is None else row["concurrency"] * 1000.0 / tpot


def estimate(row: dict[str, Any]) -> float:
    """vramgui's decode rate for the row's run (``concurrency`` over the played run's TPOT)."""
    return Result(row, simulate(row)).decode


@dataclass(frozen=True)
class Result:
    row: dict[str, Any]
    run: RunResult

    @property
    def measured(self) -> float:
        """The decode rate the row's TPOT gives, else its output rate."""
        decode = measured_decode(self.row)
        return float(self.row["output_tps"]) if decode is None else decode

    @property
    def decode(self) -> float:
        """The run's decode rate, as its TPOT gives it."""
        return self.row["concurrency"] / self.run.tpot_seconds

    @property
    def estimate(self) -> float:
        """The run's decode rate where the row measured one, else its output rate."""
        if self.row.get("tpot_ms") is not None:
            return self.decode
        return self.run.output_tokens_per_s

    @property
    def kind(self) -> str:
        return "decode" if self.row.get("tpot_ms") is not None else "output rate"

    @property
    def error(self) -> float:
        return self.estimate / self.measured - 1

    @property
    def counted(self) -> bool:
        return "anomalous" not in self.row

    @property
    def held_out(self) -> bool:
        return self.row.get("set") != TRAIN


def evaluate_all(
    rows: Sequence[dict[str, Any]], figures: Mapping[str, StepFigures] | None = None
) -> list[Result]:
    """Every row's run at its generation's figures, or at ``figures`` of its host class."""
    return [Result(row, simulate(row, figures and figures[host(row)])) for row in rows]


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """Share within ``CLOSE``, median and worst error of the counted rows (all, held out), and of
    the played run's output rate (prefill included) on the counted rows that give one."""

    def stats(chosen: list[Result]) -> dict[str, Any]:
        errors = [abs(r.error) for r in chosen]
        return {
            "rows": len(errors),
            "within": sum(e <= CLOSE for e in errors) / len(errors),
            "beyond_far": sum(e > FAR for e in errors),
            "median": statistics.median(errors),
            "worst": max(errors),
        }

    counted = [r for r in results if r.counted]
    rates = [r for r in counted if r.row.get("output_tps")]
    output = [abs(r.run.output_tokens_per_s / r.row["output_tps"] - 1) for r in rates]
    return {
        "all": stats(counted),
        "held_out": stats([r for r in counted if r.held_out]),
        "anomalous": len(results) - len(counted),
        "output_rate": {
            "rows": len(output),
            "within": sum(e <= CLOSE for e in output) / len(output),
            "median": statistics.median(output),
            "worst": max(output),
        },
    }


def fit(rows: Sequence[dict[str, Any]], of: str) -> dict[str, float]:
    """The figures of generation ``of`` that minimise the squared log error over its training
    rows: the shares and the time per sequence (only where some row runs more than one) on every
    row, the fixed time of each host class on that class's rows (a class without a row keeps
    its time); coordinate descent from the current figures, each searched on a log scale."""
    train = [r for r in rows if r.get("set") == TRAIN and "anomalous" not in r]
    train = [r for r in train if generation(r) == of]
    classes = sorted({host(r) for r in train})
    names = ["weight_share", "kv_share"]
    if any(r["concurrency"] > 1 for r in train):
        names.append("sequence_seconds")
    best = dict(FIGURES[of])
    if "sequence_seconds" in names:
        best = {
            c: replace(f, sequence_seconds=f.sequence_seconds or 10e-6) for c, f in best.items()
        }

    def loss(figures: dict[str, StepFigures]) -> float:
        return sum(math.log1p(r.error) ** 2 for r in evaluate_all(train, figures))

    def moved(name: str, factor: float) -> dict[str, StepFigures] | None:
        """``name`` (a shared figure, or a class's fixed time) times ``factor``."""
        if name in classes:
            f = best[name]
            return {**best, name: replace(f, step_seconds=f.step_seconds * factor)}
        trial = {c: replace(f, **{name: getattr(f, name) * factor}) for c, f in best.items()}
        return None if trial[SLOW_HOST].weight_share > 1 or trial[SLOW_HOST].kv_share > 1 else trial

    current = loss(best)
    for factor in (1.5, 1.2, 1.07, 1.07):
        for name in [*names, *classes]:
            for direction in (factor, 1 / factor):
                while (trial := moved(name, direction)) is not None:
                    value = loss(trial)
                    if value >= current:
                        break
                    best, current = trial, value
    shared = best[SLOW_HOST]
    return {
        **{n: getattr(shared, n) for n in names},
        **{f"step_seconds {c}": best[c].step_seconds for c in classes},
        **{f"rows {c}": sum(host(r) == c for r in train) for c in classes},
        "loss": current,
        "rows": len(train),
    }


@dataclass(frozen=True)
class FirstToken:
    """A published single-request time to first token beside the estimate's
    (``serving_steps.first_token_seconds``): ``estimate`` in seconds, or None where the
    measured time is shorter than the prompt's products at the GPUs' peak (a prefix-cache hit
    or a measurement that is not a prefill: shown, not counted)."""

    row: dict[str, Any]
    estimate: float | None

    @property
    def error(self) -> float:
        assert self.estimate is not None
        return self.estimate / (self.row["ttft_ms"] / 1e3) - 1


def first_token_seconds(row: dict[str, Any], figures: FirstTokenFigures = FIRST_TOKEN) -> float:
    """The estimate's first token for the row's prompt, one request alone."""
    gpu, w = _gpu(row), workload(row)
    figures_of_host = FIGURES[generation(row)][host(row)]
    rates = serving_rates(speed_hardware(gpu, row["dtype"]), figures=figures_of_host)
    return serving_steps.first_token_seconds(
        _work(row["model"], w),
        rates,
        prompt_tokens=lengths(row)[0],
        batched_tokens=scheduler_settings(w, gpu.memory_bytes, gpu.name).max_num_batched_tokens,
        figures=figures,
    )


def first_tokens(
    rows: Sequence[dict[str, Any]], figures: FirstTokenFigures = FIRST_TOKEN
) -> list[FirstToken]:
    """Every counted row measured at one request with a time to first token."""
    out = []
    for row in rows:
        if row["concurrency"] != 1 or not row.get("ttft_ms") or "anomalous" in row:
            continue
        hardware = speed_hardware(_gpu(row), row["dtype"])
        work = _work(row["model"], workload(row))
        products = lengths(row)[0] * work.flops_per_token * work.tp
        possible = products / (row["ttft_ms"] / 1e3) <= hardware.flops * row["gpus"]
        out.append(FirstToken(row, first_token_seconds(row, figures) if possible else None))
    return out


def fit_first_token(rows: Sequence[dict[str, Any]]) -> FirstTokenFigures:
    """``FIRST_TOKEN`` from the training rows: the prefill scale that puts the median error of
    the long prompts (1,024 tokens and more) least, on a 0.05 grid, then the median of what the
    short prompts' times leave beyond their steps."""
    train = [t for t in first_tokens([r for r in rows if r.get("set") == TRAIN])]
    train = [t for t in train if t.estimate is not None]
    long = [t.row for t in train if lengths(t.row)[0] >= 1024]
    short = [t.row for t in train if lengths(t.row)[0] < 1024]

    def long_error(scale: float) -> float:
        figures = FirstTokenFigures(scale, 0.0)
        return statistics.median(
            abs(first_token_seconds(r, figures) / (r["ttft_ms"] / 1e3) - 1) for r in long
        )

    scale = min((s / 20 for s in range(16, 61)), key=long_error)
    request = statistics.median(
        r["ttft_ms"] / 1e3 - first_token_seconds(r, FirstTokenFigures(scale, 0.0)) for r in short
    )
    return FirstTokenFigures(scale, request)


def first_token_lines(checks: Sequence[FirstToken]) -> list[str]:
    """The first token's summary and every row, as ``main`` prints them."""
    counted = [t for t in checks if t.estimate is not None]
    errors = [abs(t.error) for t in counted]
    lines = [
        f"first token at one request: {len(counted)} rows, within 25%: "
        f"{sum(e <= 0.25 for e in errors)}, within 50%: {sum(e <= 0.5 for e in errors)}, "
        f"median {statistics.median(errors):.0%}, not counted (faster than the peak allows): "
        f"{len(checks) - len(counted)}"
    ]
    for t in checks:
        row = t.row
        where = f"{row['gpus']} x {row['gpu']}" if row["gpus"] > 1 else row["gpu"]
        figure = "faster than the peak allows" if t.estimate is None else (
            f"estimate {t.estimate * 1e3:,.1f} ms ({t.error:+.0%})"
        )  # fmt: skip
        lines.append(
            f"  {where} | {row['model']} | {row['engine']} {row['version']} | "
            f"{lengths(row)[0]:,}-token prompt: measured {row['ttft_ms']:,.1f} ms, {figure}"
        )
    return lines


def markdown_row(r: Result, before: float | None = None) -> str:
    row = r.row
    prompt, output = lengths(row)
    stated = f"{prompt} / {output}"
    if row["input_tokens"] is None or row["output_tokens"] is None:
        stated = f"not stated ({prompt} / {output} taken)"
    tpot = row.get("tpot_ms")
    measured = f"{r.measured:,.1f}" + (
        f" (TPOT {tpot} ms, {row['tpot_stat']})" if tpot else " (output rate)"
    )
    was = "-" if before is None else f"{before / r.measured - 1:+.0%}"
    verdict = ""
    if not r.counted:
        verdict = " (anomalous, not counted)"
    elif abs(r.error) > CLOSE:
        verdict = f" (beyond {FAR if abs(r.error) > FAR else CLOSE:.0%})"
    engine = f"{row['engine']} {row['version']}"
    gpus = row["gpu"] if row["gpus"] == 1 else f"{row['gpus']} x {row['gpu']}"
    return (f"| {engine} | {gpus} | {row['host_cpu']} ({host(row)}) | {row['model']} "
            f"{row['dtype']} | {row['concurrency']} | {stated} | {measured} | "
            f"{r.estimate:,.1f} | {r.error:+.0%}{verdict} | {was} | {row['set']} | "
            f"{row['source']} |")  # fmt: skip


HEADER = (
    "| engine | GPU | host CPU (class) | model | concurrency | in / out | measured tok/s | "
    "estimate | error | roofline before | set | source |\n"
    "|---|---|---|---|---:|---|---:|---:|---|---:|---|---|"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="every row, as a table")
    parser.add_argument("--fit", action="store_true", help="fit the step on the training rows")
    args = parser.parse_args(argv)
    rows = load_rows()
    if args.fit:
        for of in FIGURES:
            print(of)
            for name, value in fit(rows, of).items():
                print(f"  {name}: {value:.4g}")
        first = fit_first_token(rows)
        print(f"first token: prefill_scale {first.prefill_scale:.4g}, "
              f"request_seconds {first.request_seconds:.4g}")  # fmt: skip
        return 0
    results = evaluate_all(rows)
    if not args.markdown:
        s = summary(results)
        for part in ("all", "held_out"):
            p = s[part]
            print(f"{part}: {p['rows']} rows, within {CLOSE:.0%}: {p['within']:.0%}, "
                  f"beyond {FAR:.0%}: {p['beyond_far']}, median {p['median']:.0%}, "
                  f"worst {p['worst']:.0%}")  # fmt: skip
        o = s["output_rate"]
        print(f"output rate (prefill included), {o['rows']} rows that give it: "
              f"within {CLOSE:.0%}: {o['within']:.0%}, median {o['median']:.0%}, "
              f"worst {o['worst']:.0%}")  # fmt: skip
        print(f"anomalous, not counted: {s['anomalous']}")
        print("\n".join(first_token_lines(first_tokens(rows))))
    print(HEADER)
    for r in results:
        print(markdown_row(r, previous_estimate(r.row)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
