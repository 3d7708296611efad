"""config.json -> ModelSpec, checked against what transformers builds for the same configs.

tests/data/families/expected.json was written by tools/build_family_expectations.py from
transformers itself: the parameter names and shapes of tiny configs that exercise each family's
features, and the parameter counts of the published configs of well-known models.
"""

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vramgui.core.errors import ConfigError
from vramgui.core.families import SUPPORTED_MODEL_TYPES, spec_from_config
from vramgui.core.model import Inventory, LayerType, Role
from vramgui.core.naming import classify

DATA = Path(__file__).resolve().parent.parent / "data" / "families"
TINY = json.loads((DATA / "tiny_configs.json").read_text())
REAL = json.loads((DATA / "configs.json").read_text())
EXPECTED = json.loads((DATA / "expected.json").read_text())

FULL, SLIDING = LayerType.FULL, LayerType.SLIDING


def real(key):
    return spec_from_config(REAL[key], name=key)


def tiny(key):
    return spec_from_config(TINY[key])


# --- exactness against transformers ----------------------------------------------------------


@pytest.mark.parametrize("key", sorted(TINY))
def test_tiny_inventory_matches_transformers(key):
    spec = tiny(key)
    expected = EXPECTED["tiny"][key]
    ours = sorted((t.name, t.shape) for t in spec.tensors)
    theirs = sorted((n, tuple(s)) for n, s in expected["tensors"])
    assert ours == theirs
    assert spec.architecture == expected["architecture"]


@pytest.mark.parametrize("key", sorted(REAL))
def test_real_parameter_count_matches_transformers(key):
    spec = real(key)
    expected = EXPECTED["real"][key]
    assert spec.parameters == expected["parameters"]
    assert spec.architecture == expected["architecture"]
    assert spec.name == key


@pytest.mark.parametrize(
    ("key", "parameters"),
    [
        ("meta-llama/Llama-2-7b-hf", 6_738_415_616),
        ("meta-llama/Meta-Llama-3-8B", 8_030_261_248),
        ("mistralai/Mistral-7B-v0.1", 7_241_732_096),
        ("mistralai/Mixtral-8x7B-v0.1", 46_702_792_704),
        ("Qwen/Qwen2.5-7B", 7_615_616_512),
        ("openai-community/gpt2", 124_439_808),
    ],
)
def test_counts_quoted_in_the_issue(key, parameters):
    assert real(key).parameters == parameters


def test_every_family_is_covered_by_tiny_and_real_configs():
    tiny_types = {c["model_type"] for c in TINY.values()}
    real_types = {c["model_type"] for c in REAL.values()}
    # Plus gemma3: a multimodal checkpoint whose language model is a classic family.
    assert {*SUPPORTED_MODEL_TYPES, "gemma3"} == tiny_types == real_types


def test_expectations_come_from_transformers_5():
    assert EXPECTED["transformers"].split(".")[0] == "5"
    assert set(EXPECTED["tiny"]) == set(TINY)
    assert set(EXPECTED["real"]) == set(REAL)


def test_real_configs_are_reusable_hub_keyed_dicts():
    for key, config in REAL.items():
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", key)
        assert isinstance(config["model_type"], str)


# --- tensor metadata ---------------------------------------------------------------------------

_BLOCK = re.compile(r"\.(?:layers|h|layer)\.(\d+)\.")


@pytest.mark.parametrize("key", sorted(TINY))
def test_tensor_layer_module_and_bias_follow_the_names(key):
    for t in tiny(key).tensors:
        if t.role is Role.ENCODER:
            assert t.layer is None, t.name  # a vision tower's blocks are not the decoder's
            continue
        block = _BLOCK.search(t.name)
        assert t.layer == (int(block.group(1)) if block else None), t.name
        parts = t.name.split(".")
        if parts[-1] in ("weight", "bias"):
            assert t.module == parts[-2], t.name
        else:
            assert t.module == parts[-1], t.name
        assert t.is_bias == (parts[-1] == "bias"), t.name


@pytest.mark.parametrize("key", sorted(TINY))
def test_roles_agree_with_the_tensor_name_classifier(key):
    """Checkpoint inventories are classified by name; synthesized ones must say the same."""
    for t in tiny(key).tensors:
        assert tuple(classify(t.name)) == (t.role, t.layer, t.module, t.is_bias), t.name


def test_llama_roles():
    spec = real("meta-llama/Meta-Llama-3-8B")
    by_name = {t.name: t for t in spec.tensors}
    assert by_name["model.embed_tokens.weight"].role is Role.EMBEDDING
    assert by_name["lm_head.weight"].role is Role.HEAD
    assert by_name["model.layers.3.self_attn.k_proj.weight"].role is Role.ATTENTION
    assert by_name["model.layers.3.self_attn.k_proj.weight"].shape == (1024, 4096)
    assert by_name["model.layers.3.mlp.up_proj.weight"].role is Role.MLP
    assert by_name["model.layers.3.input_layernorm.weight"].role is Role.NORM
    assert by_name["model.norm.weight"].layer is None
    assert all(t.dtype is None for t in spec.tensors)
    assert len(spec.layer_tensors(31)) == 9


def test_tied_embeddings_count_once():
    spec = real("meta-llama/Llama-3.2-1B")
    assert spec.facts.tie_word_embeddings
    assert not any(t.name == "lm_head.weight" for t in spec.tensors)
    assert real("meta-llama/Llama-2-7b-hf").facts.tie_word_embeddings is False


def test_moe_roles():
    spec = tiny("qwen2_moe-shared")
    roles = {t.name: t.role for t in spec.tensors}
    assert roles["model.layers.1.mlp.experts.gate_up_proj"] is Role.EXPERT
    assert roles["model.layers.1.mlp.gate.weight"] is Role.ROUTER
    assert roles["model.layers.1.mlp.shared_expert.up_proj.weight"] is Role.SHARED_EXPERT
    assert roles["model.layers.0.mlp.up_proj.weight"] is Role.MLP


def test_deepseek_router_stays_fp32():
    spec = tiny("deepseek_v3-mla")
    gates = [t for t in spec.tensors if t.module == "gate"]
    assert gates and all(t.dtype == "F32" and t.role is Role.ROUTER for t in gates)
    assert all(t.dtype is None for t in spec.tensors if t.module != "gate")


# --- architecture facts ------------------------------------------------------------------------


def test_llama_facts_and_head_dim_default():
    f = real("meta-llama/Meta-Llama-3-8B").facts
    assert (f.num_layers, f.hidden_size, f.num_heads, f.num_kv_heads, f.head_dim) == (
        32,
        4096,
        32,
        8,
        128,
    )
    assert f.layer_types == (FULL,) * 32
    assert f.sliding_window is None
    assert f.moe_layers == (False,) * 32
    assert (f.gated_mlp, f.norm, f.hidden_act, f.is_decoder) == (True, "rms", "silu", True)
    assert f.torch_dtype == "bfloat16"
    assert f.max_position_embeddings == 8192
    assert not f.is_moe and not f.is_mla


def test_head_dim_defaults_of_the_config_classes():
    base = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    base |= {"vocab_size": 10, "intermediate_size": 32}
    kv = {"num_key_value_heads": 2}
    assert spec_from_config({"model_type": "qwen3", **base, **kv}).facts.head_dim == 128
    assert spec_from_config({"model_type": "gemma", **base, **kv}).facts.head_dim == 256
    assert spec_from_config({"model_type": "llama", **base}).facts.head_dim == 16
    assert (
        spec_from_config({"model_type": "qwen2", **base, **kv, "head_dim": 8}).facts.head_dim == 8
    )


def test_kv_heads_default_of_the_config_classes():
    base = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 8}
    base |= {"vocab_size": 10, "intermediate_size": 32}
    assert spec_from_config({"model_type": "llama", **base}).facts.num_kv_heads == 8
    assert spec_from_config({"model_type": "mistral", **base}).facts.num_kv_heads == 8
    assert spec_from_config({"model_type": "qwen3_moe", **base}).facts.num_kv_heads == 4
    assert tiny("llama-kv-null").facts.num_kv_heads == 4


def test_mistral_window_applies_to_every_layer():
    f = real("mistralai/Mistral-7B-v0.1").facts
    assert f.layer_types == (SLIDING,) * 32
    assert f.sliding_window == 4096
    f = tiny("mistral-no-window").facts
    assert f.layer_types == (FULL, FULL) and f.sliding_window is None
    assert real("mistralai/Mixtral-8x7B-v0.1").facts.sliding_window is None


def test_gemma2_alternates_sliding_and_full():
    f = real("google/gemma-2-9b").facts
    assert f.layer_types == (SLIDING, FULL) * 21
    assert f.sliding_window == 4096
    assert f.hidden_act == "gelu_pytorch_tanh"


def test_gemma3_five_sliding_to_one_full():
    f = real("google/gemma-3-1b-pt").facts
    assert f.layer_types == ((SLIDING,) * 5 + (FULL,)) * 4 + (SLIDING,) * 2
    assert f.sliding_window == 512
    f = tiny("gemma3_text-pattern").facts
    assert f.layer_types == (SLIDING, SLIDING, FULL, SLIDING, SLIDING, FULL, SLIDING)


def test_gemma3_explicit_layer_types_win():
    config = dict(TINY["gemma3_text-pattern"], layer_types=["full_attention"] * 7)
    assert spec_from_config(config).facts.layer_types == (FULL,) * 7


def test_gemma3_multimodal_counts_its_vision_tower_as_its_own_part():
    spec = real("google/gemma-3-4b-it")
    f = spec.facts
    assert f.model_type == "gemma3_text"  # the language model's facts, from its family
    assert (f.num_layers, f.hidden_size, f.vocab_size, f.sliding_window) == (
        34,
        2560,
        262_208,
        1024,
    )
    assert f.torch_dtype == "bfloat16"
    tower = sum(t.numel for t in spec.tensors if t.role is Role.ENCODER)
    assert 400e6 < tower < 450e6  # SigLIP and the projector
    assert any("vision" in w for w in spec.warnings)
    assert spec.inventory is Inventory.APPROXIMATE
    assert spec.architecture == "Gemma3ForConditionalGeneration"


def test_gemma_legacy_gelu_means_tanh():
    assert real("google/gemma-7b").facts.hidden_act == "gelu_pytorch_tanh"


def test_qwen2_sliding_layers_from_max_window_layers():
    f = tiny("qwen2-tied-sliding").facts
    assert f.layer_types == (FULL, FULL, SLIDING, SLIDING)
    assert f.sliding_window == 32
    f = real("Qwen/Qwen2.5-7B").facts
    assert f.layer_types == (FULL,) * 28 and f.sliding_window is None


def test_qwen_moe_layers_from_sparse_step_and_mlp_only_layers():
    f = tiny("qwen2_moe-shared").facts
    assert f.moe_layers == (False, True, False, False)
    assert (f.num_experts, f.experts_per_token, f.moe_intermediate_size) == (4, 2, 32)
    assert f.num_shared_experts == 1
    assert tiny("qwen3_moe-sparse").facts.moe_layers == (False, True, True)
    f = real("Qwen/Qwen3-30B-A3B").facts
    assert f.moe_layers == (True,) * 48
    assert (f.num_experts, f.experts_per_token, f.num_shared_experts) == (128, 8, 0)


def test_mixtral_facts():
    f = real("mistralai/Mixtral-8x7B-v0.1").facts
    assert (f.num_experts, f.experts_per_token, f.moe_intermediate_size) == (8, 2, 14336)
    assert f.moe_layers == (True,) * 32


def test_deepseek_v2_lite_mla_without_query_compression():
    f = real("deepseek-ai/DeepSeek-V2-Lite").facts
    assert f.is_mla and f.q_lora_rank is None
    assert (f.kv_lora_rank, f.qk_rope_head_dim, f.qk_nope_head_dim, f.v_head_dim) == (
        512,
        64,
        128,
        128,
    )
    assert f.head_dim == 192
    assert (f.num_experts, f.experts_per_token, f.num_shared_experts) == (64, 6, 2)
    assert f.moe_intermediate_size == 1408
    assert f.moe_layers == (False,) + (True,) * 26


def test_deepseek_v3_facts():
    spec = real("deepseek-ai/DeepSeek-V3")
    f = spec.facts
    assert f.q_lora_rank == 1536
    assert f.moe_layers == (False,) * 3 + (True,) * 58
    assert (f.num_experts, f.experts_per_token, f.num_shared_experts) == (256, 8, 1)
    assert spec.count([Role.EXPERT]) == 58 * 256 * 3 * 7168 * 2048


def test_mla_reads_no_key_value_head_count():
    # Multi-head latent attention sizes nothing by num_key_value_heads: a config giving more of
    # them than attention heads is counted, not refused, and vLLM's tensor-parallel check and
    # the cache go by the attention heads.
    config = REAL["deepseek-ai/DeepSeek-V3"]
    heads = config["num_attention_heads"]
    for kv_heads in (1, heads, 2 * heads):
        spec = spec_from_config({**config, "num_key_value_heads": kv_heads})
        assert spec.parameters == real("deepseek-ai/DeepSeek-V3").parameters
        assert spec.facts.num_kv_heads == heads


def test_classic_decoders():
    f = real("openai-community/gpt2").facts
    assert (f.norm, f.gated_mlp, f.hidden_act, f.tie_word_embeddings) == (
        "layer",
        False,
        "gelu_new",
        True,
    )
    assert (f.attention_dropout, f.hidden_dropout, f.max_position_embeddings) == (0.1, 0.1, 1024)
    assert real("bigcode/starcoder").facts.num_kv_heads == 1
    assert real("tiiuae/falcon-7b").facts.num_kv_heads == 1
    assert real("tiiuae/falcon-40b").facts.num_kv_heads == 8
    assert real("EleutherAI/pythia-1b").facts.tie_word_embeddings is False
    assert real("facebook/opt-350m").facts.hidden_act == "relu"


def test_bert_is_an_encoder_without_pooler():
    spec = real("google-bert/bert-base-cased")
    assert spec.facts.is_decoder is False
    assert spec.architecture == "BertForMaskedLM"
    assert not any("pooler" in t.name for t in spec.tensors)
    assert (spec.facts.attention_dropout, spec.facts.hidden_dropout) == (0.1, 0.1)


def test_dtype_from_either_key_and_name_fallbacks():
    config = dict(TINY["llama-gqa"], dtype="bfloat16", _name_or_path="org/model")
    spec = spec_from_config(config)
    assert spec.facts.torch_dtype == "bfloat16"
    assert spec.name == "org/model"
    assert spec_from_config(TINY["llama-gqa"]).name == "llama"
    assert spec_from_config(TINY["llama-gqa"], name="mine").name == "mine"


def test_phi3_residual_dropout():
    config = dict(TINY["phi3-fused"], resid_pdrop=0.2, attention_dropout=0.1)
    f = spec_from_config(config).facts
    assert (f.hidden_dropout, f.attention_dropout) == (0.2, 0.1)
    assert f.layer_types == (SLIDING, SLIDING)


@pytest.mark.parametrize("key", sorted(TINY))
def test_per_layer_facts_have_one_entry_per_layer(key):
    f = tiny(key).facts
    assert len(f.layer_types) == len(f.moe_layers) == f.num_layers


# --- unknown model types -----------------------------------------------------------------------


def test_unknown_type_with_common_fields_is_estimated_with_a_warning():
    config = {
        "model_type": "my_lm",
        "architectures": ["MyLmForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 96,
        "vocab_size": 100,
    }
    spec = spec_from_config(config)
    assert spec.warnings == (
        "model_type 'my_lm' is not known; estimated as a Llama-style decoder of the same sizes",
    )
    assert spec.facts.model_type == "my_lm"
    assert spec.architecture == "MyLmForCausalLM"
    assert spec.inventory is Inventory.APPROXIMATE
    llama = spec_from_config(dict(config, model_type="llama"))
    assert spec.parameters == llama.parameters
    assert llama.inventory is Inventory.EXACT


def test_unknown_type_accepts_gpt_style_aliases():
    config = {"model_type": "my_gpt", "n_embd": 64, "n_layer": 3, "n_head": 4, "n_inner": 128}
    spec = spec_from_config(dict(config, vocab_size=50, n_positions=256))
    assert (spec.facts.hidden_size, spec.facts.num_layers, spec.facts.intermediate_size) == (
        64,
        3,
        128,
    )
    assert spec.facts.max_position_embeddings == 256
    assert spec.warnings
    assert spec.inventory is Inventory.APPROXIMATE


def test_unknown_type_without_common_fields_names_them():
    with pytest.raises(ConfigError, match=r"my_ssm.*num_attention_heads, intermediate_size"):
        spec_from_config(
            {"model_type": "my_ssm", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 5}
        )


# --- bad input ---------------------------------------------------------------------------------

LLAMA = TINY["llama-gqa"]


def without(config, key):
    return {k: v for k, v in config.items() if k != key}


@pytest.mark.parametrize(
    ("config", "field", "default"),
    [
        (without(LLAMA, "hidden_size"), "hidden_size", "4,096"),
        (without(LLAMA, "vocab_size"), "vocab_size", "32,000"),
        (without(TINY["gpt2-tied"], "n_embd"), "n_embd", "768"),
    ],
)
def test_a_left_out_core_size_takes_the_class_default_and_says_so(config, field, default):
    spec = spec_from_config(config)
    assert spec.inventory is Inventory.APPROXIMATE
    assert f"the config gives no '{field}': transformers' default, {default}, is used" in (
        spec.warnings
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([1, 2], "JSON object"),
        ("llama", "JSON object"),
        (None, "JSON object"),
        (dict(LLAMA, model_type=7), "'model_type' must be a string"),
        (dict(LLAMA, hidden_size="4096"), "'hidden_size' must be a whole number"),
        (dict(LLAMA, hidden_size=True), "'hidden_size' must be a whole number"),
        (dict(LLAMA, hidden_size=64.5), "'hidden_size' must be a whole number"),
        (dict(LLAMA, hidden_size=0), "'hidden_size' must be at least 1"),
        (dict(LLAMA, num_hidden_layers=-2), "'num_hidden_layers' must be at least 1"),
        (dict(LLAMA, intermediate_size=10**12), "implausibly large"),
        (dict(LLAMA, num_hidden_layers=10**6), "implausibly large"),
        (dict(LLAMA, vocab_size=10**9), "implausibly large"),
        (dict(LLAMA, hidden_size=66), "not divisible by the 4 attention heads"),
        (dict(LLAMA, num_key_value_heads=3), "cannot be shared among 3 key/value heads"),
        (dict(LLAMA, num_attention_heads=128), "cannot split a hidden size of 64"),
        (dict(LLAMA, head_dim=0), "'head_dim' must be at least 1"),
        (dict(LLAMA, tie_word_embeddings="yes"), "'tie_word_embeddings' must be true or false"),
        (dict(LLAMA, attention_dropout="0.1"), "'attention_dropout' must be a number"),
        (dict(LLAMA, hidden_act=3), "'hidden_act' must be a string"),
        (dict(TINY["qwen2-tied-sliding"], layer_types=["full_attention"]), "lists 1 layers"),
        (
            dict(TINY["qwen2-tied-sliding"], layer_types=["full_attention", "x", "y", "x"]),
            "unknown attention kinds: x, y",
        ),
        (dict(TINY["qwen3_moe-sparse"], mlp_only_layers="0"), "'mlp_only_layers' must be a list"),
        (dict(TINY["qwen3_moe-sparse"], decoder_sparse_step=0), "'decoder_sparse_step'"),
        (dict(TINY["gemma3_text-pattern"], sliding_window_pattern=0), "'sliding_window_pattern'"),
        (dict(TINY["mixtral-moe"], num_experts_per_tok=9), "'num_experts_per_tok' = 9"),
        (
            dict(TINY["gemma3-multimodal"], text_config={"hidden_size": -1}),
            "'text_config.hidden_size' must be at least 1, not -1",
        ),
        (without(TINY["deepseek_v2-lite"], "num_experts_per_tok"), "'num_experts_per_tok'"),
        (dict(TINY["deepseek_v3-mla"], kv_lora_rank=None, q_lora_rank="x"), "'q_lora_rank'"),
        (dict(TINY["gpt2-tied"], add_cross_attention=True), "cross-attention"),
        (dict(TINY["bert-mlm"], is_decoder=True), "BERT as a decoder"),
        (dict(TINY["falcon-new-arch"], num_kv_heads=3), "3 key/value heads"),
        (dict(TINY["opt-pre"], ffn_dim=None), "no 'ffn_dim'"),
        ({"hidden_size": 64}, "a config without model_type is not supported"),
    ],
)
def test_bad_input_raises_config_error(config, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        spec_from_config(config)


def test_config_error_is_one_sentence():
    with pytest.raises(ConfigError) as err:
        spec_from_config(dict(LLAMA, hidden_size=66))
    assert "\n" not in str(err.value)


_JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(min_value=-3, max_value=40), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(sorted(TINY)),
    field=st.data(),
    value=_JSON_VALUES,
)
def test_any_single_bad_field_gives_a_spec_or_a_config_error(key, field, value):
    config = copy.deepcopy(TINY[key])
    target = config.get("text_config", config)
    name = field.draw(st.sampled_from(sorted(target)))
    target[name] = value
    try:
        spec = spec_from_config(config)
    except ConfigError:
        return
    assert spec.parameters > 0


def test_gemma_4_sliding_layers_keep_their_own_kv_heads_at_any_tensor_parallel_size():
    # Gemma 4 31B: sliding layers have num_key_value_heads 16 of head_dim 256, full layers
    # num_global_key_value_heads 4 of global_head_dim 512 (every sixth of 60 layers).
    from vramgui.core.inference import kv_bytes_per_token
    from vramgui.core.workload import Workload
    from vramgui.sources.catalog import find

    entry = find("gemma-4-31b-it-nvfp4")
    text = entry.config["text_config"]
    facts = entry.spec().facts
    sliding = [
        heads
        for kind, heads in zip(facts.layer_types, facts.layer_kv_heads, strict=True)
        if kind is LayerType.SLIDING
    ]
    full = [
        heads
        for kind, heads in zip(facts.layer_types, facts.layer_kv_heads, strict=True)
        if kind is LayerType.FULL
    ]
    assert set(sliding) == {text["num_key_value_heads"]} and len(sliding) == 50
    assert set(full) == {text["num_global_key_value_heads"]} and len(full) == 10
    # At tensor parallel 16 each rank keeps one head of each layer (full layers replicate
    # theirs): K and V of 256 (sliding) or 512 (full), 2 bytes each.
    w = Workload(engine="vllm", tp=16, gpus=16, kv_dtype="bf16")
    assert kv_bytes_per_token(entry.spec(), w) == (50 * 2 * 256 + 10 * 2 * 512) * 2
