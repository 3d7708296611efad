"""The window's logic without the window: sweep values, inapplicable settings, the outlook."""

from __future__ import annotations

import dataclasses

from vramgui.answers.estimate import compute_outlook, sweep_values
from vramgui.core.estimate import estimate
from vramgui.core.workload import Workload
from vramgui.sources.resolve import load_model
from vramgui.ui.controller import EstimateController, disabled_reasons

GiB = 1024**3


def test_sweep_values_span_the_model_and_keep_the_current_value():
    values = sweep_values("seq", 3000, 8192)
    assert values[0] == 256 and values[-1] == 8192
    assert 3000 in values and list(values) == sorted(set(values))
    assert sweep_values("batch", 1, 4096)[:3] == (1, 2, 4)
    assert sweep_values("batch", 300, 4096)[-1] == 300


def test_inapplicable_settings_say_why():
    inference = disabled_reasons(Workload(), None)
    assert "training" in inference["optimizer"]
    assert "vLLM" in inference["gpu_memory_utilization"]
    assert "tp" in inference and "more than one GPU" in inference["tp"]
    assert "engine" not in inference
    full = disabled_reasons(Workload(mode="training"), None)
    assert "LoRA" in full["lora_rank"] and "optimizer" not in full
    assert "engine" in full
    fsdp = disabled_reasons(Workload(mode="training", gpus=4, fsdp=True), None)
    assert "FSDP" in fsdp["zero"] and "fsdp" not in fsdp
    assert "tp" not in fsdp


def test_outlook_marks_the_largest_context_that_fits():
    spec = load_model("llama-3.1-8b").spec
    workload = Workload(seq=4096)
    current = estimate(spec, workload, 24 * GiB)
    outlook = compute_outlook(
        current, spec, workload, field="seq", target=("RTX 4090", 24 * GiB), max_seq=131072
    )
    assert outlook.values == tuple(sorted(outlook.values)) and 4096 in outlook.values
    assert list(outlook.totals_bytes) == sorted(outlook.totals_bytes)
    largest = outlook.largest["seq"]
    assert largest is not None and 4096 < largest < 131072
    fits = estimate(spec, workload.with_(seq=largest), 24 * GiB).total_bytes
    assert fits <= 24 * GiB
    assert outlook.suggestions == ()  # it fits: nothing to advise
    assert outlook.rules
    tight = compute_outlook(
        current, spec, workload, field="seq", target=("small", 12 * GiB), max_seq=131072
    )
    assert tight.suggestions and tight.largest["seq"] is None


def test_each_training_method_brings_its_usual_precision_unless_told(qtbot):
    controller = EstimateController(load_model, Workload(mode="training"))
    assert controller.workload.precision == "mixed"
    controller.update(method="lora")
    assert controller.workload.precision == "pure"  # 16-bit base, fp32 adapters
    controller.update(method="qlora")
    assert (controller.workload.quant, controller.workload.precision) == ("nf4", "mixed")
    controller.update(method="lora", precision="fp32")
    assert controller.workload.precision == "fp32"  # an explicit choice wins
    controller.update(batch=2)
    assert controller.workload.precision == "fp32"  # and stays until the method changes
    controller.update(method="full")
    assert controller.workload.precision == "mixed"


def test_an_unknown_kv_dtype_is_refused_by_name_and_the_setup_kept(qtbot):
    # vLLM looked the KV dtype up in its table of engines to switch to: KeyError 'kv:fp9'.
    controller = EstimateController(load_model, Workload(engine="vllm"))
    said: list[str] = []
    controller.message.connect(said.append)
    assert controller.update(kv_dtype="fp9") is False
    assert said == [
        "KV cache dtype must be one of auto, fp32, fp16, bf16, fp8, q8_0, q4_0; got 'fp9'"
    ]
    assert controller.workload == Workload(engine="vllm")


def test_an_ollama_model_runs_at_ollamas_default_context_for_that_model_only(qtbot):
    controller = EstimateController(load_model, Workload(seq=8192))
    notices: list[str] = []
    controller.notice.connect(notices.append)
    controller.set_capacities((("RTX 4090", 24 * GiB),))
    hub = load_model("llama-3.1-8b")
    ollama = dataclasses.replace(hub, ref=dataclasses.replace(hub.ref, kind="ollama"))
    controller.set_model(ollama)
    assert controller.workload.seq == 32768  # 23 to 47 GiB: Ollama's 32k
    assert any("Ollama's default context for 24 GiB" in n for n in notices)
    assert controller.chosen_workload.seq == 8192  # the user's own setting is kept
    controller.set_model(hub)
    assert controller.workload.seq == 8192
    controller.set_capacities((("RTX 3060 12GB", 12 * GiB),))
    controller.set_model(ollama)
    assert controller.workload.seq == 4096
    controller.update(mode="training")
    controller.set_model(ollama)
    assert controller.workload.seq == 8192  # training runs no Ollama
