"""Mixture-of-experts MLPs at prefill: the router, then the experts as transformers' code runs
them: ``grouped_mm`` over the (token, expert) slots sorted by expert (its default for experts
stored as 3-D stacks), or every token through every expert (Llama 4); the shared experts over
every token, before or after the routed ones."""

from __future__ import annotations

from vramgui.core.prefill.layers import Experts
from vramgui.core.prefill.ops import FP32, INT64, Dtype, dense_mlp
from vramgui.core.prefill.program import ONE, TOKENS, Program, Size


def experts_mlp(p: Program, d: Dtype, x: Experts, hidden: int, act: str) -> int:
    """The MoE block on the normed input (held by the caller); returns its output."""
    if x.dense:
        # The experts' outputs wait while the shared expert runs, then are summed into its
        # output in place.
        held = _every_expert(p, d, x, hidden)
        out = dense_mlp(p, d, x.shared, hidden, gated=True, fused=False, act=act)
        p.scratch(d.tok(hidden))
        p.free(*held)
        return out
    shared = None
    if x.shared and x.shared_first:
        shared = dense_mlp(p, d, x.shared, hidden, gated=True, fused=False, act=act)
    routed = _grouped(p, d, x, hidden)
    if x.shared and not x.shared_first:
        shared = dense_mlp(p, d, x.shared, hidden, gated=True, fused=False, act=act)
    if shared is None:
        return routed
    if x.shared_gate:
        p.scratch(TOKENS * (2 * d.e))  # sigmoid(linear(x)): one value per token
        scaled = p.new(d.tok(hidden))
        p.free(shared)
        shared = scaled
    out = p.new(d.tok(hidden))
    p.free(routed, shared)
    return out


def _router(p: Program, d: Dtype, x: Experts) -> tuple[int, ...]:
    """Router logits (kept by the block), fp32 probabilities over every expert while the top-k
    is taken, and the top-k weights and indices the experts get."""
    logits = p.new(TOKENS * (x.experts * (FP32 if x.router_fp32 else d.e)))
    upcast = p.new(TOKENS * (x.experts * FP32))
    probs = p.new(TOKENS * (x.experts * FP32))
    p.free(upcast)
    values = p.new(TOKENS * (x.top_k * FP32))
    indices = p.new(TOKENS * (x.top_k * INT64))
    p.free(probs)
    weights = p.new(TOKENS * (x.top_k * (FP32 if x.fp32_routing else d.e)))
    p.free(values)
    return logits, indices, weights


def _grouped(p: Program, d: Dtype, x: Experts, hidden: int) -> int:
    """transformers' ``grouped_mm_experts_forward``: slots sorted by expert, the hidden states
    gathered per slot, gate_up and down as grouped matmuls, the routing weights applied, the slots
    put back in order and summed per token. Its locals live until it returns."""
    router = _router(p, d, x)
    slots = TOKENS * x.top_k
    wbytes = FP32 if x.fp32_routing else d.e
    inner = slots * (x.width * d.e)
    locals_ = [p.new(slots * INT64), p.new(slots * INT64)]  # sorted ids, permutation
    division = p.new(slots * INT64)
    selected = p.new(slots * (hidden * d.e))
    p.free(division)
    locals_ += [selected, p.new(slots * wbytes), p.new(slots * FP32)]  # weights, histc input
    locals_.append(p.new(ONE * (2 * x.experts * FP32)))  # tokens per expert, offsets
    bias = p.new(inner * 2) if x.bias else None
    gate_up = p.new(inner * 2)
    gated = _glu(p, x, inner)
    p.free(gate_up)
    if bias is not None:
        p.free(bias)
        bias = p.new(slots * (hidden * d.e))
    down = p.new(slots * (hidden * d.e))
    p.free(gated)
    locals_.append(down)
    weighted = p.new(slots * (hidden * max(d.e, wbytes)))
    locals_.append(p.new(slots * INT64))  # inverse permutation
    p.scratch(slots * INT64)  # arange
    reordered = p.new(slots * (hidden * max(d.e, wbytes)))
    p.free(weighted)
    locals_.append(reordered)
    summed = p.new(TOKENS * (hidden * max(d.e, wbytes)))
    out = summed
    if wbytes != d.e:
        out = p.new(d.tok(hidden))
        p.free(summed)
    p.free(*locals_, *router)
    if bias is not None:
        p.free(bias)
    return out


def _glu(p: Program, x: Experts, inner: Size) -> int:
    """The experts' gate on the gate_up output: act(gate) * up, or gpt-oss's clamped GLU."""
    if not x.clamped_glu:
        activated = p.new(inner)
        product = p.new(inner)
        p.free(activated)
        return product
    gate = p.new(inner)  # clamp(max=limit)
    up = p.new(inner)  # clamp(-limit, limit)
    scaled = p.new(inner)
    sig = p.new(inner)
    p.free(scaled)
    glu = p.new(inner)
    p.free(sig)
    shifted = p.new(inner)  # up + 1
    product = p.new(inner)
    p.free(shifted, gate, up, glu)
    return product


def _every_expert(p: Program, d: Dtype, x: Experts, hidden: int) -> tuple[int, ...]:
    """Llama 4: the router's top-k scores, sigmoid over a -inf-filled copy; every token repeated
    for every expert and scaled by its score; gate_up and down as batched matmuls over all
    experts. Returns what the block holds until the shared expert has run."""
    logits = p.new(TOKENS * (x.experts * d.e))
    values = p.new(TOKENS * (x.top_k * d.e))
    indices = p.new(TOKENS * (x.top_k * INT64))
    filled = p.new(TOKENS * (x.experts * d.e))
    upcast = p.new(TOKENS * (x.experts * FP32))
    sig = p.new(TOKENS * (x.experts * FP32))
    p.free(upcast)
    scores = p.new(TOKENS * (x.experts * d.e))
    p.free(sig, filled, values, indices)
    every = TOKENS * x.experts
    repeated = p.new(every * (hidden * d.e))
    transposed = p.new(every * d.e)
    routed_in = p.new(every * (hidden * d.e))
    p.free(transposed, repeated)
    gate_up = p.new(every * (2 * x.width * d.e))
    activated = p.new(every * (x.width * d.e))
    product = p.new(every * (x.width * d.e))
    p.free(activated)
    down = p.new(every * (hidden * d.e))
    p.free(product, gate_up)
    return routed_in, down, scores, logits
