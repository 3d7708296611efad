"""The symbolic replay of a forward pass: tensors that are only sizes, and operations that save
for backward what PyTorch's derivative of each needs, in the dtype autocast or pure 16-bit gives
it. The layer programs (layers.py) are written in these operations."""

from __future__ import annotations

from dataclasses import dataclass, field

# peft's default scaling and dropout do not change memory; its adapters are fp32 on a 16-bit base.
ADAPTER_BYTES = 4
INT64_BYTES = 8  # bytes of the integer indices embeddings and the loss keep


@dataclass(eq=False, slots=True)
class ReplayTensor:
    """A tensor of the replay: its storage size and whether it needs a gradient.

    ``base`` is the tensor that owns the storage when this one is a view of it.
    """

    numel: int
    itemsize: int
    grad: bool
    base: ReplayTensor | None = None

    @property
    def owner(self) -> ReplayTensor:
        return self.base if self.base is not None else self

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(slots=True)
class ReplayContext:
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
    adapter_bytes: int = ADAPTER_BYTES  # dtype of the LoRA adapters and their gradients
    # The dtype the weights (and a full fine-tune's gradients) are stored in, where it is not
    # the one the forward sees: FSDP's mixed precision keeps fp32 shards and gathers them in
    # 16 bits. 0: ``param_bytes``.
    stored_param_bytes: int = 0
    tokens: int = field(init=False)  # batch x seq, read by most operations of the replay

    def __post_init__(self) -> None:
        self.tokens = self.batch * self.seq

    @property
    def storage_bytes(self) -> int:
        """Bytes per stored weight element (see ``stored_param_bytes``)."""
        return self.stored_param_bytes or self.param_bytes

    def sized(self, batch: int, seq: int) -> ReplayContext:
        """This context for ``batch`` sequences of ``seq`` tokens (dataclasses.replace, without
        its field introspection: it runs for every point of a sweep)."""
        return ReplayContext(
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
            stored_param_bytes=self.stored_param_bytes,
        )


class Replay:
    """Records what autograd saves while a forward runs through ``Replay``'s operations."""

    def __init__(self, ctx: ReplayContext) -> None:
        self.ctx = ctx
        self.saved: dict[int, ReplayTensor] = {}
        # Bytes the backward of materialized attention scores needs at once: the gradients of
        # the probabilities and of the scores in the softmax's dtype, beside what was saved up
        # to the softmax (later saved tensors are freed by then).
        self.scores_backward = 0
        self.saved_through_softmax = 0  # saved bytes of the block up to its softmax

    # -- bookkeeping
    # new(numel, itemsize, grad): a tensor of the replay (the class itself, called without a
    # wrapper: the replay makes a hundred of them per block).
    new = staticmethod(ReplayTensor)

    def save(self, *tensors: ReplayTensor) -> None:
        for t in tensors:
            owner = t if t.base is None else t.base
            self.saved[id(owner)] = owner

    def saved_bytes(self) -> int:
        return sum(t.numel * t.itemsize for t in self.saved.values())

    # -- dtype handling
    def cast(self, x: ReplayTensor, itemsize: int) -> ReplayTensor:
        if x.itemsize == itemsize:
            return x
        return self.new(x.numel, itemsize, x.grad)

    def autocast_in(self, x: ReplayTensor) -> ReplayTensor:
        """Inputs of matmul-like ops under autocast: cast to the 16-bit dtype (a new tensor)."""
        return self.cast(x, self.ctx.compute_bytes) if self.ctx.autocast else x

    def autocast_fp32(self, x: ReplayTensor) -> ReplayTensor:
        """CUDA autocast runs norms / softmax / pow in fp32; the CPU list leaves them alone."""
        return self.cast(x, 4) if self.ctx.autocast and self.ctx.cuda_autocast else x

    # -- operations (what each saves follows PyTorch's derivatives.yaml)
    def linear(self, x: ReplayTensor, out_features: int, trainable: bool) -> ReplayTensor:
        xin = self.autocast_in(x)
        if trainable:
            self.save(xin)
        itemsize = self.ctx.compute_bytes if self.ctx.autocast else xin.itemsize
        rows = x.numel // self.width_of(x)
        return self.new(rows * out_features, itemsize, x.grad or trainable)

    def linear_rows(
        self, x: ReplayTensor, rows: int, out_features: int, trainable: bool
    ) -> ReplayTensor:
        """A linear over ``rows`` rows that are not the batch's tokens (MoE gathered rows)."""
        xin = self.autocast_in(x)
        if trainable:
            self.save(xin)
        itemsize = self.ctx.compute_bytes if self.ctx.autocast else xin.itemsize
        return self.new(rows * out_features, itemsize, x.grad or trainable)

    def width_of(self, x: ReplayTensor) -> int:
        return x.numel // self.ctx.tokens

    def proj(self, x: ReplayTensor, module: str, out_features: int) -> ReplayTensor:
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

    def linear4bit(self, x: ReplayTensor, out_features: int) -> ReplayTensor:
        """bitsandbytes' Linear4bit: casts its input to the compute dtype (a copy that nothing
        keeps) and returns the output in the input's dtype. MatMul4Bit keeps only the packed
        weight for backward (bitsandbytes 0.43.2 on; 0.43.1 and earlier also kept the cast input
        whenever it needed a gradient)."""
        return self.new(x.numel // self.width_of(x) * out_features, x.itemsize, x.grad)

    def mul(self, a: ReplayTensor, b: ReplayTensor) -> ReplayTensor:
        if b.grad:
            self.save(a)
        if a.grad:
            self.save(b)
        return self.new(max(a.numel, b.numel), max(a.itemsize, b.itemsize), a.grad or b.grad)

    def mul_const(self, a: ReplayTensor, const: ReplayTensor) -> ReplayTensor:
        """Product with a tensor that needs no gradient and outlives the block (cos / sin)."""
        return self.new(a.numel, max(a.itemsize, const.itemsize), a.grad)

    def add(self, a: ReplayTensor, b: ReplayTensor) -> ReplayTensor:
        return self.new(max(a.numel, b.numel), max(a.itemsize, b.itemsize), a.grad or b.grad)

    def unary_saving_input(self, x: ReplayTensor) -> ReplayTensor:
        """SiLU, GELU (erf or tanh), pow: the derivative needs the input."""
        if x.grad:
            self.save(x)
        return self.new(x.numel, x.itemsize, x.grad)

    def unary_saving_output(self, x: ReplayTensor) -> ReplayTensor:
        """ReLU, tanh, softmax, log_softmax, rsqrt: the derivative needs the output."""
        out = self.new(x.numel, x.itemsize, x.grad)
        if x.grad:
            self.save(out)
        return out

    def dropout(self, x: ReplayTensor, p: float) -> ReplayTensor:
        if p <= 0.0:
            return x
        if x.grad:
            # CUDA's fused kernel keeps a bool mask; the CPU path multiplies by a scaled noise
            # tensor of the input's dtype and keeps that.
            mask = self.new(x.numel, 1 if self.ctx.cuda else x.itemsize, False)
            self.save(mask)
        return self.new(x.numel, x.itemsize, x.grad)

    def rms_norm(
        self, x: ReplayTensor, width: int, trainable: bool, *, gemma: bool = False
    ) -> ReplayTensor:
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

    def layer_norm(self, x: ReplayTensor, trainable: bool) -> ReplayTensor:
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
        self.save(self.new(numel, INT64_BYTES, False))

    def attention(
        self,
        q: ReplayTensor,
        k: ReplayTensor,
        v: ReplayTensor,
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
        sinks: bool = False,
    ) -> ReplayTensor:
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
            sinks: gpt-oss's learned sinks: the softmax runs in the scores' dtype over every
                key and one sink per head (its row maxima subtracted first, their indices kept).
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
        if sinks:
            scores += b * heads * s  # one more column: the sink
            if grad:
                self.save(self.new(b * heads * s, INT64_BYTES, False))  # the maxima's indices
            softmax_fp32 = False
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
