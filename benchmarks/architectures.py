"""Every architecture's inference peak: the estimate against the measuring instrument.

For each model type of tests/data/architectures/expected.json (the causal-LM types transformers
5.24 builds from a default config), the default config's model is measured with vramgui.measure
(FakeTensorMode on the CPU: prefill and one decode step, as ``model.generate`` runs them) at one
workload, and estimated with the core. The result, per type, goes to
benchmarks/data/architectures_inference.json, and the errors the core states for each type to
vramgui/core/families/validation.json (the estimator says an architecture is approximate, and by
how much, where this measurement disagrees with it by more than 3 %).

Needs the measure extra. Run from the repository root (about 20 minutes on two cores):

    python -m benchmarks.architectures            # every type
    python -m benchmarks.architectures --only gpt_oss qwen3_next
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

from vramgui.core.errors import VramguiError
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "architectures" / "expected.json"
RESULTS = ROOT / "benchmarks" / "data" / "architectures_inference.json"
VALIDATION = ROOT / "vramgui" / "core" / "families" / "validation.json"

SETTINGS = {"mode": "inference", "batch": 2, "seq": 1024, "dtype": "bf16", "attention": "sdpa"}
# Beyond this the estimator calls an architecture's activations approximate.
TOLERANCE = 0.03
# A measurement that takes longer is abandoned (a reference kernel that unrolls per token).
TIMEOUT_S = 240


def _measure(config: dict, settings: dict, queue: multiprocessing.Queue) -> None:
    try:
        from vramgui.measure.harness import measure

        queue.put(measure(config, {**settings, "fake": True}))
    except Exception as exc:
        queue.put({"error": f"{type(exc).__name__}: {str(exc)[:300]}"})


def measure_in_child(config: dict, settings: dict) -> dict:
    """The instrument's record, run in a child process that a stuck run cannot outlive."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_measure, args=(config, settings, queue))
    child.start()
    child.join(TIMEOUT_S)
    if child.is_alive():
        child.kill()
        child.join()
        return {"error": f"did not finish in {TIMEOUT_S} s"}
    return queue.get() if not queue.empty() else {"error": f"exit code {child.exitcode}"}


def row(model_type: str, config: dict) -> dict[str, Any]:
    try:
        spec = spec_from_config(config)
        # Architectures transformers runs only eagerly (gpt-oss's sinks) are measured so.
        settings = {
            **SETTINGS,
            "seq": min(SETTINGS["seq"], spec.facts.max_position_embeddings),
            "attention": "sdpa" if spec.facts.sdpa else "eager",
        }
        w = Workload(
            mode="inference",
            batch=settings["batch"],
            seq=settings["seq"],
            dtype=settings["dtype"],
            attention=settings["attention"],
        )
        est = estimate(spec, w)
    except VramguiError as exc:
        return {"model_type": model_type, "settings": SETTINGS, "estimate_error": str(exc)}
    out: dict[str, Any] = {"model_type": model_type, "settings": settings}
    out["estimated"] = {
        "tensor_bytes": est.tensor_bytes,
        "weights": est.components["weights"],
        "kv_cache": est.components["kv_cache"],
        "activations": est.components["activations"],
        "layer_kinds": sorted({k.value for k in spec.facts.layer_types}),
        "inventory": spec.inventory.value,
    }
    measured = measure_in_child(config, settings)
    if "error" in measured:
        out["measure_error"] = measured["error"]
        return out
    out["measured"] = {
        "peak_bytes": measured["peak_bytes"],
        "weights_bytes": measured["weights_bytes"],
        "kv_cache_bytes": measured["kv_cache_bytes"],
        "reference_kernels": measured.get("reference_kernels"),
        "seconds": measured["seconds"],
    }
    out["error"] = est.tensor_bytes / measured["peak_bytes"] - 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    cases = json.loads(CASES.read_text())["types"]
    results: dict[str, Any] = {}
    if args.only and RESULTS.exists():
        results = json.loads(RESULTS.read_text())["types"]
    # The instrument builds a config's causal-LM class: a multimodal class's entry
    # ("qwen3_5:Qwen3_5ForConditionalGeneration") is not what it would measure.
    for model_type in args.only or sorted(t for t in cases if ":" not in t):
        started = time.perf_counter()
        results[model_type] = row(model_type, cases[model_type][0]["config"])
        r = results[model_type]
        what = (
            f"{r['error']:+.1%}"
            if "error" in r
            else r.get("measure_error") or r.get("estimate_error")
        )
        print(f"{model_type}: {what} ({time.perf_counter() - started:.0f} s)", flush=True)
    RESULTS.write_text(
        json.dumps({"settings": SETTINGS, "types": dict(sorted(results.items()))}, indent=1) + "\n"
    )
    validation = {
        t: round(r["error"], 4)
        for t, r in sorted(results.items())
        if "error" in r and abs(r["error"]) > TOLERANCE
    }
    VALIDATION.write_text(
        json.dumps(
            {
                "about": "Inference peaks the estimator misses by more than 3 % "
                "(benchmarks/architectures.py); it states them as its uncertainty.",
                "settings": SETTINGS,
                "errors": validation,
            },
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
