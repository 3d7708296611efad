"""What a fake run of `vramgui measure` costs on the largest models: time and host memory.

Runs ``vramgui measure MODEL --device fake --json`` in a fresh process per case (the command as a
user runs it, imports included) and records the wall time, the run's own time, the process's peak
resident memory and the error of the estimate in benchmarks/data/measure_limits.json, which
``python -m benchmarks.accuracy --markdown`` lists in docs/accuracy.md. Needs the measure extra.

    .venv/bin/python -m benchmarks.measure_limits
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "measure_limits.json"
CASES = (
    ("deepseek-v3", ["--seq", "4096"]),
    ("deepseek-v3", ["--seq", "32768", "--batch", "4"]),
    ("deepseek-v3", ["--mode", "training", "--seq", "4096"]),
    ("llama-3.1-405b", ["--seq", "32768", "--batch", "4"]),
    ("llama-3.1-405b", ["--mode", "training", "--seq", "4096", "--grad-checkpointing"]),
)


def measure_case(model: str, options: list[str]) -> dict:
    """One case in a fresh process: its figures, or its error."""
    command = [sys.executable, "-m", "vramgui", "measure", model, *options, "--device", "fake"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--json"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    case = {"model": model, "options": " ".join(options)}
    if done.returncode != 0:
        return {**case, "error": done.stderr.strip().splitlines()[-1]}
    measured = json.loads(done.stdout)["measured"]
    return {
        **case,
        "parameters": measured["parameters"]["measured"],
        "wall_seconds": round(wall, 1),
        "run_seconds": measured["seconds"],
        "host_peak_rss_bytes": measured["host_peak_rss_bytes"],
        "measured_tensor_bytes": measured["tensor_bytes"]["measured"],
        "error": measured["tensor_bytes"]["error"],
        "math_kernel_calls": measured["attention"]["math_kernel_calls"],
    }


def main() -> int:
    """Measure every case, print each, write the data file."""
    records = []
    for model, options in CASES:
        record = measure_case(model, options)
        records.append(record)
        print(json.dumps(record), flush=True)
    document = {
        "about": __doc__.splitlines()[0],
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "cases": records,
    }
    DATA.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0 if all(isinstance(r["error"], float) for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
