"""Family layer programs: each family's block, embeddings and head written as the operations
transformers' implementation runs, over the replay (replay.py). A new family is a new program
here and an entry in ``_LAYER_PROGRAMS``; the Llama-style program is the default."""

from __future__ import annotations

import math
from collections.abc import Callable

from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.prefill.layers import CLAMPED_GLU, DENSE_EXPERTS, FP32_ROUTING
from vramgui.core.prefill.ops import FP32
from vramgui.core.training.replay import Replay, ReplayTensor


def _has(spec: ModelSpec, layer: int, module: str) -> bool:
    modules = spec.cached(
        ("training_layer_modules", layer),
        lambda: frozenset(t.module for t in spec.layer_tensors(layer)),
    )
    return module in modules


def _llama_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """Llama-style decoder block (llama, mistral, qwen2/3, phi3, gemma 1-3).

    Under tensor parallelism the heads and the MLP width are this rank's share; the block's
    input, norms and residuals stay whole.
    """
    f = spec.facts
    ctx = r.ctx
    tp = ctx.tp
    gemma = f.model_type.startswith("gemma")
    sandwich = gemma and f.model_type != "gemma"  # gemma 2 / 3 norm after attention and MLP too
    trainable = ctx.full
    h, hd = f.hidden_size, f.head_dim
    heads, kv_heads = f.num_heads // tp, max(1, f.num_kv_heads // tp)
    tok = ctx.tokens
    y = r.rms_norm(x, h, trainable, gemma=gemma)
    if _has(spec, layer, "qkv_proj"):
        qkv = r.proj(y, "qkv_proj", (heads + 2 * kv_heads) * hd)
        q = ReplayTensor(tok * heads * hd, qkv.itemsize, qkv.grad, qkv)
        k = ReplayTensor(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
        v = ReplayTensor(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
    else:
        q = r.proj(y, "q_proj", heads * hd)
        k = r.proj(y, "k_proj", kv_heads * hd)
        v = r.proj(y, "v_proj", kv_heads * hd)
    if _has(spec, layer, "q_norm"):
        q = r.rms_norm(q, hd, trainable, gemma=gemma)
        k = r.rms_norm(k, hd, trainable, gemma=gemma)
    # Rotary embedding: q * cos + rotate_half(q) * sin keeps only cos / sin (shared by all
    # layers, in the hidden states' dtype) and yields new q / k in the promoted dtype.
    q = r.mul_const(q, r.new(tok * hd, ctx.param_bytes, False))
    k = r.mul_const(k, r.new(tok * hd, ctx.param_bytes, False))
    a = _attend(
        r,
        spec,
        q,
        k,
        v,
        softcap=f.model_type == "gemma2",
        masked=_windowed(spec, layer, ctx.seq),
        sinks=_has(spec, layer, "sinks"),
    )
    o = r.proj(a, "o_proj", h)
    if sandwich:
        o = r.rms_norm(o, h, trainable, gemma=True)
    x = r.add(x, r.dropout(o, f.hidden_dropout))
    y = r.rms_norm(x, h, trainable, gemma=gemma)
    if f.moe_layers and f.moe_layers[layer]:
        d = _moe_mlp(r, spec, layer, y)
    else:
        d = _gated_mlp(r, y, f.intermediate_size // tp, h, fused=_has(spec, layer, "gate_up_proj"))
    if sandwich:
        d = r.rms_norm(d, h, trainable, gemma=True)
    return r.add(x, r.dropout(d, f.hidden_dropout))


def _gated_mlp(r: Replay, y: ReplayTensor, inter: int, hidden: int, *, fused: bool) -> ReplayTensor:
    """SwiGLU / GeGLU: act(gate(y)) * up(y), then down; gate and up may be one fused linear."""
    rows = y.numel // r.width_of(y)
    if fused:
        gu = r.proj(y, "gate_up_proj", 2 * inter)
        gate = ReplayTensor(rows * inter, gu.itemsize, gu.grad, gu)
        up = ReplayTensor(rows * inter, gu.itemsize, gu.grad, gu)
        m = r.mul(up, r.unary_saving_input(gate))
    else:
        gate = r.proj(y, "gate_proj", inter)
        up = r.proj(y, "up_proj", inter)
        m = r.mul(r.unary_saving_input(gate), up)
    return r.proj(m, "down_proj", hidden)


def _moe_mlp(r: Replay, spec: ModelSpec, layer: int, y: ReplayTensor) -> ReplayTensor:
    """A mixture-of-experts MLP as transformers runs it: the router's logits and probabilities;
    each token's hidden state gathered once per chosen expert (``grouped_mm`` over the slots
    sorted by expert), through the expert's gated MLP (gpt-oss's clamped, biased GLU), weighted
    by its routing weight (which needs a gradient wherever the router's input does), summed per
    token in the hidden states' dtype; plus the shared experts over every token. Llama 4 runs
    every token through every expert instead."""
    f = spec.facts
    ctx = r.ctx
    tok = ctx.tokens
    if f.model_type in DENSE_EXPERTS:
        return _every_expert_mlp(r, spec, layer, y)
    router_logits = r.linear(y, f.num_experts, ctx.full)
    r.unary_saving_output(r.cast(router_logits, 4))
    routed = tok * f.experts_per_token
    # Indexing keeps only the indices; the experts' first linear keeps the gathered rows when
    # its weights train.
    picked = r.new(routed * f.hidden_size, y.itemsize, y.grad)
    inter = f.moe_intermediate_size // ctx.tp
    if f.model_type in CLAMPED_GLU:
        expert_out = _clamped_glu_rows(r, picked, inter, f.hidden_size)
    else:
        expert_out = _gated_mlp_rows(r, picked, inter, f.hidden_size)
    routing = FP32 if f.model_type in FP32_ROUTING else ctx.compute_bytes
    weighted = r.mul(expert_out, r.new(routed, routing, y.grad or ctx.full))
    # summed per token and cast back to the hidden states' dtype
    out = r.new(y.numel, y.itemsize, weighted.grad)
    shared = _shared_width(spec, layer) // ctx.tp
    if shared:
        out = r.add(out, _gated_mlp(r, y, shared, f.hidden_size, fused=False))
    return out


def _shared_width(spec: ModelSpec, layer: int) -> int:
    return sum(
        t.shape[0]
        for t in spec.layer_tensors(layer)
        if t.role == Role.SHARED_EXPERT and t.module == "gate_proj" and not t.is_bias
    )


def _every_expert_mlp(r: Replay, spec: ModelSpec, layer: int, y: ReplayTensor) -> ReplayTensor:
    """Llama 4's experts: the router's top-k scores (sigmoid), every token repeated for every
    expert and scaled by its score, gate_up and down as batched matmuls over all experts, the
    experts' outputs summed into the shared expert's."""
    f = spec.facts
    ctx = r.ctx
    tok = ctx.tokens
    experts, h = f.num_experts, f.hidden_size
    inter = f.moe_intermediate_size // ctx.tp
    r.linear(y, experts, ctx.full)
    scores = r.unary_saving_output(r.new(tok * experts, y.itemsize, y.grad or ctx.full))
    repeated = r.new(experts * tok * h, y.itemsize, y.grad)
    routed_in = r.mul(repeated, scores)
    rows = experts * tok
    gate_up = r.linear_rows(routed_in, rows, 2 * inter, ctx.full)
    gate = ReplayTensor(rows * inter, gate_up.itemsize, gate_up.grad, gate_up)
    up = ReplayTensor(rows * inter, gate_up.itemsize, gate_up.grad, gate_up)
    product = r.mul(up, r.unary_saving_input(gate))
    down = r.linear_rows(product, rows, h, ctx.full)
    out = r.new(y.numel, y.itemsize, down.grad)
    shared = _shared_width(spec, layer) // ctx.tp
    if shared:
        out = r.add(_gated_mlp(r, y, shared, h, fused=False), out)
    return out


def _clamped_glu_rows(r: Replay, x: ReplayTensor, inter: int, hidden: int) -> ReplayTensor:
    """gpt-oss's experts over gathered rows: gate_up (interleaved gate and up), the gate clamped
    and gated by its sigmoid, times (clamped up + 1), then down."""
    ctx = r.ctx
    rows = x.numel // hidden
    gu = r.linear_rows(x, rows, 2 * inter, ctx.full)
    # clamp's backward needs only a mask of where it clamped, computed from its input (a view of
    # gate_up); the clamped gate is what the products keep
    r.save(gu)
    gate = r.new(rows * inter, gu.itemsize, gu.grad)
    up = r.new(rows * inter, gu.itemsize, gu.grad)
    scaled = r.new(gate.numel, gate.itemsize, gate.grad)  # alpha * gate
    glu = r.mul(gate, r.unary_saving_output(scaled))
    shifted = r.add(up, r.new(1, up.itemsize, False))  # up + 1
    product = r.mul(shifted, glu)
    return r.linear_rows(product, rows, hidden, ctx.full)


def _gated_mlp_rows(r: Replay, x: ReplayTensor, inter: int, hidden: int) -> ReplayTensor:
    """An expert's gated MLP over gathered rows (its weights are 3-D stacks, always trainable
    in a full fine-tune, frozen under LoRA)."""
    ctx = r.ctx
    rows = x.numel // hidden
    gu = r.linear_rows(x, rows, 2 * inter, ctx.full)
    gate = ReplayTensor(rows * inter, gu.itemsize, gu.grad, gu)
    up = ReplayTensor(rows * inter, gu.itemsize, gu.grad, gu)
    m = r.mul(up, r.unary_saving_input(gate))
    return r.linear_rows(m, rows, hidden, ctx.full)


def _windowed(spec: ModelSpec, layer: int, seq: int) -> bool:
    """A sliding-window layer whose window is shorter than the sequence (it needs a mask)."""
    f = spec.facts
    sliding = bool(f.layer_types) and f.layer_types[layer] == LayerType.SLIDING
    return sliding and f.sliding_window is not None and f.sliding_window < seq


def _attend(
    r: Replay,
    spec: ModelSpec,
    q: ReplayTensor,
    k: ReplayTensor,
    v: ReplayTensor,
    **kernel: bool,
) -> ReplayTensor:
    """Attention over this rank's heads with the model's attention dropout; ``kernel`` names
    how the family runs it (``Replay.attention``'s softmax_fp32, q_bshd, softcap...)."""
    heads, kv_heads, hd = _heads(spec, r.ctx.tp)
    return r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        dropout=spec.facts.attention_dropout,
        **kernel,
    )


def _heads(spec: ModelSpec, tp: int) -> tuple[int, int, int]:
    f = spec.facts
    return f.num_heads // tp, max(1, f.num_kv_heads // tp), f.head_dim


def _fused_qkv(
    r: Replay, spec: ModelSpec, y: ReplayTensor, module: str
) -> tuple[ReplayTensor, ReplayTensor, ReplayTensor]:
    """One linear for q, k and v; the three are views of its output."""
    heads, kv_heads, hd = _heads(spec, r.ctx.tp)
    tok = r.ctx.tokens
    qkv = r.proj(y, module, (heads + 2 * kv_heads) * hd)
    q = ReplayTensor(tok * heads * hd, qkv.itemsize, qkv.grad, qkv)
    k = ReplayTensor(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
    v = ReplayTensor(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
    return q, k, v


def _new_gelu(r: Replay, x: ReplayTensor) -> ReplayTensor:
    """transformers' NewGELUActivation, in Python ops: 0.5x(1 + tanh(c(x + 0.044715x^3))).

    pow keeps x (CUDA autocast runs pow in fp32, on an fp32 copy), tanh its output, and the
    final product both factors.
    """
    x32 = r.autocast_fp32(x)
    r.unary_saving_input(x32)
    inner = r.new(x.numel, x32.itemsize, x.grad)
    t = r.unary_saving_output(inner)
    half = r.new(x.numel, x.itemsize, x.grad)
    return r.mul(half, r.add(t, t))


def _pre_ln_fused_block(
    r: Replay,
    spec: ModelSpec,
    x: ReplayTensor,
    *,
    modules: tuple[str, str, str, str],
    softmax_fp32: bool,
    activation: Callable[[Replay, ReplayTensor], ReplayTensor],
) -> ReplayTensor:
    """A pre-LN block with one fused q / k / v linear, a two-linear MLP and dropout after each
    branch: GPT-2 and BLOOM run it, with their own module names (``modules``: qkv, attention
    output, MLP in, MLP out), softmax dtype and activation."""
    qkv, attn_out, mlp_in, mlp_out = modules
    f = spec.facts
    ctx = r.ctx
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, qkv)
    a = _attend(r, spec, q, k, v, softmax_fp32=softmax_fp32)
    x = r.add(x, r.dropout(r.proj(a, attn_out, f.hidden_size), f.hidden_dropout))
    y = r.layer_norm(x, ctx.full)
    m = activation(r, r.proj(y, mlp_in, f.intermediate_size // ctx.tp))
    return r.add(x, r.dropout(r.proj(m, mlp_out, f.hidden_size), f.hidden_dropout))


def _gpt2_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """GPT-2 block: pre-LN, fused c_attn (Conv1D), NewGELU MLP, dropout on every branch."""
    return _pre_ln_fused_block(
        r,
        spec,
        x,
        modules=("c_attn", "c_proj", "c_fc", "c_proj"),
        softmax_fp32=False,
        activation=_new_gelu,
    )


def _post_ln(spec: ModelSpec) -> bool:
    """OPT-350m style: no final norm, each block normalizes after its residual add."""
    return not any(t.role == Role.NORM for t in spec.layer_tensors(None))


def _opt_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """OPT block: separate q / k / v, ReLU MLP, dropout after out_proj and fc2."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    post = _post_ln(spec)
    y = x if post else r.layer_norm(x, ctx.full)
    q = r.proj(y, "q_proj", heads * hd)
    k = r.proj(y, "k_proj", kv_heads * hd)
    v = r.proj(y, "v_proj", kv_heads * hd)
    a = _attend(r, spec, q, k, v, softmax_fp32=True)
    x = r.add(x, r.dropout(r.proj(a, "out_proj", f.hidden_size), f.hidden_dropout))
    if post:
        x = r.layer_norm(x, ctx.full)
    y = x if post else r.layer_norm(x, ctx.full)
    m = r.unary_saving_output(r.proj(y, "fc1", f.intermediate_size // ctx.tp))  # ReLU
    x = r.add(x, r.dropout(r.proj(m, "fc2", f.hidden_size), f.hidden_dropout))
    return r.layer_norm(x, ctx.full) if post else x


def _neox_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """GPT-NeoX block: parallel residual x + attn(ln1(x)) + mlp(ln2(x)), (partial) rotary."""
    f = spec.facts
    ctx = r.ctx
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, "query_key_value")
    # Rotary on the rotated part, then cat with the pass-through part: new q and k laid out
    # (batch, heads, seq, hd); v stays a view of the fused output, which SDPA's saved v keeps
    # whole (the CPU kernel alone saves a contiguous copy instead).
    q = r.new(q.numel, q.itemsize, q.grad)
    k = r.new(k.numel, k.itemsize, k.grad)
    a = _attend(r, spec, q, k, v, softmax_fp32=True, q_bshd=False)
    attn = r.dropout(r.proj(a, "dense", f.hidden_size), f.hidden_dropout)
    y2 = r.layer_norm(x, ctx.full)
    m = r.unary_saving_input(r.proj(y2, "dense_h_to_4h", f.intermediate_size // ctx.tp))
    mlp = r.dropout(r.proj(m, "dense_4h_to_h", f.hidden_size), f.hidden_dropout)
    return r.add(r.add(x, attn), mlp)


def _bloom_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """BLOOM block: ALiBi scores via baddbmm, fp32 softmax, GELU (custom autograd) MLP."""
    return _pre_ln_fused_block(
        r,
        spec,
        x,
        modules=("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
        softmax_fp32=True,
        activation=Replay.unary_saving_input,
    )


def _falcon_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """Falcon block: parallel attention and MLP on one (or two) layer norms, multi-query."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, _ = _heads(spec, ctx.tp)  # multi-query when one KV head serves all
    norms = [t for t in spec.layer_tensors(layer) if t.role == Role.NORM and not t.is_bias]
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, "query_key_value")
    q = r.new(q.numel, q.itemsize, q.grad)  # rotary
    k = r.new(k.numel, k.itemsize, k.grad)
    a = _attend(
        r, spec, q, k, v, softmax_fp32=False, q_bshd=False, kv_broadcast=kv_heads == 1 and heads > 1
    )
    attn = r.proj(a, "dense", f.hidden_size)
    y2 = r.layer_norm(x, ctx.full) if len(norms) > 1 else y
    m = r.unary_saving_input(r.proj(y2, "dense_h_to_4h", f.intermediate_size // ctx.tp))
    mlp = r.proj(m, "dense_4h_to_h", f.hidden_size)
    return r.add(r.add(x, attn), mlp)


def _bert_layer(r: Replay, spec: ModelSpec, layer: int, x: ReplayTensor) -> ReplayTensor:
    """BERT block: post-LN, separate query / key / value, dropout everywhere, GELU MLP."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    q = r.proj(x, "query", heads * hd)
    k = r.proj(x, "key", kv_heads * hd)
    v = r.proj(x, "value", kv_heads * hd)
    a = _attend(r, spec, q, k, v, softmax_fp32=False)
    x = r.layer_norm(
        r.add(r.dropout(r.proj(a, "dense", f.hidden_size), f.hidden_dropout), x), ctx.full
    )
    m = r.unary_saving_input(r.proj(x, "dense", f.intermediate_size // ctx.tp))
    d = r.dropout(r.proj(m, "dense", f.hidden_size), f.hidden_dropout)
    return r.layer_norm(r.add(d, x), ctx.full)


_LAYER_PROGRAMS: dict[str, Callable[[Replay, ModelSpec, int, ReplayTensor], ReplayTensor]] = {
    "gpt2": _gpt2_layer,
    "opt": _opt_layer,
    "gpt_neox": _neox_layer,
    "bloom": _bloom_layer,
    "falcon": _falcon_layer,
    "bert": _bert_layer,
}


def layer_program(
    spec: ModelSpec,
) -> Callable[[Replay, ModelSpec, int, ReplayTensor], ReplayTensor]:
    return _LAYER_PROGRAMS.get(spec.facts.model_type, _llama_layer)


def embed(r: Replay, spec: ModelSpec) -> ReplayTensor:
    """The embeddings up to the first block's input."""
    f = spec.facts
    ctx = r.ctx
    tok = ctx.tokens
    r.ids(tok)
    outside = spec.layer_tensors(None)
    embed_width = max(
        (t.shape[-1] for t in outside if t.role == Role.EMBEDDING), default=f.hidden_size
    )
    x = r.new(tok * embed_width, ctx.param_bytes, False)
    if f.model_type == "opt":
        r.ids(tok)  # positions from the attention mask's cumsum
        if any(t.module == "project_in" for t in outside):
            x = r.linear(x, f.hidden_size, ctx.full)
        x = r.add(x, r.new(tok * f.hidden_size, ctx.param_bytes, False))  # + positions
    elif f.model_type in ("gpt2", "bert"):
        r.ids(ctx.seq)  # position ids
        if f.model_type == "bert":
            r.ids(tok)  # token type ids
    if f.model_type in {"bloom", "bert"}:
        x = r.layer_norm(x, ctx.full)
    x.grad = x.grad or ctx.full
    if f.model_type in {"gpt2", "bert"}:
        x = r.dropout(x, f.hidden_dropout)
    return x


def head(r: Replay, spec: ModelSpec, x: ReplayTensor) -> tuple[ReplayTensor, ReplayTensor, bool]:
    """Final norm, LM head: the logits, log_softmax's output, and whether the loss upcasts."""
    f = spec.facts
    ctx = r.ctx
    vocab = math.ceil(f.vocab_size / ctx.tp)
    if f.model_type == "bert":
        # BertForMaskedLM: transform (dense, GELU, LayerNorm), decoder; CrossEntropyLoss on the
        # logits as they are.
        y = r.unary_saving_input(r.linear(x, f.hidden_size, ctx.full))
        y = r.layer_norm(y, ctx.full)
        logits = r.linear(y, vocab, ctx.full)
        # Both autocast lists run the loss's log_softmax in fp32.
        scores = r.cast(logits, 4) if ctx.autocast else logits
        return logits, r.unary_saving_output(scores), False
    if f.norm == "layer":
        y = x if _post_ln(spec) else r.layer_norm(x, ctx.full)
        if any(t.module == "project_out" for t in spec.layer_tensors(None)):
            width = next(t.shape[0] for t in spec.layer_tensors(None) if t.module == "project_out")
            y = r.linear(y, width, ctx.full)
    else:
        y = r.rms_norm(x, f.hidden_size, ctx.full, gemma=f.model_type.startswith("gemma"))
    logits = r.linear(y, vocab, ctx.full)
    if f.model_type == "gemma2":
        logits = r.unary_saving_output(logits)  # final logit soft-capping: tanh
    # transformers' ForCausalLMLoss: logits.float(), then cross_entropy (log_softmax keeps
    # its output).
    return logits, r.unary_saving_output(r.cast(logits, 4)), True
