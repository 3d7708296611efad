"""The inference estimate against peak tensor memory measured by the harness (no torch needed).

benchmarks/data/measured_inference.json holds peaks measured with real transformers models under
FakeTensorMode (vramgui/measure), that is with PyTorch's CPU kernels: the estimate for those
kernels (``device="cpu"``) must land within 3 % of every case.
"""

import json
import statistics
from pathlib import Path

from vramgui.core.families import spec_from_config
from vramgui.core.inference import inference_breakdown
from vramgui.core.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "data" / "measured_inference.json"
CONFIG_FILES = (
    ROOT / "tests" / "data" / "families" / "configs.json",
    ROOT / "benchmarks" / "data" / "configs.json",
)
KEYS = {"mode", "batch", "seq", "dtype", "attention", "quant", "engine", "kv-dtype"}


def _configs() -> dict:
    out: dict = {}
    for path in CONFIG_FILES:
        if path.exists():
            out.update(json.loads(path.read_text(encoding="utf-8")))
    return out


def _errors() -> dict[str, float]:
    configs = _configs()
    errors = {}
    for case in json.loads(MEASURED.read_text(encoding="utf-8"))["cases"]:
        spec = spec_from_config(configs[case["config"]], case["model"])
        settings = {k: v for k, v in case["settings"].items() if k in KEYS}
        est = inference_breakdown(spec, Workload.from_dict(settings), device="cpu")
        total = est.weights_bytes + est.kv_cache_bytes + est.activations_bytes
        errors[case["id"]] = total / case["peak_bytes"] - 1
    return errors


def test_inference_within_three_percent_of_measurement():
    errors = _errors()
    assert len(errors) >= 30
    assert statistics.median(abs(v) for v in errors.values()) <= 0.01
    misses = {k: round(v, 4) for k, v in errors.items() if abs(v) > 0.03}
    assert not misses


def test_measurements_span_the_families_and_settings():
    cases = json.loads(MEASURED.read_text(encoding="utf-8"))["cases"]
    types = {_configs()[c["config"]]["model_type"] for c in cases}
    assert len(types) >= 10
    assert {c["settings"]["attention"] for c in cases} >= {"eager", "sdpa"}
    assert {c["settings"]["dtype"] for c in cases} == {"fp32", "fp16", "bf16"}
    assert min(c["settings"]["batch"] for c in cases) == 1
    assert max(c["settings"]["batch"] for c in cases) >= 32
    assert max(c["settings"]["seq"] for c in cases) >= 32768


def test_the_last_decoding_step_within_one_percent_of_measurement():
    """--prompt: the moment of generate's last step (the KV cache of the whole context, a
    one-token forward, DynamicCache's concatenation or attention's repeated K / V of one layer)
    against the harness's decode phase (benchmarks.accuracy.decode_rows)."""
    from benchmarks.accuracy import decode_rows

    rows = decode_rows()
    assert len(rows) >= 30
    assert all(r["phase"].startswith("generation") for r in rows)
    assert statistics.median(abs(r["error"]) for r in rows) <= 0.001
    misses = {r["id"]: round(r["error"], 4) for r in rows if abs(r["error"]) > 0.01}
    assert not misses
