"""The ops most blocks share, as the tensors transformers' code makes and lets go of: norms, the
rotary embedding, linear layers and the dense MLP. Each takes the program, the widths per token
and the bytes per element, and returns the handle of its output; its input stays the caller's."""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core.prefill.program import TOKENS, Program, Size

FP32 = 4
INT64 = 8
# Activations that transformers writes as several elementwise ops (each a new tensor) rather than
# one kernel: GPT-2's tanh approximation keeps the input and three temporaries alive at once.
MULTI_OP_ACTIVATIONS = frozenset({"gelu_new", "gelu_fast", "quick_gelu_new"})
# Activations of two ops whose first output lives until the second is made: relu(x) ** 2.
TWO_OP_ACTIVATIONS = frozenset({"relu2"})


def per_token(nbytes: int) -> Size:
    return TOKENS * nbytes


@dataclass(frozen=True, slots=True)
class Dtype:
    """Bytes per element of the hidden states (the compute dtype)."""

    e: int

    def tok(self, width: int) -> Size:
        """A (tokens, width) tensor in the compute dtype."""
        return TOKENS * (width * self.e)

    def fp32(self, width: int) -> Size:
        return TOKENS * (width * FP32)


def rms_norm(p: Program, d: Dtype, width: int, *, weighted: bool = True) -> int:
    """LlamaRMSNorm and its kin: ``x.to(float32)``, ``pow(2).mean``, ``x * rsqrt(...)``, back to
    the input dtype, times the weight (GemmaRMSNorm multiplies in fp32 first, the same sizes).
    ``width`` is the normed width per token (a per-head norm's whole q or k width)."""
    upcast = p.new(d.fp32(width)) if d.e != FP32 else None
    p.scratch(d.fp32(width))  # pow(2) while its mean is taken
    stat = p.new(TOKENS * FP32)
    normed = p.new(d.fp32(width))
    if upcast is not None:
        p.free(upcast)
    if d.e != FP32:
        cast = p.new(d.tok(width))
        out = p.new(d.tok(width)) if weighted else cast
        if weighted:
            p.free(cast)
    else:
        out = p.new(d.fp32(width)) if weighted else normed
    if out != normed:
        p.free(normed)
    p.free(stat)
    return out


def layer_norm(p: Program, d: Dtype, width: int) -> int:
    """nn.LayerNorm: its output and two statistics per row, in the input dtype."""
    return p.new(d.tok(width) + TOKENS * (2 * FP32))


def rope(p: Program, d: Dtype, width: int, rotated: int) -> int:
    """``q * cos + rotate_half(q) * sin`` over ``rotated`` of ``width`` elements per token
    (partial rotary: the rotated part, then ``cat`` with the rest)."""
    part = d.tok(rotated)
    times_cos = p.new(part)
    half = p.new(d.tok(rotated // 2))  # -x2 of rotate_half's cat(-x2, x1)
    rotated_half = p.new(part)
    p.free(half)
    times_sin = p.new(part)
    p.free(rotated_half)
    out = p.new(part)
    p.free(times_cos, times_sin)
    if rotated == width:
        return out
    whole = p.new(d.tok(width))
    p.free(out)
    return whole


def _xielu(p: Program, d: Dtype, width: int) -> int:
    """transformers' xIELU in Python ops (Apertus, without its CUDA extension):
    ``where(x > 0, a_p * x * x + b * x, (expm1(min(x, eps)) - x) * a_n + b * x)``."""
    inner = d.tok(width)
    positive = p.new(TOKENS * width)  # x > 0
    scaled = p.new(inner)
    squared = p.new(inner)
    p.free(scaled)
    linear = p.new(inner)
    branch_p = p.new(inner)
    p.free(squared, linear)
    low = p.new(inner)
    expm1 = p.new(inner)
    p.free(low)
    diff = p.new(inner)
    p.free(expm1)
    times = p.new(inner)
    p.free(diff)
    linear = p.new(inner)
    branch_n = p.new(inner)
    p.free(times, linear)
    out = p.new(inner)
    p.free(positive, branch_p, branch_n)
    return out


def dense_mlp(
    p: Program,
    d: Dtype,
    width: int,
    hidden: int,
    *,
    gated: bool,
    fused: bool,
    act: str,
    normed: bool = False,
) -> int:
    """A dense MLP over every token: ``down(act(gate(x)) * up(x))`` (fused: one gate_up linear
    whose output lives until the product is made) or ``down(act(up(x)))``; ``normed``: the
    product RMS-normed before the down projection (BitNet's ``ffn_sub_norm``)."""
    inner = d.tok(width)
    if gated and fused:
        gate_up = p.new(d.tok(2 * width))
        activated = p.new(inner)
        product = p.new(inner)
        p.free(activated, gate_up)
    elif gated:
        gate = p.new(inner)
        activated = p.new(inner)
        p.free(gate)
        up = p.new(inner)
        product = p.new(inner)
        p.free(activated, up)
    else:
        up = p.new(inner)
        if act == "xielu":
            product = _xielu(p, d, width)
        elif act in TWO_OP_ACTIVATIONS:
            first = p.new(inner)
            product = p.new(inner)
            p.free(first)
        elif act in MULTI_OP_ACTIVATIONS:
            # 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3))): three temporaries beside x.
            temps = [p.new(inner) for _ in range(3)]
            p.free(temps[0], temps[1])
            product = p.new(inner)
            p.free(temps[2])
        else:
            product = p.new(inner)
        p.free(up)
    if normed:
        norm = rms_norm(p, d, width)
        p.free(product)
        product = norm
    out = p.new(d.tok(hidden))
    p.free(product)
    return out
