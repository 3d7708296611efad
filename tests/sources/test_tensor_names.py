"""Tensor names of many families, transformers and GGUF, classified by role, block and module."""

import pytest

from vramgui.core.errors import ConfigError
from vramgui.core.model import Role
from vramgui.core.naming import classify

CASES = [
    # Llama / Mistral / Qwen
    ("model.embed_tokens.weight", Role.EMBEDDING, None, "embed_tokens", False),
    ("model.layers.3.self_attn.q_proj.weight", Role.ATTENTION, 3, "q_proj", False),
    ("model.layers.3.self_attn.k_proj.bias", Role.ATTENTION, 3, "k_proj", True),
    ("model.layers.12.mlp.down_proj.weight", Role.MLP, 12, "down_proj", False),
    ("model.layers.0.input_layernorm.weight", Role.NORM, 0, "input_layernorm", False),
    (
        "model.layers.0.post_attention_layernorm.weight",
        Role.NORM,
        0,
        "post_attention_layernorm",
        False,
    ),
    ("model.layers.1.self_attn.q_norm.weight", Role.NORM, 1, "q_norm", False),
    ("model.norm.weight", Role.NORM, None, "norm", False),
    ("lm_head.weight", Role.HEAD, None, "lm_head", False),
    # GPTQ / bitsandbytes side tensors belong to their module
    ("model.layers.2.self_attn.o_proj.qweight", Role.ATTENTION, 2, "o_proj", False),
    ("model.layers.2.mlp.up_proj.scales", Role.MLP, 2, "up_proj", False),
    ("model.layers.2.mlp.up_proj.weight.absmax", Role.MLP, 2, "up_proj", False),
    # GPT-2, BLOOM, Falcon
    ("transformer.wte.weight", Role.EMBEDDING, None, "wte", False),
    ("transformer.wpe.weight", Role.POSITION, None, "wpe", False),
    ("transformer.h.5.attn.c_attn.weight", Role.ATTENTION, 5, "c_attn", False),
    ("transformer.h.5.attn.c_proj.bias", Role.ATTENTION, 5, "c_proj", True),
    ("transformer.h.5.mlp.c_proj.weight", Role.MLP, 5, "c_proj", False),
    ("transformer.h.5.ln_1.weight", Role.NORM, 5, "ln_1", False),
    ("transformer.ln_f.bias", Role.NORM, None, "ln_f", True),
    ("h.0.self_attention.query_key_value.weight", Role.ATTENTION, 0, "query_key_value", False),
    ("h.0.mlp.dense_4h_to_h.weight", Role.MLP, 0, "dense_4h_to_h", False),
    ("word_embeddings_layernorm.weight", Role.NORM, None, "word_embeddings_layernorm", False),
    ("word_embeddings.weight", Role.EMBEDDING, None, "word_embeddings", False),
    # GPT-NeoX / Pythia
    ("gpt_neox.embed_in.weight", Role.EMBEDDING, None, "embed_in", False),
    ("gpt_neox.layers.4.attention.dense.weight", Role.ATTENTION, 4, "dense", False),
    ("gpt_neox.layers.4.mlp.dense_h_to_4h.bias", Role.MLP, 4, "dense_h_to_4h", True),
    ("embed_out.weight", Role.HEAD, None, "embed_out", False),
    # OPT
    ("model.decoder.layers.7.self_attn.out_proj.weight", Role.ATTENTION, 7, "out_proj", False),
    ("model.decoder.layers.7.fc1.weight", Role.MLP, 7, "fc1", False),
    ("model.decoder.final_layer_norm.weight", Role.NORM, None, "final_layer_norm", False),
    ("model.decoder.embed_positions.weight", Role.POSITION, None, "embed_positions", False),
    # BERT
    (
        "bert.embeddings.token_type_embeddings.weight",
        Role.POSITION,
        None,
        "token_type_embeddings",
        False,
    ),
    ("bert.encoder.layer.2.attention.self.query.weight", Role.ATTENTION, 2, "query", False),
    ("bert.encoder.layer.2.attention.output.dense.weight", Role.ATTENTION, 2, "dense", False),
    ("bert.encoder.layer.2.attention.output.LayerNorm.weight", Role.NORM, 2, "LayerNorm", False),
    ("bert.encoder.layer.2.intermediate.dense.weight", Role.MLP, 2, "dense", False),
    ("bert.encoder.layer.2.output.dense.weight", Role.MLP, 2, "dense", False),
    ("bert.pooler.dense.weight", Role.HEAD, None, "dense", False),
    # MoE: Mixtral, Qwen-MoE, DeepSeek, fused experts
    ("model.layers.1.block_sparse_moe.experts.7.w1.weight", Role.EXPERT, 1, "w1", False),
    ("model.layers.1.block_sparse_moe.gate.weight", Role.ROUTER, 1, "gate", False),
    ("model.layers.1.mlp.experts.3.gate_proj.weight", Role.EXPERT, 1, "gate_proj", False),
    ("model.layers.1.mlp.shared_expert.up_proj.weight", Role.SHARED_EXPERT, 1, "up_proj", False),
    (
        "model.layers.1.mlp.shared_expert_gate.weight",
        Role.SHARED_EXPERT,
        1,
        "shared_expert_gate",
        False,
    ),
    (
        "model.layers.1.mlp.shared_experts.down_proj.weight",
        Role.SHARED_EXPERT,
        1,
        "down_proj",
        False,
    ),
    ("model.layers.1.mlp.gate.weight", Role.ROUTER, 1, "gate", False),
    (
        "model.layers.1.mlp.gate.e_score_correction_bias",
        Role.ROUTER,
        1,
        "e_score_correction_bias",
        False,
    ),
    ("model.layers.1.mlp.experts.gate_up_proj", Role.EXPERT, 1, "gate_up_proj", False),
    ("model.layers.1.mlp.experts.gate_up_proj_bias", Role.EXPERT, 1, "gate_up_proj", True),
    ("model.layers.1.mlp.router.weight", Role.ROUTER, 1, "router", False),
    # Token mixers other than attention: their projections are MIXER, their convolutions and
    # state parameters are not linear layers
    ("model.layers.0.linear_attn.in_proj_qkvz.weight", Role.MIXER, 0, "in_proj_qkvz", False),
    ("model.layers.0.linear_attn.out_proj.weight", Role.MIXER, 0, "out_proj", False),
    ("model.layers.0.linear_attn.conv1d.weight", Role.OTHER, 0, "conv1d", False),
    ("model.layers.0.linear_attn.A_log", Role.OTHER, 0, "A_log", False),
    ("model.layers.0.linear_attn.norm.weight", Role.NORM, 0, "norm", False),
    ("backbone.layers.3.mixer.in_proj.weight", Role.MIXER, 3, "in_proj", False),
    ("backbone.layers.3.mixer.dt_proj.bias", Role.MIXER, 3, "dt_proj", True),
    ("model.layers.3.mixer.o_proj.weight", Role.ATTENTION, 3, "o_proj", False),
    ("model.layers.3.mixer.up_proj.weight", Role.MLP, 3, "up_proj", False),
    ("model.layers.2.conv.in_proj.weight", Role.MIXER, 2, "in_proj", False),
    ("model.layers.2.conv.conv.weight", Role.OTHER, 2, "conv", False),
    ("model.layers.1.temporal_block.linear_x.weight", Role.MIXER, 1, "linear_x", False),
    ("model.layers.4.shared_mlp.input_linear.weight", Role.MLP, 4, "input_linear", False),
    # cross-attention of encoder-decoder models
    ("model.decoder.layers.1.encoder_attn.out_proj.weight", Role.ATTENTION, 1, "out_proj", False),
    # MLA
    (
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
        Role.ATTENTION,
        0,
        "kv_a_proj_with_mqa",
        False,
    ),
    ("model.layers.0.self_attn.kv_a_layernorm.weight", Role.NORM, 0, "kv_a_layernorm", False),
    # GGUF
    ("token_embd.weight", Role.EMBEDDING, None, "embed_tokens", False),
    ("output.weight", Role.HEAD, None, "lm_head", False),
    ("output_norm.weight", Role.NORM, None, "norm", False),
    ("blk.9.attn_q.weight", Role.ATTENTION, 9, "q_proj", False),
    ("blk.9.attn_k.bias", Role.ATTENTION, 9, "k_proj", True),
    ("blk.9.attn_v.weight", Role.ATTENTION, 9, "v_proj", False),
    ("blk.9.attn_output.weight", Role.ATTENTION, 9, "o_proj", False),
    ("blk.9.attn_qkv.weight", Role.ATTENTION, 9, "qkv_proj", False),
    ("blk.9.ffn_gate.weight", Role.MLP, 9, "gate_proj", False),
    ("blk.9.ffn_up.weight", Role.MLP, 9, "up_proj", False),
    ("blk.9.ffn_down.weight", Role.MLP, 9, "down_proj", False),
    ("blk.9.ffn_gate_exps.weight", Role.EXPERT, 9, "gate_proj", False),
    ("blk.9.ffn_down_exps.weight", Role.EXPERT, 9, "down_proj", False),
    ("blk.9.ffn_up_shexp.weight", Role.SHARED_EXPERT, 9, "up_proj", False),
    ("blk.9.ffn_gate_inp.weight", Role.ROUTER, 9, "gate", False),
    ("blk.9.ffn_gate_inp_shexp.weight", Role.SHARED_EXPERT, 9, "shared_expert_gate", False),
    ("blk.9.attn_norm.weight", Role.NORM, 9, "input_layernorm", False),
    ("blk.9.ffn_norm.weight", Role.NORM, 9, "post_attention_layernorm", False),
    ("blk.9.attn_kv_a_mqa.weight", Role.ATTENTION, 9, "kv_a_proj_with_mqa", False),
    # Mamba / Nemotron-H: the token embedding is the model's child "embeddings"; deeper down,
    # "embeddings" is a container
    ("backbone.embeddings.weight", Role.EMBEDDING, None, "embeddings", False),
    ("model.embeddings.weight", Role.EMBEDDING, None, "embeddings", False),
    (
        "bert.embeddings.position_embeddings.weight",
        Role.POSITION,
        None,
        "position_embeddings",
        False,
    ),
    # Unknown
    ("model.some_new_thing.weight", Role.OTHER, None, "some_new_thing", False),
    ("blk.2.mystery.weight", Role.OTHER, 2, "mystery", False),
]


@pytest.mark.parametrize(
    ("name", "role", "layer", "module", "is_bias"), CASES, ids=[c[0] for c in CASES]
)
def test_classify(name, role, layer, module, is_bias):
    got = classify(name)
    assert (got.role, got.layer, got.module, got.is_bias) == (role, layer, module, is_bias)


def test_gguf_and_transformers_names_of_one_model_agree_on_module():
    pairs = [
        ("blk.4.attn_q.weight", "model.layers.4.self_attn.q_proj.weight"),
        ("blk.4.ffn_down.weight", "model.layers.4.mlp.down_proj.weight"),
        ("token_embd.weight", "model.embed_tokens.weight"),
    ]
    for gguf_name, hf_name in pairs:
        assert classify(gguf_name) == classify(hf_name)


def test_names_agree_with_the_inventories_core_families_synthesizes():
    """Headers and configs must describe a tensor alike: role, block, module and bias."""
    from vramgui.sources import catalog

    checked = 0
    for entry in catalog.load_catalog():
        try:
            spec = entry.spec()
        except ConfigError:
            continue  # an architecture the core refuses (test_catalog says which)
        for tensor in spec.tensors:
            got = classify(tensor.name)
            expected = (tensor.role, tensor.layer, tensor.module, tensor.is_bias)
            assert (got.role, got.layer, got.module, got.is_bias) == expected, (
                entry.name,
                tensor.name,
            )
            checked += 1
    assert checked > 10_000
