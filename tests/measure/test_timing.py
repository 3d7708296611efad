"""Timing training steps (measure/timing.py) with a scripted clock and synchronizer on the CPU."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from vramgui.core.families import spec_from_config  # noqa: E402
from vramgui.core.workload import Workload  # noqa: E402
from vramgui.hardware import calibration  # noqa: E402
from vramgui.measure import timing  # noqa: E402

TINY = json.loads(
    (Path(__file__).parents[1] / "data" / "families" / "tiny_configs.json").read_text()
)
SETTINGS = {"mode": "training", "batch": 2, "seq": 16, "dtype": "fp32", "precision": "fp32",
            "optimizer": "adamw", "fake": False}  # fmt: skip


class Scripted:
    """A clock that advances by the durations given, and a synchronizer that counts its calls."""

    def __init__(self, durations):
        self.durations = list(durations)
        self.now = 100.0
        self.reads = 0
        self.syncs = 0

    def clock(self):
        # Each step reads the clock twice: at its start, and at its end (after a sync).
        self.reads += 1
        if self.reads % 2 == 0:
            self.now += self.durations.pop(0)
        return self.now

    def synchronize(self):
        self.syncs += 1


def test_the_median_of_the_timed_steps_is_reported_after_the_warm_up():
    script = Scripted([1.0, 3.0, 2.0, 9.0, 2.5])
    result = timing.time_training_steps(
        TINY["llama-gqa"], SETTINGS, device="Fake GPU", synchronize=script.synchronize,
        clock=script.clock, warmup=2, steps=5,
    )  # fmt: skip
    assert result.steps_seconds == (1.0, 3.0, 2.0, 9.0, 2.5)
    assert result.step_seconds == 2.5
    assert result.tokens_per_step == 2 * 16
    assert result.tokens_per_second == pytest.approx(32 / 2.5)
    assert script.syncs == 1 + 5  # once after the warm-up, once after each timed step
    assert result.to_dict()["device"] == "Fake GPU"


def test_accumulated_micro_batches_count_in_the_tokens():
    script = Scripted([1.0])
    result = timing.time_training_steps(
        TINY["llama-gqa"], {**SETTINGS, "grad-accum": 3}, device="d",
        synchronize=script.synchronize, clock=script.clock, warmup=0, steps=1,
    )  # fmt: skip
    assert result.tokens_per_step == 2 * 16 * 3


def test_only_real_training_steps_are_timed():
    with pytest.raises(ValueError, match="real training steps"):
        timing.time_training_steps(
            TINY["llama-gqa"], {**SETTINGS, "fake": True}, device="d", synchronize=lambda: None
        )


LLAMA = {
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
    "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
    "vocab_size": 32000, "max_position_embeddings": 4096,
}  # fmt: skip
WORK = Workload(mode="training", batch=8, seq=2048, attention="sdpa")


def _timer(device, fraction):
    """A timer that reports ``fraction`` of the default estimate's speed on an A100."""
    from vramgui.core.speed import training_speed
    from vramgui.hardware.gpus import find_gpu
    from vramgui.hardware.rates import speed_hardware

    spec = spec_from_config(LLAMA, "tiny-llama")
    default = training_speed(spec, WORK, speed_hardware(find_gpu("A100 80GB"), "bf16"))
    tokens = 8 * 2048

    def timer(config, settings):
        seconds = tokens / (fraction * default.tokens_per_second)
        return timing.StepTiming(seconds, (seconds,) * 5, tokens, device)

    return spec, timer


def test_a_timed_run_calibrates_its_gpu_model_and_stores_it(tmp_path):
    spec, timer = _timer("NVIDIA A100-SXM4-80GB", 0.8)
    store = tmp_path / "calibration.json"
    block = timing.calibrate_from_run(spec, WORK, LLAMA, {}, timer=timer, store=store)
    assert block["stored"] == str(store) and block["gpu"] == "A100 SXM 80GB"
    assert block["tokens_per_second"] == pytest.approx(0.8 * block["default_tokens_per_second"])
    stored = calibration.load(store)["A100 SXM 80GB"]
    assert stored.matmul == block["matmul"] < 0.65  # slower than the Ampere default
    assert stored.device == "NVIDIA A100-SXM4-80GB"


def test_a_gpu_the_catalog_lacks_is_timed_but_not_stored(tmp_path):
    spec, timer = _timer("Mystery Accelerator 9000", 0.8)
    store = tmp_path / "calibration.json"
    block = timing.calibrate_from_run(spec, WORK, LLAMA, {}, timer=timer, store=store)
    assert block["stored"] is None and "Mystery Accelerator 9000" in block["reason"]
    assert block["tokens_per_second"] > 0 and not store.exists()


def test_timed_steps_that_fail_leave_a_reason(tmp_path):
    def failing(config, settings):
        raise RuntimeError("out of memory while timing: CUDA out of memory. Tried 2 GiB")

    spec = spec_from_config(LLAMA, "tiny-llama")
    block = timing.calibrate_from_run(spec, WORK, LLAMA, {}, timer=failing, store=tmp_path / "c")
    assert block == {
        "stored": None,
        "reason": "the timed steps failed: out of memory while timing: CUDA out of memory. "
        "Tried 2 GiB",
    }
