"""Activations and compute buffers while serving, per GPU: the transient peak of transformers'
prefill followed op by op inside the last decoder block (attention kernels, MLP widths, the
mask, the last position's logits), the peak of vLLM's profiling forward, and llama.cpp's
compute buffer. The KV cache and the weights are inference.py's; vLLM's start-up, which this
profile peak feeds, is vllm_startup.py's."""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.model import ArchFacts, LayerType, ModelSpec, Role
from vramgui.core.workload import Workload

# vLLM's sampler warm-up (the end of its profiling run) holds, per sequence and vocabulary entry,
# the model's 16-bit logits, their fp32 copy and what top-k / top-p sampling makes of them.
# PyTorch's path sorts (fp32 values, int64 indices and the sort's own buffers), masks, sums and
# re-scatters: 38.5-39.6 bytes in the logs of six models with vLLM 0.11 on an H100
# (llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md). FlashInfer's kernels
# work on the fp32 logits and probabilities: 11-12 bytes (vLLM 0.10.1.1 on A100s,
# dennislee22/vLLM-benchmarking).
VLLM_SAMPLER_BYTES = {"pytorch": 39, "flashinfer": 12}
# llama.cpp's physical micro-batch (n_ubatch) default: its compute buffer is sized for it.
LLAMACPP_UBATCH = 512


# --- transformers prefill ------------------------------------------------------------------------


# Families whose block keeps the attention output alive beside the residual (GPT-2's
# `attn_output` local lives until the block returns), and which add learned position embeddings.
_ATTN_OUTPUT_KEPT = frozenset({"gpt2", "gpt_bigcode"})
LEARNED_POSITIONS = frozenset({"gpt2", "gpt_bigcode", "opt", "bert"})
_NO_ROTARY = frozenset({"gpt2", "gpt_bigcode", "opt", "bert", "bloom"})
# Activations that transformers writes as several elementwise ops (each a new tensor) rather than
# one kernel: GPT-2's tanh approximation keeps the input and three temporaries alive at once.
_MULTI_OP_ACTIVATIONS = frozenset({"gelu_new", "gelu_fast", "quick_gelu_new"})
# Families whose attention builds its mask even when no token is padded (falcon: for alibi).
_ALWAYS_MASKED = frozenset({"falcon"})
# Families that only have eager attention in transformers.
EAGER_ONLY = frozenset({"bloom"})
_FUSED_QKV = frozenset({"qkv_proj", "query_key_value", "c_attn", "Wqkv"})


def _eager_score_bytes(spec: ModelSpec, e: int) -> int:
    """Bytes per attention-score element alive at the eager softmax."""
    model_type = spec.facts.model_type
    if model_type in ("gpt2", "bert"):
        return 2 * e  # softmax in the compute dtype: the scores and their softmax
    if model_type == "bloom":
        # alibi baddbmm output, its masked copy, the fp32 upcast and fp32 softmax, and the
        # previous block's probabilities, which the model loop still holds in its outputs
        return 3 * e + 8 if e < 4 else 16
    # the masked scores, then the fp32 upcast and the fp32 softmax output
    return e + 8 if e < 4 else 8


def attention_used(spec: ModelSpec, w: Workload) -> str:
    """The attention implementation transformers really runs for this model."""
    if spec.facts.model_type in EAGER_ONLY or not spec.facts.sdpa:
        return "eager"
    return w.attention


@dataclass(frozen=True, slots=True)
class Prefill:
    """The transformers prefill of one model and setup: the widths and the kernels its peak is
    made of, whatever the batch and context."""

    e: int  # bytes per element of the compute dtype
    hidden: int
    vocab: int
    decoder: bool
    position_width: int  # bytes per token of learned position embeddings or rotary cos / sin
    eager: bool  # the attention transformers really runs is eager
    always_masked: bool
    mask_window: int | None  # SDPA needs a mask once the context passes this sliding window
    attn_output_kept: bool
    heads: int  # query heads on one GPU
    q_dim: int
    kv_dim: int
    fused_qkv: bool
    score_bytes: int  # bytes per attention-score element alive at the eager softmax
    probs_kept: bool  # the block keeps the eager attention probabilities through its MLP
    mlp: _MlpShape

    @classmethod
    def of(cls, spec: ModelSpec, w: Workload, kv_heads: int) -> Prefill:
        """The prefill of ``spec`` under ``w``, with ``kv_heads`` K/V heads on one GPU."""
        facts = spec.facts
        tp = w.tp
        e = dtypes.DTYPE_BYTES[w.dtype]
        eager = attention_used(spec, w) == "eager"
        heads = max(1, facts.num_heads // tp)
        q_dim = heads * facts.head_dim
        kv_dim = kv_heads * facts.head_dim
        if facts.is_mla:
            qk = (facts.qk_nope_head_dim or 0) + (facts.qk_rope_head_dim or 0)
            q_dim = kv_dim = heads * qk
        if facts.model_type in LEARNED_POSITIONS:
            position_width = facts.hidden_size * e  # (1, seq, hidden) position embeddings
        elif facts.model_type in _NO_ROTARY:
            position_width = 0
        else:
            position_width = 2 * facts.head_dim * e  # rotary cos and sin, (1, seq, head_dim)
        window = facts.sliding_window
        sliding = window is not None and LayerType.SLIDING in spec.facts.layer_types
        return cls(
            e=e,
            hidden=facts.hidden_size,
            vocab=facts.vocab_size,
            decoder=facts.is_decoder,
            position_width=position_width,
            eager=eager,
            always_masked=facts.model_type in _ALWAYS_MASKED,
            mask_window=window if sliding else None,
            attn_output_kept=facts.model_type in _ATTN_OUTPUT_KEPT,
            heads=heads,
            q_dim=q_dim,
            kv_dim=kv_dim,
            fused_qkv=eager and _has_module(spec, Role.ATTENTION, _FUSED_QKV),
            score_bytes=_eager_score_bytes(spec, e),
            probs_kept=eager and facts.model_type not in EAGER_ONLY,
            mlp=_MlpShape.of(spec, e, tp),
        )

    def peak(self, batch: int, seq: int) -> int:
        """Live activation bytes at the prefill's peak, KV cache excluded."""
        e = self.e
        tokens = batch * seq
        stream = tokens * self.hidden * e  # one (batch, seq, hidden) tensor
        # Alive through a decoder's whole forward: the embedding output (the model keeps its
        # `inputs_embeds` reference), learned position embeddings or the rotary cos / sin, and
        # the attention mask. Inside a block, the block's input is also alive: the model's loop
        # holds it until the block returns.
        block = self._block_peak(batch, seq, tokens)
        if not self.decoder:
            # Encoders: the embedding module sums its lookups into the first block's input; at
            # the end the masked-LM head (dense, activation, norm) writes logits for every
            # position.
            head = 2 * stream + tokens * self.vocab * e
            return max(self._mask_bytes(batch, seq) + stream + block, head)
        persistent = stream + seq * self.position_width + self._mask_bytes(batch, seq)
        # After the last block: the final norm's fp32 copies, then the LM head on the last
        # position only, upcast to fp32.
        head = tokens * self.hidden * 8 + batch * self.vocab * (e + 4)
        return persistent + stream + max(block, head)

    def _sdpa_needs_mask(self, seq: int) -> bool:
        """SDPA runs maskless (is_causal) unless a sliding window is shorter than the prompt."""
        if self.eager:
            return False
        if self.always_masked:
            return True
        return self.mask_window is not None and self.mask_window < seq

    def _mask_bytes(self, batch: int, seq: int) -> int:
        e = self.e
        area = batch * seq * seq
        if self.eager:
            return area * e  # the 4-D additive mask (batch, 1, q, kv) in the compute dtype
        if self.always_masked:
            return area * (e + 1)  # the boolean mask and its additive copy
        if self._sdpa_needs_mask(seq):
            return area  # a boolean (batch, 1, q, kv) mask
        return 0

    def _block_peak(self, batch: int, seq: int, tokens: int) -> int:
        """Largest transient set inside one block, beyond its input and the KV cache."""
        e = self.e
        stream = tokens * self.hidden * e
        kept = stream if self.attn_output_kept else 0
        # RMSNorm / LayerNorm upcast: an fp32 copy and its squared (or scaled) fp32 copy; the
        # second norm of a block runs while the attention residual is alive too.
        norm = stream + tokens * self.hidden * 8
        attn = kept + self._attention_peak(batch, seq, tokens)
        # MLP: the attention residual and the normed input stay alive through it, and with eager
        # attention so do the attention probabilities (the block keeps them in a local).
        probs = 0
        if self.probs_kept:
            probs = batch * self.heads * seq * seq * e
        mlp = 2 * stream + kept + probs + self.mlp.peak(tokens)
        return max(norm, attn, mlp)

    def _attention_peak(self, batch: int, seq: int, tokens: int) -> int:
        e, q_dim, kv_dim = self.e, self.q_dim, self.kv_dim
        stream = tokens * self.hidden * e
        scores = batch * self.heads * seq * seq
        if self.always_masked and not self.eager and kv_dim != q_dim:
            # SDPA with a mask and fewer K/V heads than query heads (not repeated) falls back
            # to the math kernel: q upcast and scaled in fp32, fp32 scores and their masked copy.
            return (
                stream + tokens * (2 * q_dim + 2 * kv_dim) * e + 2 * tokens * q_dim * 4 + scores * 8
            )
        # The normed input, q, k, v and three q-sized rotary temporaries; with a mask, SDPA
        # cannot use its grouped-query path and K / V are repeated to every query head.
        attn = stream + tokens * (q_dim + 2 * kv_dim) * e + 3 * tokens * q_dim * e
        if self._sdpa_needs_mask(seq) and kv_dim != q_dim:
            attn += 2 * tokens * q_dim * e
        if self.eager:
            # K and V repeated to every query head for grouped-query attention (the cache keeps
            # the originals); scores in the compute dtype plus the fp32 upcast and softmax
            # output.
            repeated = 2 * tokens * q_dim * e if kv_dim != q_dim else 0
            # A fused qkv projection's output stays alive while views of it are in use.
            qkv = tokens * (q_dim + 2 * kv_dim) * e if self.fused_qkv else 0
            softmax = scores * self.score_bytes
            attn = max(attn, stream + tokens * q_dim * e + repeated + qkv + softmax)
        return attn


@dataclass(frozen=True, slots=True)
class _MlpShape:
    """A block's MLP on one GPU: its widths, whatever the number of tokens."""

    e: int
    intermediate: int
    tp: int
    units: int  # intermediate-sized tensors alive at once in the dense MLP
    moe: bool
    dense_layers: bool  # some layers keep a dense MLP beside the MoE ones
    experts_per_token: int
    hidden: int
    routed_per_slot: int  # bytes per (token, expert) pair at the routed experts' peak
    shared: int  # the shared experts' intermediate width on one GPU

    @classmethod
    def of(cls, spec: ModelSpec, e: int, tp: int) -> _MlpShape:
        facts = spec.facts
        h = facts.hidden_size
        routed_per_slot = shared = 0
        if facts.is_moe:
            inter = facts.moe_intermediate_size // tp
            # Routed experts run as one grouped matmul over the gathered tokens: the gathered
            # input stays alive through gate_up (2I), the activation (I) and the product (I);
            # then the down projection, its routing-weighted copy and the scatter buffer (in
            # fp32 when the router weights are fp32).
            weighted = 4 if _router_fp32(spec) else e
            routed_per_slot = max(
                (h + 4 * inter) * e, (2 * h + inter) * e, 2 * h * e + 2 * h * weighted
            )
            shared = _shared_expert_width(spec) // tp
        return cls(
            e=e,
            intermediate=facts.intermediate_size,
            tp=tp,
            units=_mlp_units(spec),
            moe=facts.is_moe,
            dense_layers=not all(facts.moe_layers),
            experts_per_token=facts.experts_per_token,
            hidden=h,
            routed_per_slot=routed_per_slot,
            shared=shared,
        )

    def peak(self, tokens: int) -> int:
        """Transient MLP bytes beyond the block's residual and normed input."""
        e = self.e
        dense = tokens * self.intermediate // self.tp * e * self.units
        if not self.moe:
            return dense
        slots = tokens * self.experts_per_token  # (token, expert) pairs, gathered into one batch
        routed = slots * self.routed_per_slot
        shared = self.shared
        # The shared expert runs first and its output waits beside the routed computation.
        moe = max(tokens * shared * e * 3, (tokens * self.hidden * e if shared else 0) + routed)
        return max(moe, dense) if self.dense_layers else moe


def buffer_bytes(spec: ModelSpec) -> int:
    """Non-parameter buffers transformers registers on the GPU beside the weights."""
    facts = spec.facts
    if facts.model_type == "gpt_bigcode":
        # The causal mask buffer: a (max_positions, max_positions) boolean matrix.
        return facts.max_position_embeddings**2
    return 0


def _mlp_units(spec: ModelSpec) -> int:
    """Intermediate-sized tensors alive at once in a dense MLP."""
    facts = spec.facts
    if facts.gated_mlp:
        # gate and up: 3 (activation, up, product); fused gate_up keeps its 2-wide output: 4.
        fused = _has_module(spec, Role.MLP, frozenset({"gate_up_proj"}))
        return 4 if fused else 3
    return 4 if facts.hidden_act in _MULTI_OP_ACTIVATIONS else 2


def _has_module(spec: ModelSpec, role: Role, modules: frozenset[str]) -> bool:
    return spec.cached(
        ("has_module", role, modules),
        lambda: any(t.role is role and t.module in modules for t in spec.tensors),
    )


def _router_fp32(spec: ModelSpec) -> bool:
    return spec.cached(
        "router_fp32",
        lambda: any(t.role is Role.ROUTER and t.dtype == "F32" for t in spec.tensors),
    )


def _shared_expert_width(spec: ModelSpec) -> int:
    """Intermediate width of the always-on shared expert(s) of one MoE layer."""
    facts = spec.facts
    layer = next((i for i, moe in enumerate(facts.moe_layers) if moe), None)
    if layer is None:
        return 0

    def compute() -> int:
        shared = sum(
            t.numel
            for t in spec.layer_tensors(layer)
            if t.role is Role.SHARED_EXPERT
            and not t.is_bias
            and len(t.shape) == 2
            and min(t.shape) > 1
        )
        return shared // ((3 if facts.gated_mlp else 2) * facts.hidden_size)

    return spec.cached("shared_expert_width", compute)


# --- vLLM and llama.cpp -------------------------------------------------------------------------


def vllm_profile_peak(
    spec: ModelSpec, w: Workload, tokens: int, seqs: int, sampler: str = "flashinfer"
) -> int:
    """Activation peak of vLLM's profiling run on one tensor-parallel rank.

    vLLM (V1 engine) profiles one forward of ``tokens`` tokens (max_num_batched_tokens, split
    over ``seqs`` dummy requests), then warms its sampler on the last position of each request,
    while the forward's hidden states are still alive. The forward's peak inside a block is the
    residual and normed stream beside the widest transient: the fused qkv output and the
    attention output, the merged gate/up projection and its activation, or the fused MoE
    kernel's caches for every (token, expert) pair (its gate/up and down outputs share one
    buffer).
    """
    facts = spec.facts
    e = dtypes.DTYPE_BYTES[w.dtype]
    tp = w.tp
    h = facts.hidden_size
    heads = max(1, facts.num_heads // tp)
    if facts.is_mla:
        qk = (facts.qk_nope_head_dim or 0) + (facts.qk_rope_head_dim or 0)
        v = facts.v_head_dim or facts.head_dim
        attention = heads * (2 * qk + 2 * v)  # q, k (latent expanded), v and the output
    else:
        kv = max(1, facts.num_kv_heads // tp)
        attention = (2 * heads + 2 * kv) * facts.head_dim
    mlp = 3 * facts.intermediate_size // tp if not all(facts.moe_layers) or not facts.is_moe else 0
    if facts.is_moe:
        inter = facts.moe_intermediate_size // tp
        routed = facts.experts_per_token * (max(2 * inter, h) + inter)
        mlp = max(mlp, routed + 3 * _shared_expert_width(spec) // tp)
    forward = tokens * (2 * h + max(attention, mlp)) * e
    warm_up = seqs * facts.vocab_size * VLLM_SAMPLER_BYTES[sampler] + tokens * h * e
    return max(forward, warm_up)


def llamacpp_flash_attention(workload: Workload) -> bool:
    """Whether llama.cpp runs flash attention for the workload: ``--attention eager`` is
    ``-fa off``; flash and the default are ``-fa on`` / ``-fa auto``, which turns it on on every
    backend that has the kernel (CUDA, Metal, Vulkan, the CPU)."""
    return workload.attention != "eager"


def llamacpp_compute_buffer(
    facts: ArchFacts,
    batch: int,
    seq: int,
    *,
    flash_attention: bool = True,
    ubatch: int = LLAMACPP_UBATCH,
    output: bool = True,
    layers: bool = True,
    pipeline_copies: int = 0,
) -> int:
    """llama.cpp's compute buffer on one GPU: its part of the graph of one micro-batch of
    ``n_ubatch`` tokens.

    ggml's allocator reuses the memory of dead tensors, so the buffer is the largest of three
    moments of the graph, measured on llama.cpp's own allocator (docs/offload.md, "llama.cpp's
    own accounting"): on the GPU with the output layer, the logits of every token of the
    micro-batch (f32) beside a hidden state (two without flash attention); on a GPU with blocks,
    a feed-forward block (the f16 KQ mask, two hidden states, three with the output layer, and
    three MLP-wide tensors, or for
    routed experts three per used expert, or the expert outputs before they are summed) and,
    without flash attention, the f32 scores of every head against the whole context with two
    masks and the block's projections. Token embeddings are looked up on the CPU.

    Args:
        facts: the architecture.
        batch: parallel sequences (llama.cpp's slots share one context of batch x seq cells).
        seq: context per sequence.
        flash_attention: ``-fa on`` (and the default ``auto``) or ``-fa off``.
        ubatch: ``-ub``.
        output: the GPU holds the output layer.
        layers: the GPU runs blocks.
        pipeline_copies: with several GPUs holding every layer, llama.cpp's scheduler keeps this
            many copies of each GPU's inputs (the masks, the hidden state it receives) to
            pipeline micro-batches (``GGML_SCHED_MAX_COPIES``, 4); 0 when it does not.
    """
    ub = min(ubatch, seq * batch)
    ctx = seq * batch
    f32 = 4
    h = facts.hidden_size
    if facts.is_mla:
        # The absorbed query attends the cached latent and its rotary key, per head.
        kv = (facts.kv_lora_rank or 0) + (facts.qk_rope_head_dim or 0)
        q = facts.num_heads * kv
    else:
        q = facts.num_heads * facts.head_dim
        kv = facts.num_kv_heads * facts.head_dim
    state = ub * h * f32
    mask = ub * ctx * 2
    masks = 1 if flash_attention else 2
    widths = []
    if not facts.is_moe or not all(facts.moe_layers):
        widths.append(2 * h + 3 * facts.intermediate_size)
    if facts.is_moe:
        k = facts.experts_per_token
        widths += [2 * h + 3 * k * facts.moe_intermediate_size, 2 * h * k + 2 * facts.num_experts]
    # The moments without the masks, which stay alive through every block (and which the
    # pipeline copies).
    logits = ub * facts.vocab_size * f32 + (1 if flash_attention else 2) * state
    blocks = []
    if layers:
        # Where the output layer runs too, one more hidden state outlives the feed-forward block.
        extra = state if output and not pipeline_copies else 0
        blocks.append(ub * f32 * max(widths) + extra)
        if not flash_attention:
            scores = ub * ctx * facts.num_heads * f32
            blocks.append(scores + ub * f32 * (2 * h + 2 * q + 2 * kv))
    if pipeline_copies:
        peak = max([*blocks, logits] if output else blocks, default=0)
        return peak + pipeline_copies * masks * mask + (pipeline_copies + 1) * state
    peak = max(blocks) + masks * mask if blocks else 0
    return max(peak, logits) if output else peak
