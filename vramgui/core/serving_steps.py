"""vLLM's and SGLang's forward step, and a serving benchmark's run built from it.

A serving engine runs one forward step at a time over every sequence it holds (continuous
batching). One step, on each GPU of a tensor-parallel group, costs

- **a fixed time**: the scheduler, the sampler, the CUDA graph's launch, the output's
  detokenization and streaming, whatever the model's size (a 0.5B model's step took 1.8 to
  5.2 ms in published runs on GPUs that read its weights in well under 1 ms: it follows the
  host's CPU). It is fitted for each host class (``host_class``): servers whose CPU's base
  clock is 2.1 GHz or less, and faster ones;
- **the weights**: read once (the routed experts some token of the step goes to) at a share of
  the peak bandwidth, or the matrix products of every token of the step at the training model's
  share of the 16-bit tensor peak, whichever is longer;
- **the paged KV cache**: every decoded sequence's keys and values read at a share of the
  bandwidth of their own, or the attention products, whichever is longer; a prompt chunk's
  attention over its prompt at the attention share of the peak;
- **each sequence**: a further time (its sampling, its block table, its output);
- **tensor parallelism**: two all-reduces of the step's hidden states per block, each at least
  NCCL's small-message latency.

The two shares and two times (``StepFigures``) are fitted by least squares on a stated
training set of published benchmarks (``benchmarks/serving_published.py --fit``;
docs/performance.md, "vLLM and SGLang serving") and checked on held-out rows of other
sources, GPUs and models.

A serving benchmark (``vllm bench serve``, ``sglang.bench_serving`` and the like) keeps
``concurrency`` requests in flight, a new one sent as each finishes; ``simulate_run`` plays it
step by step as vLLM's V1 scheduler runs it: the running sequences' decodes first, then prompt
chunks up to ``--max-num-batched-tokens`` (chunked prefill), at most ``--max-num-seqs``
sequences; a request's first token comes with its prompt's last chunk. Its mean time per output
token after the first (TPOT) and its output rate are what the benchmark prints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramgui.core.model import ModelSpec
from vramgui.core.offload.placement import model_units
from vramgui.core.speed import MATMUL, MEMORY
from vramgui.core.workload import Workload

# What bounds a step: reading the weights and caches (``MEMORY``), their matrix products
# (``MATMUL``), the parts of a step as the training speed names them, or the engine's own time on
# the host (the fixed time and the sequences' when they outweigh the GPU's work).
HOST = "host"


@dataclass(frozen=True, slots=True)
class StepFigures:
    """The shares and times of an engine's step, fitted on published rows.

    Attributes:
        weight_share: share of the peak bandwidth the weights stream at.
        kv_share: share of the peak bandwidth paged attention reads the KV cache at.
        step_seconds: the fixed time of a step.
        sequence_seconds: the time each sequence of a step adds.
    """

    weight_share: float
    kv_share: float
    step_seconds: float
    sequence_seconds: float


# The host classes the fixed time is fitted for, by the base clock of the host's CPU as the
# published run states it. A 0.5B model's step, which is the host's time, took 4.5 to 5.2 ms in
# AccelMark's runs on its 2.0 and 2.1 GHz Xeon hosts whatever the GPU, and 1.8 to 3.8 ms on most
# of its faster ones (EPYC 7532 and 7742, Xeon 8481C and 6278C); two Xeons at 2.4 and 2.5 GHz
# (Platinum 8368, Gold 6548Y+) took 5.1 ms, as the slow ones do: the clock is the stated fact
# that sorts them best, not the whole cause. The host of a rented or catalog GPU is not known:
# the estimate takes the slow class, so that it promises no speed a slow cloud host misses (and
# the published rows whose host is not stated read closer at it: 89 % of all rows within 20 %,
# against 84 % at the fast class), and says what the fast class gives where the fixed time
# bounds the step (``core.speed``).
SLOW_HOST = "slow"
FAST_HOST = "fast"
DEFAULT_HOST = SLOW_HOST
SLOW_HOST_MAX_GHZ = 2.1
HOST_LABELS = {
    SLOW_HOST: "a host CPU at a base clock of 2.1 GHz or less",
    FAST_HOST: "a host CPU above 2.1 GHz",
}


def host_class(base_ghz: float | None) -> str:
    """The host class of a CPU at ``base_ghz`` (its stated base clock; None: not stated, the
    default class)."""
    if base_ghz is None:
        return DEFAULT_HOST
    return SLOW_HOST if base_ghz <= SLOW_HOST_MAX_GHZ else FAST_HOST


# vLLM's V1 engine (0.8 and later, the only one since 0.11), fitted by least squares
# (``benchmarks/serving_published.py --fit``) on 14 published rows: AccelMark's one-request TPOT
# of Llama 3 8B (ShareGPT prompts), Llama 3.1 8B at 28.6k tokens and Qwen2.5 0.5B on an A100 SXM
# 80GB (vLLM 0.20.1, an EPYC 7742 host: the fast class) and an RTX 5090 (0.19.1, a Xeon Gold
# 6530 at 2.1 GHz: the slow class), and dennislee22's Qwen2 7B on an A100 80GB at 1 to 200
# requests (0.10.1.1, host not stated: the slow class, the default); every other row is held
# out (docs/performance.md, "vLLM and SGLang serving"). The shares and the time per sequence
# are fitted on every training row, the fixed time on each class's own (one fixed time of
# 2.5 ms for every host gave 64 µs a sequence; split by host, the fit gives 48 µs and leaves
# the shares as they were). The KV cache's share
# comes out near the peak: the fit puts the growth of the step with the batch in the time per
# sequence as much as in the cache. SGLang takes the same figures: its published rows
# (AccelMark's 0.5.6 on an A100 40GB, InferenceX's 0.5.7 on eight H200s) are held out against
# them.
VLLM_HOSTS = {
    SLOW_HOST: StepFigures(
        weight_share=0.9, kv_share=0.97, step_seconds=3.75e-3, sequence_seconds=48e-6
    ),
    FAST_HOST: StepFigures(
        weight_share=0.9, kv_share=0.97, step_seconds=1.33e-3, sequence_seconds=48e-6
    ),
}
VLLM = VLLM_HOSTS[DEFAULT_HOST]


@dataclass(frozen=True, slots=True)
class StepRates:
    """What the GPU does per second, as a step reaches it.

    Attributes:
        weight_bytes_per_s: weights streamed (peak bandwidth x the weight share).
        kv_bytes_per_s: paged KV cache read (peak bandwidth x the KV share).
        matmul_flops_per_s: the matrix products (16-bit tensor peak x the training model's share).
        attention_flops_per_s: attention's products (the peak x the attention share).
        link_bytes_per_s: an all-reduce's bandwidth between the GPUs.
        collective_seconds: an all-reduce's least time.
        step_seconds: the fixed time of a step.
        sequence_seconds: the time each sequence of a step adds.
    """

    weight_bytes_per_s: float
    kv_bytes_per_s: float
    matmul_flops_per_s: float
    attention_flops_per_s: float
    link_bytes_per_s: float
    collective_seconds: float
    step_seconds: float
    sequence_seconds: float


@dataclass(frozen=True, slots=True)
class StepWork:
    """What the model asks of one GPU of its tensor-parallel group per step.

    Attributes:
        dense_bytes: weights every step reads (outside the routed experts; an embedding lookup
            reads a row, a tied LM head the whole matrix).
        expert_bytes: the routed experts' bytes (a step reads the experts its tokens route to).
        experts: routed experts per MoE block (0: a dense model).
        experts_per_token: experts each token runs through.
        flops_per_token: matrix-product FLOPs of one token (2 per active weight).
        kv_bytes_per_token: KV cache bytes of one token of context on one GPU (a latent cache,
            or fewer KV heads than GPUs, is replicated rather than split).
        attention_flops_per_pair: attention FLOPs of one query against one cached token.
        layers: blocks (two all-reduces each under tensor parallelism).
        hidden_size: the width of the hidden states reduced.
        tp: the tensor-parallel degree (the figures above are one GPU's share).
    """

    dense_bytes: float
    expert_bytes: float
    experts: int
    experts_per_token: int
    flops_per_token: float
    kv_bytes_per_token: float
    attention_flops_per_pair: float
    layers: int
    hidden_size: int
    tp: int


def step_work(spec: ModelSpec, workload: Workload) -> StepWork:
    """One GPU's share of the work of ``spec`` under ``workload`` (its dtype, quantization, KV
    dtype and tensor-parallel degree); the KV cache per token as at ``workload.seq`` tokens (a
    sliding window keeps fewer).

    Raises:
        WorkloadError: settings the model cannot take.
    """
    one = replace(workload, batch=1)
    dense = experts_bytes = flops = kv = attention = 0.0
    experts = per_token = 0
    for unit in model_units(spec, one):
        params = float(unit.parameters - unit.expert_parameters)
        if unit.index == 0 and not unit.read_bytes:
            params = 0.0  # an embedding lookup
        dense += unit.read_bytes
        kv += unit.kv_cache_bytes
        attention += 4.0 * unit.attention_width
        if unit.experts:
            experts_bytes += unit.expert_bytes
            experts, per_token = unit.experts, unit.experts_per_token
            params += unit.expert_parameters * unit.experts_per_token / unit.experts
        flops += 2.0 * params
    tp = max(1, workload.tp)
    return StepWork(
        dense_bytes=dense / tp,
        expert_bytes=experts_bytes / tp,
        experts=experts,
        experts_per_token=per_token,
        flops_per_token=flops / tp,
        kv_bytes_per_token=kv / max(1, workload.seq),  # one GPU's already (heads replicated)
        attention_flops_per_pair=attention / tp,
        layers=spec.facts.num_layers,
        hidden_size=spec.facts.hidden_size,
        tp=tp,
    )


@dataclass(frozen=True, slots=True)
class StepTime:
    """One step's time and what bounds it (``MEMORY``, ``MATMUL`` or ``HOST``)."""

    seconds: float
    bound: str


def step_time(
    work: StepWork,
    rates: StepRates,
    *,
    sequences: int,
    context_tokens: float,
    prompt_tokens: int = 0,
    prompt_pairs: float = 0.0,
) -> StepTime:
    """One forward step: ``sequences`` decoded (their caches ``context_tokens`` long in all) and
    ``prompt_tokens`` of prompt chunks (``prompt_pairs`` query-key pairs of attention)."""
    tokens = sequences + prompt_tokens
    read = work.dense_bytes
    if work.experts:
        touched = 1.0 - (1.0 - work.experts_per_token / work.experts) ** tokens
        read += work.expert_bytes * touched
    streamed = read / rates.weight_bytes_per_s
    products = tokens * work.flops_per_token / rates.matmul_flops_per_s
    cache = max(
        context_tokens * work.kv_bytes_per_token / rates.kv_bytes_per_s,
        context_tokens * work.attention_flops_per_pair / rates.attention_flops_per_s,
    )
    prompt_attention = prompt_pairs * work.attention_flops_per_pair / rates.attention_flops_per_s
    host = rates.step_seconds + sequences * rates.sequence_seconds
    gpu = max(streamed, products) + cache + prompt_attention
    seconds = host + gpu
    if work.tp > 1:
        volume = 2.0 * (work.tp - 1) / work.tp * tokens * work.hidden_size * 2
        seconds += 2 * work.layers * (rates.collective_seconds + volume / rates.link_bytes_per_s)
    bound = HOST if host > gpu else MEMORY if streamed >= products else MATMUL
    return StepTime(seconds, bound)


@dataclass(frozen=True, slots=True)
class RunResult:
    """A serving benchmark's run as the client measures it.

    Attributes:
        tpot_seconds: mean time per output token after the first, over the requests.
        ttft_seconds: mean time to first token.
        output_tokens_per_s: generated tokens over the run's duration.
        duration_seconds: the run's wall time.
    """

    tpot_seconds: float
    ttft_seconds: float
    output_tokens_per_s: float
    duration_seconds: float


@dataclass(slots=True)
class _Request:
    arrival: float
    prompt_left: int
    generated: int = 0
    first: float | None = None


def simulate_run(
    work: StepWork,
    rates: StepRates,
    *,
    concurrency: int,
    requests: int,
    input_tokens: int,
    output_tokens: int,
    batched_tokens: int,
    max_sequences: int,
) -> RunResult:
    """A closed-loop benchmark of ``requests`` requests, ``concurrency`` in flight (a new one sent
    as each finishes), each ``input_tokens`` long generating ``output_tokens``, on an engine
    scheduling ``batched_tokens`` tokens and ``max_sequences`` sequences a step."""
    now = 0.0
    sent = done = 0
    waiting: list[_Request] = []
    running: list[_Request] = []
    tpots: list[float] = []
    ttfts: list[float] = []
    while done < requests:
        while sent < requests and sent - done < concurrency:
            waiting.append(_Request(now, input_tokens))
            sent += 1
        while waiting and len(running) < max_sequences:
            running.append(waiting.pop(0))
        decoding = [r for r in running if r.prompt_left == 0]
        budget = max(0, batched_tokens - len(decoding))
        chunks: list[tuple[_Request, int]] = []
        pairs = 0.0
        for r in running:
            if budget == 0:
                break
            if r.prompt_left:
                take = min(r.prompt_left, budget)
                start = input_tokens - r.prompt_left
                pairs += take * (start + (take + 1) / 2)
                chunks.append((r, take))
                budget -= take
        context = sum(input_tokens + r.generated for r in decoding)
        now += step_time(
            work,
            rates,
            sequences=len(decoding),
            context_tokens=context,
            prompt_tokens=sum(take for _, take in chunks),
            prompt_pairs=pairs,
        ).seconds
        for r in decoding:
            r.generated += 1
        for r, take in chunks:
            r.prompt_left -= take
            if r.prompt_left == 0:
                r.first, r.generated = now, 1
                ttfts.append(now - r.arrival)
        for r in list(running):
            if r.first is None or r.generated < output_tokens:
                continue
            running.remove(r)
            done += 1
            if output_tokens > 1:
                tpots.append((now - r.first) / (output_tokens - 1))
    return RunResult(
        tpot_seconds=sum(tpots) / len(tpots) if tpots else 0.0,
        ttft_seconds=sum(ttfts) / len(ttfts),
        output_tokens_per_s=requests * output_tokens / now,
        duration_seconds=now,
    )


@dataclass(frozen=True, slots=True)
class FirstTokenFigures:
    """What one request's first token costs beyond its prompt's steps, fitted on published
    single-request times to first token (``benchmarks/serving_published.py --fit``).

    Attributes:
        prefill_scale: how much faster than the decode step's matrix-product share a long
            prompt's products and attention run (large tiles, FlashAttention's prefill kernel).
        request_seconds: the engine's own time per request around its prompt (the request's
            HTTP handling, tokenization, admission, the first token's detokenization and
            streaming), whatever the model.
    """

    prefill_scale: float
    request_seconds: float


# Fitted on the training rows with a time to first token at one request: the scale on the six
# prompts of 28,650 tokens (A100 40GB and 80GB, H100, RTX 5090, RTX 6000 Ada, RTX A6000: the
# median error is least at 1.25), the request's time as the median of what the 23 prompts of 95
# and 280 tokens leave beyond their steps at their host class's fixed time (0 to 40 ms with the
# host, 100 ms on the L4). Every other row is held out (docs/performance.md, "vLLM and SGLang
# serving").
FIRST_TOKEN = FirstTokenFigures(prefill_scale=1.25, request_seconds=20e-3)


def first_token_seconds(
    work: StepWork,
    rates: StepRates,
    *,
    prompt_tokens: int,
    batched_tokens: int,
    figures: FirstTokenFigures = FIRST_TOKEN,
) -> float:
    """One request alone: its prompt in chunks of ``batched_tokens``, each a step (the last one
    brings the first token), the products at ``figures.prefill_scale`` x the step's share, plus
    the engine's own time per request."""
    prefill = replace(
        rates,
        matmul_flops_per_s=rates.matmul_flops_per_s * figures.prefill_scale,
        attention_flops_per_s=rates.attention_flops_per_s * figures.prefill_scale,
    )
    run = simulate_run(
        work,
        prefill,
        concurrency=1,
        requests=1,
        input_tokens=prompt_tokens,
        output_tokens=1,
        batched_tokens=batched_tokens,
        max_sequences=1,
    )
    return run.ttft_seconds + figures.request_seconds
