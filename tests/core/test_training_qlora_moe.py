"""QLoRA and LoRA of mixture-of-experts models against what the libraries load.

benchmarks/data/qlora_moe.json holds what transformers 5 + bitsandbytes + peft hold for small
MoE models loaded as QLoRA recipes load them (benchmarks/qlora_moe.py, run on the CPU): the
4-bit codes and quant state, the other parameters (the stacked experts among them, upcast to
fp32), the adapters, and the expert-stack copies a forward saves for backward.
"""

import json
from pathlib import Path

import pytest

from vramgui.core import storage
from vramgui.core.errors import WorkloadError
from vramgui.core.model import Role
from vramgui.core.training import training_estimate
from vramgui.core.training.plan import _context
from vramgui.core.training.weights import (
    PEFT_CONVERTED_MOE,
    PEFT_MOE_GROUPS,
    adapter_parameters,
    folded_expert_bytes,
    resolve_lora_targets,
)
from vramgui.core.training.work import token_work
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "qlora_moe.json"
CASES = json.loads(DATA.read_text(encoding="utf-8"))["cases"]


def _workload(rank, **extra):
    return Workload.from_dict(
        {"mode": "training", "method": "qlora", "quant": "nf4", "dtype": "bf16",
         "lora_rank": rank, "lora_targets": ["all-linear"], "seq": 32, "batch": 1, **extra}
    )  # fmt: skip


def _spec(case):
    transformers = pytest.importorskip("transformers")
    from vramgui.core.families import spec_from_config

    config = transformers.AutoConfig.for_model(case["model_type"], **case["config"]).to_dict()
    return spec_from_config(config, case["id"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_qlora_weights_and_adapters_are_what_the_libraries_load(case):
    spec = _spec(case)
    w = _workload(case["lora_rank"])
    estimate = training_estimate(spec, w)
    measured = case["measured"]
    held = (
        measured["four_bit_codes_bytes"]
        + measured["quant_state_bytes"]
        + sum(measured["other_bytes_by_dtype"].values())
    )
    # the quant state's JSON and code tables are the only bytes counted otherwise
    assert estimate.components["weights"] == pytest.approx(held, rel=0.005)
    assert estimate.trainable_parameters == measured["trainable_parameters"]
    ctx = _context(spec, w, "cuda", "cuda", False)
    folded = sum(folded_expert_bytes(spec, layer, ctx) for layer in range(spec.facts.num_layers))
    assert folded == measured["folded_expert_copies_bytes"]


def test_the_experts_stay_16_bit_under_bitsandbytes_and_are_upcast_for_qlora():
    spec = find("qwen3-30b-a3b").spec()
    experts = [t for t in spec.tensors if t.role is Role.EXPERT]
    held = storage.bitsandbytes_storage(spec, "bf16", "nf4")
    assert {st.storage for st in held if st.tensor.role is Role.EXPERT} == {"BF16"}
    assert {st.storage for st in held if st.tensor.module == "q_proj"} == {"nf4"}
    estimate = training_estimate(spec, _workload(16, lora_targets=["q_proj", "v_proj"]))
    expert_fp32 = sum(t.numel for t in experts) * 4
    # the experts alone, upcast to fp32 by prepare_model_for_kbit_training
    assert estimate.components["weights"] > expert_fp32
    assert any("leaves unquantized" in note for note in estimate.notes)


def test_a_moe_type_peft_does_not_convert_keeps_its_experts_without_adapters():
    # gpt-oss's experts and router are parameters / a custom module: all-linear adapts the
    # attention only (benchmarks/data/qlora_moe.json, gpt-oss-small)
    spec = find("gpt-oss-20b").spec()
    targets = resolve_lora_targets(spec, ("all-linear",))
    assert "gate_up_proj" not in targets and "router" not in targets
    qwen = find("qwen3-30b-a3b").spec()
    converted = resolve_lora_targets(qwen, ("all-linear",))
    assert {"experts:gate_up_proj", "experts:down_proj", "router:gate"} <= converted
    # the fused gate_up_proj has twice the rank of its two halves' each
    gate_up = next(t for t in qwen.tensors if t.module == "gate_up_proj")
    experts, out_f, in_f = gate_up.shape
    only = resolve_lora_targets(qwen, ("gate_proj", "up_proj"))
    layers = qwen.facts.num_layers
    assert adapter_parameters(qwen, only, 8) == layers * 16 * experts * (in_f + out_f)


def test_the_converted_moe_types_are_peft_s():
    pytest.importorskip("peft")
    from peft.utils.transformers_weight_conversion import (
        _MODEL_TO_CONVERSION_PATTERN,
        _MOE_TARGET_MODULE_MAPPING,
    )

    theirs = {
        model_type
        for model_type, group in _MODEL_TO_CONVERSION_PATTERN.items()
        if group in _MOE_TARGET_MODULE_MAPPING and model_type.islower()
    }
    assert theirs == PEFT_CONVERTED_MOE
    assert {t: _MODEL_TO_CONVERSION_PATTERN[t] for t in theirs} == PEFT_MOE_GROUPS


# Small configs with what makes peft's renaming matter: a dense block (qwen3_moe's
# mlp_only_layers, DeepSeek's first_k_dense_replace), shared experts, Mixtral's w1 / w2 / w3.
_SMALL = {
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
}  # fmt: skip
_PEFT_CASES = [
    ({"model_type": "qwen3_moe", "moe_intermediate_size": 128, "num_experts": 8,
      "num_experts_per_tok": 2, "head_dim": 64, "mlp_only_layers": [0]},
     [("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
       "down_proj"), ("q_proj", "v_proj", "down_proj"), ("gate",), ("all-linear",)]),
    ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
     [("q_proj", "v_proj", "w1", "w2", "w3"), ("w2",), ("all-linear",)]),
    ({"model_type": "deepseek_v3", "moe_intermediate_size": 128, "n_routed_experts": 8,
      "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
      "q_lora_rank": 64, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
      "v_head_dim": 32, "n_group": 1, "topk_group": 1},
     [("q_a_proj", "kv_b_proj", "gate_proj", "up_proj", "down_proj"), ("all-linear",)]),
    ({"model_type": "olmoe", "num_experts": 8, "num_experts_per_tok": 2},
     [("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "targets"),
    [(c, t) for c, ts in _PEFT_CASES for t in ts],
    ids=[f"{c['model_type']}-{'+'.join(t)}" for c, ts in _PEFT_CASES for t in ts],
)
@pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::RuntimeWarning"
)
def test_lora_adapters_are_the_ones_peft_adds(config, targets):
    # peft renames transformers 4 expert names onto the stacked parameters and stops matching
    # linear modules of those names (a dense block's or a shared expert's MLP)
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    from vramgui.core.families import spec_from_config

    config = {**_SMALL, **config}
    hf = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    base = sum(p.numel() for p in model.parameters())
    named = "all-linear" if targets == ("all-linear",) else list(targets)
    lora = peft.LoraConfig(r=8, target_modules=named, task_type="CAUSAL_LM")
    added = sum(p.numel() for p in peft.get_peft_model(model, lora).parameters()) - base
    spec = spec_from_config(config)
    assert adapter_parameters(spec, resolve_lora_targets(spec, targets), 8) == added


def test_a_stacked_expert_named_by_its_transformers_5_name_is_explained():
    qwen = find("qwen3-30b-a3b").spec()
    with pytest.raises(WorkloadError, match="gate_proj and up_proj for gate_up_proj"):
        resolve_lora_targets(qwen, ("q_proj", "gate_up_proj"))
    with pytest.raises(WorkloadError, match="without up_proj"):
        resolve_lora_targets(qwen, ("q_proj", "gate_proj"))


def test_inference_with_bitsandbytes_keeps_the_experts_16_bit_from_headers_too():
    # per-expert tensors read from safetensors headers are stacked by transformers 5 on load
    from vramgui.core import serving
    from vramgui.core.model import ModelSpec, Tensor

    base = find("qwen3-30b-a3b").spec()
    tensors = tuple(
        Tensor(
            t.name.replace("experts.gate_up_proj", "experts.0.gate_proj.weight"),
            t.shape[1:],
            t.role,
            t.layer,
            "gate_proj" if t.module == "gate_up_proj" else t.module,
            "BF16",
        )
        if t.role is Role.EXPERT
        else t
        for t in base.tensors
    )
    spec = ModelSpec(base.name, base.facts, tensors, base.architecture)
    w = Workload.from_dict({"engine": "transformers", "dtype": "bf16", "quant": "nf4"})
    served = serving.served_storage(spec, w)
    assert {st.storage for st in served.storage if st.tensor.role is Role.EXPERT} == {"BF16"}


def test_transformers_4_holds_experts_as_linear_layers_bitsandbytes_quantizes():
    """transformers 4's MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock hold an nn.ModuleList of
    expert MLPs; GptOssExperts already stacked them in 4.x."""
    qwen = find("qwen3-30b-a3b").spec()
    held = storage.bitsandbytes_storage(qwen, "bf16", "nf4", "4.57")
    assert {st.storage for st in held if st.tensor.role is Role.EXPERT} == {"nf4"}
    gpt_oss = find("gpt-oss-20b").spec()
    assert {
        st.storage
        for st in storage.bitsandbytes_storage(gpt_oss, "bf16", "nf4", "4.57")
        if st.tensor.role is Role.EXPERT and not st.tensor.is_bias
    } == {"BF16"}
    five = training_estimate(qwen, _workload(16, lora_targets=["q_proj", "v_proj"]))
    four = training_estimate(
        qwen, _workload(16, lora_targets=["q_proj", "v_proj"], transformers_version="4.57")
    )
    assert four.components["weights"] < five.components["weights"] / 4
    assert any("nn.Linear layers, which bitsandbytes quantizes" in n for n in four.notes)
    assert any("expert by expert, so they are approximate" in n for n in four.notes)
    assert not any("expert by expert" in n for n in five.notes)


def test_transformers_4_experts_take_one_adapter_per_linear_and_fold_nothing():
    """peft adapts each expert's nn.Linear by its own name under transformers 4: w1 alone is a
    target, each linear gets rank r, and no expert stack is folded."""
    mixtral = find("mixtral-8x7b").spec()
    with pytest.raises(WorkloadError, match="without w3"):
        resolve_lora_targets(mixtral, ("w1",))
    w1 = resolve_lora_targets(mixtral, ("w1",), "4.57")
    f = mixtral.facts
    experts, h, inter = f.num_experts, f.hidden_size, f.moe_intermediate_size or f.intermediate_size
    assert adapter_parameters(mixtral, w1, 8) == f.num_layers * experts * 8 * (h + inter)
    both = resolve_lora_targets(mixtral, ("w1", "w3", "w2"), "4.57")
    assert adapter_parameters(mixtral, both, 8) == 3 * adapter_parameters(mixtral, w1, 8)
    w = _workload(8, lora_targets=["w1", "w3", "w2"], transformers_version="4.57")
    ctx = _context(mixtral, w, "cuda", "cuda", False)
    assert sum(folded_expert_bytes(mixtral, i, ctx) for i in range(f.num_layers)) == 0


def test_the_work_a_token_makes_follows_the_transformers_release_on_one_spec():
    # One spec asked under 5.0, then 4.46: the second answer is not the first one's cached work
    # (under 4.x bitsandbytes quantizes each expert, so its dequantization is read every step).
    spec = find("mixtral-8x7b").spec()
    stacked = token_work(
        spec, Workload(mode="training", method="qlora", transformers_version="5.0")
    )
    linear = token_work(
        spec, Workload(mode="training", method="qlora", transformers_version="4.46")
    )
    assert linear.dequant_bytes > 10 * stacked.dequant_bytes
