"""The measured block beside the estimate document (no torch needed: runs are scripted records)."""

import pytest

from vramgui.core.families import spec_from_config
from vramgui.core.report import document_for
from vramgui.core.workload import Workload
from vramgui.measure import compare

LLAMA = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
}
SPEC = spec_from_config(LLAMA, "small")


def _record(doc, **changes):
    """A run's record that measured exactly what the estimate says, changed by ``changes``."""
    groups = compare.estimate_groups(doc["per_gpu"]["components"])
    breakdown = {
        "parameters": groups["weights"],
        "kv_cache": groups["kv_cache"],
        "gradients": groups["gradients"],
        "optimizer_states": groups["optimizer_states"],
        "weight_copies": 0,
        "other": groups["activations"],
    }
    breakdown.update(changes.pop("breakdown", {}))
    record = {
        "peak_bytes": sum(breakdown.values()),
        "phase": "prefill",
        "breakdown_at_peak": breakdown,
        "phase_peaks": {"prefill": {"peak_bytes": sum(breakdown.values()), "breakdown": {}}},
        "parameters": doc["model"]["parameters"],
        "trainable_parameters": doc["model"]["trainable_parameters"],
        "seconds": 0.5,
        "versions": {"torch": "x"},
        "attention_calls": 8,
        "fused_attention_calls": 8,
    }
    record.update(changes)
    return record


def test_an_exact_estimate_shows_zero_error_in_every_group():
    doc = document_for(SPEC, Workload(seq=512), [])
    block = compare.measured_block(doc, _record(doc), "fake")
    assert block["tensor_bytes"]["error"] == 0
    assert block["tensor_bytes"]["measured"] == doc["per_gpu"]["tensor_bytes"]
    assert block["components"]["weights"]["difference_bytes"] == 0
    assert block["components"]["gradients"]["error"] is None  # nothing to compare with
    assert "runtime_overhead" not in block["components"]  # a fake run sees no GPU
    assert "total_bytes" not in block
    assert block["parameters"]["difference"] == 0
    assert block["attention"] == {"sdpa_calls": 8, "math_kernel_calls": 0}


def test_errors_are_estimate_over_measured_minus_one():
    doc = document_for(SPEC, Workload(seq=512), [])
    activations = compare.estimate_groups(doc["per_gpu"]["components"])["activations"]
    record = _record(doc, breakdown={"other": activations * 2})
    block = compare.measured_block(doc, record, "fake")
    assert block["components"]["activations"]["error"] == pytest.approx(-0.5)
    expected = doc["per_gpu"]["tensor_bytes"] / record["peak_bytes"] - 1
    assert block["tensor_bytes"]["error"] == pytest.approx(expected)


def test_training_groups_fold_the_estimate_finer_components():
    doc = document_for(SPEC, Workload(mode="training", seq=256, method="lora"), [])
    components = doc["per_gpu"]["components"]
    groups = compare.estimate_groups(components)
    assert groups["weights"] == components["weights"] + components.get("lora_adapters", 0)
    assert sum(groups.values()) == doc["per_gpu"]["tensor_bytes"]
    record = _record(doc, parameters=SPEC.parameters + doc["model"]["trainable_parameters"])
    block = compare.measured_block(doc, record, "fake")
    # peft's model counts the adapters among its parameters; the base model's count is compared
    assert block["parameters"]["measured"] == SPEC.parameters


def test_trainable_parameters_are_compared_for_training_only():
    # A model built to serve has requires_grad on every weight: no figure to hold 0 against.
    serve = document_for(SPEC, Workload(seq=512), [])
    record = _record(serve, trainable_parameters=SPEC.parameters)
    assert "trainable_parameters" not in compare.measured_block(serve, record, "fake")
    train = document_for(SPEC, Workload(mode="training", seq=256, method="lora"), [])
    adapters = train["model"]["trainable_parameters"]
    record = _record(train, parameters=SPEC.parameters + adapters)
    block = compare.measured_block(train, record, "fake")
    assert block["trainable_parameters"]["error"] == 0


def test_a_cuda_run_measures_the_overhead_and_the_total():
    doc = document_for(SPEC, Workload(seq=512), [])
    allocated = doc["per_gpu"]["tensor_bytes"]
    cuda = {
        "max_memory_allocated": allocated,
        "max_memory_reserved": allocated + 20 * 2**20,
        "context_bytes": 500 * 2**20,
    }
    block = compare.measured_block(doc, _record(doc, cuda=cuda), "cuda")
    overhead = block["components"]["runtime_overhead"]
    assert overhead["measured"] == 520 * 2**20
    assert block["total_bytes"]["measured"] == allocated + 520 * 2**20
    assert block["total_bytes"]["estimate"] == doc["per_gpu"]["total_bytes"]
    assert block["cuda"] is cuda


def test_a_cuda_run_without_nvml_does_not_invent_the_context():
    doc = document_for(SPEC, Workload(seq=512), [])
    cuda = {"max_memory_allocated": 10, "max_memory_reserved": 20, "context_bytes": None}
    block = compare.measured_block(doc, _record(doc, cuda=cuda), "cuda")
    assert block["total_bytes"]["measured"] is None
    assert block["components"]["runtime_overhead"]["measured"] is None
    assert any("not measured" in note for note in block["notes"])


def test_cpu_kernel_differences_are_said():
    doc = document_for(SPEC, Workload(seq=512), [])
    record = _record(doc, fused_attention_calls=2)
    block = compare.measured_block(
        doc, record, "fake", config={"model_type": "mamba", "state_size": 16}
    )
    assert block["attention"]["math_kernel_calls"] == 6
    notes = " ".join(block["notes"])
    assert "6 of 8 attention calls took SDPA's math kernel" in notes
    assert "reference code" in notes


def test_the_cpu_kernel_estimate_is_compared_where_it_differs():
    doc = document_for(SPEC, Workload(mode="training", seq=256), [])
    record = _record(doc)
    block = compare.measured_block(doc, record, "fake", cpu_kernels_bytes=record["peak_bytes"])
    assert "cpu_kernels" not in block  # the same as the estimate: nothing to add
    block = compare.measured_block(doc, record, "fake", cpu_kernels_bytes=record["peak_bytes"] + 8)
    assert block["cpu_kernels"]["difference_bytes"] == 8


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"model_type": "llama", "hidden_size": 8}, False),
        ({"model_type": "jamba", "mamba_d_state": 16}, True),
        ({"model_type": "lfm2", "layer_types": ["conv", "full_attention"]}, True),
        ({"model_type": "qwen3_5", "text_config": {"linear_conv_kernel_dim": 4}}, True),
    ],
)
def test_layers_with_reference_kernels_are_recognised(config, expected):
    assert compare.runs_reference_kernels(config) is expected
