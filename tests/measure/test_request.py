"""Which estimates a run can reproduce, and the harness settings it gets (no torch needed)."""

import dataclasses

import pytest

from tests.fakehub.files import TINY_LLAMA_CONFIG
from vramgui.core.families import spec_from_config
from vramgui.core.workload import Workload
from vramgui.measure import extra, request
from vramgui.measure.request import MeasureError

SPEC = spec_from_config(TINY_LLAMA_CONFIG, "tiny")


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"quant": "nf4"}, "quantized"),
        ({"engine": "vllm"}, "vllm"),
        ({"gpus": 2, "tp": 2}, "one GPU"),
        ({"attention": "flash"}, "flash"),
        ({"kv_dtype": "fp16"}, "KV cache"),
        ({"mode": "training", "method": "qlora", "quant": "nf4"}, "quantized"),
        ({"mode": "training", "optimizer": "adamw-8bit"}, "adamw-8bit"),
        ({"mode": "training", "gpus": 2, "zero": 2}, "one GPU"),
    ],
)
def test_setups_a_run_cannot_reproduce_are_refused_with_the_reason(changes, words):
    workload = Workload(**changes)
    reason = request.unmeasurable_reason(SPEC, workload)
    assert reason is not None and words in reason
    with pytest.raises(MeasureError, match="cannot measure"):
        request.harness_settings(SPEC, workload, "fake")


def test_a_quantized_checkpoint_is_refused():
    spec = dataclasses.replace(SPEC, quantization="gptq-int4")
    assert "stored as" in request.unmeasurable_reason(spec, Workload())


def test_settings_carry_the_estimate_option_names():
    inference = request.harness_settings(SPEC, Workload(batch=3, seq=77, dtype="fp16"), "fake")
    assert inference == {
        "mode": "inference",
        "batch": 3,
        "seq": 77,
        "dtype": "fp16",
        "attention": "sdpa",
        "fake": True,
    }
    training = request.harness_settings(
        SPEC,
        Workload(mode="training", method="lora", lora_targets=("q_proj", "v_proj"), grad_accum=2),
        "cuda",
    )
    assert training["lora-targets"] == "q_proj,v_proj"
    assert training["grad-accum"] == 2 and training["method"] == "lora"
    assert training["loop"] == "trainer"
    custom = request.harness_settings(SPEC, Workload(mode="training", loop="custom"), "fake")
    assert custom["loop"] == "custom"
    assert training["fake"] is False


def _deep(layers: int):
    return spec_from_config({**TINY_LLAMA_CONFIG, "num_hidden_layers": layers}, "deep")


@pytest.mark.parametrize(
    ("layers", "changes", "refused"),
    [
        (4096, {}, True),  # 165 s before the bound
        (513, {}, True),
        (512, {}, False),
        (126, {"mode": "training", "grad_accum": 4}, False),  # the deepest published model
        (126, {"mode": "training", "grad_accum": 5}, True),
    ],
)
def test_a_fake_run_is_held_to_its_layer_passes(layers, changes, refused):
    spec, workload = _deep(layers), Workload(**changes)
    reason = request.unmeasurable_reason(spec, workload, "fake")
    assert (reason is not None) == refused
    if refused:
        assert f"{layers:,} layers x {request.forward_passes(workload)} forward passes" in reason
        with pytest.raises(MeasureError, match="would take minutes"):
            request.harness_settings(spec, workload, "fake")
    # On the GPU, and before the device is chosen, the bound does not apply.
    assert request.unmeasurable_reason(spec, workload, "cuda") is None
    assert request.harness_settings(spec, workload, None)["fake"] is True


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_a_model_transformers_runs_eager_only_is_built_eager_as_estimated(mode):
    # gpt-oss: transformers refuses SDPA for it; the estimate says so and counts eager.
    eager_only = dataclasses.replace(SPEC, facts=dataclasses.replace(SPEC.facts, sdpa=False))
    settings = request.harness_settings(eager_only, Workload(mode=mode), "fake")
    assert settings["attention"] == "eager"
    assert request.harness_settings(SPEC, Workload(mode=mode), "fake")["attention"] == "sdpa"


def test_an_unknown_device_is_refused():
    with pytest.raises(MeasureError, match="--device"):
        request.harness_settings(SPEC, Workload(), "tpu")


def test_steps_follow_the_harness_phases():
    inference = request.harness_settings(SPEC, Workload(), "fake")
    assert request.steps(inference, is_decoder=True) == ("load", "prefill", "decode")
    assert request.steps(inference, is_decoder=False) == ("load", "forward")
    training = request.harness_settings(SPEC, Workload(mode="training", grad_accum=2), "fake")
    steps = request.steps(training, is_decoder=True)
    assert steps[0] == "load"
    assert steps.count("forward") == 4 and steps.count("optimizer step") == 2


def test_missing_packages_name_each_one_and_what_to_install(monkeypatch):
    installed = {"transformers": "5.24.0", "peft": "0.13.2"}
    monkeypatch.setattr(
        extra.importlib.util,
        "find_spec",
        lambda name: None if name not in installed else object(),
    )
    monkeypatch.setattr(extra.importlib.metadata, "version", lambda name: installed[name])
    problems = extra.missing_packages()
    assert problems == ("torch is not installed", "peft 0.13 is older than the 0.21 it needs")
    hint = extra.install_hint(problems)
    assert 'pip install "vramgui[measure]"' in hint
    assert "torch is not installed" in hint
    assert "download.pytorch.org/whl/cpu" in hint


def test_nothing_is_missing_where_the_extra_is_installed(monkeypatch):
    monkeypatch.setattr(extra.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(extra.importlib.metadata, "version", lambda name: "99.0.0")
    assert extra.missing_packages() == ()


def test_the_command_without_the_extra_says_what_to_install(monkeypatch, capsys):
    from vramgui.cli import main

    monkeypatch.setattr(extra, "missing_packages", lambda: ("torch is not installed",))
    code = main(["measure", "smollm-135m"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("vramgui: Measuring needs PyTorch, transformers and peft")
    assert 'pip install "vramgui[measure]"' in err
    assert len(err.strip().splitlines()) == 1
