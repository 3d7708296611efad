"""Activations and compute buffers while serving, per GPU: the peak of vLLM's profiling forward
and llama.cpp's compute buffer (transformers' prefill is core/prefill's). The KV cache and the
weights are inference.py's; vLLM's start-up, which this profile peak feeds, is
core/vllm/'s."""

from __future__ import annotations

from vramgui.core import dtypes, llamacpp_mla
from vramgui.core.model import ArchFacts, ModelSpec, Role
from vramgui.core.workload import LLAMACPP_UBATCH, Workload

# vLLM's sampler warm-up (the end of its profiling run) holds, per sequence and vocabulary entry,
# the model's 16-bit logits, their fp32 copy and what top-k / top-p sampling makes of them.
# PyTorch's path sorts (fp32 values, int64 indices and the sort's own buffers), masks, sums and
# re-scatters: 38.5-39.6 bytes in the logs of six models with vLLM 0.11 on an H100
# (llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md). FlashInfer's kernels
# work on the fp32 logits and probabilities: 11-12 bytes (vLLM 0.10.1.1 on A100s,
# dennislee22/vLLM-benchmarking).
VLLM_SAMPLER_BYTES = {"pytorch": 39, "flashinfer": 12}
# ggml-cuda's op offload: an operation whose weight lives in host memory runs on the GPU, the
# weight copied in, from this many tokens (rows of a matrix product; GGML_OP_OFFLOAD_MIN_BATCH).
LLAMACPP_OP_OFFLOAD_MIN_BATCH = 32
# The first llama.cpp build that writes the KV cache with ggml_set_rows by default (PR #14959,
# "llama : enable LLAMA_SET_ROWS=1 by default", merged in early August 2025: after b5781 of July
# and before b6327 of August 31). Without flash attention the V cache is transposed, and from
# this build on the graph carries an int64 index for every element of V it writes
# (llama-kv-cache.cpp, build_input_v_idxs: n_tokens x n_embd_v_gqa); earlier builds copied V
# into a view of the cache (ggml_cpy) and had no such input.
LLAMACPP_SET_ROWS_BUILD = 6100
# Expert matrices of blocks kept in host memory: (block, (gate, up, down bytes as stored)).
HostExperts = tuple[tuple[int, tuple[int, int, int]], ...]


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


def llamacpp_set_rows(build: int | None) -> bool:
    """Whether llama.cpp of ``build`` (None: the build the estimate follows, a current one)
    writes its KV cache with ggml_set_rows (``LLAMACPP_SET_ROWS_BUILD``)."""
    return build is None or build >= LLAMACPP_SET_ROWS_BUILD


def llamacpp_ubatch(workload: Workload) -> int:
    """The micro-batch llama.cpp sizes its compute buffer for: ``-ub``, at most ``-b``
    (llama_context: ``n_ubatch = min(n_batch, n_ubatch)``; the context bounds both, which
    :func:`llamacpp_compute_buffer` applies)."""
    return min(workload.ubatch_size, workload.batch_size)


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
    blocks: tuple[int, int] | None = None,
    host_experts: HostExperts = (),
    set_rows: bool = True,
) -> int:
    """llama.cpp's compute buffer on one GPU: its part of the graph of one micro-batch of
    ``n_ubatch`` tokens.

    Routed experts kept in host memory (``--cpu-moe``, ``--n-cpu-moe``, ``-ot exps=CPU``) are
    multiplied on the GPU when the micro-batch has 32 tokens or more (ggml-cuda's op offload, on
    unless ``--no-op-offload``): the scheduler copies each expert matrix, as stored (quantized),
    into this buffer just before its product and frees it after, so the buffer holds one copy at
    a time, beside that moment's activations (ggml-backend.cpp, ``ggml_backend_sched``). Where the
    layers are split over GPUs, the first GPU takes them all.

    Multi-head latent attention: the GPU's part of llama.cpp's DeepSeek-V2 graph laid out by
    ggml's allocator (core/llamacpp_mla.py). Other architectures:

    ggml's allocator reuses the memory of dead tensors, so the buffer is the largest of three
    moments of the graph, measured on llama.cpp's own allocator (docs/offload.md, "llama.cpp's
    own accounting"): on the GPU with the output layer, the logits of every token of the
    micro-batch (f32) beside a hidden state (two without flash attention); on a GPU with blocks,
    a feed-forward block (the f16 KQ mask, two hidden states, three with the output layer, and
    three MLP-wide tensors, or for
    routed experts three per used expert, or the expert outputs before they are summed) and,
    without flash attention, the f32 scores of every head against the whole context with two
    masks and the block's projections, and in builds that write the cache with ggml_set_rows the
    int64 index of every element of the transposed V written (``set_rows``). Token embeddings
    are looked up on the CPU.

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
        blocks: the blocks the GPU runs, ``(first, end)``, where ``layers``; None: every block
            (the formula of the other architectures needs only ``layers``).
        host_experts: the blocks whose expert matrices live in host memory and are multiplied
            on this GPU, with their bytes; empty where op offload is off, or on any GPU but the
            first.
        set_rows: the build writes the KV cache with ggml_set_rows (:func:`llamacpp_set_rows`);
            False for the builds before, which copied into a view of the cache.
    """
    ub = min(ubatch, seq * batch)
    ctx = seq * batch
    if ub < LLAMACPP_OP_OFFLOAD_MIN_BATCH:
        host_experts = ()
    first, end = (blocks or (0, facts.num_layers)) if layers else (0, 0)
    # The moment of each copy when the graph around it is not walked: the copy, the block's
    # input and its norm, and the products beside it (gate: its output; up: the gate's and its
    # own; down: the gated product and the experts' outputs).
    h, k, w = facts.hidden_size, facts.experts_per_token, facts.moe_intermediate_size
    copy_moments = [
        max(
            gate + ub * 4 * (k * w + 2 * h),
            up + ub * 4 * (2 * k * w + 2 * h),
            down + ub * 4 * (k * w + k * h + 2 * h),
        )
        for il, (gate, up, down) in host_experts
        if not (facts.is_mla and first <= il < end)
    ]
    if facts.is_mla:
        if not layers and not output and not copy_moments:
            return 0
        walked = llamacpp_mla.compute_buffer(
            facts,
            ub,
            ctx,
            flash_attention=flash_attention,
            blocks=(first, end),
            output=output,
            copies=pipeline_copies,
            host_experts=tuple((il, c) for il, c in host_experts if first <= il < end),
        )
        return max([walked, *copy_moments])
    f32 = 4
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
    moments = copy_moments
    if layers:
        # Where the output layer runs too, one more hidden state outlives the feed-forward block.
        extra = state if output and not pipeline_copies else 0
        moments.append(ub * f32 * max(widths) + extra)
        if not flash_attention:
            scores = ub * ctx * facts.num_heads * f32
            # ggml_set_rows' index of each element of the transposed V written (int64).
            v_index = ub * kv * 8 if set_rows else 0
            moments.append(scores + ub * f32 * (2 * h + 2 * q) + v_index)
    if pipeline_copies:
        peak = max([*moments, logits] if output else moments, default=0)
        return peak + pipeline_copies * masks * mask + (pipeline_copies + 1) * state
    peak = max(moments) + masks * mask if moments else 0
    return max(peak, logits) if output else peak
