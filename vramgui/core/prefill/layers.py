"""What each decoder block is made of, read from its tensors and the architecture facts: the
widths of its attention (and the variants its code runs: gates, per-head norms, sinks, MLA, a
sparse indexer, sliding windows), its token mixer where it is not attention, and its MLP or
experts. Blocks that read alike run the same program; the prefill runs one per kind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.core.model import LayerType, ModelSpec, Role, Tensor

_Q = ("q_proj", "query", "wq", "q_lin")
_K = ("k_proj", "key", "wk", "k_lin")
_V = ("v_proj", "value", "wv", "v_lin")
_FUSED_QKV = frozenset({"qkv_proj", "query_key_value", "c_attn", "Wqkv", "qkv"})
_OUT = ("o_proj", "out_proj", "dense", "c_proj", "wo", "o")
# Per-head norms of q and k.
_HEAD_NORMS = frozenset({"q_norm", "k_norm", "q_layernorm", "k_layernorm"})
# Norms of a dense MLP's product, before its down projection.
_MLP_NORMS = frozenset({"ffn_sub_norm"})
# Submodules whose norms are their own, not the block's.
_INNER = ("self_attn", "attn", "attention", "mixer", "linear_attn", "indexer", "mamba")
# Families whose experts run every token through every expert (one batched matmul per
# projection), weighted by a sigmoid of the router's top-k scores.
DENSE_EXPERTS = frozenset({"llama4_text", "llama4"})
# Families whose experts apply gpt-oss's clamped, biased GLU (gate * sigmoid(alpha * gate) *
# (up + 1)) rather than act(gate) * up.
CLAMPED_GLU = frozenset({"gpt_oss"})
# Families whose experts get fp32 top-k routing weights whatever the model's dtype (the router
# upcasts its logits and never casts back; transformers 5.24): the weighted slots, their reordered
# copy and their sum are fp32 too.
FP32_ROUTING = frozenset(
    {
        "afmoe", "axk1", "axk2", "bailing_hybrid", "beam", "deepseek_v2", "deepseek_v3",
        "deepseek_v32", "dots3_note_text", "exaone_moe", "flint", "gemma4", "gemma4_text",
        "gemma4_unified_text", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "hy_v3", "hy_v4",
        "kimi_linear", "kolibri1", "longcat_flash", "mimo_v2_flash", "minimax_m2",
        "minimax_m3_vl_text", "mixtral", "nemotron_h", "sarvam_mla", "sarvam_moe", "solar_open",
    }
)  # fmt: skip
# Families whose rotary embedding hands out fp32 cos / sin (no cast to the hidden states' dtype):
# q * cos and its sum come out fp32, cast back at the end.
FP32_ROTARY = frozenset(
    {
        "beam",
        "ernie4_5",
        "ernie4_5_moe",
        "flex_olmo",
        "lfm3",
        "olmo",
        "olmo2",
        "olmo3",
        "olmo_hybrid",
    }
)
# Families whose rotary embedding upcasts q and k (``q.float()``) and rotates them in fp32,
# rotate_half stacking the interleaved pairs.
UPCAST_ROTARY = frozenset({"cohere", "cohere2", "cohere2_moe"})
# Families whose sliding-window layers alone rotate q and k (the others have no positions).
SLIDING_ROTARY_ONLY = frozenset({"cohere2"})
# Families that make one rotary table per attention kind (its own head size and base).
ROTARY_PER_KIND = frozenset(
    {
        "beam", "dory", "dots3_note_text", "gemma3", "gemma3_text", "gemma3n_text", "gemma4",
        "gemma4_text", "gemma4_unified_text", "laguna", "mellum", "mimo_v2_flash",
        "modernbert-decoder", "olmo3", "step3p7", "zaya",
    }
)  # fmt: skip
# Families that RMS-norm their values (without a weight, so no tensor says so).
V_NORM = frozenset({"gemma3n", "gemma3n_text", "gemma4", "gemma4_text", "gemma4_unified_text"})
# Families whose eager softmax runs in the scores' dtype.
_SOFTMAX_IN_DTYPE = frozenset({"gpt2", "gpt_bigcode", "bert"})
# Families whose MoE blocks keep a dense MLP beside the experts (Gemma 4: the MLP on the normed
# input, the experts on the block's input normed again, the two outputs normed and summed).
DENSE_BESIDE_EXPERTS = frozenset({"gemma4", "gemma4_text", "gemma4_unified_text"})
# Families whose MoE block runs its shared expert before the routed ones (its output waits).
SHARED_FIRST = frozenset({"qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"})


@dataclass(frozen=True, slots=True)
class Mla:
    """Multi-head latent attention's low-rank widths (DeepSeek V2 / V3)."""

    q_lora_rank: int  # 0: q projected directly
    kv_lora_rank: int
    rope: int  # rotary key / query width per head
    nope: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class Indexer:
    """DeepSeek sparse attention's indexer: its heads score every key; the top-k are kept."""

    heads: int
    head_dim: int
    topk: int


@dataclass(frozen=True, slots=True)
class Attention:
    """One block's attention on one GPU."""

    heads: int
    kv_heads: int
    head_dim: int  # q / k width of one head
    v_head_dim: int
    gated: bool  # q_proj also yields a per-element output gate (Qwen3-Next)
    head_norms: int  # width per token of the q / k norms' input: 0 none, else q width
    rotary: int  # rotated elements of one head (0: no rotary embedding)
    sinks: bool  # learned attention sinks (gpt-oss): eager softmax over scores + one sink
    window: int | None  # keys a query sees (sliding window / chunk); None: every earlier key
    mla: Mla | None = None
    indexer: Indexer | None = None
    softmax_fp32: bool = True  # eager softmax upcasts (else it runs in the scores' dtype)
    fused_qkv: bool = False  # one q / k / v linear whose output lives through the attention
    alibi: bool = False  # BLOOM: baddbmm scores kept, probabilities held into the next block
    own_mask: bool = False  # Falcon: an additive mask per layer; SDPA then takes its math kernel
    fp32_rotary: bool = False  # rotated in fp32 (fp32 cos / sin), cast back
    upcast_rotary: bool = False  # q and k upcast to fp32, rotated there, cast back (Cohere)
    v_norm: bool = False  # the values RMS-normed

    @property
    def q(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def out(self) -> int:
        return self.heads * self.v_head_dim


@dataclass(frozen=True, slots=True)
class Experts:
    """A mixture-of-experts MLP on one GPU."""

    experts: int
    top_k: int
    width: int  # one expert's intermediate width
    shared: int  # the shared experts' intermediate width (0: none)
    shared_gate: bool  # sigmoid(linear(x)) scales the shared experts' output
    dense: bool  # every token through every expert (Llama 4)
    bias: bool  # per-expert biases, gathered per routed slot
    clamped_glu: bool
    shared_first: bool
    router_fp32: bool  # the router's weights are fp32 (its logits too)
    fp32_routing: bool  # the top-k weights the experts get are fp32


@dataclass(frozen=True, slots=True)
class Block:
    """One decoder block: its token mixer and its MLP."""

    kind: LayerType
    attention: Attention | None
    mlp_width: int  # dense MLP width on one GPU (0 where the block has experts only)
    # (with experts too: a dense MLP beside them, DENSE_BESIDE_EXPERTS)
    experts: Experts | None
    layer_norm: bool = False  # the block's norms are LayerNorms (biased), not RMSNorms
    per_layer_input: int = 0  # width of the per-layer input the block gates in (Gemma 3n / 4)
    norms: str = "pre"  # "pre": on each branch's input; "post": on its output; "sandwich": both
    mlp_norm: bool = False  # the MLP's product RMS-normed before its down projection (BitNet)


def block(spec: ModelSpec, layer: int, tp: int) -> Block:
    """The block ``layer`` of ``spec`` on one of ``tp`` GPUs."""
    facts = spec.facts
    kinds = facts.layer_types or (LayerType.FULL,) * facts.num_layers
    kind = kinds[layer]
    tensors = spec.layer_tensors(layer)
    attention = _attention(spec, layer, kind, tensors, tp) if kind.has_kv else None
    moe = bool(facts.moe_layers) and facts.moe_layers[layer]
    experts = _experts(spec, tensors, tp) if moe else None
    dense = (not moe or facts.model_type in DENSE_BESIDE_EXPERTS) and any(
        t.role is Role.MLP for t in tensors
    )
    width = _mlp_width(tensors, facts.hidden_size, facts.intermediate_size) // tp if dense else 0
    gate = next((t for t in tensors if t.module == "per_layer_input_gate" and not t.is_bias), None)
    return Block(
        kind,
        attention,
        width,
        experts,
        layer_norm=_biased_norm(tensors),
        norms=_placement(tensors),
        per_layer_input=gate.shape[0] if gate is not None else 0,
        mlp_norm=dense and any(t.module in _MLP_NORMS for t in tensors),
    )


def _placement(tensors: Sequence[Tensor]) -> str:
    """Where a block norms its branches, from its norms' names: a post-feedforward norm means
    the outputs are normed (OLMo 2's pair of them: only the outputs; Gemma's four: inputs too)."""
    names = {
        t.module
        for t in tensors
        if t.role is Role.NORM
        and not any(f".{m}." in t.name for m in _INNER)
        and t.module not in _HEAD_NORMS
    }
    if "post_feedforward_layernorm" not in names:
        return "pre"
    return "sandwich" if "pre_feedforward_layernorm" in names else "post"


def _mlp_width(tensors: Sequence[Tensor], hidden: int, configured: int) -> int:
    """The dense MLP's width, from its down projection (hidden x width): configs state widths
    their class adjusts (LFM2's 2/3 and rounding)."""
    widths = [
        t.shape[1]
        for t in tensors
        if t.role is Role.MLP
        and not t.is_bias
        and len(t.shape) == 2
        and t.shape[0] == hidden
        and t.shape[1] != hidden
    ]
    return max(widths) if widths else configured


def _biased_norm(tensors: Sequence[Tensor]) -> bool:
    """Whether a block's own norms (not those inside its attention or mixer) carry a bias."""
    return any(
        t.role is Role.NORM and t.is_bias and not any(f".{m}." in t.name for m in _INNER)
        for t in tensors
    )


def final_layer_norm(spec: ModelSpec) -> bool:
    """Whether the norm after the last block is a LayerNorm."""
    return _biased_norm(spec.layer_tensors(None))


def _out_features(tensors: Sequence[Tensor], modules: Sequence[str]) -> int:
    return sum(
        t.shape[0]
        for t in tensors
        if t.module in modules and not t.is_bias and t.role is Role.ATTENTION and len(t.shape) == 2
    )


def _attention(
    spec: ModelSpec, layer: int, kind: LayerType, tensors: Sequence[Tensor], tp: int
) -> Attention:
    facts = spec.facts
    heads = max(1, facts.num_heads // tp)
    window = None
    if kind is LayerType.SLIDING:
        window = facts.sliding_window
    elif kind is LayerType.CHUNKED:
        window = facts.attention_chunk_size
    modules = {t.module for t in tensors}
    sinks = "sinks" in modules
    if facts.is_mla:
        rope, nope = facts.qk_rope_head_dim or 0, facts.qk_nope_head_dim or 0
        v = facts.v_head_dim or facts.head_dim
        mla = Mla(facts.q_lora_rank or 0, facts.kv_lora_rank or 0, rope, nope, v)
        return Attention(
            heads=heads,
            kv_heads=heads,
            head_dim=rope + nope,
            v_head_dim=v,
            gated=False,
            head_norms=0,
            rotary=rope,
            sinks=sinks,
            window=window,
            mla=mla,
            indexer=_indexer(spec, tensors),
        )
    kv_heads = facts.layer_kv_heads[layer] if facts.layer_kv_heads else facts.num_kv_heads
    kv_heads = max(1, -(-kv_heads // tp))
    q_out = _out_features(tensors, _Q)
    o_in = next(
        (
            t.shape[1]
            for t in tensors
            if t.module in _OUT and t.role is Role.ATTENTION and not t.is_bias and len(t.shape) == 2
        ),
        0,
    )
    gated = bool(q_out and o_in and q_out == 2 * o_in)
    width = facts.layer_kv_widths[layer] if facts.layer_kv_widths else 0
    head_dim = facts.head_dim
    if q_out and facts.num_heads and q_out % (facts.num_heads * (2 if gated else 1)) == 0:
        # the layer's own head size, from its query projection (Gemma 4's differ per layer kind)
        head_dim = q_out // (facts.num_heads * (2 if gated else 1))
        if width:
            kv_heads = max(1, -(-(width // (2 * head_dim)) // tp))
    elif width and facts.layer_kv_heads and facts.layer_kv_heads[layer]:
        head_dim = width // (2 * facts.layer_kv_heads[layer])
    norm = next(
        (t for t in tensors if t.module in ("q_norm", "q_layernorm") and not t.is_bias), None
    )
    head_norms = 0 if norm is None else heads * head_dim
    nope = kind is not LayerType.SLIDING and facts.model_type in SLIDING_ROTARY_ONLY
    rotary = head_dim if _rotary(spec) and not nope else 0
    model_type = facts.model_type
    return Attention(
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=head_dim,
        gated=gated,
        head_norms=head_norms,
        rotary=rotary,
        sinks=sinks,
        window=window,
        softmax_fp32=model_type not in _SOFTMAX_IN_DTYPE,
        fused_qkv=bool(modules & _FUSED_QKV),
        alibi=model_type == "bloom",
        own_mask=model_type == "falcon",
        fp32_rotary=model_type in FP32_ROTARY,
        upcast_rotary=model_type in UPCAST_ROTARY,
        v_norm=model_type in V_NORM,
    )


def _rotary(spec: ModelSpec) -> bool:
    """Rotary embeddings: every decoder but those with learned positions or ALiBi."""
    return spec.facts.model_type not in ("gpt2", "gpt_bigcode", "opt", "bert", "bloom")


def _indexer(spec: ModelSpec, tensors: Sequence[Tensor]) -> Indexer | None:
    weights = next((t for t in tensors if t.module == "weights_proj" and not t.is_bias), None)
    key = next((t for t in tensors if t.module == "wk" and not t.is_bias), None)
    topk = spec.facts.index_topk
    if weights is None or key is None or not topk:
        return None
    return Indexer(heads=weights.shape[0], head_dim=key.shape[0], topk=topk)


def _experts(spec: ModelSpec, tensors: Sequence[Tensor], tp: int) -> Experts:
    facts = spec.facts
    shared_gate = any(t.module == "shared_expert_gate" for t in tensors)
    shared = sum(
        t.shape[0]
        for t in tensors
        if t.role is Role.SHARED_EXPERT
        and t.module in ("gate_proj", "up_proj", "w1", "fc1")
        and not t.is_bias
        and len(t.shape) == 2
    )
    if any(t.role is Role.SHARED_EXPERT and t.module == "gate_up_proj" for t in tensors):
        shared = sum(
            t.shape[0] // 2
            for t in tensors
            if t.role is Role.SHARED_EXPERT and t.module == "gate_up_proj" and not t.is_bias
        )
    elif facts.gated_mlp and any(
        t.role is Role.SHARED_EXPERT and t.module == "gate_proj" for t in tensors
    ):
        shared //= 2  # gate_proj and up_proj were both counted
    model_type = facts.model_type
    return Experts(
        experts=facts.num_experts,
        top_k=facts.experts_per_token,
        width=facts.moe_intermediate_size // tp,
        shared=shared // tp,
        shared_gate=shared_gate,
        dense=model_type in DENSE_EXPERTS,
        bias=any(t.role is Role.EXPERT and t.is_bias for t in tensors)
        or any(t.role is Role.EXPERT and t.name.endswith("_bias") for t in tensors),
        clamped_glu=model_type in CLAMPED_GLU,
        shared_first=model_type in SHARED_FIRST,
        router_fp32=any(t.role is Role.ROUTER and t.dtype == "F32" for t in tensors),
        fp32_routing=model_type in FP32_ROUTING,
    )
