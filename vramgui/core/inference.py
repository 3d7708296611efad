"""Inference memory per GPU: weights, KV cache, the prefill's transient activations, engine buffers.

The transformers engine is modelled as ``model.generate`` runs it: one prefill forward over the whole
prompt under ``torch.no_grad`` with a DynamicCache and ``logits_to_keep=1``. Its peak falls inside the
last decoder block, when every block's K/V is already cached; the transient tensors of that block
are followed op by op in :func:`_block_peak` (the order and lifetimes follow transformers' modelling
code). vLLM and llama.cpp are modelled by their own allocation rules.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.errors import WorkloadError
from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.workload import Workload

# vLLM's profiling forward runs this many tokens (its default max_num_batched_tokens with chunked
# prefill) and samples this many sequences; both bound its activation peak.
VLLM_PROFILE_TOKENS = 8192
VLLM_PROFILE_SEQS = 256
# Its sampler holds fp32 logits, probabilities and log-probabilities of those sequences at once.
VLLM_SAMPLER_COPIES = 3
# llama.cpp's physical micro-batch (n_ubatch) default: its compute buffer is sized for it.
LLAMACPP_UBATCH = 512


@dataclass(frozen=True, slots=True)
class InferenceBreakdown:
    """Per-GPU inference memory, before runtime overhead.

    Attributes:
        weights_bytes: weights resident on each GPU.
        kv_cache_bytes: KV cache (or vLLM's pre-allocated pool) on each GPU.
        activations_bytes: transient activations / compute buffers at the peak.
        host_bytes: weights kept in host RAM (llama.cpp's token embeddings).
        phase: when the peak falls.
        notes: what the user should know about this estimate.
        details: engine-specific figures.
    """

    weights_bytes: int
    kv_cache_bytes: int
    activations_bytes: int
    host_bytes: int
    phase: str
    notes: tuple[str, ...]
    details: dict[str, int | float]


def kv_bytes_per_token(spec: ModelSpec, workload: Workload) -> float:
    """KV cache bytes one token occupies across the attention layers on one GPU."""
    per_elem = dtypes.kv_bytes_per_element(workload.kv_dtype, workload.dtype)
    width = _kv_width(spec, workload.engine, _kv_heads_per_gpu(spec, workload.tp))
    counts = _layer_type_counts(spec)
    return (counts[LayerType.FULL] + counts[LayerType.SLIDING]) * width * per_elem


def kv_cache_bytes(spec: ModelSpec, workload: Workload, tokens: int | None = None) -> int:
    """KV cache held on one GPU for ``batch`` sequences of ``tokens`` (default: ``seq``) tokens."""
    engine = workload.engine
    tokens = workload.seq if tokens is None else tokens
    facts = spec.facts
    per_elem = dtypes.kv_bytes_per_element(workload.kv_dtype, workload.dtype)
    kv_heads = _kv_heads_per_gpu(spec, workload.tp)
    width = _kv_width(spec, engine, kv_heads)
    counts = _layer_type_counts(spec)
    state = facts.linear_state_elements_per_layer * dtypes.DTYPE_BYTES[workload.dtype]
    total = counts[LayerType.LINEAR] * workload.batch * state / workload.tp
    total += counts[LayerType.FULL] * workload.batch * tokens * width * per_elem
    # Engines that size sliding-window layers to the window save it; transformers keeps the whole
    # prompt's K/V through the prefill (measured), so its peak sees the full length.
    kept = tokens
    if facts.sliding_window and engine != "transformers":
        kept = min(tokens, facts.sliding_window)
    total += counts[LayerType.SLIDING] * workload.batch * kept * width * per_elem
    return round(total)


def _layer_type_counts(spec: ModelSpec) -> Counter[LayerType]:
    return spec.cached("layer_type_counts", lambda: Counter(_layer_types(spec)))


def _kv_width(spec: ModelSpec, engine: str, kv_heads: int) -> int:
    """Elements one token stores per layer (K and V together)."""
    facts = spec.facts
    if facts.is_mla:
        # Every engine (transformers 5 too) caches the compressed latent and the rotary key:
        # one copy per token, whatever the head count.
        return (facts.kv_lora_rank or 0) + (facts.qk_rope_head_dim or 0)
    v_dim = facts.v_head_dim or facts.head_dim
    return kv_heads * (facts.head_dim + v_dim)


def _kv_heads_per_gpu(spec: ModelSpec, tp: int) -> int:
    facts = spec.facts
    if facts.is_mla:
        return max(1, facts.num_heads // tp)
    # With fewer KV heads than tensor-parallel ranks, engines replicate heads: one per rank.
    return max(1, -(-facts.num_kv_heads // tp))


def _layer_types(spec: ModelSpec) -> tuple[LayerType, ...]:
    facts = spec.facts
    if facts.layer_types:
        return facts.layer_types
    return (LayerType.FULL,) * facts.num_layers


def inference_breakdown(
    spec: ModelSpec, workload: Workload, capacity_bytes: int | None = None
) -> InferenceBreakdown:
    """Inference memory on one GPU at the worst moment of serving.

    Args:
        spec: the model.
        workload: inference settings.
        capacity_bytes: GPU memory, needed to size vLLM's pre-allocated KV pool.

    Raises:
        WorkloadError: a setting the engine does not support.
    """
    _check(spec, workload)
    weights, host = _resident_weights(spec, workload)
    notes: list[str] = []
    details: dict[str, int | float] = {}
    if workload.engine == "transformers":
        weights += _buffer_bytes(spec)
    kv = kv_cache_bytes(spec, workload) if spec.facts.is_decoder else 0

    if workload.engine == "transformers":
        activations = _transformers_prefill_peak(spec, workload)
        phase = "prefill" if spec.facts.is_decoder else "forward"
        if attention_used(spec, workload) != workload.attention:
            notes.append(
                f"transformers runs {spec.facts.model_type} with eager attention only; "
                "estimated with eager."
            )
        if _layer_type_counts(spec)[LayerType.SLIDING]:
            notes.append(
                "transformers keeps the whole prompt's K/V of sliding-window layers through the "
                "prefill, so the window does not lower this peak."
            )
    elif workload.engine == "vllm":
        activations = _vllm_profile_peak(spec, workload)
        non_torch = vllm_non_torch_bytes(workload)
        details["vllm_non_torch_bytes"] = non_torch
        details["kv_bytes_per_token"] = kv_bytes_per_token(spec, workload)
        details["kv_needed_bytes"] = kv
        phase = "serving (pre-allocated KV pool)"
        if capacity_bytes is not None:
            budget = capacity_bytes * workload.gpu_memory_utilization
            pool = int(budget - weights - activations - non_torch)
            details["kv_pool_bytes"] = max(pool, 0)
            per_token = details["kv_bytes_per_token"]
            tokens = int(max(pool, 0) // per_token) if per_token else 0
            details["kv_pool_tokens"] = tokens
            details["kv_pool_sequences"] = tokens // workload.seq if workload.seq else 0
            if pool >= kv:
                kv = pool
                notes.append(
                    f"vLLM pre-allocates {workload.gpu_memory_utilization:.0%} of the GPU; the KV "
                    f"pool holds {tokens:,} tokens ({tokens // workload.seq:,} sequences of "
                    f"{workload.seq:,})."
                )
            else:
                notes.append(
                    "vLLM's KV pool would be smaller than one batch of the requested context."
                )
        activations += non_torch
    else:
        activations = _llamacpp_compute_buffer(spec, workload)
        phase = "context allocated up front"
        details["host_embedding_bytes"] = host
    return InferenceBreakdown(
        weights_bytes=weights,
        kv_cache_bytes=kv,
        activations_bytes=activations,
        host_bytes=host,
        phase=phase,
        notes=tuple(notes),
        details=details,
    )


def _resident_weights(spec: ModelSpec, w: Workload) -> tuple[int, int]:
    """Weight bytes on each GPU and in host RAM, under the workload's dtype, scheme, engine, TP."""

    def compute() -> tuple[int, int]:
        gpu = host = 0
        for st in dtypes.assign_storage(spec, w.dtype, w.quant):
            t = st.tensor
            if w.engine == "llamacpp" and t.role is Role.EMBEDDING:
                # llama.cpp keeps token embeddings in host memory: lookups are cheap there.
                host += st.bytes
                if spec.facts.tie_word_embeddings and spec.facts.is_decoder:
                    gpu += st.bytes  # tied: the output layer on the GPU is a copy of it
                continue
            gpu += round(st.bytes * _tp_share(t.role, t.is_bias, t.module, w))
        return gpu, host

    return spec.cached(("resident_weights", w.dtype, w.quant, w.engine, w.tp), compute)


def vllm_non_torch_bytes(workload: Workload) -> int:
    """vLLM's memory outside PyTorch's allocator (NCCL, CUDA graphs); measured 1.79 GiB at TP 1."""
    base = round(1.79 * 1024**3)
    # Measured 3.58 GiB per GPU at TP 2 (vllm pull request 10511): NCCL buffers grow with TP.
    return base if workload.tp == 1 else base * 2


def _check(spec: ModelSpec, workload: Workload) -> None:
    kv = workload.kv_dtype
    if workload.engine == "transformers" and kv in ("fp8", "q8_0", "q4_0"):
        raise WorkloadError(
            f"--kv-dtype {kv} is not a transformers DynamicCache dtype; use --engine vllm (fp8) "
            "or --engine llamacpp (q8_0, q4_0)"
        )
    if workload.engine == "vllm" and kv in ("q8_0", "q4_0"):
        raise WorkloadError(f"--kv-dtype {kv} is a llama.cpp cache type; vLLM offers fp8")
    if workload.engine == "llamacpp" and kv == "fp8":
        raise WorkloadError("llama.cpp has no fp8 KV cache; use q8_0 or q4_0")
    facts = spec.facts
    if facts.model_type in _LEARNED_POSITIONS and workload.seq > facts.max_position_embeddings:
        raise WorkloadError(
            f"{facts.model_type} has learned position embeddings for "
            f"{facts.max_position_embeddings:,} tokens; --seq {workload.seq:,} is longer"
        )
    if workload.tp > 1 and facts.num_heads % workload.tp:
        raise WorkloadError(
            f"--tp {workload.tp} does not divide the model's {facts.num_heads} attention heads"
        )
    if workload.engine != "transformers" and not facts.is_decoder:
        raise WorkloadError(f"{workload.engine} serves decoder models; this one is an encoder")


def _tp_share(role: Role, is_bias: bool, module: str, workload: Workload) -> float:
    """Fraction of a tensor one tensor-parallel rank holds."""
    if workload.tp == 1:
        return 1.0
    if role in (Role.NORM, Role.POSITION) or role is Role.ROUTER:
        return 1.0
    if is_bias and module in ("o_proj", "down_proj", "dense", "c_proj", "out_proj", "fc2"):
        return 1.0  # row-parallel layers add their bias once, after the all-reduce
    return 1.0 / workload.tp


# --- transformers prefill ------------------------------------------------------------------------


# Families whose block keeps the attention output alive beside the residual (GPT-2's
# `attn_output` local lives until the block returns), and which add learned position embeddings.
_ATTN_OUTPUT_KEPT = frozenset({"gpt2", "gpt_bigcode"})
_LEARNED_POSITIONS = frozenset({"gpt2", "gpt_bigcode", "opt", "bert"})
_NO_ROTARY = frozenset({"gpt2", "gpt_bigcode", "opt", "bert", "bloom"})
# Activations that transformers writes as several elementwise ops (each a new tensor) rather than
# one kernel: GPT-2's tanh approximation keeps the input and three temporaries alive at once.
_MULTI_OP_ACTIVATIONS = frozenset({"gelu_new", "gelu_fast", "quick_gelu_new"})
# Families whose attention builds its mask even when no token is padded (falcon: for alibi).
_ALWAYS_MASKED = frozenset({"falcon"})
# Families that only have eager attention in transformers.
EAGER_ONLY = frozenset({"bloom"})
_FUSED_QKV = frozenset({"qkv_proj", "query_key_value", "c_attn", "Wqkv"})


def _eager_score_bytes(spec: ModelSpec, e: int) -> int:
    """Bytes per attention-score element alive at the eager softmax."""
    model_type = spec.facts.model_type
    if model_type in ("gpt2", "bert"):
        return 2 * e  # softmax in the compute dtype: the scores and their softmax
    if model_type == "bloom":
        # alibi baddbmm output, its masked copy, the fp32 upcast and fp32 softmax, and the
        # previous block's probabilities, which the model loop still holds in its outputs
        return 3 * e + 8 if e < 4 else 16
    # the masked scores, then the fp32 upcast and the fp32 softmax output
    return e + 8 if e < 4 else 8


def attention_used(spec: ModelSpec, w: Workload) -> str:
    """The attention implementation transformers really runs for this model."""
    if spec.facts.model_type in EAGER_ONLY:
        return "eager"
    return w.attention


def _transformers_prefill_peak(spec: ModelSpec, w: Workload) -> int:
    """Live activation bytes at the prefill's peak, KV cache excluded."""
    facts = spec.facts
    e = dtypes.DTYPE_BYTES[w.dtype]
    tokens = w.batch * w.seq
    stream = tokens * facts.hidden_size * e  # one (batch, seq, hidden) tensor
    # Alive through a decoder's whole forward: the embedding output (the model keeps its
    # `inputs_embeds` reference), learned position embeddings or the rotary cos / sin, and the
    # attention mask. Inside a block, the block's input is also alive: the model's loop holds it
    # until the block returns.
    block = _block_peak(spec, w, tokens, e, w.tp)
    if not facts.is_decoder:
        # Encoders: the embedding module sums its lookups into the first block's input; at the
        # end the masked-LM head (dense, activation, norm) writes logits for every position.
        head = 2 * stream + tokens * facts.vocab_size * e
        return max(_mask_bytes(spec, w) + stream + block, head)
    persistent = stream + _position_bytes(spec, w) + _mask_bytes(spec, w)
    # After the last block: the final norm's fp32 copies, then the LM head on the last position
    # only, upcast to fp32.
    head = tokens * facts.hidden_size * 8 + w.batch * facts.vocab_size * (e + 4)
    return persistent + stream + max(block, head)


def _buffer_bytes(spec: ModelSpec) -> int:
    """Non-parameter buffers transformers registers on the GPU beside the weights."""
    facts = spec.facts
    if facts.model_type == "gpt_bigcode":
        # The causal mask buffer: a (max_positions, max_positions) boolean matrix.
        return facts.max_position_embeddings**2
    return 0


def _position_bytes(spec: ModelSpec, w: Workload) -> int:
    e = dtypes.DTYPE_BYTES[w.dtype]
    if spec.facts.model_type in _LEARNED_POSITIONS:
        return w.seq * spec.facts.hidden_size * e  # (1, seq, hidden) position embeddings
    if spec.facts.model_type in _NO_ROTARY:
        return 0
    return 2 * w.seq * spec.facts.head_dim * e  # rotary cos and sin, (1, seq, head_dim)


def _sdpa_needs_mask(spec: ModelSpec, w: Workload) -> bool:
    """SDPA runs maskless (is_causal) unless a sliding window is shorter than the prompt."""
    if attention_used(spec, w) == "eager":
        return False
    if spec.facts.model_type in _ALWAYS_MASKED:
        return True
    window = spec.facts.sliding_window
    return window is not None and window < w.seq and LayerType.SLIDING in _layer_types(spec)


def _mask_bytes(spec: ModelSpec, w: Workload) -> int:
    e = dtypes.DTYPE_BYTES[w.dtype]
    area = w.batch * w.seq * w.seq
    if attention_used(spec, w) == "eager":
        return area * e  # the 4-D additive mask (batch, 1, q, kv) in the compute dtype
    if spec.facts.model_type in _ALWAYS_MASKED:
        return area * (e + 1)  # the boolean mask and its additive copy
    if _sdpa_needs_mask(spec, w):
        return area  # a boolean (batch, 1, q, kv) mask
    return 0


def _block_peak(spec: ModelSpec, w: Workload, tokens: int, e: int, tp: int) -> int:
    """Largest transient set inside one block, beyond its input and the KV cache."""
    facts = spec.facts
    stream = tokens * facts.hidden_size * e
    kept = stream if facts.model_type in _ATTN_OUTPUT_KEPT else 0
    heads = max(1, facts.num_heads // tp)
    q_dim = heads * facts.head_dim
    kv_dim = _kv_heads_per_gpu(spec, tp) * facts.head_dim
    if facts.is_mla:
        qk = (facts.qk_nope_head_dim or 0) + (facts.qk_rope_head_dim or 0)
        q_dim = kv_dim = heads * qk
    # RMSNorm / LayerNorm upcast: an fp32 copy and its squared (or scaled) fp32 copy; the second
    # norm of a block runs while the attention residual is alive too.
    norm = stream + tokens * facts.hidden_size * 8
    attn = kept + _attention_peak(
        spec, w, tokens=tokens, e=e, heads=heads, q_dim=q_dim, kv_dim=kv_dim
    )
    # MLP: the attention residual and the normed input stay alive through it, and with eager
    # attention so do the attention probabilities (the block keeps them in a local).
    probs = 0
    if attention_used(spec, w) == "eager" and facts.model_type not in EAGER_ONLY:
        probs = w.batch * heads * w.seq * w.seq * e
    mlp = 2 * stream + kept + probs + _mlp_peak(spec, tokens, e, tp)
    return max(norm, attn, mlp)


def _attention_peak(
    spec: ModelSpec, w: Workload, *, tokens: int, e: int, heads: int, q_dim: int, kv_dim: int
) -> int:
    facts = spec.facts
    stream = tokens * facts.hidden_size * e
    scores = w.batch * heads * w.seq * w.seq
    if (
        facts.model_type in _ALWAYS_MASKED
        and attention_used(spec, w) != "eager"
        and kv_dim != q_dim
    ):
        # SDPA with a mask and fewer K/V heads than query heads (not repeated) falls back to
        # the math kernel: q upcast and scaled in fp32, fp32 scores and their masked copy.
        return stream + tokens * (2 * q_dim + 2 * kv_dim) * e + 2 * tokens * q_dim * 4 + scores * 8
    # The normed input, q, k, v and three q-sized rotary temporaries; with a mask, SDPA cannot
    # use its grouped-query path and K / V are repeated to every query head.
    attn = stream + tokens * (q_dim + 2 * kv_dim) * e + 3 * tokens * q_dim * e
    if _sdpa_needs_mask(spec, w) and kv_dim != q_dim:
        attn += 2 * tokens * q_dim * e
    if attention_used(spec, w) == "eager":
        # K and V repeated to every query head for grouped-query attention (the cache keeps
        # the originals); scores in the compute dtype plus the fp32 upcast and softmax output.
        repeated = 2 * tokens * q_dim * e if kv_dim != q_dim else 0
        # A fused qkv projection's output stays alive while views of it are in use.
        fused = _has_module(spec, Role.ATTENTION, _FUSED_QKV)
        qkv = tokens * (q_dim + 2 * kv_dim) * e if fused else 0
        softmax = scores * _eager_score_bytes(spec, e)
        attn = max(attn, stream + tokens * q_dim * e + repeated + qkv + softmax)
    return attn


def _mlp_peak(spec: ModelSpec, tokens: int, e: int, tp: int) -> int:
    """Transient MLP bytes beyond the block's residual and normed input."""
    facts = spec.facts
    dense = tokens * facts.intermediate_size // tp * e * _mlp_units(spec)
    if not facts.is_moe:
        return dense
    h = facts.hidden_size
    slots = tokens * facts.experts_per_token  # (token, expert) pairs, gathered into one batch
    inter = facts.moe_intermediate_size // tp
    # Routed experts run as one grouped matmul over the gathered tokens: the gathered input
    # stays alive through gate_up (2I), the activation (I) and the product (I); then the down
    # projection, its routing-weighted copy and the scatter buffer (in fp32 when the router
    # weights are fp32).
    weighted = 4 if _router_fp32(spec) else e
    routed = slots * max((h + 4 * inter) * e, (2 * h + inter) * e, 2 * h * e + 2 * h * weighted)
    shared = _shared_expert_width(spec) // tp
    # The shared expert runs first and its output waits beside the routed computation.
    moe = max(tokens * shared * e * 3, (tokens * h * e if shared else 0) + routed)
    return max(moe, dense) if not all(facts.moe_layers) else moe


def _mlp_units(spec: ModelSpec) -> int:
    """Intermediate-sized tensors alive at once in a dense MLP."""
    facts = spec.facts
    if facts.gated_mlp:
        # gate and up: 3 (activation, up, product); fused gate_up keeps its 2-wide output: 4.
        fused = _has_module(spec, Role.MLP, frozenset({"gate_up_proj"}))
        return 4 if fused else 3
    return 4 if facts.hidden_act in _MULTI_OP_ACTIVATIONS else 2


def _has_module(spec: ModelSpec, role: Role, modules: frozenset[str]) -> bool:
    return spec.cached(
        ("has_module", role, modules),
        lambda: any(t.role is role and t.module in modules for t in spec.tensors),
    )


def _router_fp32(spec: ModelSpec) -> bool:
    return spec.cached(
        "router_fp32",
        lambda: any(t.role is Role.ROUTER and t.dtype == "F32" for t in spec.tensors),
    )


def _shared_expert_width(spec: ModelSpec) -> int:
    """Intermediate width of the always-on shared expert(s) of one MoE layer."""
    facts = spec.facts
    layer = next((i for i, moe in enumerate(facts.moe_layers) if moe), None)
    if layer is None:
        return 0

    def compute() -> int:
        shared = sum(
            t.numel
            for t in spec.layer_tensors(layer)
            if t.role is Role.SHARED_EXPERT
            and not t.is_bias
            and len(t.shape) == 2
            and min(t.shape) > 1
        )
        return shared // ((3 if facts.gated_mlp else 2) * facts.hidden_size)

    return spec.cached("shared_expert_width", compute)


def _mlp_width(spec: ModelSpec, tokens: int) -> int:
    """MLP intermediate elements computed for ``tokens`` tokens (MoE: top-k experts plus shared)."""
    facts = spec.facts
    if not facts.is_moe:
        return tokens * facts.intermediate_size
    routed = tokens * facts.experts_per_token * facts.moe_intermediate_size
    shared = tokens * _shared_expert_width(spec)
    dense = tokens * facts.intermediate_size if not all(facts.moe_layers) else 0
    return max(routed + shared, dense)


# --- vLLM and llama.cpp -------------------------------------------------------------------------


def _vllm_profile_peak(spec: ModelSpec, w: Workload) -> int:
    """Activation peak of vLLM's profiling forward (chunked prefill of max_num_batched_tokens)."""
    facts = spec.facts
    e = dtypes.DTYPE_BYTES[w.dtype]
    t = VLLM_PROFILE_TOKENS
    tp = w.tp
    q_dim = facts.num_heads * facts.head_dim // tp
    kv_dim = _kv_heads_per_gpu(spec, tp) * facts.head_dim
    inter = _mlp_width(spec, t) // tp
    # Merged gate_up output (2x), the activation, the fused qkv output, residual + normed input.
    per_token = (q_dim + 2 * kv_dim) * e + 2 * facts.hidden_size * e
    mlp = inter * e * (3 if facts.gated_mlp else 2)
    logits = VLLM_PROFILE_SEQS * facts.vocab_size * 4 * VLLM_SAMPLER_COPIES
    return t * per_token + mlp + logits


def _llamacpp_compute_buffer(spec: ModelSpec, w: Workload) -> int:
    """llama.cpp's CUDA compute buffer: the graph of one micro-batch of n_ubatch tokens.

    Its peak holds one layer's KQ scores in fp32 (flash attention off, the default of the
    published logs), the f16 KQ mask and the micro-batch's hidden and MLP activations in fp32.
    """
    facts = spec.facts
    ub = min(LLAMACPP_UBATCH, w.seq * w.batch)
    ctx = w.seq * w.batch
    kq = ub * ctx * facts.num_heads * 4
    mask = ub * ctx * 2
    side = ub * (facts.hidden_size + facts.intermediate_size) * 4
    logits = ub * facts.vocab_size * 4
    return max(kq + mask, logits) + side
