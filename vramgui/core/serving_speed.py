"""How fast a served model decodes and answers: the decode speed at a concurrency and the time
to the first token, one figure per setup for every front end.

llama.cpp on one GPU (or split by layers) takes its own kernels' speed (``core.llamacpp_speed``,
set from published llama-bench rows); vLLM and SGLang take their forward step, fitted on
published serving runs (``core.serving_steps``); other engines the datasheet roofline at the
training model's shares (``core.speed.Utilization``), said to be checked against no published
run.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core import llamacpp_speed, serving_steps
from vramgui.core.engines import engine
from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.model import ModelSpec
from vramgui.core.offload.placement import model_units
from vramgui.core.speed import (
    COLLECTIVE_LATENCY_SECONDS,
    MATMUL,
    MEMORY,
    Hardware,
    Utilization,
)
from vramgui.core.vllm.profile import SERVE_BATCHED_TOKENS
from vramgui.core.workload import Workload


@dataclass(frozen=True, slots=True)
class ServingSpeed:
    """Decoding throughput of an inference setup at a concurrency.

    Attributes:
        concurrency: sequences decoded together (the workload's batch).
        tokens_per_second: tokens generated per second over the setup's GPUs.
        step_seconds: one decode step (one token for each sequence).
        bound: "memory" (weights and KV cache reads), "matmul" (their products) or, for vLLM's
            and SGLang's step, "host" (the engine's own time per step outweighs the GPU's).
        basis: "measured" or "extrapolated" where llama.cpp's published llama-bench rows set the
            figure (``core.llamacpp_speed``: one sequence on one GPU) or where vLLM's step fitted
            on published serving runs does (``core.serving_steps``: vLLM and SGLang, measured
            where runs of the engine on that GPU are among them), "roofline" where it is the
            datasheet roofline at the training model's shares, checked against no measurement
            (transformers, llama.cpp's batches, or shares the user set).
        notes: what the figure assumes (the builds measured, why it is extrapolated).
        prefill_seconds: the time to first token: processing the prompt (``workload.prompt``,
            else the whole context) from an empty cache: llama.cpp's on one GPU, vLLM's and
            SGLang's step for one request alone, the roofline's for the others (None for
            llama.cpp split over GPUs, which pipelines a long prompt).
        host_range: where the host's class moves the speed by more than ``HOST_RANGE_SHARE``
            (every step bound by the engine's fixed time, ``bound`` "host", and others where
            that time is a large part): the tokens per second on the default, slow host class
            (``tokens_per_second``) and on the fast one (``serving_steps.VLLM_HOSTS``); else
            None.
    """

    concurrency: int
    tokens_per_second: float
    step_seconds: float
    bound: str
    basis: str = "roofline"
    notes: tuple[str, ...] = ()
    prefill_seconds: float | None = None
    host_range: tuple[float, float] | None = None


# Every other engine's decode (transformers' generate, llama.cpp's batches): no published run
# checks it.
ROOFLINE_SERVING_NOTE = (
    "approximate: the datasheet roofline at default shares, checked against no published run of "
    "this engine (docs/performance.md, 'vLLM and SGLang serving', checks vLLM's and SGLang's)"
)
# The engines timed by a step fitted on published serving runs (``Engine.step_model``): what the
# figure rests on, measured where runs of the engine on the GPU are among the rows
# (``Engine.serving_runs_on``), extrapolated elsewhere.
MEASURED_SERVING_NOTE = (
    "approximate: {model}'s step fitted on published serving runs, {engine} runs on {gpu} among "
    "them (docs/performance.md, 'vLLM and SGLang serving')"
)
EXTRAPOLATED_SERVING_NOTE = (
    "approximate: {model}'s step fitted on published serving runs, none of {engine} on {gpu}: "
    "extrapolated from its datasheet bandwidth and tensor peak (docs/performance.md, 'vLLM and "
    "SGLang serving')"
)
BORROWED_STEP_NOTE = (
    "{engine} takes {model}'s step figures, checked on its own published runs "
    "(docs/performance.md, 'vLLM and SGLang serving')"
)
HOST_RANGE_NOTE = (
    "{share} the engine's fixed time ({fixed:.1f} ms: scheduler, sampler, launch), which follows "
    "the host's CPU: the figure takes {slow_host}, the slower of the published runs' hosts, as a "
    "rented GPU's host may be; on {fast_host} ({fast_fixed:.1f} ms a step) it is {high:,.0f} "
    "tokens/s, so {low:,.0f} to {high:,.0f} tokens/s by the host (docs/performance.md, 'vLLM and "
    "SGLang serving')"
)
# The host's class moves a step's speed by more than this share: the estimate gives the range.
HOST_RANGE_SHARE = 0.10


# What the first token of a vLLM or SGLang setup rests on (``serving_steps.first_token_seconds``)
# and how far published single-request runs put it (docs/performance.md, "vLLM and SGLang
# serving").
FIRST_TOKEN_NOTE = (
    "first token approximate: the prompt's prefill at the step's rates (within 15 % on 8 of the "
    "11 published prompts of 1k to 29k tokens) plus the engine's own time per request, "
    "{request:.0f} ms (0 to 40 ms in published one-GPU runs, with the host; 40 to 190 ms on 8 "
    "GPUs), which sets it for short prompts"
)


def serving_rates(
    hardware: Hardware,
    utilization: Utilization | None = None,
    figures: serving_steps.StepFigures = serving_steps.VLLM,
) -> serving_steps.StepRates:
    """What a vLLM or SGLang step reaches on ``hardware``: the weights and the paged KV cache at
    ``figures``' shares of the bandwidth, the products at the training model's shares of the
    tensor peak for the GPU's architecture, the link at NCCL's share (``serving_steps``)."""
    u = utilization or Utilization.default_for(hardware.architecture)
    bandwidth = hardware.memory_bytes_per_s
    return serving_steps.StepRates(
        weight_bytes_per_s=bandwidth * figures.weight_share,
        kv_bytes_per_s=bandwidth * figures.kv_share,
        matmul_flops_per_s=hardware.flops * u.matmul,
        attention_flops_per_s=hardware.flops * u.attention,
        link_bytes_per_s=hardware.link_bytes_per_s * u.link,
        collective_seconds=COLLECTIVE_LATENCY_SECONDS,
        step_seconds=figures.step_seconds,
        sequence_seconds=figures.sequence_seconds,
    )


def serving_speed(
    spec: ModelSpec,
    workload: Workload,
    hardware: Hardware,
    utilization: Utilization | None = None,
) -> ServingSpeed:
    """Decode speed of ``workload`` (inference, every weight on the GPUs) at full context.

    vLLM and SGLang take vLLM's step (``core.serving_steps``: fitted on published serving runs)
    at ``batch`` sequences of ``seq`` tokens, unless the utilization was set or calibrated by
    the user. Other engines take the roofline: a step reads each GPU's share of the weights (the
    routed experts some token of the batch runs through) and of every sequence's KV cache, and
    computes 2 FLOPs per active weight and the attention over the cache per sequence, at the
    memory and matrix-product shares of the training model; tensor parallelism adds two
    all-reduces of the hidden states per block over the link, each at least NCCL's
    small-message latency.

    One sequence with llama.cpp (on one GPU, or split by layers) takes llama.cpp's own speed at
    the full context instead (``core.llamacpp_speed``, set from published llama-bench rows), and
    on one GPU the time to first token for the prompt, unless the utilization was set or
    calibrated by the user.

    Raises:
        WorkloadError: not an inference workload, or settings the model cannot take.
    """
    w = workload
    if w.mode != "inference":
        raise WorkloadError(
            Message("a serving speed needs {mode}", mode=Setting("mode", "inference"))
        )
    concurrency = w.batch
    own_shares = utilization is None or utilization.source in ("default", "unmeasured")
    if own_shares and engine(w.engine).ggml and concurrency == 1 and w.tp == 1:
        own = llamacpp_speed.decode(spec, w, hardware, depth=w.seq, gpus=w.gpus)
        # Several GPUs pipeline a long prompt's micro-batches: not modelled, no figure.
        prompt = (
            None if w.gpus > 1 else llamacpp_speed.prefill(spec, w, hardware, w.prompt or w.seq)
        )
        return ServingSpeed(
            1,
            own.tokens_per_second,
            own.seconds,
            MEMORY,
            own.basis,
            own.notes,
            None if prompt is None else prompt.seconds,
        )
    if own_shares and engine(w.engine).step_model:
        return _engine_step(spec, w, hardware, utilization)
    u = utilization or Utilization.default_for(hardware.architecture)
    read = cache = flops = 0.0
    # One sequence's prompt from an empty cache: every weight read once (each expert is some
    # token's), the products of every prompt token, causal attention over the prompt.
    prompt_tokens = w.prompt or w.seq
    prompt_read = prompt_products = prompt_attention = 0.0
    for unit in model_units(spec, w):
        params = float(unit.parameters - unit.expert_parameters)
        if unit.index == 0 and not unit.read_bytes:
            params = 0.0  # an embedding lookup
        read += unit.read_bytes
        prompt_read += unit.read_bytes + unit.expert_bytes
        cache += unit.kv_cache_bytes  # one GPU's already (a latent cache is replicated)
        if unit.experts:
            share = 1.0 - (1.0 - unit.experts_per_token / unit.experts) ** concurrency
            read += unit.expert_bytes * share
            params += unit.expert_parameters * unit.experts_per_token / unit.experts
        flops += 2.0 * concurrency * params + 4.0 * concurrency * w.seq * unit.attention_width
        prompt_products += 2.0 * prompt_tokens * params
        prompt_attention += 4.0 * prompt_tokens * (prompt_tokens + 1) / 2 * unit.attention_width
    memory_s = (read / w.tp + cache) / (hardware.memory_bytes_per_s * u.memory)
    compute_s = flops / w.tp / (hardware.flops * u.matmul)
    step = max(memory_s, compute_s)
    first_token = max(
        prompt_read / w.tp / (hardware.memory_bytes_per_s * u.memory),
        prompt_products / w.tp / (hardware.flops * u.matmul),
    ) + prompt_attention / w.tp / (hardware.flops * u.attention)
    if w.tp > 1:
        reduces = 2.0 * spec.facts.num_layers
        volume = 2.0 * (w.tp - 1) / w.tp * concurrency * spec.facts.hidden_size * 2
        link = hardware.link_bytes_per_s * u.link
        step += reduces * (COLLECTIVE_LATENCY_SECONDS + volume / link)
    return ServingSpeed(
        concurrency=concurrency,
        tokens_per_second=concurrency / step,
        step_seconds=step,
        bound=MEMORY if memory_s >= compute_s else MATMUL,
        notes=(ROOFLINE_SERVING_NOTE,) if own_shares else (),
        prefill_seconds=first_token,
    )


def _engine_step(
    spec: ModelSpec, w: Workload, hardware: Hardware, utilization: Utilization | None
) -> ServingSpeed:
    """The engine's decode step (``core.serving_steps``, the figures fitted on the published runs
    of ``Engine.step_model``) at ``w.batch`` sequences of ``w.seq`` tokens, with what it rests
    on."""
    work = serving_steps.step_work(spec, w)

    def step_on(host: str) -> tuple[serving_steps.StepTime, serving_steps.StepRates]:
        rates = serving_rates(hardware, utilization, serving_steps.VLLM_HOSTS[host])
        step = serving_steps.step_time(
            work, rates, sequences=w.batch, context_tokens=float(w.batch * w.seq)
        )
        return step, rates

    step, rates = step_on(serving_steps.DEFAULT_HOST)
    # The GPU's memory is not known here: a prompt is chunked at the smaller GPUs' default, a
    # few steps' fixed time more than the larger ones' on a long prompt.
    first = serving_steps.first_token_seconds(
        work,
        rates,
        prompt_tokens=w.prompt or w.seq,
        batched_tokens=w.max_num_batched_tokens or SERVE_BATCHED_TOKENS[0],
    )
    e = engine(w.engine)
    measured = hardware.name in e.serving_runs_on
    template = MEASURED_SERVING_NOTE if measured else EXTRAPOLATED_SERVING_NOTE
    notes = [template.format(model=e.step_model, engine=e.name, gpu=hardware.name)]
    if e.step_model != e.name:
        notes.append(BORROWED_STEP_NOTE.format(engine=e.name, model=e.step_model))
    fast, fast_rates = step_on(serving_steps.FAST_HOST)
    host_range = None
    if step.seconds > fast.seconds * (1 + HOST_RANGE_SHARE):
        host_range = (w.batch / step.seconds, w.batch / fast.seconds)
        bound_by_host = step.bound == serving_steps.HOST
        share = f"{rates.step_seconds / step.seconds:.0%} of this step is"
        notes.append(
            HOST_RANGE_NOTE.format(
                share="most of this step is" if bound_by_host else share,
                fixed=rates.step_seconds * 1e3,
                slow_host=serving_steps.HOST_LABELS[serving_steps.DEFAULT_HOST],
                fast_host=serving_steps.HOST_LABELS[serving_steps.FAST_HOST],
                fast_fixed=fast_rates.step_seconds * 1e3,
                low=host_range[0],
                high=host_range[1],
            )
        )
    notes.append(FIRST_TOKEN_NOTE.format(request=serving_steps.FIRST_TOKEN.request_seconds * 1e3))
    return ServingSpeed(
        concurrency=w.batch,
        tokens_per_second=w.batch / step.seconds,
        step_seconds=step.seconds,
        bound=step.bound,
        basis=llamacpp_speed.MEASURED if measured else llamacpp_speed.EXTRAPOLATED,
        notes=tuple(notes),
        prefill_seconds=first,
        host_range=host_range,
    )
