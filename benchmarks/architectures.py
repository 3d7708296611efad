"""Every architecture's inference peak at several shapes and sizes: the estimate against the
measuring instrument.

For each model type of tests/data/architectures/expected.json (the causal-LM types transformers
builds from a default config), the model is measured with vramgui.measure (FakeTensorMode on the
CPU: prefill and one decode step, as ``model.generate`` runs them) at every shape of ``SHAPES``
on its default config, and at ``SIZE_SHAPE`` on the two configs of other sizes the architecture
table was checked on (half and double the default's widths); each against the estimate for the
kernels the measurement runs (``device="cpu"``: PyTorch's CPU kernels, where they hold other
tensors than CUDA's). The measurements go to benchmarks/data/architectures_inference.json, and
per type the errors and the range of shapes and sizes checked go to
vramgui/core/families/validation.json: the estimator calls a type's activations approximate, and
says by how much, where one of these shapes missed by more than 3 %, and says so where a workload
is outside the shapes and sizes checked.

A type fails when its error passes 3 % and grows with the prompt: the benchmark lists those and
exits with status 1.

Needs the measure extra. Run from the repository root (hours on two cores; the long shape is the
slow one):

    python -m benchmarks.architectures                  # every type
    python -m benchmarks.architectures --only gpt_oss qwen3_next
    python -m benchmarks.architectures --reuse          # re-estimate the stored ones
    python -m benchmarks.architectures --held-out       # the held-out shapes (HEADLINE types)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.percent import signed
from vramgui.core.errors import VramguiError
from vramgui.core.families import spec_from_config
from vramgui.core.inference import inference_breakdown
from vramgui.core.model import Role
from vramgui.core.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "architectures" / "expected.json"
RESULTS = ROOT / "benchmarks" / "data" / "architectures_inference.json"
HELD_OUT_RESULTS = ROOT / "benchmarks" / "data" / "architectures_held_out.json"
VALIDATION = ROOT / "vramgui" / "core" / "families" / "validation.json"

# (batch, prompt tokens): the shapes every type is measured at on its default config.
SHAPES = ((4, 512), (3, 1500), (1, 4000), (1, 8192), (4, 32768))
# The fewest shapes a default config is measured at (prompts cut to its learned positions
# collapse some of SHAPES; shorter ones make up the count).
MIN_SHAPES = 4
# The shape the configs of other sizes are measured at.
SIZE_SHAPE = (1, 4000)
# Shapes no estimator rule was written or tuned from, measured on the HEADLINE types only.
HELD_OUT = ((5, 700), (2, 3000), (1, 12000), (2, 16384))
DTYPE = "bf16"
# Beyond this the estimator calls an architecture's activations approximate.
TOLERANCE = 0.03
# A measurement that takes longer is abandoned (reference kernels that loop per token).
TIMEOUT_S = 480
# The architectures of 2025-26, shown first in docs/accuracy.md.
HEADLINE = (
    "gpt_oss", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "llama4_text", "deepseek_v32",
    "glm_moe_dsa", "minimax_m2", "olmoe", "exaone_moe", "gemma4_text", "jamba", "granitemoe",
    "nemotron_h", "lfm2", "falcon_h1", "mamba2", "kimi_linear", "olmo3", "exaone4", "apertus",
    "ernie4_5_moe",
)  # fmt: skip


def _measure_many(jobs: list[tuple[dict, dict]], queue: multiprocessing.Queue) -> None:
    """Measure each (config, settings) in turn, putting each record on ``queue`` as it is done
    (the import of torch and transformers is paid once)."""
    from vramgui.measure.harness import measure

    for config, settings in jobs:
        try:
            queue.put(measure(config, {**settings, "fake": True}))
        except Exception as exc:
            queue.put({"error": f"{type(exc).__name__}: {str(exc)[:300]}"})


def measure_in_child(jobs: list[tuple[dict, dict]], timeout_s: float = TIMEOUT_S) -> list[dict]:
    """The instrument's records of ``jobs``, run in child processes that a stuck run cannot
    outlive: a measurement that takes longer than ``timeout_s`` is recorded as such and the
    rest go on in a new child."""
    ctx = multiprocessing.get_context("spawn")
    records: list[dict] = []
    while len(records) < len(jobs):
        queue = ctx.Queue()
        child = ctx.Process(target=_measure_many, args=(jobs[len(records) :], queue))
        child.start()
        try:
            while len(records) < len(jobs):
                records.append(queue.get(timeout=timeout_s))
        except Exception:  # queue.Empty: this measurement is stuck (or the child died)
            records.append({"error": f"did not finish in {timeout_s:.0f} s"})
        child.kill()
        child.join()
    return records


def attention_of(config: dict) -> str:
    """SDPA, or eager where transformers runs the class eagerly only (gpt-oss's sinks)."""
    return "sdpa" if spec_from_config(config).facts.sdpa else "eager"


def estimated(config: dict, batch: int, seq: int) -> dict[str, Any]:
    """The estimate for the CPU kernels the measurement runs, and for CUDA's where they differ."""
    spec = spec_from_config(config)
    w = Workload(
        mode="inference", batch=batch, seq=seq, dtype=DTYPE, attention=attention_of(config)
    )
    cpu = inference_breakdown(spec, w, device="cpu")
    cuda = inference_breakdown(spec, w)
    out = {
        "tensor_bytes": cpu.weights_bytes + cpu.kv_cache_bytes + cpu.activations_bytes,
        "weights": cpu.weights_bytes,
        "kv_cache": cpu.kv_cache_bytes,
        "activations": cpu.activations_bytes,
    }
    if cuda.activations_bytes != cpu.activations_bytes:
        out["cuda_activations"] = cuda.activations_bytes
    return out


def settings_of(config: dict, batch: int, seq: int) -> dict:
    return {
        "mode": "inference",
        "batch": batch,
        "seq": seq,
        "dtype": DTYPE,
        "attention": attention_of(config),
    }


def kept(record: dict) -> dict:
    """What the results keep of an instrument's record."""
    if "error" in record:
        return {"measure_error": record["error"]}
    return {
        "measured": {
            "peak_bytes": record["peak_bytes"],
            "weights_bytes": record["weights_bytes"],
            "kv_cache_bytes": record["kv_cache_bytes"],
            "seconds": record["seconds"],
            "transformers": record["versions"]["transformers"],
        }
    }


def point(config: dict, batch: int, seq: int, kept_record: dict) -> dict:
    """One measured shape of one config: the measurement beside the estimate and its error."""
    out: dict[str, Any] = {"batch": batch, "seq": seq}
    try:
        est = estimated(config, batch, seq)
    except VramguiError as exc:
        return {**out, "estimate_error": str(exc)}
    out["estimated"] = est
    out.update(kept_record)
    measured = kept_record.get("measured")
    if measured is not None:
        out["error"] = est["tensor_bytes"] / measured["peak_bytes"] - 1
    return out


def _longest(config: dict) -> int | None:
    """The longest prompt a config runs: its learned position embeddings' length, else any."""
    spec = spec_from_config(config)
    learned = any(t.role is Role.POSITION for t in spec.tensors)
    return spec.facts.max_position_embeddings if learned else None


def shaped_plan(
    configs: list[dict], plan: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """The ``plan``'s (config, batch, seq) points as measured: prompts cut to a config's learned
    positions, and where that leaves the default config fewer than ``MIN_SHAPES`` shapes, batch
    2 at a half, a quarter and an eighth of its positions until it has them."""
    shaped = []
    for index, batch, wanted in plan:
        longest = _longest(configs[index])
        shaped.append((index, batch, min(wanted, longest) if longest else wanted))
    shaped = list(dict.fromkeys(shaped))
    longest = _longest(configs[0])
    default = [s for s in shaped if s[0] == 0]
    for fraction in (2, 4, 8):
        if len(default) >= MIN_SHAPES or longest is None:
            break
        extra = (0, 2, longest // fraction)
        if extra not in default:
            shaped.append(extra)
            default.append(extra)
    return shaped


def run_type(
    configs: list[dict], plan: list[tuple[int, int, int]], stored: dict | None
) -> dict[str, Any]:
    """The ``plan``'s (config, batch, seq) points: measured now, or taken from ``stored``."""
    old = {(p["config"], p["batch"], p["seq"]): p for p in (stored or {}).get("points", [])}
    shaped = shaped_plan(configs, plan)
    todo = [
        (configs[index], settings_of(configs[index], batch, seq))
        for index, batch, seq in shaped
        if stored is None or (index, batch, seq) not in old
    ]
    records = iter(measure_in_child(todo)) if todo else iter(())
    points = []
    for index, batch, seq in shaped:
        previous = old.get((index, batch, seq))
        if stored is not None and previous is not None:
            record = {k: previous[k] for k in ("measured", "measure_error") if k in previous}
        else:
            record = kept(next(records))
        points.append({"config": index, **point(configs[index], batch, seq, record)})
    return {"points": points}


def verdict(points: list[dict]) -> dict[str, Any]:
    """What the measurements of one type say: the worst error, the shapes and sizes checked,
    and whether the error passes the tolerance and grows with the prompt."""
    done = [p for p in points if "error" in p]
    if not done:
        return {}
    default = sorted((p for p in done if p["config"] == 0), key=lambda p: p["batch"] * p["seq"])
    worst = max(done, key=lambda p: abs(p["error"]))
    grows = (
        len(default) >= 2
        and abs(default[-1]["error"]) > TOLERANCE
        and abs(default[-1]["error"]) > abs(default[0]["error"]) + 0.01
    )
    return {
        "worst_error": round(worst["error"], 4),
        "worst_shape": [worst["batch"], worst["seq"]],
        "errors": [[p["batch"], p["seq"], round(p["error"], 4)] for p in default],
        "seq": [min(p["seq"] for p in default), max(p["seq"] for p in default)]
        if default
        else None,
        "batch": max(p["batch"] for p in default) if default else None,
        "hidden": sorted({p["hidden"] for p in done if "hidden" in p}),
        "grows": grows,
    }


def _with_hidden(points: list[dict], configs: list[dict]) -> list[dict]:
    for p in points:
        if "error" in p:
            p["hidden"] = spec_from_config(configs[p["config"]]).facts.hidden_size
    return points


def write_validation(results: dict[str, Any]) -> list[str]:
    """validation.json from the results; returns the types that fail."""
    types, failing = {}, []
    for model_type, r in sorted(results.items()):
        v = verdict(r["points"])
        if not v:
            continue
        types[model_type] = v
        if v["grows"]:
            failing.append(model_type)
    VALIDATION.write_text(
        json.dumps(
            {
                "about": "Inference peaks measured against transformers' own code "
                "(benchmarks/architectures.py): per type the errors at each shape of its default "
                "config, the worst over every config, and the prompts, batch and widths checked. "
                "The estimator states a worst error beyond the tolerance as its uncertainty, and "
                "says so where a workload is outside what was checked.",
                "tolerance": TOLERANCE,
                "dtype": DTYPE,
                "types": types,
            },
            indent=1,
        )
        + "\n"
    )
    return failing


def held_out(only: list[str] | None) -> None:
    """The held-out shapes on the default and the half-size config of the HEADLINE types (or
    ``only``)."""
    cases = json.loads(CASES.read_text())["types"]
    out: dict[str, Any] = {}
    if HELD_OUT_RESULTS.exists():
        out = json.loads(HELD_OUT_RESULTS.read_text())["types"]
    for model_type in only or HEADLINE:
        started = time.perf_counter()
        configs = [c["config"] for c in cases[model_type]]
        plan = [(i, b, s) for i in (0, len(configs) - 1) for b, s in HELD_OUT]
        r = run_type(configs, plan, None)
        out[model_type] = {"points": _with_hidden(r["points"], configs)}
        print(f"{model_type}: {_shown(r)} ({time.perf_counter() - started:.0f} s)", flush=True)
        HELD_OUT_RESULTS.write_text(
            json.dumps(
                {"shapes": [list(s) for s in HELD_OUT], "dtype": DTYPE, "types": out}, indent=1
            )
            + "\n"
        )


def _shown(r: dict) -> str:
    return ", ".join(
        f"{p['batch']}x{p['seq']}"
        + (f"[{p['config']}]" if p["config"] else "")
        + ": "
        + (
            signed(p["error"], 2)
            if "error" in p
            else str(p.get("measure_error") or p.get("estimate_error"))[:40]
        )
        for p in r["points"]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="re-estimate the stored measurements (measuring only the shapes not stored)",
    )
    parser.add_argument("--held-out", action="store_true", help="the held-out shapes")
    args = parser.parse_args()
    if args.held_out:
        held_out(args.only)
        return 0
    cases = json.loads(CASES.read_text())["types"]
    results: dict[str, Any] = {}
    if RESULTS.exists() and (args.only or args.reuse):
        stored = json.loads(RESULTS.read_text())
        if stored.get("shapes") == [list(s) for s in SHAPES]:
            results = stored["types"]
    # The instrument builds a config's causal-LM class: a multimodal class's entry
    # ("qwen3_5:Qwen3_5ForConditionalGeneration") is not what it would measure.
    every = results if args.reuse else (t for t in cases if ":" not in t)
    for model_type in args.only or sorted(every):
        started = time.perf_counter()
        configs = [c["config"] for c in cases[model_type]]
        plan = [(0, b, s) for b, s in SHAPES]
        plan += [(i, *SIZE_SHAPE) for i in range(1, len(configs))]
        previous = results.get(model_type) if args.reuse else None
        r = run_type(configs, plan, previous)
        _with_hidden(r["points"], configs)
        results[model_type] = r
        print(f"{model_type}: {_shown(r)} ({time.perf_counter() - started:.0f} s)", flush=True)
        RESULTS.write_text(
            json.dumps(
                {"shapes": [list(s) for s in SHAPES], "dtype": DTYPE, "types": results}, indent=1
            )
            + "\n"
        )
    failing = write_validation(results)
    if failing:
        print("error growing with the prompt beyond 3 %: " + ", ".join(failing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
