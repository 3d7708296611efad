"""vLLM serving: the estimate beside published serving benchmarks, each row of
benchmarks/data/serving_published.json (output tokens/s over all requests at a client
concurrency, with the requests' input and output lengths). A printout only: no estimate was set
on these rows. Where a source does not state the lengths, 1,024 input and 128 output tokens
stand in, and the row says so.

The estimate is ``core.speed.serving_speed``: the decode of ``concurrency`` sequences at the full
context (input + output), the roofline at the default shares (basis ``roofline``); a benchmark's
output rate also pays each request's prefill, so it reads lower than a pure decode rate.

    .venv/bin/python -m benchmarks.serving_published
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vramgui.core.speed import serving_speed
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

DATA = Path(__file__).resolve().parent / "data" / "serving_published.json"
STAND_IN = (1024, 128)  # input and output tokens where the source states none


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["rows"])


def estimate(row: dict[str, Any]) -> float:
    """The serving estimate's output tokens/s for the row's setup."""
    entry, gpu = catalog.find(row["model"]), find_gpu(row["gpu"])
    if entry is None or gpu is None:
        raise SystemExit(f"{row['model']!r} or {row['gpu']!r} is not in the catalogs")
    prompt = row["input_tokens"] or STAND_IN[0]
    output = row["output_tokens"] or STAND_IN[1]
    w = Workload(mode="inference", engine=row["engine"], batch=row["concurrency"],
                 seq=prompt + output, prompt=prompt, dtype=row["dtype"], gpus=row["gpus"])  # fmt: skip
    return serving_speed(entry.spec(), w, speed_hardware(gpu, row["dtype"])).tokens_per_second


def main() -> int:
    print("| engine | GPU | model | concurrency | in / out | measured out tok/s | estimate | "
          "error | source |")  # fmt: skip
    print("|---|---|---|---:|---|---:|---:|---:|---|")
    for row in load_rows():
        lengths = f"{row['input_tokens']} / {row['output_tokens']}"
        if row["input_tokens"] is None:
            lengths = f"not stated ({STAND_IN[0]} / {STAND_IN[1]} taken)"
        est = estimate(row)
        error = est / row["output_tps"] - 1
        print(f"| {row['engine']} {row['version']} | {row['gpu']} | {row['model']} {row['dtype']} | "
              f"{row['concurrency']} | {lengths} | {row['output_tps']:,.1f} | {est:,.1f} | "
              f"{error:+.0%} | {row['source']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
