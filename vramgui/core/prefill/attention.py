"""Attention as transformers runs it at prefill, one block's tensors in the order its code makes
them: projections, per-head norms, the rotary embedding, the cache update (the cache itself is
the KV component's), then the kernel: SDPA's fused kernels, its math fallback on the CPU, or the
eager path with its scores (softmax in fp32, or over the scores and a learned sink); DeepSeek's
latent attention (MLA) and its sparse indexer."""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core.prefill.layers import Attention
from vramgui.core.prefill.ops import FP32, INT64, Dtype, layer_norm, rms_norm, rope
from vramgui.core.prefill.program import (
    SCORES,
    SEQ_SQUARED,
    TOKENS,
    Program,
    Size,
    batched,
    capped_scores,
    longer_than,
)

# transformers hands SDPA grouped-query k / v unrepeated only up to this head size.
SDPA_GQA_HEAD_DIM = 256


@dataclass(frozen=True, slots=True)
class Kernel:
    """How attention runs: eager or SDPA, on CUDA or on the CPU (whose SDPA falls back to its
    math kernel where q / k and v head sizes differ)."""

    eager: bool
    cpu: bool


@dataclass(frozen=True, slots=True)
class Out:
    """What an attention call leaves: its output, and tensors the block keeps until it returns
    (eager attention's probabilities, which the decoder layer holds in a local)."""

    out: int
    kept: tuple[int, ...] = ()


def when_masked(size: Size, a: Attention) -> Size:
    """``size`` where SDPA gets an explicit mask at the prompt length (a sliding window or chunk
    shorter than the prompt), nothing where it runs maskless (``is_causal``)."""
    return longer_than(size, a.window) if a.window else Size()


def attention(
    p: Program, d: Dtype, a: Attention, k: Kernel, hidden: int, *, unwritten: int | None = None
) -> Out:
    """A llama-style attention call on the normed input (which the caller holds).

    ``unwritten`` is the handle of this layer's cache counted back out of the KV component
    until the cache update writes it; the call lets go of it there.
    """
    if a.mla is not None:
        return _mla(p, d, a, k, hidden, unwritten=unwritten)
    held: list[int] = []  # projection outputs whose views are still in use
    query = key = value = None  # None: a view of a held output
    if a.fused_qkv:
        held.append(p.new(d.tok(a.q + 2 * a.kv)))
    else:
        projected_q = p.new(d.tok(a.q * (2 if a.gated else 1)))
        if a.gated:
            # view + chunk give strided halves: the query half is copied by its reshape, the
            # gate half stays a view until the output is gated
            held.append(projected_q)
            query = p.new(d.tok(a.q))
        else:
            query = projected_q
        if a.head_norms:
            query = _replace(p, query, rms_norm(p, d, a.q))
        key = p.new(d.tok(a.kv))
        if a.head_norms:
            key = _replace(p, key, rms_norm(p, d, a.kv))
        value = p.new(d.tok(a.kv))
    if a.rotary and a.upcast_rotary:
        upcast = [p.new(d.fp32(width)) for width in (a.q, a.kv)] if d.e != FP32 else []
        rotated = [_rope_upcast(p, d, width) for width in (a.q, a.kv)]
        query = _replace(p, query, p.new(d.tok(a.q)))
        key = _replace(p, key, p.new(d.tok(a.kv)))
        p.free(*upcast, *rotated)
    elif a.rotary and a.fp32_rotary:
        q32 = _rope32(p, d, a.q)
        k32 = _rope32(p, d, a.kv)
        query = _replace(p, query, p.new(d.tok(a.q)))
        key = _replace(p, key, p.new(d.tok(a.kv)))
        p.free(q32, k32)
    elif a.rotary:
        query = _replace(p, query, rope(p, d, a.q, a.rotary * a.heads))
        key = _replace(p, key, rope(p, d, a.kv, a.rotary * a.kv_heads))
    if a.v_norm and value is not None:
        value = _replace(p, value, rms_norm(p, d, a.kv, weighted=False))
    # The cache keeps its own copies of key and value (the KV component); these go.
    if unwritten is not None:
        p.free(unwritten)
    p.free(*(t for t in (key, value) if t is not None))
    out = _kernel(p, d, a, k)
    if a.gated:
        gate = p.new(d.tok(a.q))  # the gate half made contiguous
        sig = p.new(d.tok(a.q))
        p.free(gate)
        gated = p.new(d.tok(a.q))
        p.free(sig, out.out)
        out = Out(gated, out.kept)
    projected = p.new(d.tok(hidden))
    p.free(out.out, *held, *(t for t in (query,) if t is not None))
    return Out(projected, out.kept)


def _rope32(p: Program, d: Dtype, width: int) -> int:
    """The rotary embedding with fp32 cos / sin: rotate_half in the input's dtype, the products
    and their sum in fp32 (cast back by the caller once q and k are both rotated)."""
    times_cos = p.new(TOKENS * (width * FP32))
    half = p.new(d.tok(width // 2))
    rotated_half = p.new(d.tok(width))
    p.free(half)
    times_sin = p.new(TOKENS * (width * FP32))
    p.free(rotated_half)
    out = p.new(TOKENS * (width * FP32))
    p.free(times_cos, times_sin)
    return out


def _rope_upcast(p: Program, d: Dtype, width: int) -> int:
    """Cohere's rotary embedding of an fp32 copy: ``x * cos + rotate_half(x) * sin``, where
    rotate_half stacks ``-x2`` beside ``x1`` into a new tensor (the caller casts it back)."""
    times_cos = p.new(d.fp32(width))
    negated = p.new(d.fp32(width // 2))
    rotated_half = p.new(d.fp32(width))
    p.free(negated)
    times_sin = p.new(d.fp32(width))
    p.free(rotated_half)
    out = p.new(d.fp32(width))
    p.free(times_cos, times_sin)
    return out


def _replace(p: Program, old: int | None, new: int) -> int:
    """``new`` takes the place of ``old`` (a reassigned local): ``old`` is let go of."""
    if old is not None:
        p.free(old)
    return new


def _kernel(p: Program, d: Dtype, a: Attention, k: Kernel) -> Out:
    """The attention function on rotated q and the cached k / v; its output has heads merged."""
    if k.eager:
        return _eager(p, d, a)
    if a.own_mask:
        mask = p.new(SCORES * d.e)  # Falcon's additive copy of the boolean mask
        # k / v broadcast to every head with a mask: SDPA's math kernel
        out = _math_sdpa(p, d, a, mask=True) if a.kv_heads != a.heads else Out(p.new(d.tok(a.out)))
        p.free(mask)
        return out
    repeated: list[int] = []
    if a.kv_heads not in (1, a.heads):
        # transformers repeats k / v to every query head unless SDPA's GQA kernel applies (no
        # mask, head size up to 256); from a single head the repeat is a view.
        always = a.head_dim > SDPA_GQA_HEAD_DIM or a.head_dim != a.v_head_dim
        for width in (a.q, a.heads * a.v_head_dim):
            size = d.tok(width)
            repeated.append(p.new(size if always else when_masked(size, a)))
    # SDPA turns a boolean mask into an additive one of the query's dtype, batch included
    converted = p.new(when_masked(SCORES * d.e, a))
    merged = p.new(d.tok(a.out))
    p.scratch(TOKENS * (a.heads * FP32))  # log-sum-exp per query row
    p.free(converted, *repeated)
    return Out(merged)


def _eager(p: Program, d: Dtype, a: Attention) -> Out:
    """``matmul(q, k^T) * scale + mask``, softmax (fp32, or in the scores' dtype over the scores
    and one learned sink per head), ``matmul(probs, v)``, heads merged by a copy."""
    repeated = []
    if a.kv_heads not in (1, a.heads):
        repeated = [p.new(d.tok(a.q)), p.new(d.tok(a.heads * a.v_head_dim))]
    scores = SCORES * (a.heads * d.e)
    query = p.new(d.tok(a.q))  # matmul's contiguous copy of q for bmm
    previous = p.new(scores) if a.alibi else None  # the previous block's, still held
    raw = p.new(scores)  # BLOOM: baddbmm(alibi, q, k^T), kept until the block returns
    p.free(query)
    if a.alibi:
        summed = p.new(scores)
    else:
        scaled = p.new(scores)
        p.free(raw)
        summed = p.new(scores)  # + mask
        p.free(scaled)
    if previous is not None:
        repeated.append(previous)
        repeated.append(raw)
    if a.sinks:
        with_sink = scores + TOKENS * (a.heads * d.e)
        combined = p.new(with_sink)
        p.scratch(TOKENS * (a.heads * (d.e + INT64)))  # max values and indices
        shifted = p.new(with_sink)
        p.free(combined)
        probs = p.new(with_sink)
        p.free(shifted)
        p.free(summed)
    elif not a.softmax_fp32:
        probs = p.new(scores)
        p.free(summed)
    else:
        upcast = p.new(SCORES * (a.heads * FP32)) if d.e != FP32 else None
        soft = p.new(SCORES * (a.heads * FP32))
        if upcast is not None:
            p.free(upcast)
        probs = p.new(scores) if d.e != FP32 else soft
        if probs != soft:
            p.free(soft)
        p.free(summed)
    product = p.new(d.tok(a.out))
    merged = p.new(d.tok(a.out))
    p.free(product, *repeated)
    if a.alibi:
        # BLOOM's probabilities outlive the block (the next one runs beside them): counted as
        # the previous block's above.
        p.free(probs)
        return Out(merged)
    return Out(merged, (probs,))


def _mla(
    p: Program, d: Dtype, a: Attention, k: Kernel, hidden: int, *, unwritten: int | None
) -> Out:
    """DeepSeek's multi-head latent attention: q through its low rank (normed), the latent and
    rotary key compressed (the cache keeps them), q and the key rotated, q_nope and q_rot
    concatenated, k / v expanded from the latent by kv_b_proj, the key assembled per head;
    the sparse indexer's mask where there is one; then SDPA (on the CPU its math kernel: q / k
    and v head sizes differ) or eager attention. Every projection lives until o_proj."""
    mla = a.mla
    assert mla is not None
    held: list[int] = []
    q_resid = None
    if mla.q_lora_rank:
        low = p.new(d.tok(mla.q_lora_rank))
        q_resid = rms_norm(p, d, mla.q_lora_rank)
        p.free(low)
    held.append(p.new(d.tok(a.q)))  # q_b_proj
    held.append(p.new(d.tok(mla.kv_lora_rank + mla.rope)))  # kv_a_proj_with_mqa
    latent = rms_norm(p, d, mla.kv_lora_rank)
    held.append(_rope_interleaved(p, d, a.heads * mla.rope))
    key_rot = _rope_interleaved(p, d, mla.rope)
    p.free(latent, key_rot)  # the cache keeps its copies
    if unwritten is not None:
        p.free(unwritten)
    held.append(p.new(d.tok(a.q)))  # cat(q_nope, q_rot)
    held.append(p.new(d.tok(a.heads * (mla.nope + mla.v_head_dim))))  # kv_b_proj
    held.append(p.new(d.tok(a.q)))  # the key, per head
    mask = None
    if a.indexer is not None and q_resid is not None:
        mask = _sparse_mask(p, d, a)
    if q_resid is not None:
        p.free(q_resid)
    if k.eager:
        out = _eager(p, d, a)
    elif k.cpu and a.head_dim != a.v_head_dim:
        out = _math_sdpa(p, d, a, mask=mask is not None)
    else:
        converted = p.new(SCORES * d.e) if mask is not None else None
        out = Out(p.new(d.tok(a.out)))
        p.scratch(TOKENS * (a.heads * FP32))
        if converted is not None:
            p.free(converted)
    projected = p.new(d.tok(hidden))
    p.free(out.out, *held)
    if mask is not None:
        p.free(mask)
    return Out(projected, out.kept)


def _rope_interleaved(p: Program, d: Dtype, width: int) -> int:
    """DeepSeek's interleaved rotary embedding: each half rotated by two products and a sum,
    the halves concatenated."""
    half = d.tok(width // 2)
    halves = []
    for _ in range(2):
        a, b = p.new(half), p.new(half)
        halves.append(p.new(half))
        p.free(a, b)
    out = p.new(d.tok(width))
    p.free(*halves)
    return out


def _math_sdpa(p: Program, d: Dtype, a: Attention, *, mask: bool) -> Out:
    """SDPA's math kernel for 16-bit inputs: a boolean mask made additive (else the causal mask
    it builds), q, k, v upcast to fp32, q and k scaled, fp32 scores and their masked copy, the
    softmax, cast back for the product with v (MLA's v, a slice, copied first), the output cast
    back, then heads merged."""
    scores = SCORES * (a.heads * FP32)
    kv = a.kv if a.mla is None else a.q
    v = a.kv_heads * a.v_head_dim if a.mla is None else a.out
    converted = p.new(SCORES * d.e) if mask and a.mla is not None else None
    upcast = [p.new(TOKENS * (a.q * FP32)), p.new(TOKENS * (kv * FP32))]
    upcast.append(p.new(TOKENS * (v * FP32)))
    scaled_q = p.new(TOKENS * (a.q * FP32))
    causal = None
    if not mask:
        # the causal mask it builds: ones, their lower triangle, then an fp32 additive copy
        ones = p.new(SEQ_SQUARED * 1)
        lower = p.new(SEQ_SQUARED * 1)
        p.free(ones)
        causal = p.new(SEQ_SQUARED * FP32)
        p.free(lower)
    scaled_k = p.new(TOKENS * (kv * FP32))
    raw = p.new(scores)
    p.free(scaled_k)
    summed = p.new(scores)
    p.free(raw)
    soft = p.new(scores)
    p.free(summed)
    probs = p.new(SCORES * (a.heads * d.e))
    # the sparse-attention family's value reaches the kernel strided: its fp32 copy is made
    # contiguous for the product
    contiguous_v = p.new(TOKENS * (v * FP32)) if a.indexer is not None else None
    product = p.new(TOKENS * (a.out * FP32))
    if contiguous_v is not None:
        p.free(contiguous_v)
    out = p.new(d.tok(a.out))
    p.free(product, soft, scaled_q, *upcast, probs)
    p.free(*(t for t in (converted, causal) if t is not None))
    merged = p.new(d.tok(a.out))
    p.free(out)
    return Out(merged)


def _sparse_mask(p: Program, d: Dtype, a: Attention) -> int:
    """DeepSeek sparse attention's indexer (under no_grad) and the mask made of its choice: the
    indexer's q from the query's low rank and one normed key per token, both rotated and upcast;
    ``matmul(q, k^T)`` broadcasts the key over every query, which copies it (batch x seq x dim x
    keys); fp32 scores of each head, scaled and ReLU'd, weighed per head into one score per key,
    causally masked, the top-k kept. The attention scatters those into a boolean mask, combined
    with the causal one. Returns the mask, which lives until the block's attention returns."""
    ix = a.indexer
    assert ix is not None
    width = ix.heads * ix.head_dim
    q = p.new(d.tok(width))
    key = p.new(d.tok(ix.head_dim))
    key_normed = layer_norm(p, d, ix.head_dim)
    p.free(key)
    q_rot = rope(p, d, width, width)
    k_rot = rope(p, d, ix.head_dim, ix.head_dim)
    q32 = p.new(TOKENS * (width * FP32))
    k32 = p.new(TOKENS * (ix.head_dim * FP32))
    # the key broadcast over every query: a view for one sequence, a copy for a batch
    copied = p.new(batched(SCORES * (ix.head_dim * FP32)))
    scores = p.new(SCORES * (ix.heads * FP32))
    p.free(copied, q32, k32)
    scaled = p.new(SCORES * (ix.heads * FP32))
    p.free(scores)
    relu = p.new(SCORES * (ix.heads * FP32))
    p.free(scaled)
    p.scratch(TOKENS * (ix.heads * d.e))
    weights = p.new(TOKENS * (ix.heads * FP32))
    index_scores = p.new(SCORES * FP32)
    inverted = p.new(SCORES * 1)
    masked_scores = p.new(SCORES * FP32)
    p.free(inverted, index_scores)
    top = capped_scores(ix.topk)
    values = p.new(top * FP32)
    indices = p.new(top * INT64)
    p.free(values)
    indices32 = p.new(top * 4)
    p.free(indices, q_rot, q, k_rot, key_normed, relu, weights, masked_scores)
    ones = p.new(SCORES * 1)
    indices64 = p.new(top * INT64)
    chosen = p.new(SCORES * 1)
    p.free(ones, indices64, indices32)
    inverted = p.new(SCORES * 1)
    mask = p.new(SCORES * 1)
    p.free(inverted, chosen)
    return mask
