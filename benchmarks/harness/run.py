"""Measure every case of a mode and keep the results in benchmarks/data/measured_<mode>.json.

Usage:
    python -m benchmarks.harness.run --mode inference [--force] [--only ID ...] [--timeout S]

Each case runs in its own process (one failing or hanging model cannot take the others with it);
cases already in the data file are skipped unless --force. Failures are kept with their reason.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness.cases import CASES, REPO, Case, load_config

DATA_DIR = REPO / "benchmarks" / "data"
SCHEMA = "vramgui.measured/1"
ABOUT = (
    "Peak live tensor bytes (what torch.cuda.max_memory_allocated reports, without CUDA context, "
    "workspaces or allocator rounding) of transformers models built from their config.json and "
    "run under torch's FakeTensorMode on a CPU by vramgui/measure/harness.py. Inference: "
    "prefill of batch x seq tokens (DynamicCache, logits_to_keep=1, all-ones attention mask) "
    "plus one decode step, under no_grad, as model.generate runs them; encoders (bert): one "
    "forward with full logits. Training: the second of two steps (forward with labels=input_ids "
    "and use_cache=False, backward, optimizer.step, zero_grad(set_to_none=True)) in the loop the "
    "settings name: trainer (transformers' Trainer: outputs dropped once the loss is taken, "
    "gradients clipped to 1.0) or custom (outputs = model(**batch) kept until the next forward "
    "returns); mixed precision as accelerate wraps the forward (autocast, outputs converted to "
    "fp32), fp16 with a GradScaler. "
    "breakdown_at_peak sums to peak_bytes."
)


def data_path(mode: str) -> Path:
    """The data file of a mode."""
    return DATA_DIR / f"measured_{mode}.json"


def load_records(path: Path) -> dict:
    """The data file's content, or an empty document."""
    if path.exists():
        return json.loads(path.read_text())
    return {"schema": SCHEMA, "about": ABOUT, "cases": [], "failures": []}


def _write_atomically(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.chmod(temporary, 0o644)
    with os.fdopen(handle, "w") as file:
        json.dump(document, file, indent=1)
        file.write("\n")
    os.replace(temporary, path)


def measure_case(case: Case, timeout_s: float) -> dict:
    """Run one case in a child process; the measurement record, or {"error": reason}."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(load_config(case.model), file)
        config_path = file.name
    command = [
        sys.executable,
        "-m",
        "vramgui.measure.harness",
        "--config",
        config_path,
        "--settings",
        json.dumps(case.settings),
    ]
    try:
        done = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    finally:
        os.unlink(config_path)
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return {"error": lines[-1] if lines else f"exit status {done.returncode}"}
    return json.loads(done.stdout)


def _record(case: Case, result: dict) -> dict:
    measured_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {
        "id": case.id,
        "model": case.model,
        "config": case.model,
        "measured_at": measured_at,
        **result,
    }


def store_result(path: Path, mode: str, case: Case, result: dict) -> None:
    """Put one case's record (or failure) into the data file, keeping every other record.

    The file is read again right before writing, so runners of other cases working on the same
    file at the same time do not lose each other's records.
    """
    document = load_records(path)
    document["cases"] = [r for r in document["cases"] if r["id"] != case.id]
    document["failures"] = [r for r in document["failures"] if r["id"] != case.id]
    if "error" in result:
        document["failures"].append({"id": case.id, "model": case.model, **result})
    else:
        document["cases"].append(_record(case, result))
    order = {c.id: i for i, c in enumerate(CASES[mode])}
    document["cases"].sort(key=lambda r: order.get(r["id"], len(order)))
    _write_atomically(path, document)


def run(mode: str, force: bool, only: list[str], timeout_s: float) -> int:
    """Measure the cases of `mode`; returns how many failed."""
    path = data_path(mode)
    failures = 0
    for case in CASES[mode]:
        if only and case.id not in only:
            continue
        done_ids = {record["id"] for record in load_records(path)["cases"]}
        if case.id in done_ids and not force:
            continue
        result = measure_case(case, timeout_s)
        store_result(path, mode, case, result)
        if "error" in result:
            failures += 1
            print(f"{case.id}: FAILED {result['error']}", flush=True)
        else:
            peak_gib = result["peak_bytes"] / 2**30
            print(
                f"{case.id}: {peak_gib:.3f} GiB at {result['phase']} ({result['seconds']} s)",
                flush=True,
            )
    return failures


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(CASES), required=True)
    parser.add_argument("--force", action="store_true", help="measure cases already recorded")
    parser.add_argument("--only", nargs="*", default=[], help="case ids to measure")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per case")
    args = parser.parse_args(argv)
    failures = run(args.mode, args.force, args.only, args.timeout)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
