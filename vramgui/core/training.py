"""Training memory per GPU at the peak of a steady-state step: full, LoRA and QLoRA fine-tunes.

The activations are not a formula per family but a replay of what autograd keeps: each family's
layer is written as the sequence of operations transformers' implementation runs (norms, q/k/v,
rotary, attention, MLP, residuals, LoRA branches), and every operation saves for backward what
PyTorch's derivative of it needs (a linear keeps its input when its weight is trainable, a SiLU its
input, a product the other factor, a softmax its output...), with the dtype each tensor really has
under autocast or in pure 16-bit. The same replay gives the order in which backward frees those
tensors and creates gradients, so the peak moment (forward end, backward, optimizer step) follows.

Conditions that the figures follow: ``zero_grad(set_to_none=True)`` after each step, one
parameter group, checkpointing with ``use_reentrant=False`` (transformers' default), peft's
defaults (fp32 adapters on a 16-bit base, ``lora_dropout`` 0, no adapter on the LM head), and the
loop the workload names. transformers' Trainer (``loop="trainer"``) drops the model's outputs as
soon as ``compute_loss`` has the loss; its gradient clipping (``max_grad_norm=1.0``) and fp16
GradScaler allocate a scalar per gradient tensor and work in place, which changes no figure here.
The loop of tutorials and accelerate's examples (``loop="custom"``: ``outputs = model(**batch);
loss = outputs.loss; loss.backward()``) keeps ``outputs`` alive until the next forward has
returned: the logits through backward, the optimizer step and the next forward, in fp32 under
mixed precision (accelerate's ``convert_outputs_to_fp32`` wraps the forward).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import partial

from vramgui.core import dtypes, parallel
from vramgui.core.errors import WorkloadError
from vramgui.core.model import LayerType, ModelSpec, Role, Tensor
from vramgui.core.workload import Workload

PHASE_FORWARD = "forward end"
PHASE_BACKWARD = "backward"
PHASE_STEP = "optimizer step"

WEIGHTS = "weights"
ACTIVATIONS = "activations"
GRADIENTS = "gradients"
OPTIMIZER_STATES = "optimizer_states"
OPTIMIZER_TEMPORARIES = "optimizer_temporaries"
LOGITS = "logits"
LORA_ADAPTERS = "lora_adapters"
WEIGHT_COPIES = "autocast_weight_copies"
BACKWARD_TEMPORARIES = "backward_temporaries"
GATHERED_PARAMETERS = "gathered_parameters"
GRADIENT_BUCKETS = "gradient_buckets"
DEQUANTIZED_WEIGHT = "dequantized_weight"
REQUIRED_COMPONENTS = (WEIGHTS, ACTIVATIONS, GRADIENTS, OPTIMIZER_STATES)

# Devices whose kernels the estimate follows: "cuda" for users, "cpu" for the measurement harness
# (the CPU build of PyTorch), which differs in dropout masks and autocast's fp32 op list.
DEVICES = ("cuda", "cpu")

# bitsandbytes 4-bit schemes a QLoRA base can be stored in (``load_in_4bit=True`` alone, or
# ``BitsAndBytesConfig()``'s defaults, is fp4-nodq with float32 compute).
FOUR_BIT_SCHEMES = ("nf4", "fp4", "nf4-nodq", "fp4-nodq")
ALL_LINEAR = "all-linear"

# bitsandbytes 8-bit optimizers: tensors under this many elements keep 32-bit states, and the
# 8-bit states carry one fp32 absmax per block.
_BNB_MIN_8BIT_SIZE = 4096
_BNB_BLOCK = 256
# peft's default scaling and dropout do not change memory; its adapters are fp32 on a 16-bit base.
_ADAPTER_BYTES = 4
_INT64 = 8  # bytes of the integer indices embeddings and the loss keep


@dataclass(frozen=True, slots=True)
class TrainingBreakdown:
    """Memory one GPU holds at the peak moment of a training step.

    Attributes:
        components: bytes per component at the peak; ``weights``, ``activations``, ``gradients``,
            ``optimizer_states`` always, plus optional ones (``optimizer_temporaries``,
            ``logits``, ``lora_adapters``, ``autocast_weight_copies``, ``backward_temporaries``).
        phase: the moment of the peak: "forward end", "backward" or "optimizer step".
        trainable_parameters: parameters that get gradients.
        host_bytes: host RAM the setup needs for what is offloaded to the CPU.
        notes: how the figures were counted, for the user.
        phase_totals: the total at each phase's worst moment, for comparison.
    """

    components: dict[str, int]
    phase: str
    trainable_parameters: int
    host_bytes: int = 0
    notes: tuple[str, ...] = ()
    phase_totals: dict[str, int] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.components.values())


# ---------------------------------------------------------------------------------------------
# The symbolic replay of a forward pass.


@dataclass(eq=False, slots=True)
class _T:
    """A tensor of the replay: its storage size and whether it needs a gradient.

    ``base`` is the tensor that owns the storage when this one is a view of it.
    """

    numel: int
    itemsize: int
    grad: bool
    base: _T | None = None

    @property
    def owner(self) -> _T:
        return self.base if self.base is not None else self

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(slots=True)
class _Ctx:
    """How the replay runs: dtypes, autocast, device, which weights are trainable."""

    batch: int
    seq: int
    param_bytes: int  # dtype of the (trainable or unquantized) weights
    compute_bytes: int  # dtype matmuls run in
    autocast: bool
    cuda: bool  # CUDA kernels (dropout masks, SDPA kernels, norm statistics)
    cuda_autocast: bool  # CUDA autocast's float32 op list
    full: bool  # every weight trainable
    lora_targets: frozenset[str]
    lora_rank: int
    attention: str
    checkpointing: bool
    tp: int = 1
    four_bit_base: bool = False
    adapter_bytes: int = _ADAPTER_BYTES  # dtype of the LoRA adapters and their gradients
    tokens: int = field(init=False)  # batch x seq, read by most operations of the replay

    def __post_init__(self) -> None:
        self.tokens = self.batch * self.seq

    def sized(self, batch: int, seq: int) -> _Ctx:
        """This context for ``batch`` sequences of ``seq`` tokens (dataclasses.replace, without
        its field introspection: it runs for every point of a sweep)."""
        return _Ctx(
            batch=batch,
            seq=seq,
            param_bytes=self.param_bytes,
            compute_bytes=self.compute_bytes,
            autocast=self.autocast,
            cuda=self.cuda,
            cuda_autocast=self.cuda_autocast,
            full=self.full,
            lora_targets=self.lora_targets,
            lora_rank=self.lora_rank,
            attention=self.attention,
            checkpointing=self.checkpointing,
            tp=self.tp,
            four_bit_base=self.four_bit_base,
            adapter_bytes=self.adapter_bytes,
        )


class _Replay:
    """Records what autograd saves while a forward runs through ``_Replay``'s operations."""

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx
        self.saved: dict[int, _T] = {}
        # Bytes the backward of materialized attention scores needs at once: the gradients of
        # the probabilities and of the scores in the softmax's dtype, beside what was saved up
        # to the softmax (later saved tensors are freed by then).
        self.scores_backward = 0
        self.saved_through_softmax = 0  # saved bytes of the block up to its softmax

    # -- bookkeeping
    # new(numel, itemsize, grad): a tensor of the replay (the class itself, called without a
    # wrapper: the replay makes a hundred of them per block).
    new = staticmethod(_T)

    def save(self, *tensors: _T) -> None:
        for t in tensors:
            owner = t if t.base is None else t.base
            self.saved[id(owner)] = owner

    def saved_bytes(self) -> int:
        return sum(t.numel * t.itemsize for t in self.saved.values())

    # -- dtype handling
    def cast(self, x: _T, itemsize: int) -> _T:
        if x.itemsize == itemsize:
            return x
        return self.new(x.numel, itemsize, x.grad)

    def autocast_in(self, x: _T) -> _T:
        """Inputs of matmul-like ops under autocast: cast to the 16-bit dtype (a new tensor)."""
        return self.cast(x, self.ctx.compute_bytes) if self.ctx.autocast else x

    def autocast_fp32(self, x: _T) -> _T:
        """CUDA autocast runs norms / softmax / pow in fp32; the CPU list leaves them alone."""
        return self.cast(x, 4) if self.ctx.autocast and self.ctx.cuda_autocast else x

    # -- operations (what each saves follows PyTorch's derivatives.yaml)
    def linear(self, x: _T, out_features: int, trainable: bool) -> _T:
        xin = self.autocast_in(x)
        if trainable:
            self.save(xin)
        itemsize = self.ctx.compute_bytes if self.ctx.autocast else xin.itemsize
        rows = x.numel // self.width_of(x)
        return self.new(rows * out_features, itemsize, x.grad or trainable)

    def linear_rows(self, x: _T, rows: int, out_features: int, trainable: bool) -> _T:
        """A linear over ``rows`` rows that are not the batch's tokens (MoE gathered rows)."""
        xin = self.autocast_in(x)
        if trainable:
            self.save(xin)
        itemsize = self.ctx.compute_bytes if self.ctx.autocast else xin.itemsize
        return self.new(rows * out_features, itemsize, x.grad or trainable)

    def width_of(self, x: _T) -> int:
        return x.numel // self.ctx.tokens

    def proj(self, x: _T, module: str, out_features: int) -> _T:
        """A linear layer of the model, with a LoRA branch when ``module`` is targeted."""
        ctx = self.ctx
        if ctx.full:
            return self.linear(x, out_features, True)
        if ctx.four_bit_base:
            out = self.linear4bit(x, out_features)
        else:
            out = self.linear(x, out_features, False)
        if module not in ctx.lora_targets:
            return out
        xa = self.cast(x, ctx.adapter_bytes)
        a = self.linear(xa, ctx.lora_rank, True)
        b = self.linear(a, out_features, True)
        summed = self.new(out.numel, max(out.itemsize, b.itemsize), True)
        return self.cast(summed, out.itemsize)

    def linear4bit(self, x: _T, out_features: int) -> _T:
        """bitsandbytes' Linear4bit: casts its input to the compute dtype (a copy that nothing
        keeps) and returns the output in the input's dtype. MatMul4Bit keeps only the packed
        weight for backward (bitsandbytes 0.43.2 on; 0.43.1 and earlier also kept the cast input
        whenever it needed a gradient)."""
        return self.new(x.numel // self.width_of(x) * out_features, x.itemsize, x.grad)

    def mul(self, a: _T, b: _T) -> _T:
        if b.grad:
            self.save(a)
        if a.grad:
            self.save(b)
        return self.new(max(a.numel, b.numel), max(a.itemsize, b.itemsize), a.grad or b.grad)

    def mul_const(self, a: _T, const: _T) -> _T:
        """Product with a tensor that needs no gradient and outlives the block (cos / sin)."""
        return self.new(a.numel, max(a.itemsize, const.itemsize), a.grad)

    def add(self, a: _T, b: _T) -> _T:
        return self.new(max(a.numel, b.numel), max(a.itemsize, b.itemsize), a.grad or b.grad)

    def unary_saving_input(self, x: _T) -> _T:
        """SiLU, GELU (erf or tanh), pow: the derivative needs the input."""
        if x.grad:
            self.save(x)
        return self.new(x.numel, x.itemsize, x.grad)

    def unary_saving_output(self, x: _T) -> _T:
        """ReLU, tanh, softmax, log_softmax, rsqrt: the derivative needs the output."""
        out = self.new(x.numel, x.itemsize, x.grad)
        if x.grad:
            self.save(out)
        return out

    def dropout(self, x: _T, p: float) -> _T:
        if p <= 0.0:
            return x
        if x.grad:
            # CUDA's fused kernel keeps a bool mask; the CPU path multiplies by a scaled noise
            # tensor of the input's dtype and keeps that.
            mask = self.new(x.numel, 1 if self.ctx.cuda else x.itemsize, False)
            self.save(mask)
        return self.new(x.numel, x.itemsize, x.grad)

    def rms_norm(self, x: _T, width: int, trainable: bool, *, gemma: bool = False) -> _T:
        """LlamaRMSNorm (weight x normed.to(input dtype)) or GemmaRMSNorm ((1 + w) x normed).

        Both upcast to fp32 first, and pow / mean / rsqrt keep small per-token statistics.
        """
        x32 = self.cast(x, 4)
        stats = self.new(x.numel // width, 4, x.grad)
        if x.grad:
            self.save(x32, stats)
        normed32 = self.new(x.numel, 4, x.grad)
        weight = self.new(width, 4 if gemma else self.ctx.param_bytes, trainable)
        if gemma:
            out = self.mul(normed32, weight)
            return self.cast(out, x.itemsize)
        normed = self.cast(normed32, x.itemsize)
        return self.mul(normed, weight)

    def layer_norm(self, x: _T, trainable: bool) -> _T:
        """nn.LayerNorm: keeps its input and per-row mean and rstd; CUDA autocast runs it in
        fp32."""
        xin = self.autocast_fp32(x)
        grad = x.grad or trainable
        if grad:
            rows = x.numel // self.width_of(x)
            # The CPU kernel keeps them in the input's dtype unless the weight is fp32.
            stat = 4 if self.ctx.cuda or self.ctx.param_bytes == 4 else xin.itemsize
            self.save(xin, self.new(rows, stat, False), self.new(rows, stat, False))
        return self.new(x.numel, xin.itemsize, grad)

    def ids(self, numel: int) -> None:
        """Integer indices an embedding keeps (token, position, token-type ids)."""
        self.save(self.new(numel, _INT64, False))

    def attention(
        self,
        q: _T,
        k: _T,
        v: _T,
        *,
        heads: int,
        kv_heads: int,
        head_dim: int,
        softmax_fp32: bool = True,
        dropout: float = 0.0,
        q_bshd: bool = True,
        softcap: bool = False,
        kv_broadcast: bool = False,
        masked: bool = False,
    ) -> _T:
        """Attention as transformers runs it; returns the merged heads, (tokens, heads x hd).

        Args:
            softmax_fp32: softmax(dtype=float32) then a cast back (Llama, NeoX, BLOOM), rather
                than a softmax in the scores' dtype (GPT-2, BERT, Falcon).
            q_bshd: q is laid out (batch, seq, heads, hd) in memory (a transposed view or an
                elementwise result of one), so a flash kernel's output needs no copy to merge
                the heads.
            kv_broadcast: k / v reach SDPA expanded with stride 0 (Falcon multi-query).
            masked: SDPA gets an explicit mask (a sliding window shorter than the sequence);
                transformers then repeats k / v to every query head before the call.
        """
        ctx = self.ctx
        b, s = ctx.batch, ctx.seq
        grad = q.grad or k.grad or v.grad
        q, k, v = self.autocast_in(q), self.autocast_in(k), self.autocast_in(v)
        if ctx.attention == "flash":
            # transformers' flash-attention path casts fp32 q / k / v to the 16-bit dtype.
            q, k, v = (self.cast(t, ctx.compute_bytes) for t in (q, k, v))
        c = q.itemsize
        full = ctx.tokens * heads * head_dim
        scores = b * heads * s * s
        if ctx.attention != "eager":
            # CPU SDPA uses its flash kernel only without dropout and with real strides; else
            # the math path, which for 16-bit inputs upcasts to fp32.
            math_path = not ctx.cuda and (dropout > 0.0 or kv_broadcast)
            if not math_path:
                # Flash / memory-efficient kernels keep q, k, v, the output and a fp32
                # log-sum-exp per row; GQA runs without repeating k / v unless masked.
                if masked and kv_heads != heads:
                    k, v = self.new(full, k.itemsize, k.grad), self.new(full, v.itemsize, v.grad)
                out = self.new(full, c, grad)
                if grad:
                    self.save(q, k, v, out, self.new(b * heads * s, 4, False))
                return out if q_bshd else self.new(full, c, grad)
            acc = 4
            # Broadcast k / v stay one head when batch x heads folds into a view (batch 1).
            kv = ctx.tokens * kv_heads * head_dim if kv_broadcast and b == 1 else full
            if grad:
                self.save(self.new(full, acc, True), self.new(kv, acc, True))  # q, k scaled
                probs = self.unary_saving_output(self.new(scores, acc, True))
                self.scores_backward = max(self.scores_backward, 2 * probs.nbytes)
                self.saved_through_softmax = self.saved_bytes()
                probs = self.dropout(probs, dropout)
                self.save(probs, self.new(kv, acc, True))  # v
            return self.new(full, c, grad)  # output in q's dtype, heads merged
        if grad:
            self.save(self.new(full, c, True), self.new(full, c, True))  # q, k (expanded) copies
        logits = self.new(scores, c, grad)
        if softcap:
            logits = self.unary_saving_output(logits)
        # The additive mask has the dtype of the hidden states (fp32 under autocast).
        logits = self.add(logits, self.new(1, ctx.param_bytes, False))
        # CUDA autocast runs softmax in fp32 even when the model does not ask for it.
        upcast = softmax_fp32 or (ctx.autocast and ctx.cuda_autocast)
        probs = self.unary_saving_output(self.cast(logits, 4) if upcast else logits)
        if grad:
            self.scores_backward = max(self.scores_backward, 2 * probs.nbytes)
            self.saved_through_softmax = self.saved_bytes()
        probs = self.dropout(probs, dropout)
        if grad:
            self.save(self.cast(probs, c), self.new(full, c, True))  # probs in v's dtype, v
        return self.new(full, c, grad)  # transpose(1, 2).contiguous()


# ---------------------------------------------------------------------------------------------
# Family layer programs.


@dataclass(frozen=True, slots=True)
class _Block:
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


def _has(spec: ModelSpec, layer: int, module: str) -> bool:
    modules = spec.cached(
        ("training_layer_modules", layer),
        lambda: frozenset(t.module for t in spec.layer_tensors(layer)),
    )
    return module in modules


def _llama_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
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
        q = _T(tok * heads * hd, qkv.itemsize, qkv.grad, qkv)
        k = _T(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
        v = _T(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
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
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softcap=f.model_type == "gemma2",
        dropout=f.attention_dropout,
        masked=_windowed(spec, layer, ctx.seq),
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


def _gated_mlp(r: _Replay, y: _T, inter: int, hidden: int, *, fused: bool) -> _T:
    """SwiGLU / GeGLU: act(gate(y)) * up(y), then down; gate and up may be one fused linear."""
    rows = y.numel // r.width_of(y)
    if fused:
        gu = r.proj(y, "gate_up_proj", 2 * inter)
        gate = _T(rows * inter, gu.itemsize, gu.grad, gu)
        up = _T(rows * inter, gu.itemsize, gu.grad, gu)
        m = r.mul(up, r.unary_saving_input(gate))
    else:
        gate = r.proj(y, "gate_proj", inter)
        up = r.proj(y, "up_proj", inter)
        m = r.mul(r.unary_saving_input(gate), up)
    return r.proj(m, "down_proj", hidden)


def _moe_mlp(r: _Replay, spec: ModelSpec, layer: int, y: _T) -> _T:
    """A mixture-of-experts MLP, approximated: the router's logits and probabilities, each
    token's hidden state gathered once per chosen expert and run through that expert's gated
    MLP, weighted, plus the shared experts over every token."""
    f = spec.facts
    ctx = r.ctx
    tok = ctx.tokens
    router_logits = r.linear(y, f.num_experts, ctx.full)
    r.unary_saving_output(r.cast(router_logits, 4))
    routed = tok * f.experts_per_token
    # Indexing keeps only the indices; the experts' first linear keeps the gathered rows when
    # its weights train.
    picked = r.new(routed * f.hidden_size, y.itemsize, y.grad)
    expert_out = _gated_mlp_rows(r, picked, f.moe_intermediate_size // ctx.tp, f.hidden_size)
    weighted = r.mul(expert_out, r.new(routed, 4, ctx.full))
    out = r.new(y.numel, weighted.itemsize, weighted.grad)
    shared = sum(
        t.shape[0]
        for t in spec.layer_tensors(layer)
        if t.role == Role.SHARED_EXPERT and t.module == "gate_proj"
    )
    if shared:
        out = r.add(out, _gated_mlp(r, y, shared // ctx.tp, f.hidden_size, fused=False))
    return out


def _gated_mlp_rows(r: _Replay, x: _T, inter: int, hidden: int) -> _T:
    """An expert's gated MLP over gathered rows (its weights are 3-D stacks, always trainable
    in a full fine-tune, frozen under LoRA)."""
    ctx = r.ctx
    rows = x.numel // hidden
    gu = r.linear_rows(x, rows, 2 * inter, ctx.full)
    gate = _T(rows * inter, gu.itemsize, gu.grad, gu)
    up = _T(rows * inter, gu.itemsize, gu.grad, gu)
    m = r.mul(up, r.unary_saving_input(gate))
    return r.linear_rows(m, rows, hidden, ctx.full)


def _windowed(spec: ModelSpec, layer: int, seq: int) -> bool:
    """A sliding-window layer whose window is shorter than the sequence (it needs a mask)."""
    f = spec.facts
    sliding = bool(f.layer_types) and f.layer_types[layer] == LayerType.SLIDING
    return sliding and f.sliding_window is not None and f.sliding_window < seq


def _heads(spec: ModelSpec, tp: int) -> tuple[int, int, int]:
    f = spec.facts
    return f.num_heads // tp, max(1, f.num_kv_heads // tp), f.head_dim


def _fused_qkv(r: _Replay, spec: ModelSpec, y: _T, module: str) -> tuple[_T, _T, _T]:
    """One linear for q, k and v; the three are views of its output."""
    heads, kv_heads, hd = _heads(spec, r.ctx.tp)
    tok = r.ctx.tokens
    qkv = r.proj(y, module, (heads + 2 * kv_heads) * hd)
    q = _T(tok * heads * hd, qkv.itemsize, qkv.grad, qkv)
    k = _T(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
    v = _T(tok * kv_heads * hd, qkv.itemsize, qkv.grad, qkv)
    return q, k, v


def _new_gelu(r: _Replay, x: _T) -> _T:
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


def _gpt2_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
    """GPT-2 block: pre-LN, fused c_attn (Conv1D), NewGELU MLP, dropout on every branch."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, "c_attn")
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softmax_fp32=False,
        dropout=f.attention_dropout,
    )
    x = r.add(x, r.dropout(r.proj(a, "c_proj", f.hidden_size), f.hidden_dropout))
    y = r.layer_norm(x, ctx.full)
    m = _new_gelu(r, r.proj(y, "c_fc", f.intermediate_size // ctx.tp))
    return r.add(x, r.dropout(r.proj(m, "c_proj", f.hidden_size), f.hidden_dropout))


def _post_ln(spec: ModelSpec) -> bool:
    """OPT-350m style: no final norm, each block normalizes after its residual add."""
    return not any(t.role == Role.NORM for t in spec.layer_tensors(None))


def _opt_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
    """OPT block: separate q / k / v, ReLU MLP, dropout after out_proj and fc2."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    post = _post_ln(spec)
    y = x if post else r.layer_norm(x, ctx.full)
    q = r.proj(y, "q_proj", heads * hd)
    k = r.proj(y, "k_proj", kv_heads * hd)
    v = r.proj(y, "v_proj", kv_heads * hd)
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softmax_fp32=True,
        dropout=f.attention_dropout,
    )
    x = r.add(x, r.dropout(r.proj(a, "out_proj", f.hidden_size), f.hidden_dropout))
    if post:
        x = r.layer_norm(x, ctx.full)
    y = x if post else r.layer_norm(x, ctx.full)
    m = r.unary_saving_output(r.proj(y, "fc1", f.intermediate_size // ctx.tp))  # ReLU
    x = r.add(x, r.dropout(r.proj(m, "fc2", f.hidden_size), f.hidden_dropout))
    return r.layer_norm(x, ctx.full) if post else x


def _neox_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
    """GPT-NeoX block: parallel residual x + attn(ln1(x)) + mlp(ln2(x)), (partial) rotary."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, "query_key_value")
    # Rotary on the rotated part, then cat with the pass-through part: new q and k laid out
    # (batch, heads, seq, hd); v stays a view of the fused output, which SDPA's saved v keeps
    # whole (the CPU kernel alone saves a contiguous copy instead).
    q = r.new(q.numel, q.itemsize, q.grad)
    k = r.new(k.numel, k.itemsize, k.grad)
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softmax_fp32=True,
        dropout=f.attention_dropout,
        q_bshd=False,
    )
    attn = r.dropout(r.proj(a, "dense", f.hidden_size), f.hidden_dropout)
    y2 = r.layer_norm(x, ctx.full)
    m = r.unary_saving_input(r.proj(y2, "dense_h_to_4h", f.intermediate_size // ctx.tp))
    mlp = r.dropout(r.proj(m, "dense_4h_to_h", f.hidden_size), f.hidden_dropout)
    return r.add(r.add(x, attn), mlp)


def _bloom_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
    """BLOOM block: ALiBi scores via baddbmm, fp32 softmax, GELU (custom autograd) MLP."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, "query_key_value")
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softmax_fp32=True,
        dropout=f.attention_dropout,
    )
    x = r.add(x, r.dropout(r.proj(a, "dense", f.hidden_size), f.hidden_dropout))
    y = r.layer_norm(x, ctx.full)
    m = r.unary_saving_input(r.proj(y, "dense_h_to_4h", f.intermediate_size // ctx.tp))
    return r.add(x, r.dropout(r.proj(m, "dense_4h_to_h", f.hidden_size), f.hidden_dropout))


def _falcon_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
    """Falcon block: parallel attention and MLP on one (or two) layer norms, multi-query."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    norms = [t for t in spec.layer_tensors(layer) if t.role == Role.NORM and not t.is_bias]
    y = r.layer_norm(x, ctx.full)
    q, k, v = _fused_qkv(r, spec, y, "query_key_value")
    q = r.new(q.numel, q.itemsize, q.grad)  # rotary
    k = r.new(k.numel, k.itemsize, k.grad)
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softmax_fp32=False,
        dropout=f.attention_dropout,
        q_bshd=False,
        kv_broadcast=kv_heads == 1 and heads > 1,
    )
    attn = r.proj(a, "dense", f.hidden_size)
    y2 = r.layer_norm(x, ctx.full) if len(norms) > 1 else y
    m = r.unary_saving_input(r.proj(y2, "dense_h_to_4h", f.intermediate_size // ctx.tp))
    mlp = r.proj(m, "dense_4h_to_h", f.hidden_size)
    return r.add(r.add(x, attn), mlp)


def _bert_layer(r: _Replay, spec: ModelSpec, layer: int, x: _T) -> _T:
    """BERT block: post-LN, separate query / key / value, dropout everywhere, GELU MLP."""
    f = spec.facts
    ctx = r.ctx
    heads, kv_heads, hd = _heads(spec, ctx.tp)
    q = r.proj(x, "query", heads * hd)
    k = r.proj(x, "key", kv_heads * hd)
    v = r.proj(x, "value", kv_heads * hd)
    a = r.attention(
        q,
        k,
        v,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hd,
        softmax_fp32=False,
        dropout=f.attention_dropout,
    )
    x = r.layer_norm(
        r.add(r.dropout(r.proj(a, "dense", f.hidden_size), f.hidden_dropout), x), ctx.full
    )
    m = r.unary_saving_input(r.proj(x, "dense", f.intermediate_size // ctx.tp))
    d = r.dropout(r.proj(m, "dense", f.hidden_size), f.hidden_dropout)
    return r.layer_norm(r.add(d, x), ctx.full)


_LAYER_PROGRAMS: dict[str, Callable[[_Replay, ModelSpec, int, _T], _T]] = {
    "gpt2": _gpt2_layer,
    "opt": _opt_layer,
    "gpt_neox": _neox_layer,
    "bloom": _bloom_layer,
    "falcon": _falcon_layer,
    "bert": _bert_layer,
}


def _layer_program(spec: ModelSpec) -> Callable[[_Replay, ModelSpec, int, _T], _T]:
    return _LAYER_PROGRAMS.get(spec.facts.model_type, _llama_layer)


def _embed(r: _Replay, spec: ModelSpec) -> _T:
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


def _head(r: _Replay, spec: ModelSpec, x: _T) -> tuple[_T, _T, bool]:
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


# ---------------------------------------------------------------------------------------------
# Weights, trainable parameters, LoRA targets.


def _linear_modules(spec: ModelSpec) -> frozenset[str]:
    return spec.cached(
        "training_linear_modules",
        lambda: frozenset(
            t.module
            for t in spec.tensors
            if t.layer is not None and t.is_matrix and t.role not in (Role.ROUTER,)
        ),
    )


def resolve_lora_targets(spec: ModelSpec, targets: tuple[str, ...]) -> frozenset[str]:
    """The module names LoRA adapts; ``all-linear`` = every linear in the blocks (not lm_head).

    Raises:
        WorkloadError: a target names no module of this model.
    """
    available = _linear_modules(spec)
    if ALL_LINEAR in targets:
        return frozenset(available)
    missing = [t for t in targets if t not in available]
    if missing:
        raise WorkloadError(
            f"LoRA target(s) {', '.join(missing)} not in {spec.name or 'this model'}; "
            f"its linear modules are {', '.join(sorted(available))} (or use all-linear)"
        )
    return frozenset(targets)


# ---------------------------------------------------------------------------------------------
# Optimizers.


@dataclass(frozen=True, slots=True)
class _OptimizerBytes:
    states: int
    temporaries: int


def _optimizer_bytes(
    name: str, sizes: list[int], shapes: list[tuple[int, ...]], b: int
) -> _OptimizerBytes:
    """States and step temporaries for trainable tensors of ``sizes`` elements, ``b`` bytes each."""
    total = sum(sizes) * b
    largest = max(sizes, default=0) * b
    if name == "adamw":
        # torch's foreach AdamW (the CUDA default): exp_avg, exp_avg_sq, and in the step
        # exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs) for the whole group at once.
        return _OptimizerBytes(2 * total, total)
    if name == "adamw-fused":
        return _OptimizerBytes(2 * total, 0)
    if name == "adamw-8bit":
        states = 0
        for n in sizes:
            if n < _BNB_MIN_8BIT_SIZE:
                states += 2 * n * 4
            else:
                states += 2 * (n + 4 * math.ceil(n / _BNB_BLOCK))
        return _OptimizerBytes(states, 0)
    if name == "sgd":
        # momentum_buffer; the foreach update works in place.
        return _OptimizerBytes(total, 0)
    if name == "lion":
        # exp_avg; the per-tensor update clones exp_avg and adds the gradient.
        return _OptimizerBytes(total, 2 * largest)
    if name == "adafactor":
        states = 0
        matrix_total = 0
        vector_total = 0
        for shape in shapes:
            n = math.prod(shape)
            if len(shape) >= 2:
                rows = math.prod(shape[:-1])
                cols = math.prod(shape[:-2]) * shape[-1]
                states += (rows + cols) * b
                matrix_total += n * b
            else:
                states += n * b
                vector_total += n * b
        # torch's foreach Adafactor builds var_estimates (one full-size tensor per parameter) for
        # the matrices, and for the vectors the squared grads then a clone of the variances.
        return _OptimizerBytes(states, max(matrix_total, vector_total))
    raise WorkloadError(f"unknown optimizer {name!r}")


# ---------------------------------------------------------------------------------------------
# The estimate.


def _check(workload: Workload) -> None:
    if workload.mode != "training":
        raise WorkloadError("a training estimate needs --mode training")
    if workload.method == "qlora" and workload.quant not in FOUR_BIT_SCHEMES:
        raise WorkloadError(
            "QLoRA trains adapters on a bitsandbytes 4-bit base: use --quant nf4 or fp4 "
            f"(or nf4-nodq / fp4-nodq without double quantization), not {workload.quant!r}"
        )
    if workload.method != "qlora" and workload.quant != "none":
        raise WorkloadError(
            f"--quant {workload.quant} with --method {workload.method}: a quantized base can only "
            "be trained through adapters (use --method qlora)"
        )


def _context(
    spec: ModelSpec, workload: Workload, device: str, autocast_rules: str, deepspeed_mixed: bool
) -> _Ctx:
    sixteen = dtypes.dtype_bytes(workload.dtype)
    if workload.precision == "fp32" or workload.dtype == "fp32":
        param_bytes, compute, autocast = 4, 4, False
    elif workload.method == "qlora" and (workload.fsdp or workload.zero == 3):
        # Sharded QLoRA stores the 4-bit codes in the 16-bit dtype (bnb_4bit_quant_storage) so
        # that FSDP / ZeRO-3 can flatten them with the other weights of a unit, which must share
        # one dtype: TRL's SFTTrainer (which peft's FSDP and DeepSpeed QLoRA guides run) skips
        # prepare_model_for_kbit_training, so the unquantized tensors stay 16-bit, and makes the
        # adapters 16-bit too (get_peft_model(autocast_adapter_dtype=False)).
        param_bytes, compute, autocast = sixteen, sixteen, False
    elif workload.method == "qlora":
        # peft's prepare_model_for_kbit_training (what most single-GPU QLoRA recipes call) upcasts
        # every unquantized tensor (embeddings, norms, head) to fp32, so the hidden states are
        # fp32; bitsandbytes' 4-bit linears compute in the 16-bit dtype and return the input's.
        param_bytes, compute, autocast = 4, sixteen, False
    elif workload.precision == "pure" or deepspeed_mixed:
        # DeepSpeed's bf16 / fp16 modes run a 16-bit model (the fp32 master copy sits with the
        # optimizer).
        param_bytes, compute, autocast = sixteen, sixteen, False
    else:
        # torch autocast: fp32 weights (frozen ones too for LoRA), 16-bit matmuls.
        param_bytes, compute, autocast = 4, sixteen, True
    targets: frozenset[str] = frozenset()
    if workload.method != "full":
        targets = resolve_lora_targets(spec, workload.lora_targets)
    sharded_4bit = workload.method == "qlora" and (workload.fsdp or workload.zero == 3)
    return _Ctx(
        batch=workload.batch,
        seq=workload.seq,
        param_bytes=param_bytes,
        compute_bytes=compute,
        autocast=autocast,
        cuda=device == "cuda",
        cuda_autocast=autocast_rules == "cuda",
        full=workload.method == "full",
        lora_targets=targets,
        lora_rank=workload.lora_rank,
        attention=workload.attention,
        checkpointing=workload.grad_checkpointing,
        tp=workload.tp,
        four_bit_base=workload.method == "qlora",
        adapter_bytes=param_bytes if sharded_4bit else _ADAPTER_BYTES,
    )


def _adapter_numel(t: Tensor, rank: int, tp: int) -> int:
    """LoRA A (r x in) and B (out x r) of one adapted weight, on one tensor-parallel rank."""
    out_f, in_f = t.shape[-2], t.shape[-1]
    return math.ceil(rank * (in_f + out_f) * math.prod(t.shape[:-2]) / tp)


def _trainable_numels(tensors: tuple[Tensor, ...] | list[Tensor], ctx: _Ctx) -> list[int]:
    """Elements of each trainable tensor among ``tensors`` on this rank."""
    if ctx.full:
        return [math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) for t in tensors]
    return [
        _adapter_numel(t, ctx.lora_rank, ctx.tp)
        for t in tensors
        if t.layer is not None and t.module in ctx.lora_targets and t.is_matrix
    ]


def _copy_bytes(tensors: tuple[Tensor, ...], ctx: _Ctx) -> int:
    """Autocast's 16-bit copies of the fp32 weights that matmuls use.

    Autocast caches the cast of every trainable fp32 leaf weight until the forward leaves the
    autocast region, and each copy is also saved for the backward of its linear; frozen weights
    (LoRA) are cast at each use and likewise kept by their linear.
    """
    if not ctx.autocast:
        return 0
    return sum(
        math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) * ctx.compute_bytes
        for t in tensors
        if t.role not in (Role.EMBEDDING, Role.POSITION, Role.NORM)
    )


def _group_sums(
    spec: ModelSpec,
    ctx: _Ctx,
    group: Hashable,
    tensors: Callable[[], tuple[Tensor, ...]],
) -> tuple[int, int]:
    """Trainable elements and autocast copy bytes of a group of tensors that ``group`` names
    within ``spec`` (the same tensors under one name), once per spec and the settings they
    depend on."""
    key = (
        "training_group",
        group,
        ctx.full,
        ctx.tp,
        ctx.lora_rank,
        ctx.lora_targets,
        ctx.autocast,
        ctx.compute_bytes,
    )

    def compute() -> tuple[int, int]:
        chosen = tensors()
        return sum(_trainable_numels(chosen, ctx)), _copy_bytes(chosen, ctx)

    return spec.cached(key, compute)


@dataclass(frozen=True, slots=True)
class _Walk:
    blocks: list[_Block]  # embeddings, each layer, head + loss
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


def _walk(spec: ModelSpec, ctx: _Ctx, grad_item: int) -> _Walk:
    """Replay the forward block by block."""
    f = spec.facts
    program = _layer_program(spec)
    blocks: list[_Block] = []
    tok = ctx.tokens
    r = _Replay(ctx)
    outside = spec.layer_tensors(None)
    head_tensors = tuple(t for t in outside if t.role in (Role.HEAD, Role.NORM))
    embed_tensors = tuple(t for t in outside if t.role not in (Role.HEAD, Role.NORM))
    x = _embed(r, spec)
    table = tuple(t for t in embed_tensors if t.role == Role.EMBEDDING)
    table_grad = _group_sums(spec, ctx, "table", lambda: table)[0] * grad_item
    # A tied table gets its gradient from the head first; the embedding's backward then forms a
    # second full-size gradient, and the autograd engine adds the two out of place (both and
    # their sum exist for a moment).
    tied_grad = table_grad if f.tie_word_embeddings else 0
    embed_trainable, embed_copies = _group_sums(spec, ctx, "embeddings", lambda: embed_tensors)
    blocks.append(
        _Block(
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
    replayed: dict[tuple[int, int, int, bool], tuple[_Block, _T]] = {}
    # The last reused block: its class, the state that entered it and what it gave. In a run of
    # identical blocks the reused output enters the next one, so it is found without a lookup.
    last: tuple[int, _T, _Block, _T] | None = None
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
        layer_trainable, copies = _group_sums(
            spec, ctx, ("layer", classes[layer]), partial(spec.layer_tensors, layer)
        )
        saved = full = r.saved_bytes()
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
        block = _Block(
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
    logits, log_probs, upcast = _head(r, spec, x)
    r.save(r.new(tok, _INT64, False))  # the (shifted) labels
    # Forward: the logits, their fp32 copy and log_softmax's output exist together.
    forward_transient = logits.nbytes + (log_probs.nbytes if upcast and logits.itemsize != 4 else 0)

    def head_weights() -> tuple[Tensor, ...]:
        weights = tuple(t for t in head_tensors if t.role == Role.HEAD)
        if f.tie_word_embeddings:
            weights += tuple(Tensor(t.name, t.shape, Role.HEAD) for t in table)
        return weights

    head_trainable, head_copy = _group_sums(spec, ctx, "head", lambda: head_tensors)
    head_weight_trainable, head_weight_copy = _group_sums(spec, ctx, "head weights", head_weights)
    if f.tie_word_embeddings:
        head_copy += head_weight_copy
    # Under autocast the head's weight gradient is formed in 16 bit, then cast to fp32.
    head_grad16 = head_weight_trainable * ctx.compute_bytes if ctx.autocast else 0
    blocks.append(
        _Block(
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
    return _Walk(blocks, forward_transient, output_bytes)


def _stage_blocks(walk: _Walk, stage: range, first: bool, last: bool) -> list[_Block]:
    blocks = walk.blocks
    chosen = [blocks[0]] if first else []
    chosen += [blocks[1 + i] for i in stage]
    if last:
        chosen.append(blocks[-1])
    return chosen


@dataclass(frozen=True, slots=True)
class _Moments:
    totals: dict[str, int]
    parts: dict[str, dict[str, int]]


def _moments(
    blocks: list[_Block],
    *,
    in_flight: int,
    resident: dict[str, int],
    grads_total: int,
    step_extra: dict[str, int],
    accumulating: bool,
    forward_transient: int,
    grad_shards: int,
    kept_outputs: int = 0,
) -> _Moments:
    """Totals at the forward end, the worst moment of backward, and the optimizer step.

    ``kept_outputs``: what the loop holds of the model's outputs through the whole step (the
    previous step's until the forward returns, then this one's).
    """
    # Runs of one block repeated (identical layers share their _Block) are walked at once.
    runs: list[tuple[_Block, int]] = []
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
    return _Moments(totals, parts)


def training_estimate(
    spec: ModelSpec,
    workload: Workload,
    *,
    device: str = "cuda",
    autocast_rules: str | None = None,
) -> TrainingBreakdown:
    """Per-GPU memory at the peak of a steady-state training step (the second optimizer step).

    Args:
        spec: the model.
        workload: a training workload.
        device: whose kernels run: "cuda" (what users run) or "cpu" (the measurement harness:
            CPU dropout keeps a noise tensor of the input's dtype rather than a bool mask, CPU
            SDPA falls back to its math path under dropout or broadcast k / v, CPU layer norm
            keeps 16-bit statistics for 16-bit weights).
        autocast_rules: whose autocast float32 list applies in mixed precision, "cuda" (norms,
            softmax, pow... in fp32) or "cpu" (left in 16 bit); by default the device's.

    Raises:
        WorkloadError: the settings do not apply to this model.
    """
    plan = TrainingPlan(spec, workload, device=device, autocast_rules=autocast_rules)
    return plan.breakdown(workload.batch, workload.seq)


@dataclass(frozen=True, slots=True)
class _StagePlan:
    """What one pipeline stage holds whatever the batch and sequence length."""

    stage: range
    first: bool
    last: bool
    micro_batches: int  # in flight at once (1F1B)
    resident: dict[str, int]  # weights, states and buffers present through the whole step
    grads_total: int
    step_extra: dict[str, int]  # what only the optimizer step adds
    host: int


class TrainingPlan:
    """Training memory of one model and setup at any batch size and sequence length.

    The checks, the parallel plan, each stage's weights, gradients and optimizer states and the
    notes are worked out once; :meth:`breakdown` replays the forward for the sizes it is given.
    ``TrainingPlan(spec, w).breakdown(w.batch, w.seq)`` is ``training_estimate(spec, w)``.

    Raises:
        WorkloadError: the settings do not apply to this model.
    """

    __slots__ = (
        "_accumulating",
        "_ctx",
        "_custom_loop",
        "_grad_item",
        "_grad_shards",
        "_notes",
        "_spec",
        "_stages",
        "_trainable",
    )

    def __init__(
        self,
        spec: ModelSpec,
        workload: Workload,
        *,
        device: str = "cuda",
        autocast_rules: str | None = None,
    ) -> None:
        if device not in DEVICES or (autocast_rules or device) not in DEVICES:
            raise ValueError(f"device and autocast_rules must be one of {DEVICES}")
        _check(workload)
        plan = parallel.plan(spec, workload)
        deepspeed_mixed = workload.zero > 0 and workload.precision == "mixed"
        ctx = _context(spec, workload, device, autocast_rules or device, deepspeed_mixed)
        notes: list[str] = list(plan.notes)

        # Which tensors live on this GPU (the worst pipeline stage is chosen in breakdown).
        stages = parallel.stage_layers(spec.facts.num_layers, plan.pp)

        grad_item = ctx.param_bytes if workload.method == "full" else ctx.adapter_bytes
        state_item = 4 if deepspeed_mixed else grad_item
        self._stages: list[_StagePlan] = []
        for index, stage in enumerate(stages):
            first, last = index == 0, index == len(stages) - 1
            if 0 < index < len(stages) - 1:
                continue  # middle stages hold no more than the first one
            facts = _stage_facts(
                spec, workload, ctx, stage, first=first, last=last, state_item=state_item
            )
            trainable = facts.trainable
            # Sharding divides the parameters; a 4-bit weight's quant state stays whole on each
            # rank.
            replicated = facts.quant_state if plan.param_shards > 1 else 0
            weights = parallel.shard(facts.weights - replicated, plan.param_shards) + replicated
            adapters = trainable * ctx.adapter_bytes if workload.method != "full" else 0
            opt = facts.optimizer
            states = opt.states + (trainable * 4 if deepspeed_mixed else 0)  # fp32 master weights
            states = parallel.shard(states, plan.state_shards)
            temporaries = parallel.shard(opt.temporaries, plan.state_shards)
            host = 0
            if plan.offload_states:
                host += states
                states, temporaries = 0, 0
            grads_total = parallel.shard(trainable * grad_item, plan.grad_shards)
            resident = {WEIGHTS: weights, OPTIMIZER_STATES: states}
            if adapters:
                resident[LORA_ADAPTERS] = adapters
            if plan.offload_params:
                # ZeRO-3 / FSDP parameter offload: only the gathered layers sit on the GPU.
                host += weights
                resident[WEIGHTS] = 0
            in_flight_params = parallel.gathered_in_flight_bytes(
                list(facts.layer_bytes), facts.outside_bytes, facts.largest_outside, plan, workload
            )
            if in_flight_params:
                resident[GATHERED_PARAMETERS] = in_flight_params
            buckets = parallel.ddp_bucket_bytes(trainable * grad_item, plan) + (
                parallel.zero_buffers_bytes(grad_item, trainable, plan, workload.zero)
            )
            if buckets:
                resident[GRADIENT_BUCKETS] = buckets
            if workload.method == "qlora":
                # bitsandbytes dequantizes one 4-bit weight at a time, to the compute dtype, for
                # its matmul.
                resident[DEQUANTIZED_WEIGHT] = _largest_linear(spec, ctx.tp) * ctx.compute_bytes
            self._stages.append(
                _StagePlan(
                    stage=stage,
                    first=first,
                    last=last,
                    micro_batches=parallel.in_flight_micro_batches(index, plan.pp),
                    resident=resident,
                    grads_total=grads_total,
                    step_extra={OPTIMIZER_TEMPORARIES: temporaries},
                    host=host,
                )
            )
        if workload.method == "qlora":
            notes.append(_qlora_note(workload, plan.param_shards))
        if plan.pp > 1:
            notes.append(
                f"pipeline: worst of the first and last of {plan.pp} stages (1F1B schedule)"
            )
        if workload.loop == "custom":
            notes.append(
                "custom loop: outputs keeps the logits (fp32 under accelerate's mixed precision) "
                "through backward and the optimizer step until the next forward returns; "
                "loss = model(**batch).loss, as transformers' Trainer takes it, frees them "
                "before backward"
            )
        self._trainable = (
            spec.parameters
            if workload.method == "full"
            else spec.cached(
                ("training_adapter_parameters", workload.lora_rank, ctx.lora_targets),
                lambda: sum(
                    _adapter_numel(t, workload.lora_rank, 1)
                    for t in spec.tensors
                    if t.layer is not None and t.module in ctx.lora_targets and t.is_matrix
                ),
            )
        )
        self._spec = spec
        self._ctx = ctx
        self._notes = tuple(notes)
        self._grad_item = grad_item
        self._grad_shards = plan.grad_shards
        self._accumulating = workload.grad_accum > 1
        self._custom_loop = workload.loop == "custom"

    def breakdown(self, batch: int, seq: int) -> TrainingBreakdown:
        """Per-GPU memory at the peak of a step over ``batch`` sequences of ``seq`` tokens."""
        ctx = self._ctx.sized(batch, seq)
        walk = _walk(self._spec, ctx, self._grad_item)
        best: tuple[int, str, dict[str, int], dict[str, int], int] | None = None
        for sp in self._stages:
            blocks = _stage_blocks(walk, sp.stage, sp.first, sp.last)
            moments = _moments(
                blocks,
                in_flight=sp.micro_batches,
                resident=sp.resident,
                grads_total=sp.grads_total,
                step_extra=sp.step_extra,
                accumulating=self._accumulating,
                forward_transient=walk.forward_transient if sp.last else 0,
                grad_shards=self._grad_shards,
                kept_outputs=walk.output_bytes if sp.last and self._custom_loop else 0,
            )
            phase = max(moments.totals, key=lambda k: moments.totals[k])
            total = moments.totals[phase]
            if best is None or total > best[0]:
                parts = {**sp.resident, **moments.parts[phase]}
                best = (total, phase, parts, moments.totals, sp.host)
        assert best is not None
        _, phase, parts, totals, host = best
        components = {k: max(v, 0) for k, v in parts.items() if v or k in REQUIRED_COMPONENTS}
        shift = totals[phase] - sum(components.values())
        if shift:
            # A negative transient (freed saved tensors) is folded into the activations.
            components[ACTIVATIONS] = max(0, components.get(ACTIVATIONS, 0) + shift)
        return TrainingBreakdown(
            components=components,
            phase=phase,
            trainable_parameters=self._trainable,
            host_bytes=host,
            notes=self._notes,
            phase_totals=totals,
        )


def _qlora_note(workload: Workload, param_shards: int) -> str:
    """How the QLoRA figures were counted, in the words of the libraries' settings."""
    if param_shards > 1:
        base = (
            f"QLoRA sharded over {param_shards} ranks: the 4-bit codes, stored as "
            f"bnb_4bit_quant_storage={workload.dtype}, are divided with the other weights and one "
            "layer's codes gathered in flight; each weight's quant state (absmax) stays whole on "
            f"every rank; embeddings / norms / head stay {workload.dtype}"
        )
    else:
        base = (
            "QLoRA: the 4-bit base as bitsandbytes stores it (quant state included), "
            "embeddings / norms / head upcast to fp32 by prepare_model_for_kbit_training"
        )
    compute = (
        "float32 compute, BitsAndBytesConfig's default bnb_4bit_compute_dtype (what "
        "load_in_4bit=True alone gives, with fp4 and no double quantization)"
        if workload.dtype == "fp32"
        else f"bnb_4bit_compute_dtype={workload.dtype}"
    )
    return (
        f"{base}; {compute}; one linear's weight dequantized in flight, no activation kept by "
        "the 4-bit matmul (bitsandbytes 0.43.2 on); paged optimizer states are counted on the GPU "
        "(bitsandbytes moves them to host RAM only under memory pressure)"
    )


def _largest_linear(spec: ModelSpec, tp: int) -> int:
    return spec.cached(
        ("training_largest_linear", tp),
        lambda: max(
            (
                math.ceil(t.numel * parallel.tp_share(t, tp))
                for t in spec.tensors
                if t.is_matrix and t.layer is not None
            ),
            default=0,
        ),
    )


@dataclass(frozen=True, slots=True)
class _StageFacts:
    """What one pipeline stage's tensors give, whatever the batch and sequence length."""

    trainable: int  # trainable elements on this rank
    weights: int  # weight bytes before sharding over data-parallel ranks
    quant_state: int  # of those, the 4-bit weights' quant state (never sharded)
    optimizer: _OptimizerBytes  # before sharding
    layer_bytes: tuple[int, ...]  # each block's parameters, gathered in the compute dtype
    outside_bytes: int  # the tensors outside the blocks, gathered
    largest_outside: int


def _stage_facts(
    spec: ModelSpec,
    workload: Workload,
    ctx: _Ctx,
    stage: range,
    *,
    first: bool,
    last: bool,
    state_item: int,
) -> _StageFacts:
    """The per-tensor sums of one stage, once per spec and the settings they depend on."""
    sixteen = dtypes.dtype_bytes(workload.dtype)

    def compute() -> _StageFacts:
        tensors = [t for t in spec.tensors if t.layer is None or t.layer in stage]
        if not first:
            tensors = [
                t for t in tensors if not (t.layer is None and t.role not in (Role.HEAD, Role.NORM))
            ]
        if not last:
            tensors = [
                t for t in tensors if not (t.layer is None and t.role in (Role.HEAD, Role.NORM))
            ]
        numels = _trainable_numels(tensors, ctx)
        shapes = (
            [t.shape for t in tensors]
            if ctx.full
            else [
                shape
                for t in tensors
                if t.layer is not None and t.module in ctx.lora_targets and t.is_matrix
                for shape in ((ctx.lora_rank, t.shape[-1]), (t.shape[-2], ctx.lora_rank))
            ]
        )
        outside = [t.numel * ctx.compute_bytes for t in tensors if t.layer is None]
        weights, quant_state = _weight_bytes(spec, tensors, workload, ctx)
        return _StageFacts(
            trainable=sum(numels),
            weights=weights,
            quant_state=quant_state,
            optimizer=_optimizer_bytes(workload.optimizer, numels, shapes, state_item),
            layer_bytes=tuple(
                _gathered_layer_bytes(spec, i, workload, ctx, sixteen) for i in stage
            ),
            outside_bytes=sum(outside),
            largest_outside=max(outside, default=0),
        )

    key = (
        "training_stage",
        stage.start,
        stage.stop,
        first,
        last,
        workload.method,
        workload.dtype,
        workload.quant,
        workload.optimizer,
        state_item,
        ctx.param_bytes,
        ctx.compute_bytes,
        ctx.tp,
        ctx.lora_rank,
        ctx.lora_targets,
    )
    return spec.cached(key, compute)


def _weight_bytes(
    spec: ModelSpec, tensors: list[Tensor], workload: Workload, ctx: _Ctx
) -> tuple[int, int]:
    """Bytes of ``tensors`` on one tensor-parallel rank, as the method stores them, and of
    those the 4-bit weights' quant state."""
    if workload.method == "qlora":
        sub = ModelSpec(spec.name, spec.facts, tuple(tensors), spec.architecture)
        stored = dtypes.assign_storage(sub, workload.dtype, workload.quant)
        quantized = [s for s in stored if s.storage == workload.quant]
        codes = sum(dtypes.bnb_4bit_packed_bytes(s.tensor.shape) for s in quantized)
        quantized_bytes = sum(s.bytes for s in quantized)
        upcast = sum(s.tensor.numel for s in stored if s.storage != workload.quant)
        return (
            math.ceil(quantized_bytes / ctx.tp) + upcast * ctx.param_bytes,
            math.ceil((quantized_bytes - codes) / ctx.tp),
        )
    weights = sum(math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) for t in tensors)
    return weights * ctx.param_bytes, 0


def _gathered_layer_bytes(
    spec: ModelSpec, layer: int, workload: Workload, ctx: _Ctx, sixteen: int
) -> int:
    """One block's parameters as FSDP / ZeRO-3 gather them: in the compute dtype, or for QLoRA
    the 4-bit codes (their quant state is never sharded) and the 16-bit rest."""
    tensors = spec.layer_tensors(layer)
    if workload.method != "qlora":
        return sum(t.numel for t in tensors) * (sixteen if ctx.compute_bytes == 2 else 4)
    sub = ModelSpec(spec.name, spec.facts, tensors, spec.architecture)
    return sum(
        dtypes.bnb_4bit_packed_bytes(s.tensor.shape)
        if s.storage == workload.quant
        else s.tensor.numel * ctx.param_bytes
        for s in dtypes.assign_storage(sub, workload.dtype, workload.quant)
    )
