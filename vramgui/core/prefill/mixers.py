"""Token mixers other than attention at prefill, as transformers' PyTorch reference code runs
them (what it runs wherever flash-linear-attention, causal-conv1d and mamba-ssm are not
installed: a CPU always, a GPU without them): the gated delta rule of Qwen3-Next and Qwen3.5,
chunked; the rest as their output alone until their code is written here (their blocks are
measured by benchmarks/architectures.py, which marks them approximate where that misses)."""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core.model import ModelSpec, Role
from vramgui.core.prefill.ops import FP32, Dtype, rms_norm
from vramgui.core.prefill.program import BATCH, TOKENS, Program, Size, Term, padded_tokens

# Families whose Mamba mixer scales its input and in_proj's output (muP multipliers).
MUP_MULTIPLIED = frozenset({"falcon_h1"})
# torch_chunk_gated_delta_rule's chunk: the prompt is padded to a multiple of it.
GATED_DELTA_CHUNK = 64


@dataclass(frozen=True, slots=True)
class GatedDelta:
    """A gated delta-rule layer's widths (Qwen3-Next, Qwen3.5) on one GPU."""

    k_heads: int
    v_heads: int
    k_dim: int
    v_dim: int
    conv: int  # the causal convolution's kernel
    fused: bool  # one in_proj_qkvz whose output is split and copied per head group


def gated_delta(spec: ModelSpec, layer: int) -> GatedDelta | None:
    """The layer's gated-delta widths, read from its tensors and cached state."""
    tensors = spec.layer_tensors(layer)
    by_module = {t.module: t for t in tensors if not t.is_bias}
    conv = by_module.get("conv1d")
    norm = next((t for t in tensors if t.role is Role.NORM and ".linear_attn.norm" in t.name), None)
    a_log = next((t for t in tensors if t.name.endswith("A_log")), None)
    if conv is None or norm is None or a_log is None or len(conv.shape) != 3:
        return None
    v_heads, v_dim = a_log.shape[0], norm.shape[0]
    channels, kernel = conv.shape[0], conv.shape[-1]
    value = v_heads * v_dim
    key = (channels - value) // 2
    state = spec.facts.layer_state_elements[layer] if spec.facts.layer_state_elements else 0
    k_dim = (state - channels * kernel) // value if state > channels * kernel else 0
    if key <= 0 or k_dim <= 0 or key % k_dim:
        return None
    return GatedDelta(
        k_heads=key // k_dim,
        v_heads=v_heads,
        k_dim=k_dim,
        v_dim=v_dim,
        conv=kernel,
        fused="in_proj_qkvz" in by_module,
    )


@dataclass(frozen=True, slots=True)
class Mamba2:
    """A Mamba 2 mixer's widths (Mamba 2, Nemotron-H, Falcon-H1, Bamba, Granite 4)."""

    projected: int  # in_proj's output: gate, x / B / C and dt (and any extra MLP part)
    inner: int  # heads x head_dim
    heads: int
    state: int  # ssm state per head and group
    groups: int
    conv: int  # the causal convolution's kernel
    chunk: int
    multipliers: bool  # Falcon-H1's muP: the input scaled, in_proj's output scaled per part


def mamba2(spec: ModelSpec, layer: int) -> Mamba2 | None:
    """The layer's Mamba 2 widths, read from its tensors and cached state."""
    tensors = spec.layer_tensors(layer)
    a_log = next((t for t in tensors if t.name.endswith("A_log")), None)
    conv = next((t for t in tensors if t.name.endswith("conv1d.weight")), None)
    proj = next((t for t in tensors if t.module == "in_proj" and not t.is_bias), None)
    out = next((t for t in tensors if t.module == "out_proj" and not t.is_bias), None)
    chunk = spec.facts.ssm_chunk_size
    if a_log is None or len(a_log.shape) != 1 or None in (conv, proj, out) or not chunk:
        return None
    assert conv is not None and proj is not None and out is not None
    inner, channels, kernel = out.shape[1], conv.shape[0], conv.shape[-1]
    states = spec.facts.layer_state_elements
    cached = states[layer] if states else 0
    state = (cached - channels * kernel) // inner if inner else 0
    group_width = (channels - inner) // 2
    if state <= 0 or group_width <= 0 or group_width % state:
        return None
    return Mamba2(
        projected=proj.shape[0],
        inner=inner,
        heads=a_log.shape[0],
        state=state,
        groups=group_width // state,
        conv=kernel,
        chunk=chunk,
        multipliers=spec.facts.model_type in MUP_MULTIPLIED,
    )


@dataclass(frozen=True, slots=True)
class Mamba1:
    """A Mamba (1) mixer's widths (Mamba, Falcon-Mamba, Jamba) on one GPU."""

    inner: int
    state: int  # per channel
    rank: int  # dt's low rank
    conv: int


def mamba1(spec: ModelSpec, layer: int) -> Mamba1 | None:
    """The layer's Mamba (1) widths: A is a matrix per channel."""
    tensors = spec.layer_tensors(layer)
    a_log = next((t for t in tensors if t.name.endswith("A_log")), None)
    conv = next((t for t in tensors if t.name.endswith("conv1d.weight")), None)
    dt = next((t for t in tensors if t.module == "dt_proj" and not t.is_bias), None)
    if a_log is None or len(a_log.shape) != 2 or conv is None or dt is None:
        return None
    return Mamba1(inner=a_log.shape[0], state=a_log.shape[1], rank=dt.shape[1], conv=conv.shape[-1])


@dataclass(frozen=True, slots=True)
class KimiDelta:
    """A Kimi delta-attention layer's widths (Kimi Linear) on one GPU: a per-channel decay."""

    heads: int
    head_dim: int
    conv: int
    gate_rank: int  # the forget gate's and output gate's low rank


def kimi_delta(spec: ModelSpec, layer: int) -> KimiDelta | None:
    """The layer's Kimi delta-attention widths, from its tensors."""
    tensors = spec.layer_tensors(layer)
    by_module = {t.module: t for t in tensors if not t.is_bias}
    conv, q, a_log = by_module.get("conv1d"), by_module.get("q_proj"), by_module.get("A_log")
    f_a = by_module.get("f_a_proj")
    if conv is None or q is None or f_a is None or a_log is None:
        return None
    heads = max(1, a_log.shape[-1] if len(a_log.shape) == 1 else a_log.numel // a_log.shape[-1])
    width = q.shape[0]
    heads = next((t.shape[0] for t in tensors if t.module == "b_proj" and not t.is_bias), heads)
    return KimiDelta(
        heads=heads, head_dim=width // heads, conv=conv.shape[-1], gate_rank=f_a.shape[0]
    )


def recurrent_fp32_elements(spec: ModelSpec, layer: int) -> int:
    """Elements of the layer's cached state that transformers keeps in fp32 whatever the model's
    dtype: the recurrent state of the gated delta rule and of Mamba 2's chunked scan (computed
    in fp32, handed to the cache as is)."""
    g = gated_delta(spec, layer)
    if g is not None:
        return g.v_heads * g.k_dim * g.v_dim
    m = mamba2(spec, layer)
    if m is not None:
        return m.inner * m.state
    k = kimi_delta(spec, layer)
    if k is not None:
        return k.heads * k.head_dim * k.head_dim
    m1 = mamba1(spec, layer)
    return 0 if m1 is None else m1.inner * m1.state


def mixer(p: Program, d: Dtype, spec: ModelSpec, layer: int, tp: int) -> int:
    """The mixer of block ``layer`` on the normed input; returns its output."""
    g = gated_delta(spec, layer)
    if g is not None:
        return _gated_delta(p, d, g, spec.facts.hidden_size)
    m = mamba2(spec, layer)
    if m is not None:
        return _mamba2(p, d, m, spec.facts.hidden_size)
    k = kimi_delta(spec, layer)
    if k is not None:
        return _kimi_delta(p, d, k, spec.facts.hidden_size)
    m1 = mamba1(spec, layer)
    if m1 is not None:
        return _mamba1(p, d, m1, spec.facts.hidden_size)
    return p.new(d.tok(spec.facts.hidden_size))


def _mamba1(p: Program, d: Dtype, m: Mamba1, hidden: int) -> int:
    """Mamba's mixer without its CUDA kernels: in_proj, the causal convolution and SiLU, x_proj
    and dt_proj, then ``mamba_selective_scan``: A and B discretized for the whole prompt, each a
    fp32 (channels x state) grid per token, beside B times the input, scanned token by token;
    the output gated by SiLU(z); out_proj."""
    grid = TOKENS * (m.inner * m.state * FP32)
    held = [p.new(d.tok(2 * m.inner))]  # in_proj: x and the gate z are views of it
    convolved = p.new(d.tok(m.inner) + BATCH * (m.inner * (m.conv - 1) * d.e))
    x = p.new(d.tok(m.inner))
    p.free(convolved)
    held.append(x)
    held.append(p.new(d.tok(m.rank + 2 * m.state)))  # x_proj: dt, B, C
    dt = p.new(d.tok(m.inner))  # dt_proj
    biased = p.new(d.tok(m.inner))
    p.free(dt)
    dt = p.new(d.tok(m.inner))  # softplus
    p.free(biased)
    product = p.new(grid)  # A * dt
    discrete_a = p.new(grid)
    p.free(product)
    b32 = p.new(TOKENS * (m.state * FP32))
    discrete_b = p.new(grid)
    x32 = p.new(TOKENS * (m.inner * FP32))
    delta_b_u = p.new(grid)
    p.free(x32)
    # the scan: a state per sequence, an output per token, stacked
    steps = p.new(d.tok(m.inner) + BATCH * (m.inner * m.state * FP32))
    stacked = p.new(TOKENS * (m.inner * FP32))
    p.free(steps)
    skip = p.new(TOKENS * (m.inner * FP32))  # + x * D
    p.free(stacked)
    gate = p.new(d.tok(m.inner))  # SiLU(z)
    gated = p.new(TOKENS * (m.inner * FP32))
    p.free(gate, skip, discrete_a, b32, discrete_b, delta_b_u, dt)
    cast = p.new(d.tok(m.inner))
    projected = p.new(d.tok(hidden))
    p.free(cast, gated, *held)
    return projected


def _kimi_delta(p: Program, d: Dtype, k: KimiDelta, hidden: int) -> int:
    """Kimi delta attention: q / k / v projected and concatenated, the causal convolution and
    SiLU, the per-channel forget gate in fp32, beta; then ``chunk_kimi_delta_attention``: q, k,
    v, g upcast, q / k L2-normed, padded to the chunk, the (chunk x chunk x head_dim) decay of
    every chunk and the products it weighs (the largest tensors), the UT solve, the scan; the
    gated RMSNorm in fp32; o_proj."""
    chunk = GATED_DELTA_CHUNK
    width = k.heads * k.head_dim
    tok32 = TOKENS * (width * FP32)
    pad = padded_tokens(chunk) * (width * FP32)
    cube = padded_tokens(chunk) * (width * chunk * FP32)  # (chunk x chunk x head_dim) per chunk
    square = padded_tokens(chunk) * (k.heads * chunk * FP32)
    projections = [p.new(d.tok(width)) for _ in range(3)]
    mixed = p.new(d.tok(3 * width))
    p.free(*projections)
    convolved = p.new(d.tok(3 * width) + BATCH * (3 * width * (k.conv - 1) * d.e))
    held = [p.new(d.tok(3 * width))]  # SiLU; q, k, v are views of it
    p.free(convolved, mixed)
    low = p.new(d.tok(k.gate_rank))
    gate = p.new(d.tok(width))
    p.free(low)
    upcast = p.new(tok32)
    biased = p.new(tok32)
    p.free(upcast)
    above = p.new(TOKENS * width)
    exp = p.new(tok32)
    plus_one = p.new(tok32)
    p.free(exp)
    log = p.new(tok32)
    p.free(plus_one)
    softplus = p.new(tok32)
    p.free(above, log)
    held.append(p.new(tok32))  # g
    p.free(gate, biased, softplus)
    held.append(p.new(TOKENS * (k.heads * d.e)))  # beta
    # chunk_kimi_delta_attention: q, k, v made contiguous then fp32; g made contiguous
    inputs = []
    for _ in range(3):
        copy = p.new(d.tok(width))
        inputs.append(p.new(tok32))
        p.free(copy)
    inputs.append(p.new(tok32))
    q32, k32, v32, g32 = inputs
    normed = []
    for x in (q32, k32):  # l2norm
        p.scratch(tok32)
        normed.append(p.new(tok32))
        p.free(x)
    padded_q = p.new(pad)
    query = p.new(pad)  # * scale
    p.free(padded_q, normed[0])
    key = p.new(pad)
    p.free(normed[1])
    value = p.new(pad)
    p.free(v32)
    g_padded = p.new(pad)
    p.free(g32)
    v_beta, k_beta = p.new(pad), p.new(pad)
    g_cum = p.new(pad)
    p.free(g_padded)
    difference = p.new(cube)
    masked = p.new(cube)
    p.free(difference)
    decay = p.new(cube)
    p.free(masked)
    product = p.new(cube)
    weighted = p.new(cube)
    p.free(product)
    summed = p.new(square)
    p.free(weighted)
    attn = p.new(square)
    p.free(summed)
    attn = _replace_with(p, attn, square)  # the negation, then + eye after the solve
    attn = _replace_with(p, attn, square)
    new_value = p.new(pad)
    p.free(value)
    exp_g = p.new(pad)
    k_decayed = p.new(pad)
    cumdecay = p.new(pad)
    p.free(exp_g, k_decayed)
    state = p.new(BATCH * (k.heads * k.head_dim * k.head_dim * FP32))
    out = p.new(pad)
    # the scan: per chunk, q * k * decay over (chunk x chunk x head_dim), twice
    per_chunk = BATCH * (k.heads * chunk * chunk * k.head_dim * FP32)
    p.free(p.new(per_chunk), p.new(per_chunk))
    result = p.new(d.tok(width))
    p.free(out, state, cumdecay, new_value, attn, decay, g_cum, v_beta, k_beta, key, query)
    p.free(*held)
    # the output gate's low-rank projection, the gated RMSNorm in fp32, o_proj
    low = p.new(d.tok(k.gate_rank))
    gate = p.new(d.tok(width))
    p.free(low)
    normed_out = rms_norm(p, d, width, weighted=False)
    gated = p.new(tok32)
    p.free(normed_out)
    cast = p.new(d.tok(width))
    p.free(gated, gate, result)
    projected = p.new(d.tok(hidden))
    p.free(cast)
    return projected


def _replace_with(p: Program, old: int, size: Size) -> int:
    new = p.new(size)
    p.free(old)
    return new


def _mamba2(p: Program, d: Dtype, m: Mamba2, hidden: int) -> int:
    """Mamba 2's mixer: in_proj, the causal convolution (its state goes to the cache) and SiLU,
    dt, then ``mamba2_chunk_scan`` (x, B, C upcast, B and C repeated from groups to heads, all
    padded to the chunk; the segment sums, the chunk-local (chunk x chunk) decay and Gram
    matrices, the chunk states and their recurrence, the outputs) and the gated RMSNorm in fp32;
    out_proj."""
    h = m.heads
    channels = m.inner + 2 * m.groups * m.state
    tok32 = TOKENS * FP32
    pad = padded_tokens(m.chunk) * FP32
    chunks = Size({Term(batch=1, seq=1, pad=m.chunk): 1})  # x chunk count below
    scaled_in = p.new(d.tok(hidden)) if m.multipliers else None
    held = [p.new(d.tok(m.projected))]  # in_proj, split into views
    if m.multipliers:
        projected = p.new(d.tok(m.projected))
        p.free(held.pop())
        held.append(projected)
    convolved = p.new(d.tok(channels) + BATCH * (channels * (m.conv - 1) * d.e))
    held.append(p.new(d.tok(channels)))  # SiLU; x, B and C are views of it
    p.free(convolved)
    if scaled_in is not None:
        p.free(scaled_in)
    dt = [p.new(d.tok(h))]
    dt.append(p.new(d.tok(h)))
    p.free(dt[0])
    dt.append(p.new(d.tok(h)))
    p.free(dt[1])
    held.append(dt[2])
    x32 = p.new(tok32 * m.inner)
    heads_state = h * m.state
    repeated = []
    for _ in range(2):  # B, then C: upcast, then repeated from groups to heads
        upcast = p.new(tok32 * (m.groups * m.state))
        repeated.append(p.new(tok32 * heads_state))
        p.free(upcast)
    padded_x = p.new(pad * m.inner)
    scan = [p.new(pad * m.inner)]  # D residual
    p.free(padded_x)
    scaled_x = p.new(tok32 * m.inner)  # x * dt
    p.free(x32)
    a_dt = p.new(tok32 * h)
    scan += [
        p.new(pad * m.inner),
        p.new(pad * h),
        p.new(pad * heads_state),
        p.new(pad * heads_state),
    ]
    p.free(scaled_x, a_dt, *repeated)
    scan.append(p.new(pad * h))  # A's cumulative sum
    square = pad * (h * m.chunk)  # (chunk x chunk) per chunk and head
    filled = p.new(square)
    summed = p.new(square)
    masked = p.new(square)
    p.free(summed, filled)
    scan.append(p.new(square))  # L = exp(segment sums)
    p.free(masked)
    copies = [p.new(pad * heads_state), p.new(pad * heads_state)]
    scan.append(p.new(square))  # C B^T
    p.free(*copies)
    scan.append(p.new(square))  # times L
    copy = p.new(pad * m.inner)
    scan.append(p.new(pad * m.inner))  # the diagonal blocks' output
    p.free(copy)
    scan.append(p.new(pad * h))  # decay of the states
    scan.append(p.new(pad * heads_state))  # B decayed
    per_chunk_states = chunks * (m.inner * m.state * FP32 // m.chunk)
    copies = [p.new(pad * m.inner), p.new(pad * heads_state)]
    states = p.new(per_chunk_states)
    p.free(*copies)
    scan.append(p.new(BATCH * (m.inner * m.state * FP32)))  # the initial states
    with_initial = per_chunk_states + BATCH * (m.inner * m.state * FP32)
    cat = p.new(with_initial)
    p.free(states)
    copy = p.new(with_initial)
    new_states = p.new(with_initial)
    p.free(copy, cat)
    held.append(new_states)  # the final state, a view of it, goes to the cache
    scan.append(p.new(pad * h))  # decay out of the states
    copies = [p.new(pad * heads_state), p.new(per_chunk_states)]
    scan.append(p.new(pad * m.inner))  # C times the states
    p.free(*copies)
    scan.append(p.new(pad * m.inner))  # the off-diagonal blocks' output
    summed_y = p.new(pad * m.inner)
    reshaped = p.new(pad * m.inner)
    p.free(summed_y)
    y = p.new(pad * m.inner)  # + D residual
    p.free(reshaped, *scan)
    # the gated RMSNorm, grouped, in fp32, then back to the compute dtype for out_proj
    gate32 = p.new(tok32 * m.inner)
    silu = p.new(tok32 * m.inner)
    p.free(gate32)
    gated = p.new(tok32 * m.inner)
    p.free(silu)
    p.scratch(tok32 * m.inner)  # pow(2) per group
    normed = p.new(tok32 * m.inner)
    p.free(gated)
    weighted = p.new(tok32 * m.inner)
    p.free(normed)
    cast = p.new(d.tok(m.inner))
    projected = p.new(d.tok(hidden))
    p.free(cast, weighted, y, *held)
    return projected


def _gated_delta(p: Program, d: Dtype, g: GatedDelta, hidden: int) -> int:
    """Qwen3-Next's GatedDeltaNet: the projections, the causal convolution (its state goes to
    the cache) and SiLU, beta and the decay, then ``torch_chunk_gated_delta_rule``: q and k
    repeated to the value heads, everything upcast to fp32, q / k L2-normed, padded to the chunk,
    the chunk-local decay and attention matrices, the triangular solves, the scan over chunks;
    then the gated RMSNorm and out_proj."""
    key, value = g.k_heads * g.k_dim, g.v_heads * g.v_dim
    channels = 2 * key + value
    held: list[int] = []
    if g.fused:
        # in_proj_qkvz lives until the layer returns; the per-group split copies v, z, q, k
        held.append(p.new(d.tok(2 * key + 2 * value)))
        held.append(p.new(TOKENS * (2 * g.v_heads * d.e)))  # in_proj_ba
        copies = [p.new(d.tok(value))]
        held.append(p.new(d.tok(value)))  # z
        held += [p.new(TOKENS * (g.v_heads * d.e)) for _ in range(2)]  # b, a
        copies += [p.new(d.tok(key)), p.new(d.tok(key))]
        mixed = p.new(d.tok(channels))
    else:
        mixed = p.new(d.tok(channels))  # in_proj_qkv
        held.append(p.new(d.tok(value)))  # in_proj_z
        held += [p.new(TOKENS * (g.v_heads * d.e)) for _ in range(2)]  # b, a
        copies = []
    # the convolution over the prompt and its K - 1 padding, then SiLU
    convolved = p.new(d.tok(channels) + BATCH * (channels * (g.conv - 1) * d.e))
    activated = p.new(d.tok(channels))
    p.free(convolved, mixed, *copies)
    held.append(activated)  # q, k, v are views of it
    held.append(p.new(TOKENS * (g.v_heads * d.e)))  # beta
    held.append(p.new(TOKENS * (g.v_heads * FP32)))  # g, the decay
    out = _chunk_rule(p, d, g)
    # the gated RMSNorm on (tokens x heads, v_dim) rows, gated by SiLU(z) in fp32
    normed = rms_norm(p, d, value)
    p.free(out)
    gate32 = p.new(TOKENS * (value * FP32))
    silu = p.new(TOKENS * (value * FP32))
    gated = p.new(TOKENS * (value * FP32))
    p.free(gate32, silu)
    cast = p.new(d.tok(value))
    p.free(gated, normed)
    projected = p.new(d.tok(hidden))
    p.free(cast, *held)
    return projected


def _chunk_rule(p: Program, d: Dtype, g: GatedDelta) -> int:
    """``torch_chunk_gated_delta_rule``; returns its output, (tokens, value) in the compute
    dtype. Its locals live until it returns."""
    chunk = GATED_DELTA_CHUNK
    hv = g.v_heads
    k32 = TOKENS * (hv * g.k_dim * FP32)
    v32 = TOKENS * (hv * g.v_dim * FP32)
    pk = padded_tokens(chunk) * (hv * g.k_dim * FP32)
    pv = padded_tokens(chunk) * (hv * g.v_dim * FP32)
    per_head = padded_tokens(chunk) * (hv * FP32)
    square = padded_tokens(chunk) * (hv * chunk * FP32)  # (chunk x chunk) per chunk and head
    repeated = []
    if g.k_heads != g.v_heads:
        repeated = [p.new(d.tok(hv * g.k_dim)), p.new(d.tok(hv * g.k_dim))]
    query, key, value = p.new(k32), p.new(k32), p.new(v32)
    beta = p.new(TOKENS * (hv * FP32))
    p.free(*repeated)
    p.scratch(k32)  # l2norm: x * x, then x * rsqrt(sum)
    normed_q = p.new(k32)
    p.free(query)
    p.scratch(k32)
    normed_k = p.new(k32)
    p.free(key)
    query = p.new(k32)  # scaled by the head size
    p.free(normed_q)
    key = normed_k
    padded = [p.new(pk), p.new(pk), p.new(pv)]
    p.free(query, key, value)
    query, key, value = padded
    padded_beta = [p.new(per_head), p.new(per_head)]
    p.free(beta)
    locals_ = [value, *padded_beta]
    locals_ += [p.new(pv), p.new(pk)]  # v_beta, k_beta
    locals_.append(p.new(per_head))  # cumulative decay
    difference = p.new(square)
    masked = p.new(square)
    p.free(difference)
    locals_.append(p.new(square))  # pairwise decay
    p.free(masked)
    for _ in range(2):  # the UT system and the intra-chunk attention
        product = p.new(square)
        locals_.append(p.new(square))
        p.free(product)
    locals_.append(p.new(pk))  # decayed k_beta
    locals_ += [p.new(pv), p.new(pk)]  # new values, k_cumdecay
    locals_.append(p.new(BATCH * (hv * g.k_dim * g.v_dim * FP32)))  # the recurrent state
    out = p.new(pv)
    decayed_q = p.new(pk)
    p.free(query)
    decayed_k = p.new(pk)
    p.free(key)
    locals_ += [decayed_q, decayed_k]
    # the scan: per chunk, two state-sized and two chunk-sized temporaries
    state = BATCH * (hv * g.k_dim * g.v_dim * FP32)
    per_chunk = BATCH * (hv * chunk * g.v_dim * FP32)
    scan = [p.new(per_chunk), p.new(per_chunk), p.new(state), p.new(state)]
    p.free(*scan)
    result = p.new(d.tok(hv * g.v_dim))
    p.free(out, *locals_)
    return result
