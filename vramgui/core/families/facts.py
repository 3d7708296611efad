"""Architecture facts of any model type from its resolved config and its exact tensor list.

The tensors say most of what the KV cache needs: which blocks attend (they hold query / key /
value projections), how wide each block's keys and values are (the projections' output sizes),
which blocks are Mamba, linear-attention or short-convolution mixers (their tell-tale parameters),
which are MoE blocks (expert tensors) and how many experts they hold. The config adds what no
tensor shows: attention windows and chunks, the per-layer kinds it names, top-k routing, state
sizes. Each fact read from an assumption rather than the model is returned as a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vramgui.core.errors import ConfigError, shown
from vramgui.core.model import ArchFacts, LayerType, Role, Tensor

# Prefixes under which multimodal configs keep their language model's attributes.
_LM_PREFIXES = ("text_config.", "language_config.", "llm_config.", "decoder.", "")

_ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": (
        "hidden_size",
        "n_embd",
        "n_embed",
        "d_model",
        "dim",
        "hidden_dim",
        "model_dim",
        "emb_dim",
    ),
    "num_hidden_layers": (
        "num_hidden_layers",
        "n_layer",
        "n_layers",
        "num_layers",
        "decoder_layers",
    ),
    "num_attention_heads": (
        "num_attention_heads",
        "n_head",
        "n_heads",
        "num_heads",
        "decoder_attention_heads",
    ),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "kv_n_heads"),
    "head_dim": ("head_dim", "attention_head_dim", "kv_channels"),
    "intermediate_size": (
        "intermediate_size",
        "ffn_dim",
        "n_inner",
        "d_ff",
        "ffn_hidden_size",
        "decoder_ffn_dim",
        "dff",
    ),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": (
        "max_position_embeddings",
        "n_positions",
        "seq_length",
        "max_sequence_length",
        "n_ctx",
        "max_seq_len",
    ),
    "hidden_act": ("hidden_act", "hidden_activation", "activation_function", "mlp_hidden_act"),
    "experts_per_token": (
        "num_experts_per_tok",
        "num_experts_per_token",
        "moe_topk",
        "top_k_experts",
        "moe_k",
        "num_selected_experts",
        "top_k",
    ),
    "moe_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "sliding_window": ("sliding_window", "sliding_window_size", "attention_window"),
    "attention_chunk_size": ("attention_chunk_size",),
    "attention_dropout": ("attention_dropout", "attn_pdrop", "attention_probs_dropout_prob"),
    "hidden_dropout": ("hidden_dropout", "resid_pdrop", "hidden_dropout_prob", "dropout"),
}
# The sizes every model has, under each of their names: at least 1 wherever a config gives them.
_CORE_SIZES = frozenset(
    name
    for fact in (
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
    )
    for name in _ALIASES[fact]
)
_KIND_NAMES: dict[str, LayerType] = {
    "full_attention": LayerType.FULL,
    "attention": LayerType.FULL,
    "global": LayerType.FULL,
    "sliding_attention": LayerType.SLIDING,
    "local": LayerType.SLIDING,
    "chunked_attention": LayerType.CHUNKED,
    "linear_attention": LayerType.LINEAR,
    "mamba": LayerType.MAMBA,
    "conv": LayerType.CONV,
}
_Q = ("q_proj", "query", "wq", "q_b_proj", "q_a_proj", "q_lin", "q", "query_proj")
_K = ("k_proj", "key", "wk", "k_lin", "k", "key_proj")
_V = ("v_proj", "value", "wv", "v_lin", "v", "value_proj")
_FUSED = ("qkv_proj", "query_key_value", "c_attn", "Wqkv", "qkv")
_MLA = "kv_a_proj_with_mqa"
_GATED = ("gate_proj", "gate_up_proj", "w1", "w3", "gate", "wi_0")


@dataclass(frozen=True, slots=True)
class Facts:
    """The facts and what in them rests on an assumption."""

    facts: ArchFacts
    warnings: tuple[str, ...]


def lm_prefix(flat: Mapping[str, Any]) -> str:
    """The prefix of the language model's attributes in a (possibly multimodal) config."""
    for prefix in _LM_PREFIXES:
        if any(f"{prefix}{k}" in flat for k in _ALIASES["hidden_size"]):
            return prefix
    return ""


class _Reader:
    def __init__(self, flat: Mapping[str, Any], prefix: str) -> None:
        self.flat = flat
        self.prefix = prefix

    def get(self, fact: str, default: Any = None) -> Any:
        for name in _ALIASES.get(fact, (fact,)):
            for key in (f"{self.prefix}{name}", name):
                value = self.flat.get(key)
                if value is not None:
                    return value
        return default

    def layer_int(self, fact: str, layer: int, default: int) -> int:
        """The fact for one layer where the config lists it per layer (Gemma 4's head_dim:
        ``global_head_dim`` on full-attention layers only), else ``default``."""
        value = self.get(fact)
        if isinstance(value, list) and layer < len(value) and _is_int(value[layer]):
            return int(value[layer])
        return default

    def int(self, fact: str, default: int | None = None) -> int | None:
        value = self.get(fact)
        if isinstance(value, list) and value and all(_is_int(v) for v in value):
            return int(max(value))
        return int(value) if _is_int(value) else default

    def float(self, fact: str) -> float:
        value = self.get(fact)
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
        )


def check_core_sizes(flat: Mapping[str, Any]) -> None:
    """Hold every core size of a resolved config (hidden size, heads, KV heads, head_dim, MLP
    width, vocabulary; the model's and its sub-configs', per-layer lists included) to what the
    classic families require: a whole number, at least 1.

    Raises:
        ConfigError: naming the first size that is not.
    """
    for key, value in flat.items():
        if value is None or key.rpartition(".")[2] not in _CORE_SIZES:
            continue
        for v in value if isinstance(value, list) else (value,):
            if not _is_int(v):
                raise ConfigError(f"'{key}' must be a whole number, not {shown(value)}")
            if v < 1:
                raise ConfigError(f"'{key}' must be at least 1, not {v}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def facts_for(
    model_type: str, flat: Mapping[str, Any], tensors: Sequence[Tensor], num_layers: int
) -> Facts:
    """ArchFacts of a table architecture.

    Args:
        model_type: the config's model_type.
        flat: the resolved config (configs.resolve).
        tensors: every parameter tensor, blocks numbered 0..num_layers-1.
        num_layers: the decoder blocks.
    """
    r = _Reader(flat, lm_prefix(flat))
    warnings: list[str] = []
    by_layer: list[list[Tensor]] = [[] for _ in range(num_layers)]
    for t in tensors:
        if t.layer is not None and 0 <= t.layer < num_layers:
            by_layer[t.layer].append(t)
    embed = next((t for t in tensors if t.role is Role.EMBEDDING and len(t.shape) == 2), None)
    hidden = r.int("hidden_size") or (embed.shape[1] if embed else 0)
    vocab = r.int("vocab_size") or (embed.shape[0] if embed else 0)
    heads = r.int("num_attention_heads") or 1
    head_dim = r.int("head_dim") or (hidden // heads if heads else 0)
    kv_heads = r.int("num_key_value_heads")
    if kv_heads is None:
        kv_heads = 1 if r.get("multi_query") else heads
    max_positions = r.int("max_position_embeddings")
    if max_positions is None:
        max_positions = 4096
        warnings.append("the config states no context length; 4,096 tokens assumed")

    kinds, kv_widths, kv_heads_per_layer, states = [], [], [], []
    named = _named_kinds(r, num_layers)
    window = r.int("sliding_window")
    chunk = r.int("attention_chunk_size")
    for i, members in enumerate(by_layer):
        modules = {t.module for t in members}
        kind = _mixer(members, modules)
        # Attention beside Mamba in one block (Falcon-H1): the block keeps both caches.
        parallel = kind is LayerType.MAMBA and bool(modules & {*_Q, *_K, *_FUSED})
        if parallel:
            kind = LayerType.FULL
        named_kind = named[i] if named is not None else None
        if kind is LayerType.FULL and named_kind is not None:
            kind = named_kind
        if kind is LayerType.SLIDING and not window:
            kind = LayerType.FULL
        if kind is LayerType.CHUNKED and not chunk:
            kind = LayerType.FULL
        kinds.append(kind)
        layer_head_dim = r.layer_int("head_dim", i, head_dim)
        width, n_kv = _kv(members, modules, r, heads, layer_head_dim) if kind.has_kv else (0, 0)
        if kind.has_kv and not width:
            # Keys and values in parameters the names do not tell apart: sized from the config.
            n_kv = max(1, kv_heads)
            width = 2 * n_kv * head_dim
            warnings.append(
                f"{model_type}'s key / value projections are not named as vramgui knows them; "
                "the KV cache is sized from the config's heads"
            )
        kv_widths.append(width)
        kv_heads_per_layer.append(n_kv)
        if parallel:
            state = _state(LayerType.MAMBA, members, r)
        else:
            state = _state(kind, members, r) if not kind.has_kv else 0
        if state is None:
            state = 0
            warnings.append(
                f"the state a {kind.value} block keeps is not modelled for {model_type}: "
                "the cache leaves it out"
            )
        states.append(state)
    if kinds and not any(k.has_kv for k in kinds) and not any(states):
        warnings.append(
            f"no block of {model_type} was recognised as attention or a state-space mixer"
        )

    experts, moe_width = _experts(tensors, hidden)
    top_k = r.int("experts_per_token", 0) or 0
    if experts and not top_k:
        top_k = 1
        warnings.append("the config states no experts per token; 1 assumed")
    intermediate = r.int("intermediate_size") or _mlp_width(by_layer, hidden)
    gated = any(t.module in _GATED and t.role in (Role.MLP, Role.EXPERT) for t in tensors)
    norm_bias = any(t.role is Role.NORM and t.is_bias for t in tensors)
    mla = any(t.module == _MLA for t in tensors)
    # DeepSeek sparse attention's indexer weighs its heads' scores with weights_proj.
    indexer = any(t.module == "weights_proj" for t in tensors)
    # Mamba 2 keeps one A per head (Mamba 1 a matrix per channel) and projects with in_proj
    # (the gated delta rule, with one A per head too, with in_proj_qkv...).
    mamba2 = any(t.name.endswith("A_log") and len(t.shape) == 1 for t in tensors) and any(
        t.module == "in_proj" for t in tensors
    )
    torch_dtype = r.get("torch_dtype") or r.get("dtype")
    facts = ArchFacts(
        model_type=model_type,
        num_layers=num_layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=max(1, kv_heads),
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        max_position_embeddings=max_positions,
        tie_word_embeddings=not any(t.role is Role.HEAD for t in tensors if len(t.shape) == 2),
        layer_types=tuple(kinds),
        sliding_window=window if LayerType.SLIDING in kinds else None,
        gated_mlp=gated,
        hidden_act=str(r.get("hidden_act", "silu")),
        norm="layer" if norm_bias else "rms",
        is_decoder=True,
        kv_lora_rank=r.int("kv_lora_rank") if mla else None,
        q_lora_rank=r.int("q_lora_rank") if mla else None,
        qk_rope_head_dim=r.int("qk_rope_head_dim") if mla else None,
        qk_nope_head_dim=r.int("qk_nope_head_dim") if mla else None,
        v_head_dim=r.int("v_head_dim") if mla else None,
        num_experts=experts,
        experts_per_token=min(top_k, experts) if experts else 0,
        num_shared_experts=1 if any(t.role is Role.SHARED_EXPERT for t in tensors) else 0,
        moe_intermediate_size=r.int("moe_intermediate_size") or moe_width,
        moe_layers=tuple(any(t.role is Role.EXPERT for t in m) for m in by_layer),
        attention_dropout=r.float("attention_dropout"),
        hidden_dropout=r.float("hidden_dropout"),
        torch_dtype=torch_dtype.removeprefix("torch.") if isinstance(torch_dtype, str) else None,
        attention_chunk_size=chunk if LayerType.CHUNKED in kinds else None,
        layer_kv_widths=tuple(kv_widths),
        layer_kv_heads=tuple(kv_heads_per_layer),
        layer_state_elements=tuple(states),
        index_topk=r.int("index_topk") if indexer else None,
        ssm_chunk_size=(r.int("chunk_size") or r.int("mamba_chunk_size") or 256)
        if mamba2
        else None,
    )
    return Facts(facts, tuple(dict.fromkeys(warnings)))


def _named_kinds(r: _Reader, layers: int) -> list[LayerType | None] | None:
    """Per-layer attention kinds the config names (``layer_types``), where it names them."""
    names = r.get("layer_types")
    if not isinstance(names, list) or len(names) != layers:
        return None
    return [_KIND_NAMES.get(n) if isinstance(n, str) else None for n in names]


def _mixer(members: Sequence[Tensor], modules: set[str]) -> LayerType:
    """What mixes tokens in one block, from its parameters."""
    names = [t.name for t in members]
    if any(".linear_attn." in n or ".linear_attention." in n for n in names):
        return LayerType.LINEAR
    if any(n.endswith("A_log") or n.endswith(".A") for n in names) and any(
        ".mamba." in n or ".mixer." in n or ".ssm." in n or ".mamba2." in n for n in names
    ):
        return LayerType.MAMBA
    if modules & {*_Q, *_K, *_FUSED, _MLA} or any(".self_attn." in n for n in names):
        return LayerType.FULL
    if any(".conv." in n or ".short_conv." in n for n in names):
        return LayerType.CONV
    return LayerType.NONE


def _out(members: Sequence[Tensor], modules: tuple[str, ...]) -> int:
    return sum(
        t.shape[0]
        for t in members
        if t.module in modules and not t.is_bias and t.role is Role.ATTENTION and len(t.shape) == 2
    )


def _kv(
    members: Sequence[Tensor], modules: set[str], r: _Reader, heads: int, head_dim: int
) -> tuple[int, int]:
    """Key + value elements one token keeps in one block, and the block's key / value heads."""
    if _MLA in modules:
        rank, rope = r.int("kv_lora_rank") or 0, r.int("qk_rope_head_dim") or 0
        return rank + rope, 1
    k, v = _out(members, _K), _out(members, _V)
    if not k and modules & set(_FUSED):
        q = heads * head_dim
        fused = _out(members, _FUSED)
        k = v = max(0, fused - q) // 2
    if not v:
        v = k  # keys shared as values (attention_k_eq_v)
    n_kv = max(1, k // head_dim) if head_dim else 1
    return k + v, n_kv


def _state(kind: LayerType, members: Sequence[Tensor], r: _Reader) -> int | None:
    """Elements of the fixed state one sequence keeps in a non-attention block, or None."""
    if kind is LayerType.NONE:
        return 0
    conv = next(
        (t for t in members if t.name.endswith("conv1d.weight") or t.name.endswith("conv.weight")),
        None,
    )
    # transformers' caches keep the last kernel_size inputs of each channel.
    conv_state = conv.shape[0] * conv.shape[-1] if conv is not None and len(conv.shape) == 3 else 0
    if kind is LayerType.CONV:
        return conv_state or None
    a_log = next((t for t in members if t.name.endswith("A_log")), None)
    if kind is LayerType.MAMBA and a_log is not None:
        if len(a_log.shape) == 2:  # Mamba 1: A is (d_inner, d_state)
            return conv_state + math.prod(a_log.shape)
        out = next((t for t in members if t.module == "out_proj" and len(t.shape) == 2), None)
        d_state = r.int("ssm_state_size") or r.int("mamba_d_state") or r.int("state_size")
        if out is None or not d_state:
            return None
        return conv_state + out.shape[1] * d_state  # Mamba 2: heads x head_dim x d_state
    if kind is LayerType.LINEAR:
        k_dim, v_dim = r.int("linear_key_head_dim"), r.int("linear_value_head_dim")
        v_heads = r.int("linear_num_value_heads") or r.int("linear_num_heads")
        if k_dim and v_dim and v_heads:
            return conv_state + v_heads * k_dim * v_dim
        return None
    return None


def _experts(tensors: Sequence[Tensor], hidden: int) -> tuple[int, int]:
    """Routed experts per MoE block, and one expert's intermediate width."""
    for t in tensors:
        if t.role is Role.EXPERT and not t.is_bias and len(t.shape) == 3:
            width = min(t.shape[1:])
            if t.module == "gate_up_proj":
                # (experts, 2 x width, hidden) or transposed (experts, hidden, 2 x width)
                other = [n for n in t.shape[1:] if n != hidden]
                width = (other[0] if other else t.shape[1]) // 2
            return t.shape[0], width
    numbered: dict[tuple[int | None, str], set[str]] = {}
    width = 0
    for t in tensors:
        if t.role is Role.EXPERT and ".experts." in t.name:
            head, _, rest = t.name.partition(".experts.")
            index = rest.split(".", 1)[0]
            if index.isdigit():
                numbered.setdefault((t.layer, head), set()).add(index)
                if not t.is_bias and len(t.shape) == 2:
                    width = width or min(t.shape)
    if numbered:
        return max(len(v) for v in numbered.values()), width
    return 0, 0


def _mlp_width(by_layer: Sequence[Sequence[Tensor]], hidden: int) -> int:
    for members in by_layer:
        for t in members:
            if t.role is Role.MLP and not t.is_bias and len(t.shape) == 2 and hidden in t.shape:
                other = t.shape[0] if t.shape[1] == hidden else t.shape[1]
                if other != hidden:
                    return other
    return 4 * hidden
