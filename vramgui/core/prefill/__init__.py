"""transformers' prefill, as the tensors its code makes and lets go of, at any batch and prompt
length.

``model.generate`` runs one forward over the whole prompt under ``torch.no_grad`` with a
DynamicCache and ``logits_to_keep=1``. The forward is written as a program (program.py): the
caller's inputs, the embeddings, the rotary tables and masks the model builds once, then each
kind of block (layers.py reads them from the tensors; attention.py, experts.py and mixers.py hold
their code), then the final norm and the head on the last position. A block of each kind runs at
its last layer, when the cache of every earlier layer is written and the cache of every later one
is not: that cache is given back from the activations (the KV component counts every layer).
The live total after each allocation is a candidate for the peak; :class:`Prefill` keeps the
candidates and evaluates the largest at any shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.prefill import layers
from vramgui.core.prefill.attention import Kernel, attention
from vramgui.core.prefill.experts import experts_mlp
from vramgui.core.prefill.mixers import mamba2, mixer
from vramgui.core.prefill.ops import (
    FP32,
    INT64,
    Dtype,
    dense_mlp,
    layer_norm,
    rms_norm,
)
from vramgui.core.prefill.program import (
    BATCH,
    SCORES,
    SEQ,
    SEQ_SQUARED,
    TOKENS,
    Peak,
    Program,
    Size,
    longer_than,
)
from vramgui.core.workload import Workload

# Families whose block keeps the attention output alive beside the residual (GPT-2's
# `attn_output` local lives until the block returns), and which add learned position embeddings.
_ATTN_OUTPUT_KEPT = frozenset({"gpt2", "gpt_bigcode"})
LEARNED_POSITIONS = frozenset({"gpt2", "gpt_bigcode", "opt", "bert"})
# Families whose attention builds its mask even when no token is padded (falcon: for alibi).
_ALWAYS_MASKED = frozenset({"falcon"})
# Families that only have eager attention in transformers.
EAGER_ONLY = frozenset({"bloom"})


def attention_used(spec: ModelSpec, w: Workload) -> str:
    """The attention implementation transformers really runs for this model."""
    if spec.facts.model_type in EAGER_ONLY or not spec.facts.sdpa:
        return "eager"
    return w.attention


def buffer_bytes(spec: ModelSpec) -> int:
    """Non-parameter buffers transformers registers on the GPU beside the weights."""
    facts = spec.facts
    if facts.model_type == "gpt_bigcode":
        # The causal mask buffer: a (max_positions, max_positions) boolean matrix.
        return facts.max_position_embeddings**2
    return 0


@dataclass(frozen=True, slots=True)
class Prefill:
    """The prefill peak of one model and setup, whatever the batch and prompt length."""

    _peak: Peak

    @classmethod
    def of(
        cls, spec: ModelSpec, w: Workload, cache: Sequence[Size], *, device: str = "cuda"
    ) -> Prefill:
        """The prefill of ``spec`` under ``w``.

        Args:
            spec: the model.
            w: the settings (dtype, attention, tensor parallelism).
            cache: per layer, the bytes its cache holds once written (KV or recurrent state).
            device: "cuda", or "cpu" for the kernels PyTorch runs on a CPU (the measuring
                harness), where they keep other tensors.
        """
        program = Program()
        if spec.facts.is_decoder:
            _decoder(program, spec, w, cache, device)
        else:
            _encoder(program, spec, w)
        return cls(program.peak())

    def peak(self, batch: int, seq: int) -> int:
        """Live activation bytes at the prefill's peak, KV cache excluded."""
        return self._peak.at(batch, seq)


@dataclass(frozen=True, slots=True)
class _Setup:
    d: Dtype
    kernel: Kernel
    tp: int


def _decoder(p: Program, spec: ModelSpec, w: Workload, cache: Sequence[Size], device: str) -> None:
    facts = spec.facts
    model_type = facts.model_type
    d = Dtype(dtypes.DTYPE_BYTES[w.dtype])
    eager = attention_used(spec, w) == "eager"
    setup = _Setup(d, Kernel(eager=eager, cpu=device == "cpu"), w.tp)
    h = facts.hidden_size
    # generate's inputs, held by the caller through the forward: the prompt's ids, its attention
    # mask and the position ids built from it.
    p.new(TOKENS * (3 * INT64))
    # no layer has written its cache yet (the KV component counts them all)
    unwritten_all = p.new(sum(cache, Size()) * -1)
    embeds = p.new(d.tok(h))
    if model_type in LEARNED_POSITIONS:
        p.new(SEQ * (h * d.e))
    elif model_type not in ("bloom",):
        # rotary cos and sin, (batch, seq, rotated width) in the compute dtype
        table = FP32 if model_type in layers.FP32_ROTARY else d.e
        for rotated in _rotary_widths(spec, w.tp):
            p.new(TOKENS * (2 * rotated * table))
    _per_layer_inputs(p, spec, d)
    _masks(p, spec, setup)
    x = embeds
    p.free(unwritten_all)
    order = _block_order(spec, w.tp)
    # after[i]: the cache of the layers after layer i
    after = [Size()] * len(cache)
    for i in range(len(cache) - 2, -1, -1):
        after[i] = after[i + 1] + cache[i + 1]
    for index, plan in order:
        # the cache of the layers after this one is not written yet
        given_back = p.new(after[index] * -1)
        block_input = p.new(d.tok(h)) if index else x
        # this layer's own cache is written inside the block
        unwritten = p.new(cache[index] * -1)
        # the next block's input stands for this one's output
        p.free(_block(p, spec, plan, setup, index, unwritten=unwritten))
        if block_input != x:
            p.free(block_input)
        p.free(given_back)
    last = p.new(d.tok(h))
    # the final norm, then the head on the last position only and generate's fp32 copy of it
    normed = _norm(p, d, h, layers.final_layer_norm(spec))
    p.free(last)
    vocab = -(-facts.vocab_size // w.tp) if w.tp > 1 else facts.vocab_size
    logits = p.new(BATCH * (vocab * d.e))
    p.new(BATCH * (vocab * FP32))
    p.free(normed, logits)


def _rotary_widths(spec: ModelSpec, tp: int) -> list[int]:
    """The widths of the rotary tables the model makes before its blocks: one, or one per
    attention kind where the model keeps a rotary embedding per layer type."""
    facts = spec.facts
    if facts.is_mla:
        return [facts.qk_rope_head_dim or facts.head_dim]
    if facts.model_type not in layers.ROTARY_PER_KIND:
        return [facts.head_dim]
    widths: dict[LayerType, int] = {}
    for i in range(facts.num_layers):
        plan = layers.block(spec, i, tp)
        if plan.attention is not None:
            widths[plan.kind] = plan.attention.head_dim
    return list(widths.values()) or [facts.head_dim]


# Multimodal models that look up the per-layer inputs themselves and hand them to the language
# model (Gemma 4's Gemma4Model.forward), rather than the language model making them.
_PER_LAYER_INPUTS_FROM_WRAPPER = frozenset({"gemma4"})


def _per_layer_inputs(p: Program, spec: ModelSpec, d: Dtype) -> None:
    """Gemma 3n / 4's per-layer inputs, made once and held through the forward: a second
    embedding of every layer's slice, scaled, plus a projection of the embeddings, normed in
    fp32 per slice, summed and scaled."""
    table = next(
        (t for t in spec.layer_tensors(None) if t.name.endswith("embed_tokens_per_layer.weight")),
        None,
    )
    if table is None:
        return
    width = table.shape[1]
    wrapped = spec.facts.model_type in _PER_LAYER_INPUTS_FROM_WRAPPER
    if wrapped:
        # The multimodal model makes the text ids (media tokens as padding) and the embeddings
        # with media masked to padding, and keeps both as locals through the forward.
        p.new(TOKENS * INT64)
        p.new(d.tok(spec.facts.hidden_size))
    looked_up = p.new(d.tok(width))
    scaled = p.new(d.tok(width))
    p.free(looked_up)
    projected = p.new(d.tok(width))
    scaled_projection = p.new(d.tok(width))
    p.free(projected)
    normed = rms_norm(p, d, width)
    p.free(scaled_projection)
    summed = p.new(d.tok(width))
    p.new(d.tok(width))  # scaled: the per-layer inputs the blocks get
    p.free(summed, normed)
    if not wrapped:
        # (the multimodal model holds the looked-up slices it handed over as a local)
        p.free(scaled)


def _masks(p: Program, spec: ModelSpec, s: _Setup) -> None:
    """The masks the model builds before its blocks: eager attention's additive (batch, 1, seq,
    seq) mask in the compute dtype; SDPA's boolean one only where a window is shorter than the
    prompt (else it runs ``is_causal``), one per attention kind."""
    facts = spec.facts
    kinds = set(facts.layer_types or (LayerType.FULL,))
    attending = [k for k in kinds if k.has_kv]
    if facts.index_topk and not s.kernel.eager:
        # the sparse indexer masks its scores causally: a boolean (1, 1, seq, seq) mask
        p.new(SEQ_SQUARED * 1)
    if facts.model_type in _ALWAYS_MASKED and not s.kernel.eager:
        p.new(SCORES * 1)  # the boolean mask; each layer makes its additive copy
        return
    for kind in attending:
        if s.kernel.eager:
            p.new(SCORES * s.d.e)
            continue
        if kind is LayerType.SLIDING and facts.sliding_window:
            # boolean, (1, 1, seq, seq): one for the batch, expanded as a view
            p.new(longer_than(SEQ_SQUARED, facts.sliding_window))
        elif kind is LayerType.CHUNKED and facts.attention_chunk_size:
            # boolean, (batch, 1, seq, seq): the chunks combined with each sequence's mask
            p.new(longer_than(SCORES, facts.attention_chunk_size))


def _block_order(spec: ModelSpec, tp: int) -> list[tuple[int, layers.Block]]:
    """The last layer of each kind of block, in layer order."""
    last: dict[layers.Block, int] = {}
    for i in range(spec.facts.num_layers):
        last[layers.block(spec, i, tp)] = i
    return sorted(((i, b) for b, i in last.items()), key=lambda pair: pair[0])


def _block(
    p: Program, spec: ModelSpec, plan: layers.Block, s: _Setup, index: int, *, unwritten: int
) -> int:
    """One decoder block's transient tensors (its input is held by the caller): a token mixer
    and its residual, then an MLP or experts and theirs, where the block has each, with norms
    where the block puts them. Returns the block's output."""
    facts = spec.facts
    d = s.d
    h = facts.hidden_size
    kept: tuple[int, ...] = ()
    held: list[int] = []
    residual = None
    if plan.kind is not LayerType.NONE:
        y = _norm(p, d, h, plan.layer_norm) if plan.norms != "post" else None
        if plan.attention is not None and mamba2(spec, index) is not None:
            mixed, kept = _parallel_hybrid(p, spec, plan.attention, s, index, unwritten=unwritten)
        elif plan.attention is not None:
            out = attention(p, d, plan.attention, s.kernel, h, unwritten=unwritten)
            mixed, kept = out.out, out.kept
        else:
            mixed = mixer(p, d, spec, index, s.tp)
            p.free(unwritten)  # the mixer's states, written by now
        if y is not None:
            p.free(y)
        mixed = _output_norm(p, d, h, plan, mixed)
        residual = p.new(d.tok(h))
        if facts.model_type in _ATTN_OUTPUT_KEPT:
            held.append(mixed)  # GPT-2's attn_output local lives until the block returns
        else:
            p.free(mixed)
    if plan.experts is not None or plan.mlp_width:
        y = _norm(p, d, h, plan.layer_norm) if plan.norms != "post" else None
        if plan.experts is not None and not plan.mlp_width:
            out_mlp = experts_mlp(p, d, plan.experts, h, facts.hidden_act)
        else:
            out_mlp = dense_mlp(
                p,
                d,
                plan.mlp_width,
                h,
                gated=facts.gated_mlp,
                fused=_has_module(spec, index, "gate_up_proj"),
                act=facts.hidden_act,
                normed=plan.mlp_norm,
            )
        if y is not None:
            p.free(y)
        if plan.experts is not None and plan.mlp_width:
            out_mlp = _beside_experts(p, d, plan, h, out_mlp, act=facts.hidden_act)
        out_mlp = _output_norm(p, d, h, plan, out_mlp)
        output = p.new(d.tok(h))
        p.free(out_mlp)
        if residual is not None:
            p.free(residual)
    else:
        assert residual is not None
        output = residual
    if plan.per_layer_input:
        output = _per_layer_tail(p, d, h, plan.per_layer_input, output)
    if plan.kind is LayerType.NONE:
        p.free(unwritten)
    p.free(*kept, *held)
    return output


def _beside_experts(
    p: Program, d: Dtype, plan: layers.Block, h: int, dense: int, *, act: str
) -> int:
    """Gemma 4's MoE block after its dense MLP: that output normed and held while the router and
    the experts run on the block's input normed again; the experts' output normed, the two
    summed."""
    assert plan.experts is not None
    first = _norm(p, d, h, plan.layer_norm)
    p.free(dense)
    second_in = _norm(p, d, h, plan.layer_norm)
    routed = experts_mlp(p, d, plan.experts, h, act)
    p.free(second_in)
    second = _norm(p, d, h, plan.layer_norm)
    p.free(routed)
    out = p.new(d.tok(h))
    p.free(first, second)
    return out


def _per_layer_tail(p: Program, d: Dtype, h: int, width: int, x: int) -> int:
    """Gemma 3n / 4's block tail: its per-layer input gated in by a GELU of a projection of the
    block's output, projected back, normed, added."""
    gate = p.new(d.tok(width))
    activated = p.new(d.tok(width))
    p.free(gate)
    product = p.new(d.tok(width))
    p.free(activated)
    projected = p.new(d.tok(h))
    p.free(product)
    normed = rms_norm(p, d, h)
    p.free(projected)
    out = p.new(d.tok(h))
    p.free(normed, x)
    return out


def _output_norm(p: Program, d: Dtype, h: int, plan: layers.Block, out: int) -> int:
    """A branch's output normed before its residual, where the block does so."""
    if plan.norms == "pre":
        return out
    normed = _norm(p, d, h, plan.layer_norm)
    p.free(out)
    return normed


def _parallel_hybrid(
    p: Program, spec: ModelSpec, a: layers.Attention, s: _Setup, index: int, *, unwritten: int
) -> tuple[int, tuple[int, ...]]:
    """Falcon-H1: Mamba, then attention, on the same normed input, each output scaled by its
    multiplier, then summed."""
    d, h = s.d, spec.facts.hidden_size
    ssm = mixer(p, d, spec, index, s.tp)
    ssm_scaled = p.new(d.tok(h))
    p.free(ssm)
    attention_in = p.new(d.tok(h))
    out = attention(p, d, a, s.kernel, h, unwritten=unwritten)
    p.free(attention_in)
    attention_scaled = p.new(d.tok(h))
    p.free(out.out)
    mixed = p.new(d.tok(h))
    p.free(ssm_scaled, attention_scaled)
    return mixed, out.kept


def _norm(p: Program, d: Dtype, width: int, biased: bool) -> int:
    return layer_norm(p, d, width) if biased else rms_norm(p, d, width)


def _has_module(spec: ModelSpec, layer: int, module: str) -> bool:
    return any(t.module == module for t in spec.layer_tensors(layer) if t.role is Role.MLP)


def _encoder(p: Program, spec: ModelSpec, w: Workload) -> None:
    """BERT: the embeddings (word, token type and position lookups summed, then normed, held
    until the encoder returns), the post-norm blocks, and the masked-LM head (dense,
    activation, norm, decoder) over every position."""
    facts = spec.facts
    d = Dtype(dtypes.DTYPE_BYTES[w.dtype])
    h = facts.hidden_size
    kernel = Kernel(eager=attention_used(spec, w) == "eager", cpu=False)
    p.new(TOKENS * (2 * INT64))  # the caller's ids and attention mask
    word, token_type = p.new(d.tok(h)), p.new(d.tok(h))
    summed = p.new(d.tok(h))
    positions = p.new(SEQ * (h * d.e))
    with_positions = p.new(d.tok(h))
    p.free(summed)
    embeddings = layer_norm(p, d, h)
    p.free(with_positions, word, token_type, positions)
    plan = layers.block(spec, facts.num_layers - 1, w.tp)
    assert plan.attention is not None
    block_input = p.new(d.tok(h))
    out = attention(p, d, plan.attention, kernel, h)
    summed = p.new(d.tok(h))  # + the block's input
    attended = layer_norm(p, d, h)
    p.free(summed, out.out)
    inner = d.tok(plan.mlp_width)
    up = p.new(inner)
    activated = p.new(inner)
    p.free(up)
    down = p.new(d.tok(h))
    summed = p.new(d.tok(h))
    output = layer_norm(p, d, h)
    p.free(summed, down, activated, *out.kept, attended, block_input, embeddings)
    transformed = p.new(d.tok(h))
    activated = p.new(d.tok(h))
    p.free(transformed)
    normed = layer_norm(p, d, h)
    p.free(activated)
    p.new(TOKENS * (facts.vocab_size * d.e))
    p.free(normed, output)


__all__ = ["EAGER_ONLY", "LEARNED_POSITIONS", "Prefill", "attention_used", "buffer_bytes"]
