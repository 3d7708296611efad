"""Which layers a quantization scheme quantizes, against the libraries' own rules.

transformers' bitsandbytes rule is run by transformers itself (benchmarks/quantized_layers.py);
GPTQ's and vLLM's are taken from their code, cited where they are asserted.
"""

import dataclasses

import pytest

from vramgui.core import serving, storage
from vramgui.core.model import Role
from vramgui.core.naming import classify
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find

pytest.importorskip("transformers")

from benchmarks import quantized_layers


@pytest.mark.parametrize("model_type", sorted(quantized_layers.HYBRIDS))
@pytest.mark.parametrize("size", ["default", "small"])
def test_nf4_quantizes_the_layers_transformers_bitsandbytes_replaces(model_type, size):
    # Linear-attention, Mamba, short-convolution and RG-LRU mixers: every nn.Linear of theirs
    # is replaced by bitsandbytes, as attention's and the MLP's are. The one difference left is
    # Qwen-MoE's shared_expert_gate (an nn.Linear with one output), which vramgui keeps 16-bit
    # as every other library does.
    overrides = quantized_layers.HYBRIDS[model_type] if size == "small" else None
    row = quantized_layers.compare(model_type, overrides)
    assert row["extra"] == []
    assert all(name.endswith(".shared_expert_gate.weight") for name in row["missed"])
    assert row["missed_share"] < 1e-4
    assert row["library"] > 0


def _spec(name):
    return find(name).spec()


def _storage(spec, quant, engine="transformers", dtype="bf16"):
    w = Workload.from_dict({"engine": engine, "dtype": dtype, "quant": quant})
    return serving.served_storage(spec, w)


@pytest.mark.parametrize("name", ["qwen3.5-9b", "qwen3.5-27b"])
def test_gptq_keeps_gated_deltanet_gates_and_quantizes_its_projections(name):
    # GPTQModel's module tree for Qwen 3.5 (gptqmodel/models/definitions/qwen3_5_text.py at
    # f4c327a): in_proj_qkv, in_proj_z and out_proj are quantized, in_proj_b / in_proj_a are
    # marked "!" (kept); llm-compressor's W4A16 recipes ignore the same two.
    spec = _spec(name)
    stored = {
        st.tensor.name: st.storage for st in storage.assign_storage(spec, "bf16", "gptq-int4")
    }
    linear = [n for n in stored if ".linear_attn." in n and n.endswith("proj.weight")]
    assert linear
    for n in linear:
        gate = n.endswith(("in_proj_a.weight", "in_proj_b.weight"))
        assert (stored[n] == "gptq-int4") is not gate, n
    # bitsandbytes replaces every nn.Linear, the gates too
    nf4 = {st.tensor.name: st.storage for st in storage.assign_storage(spec, "bf16", "nf4")}
    assert all(nf4[n] == "nf4" for n in linear)


def test_a_gptq_checkpoint_of_a_gated_deltanet_model_stores_its_gates_16_bit():
    entry = find("qwen3.5-27b")
    config = {
        **entry.config,
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128},
    }
    stored = dataclasses.replace(entry, config=config).spec()
    assert stored.quantization == "gptq-int4"
    by_name = {st.tensor.name: st.storage for st in storage.assign_storage(stored, "bf16", "none")}
    gates = [n for n in by_name if n.endswith("linear_attn.in_proj_a.weight")]
    qkv = [n for n in by_name if n.endswith("linear_attn.in_proj_qkv.weight")]
    assert gates and qkv
    assert all(by_name[n] == "gptq-int4" for n in qkv)
    assert all(by_name[n] != "gptq-int4" for n in gates)


def test_the_published_int4_checkpoint_size_of_qwen3_6_27b():
    # vLLM printed "Checkpoint size: 17.69 GiB" loading qwen3.6-27b-autoround-int4 (AutoRound
    # INT4 g128, its MTP layer and vision tower included; club-3090 issue 142). Leaving the
    # Gated DeltaNet projections 16-bit made it 25.3 GiB.
    from benchmarks import vllm_logs

    table = {r["id"]: r for r in vllm_logs.rows()}
    row = table["club3090-qwen36-27b-int4-2x3090-mtp"]
    assert row["checkpoint_estimate_gib"] == pytest.approx(row["checkpoint_logged_gib"], rel=0.01)


@pytest.mark.parametrize("name", ["qwen3.5-9b", "qwen3.5-27b"])
def test_the_int4_saving_includes_the_mixers_at_two_sizes(name):
    spec = _spec(name)
    mixers = [t for t in spec.tensors if t.role is Role.MIXER and not t.is_bias]
    assert mixers
    plain = storage.weight_bytes(spec, "bf16", "none")
    quantized = storage.weight_bytes(spec, "bf16", "gptq-int4")
    mixer_bf16 = sum(t.numel * 2 for t in mixers)
    # without the mixers the model would keep at least their bf16 bytes; with them it keeps
    # about a quarter
    only = dataclasses.replace(spec, tensors=tuple(mixers))
    assert storage.weight_bytes(only, "bf16", "gptq-int4") < 0.3 * mixer_bf16
    assert plain - quantized > 0.7 * mixer_bf16


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("backbone.layers.0.mixer.x_proj.weight", "x_proj"),
        ("model.layers.0.mamba.dt_proj.weight", "dt_proj"),
    ],
)
def test_mamba_1_projections_are_mixers(name, module):
    info = classify(name)
    assert (info.role, info.module) == (Role.MIXER, module)


def test_vllm_leaves_mamba_1_mixers_16_bit_under_a_load_time_scheme():
    # vLLM builds MambaMixer (Mamba, Falcon-Mamba, Jamba) without quant_config
    # (model_executor/layers/mamba/mamba_mixer.py, 0.8.5 to 0.34.0); transformers' FP8 and
    # bitsandbytes replace its nn.Linear layers.
    transformers = pytest.importorskip("transformers")
    from vramgui.core.families import spec_from_config

    for model_type, overrides in (("falcon_mamba", {}), ("jamba", {"num_hidden_layers": 8})):
        config = transformers.AutoConfig.for_model(model_type, **overrides).to_dict()
        spec = spec_from_config(config, model_type)
        vllm = _storage(spec, "fp8", engine="vllm")
        hf = _storage(spec, "fp8", engine="transformers")
        mixers = [
            st for st in vllm.storage if st.tensor.role is Role.MIXER and not st.tensor.is_bias
        ]
        assert mixers and all(st.storage == "BF16" for st in mixers), model_type
        assert any("Mamba's mixer layers" in note for note in vllm.notes)
        assert all(
            st.storage == "fp8"
            for st in hf.storage
            if st.tensor.role is Role.MIXER and not st.tensor.is_bias
        )


def test_vllm_quantizes_gated_deltanet_and_mamba_2_projections():
    spec = _spec("qwen3.5-27b")
    vllm = _storage(spec, "fp8", engine="vllm")
    proj = [
        st for st in vllm.storage if st.tensor.module == "in_proj_qkv" and not st.tensor.is_bias
    ]
    assert proj and all(st.storage == "fp8" for st in proj)
    assert not any("Mamba's mixer" in note for note in vllm.notes)
