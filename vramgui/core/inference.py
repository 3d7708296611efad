"""Inference memory per GPU: weights, KV cache, the prefill's transient activations, engine buffers.

The transformers engine is modelled as ``model.generate`` runs it: one prefill forward over the whole
prompt under ``torch.no_grad`` with a DynamicCache and ``logits_to_keep=1``. Its peak falls inside the
last decoder block, when every block's K/V is already cached; the transient tensors of that block
are followed op by op in :func:`_block_peak` (the order and lifetimes follow transformers' modelling
code). vLLM and llama.cpp are modelled by their own allocation rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.errors import WorkloadError
from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.workload import Workload

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}

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


def kv_bytes_per_token(spec: ModelSpec, workload: Workload, engine: str | None = None) -> float:
    """KV cache bytes one token occupies across all layers on one GPU (full-attention layers)."""
    engine = engine or workload.engine
    per_elem = dtypes.kv_bytes_per_element(workload.kv_dtype, workload.dtype)
    kv_heads = _kv_heads_per_gpu(spec, workload.tp)
    total = 0.0
    for layer_type in _layer_types(spec):
        if layer_type is LayerType.LINEAR:
            continue
        total += _kv_width(spec, engine, kv_heads) * per_elem
    return total


def kv_cache_bytes(spec: ModelSpec, workload: Workload, tokens: int | None = None) -> int:
    """KV cache held on one GPU for ``batch`` sequences of ``tokens`` (default: ``seq``) tokens."""
    engine = workload.engine
    tokens = workload.seq if tokens is None else tokens
    facts = spec.facts
    per_elem = dtypes.kv_bytes_per_element(workload.kv_dtype, workload.dtype)
    kv_heads = _kv_heads_per_gpu(spec, workload.tp)
    width = _kv_width(spec, engine, kv_heads)
    total = 0.0
    for layer_type in _layer_types(spec):
        if layer_type is LayerType.LINEAR:
            state = facts.linear_state_elements_per_layer * DTYPE_BYTES[workload.dtype]
            total += workload.batch * state / workload.tp
            continue
        kept = tokens
        # Engines that size sliding-window layers to the window save it; transformers keeps the
        # whole prompt's K/V through the prefill (measured), so its peak sees the full length.
        if layer_type is LayerType.SLIDING and facts.sliding_window and engine != "transformers":
            kept = min(tokens, facts.sliding_window)
        total += workload.batch * kept * width * per_elem
    return round(total)


def _kv_width(spec: ModelSpec, engine: str, kv_heads: int) -> int:
    """Elements one token stores per layer (K and V together)."""
    facts = spec.facts
    if facts.is_mla:
        rope = facts.qk_rope_head_dim or 0
        if engine == "transformers":
            # transformers decompresses the latent: full per-head K (nope + rope) and V.
            qk = (facts.qk_nope_head_dim or 0) + rope
            v = facts.v_head_dim or qk
            return kv_heads * (qk + v)  # kv_heads is the query heads per GPU under MLA
        # vLLM and llama.cpp cache the compressed latent and the rotary key: one copy per token.
        return (facts.kv_lora_rank or 0) + rope
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
    stored = dtypes.assign_storage(spec, workload.dtype, workload.quant)
    notes: list[str] = []
    details: dict[str, int | float] = {}
    host = 0
    weights = 0
    for st in stored:
        share = _tp_share(st.tensor.role, st.tensor.is_bias, st.tensor.module, workload)
        if workload.engine == "llamacpp" and st.tensor.role is Role.EMBEDDING:
            # llama.cpp keeps token embeddings in host memory: lookups are cheap there.
            host += st.bytes
            if spec.facts.tie_word_embeddings and spec.facts.is_decoder:
                weights += st.bytes  # tied: the output layer on the GPU is a copy of it
            continue
        weights += round(st.bytes * share)
    kv = kv_cache_bytes(spec, workload) if spec.facts.is_decoder else 0

    if workload.engine == "transformers":
        activations = _transformers_prefill_peak(spec, workload)
        phase = "prefill" if spec.facts.is_decoder else "forward"
        if any(t is LayerType.SLIDING for t in _layer_types(spec)):
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


def _transformers_prefill_peak(spec: ModelSpec, w: Workload) -> int:
    """Live activation bytes at the prefill's peak, KV cache excluded."""
    facts = spec.facts
    e = DTYPE_BYTES[w.dtype]
    tokens = w.batch * w.seq
    stream = tokens * facts.hidden_size * e  # one (batch, seq, hidden) tensor
    # Alive through the whole forward: the embedding output (the model keeps its `inputs_embeds`
    # reference), the rotary cos / sin, and for eager attention the 4-D mask. Inside a block, the
    # block's input is also alive: the model's loop holds it until the block returns.
    persistent = stream + _rotary_bytes(spec, w) + _mask_bytes(spec, w)
    block = _block_peak(spec, w, tokens, e, w.tp)
    # After the last block: the final norm's fp32 copies, then the LM head on the last position
    # (every position for encoders), upcast to fp32.
    logits_rows = w.batch if facts.is_decoder else tokens
    head = tokens * facts.hidden_size * 8 + logits_rows * facts.vocab_size * (e + 4)
    return persistent + stream + max(block, head)


def _rotary_bytes(spec: ModelSpec, w: Workload) -> int:
    if spec.facts.model_type in ("gpt2", "gpt_bigcode", "opt", "bert", "bloom"):
        return 0
    # cos and sin, (1, seq, head_dim) in the compute dtype.
    return 2 * w.seq * spec.facts.head_dim * DTYPE_BYTES[w.dtype]


def _sdpa_needs_mask(spec: ModelSpec, w: Workload) -> bool:
    """SDPA runs maskless (is_causal) unless a sliding window is shorter than the prompt."""
    window = spec.facts.sliding_window
    return (
        w.attention != "eager"
        and window is not None
        and window < w.seq
        and LayerType.SLIDING in _layer_types(spec)
    )


def _mask_bytes(spec: ModelSpec, w: Workload) -> int:
    if w.attention == "eager":
        # The 4-D additive mask (batch, 1, q, kv) in the compute dtype.
        return w.batch * w.seq * w.seq * DTYPE_BYTES[w.dtype]
    if _sdpa_needs_mask(spec, w):
        return w.batch * w.seq * w.seq  # a boolean (batch, 1, q, kv) mask
    return 0


def _block_peak(spec: ModelSpec, w: Workload, tokens: int, e: int, tp: int) -> int:
    """Largest transient set inside one decoder block, beyond its input and the KV cache."""
    facts = spec.facts
    stream = tokens * facts.hidden_size * e
    heads = max(1, facts.num_heads // tp)
    q_dim = heads * facts.head_dim
    kv_dim = _kv_heads_per_gpu(spec, tp) * facts.head_dim
    if facts.is_mla:
        qk = (facts.qk_nope_head_dim or 0) + (facts.qk_rope_head_dim or 0)
        q_dim = kv_dim = heads * qk
    # RMSNorm / LayerNorm upcast: an fp32 copy and its squared (or scaled) fp32 copy; the second
    # norm of a block runs while the attention residual is alive too.
    norm = stream + tokens * facts.hidden_size * 8
    # Attention: the normed input, q, k, v and three q-sized rotary temporaries; with a mask,
    # SDPA cannot use its grouped-query path and K / V are repeated to every query head.
    attn = stream + tokens * (q_dim + 2 * kv_dim) * e + 3 * tokens * q_dim * e
    if _sdpa_needs_mask(spec, w) and kv_dim != q_dim:
        attn += 2 * tokens * q_dim * e
    if w.attention == "eager":
        scores = w.batch * heads * w.seq * w.seq
        # K and V repeated to every query head for grouped-query attention (the cache keeps
        # the originals); scores in the compute dtype plus the fp32 upcast and softmax output.
        repeated = 2 * tokens * q_dim * e if kv_dim != q_dim else 0
        softmax = scores * (e + (8 if e < 4 else 4))
        attn = max(attn, stream + tokens * q_dim * e + repeated + softmax)
    # MLP: the attention residual, the normed input, then the activation output, the up
    # projection and their product (a plain MLP: the fc output and its activation).
    inter = _mlp_width(spec, tokens) // tp
    mlp = 2 * stream + (3 if facts.gated_mlp else 2) * inter * e
    return max(norm, attn, mlp)


def _mlp_width(spec: ModelSpec, tokens: int) -> int:
    """Total MLP intermediate elements for ``tokens`` tokens (MoE: top-k experts plus shared)."""
    facts = spec.facts
    if not facts.is_moe:
        return tokens * facts.intermediate_size
    routed = tokens * facts.experts_per_token * facts.moe_intermediate_size
    shared = tokens * facts.num_shared_experts * facts.moe_intermediate_size
    dense = tokens * facts.intermediate_size if not all(facts.moe_layers) else 0
    return max(routed + shared, dense)


# --- vLLM and llama.cpp -------------------------------------------------------------------------


def _vllm_profile_peak(spec: ModelSpec, w: Workload) -> int:
    """Activation peak of vLLM's profiling forward (chunked prefill of max_num_batched_tokens)."""
    facts = spec.facts
    e = DTYPE_BYTES[w.dtype]
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
