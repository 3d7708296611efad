"""Hand-written builders of the families whose memory is modelled in most detail (the
Llama-style decoders are in ``decoders``; GPT-2, OPT, GPT-NeoX, Falcon, BLOOM and BERT here).

Each family builder lists every parameter tensor with the names and shapes that transformers'
model class for it has (``named_parameters()``, tied tensors once), and fills the architecture
facts. Fields a config leaves out take the defaults of transformers' configuration class for the
family; the core sizes (hidden size, layers, heads, vocabulary, MLP width) must be present, since a
config without them describes no model in particular.

The model class is the one a user loads to serve or fine-tune the model: ``*ForCausalLM`` for
decoders (``Gemma3ForCausalLM`` on the text config of a multimodal Gemma 3 config, whose vision
tower is left out with a warning) and ``BertForMaskedLM`` for BERT (no pooler).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from vramgui.core.errors import ConfigError
from vramgui.core.families.decoders import llama_style_decoder
from vramgui.core.families.reader import (
    MAX_DIM,
    MAX_LAYERS,
    MAX_VOCAB,
    ConfigReader,
    InventoryBuilder,
    check_heads,
)
from vramgui.core.model import ArchFacts, Inventory, LayerType, ModelSpec, Role, Tensor

# --- GPT-2 style and other classic decoders, and BERT -------------------------------------------


def _mha_core(
    cfg: ConfigReader,
    hidden_keys: tuple[str, ...],
    layer_keys: tuple[str, ...],
    head_keys: tuple[str, ...],
) -> tuple[int, int, int, int]:
    """Hidden size, layers, heads and vocabulary of a multi-head model whose heads split hidden."""
    hidden = cfg.int(*hidden_keys)
    layers = cfg.int(*layer_keys, maximum=MAX_LAYERS)
    heads = cfg.int(*head_keys)
    check_heads(cfg, hidden, heads, heads, derived=True)
    return hidden, layers, heads, cfg.int("vocab_size", maximum=MAX_VOCAB)


class _Sizes(NamedTuple):
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int
    tie: bool


def _classic_facts(
    cfg: ConfigReader,
    model_type: str,
    sizes: _Sizes,
    *,
    act: str,
    dropout: tuple[float, float],
    is_decoder: bool = True,
) -> ArchFacts:
    """Facts of a full-attention, dense, LayerNorm model with ungated MLP."""
    return ArchFacts(
        model_type=model_type,
        num_layers=sizes.layers,
        hidden_size=sizes.hidden,
        num_heads=sizes.heads,
        num_kv_heads=sizes.kv_heads,
        head_dim=sizes.hidden // sizes.heads,
        intermediate_size=sizes.intermediate,
        vocab_size=sizes.vocab,
        max_position_embeddings=sizes.max_positions,
        tie_word_embeddings=sizes.tie,
        layer_types=(LayerType.FULL,) * sizes.layers,
        gated_mlp=False,
        hidden_act=act,
        norm="layer",
        is_decoder=is_decoder,
        moe_layers=(False,) * sizes.layers,
        attention_dropout=dropout[0],
        hidden_dropout=dropout[1],
        torch_dtype=cfg.torch_dtype(),
    )


_GPT_KEYS = (
    ("n_embd", "hidden_size"),
    ("n_layer", "num_hidden_layers"),
    ("n_head", "num_attention_heads"),
)


def _gpt2(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """GPT-2 (Conv1D weights stored in, out) and GPTBigCode (nn.Linear, optional multi-query)."""
    if cfg.bool("add_cross_attention"):
        raise ConfigError(
            f"{model_type} with cross-attention (encoder-decoder use) is not supported"
        )
    hidden, layers, heads, vocab = _mha_core(cfg, *_GPT_KEYS)
    bigcode = model_type == "gpt_bigcode"
    inner = cfg.int("n_inner", default=4 * hidden, maximum=MAX_DIM * 16)
    positions = cfg.int("n_positions", "max_position_embeddings", default=1024, maximum=1 << 24)
    tie = cfg.bool("tie_word_embeddings", default=True)
    kv_heads = 1 if bigcode and cfg.bool("multi_query", default=True) else heads
    head_dim = hidden // heads

    inv = InventoryBuilder()
    inv.embedding("transformer.wte", vocab, hidden)
    inv.embedding("transformer.wpe", positions, hidden, Role.POSITION)
    for i in range(layers):
        p = f"transformer.h.{i}"
        inv.norm(p, "ln_1", hidden, i, bias=True)
        qkv = hidden + 2 * kv_heads * head_dim
        if bigcode:
            inv.linear(f"{p}.attn", "c_attn", qkv, hidden, Role.ATTENTION, layer=i, bias=True)
            inv.linear(f"{p}.attn", "c_proj", hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        else:
            inv.conv1d(f"{p}.attn", "c_attn", hidden, qkv, Role.ATTENTION, layer=i)
            inv.conv1d(f"{p}.attn", "c_proj", hidden, hidden, Role.ATTENTION, layer=i)
        inv.norm(p, "ln_2", hidden, i, bias=True)
        if bigcode:
            inv.linear(f"{p}.mlp", "c_fc", inner, hidden, Role.MLP, layer=i, bias=True)
            inv.linear(f"{p}.mlp", "c_proj", hidden, inner, Role.MLP, layer=i, bias=True)
        else:
            inv.conv1d(f"{p}.mlp", "c_fc", hidden, inner, Role.MLP, layer=i)
            inv.conv1d(f"{p}.mlp", "c_proj", inner, hidden, Role.MLP, layer=i)
    inv.norm("transformer", "ln_f", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    sizes = _Sizes(hidden, layers, heads, kv_heads, inner, vocab, positions, tie)
    dropout = (cfg.float("attn_pdrop", default=0.1), cfg.float("resid_pdrop", default=0.1))
    facts = _classic_facts(
        cfg,
        model_type,
        sizes,
        act=cfg.str("activation_function", default="gelu_pytorch_tanh" if bigcode else "gelu_new"),
        dropout=dropout,
    )
    return facts, inv.tensors, "GPTBigCodeForCausalLM" if bigcode else "GPT2LMHeadModel"


def _opt(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """OPT: learned positions offset by 2, optional embedding projection, pre- or post-LN."""
    hidden, layers, heads, vocab = _mha_core(
        cfg, ("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",)
    )
    ffn = cfg.int("ffn_dim", maximum=MAX_DIM * 16)
    positions = cfg.int("max_position_embeddings", default=2048, maximum=1 << 24)
    embed_dim = cfg.int("word_embed_proj_dim", default=hidden)
    bias = cfg.bool("enable_bias", default=True)
    affine = cfg.bool("layer_norm_elementwise_affine", default=True)
    pre_ln = cfg.bool("do_layer_norm_before", default=True)
    tie = cfg.bool("tie_word_embeddings", default=True)

    def norm(prefix: str, module: str, layer: int | None = None) -> None:
        if affine:
            inv.norm(prefix, module, hidden, layer, bias=True)

    inv = InventoryBuilder()
    d = "model.decoder"
    inv.embedding(f"{d}.embed_tokens", vocab, embed_dim)
    inv.embedding(f"{d}.embed_positions", positions + 2, hidden, Role.POSITION)
    if embed_dim != hidden:
        inv.linear(d, "project_out", embed_dim, hidden, Role.OTHER)
        inv.linear(d, "project_in", hidden, embed_dim, Role.OTHER)
    if pre_ln and not cfg.bool("_remove_final_layer_norm"):
        norm(d, "final_layer_norm")
    for i in range(layers):
        p = f"{d}.layers.{i}"
        for module in ("k_proj", "v_proj", "q_proj", "out_proj"):
            inv.linear(f"{p}.self_attn", module, hidden, hidden, Role.ATTENTION, layer=i, bias=bias)
        norm(p, "self_attn_layer_norm", i)
        inv.linear(p, "fc1", ffn, hidden, Role.MLP, layer=i, bias=bias)
        inv.linear(p, "fc2", hidden, ffn, Role.MLP, layer=i, bias=bias)
        norm(p, "final_layer_norm", i)
    if not tie:
        inv.linear("", "lm_head", vocab, embed_dim, Role.HEAD)
    sizes = _Sizes(hidden, layers, heads, heads, ffn, vocab, positions, tie)
    dropout = (cfg.float("attention_dropout"), cfg.float("dropout", default=0.1))
    facts = _classic_facts(
        cfg, model_type, sizes, act=cfg.str("activation_function", default="relu"), dropout=dropout
    )
    return facts, inv.tensors, "OPTForCausalLM"


def _gpt_neox(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """GPT-NeoX / Pythia: fused query_key_value, LayerNorms with bias, untied head by default."""
    hidden, layers, heads, vocab = _mha_core(
        cfg, ("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",)
    )
    inter = cfg.int("intermediate_size", maximum=MAX_DIM * 16)
    attn_bias = cfg.bool("attention_bias", default=True)
    tie = cfg.bool("tie_word_embeddings", default=False)

    inv = InventoryBuilder()
    inv.embedding("gpt_neox.embed_in", vocab, hidden)
    for i in range(layers):
        p = f"gpt_neox.layers.{i}"
        inv.norm(p, "input_layernorm", hidden, i, bias=True)
        inv.norm(p, "post_attention_layernorm", hidden, i, bias=True)
        a = f"{p}.attention"
        inv.linear(
            a, "query_key_value", 3 * hidden, hidden, Role.ATTENTION, layer=i, bias=attn_bias
        )
        inv.linear(a, "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=attn_bias)
        inv.linear(f"{p}.mlp", "dense_h_to_4h", inter, hidden, Role.MLP, layer=i, bias=True)
        inv.linear(f"{p}.mlp", "dense_4h_to_h", hidden, inter, Role.MLP, layer=i, bias=True)
    inv.norm("gpt_neox", "final_layer_norm", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    positions = cfg.int("max_position_embeddings", default=2048, maximum=1 << 24)
    sizes = _Sizes(hidden, layers, heads, heads, inter, vocab, positions, tie)
    dropout = (cfg.float("attention_dropout"), cfg.float("hidden_dropout"))
    facts = _classic_facts(
        cfg, model_type, sizes, act=cfg.str("hidden_act", default="gelu"), dropout=dropout
    )
    return facts, inv.tensors, "GPTNeoXForCausalLM"


def _falcon(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """Falcon: old (multi-query, one LayerNorm) and new decoder architecture (grouped KV)."""
    hidden = cfg.int("n_embed", "hidden_size")
    layers = cfg.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = cfg.int("num_attention_heads")
    vocab = cfg.int("vocab_size", maximum=MAX_VOCAB)
    new_arch = cfg.bool("new_decoder_architecture")
    if new_arch:
        kv_heads = cfg.int("num_kv_heads", default=heads)
    else:
        kv_heads = 1 if cfg.bool("multi_query", default=True) else heads
    check_heads(cfg, hidden, heads, kv_heads, derived=True)
    ffn = cfg.int("ffn_hidden_size", default=4 * hidden, maximum=MAX_DIM * 16)
    bias = cfg.bool("bias")
    parallel = cfg.bool("parallel_attn", default=True)
    norms_in_parallel = cfg.opt_int("num_ln_in_parallel_attn") or (2 if new_arch else None)
    tie = cfg.bool("tie_word_embeddings", default=True)
    head_dim = hidden // heads

    inv = InventoryBuilder()
    inv.embedding("transformer.word_embeddings", vocab, hidden)
    for i in range(layers):
        p = f"transformer.h.{i}"
        a = f"{p}.self_attention"
        qkv = (heads + 2 * kv_heads) * head_dim
        inv.linear(a, "query_key_value", qkv, hidden, Role.ATTENTION, layer=i, bias=bias)
        inv.linear(a, "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=bias)
        inv.linear(f"{p}.mlp", "dense_h_to_4h", ffn, hidden, Role.MLP, layer=i, bias=bias)
        inv.linear(f"{p}.mlp", "dense_4h_to_h", hidden, ffn, Role.MLP, layer=i, bias=bias)
        if not parallel:
            inv.norm(p, "post_attention_layernorm", hidden, i, bias=True)
            inv.norm(p, "input_layernorm", hidden, i, bias=True)
        elif norms_in_parallel == 2:
            inv.norm(p, "ln_attn", hidden, i, bias=True)
            inv.norm(p, "ln_mlp", hidden, i, bias=True)
        else:
            inv.norm(p, "input_layernorm", hidden, i, bias=True)
    inv.norm("transformer", "ln_f", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    positions = cfg.int("max_position_embeddings", default=2048, maximum=1 << 24)
    sizes = _Sizes(hidden, layers, heads, kv_heads, ffn, vocab, positions, tie)
    dropout = (cfg.float("attention_dropout"), cfg.float("hidden_dropout"))
    facts = _classic_facts(
        cfg, model_type, sizes, act=cfg.str("activation", default="gelu"), dropout=dropout
    )
    return facts, inv.tensors, "FalconForCausalLM"


def _bloom(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """BLOOM: ALiBi (no position table), an extra LayerNorm on the embeddings, biases throughout."""
    hidden, layers, heads, vocab = _mha_core(
        cfg,
        ("n_embed", "hidden_size"),
        ("n_layer", "num_hidden_layers"),
        ("n_head", "num_attention_heads"),
    )
    tie = cfg.bool("tie_word_embeddings", default=True)

    inv = InventoryBuilder()
    inv.embedding("transformer.word_embeddings", vocab, hidden)
    inv.norm("transformer", "word_embeddings_layernorm", hidden, bias=True)
    for i in range(layers):
        p = f"transformer.h.{i}"
        inv.norm(p, "input_layernorm", hidden, i, bias=True)
        a = f"{p}.self_attention"
        inv.linear(a, "query_key_value", 3 * hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        inv.linear(a, "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        inv.norm(p, "post_attention_layernorm", hidden, i, bias=True)
        inv.linear(f"{p}.mlp", "dense_h_to_4h", 4 * hidden, hidden, Role.MLP, layer=i, bias=True)
        inv.linear(f"{p}.mlp", "dense_4h_to_h", hidden, 4 * hidden, Role.MLP, layer=i, bias=True)
    inv.norm("transformer", "ln_f", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    # ALiBi has no trained length; BLOOM was trained on 2048-token sequences.
    positions = cfg.int("seq_length", "max_position_embeddings", default=2048, maximum=1 << 24)
    sizes = _Sizes(hidden, layers, heads, heads, 4 * hidden, vocab, positions, tie)
    dropout = (cfg.float("attention_dropout"), cfg.float("hidden_dropout"))
    facts = _classic_facts(cfg, model_type, sizes, act="gelu", dropout=dropout)
    return facts, inv.tensors, "BloomForCausalLM"


def _bert(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """BERT as BertForMaskedLM: encoder, no pooler, MLM head tied to the word embeddings."""
    if cfg.bool("is_decoder") or cfg.bool("add_cross_attention"):
        raise ConfigError("BERT as a decoder (is_decoder / add_cross_attention) is not supported")
    hidden, layers, heads, vocab = _mha_core(
        cfg, ("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",)
    )
    inter = cfg.int("intermediate_size", maximum=MAX_DIM * 16)
    positions = cfg.int("max_position_embeddings", default=512, maximum=1 << 24)
    types = cfg.int("type_vocab_size", default=2, maximum=MAX_VOCAB)
    tie = cfg.bool("tie_word_embeddings", default=True)

    inv = InventoryBuilder()
    e = "bert.embeddings"
    inv.embedding(f"{e}.word_embeddings", vocab, hidden)
    inv.embedding(f"{e}.position_embeddings", positions, hidden, Role.POSITION)
    inv.embedding(f"{e}.token_type_embeddings", types, hidden, Role.POSITION)
    inv.norm(e, "LayerNorm", hidden, bias=True)
    for i in range(layers):
        p = f"bert.encoder.layer.{i}"
        s = f"{p}.attention.self"
        for module in ("query", "key", "value"):
            inv.linear(s, module, hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        inv.linear(
            f"{p}.attention.output", "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=True
        )
        inv.norm(f"{p}.attention.output", "LayerNorm", hidden, i, bias=True)
        inv.linear(f"{p}.intermediate", "dense", inter, hidden, Role.MLP, layer=i, bias=True)
        inv.linear(f"{p}.output", "dense", hidden, inter, Role.MLP, layer=i, bias=True)
        inv.norm(f"{p}.output", "LayerNorm", hidden, i, bias=True)
    c = "cls.predictions"
    inv.add(f"{c}.bias", (vocab,), Role.HEAD, None, "predictions", is_bias=True)
    inv.linear(f"{c}.transform", "dense", hidden, hidden, Role.HEAD, bias=True)
    inv.norm(f"{c}.transform", "LayerNorm", hidden, bias=True)
    if not tie:
        # Untied, the decoder keeps its own bias too; tied, it shares cls.predictions.bias.
        inv.linear(c, "decoder", vocab, hidden, Role.HEAD, bias=True)
    sizes = _Sizes(hidden, layers, heads, heads, inter, vocab, positions, tie)
    dropout = (
        cfg.float("attention_probs_dropout_prob", default=0.1),
        cfg.float("hidden_dropout_prob", default=0.1),
    )
    facts = _classic_facts(
        cfg,
        model_type,
        sizes,
        act=cfg.str("hidden_act", default="gelu"),
        dropout=dropout,
        is_decoder=False,
    )
    return facts, inv.tensors, "BertForMaskedLM"


# --- unknown model types ---------------------------------------------------------------------

# Names other architectures use for the fields a Llama-style estimate needs, first match wins.
_REQUIRED_ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}
_OPTIONAL_ALIASES: dict[str, tuple[str, ...]] = {
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "seq_length"),
    "tie_word_embeddings": ("tie_word_embeddings",),
    "hidden_act": ("hidden_act", "activation_function"),
    "attention_dropout": ("attention_dropout",),
    "torch_dtype": ("torch_dtype", "dtype"),
}


def llama_style(config: Mapping[str, Any], model_type: str) -> ModelSpec:
    """A config of a type we do not know, estimated as a Llama-style decoder of the same sizes."""
    data: dict[str, Any] = {"model_type": "llama"}
    missing = []
    for canonical, aliases in (_REQUIRED_ALIASES | _OPTIONAL_ALIASES).items():
        found = next((config[k] for k in aliases if config.get(k) is not None), None)
        if found is not None:
            data[canonical] = found
        elif canonical in _REQUIRED_ALIASES:
            missing.append(canonical)
    label = f"model_type '{model_type}'" if model_type else "a config without model_type"
    if missing:
        raise ConfigError(
            f"{label} is not supported, and the config lacks {', '.join(missing)} "
            "needed to estimate it as a Llama-style decoder"
        )
    facts, tensors, _ = llama_style_decoder(ConfigReader(data, model_type or "unknown"), "llama")
    architectures = config.get("architectures")
    architecture = (
        architectures[0]
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
        else ""
    )
    return ModelSpec(
        name="",
        facts=replace(facts, model_type=model_type),
        tensors=tuple(tensors),
        architecture=architecture,
        warnings=(f"{label} is not known; estimated as a Llama-style decoder of the same sizes",),
        source="config.json",
        inventory=Inventory.APPROXIMATE,
    )


# --- public API ------------------------------------------------------------------------------

_Builder = Callable[[ConfigReader, str], tuple[ArchFacts, list[Tensor], str]]

_BUILDERS: dict[str, _Builder] = {
    "llama": llama_style_decoder,
    "mistral": llama_style_decoder,
    "mixtral": llama_style_decoder,
    "qwen2": llama_style_decoder,
    "qwen2_moe": llama_style_decoder,
    "qwen3": llama_style_decoder,
    "qwen3_moe": llama_style_decoder,
    "gemma": llama_style_decoder,
    "gemma2": llama_style_decoder,
    "gemma3_text": llama_style_decoder,
    "phi3": llama_style_decoder,
    "deepseek_v2": llama_style_decoder,
    "deepseek_v3": llama_style_decoder,
    "gpt2": _gpt2,
    "gpt_bigcode": _gpt2,
    "opt": _opt,
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "bloom": _bloom,
    "bert": _bert,
}

CLASSIC_TYPES: frozenset[str] = frozenset(_BUILDERS)


def classic_spec(config: Mapping[str, Any], model_type: str, label: str) -> ModelSpec:
    """The spec of a family with a hand-written builder (facts modelled in detail).

    Raises:
        ConfigError: the config lacks a needed field or has an impossible value.
    """
    facts, tensors, architecture = _BUILDERS[model_type](
        ConfigReader(config, model_type), model_type
    )
    return ModelSpec(
        name=label,
        facts=facts,
        tensors=tuple(tensors),
        architecture=architecture,
        source="config.json",
    )
