"""The phase walk: the forward replayed block by block, then the totals at the forward's end,
the worst moment of backward (blocks freeing what they saved and forming gradients, last to
first) and the optimizer step."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from vramgui.core.model import ModelSpec, Role, Tensor
from vramgui.core.training.components import (
    ACTIVATIONS,
    BACKWARD_TEMPORARIES,
    GRADIENTS,
    LOGITS,
    PHASE_BACKWARD,
    PHASE_FORWARD,
    PHASE_STEP,
    WEIGHT_COPIES,
)
from vramgui.core.training.layers import embed, head, layer_program
from vramgui.core.training.replay import INT64_BYTES, Replay, ReplayContext, ReplayTensor
from vramgui.core.training.weights import folded_expert_bytes, group_sums


@dataclass(frozen=True, slots=True)
class Block:
    """One unit of the backward walk: what it saved, the gradients and weight copies it owns."""

    saved_bytes: int
    grad_bytes: int
    weight_copy_bytes: int
    transient_bytes: int  # extra bytes while its gradients are formed
    input_bytes: int  # the hidden state entering it (what checkpointing keeps)
    early_transient_bytes: int = 0  # extra bytes before its own gradients exist
    # Autocast copies still held in backward (a checkpointed block drops them at the forward's
    # end, when autocast's cache is cleared, and recreates them in its recompute).
    backward_copy_bytes: int | None = None
    # What a checkpointed block holds while its own forward runs (its activations, kept only
    # until the block returns).
    forward_live_bytes: int = 0

    @property
    def held_copy_bytes(self) -> int:
        if self.backward_copy_bytes is None:
            return self.weight_copy_bytes
        return self.backward_copy_bytes


@dataclass(frozen=True, slots=True)
class Walk:
    blocks: list[Block]  # embeddings, each layer, head + loss
    forward_transient: int  # the loss's transient bytes at the end of the forward
    output_bytes: int  # the logits as the model's output holds them (what a custom loop keeps)


def _layer_classes(spec: ModelSpec) -> tuple[int, ...]:
    """Per layer, the index of its class: layers of one class run the same replay.

    Everything a layer program reads of its layer is in the class: its tensors (all but their
    names and index), whether its MLP is a MoE block, and its attention kind.
    """

    def compute() -> tuple[int, ...]:
        f = spec.facts
        seen: dict[tuple[object, ...], int] = {}
        out = []
        for layer in range(f.num_layers):
            key = (
                tuple(
                    (t.shape, t.role, t.module, t.dtype, t.is_bias)
                    for t in spec.layer_tensors(layer)
                ),
                bool(f.moe_layers) and f.moe_layers[layer],
                f.layer_types[layer] if f.layer_types else None,
            )
            out.append(seen.setdefault(key, len(seen)))
        return tuple(out)

    return spec.cached("training_layer_classes", compute)


def walk_blocks(spec: ModelSpec, ctx: ReplayContext, grad_item: int) -> Walk:
    """Replay the forward block by block."""
    f = spec.facts
    program = layer_program(spec)
    blocks: list[Block] = []
    tok = ctx.tokens
    r = Replay(ctx)
    outside = spec.layer_tensors(None)
    head_tensors = tuple(t for t in outside if t.role in (Role.HEAD, Role.NORM))
    embed_tensors = tuple(t for t in outside if t.role not in (Role.HEAD, Role.NORM))
    x = embed(r, spec)
    table = tuple(t for t in embed_tensors if t.role == Role.EMBEDDING)
    table_grad = group_sums(spec, ctx, "table", lambda: table)[0] * grad_item
    # A tied table gets its gradient from the head first; the embedding's backward then forms a
    # second full-size gradient, and the autograd engine adds the two out of place (both and
    # their sum exist for a moment).
    tied_grad = table_grad if f.tie_word_embeddings else 0
    embed_trainable, embed_copies = group_sums(spec, ctx, "embeddings", lambda: embed_tensors)
    blocks.append(
        Block(
            r.saved_bytes(),
            embed_trainable * grad_item - tied_grad,
            embed_copies,
            2 * tied_grad,
            0,
        )
    )
    inter = max(f.intermediate_size, f.moe_intermediate_size * f.experts_per_token)
    classes = _layer_classes(spec)
    # A block's replay depends only on its class and on the hidden state entering it, so
    # identical blocks reuse the first one's result (and output) rather than replaying again.
    replayed: dict[tuple[int, int, int, bool], tuple[Block, ReplayTensor]] = {}
    # The last reused block: its class, the state that entered it and what it gave. In a run of
    # identical blocks the reused output enters the next one, so it is found without a lookup.
    last: tuple[int, ReplayTensor, Block, ReplayTensor] | None = None
    for layer in range(f.num_layers):
        if last is not None and last[0] == classes[layer] and last[1] is x:
            blocks.append(last[2])
            x = last[3]
            continue
        key = (classes[layer], x.numel, x.itemsize, x.grad) if x.base is None else None
        if key is not None and key in replayed:
            block, out = replayed[key]
            blocks.append(block)
            last, x = (classes[layer], x, block, out), out
            continue
        r.saved = {}
        r.scores_backward = r.saved_through_softmax = 0
        x_in = x
        x = program(r, spec, layer, x)
        layer_trainable, copies = group_sums(
            spec, ctx, ("layer", classes[layer]), partial(spec.layer_tensors, layer)
        )
        # peft's LoRA on stacked experts saves a folded copy of each adapted stack
        saved = full = r.saved_bytes() + folded_expert_bytes(spec, layer, ctx)
        # Backward of a block: the incoming gradient of the hidden state, the one it passes on,
        # and the widest intermediate gradients: three tokens x MLP-width tensors in SwiGLU's
        # backward, or those of materialized attention scores.
        mlp_grads = 3 * tok * inter // ctx.tp * ctx.compute_bytes
        # By the softmax's backward, what the block saved after it has been freed.
        scores = r.scores_backward - (saved - r.saved_through_softmax)
        transient = 2 * x.nbytes + max(mlp_grads, scores)
        if ctx.checkpointing:
            # The checkpoint keeps the block input; backward recomputes the block (its
            # activations and autocast copies) first.
            transient += saved + copies
            saved = x_in.nbytes
        block = Block(
            saved_bytes=saved,
            grad_bytes=layer_trainable * grad_item,
            weight_copy_bytes=copies,
            transient_bytes=transient,
            input_bytes=x_in.nbytes,
            backward_copy_bytes=0 if ctx.checkpointing else None,
            forward_live_bytes=full if ctx.checkpointing else 0,
        )
        blocks.append(block)
        if key is not None:
            replayed[key] = (block, x)
    # Final norm, LM head and loss (transformers' ForCausalLMLoss: logits.float(), then
    # cross_entropy, whose log_softmax output is what backward needs).
    r.saved = {}
    logits, log_probs, upcast = head(r, spec, x)
    r.save(r.new(tok, INT64_BYTES, False))  # the (shifted) labels
    # Forward: the logits, their fp32 copy and log_softmax's output exist together.
    forward_transient = logits.nbytes + (log_probs.nbytes if upcast and logits.itemsize != 4 else 0)

    def head_weights() -> tuple[Tensor, ...]:
        weights = tuple(t for t in head_tensors if t.role == Role.HEAD)
        if f.tie_word_embeddings:
            weights += tuple(Tensor(t.name, t.shape, Role.HEAD) for t in table)
        return weights

    head_trainable, head_copy = group_sums(spec, ctx, "head", lambda: head_tensors)
    head_weight_trainable, head_weight_copy = group_sums(spec, ctx, "head weights", head_weights)
    if f.tie_word_embeddings:
        head_copy += head_weight_copy
    # Under autocast the head's weight gradient is formed in 16 bit, then cast to fp32.
    head_grad16 = head_weight_trainable * ctx.compute_bytes if ctx.autocast else 0
    blocks.append(
        Block(
            saved_bytes=r.saved_bytes(),
            grad_bytes=head_trainable * grad_item + tied_grad,
            weight_copy_bytes=head_copy,
            # Once log_softmax's output is freed: the logits' gradient in their dtype while the
            # head's weight gradient is formed.
            transient_bytes=logits.nbytes - log_probs.nbytes + head_grad16,
            input_bytes=0,
            # Before: nll_loss's and log_softmax's gradients beside log_softmax's output.
            early_transient_bytes=2 * log_probs.nbytes,
        )
    )
    # Under mixed precision accelerate converts the 16-bit outputs to fp32 once the forward
    # returns; the 16-bit logits are then freed (the loss kept none of them).
    output_bytes = logits.numel * 4 if ctx.autocast else logits.nbytes
    return Walk(blocks, forward_transient, output_bytes)


def stage_blocks(walk: Walk, stage: range, first: bool, last: bool) -> list[Block]:
    blocks = walk.blocks
    chosen = [blocks[0]] if first else []
    chosen += [blocks[1 + i] for i in stage]
    if last:
        chosen.append(blocks[-1])
    return chosen


@dataclass(frozen=True, slots=True)
class Moments:
    totals: dict[str, int]
    parts: dict[str, dict[str, int]]


def phase_moments(
    blocks: list[Block],
    *,
    in_flight: int,
    resident: dict[str, int],
    grads_total: int,
    step_extra: dict[str, int],
    accumulating: bool,
    forward_transient: int,
    grad_shards: int,
    kept_outputs: int = 0,
) -> Moments:
    """Totals at the forward end, the worst moment of backward, and the optimizer step.

    ``kept_outputs``: what the loop holds of the model's outputs through the whole step (the
    previous step's until the forward returns, then this one's).
    """
    # Runs of one block repeated (identical layers share their Block) are walked at once.
    runs: list[tuple[Block, int]] = []
    for b in blocks:
        if runs and runs[-1][0] is b and not b.early_transient_bytes:
            runs[-1] = (b, runs[-1][1] + 1)
        else:
            runs.append((b, 1))
    base = sum(resident.values())
    saved_total = sum(b.saved_bytes * n for b, n in runs) * in_flight
    copies_total = sum(b.weight_copy_bytes * n for b, n in runs)
    grads_before = grads_total if accumulating else 0
    parts: dict[str, dict[str, int]] = {}
    parts[PHASE_FORWARD] = {
        ACTIVATIONS: saved_total,
        WEIGHT_COPIES: copies_total,
        LOGITS: forward_transient,
        GRADIENTS: grads_before,
    }
    inside = max((b.forward_live_bytes for b, _ in runs), default=0) * in_flight
    if inside > forward_transient:
        # With checkpointing the forward can peak inside a block rather than at the loss.
        parts[PHASE_FORWARD] = {
            ACTIVATIONS: saved_total + inside,
            WEIGHT_COPIES: copies_total,
            GRADIENTS: grads_before,
        }
    best = -1
    acts_left, grads_done = saved_total, grads_before
    copies_left = sum(b.held_copy_bytes * n for b, n in runs)
    for b, n in reversed(runs):
        if b.early_transient_bytes:
            early = acts_left + copies_left + grads_done + b.early_transient_bytes
            if early > best:
                best = early
                parts[PHASE_BACKWARD] = {
                    ACTIVATIONS: acts_left,
                    WEIGHT_COPIES: copies_left,
                    GRADIENTS: grads_done,
                    BACKWARD_TEMPORARIES: b.early_transient_bytes,
                }
        # A block's gradients are formed whole, then reduce-scattered when sharded; with
        # accumulation they are added into the existing ones.
        new_grads = b.grad_bytes
        added = 0 if accumulating else new_grads // grad_shards
        transient = b.transient_bytes + (new_grads if accumulating or grad_shards > 1 else 0)
        freed = b.saved_bytes * in_flight
        held = b.held_copy_bytes
        # Through a run, each block changes the total by the same step, so its worst moment is
        # at the run's first block or, when the total grows, its last.
        k = n - 1 if added - freed - held > 0 else 0
        total = (
            acts_left + copies_left + grads_done + transient + added - k * (freed + held - added)
        )
        if total > best:
            best = total
            parts[PHASE_BACKWARD] = {
                ACTIVATIONS: acts_left - k * freed,
                WEIGHT_COPIES: copies_left - k * held,
                GRADIENTS: grads_done + (k + 1) * added,
                BACKWARD_TEMPORARIES: transient,
            }
        acts_left -= n * freed
        copies_left -= n * held
        grads_done += n * added
    parts[PHASE_STEP] = {ACTIVATIONS: 0, GRADIENTS: grads_total, **step_extra}
    if kept_outputs:
        for p in parts.values():
            p[LOGITS] = p.get(LOGITS, 0) + kept_outputs
    totals = {
        phase: base + sum(v for v in p.values() if v > 0) + sum(min(v, 0) for v in p.values())
        for phase, p in parts.items()
    }
    return Moments(totals, parts)
