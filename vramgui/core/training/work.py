"""The work one token of a training step makes on one GPU: the weights its matrix products run
through (block, head, LoRA adapters; the trainable share), the bytes it moves (weight reads,
QLoRA's dequantization and upcasts, mixed precision's casts, elementwise work, LoRA, the loss) and
the kernels it launches. core/speed.py turns this into time on a GPU
(docs/performance.md, "Training time")."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramgui.core import dtypes, storage
from vramgui.core.model import LayerType, ModelSpec, Role, Tensor
from vramgui.core.training.weights import (
    adapter_parameters,
    kbit_upcast,
    lora_rank_of,
    resolve_lora_targets,
)
from vramgui.core.workload import Workload

# Bytes the elementwise work around one block moves per token in a forward, per unit of hidden
# size and of MLP width. Counted from transformers' Llama block in 16-bit: two RMSNorms that
# compute in fp32 (36 bytes per hidden unit each), two residual adds (12), rotary embeddings on q
# and k (~40), the copies around attention (~16), and SwiGLU's activation and product over the
# MLP width (10): 140 and 10. The tuning cases (fused kernels in llm-foundry and NeMo, caches
# that hold part of the traffic) put it at 0.6 of that count: 78 and 6.
ELEMENTWISE_BYTES_PER_HIDDEN = 78
ELEMENTWISE_BYTES_PER_MLP = 6
# The loss over the vocabulary: 16-bit logits upcast to fp32, log-softmax, its gradient and the
# cast back, per token and vocabulary entry.
LOSS_BYTES_PER_VOCAB = 24
# LoRA around one adapted linear, per token of a forward: the input read again by A, B's output,
# its scaling and the add to the base output (2 bytes per input, 12 per output feature).
LORA_BYTES_PER_INPUT = 2
LORA_BYTES_PER_OUTPUT = 12
# Unsharded QLoRA under peft's prepare_model_for_kbit_training: the norms are fp32, so the hidden
# states are fp32 (the weights it upcast, such as transformers 5's stacked experts, are cast back
# at each forward, as a full fine-tune's master weights are), and each 4-bit linear
# (bitsandbytes' Linear4bit.forward) casts its input to the compute dtype and its output back to
# the input's: fp32 read and 16-bit written per input feature, the reverse per output feature,
# and the same again for the gradients. The attention output projection takes attention's 16-bit
# output and casts nothing.
ATTENTION_OUTPUT_MODULES = frozenset({"o_proj", "out_proj", "dense", "wo"})
# Kernels per block in a forward (transformers' Llama block: norms, projections, rotary, attention,
# residuals, MLP), per LoRA-adapted linear (dropout, A, B, scale, add) and per 4-bit linear
# (dequantize); a backward launches about twice as many.
KERNELS_PER_BLOCK = 30
KERNELS_PER_ADAPTER = 5
KERNELS_PER_QUANTIZED = 1
# Flash attention's backward recomputes the scores: 2.5 forwards of work (2 for eager attention).
ATTENTION_BACKWARD = {"flash": 2.5, "sdpa": 2.5, "eager": 2.0}


@dataclass(frozen=True, slots=True)
class TokenWork:
    """What the speed model needs from a spec and a setting, per token and per GPU."""

    block_matmul: float  # weights of the blocks' products, on this GPU (FLOPs / 2 per token)
    head_matmul: float  # the LM head's weights on this GPU
    trainable_block: float  # block weights that train (full fine-tune), on this GPU
    adapter_matmul: float  # LoRA adapter weights on this GPU
    weight_read_bytes: float  # bytes one pass reads from the weights (16-bit or packed)
    dequant_bytes: float  # QLoRA: bytes one pass's dequantization reads and writes
    cast_bytes: float  # mixed precision: bytes the per-forward cast of the weights moves
    trainable: float  # parameters that train, in the whole model
    elementwise_bytes: float  # forward elementwise bytes per token, on this GPU
    lora_bytes: float  # forward LoRA bytes per token, on this GPU
    upcast_bytes: float  # QLoRA's fp32 hidden states: a forward's casts per token, on this GPU
    loss_bytes: float  # loss bytes per token (forward and backward), on this GPU
    kernels: float  # kernels of one forward, on this GPU
    layers: int  # blocks on this GPU


def _active_share(t: Tensor, spec: ModelSpec) -> float:
    """The share of a tensor one token runs through (a routed expert runs for top-k tokens)."""
    f = spec.facts
    if t.role is Role.EXPERT and f.num_experts:
        return f.experts_per_token / f.num_experts
    return 1.0


def _attention_flops_per_token(spec: ModelSpec, seq: int, causal_skip: bool) -> float:
    """Forward FLOPs of attention scores and weighted values for one token, summed over layers.

    Each query attends to the tokens before it: on average half the sequence under a causal
    mask the kernel skips (flash, SDPA), the whole sequence where it computes and then masks
    (eager). Sliding and chunked layers see at most their window; linear-attention, Mamba and
    convolution layers have no quadratic term (their linear cost is left out).
    """
    f = spec.facts
    qk = (
        f.head_dim if f.qk_nope_head_dim is None else f.qk_nope_head_dim + (f.qk_rope_head_dim or 0)
    )
    v = f.v_head_dim or f.head_dim
    per_context = 2.0 * f.num_heads * (qk + v)
    types = f.layer_types or (LayerType.FULL,) * f.num_layers
    total = 0.0
    for kind in types:
        if kind in (LayerType.FULL, LayerType.SLIDING, LayerType.CHUNKED):
            window = seq
            if kind is LayerType.SLIDING and f.sliding_window:
                window = min(seq, f.sliding_window)
            elif kind is LayerType.CHUNKED and f.attention_chunk_size:
                window = min(seq, f.attention_chunk_size)
            if causal_skip:
                # mean over positions of min(position, window)
                seen = window * (window + 1) / 2 + (seq - window) * window
                total += per_context * seen / seq
            else:
                total += per_context * seq
    return total


def _mlp_width(spec: ModelSpec) -> float:
    f = spec.facts
    if f.is_moe and f.moe_intermediate_size:
        return f.experts_per_token * f.moe_intermediate_size + f.num_shared_experts * (
            f.moe_intermediate_size
        )
    return float(f.intermediate_size)


def token_work(spec: ModelSpec, w: Workload) -> TokenWork:
    # Not the batch or the sequence: a slider over them reuses one model (attention, which
    # grows with the sequence, is counted apart).
    key = ("speed_model", w.method, w.quant, w.dtype, w.precision, w.lora_rank, w.lora_targets,
           w.tp, w.pp, kbit_upcast(w), w.transformers_version)  # fmt: skip
    return spec.cached(key, lambda: _build_token_work(spec, w))


def attention_flops(spec: ModelSpec, w: Workload) -> float:
    """Forward attention FLOPs per token on one GPU (its tensor and pipeline share)."""
    causal_skip = w.attention != "eager"
    return _attention_flops_per_token(spec, w.seq, causal_skip) / (w.tp * w.pp)


def _build_token_work(spec: ModelSpec, w: Workload) -> TokenWork:
    f = spec.facts
    split = w.tp * w.pp  # tensor parallel divides each product, pipeline the layers
    targets = (
        resolve_lora_targets(spec, w.lora_targets, w.transformers_version)
        if w.method != "full"
        else frozenset()
    )
    stacked = storage.experts_stacked(f.model_type, w.transformers_version)
    sixteen = 4 if w.precision == "fp32" or w.dtype == "fp32" else dtypes.dtype_bytes(w.dtype)
    scheme = dtypes.get_scheme(w.quant)
    quant_bits = scheme.nominal_bits_per_weight if w.quant != "none" else 0.0
    upcast = kbit_upcast(w)
    block = head = trainable = adapters = 0.0
    read = dequant = cast = upcast_bytes = 0.0
    kernels = KERNELS_PER_BLOCK * f.num_layers
    lora_bytes = 0.0
    for t in spec.tensors:
        if not t.is_matrix or t.role is Role.ENCODER:
            continue
        numel = float(t.numel)
        share = _active_share(t, spec)
        if t.layer is None:
            if t.role is Role.HEAD and t.shape[0] == f.vocab_size:
                head += numel
                read += numel * sixteen
                if upcast:
                    cast += numel * (4 + sixteen)
            continue
        block += numel * share
        if w.method == "full":
            trainable += numel * share
        quantized = w.method == "qlora" and storage.bitsandbytes_quantizes(scheme, t, stacked)
        if quantized:
            read += numel * sixteen
            dequant += numel * (quant_bits / 8 + sixteen)
            kernels += KERNELS_PER_QUANTIZED * math.prod(t.shape[:-2])
            if upcast and not (t.role is Role.ATTENTION and t.module in ATTENTION_OUTPUT_MODULES):
                features = (t.shape[-2] + t.shape[-1]) * math.prod(t.shape[:-2]) * share
                upcast_bytes += features * (4 + sixteen)
        else:
            read += numel * sixteen
        if (w.method == "full" and w.precision == "mixed") or (upcast and not quantized):
            # autocast casts fp32 weights to the compute dtype at each forward: a full
            # fine-tune's master weights, and what prepare_model_for_kbit_training upcast
            cast += numel * (4 + sixteen)
        rank = lora_rank_of(spec, t, targets, w.lora_rank) if w.method != "full" else 0
        if rank:
            out_f, in_f = t.shape[-2], t.shape[-1]
            experts = math.prod(t.shape[:-2]) * share
            adapters += rank * (in_f + out_f) * experts
            lora_bytes += (LORA_BYTES_PER_INPUT * in_f + LORA_BYTES_PER_OUTPUT * out_f) * experts
            kernels += KERNELS_PER_ADAPTER * math.prod(t.shape[:-2])
    if head == 0.0 and f.is_decoder:
        # Tied embeddings: the head is the embedding matrix used once more.
        head = float(f.vocab_size * f.hidden_size)
        read += head * sixteen
        if upcast:
            cast += head * (4 + sixteen)
    act = 4 if upcast else sixteen  # the hidden states' dtype
    elementwise = (
        f.num_layers
        * (
            ELEMENTWISE_BYTES_PER_HIDDEN * f.hidden_size
            + ELEMENTWISE_BYTES_PER_MLP * _mlp_width(spec)
        )
        * act
        / 2
    )
    if w.method == "full":
        trained_total = float(spec.parameters)
    else:
        trained_total = float(adapter_parameters(spec, targets, w.lora_rank))
    return TokenWork(
        block_matmul=block / split,
        head_matmul=head / w.tp,
        trainable_block=trainable / split,
        adapter_matmul=adapters / split,
        weight_read_bytes=read / split,
        dequant_bytes=dequant / split,
        cast_bytes=cast / split,
        trainable=trained_total,
        elementwise_bytes=elementwise / split,
        lora_bytes=lora_bytes / split,
        upcast_bytes=upcast_bytes / split,
        loss_bytes=LOSS_BYTES_PER_VOCAB * f.vocab_size / w.tp,
        kernels=kernels / w.pp,
        layers=max(1, f.num_layers // w.pp),
    )


def model_flops_per_token(spec: ModelSpec, workload: Workload) -> float:
    """FLOPs of training one token, over all GPUs, without recomputation: 6 per trainable weight
    and 4 per frozen one, plus attention (forward and backward)."""
    w = workload
    m = token_work(spec, w)
    split = w.tp * w.pp
    frozen = (m.block_matmul - m.trainable_block) * split
    trained = m.trainable_block * split
    backward = ATTENTION_BACKWARD[w.attention]
    head = (6.0 if w.method == "full" else 4.0) * m.head_matmul * w.tp
    return (
        6.0 * trained
        + 4.0 * frozen
        + head
        + 6.0 * m.adapter_matmul * split
        + (1.0 + backward) * attention_flops(spec, w) * split
    )
