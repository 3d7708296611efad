"""vLLM serving: the estimate beside published serving benchmarks, each row of
benchmarks/data/serving_published.json (output tokens/s over all requests at a client
concurrency, with the requests' input and output lengths). No estimate was set on these rows.
Where a source does not state the lengths, 1,024 input and 128 output tokens stand in, and the
row says so.

The estimate is ``core.speed.serving_speed``: the decode of ``concurrency`` sequences, the
roofline at the default shares (basis ``roofline``), here at the mean context of the decode
(input + half the output). What it claims is a decode rate. Where the source gives the mean time
per output token after the first (TPOT), the measured decode rate is concurrency x 1000 / TPOT
(every request in the batch at once: the rows run as many requests as the concurrency, all in
the KV pool) and the estimate is checked against it. Elsewhere only the benchmark's output rate
is known, which also pays each request's prefill: the estimate reads high there by what the
prefill takes, and the row is compared for reference only. A row off by more than ``CLOSE`` is
printed as approximate.

    .venv/bin/python -m benchmarks.serving_published             # summary and every row
    .venv/bin/python -m benchmarks.serving_published --markdown  # the table of docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramgui.core.speed import serving_speed
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

DATA = Path(__file__).resolve().parent / "data" / "serving_published.json"
STAND_IN = (1024, 128)  # input and output tokens where the source states none
CLOSE = 0.25  # within this, the estimate is printed as is; beyond, as approximate


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["rows"])


def lengths(row: dict[str, Any]) -> tuple[int, int]:
    """The requests' input and output tokens (the stand-in where the source states none)."""
    return row["input_tokens"] or STAND_IN[0], row["output_tokens"] or STAND_IN[1]


def estimate(row: dict[str, Any]) -> float:
    """The serving estimate's decode tokens/s for the row's setup, at the decode's mean context."""
    entry, gpu = catalog.find(row["model"]), find_gpu(row["gpu"])
    if entry is None or gpu is None:
        raise SystemExit(f"{row['model']!r} or {row['gpu']!r} is not in the catalogs")
    prompt, output = lengths(row)
    w = Workload(mode="inference", engine=row["engine"], batch=row["concurrency"],
                 seq=prompt + output // 2, prompt=prompt, dtype=row["dtype"], gpus=row["gpus"])  # fmt: skip
    return serving_speed(entry.spec(), w, speed_hardware(gpu, row["dtype"])).tokens_per_second


def measured_decode(row: dict[str, Any]) -> float | None:
    """The decode rate the source's mean TPOT gives, where it gives one."""
    tpot = row.get("tpot_ms")
    return None if tpot is None else row["concurrency"] * 1000.0 / tpot


@dataclass(frozen=True)
class Result:
    row: dict[str, Any]
    estimate: float

    @property
    def decode(self) -> float | None:
        return measured_decode(self.row)

    @property
    def checked(self) -> bool:
        """Whether the row measured what the estimate claims: a decode rate."""
        return self.decode is not None

    @property
    def error(self) -> float:
        """Against the measured decode rate, else against the benchmark's output rate."""
        return self.estimate / (self.decode or self.row["output_tps"]) - 1


def evaluate_all(rows: Sequence[dict[str, Any]]) -> list[Result]:
    return [Result(row, estimate(row)) for row in rows]


def summary(results: Sequence[Result]) -> dict[str, Any]:
    """Share within ``CLOSE``, median and worst error of the rows that measured a decode rate."""
    errors = [abs(r.error) for r in results if r.checked]
    return {
        "rows": len(errors),
        "within": sum(e <= CLOSE for e in errors) / len(errors),
        "median": statistics.median(errors),
        "worst": max(errors),
    }


def markdown_row(r: Result) -> str:
    row = r.row
    prompt, output = lengths(row)
    stated = f"{prompt} / {output}"
    if row["input_tokens"] is None:
        stated = f"not stated ({prompt} / {output} taken)"
    against = f"{r.decode:,.1f} (TPOT {row['tpot_ms']} ms)" if r.decode else "-"
    kind = "decode" if r.checked else "output rate, prefill included"
    close = "" if abs(r.error) <= CLOSE else ", approximate"
    ttft = "-" if row.get("ttft_ms") is None else f"{row['ttft_ms']:,.0f}"
    return (f"| {row['engine']} {row['version']} | {row['gpu']} | {row['model']} {row['dtype']} | "
            f"{row['concurrency']} | {stated} | {row['output_tps']:,.1f} | {against} | {ttft} | "
            f"{r.estimate:,.1f} | {r.error:+.0%} ({kind}{close}) | {row['source']} |")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="every row, as a table")
    args = parser.parse_args(argv)
    results = evaluate_all(load_rows())
    if not args.markdown:
        s = summary(results)
        print(f"{len(results)} rows; {s['rows']} measured a decode rate (TPOT): within "
              f"{CLOSE:.0%}: {s['within']:.0%}, median error {s['median']:.0%}, worst "
              f"{s['worst']:.0%}")  # fmt: skip
    print("| engine | GPU | model | concurrency | in / out | measured out tok/s | measured "
          "decode tok/s | TTFT ms | estimate (decode) | error | source |")  # fmt: skip
    print("|---|---|---|---:|---|---:|---:|---:|---:|---|---|")
    for r in results:
        print(markdown_row(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
