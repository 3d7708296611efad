"""Fit an estimate against GPUs, and the solvers built on it.

GPUs reach the core as plain ``(name, capacity_bytes)`` pairs; the hardware layer makes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vramgui.core import dtypes, storage
from vramgui.core.boundary import largest_fitting_value
from vramgui.core.engines import StartUp, engine
from vramgui.core.errors import Setting, VramguiError, phrase
from vramgui.core.estimate import Estimate, Estimator, estimate
from vramgui.core.kv_cache_types import KV_CACHE_TYPES
from vramgui.core.model import ModelSpec
from vramgui.core.rope import context_limit
from vramgui.core.serving_speed import serving_speed
from vramgui.core.sglang_startup import SglangStartup
from vramgui.core.speed import (
    Hardware,
    Price,
    Utilization,
    cost_per_million_tokens,
    training_speed,
)
from vramgui.core.vllm.startup import Startup
from vramgui.core.workload import MAX_BATCH, Workload

Capacity = tuple[str, int]
# Context lengths are searched in blocks of this many tokens (vLLM's and llama.cpp's granularity).
TOKEN_BLOCK = 16
# GPUs one server holds (eight-way boards and the largest workstation chassis); the cheapest ranking
# stays within one machine.
MAX_GPUS_PER_MACHINE = 8
# The settings an Estimator varies: sweeps and solvers over them reuse everything else.
SIZE_FIELDS = ("seq", "batch")


@dataclass(frozen=True, slots=True)
class FitRow:
    """One GPU against one estimate.

    Attributes:
        gpu: the GPU's name.
        capacity_bytes: its memory.
        fits: the setup fits (under vLLM: vLLM starts on it; under SGLang: SGLang starts and
            its pool holds a request of ``--context-length`` tokens).
        headroom_bytes: memory left (negative: missing). Under vLLM, what is left beside what
            vLLM takes, or, when it does not start, minus what its KV pool lacks; under SGLang,
            what its reserve for activations keeps past a chunked prefill's, or minus what the GPU
            lacks for SGLang to hold one request of the context.
        vllm: vLLM's start-up on this GPU (the vLLM engine only).
        sglang: SGLang's start-up on this GPU (the SGLang engine only).
    """

    gpu: str
    capacity_bytes: int
    fits: bool
    headroom_bytes: int
    vllm: Startup | None = None
    sglang: SglangStartup | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpu": self.gpu,
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "headroom_bytes": self.headroom_bytes,
        }
        if self.vllm is not None:
            up = self.vllm
            out["vllm"] = {
                "starts": up.starts,
                "error": up.message,
                "kv_pool_bytes": max(up.available_bytes, 0),
                "kv_pool_tokens": up.pool_tokens,
                "max_concurrency": round(up.max_concurrency, 2),
                "largest_max_model_len": up.largest_model_len,
            }
            if up.unmodelled:
                # Towers whose share of vLLM's profile is left out: the pool, the concurrency and
                # the longest length are upper bounds, a start is uncertain.
                out["vllm"]["unmodelled"] = list(up.unmodelled)
        if self.sglang is not None:
            sg = self.sglang
            out["sglang"] = {
                "starts": sg.starts,
                "serves": sg.serves,
                "error": sg.message,
                "mem_fraction_static": round(sg.mem_fraction_static, 4),
                "kv_pool_bytes": max(sg.available_bytes, 0),
                "kv_pool_tokens": sg.pool_tokens,
                "max_concurrency": round(sg.max_concurrency, 2),
                "largest_context_length": sg.largest_context,
            }
        return out


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A change that makes a setup fit (or fit better), with what it saves and costs.

    Attributes:
        title: what to do, e.g. "Quantize to Q4_K_M".
        changes: workload fields to set, e.g. {"quant": "Q4_K_M"}.
        saves_bytes: memory saved per GPU. Under an engine that pre-allocates its KV pool
            (vLLM, SGLang), which takes the same share of the GPU whatever is set, the room the
            change makes in the pool instead: what it adds to the pool or takes off what one
            request of the context needs of it (the shortfall it closes).
        cost: what the user gives up.
        fits: whether the setup fits the GPU after the change.
        total_bytes: the estimate after the change (an offload: the GPU's memory then).
        placement: llama.cpp's ``(-ngl, --n-cpu-moe)`` for advice that offloads (weights in
            host RAM, nothing in the workload changed), else None.
        pool_bytes: the KV pool after the change on the GPU with the least (an engine that
            pre-allocates it), else None.
        pool_tokens: the tokens that pool holds, else None.
    """

    title: str
    changes: dict[str, Any]
    saves_bytes: int
    cost: str
    fits: bool
    total_bytes: int
    placement: tuple[int, int] | None = None
    pool_bytes: int | None = None
    pool_tokens: int | None = None


def fit_rows(est: Estimate, capacities: Iterable[Capacity]) -> list[FitRow]:
    """Fit and headroom of ``est`` on each GPU (headroom is negative when it does not fit).

    Under vLLM the fit is vLLM's own start-up on each GPU: its pool, whether it starts; under
    SGLang, SGLang's, and whether its pool holds a request of ``--context-length`` tokens.
    """
    rows = []
    for name, capacity in capacities:
        if est.sglang is not None:
            try:
                sg = est.sglang.startup(capacity, name)
            except VramguiError:
                rows.append(FitRow(name, capacity, False, capacity - est.total_bytes))
                continue
            if sg.serves:
                headroom = capacity - sg.used_bytes - sg.activation_bytes
            else:
                headroom = min(capacity - est.sglang.needed_gpu_bytes(), -1)
            rows.append(FitRow(name, capacity, sg.serves and headroom >= 0, headroom, sglang=sg))
            continue
        if est.vllm is not None:
            try:
                up = est.vllm.startup(capacity, name)
            except VramguiError:
                rows.append(FitRow(name, capacity, False, capacity - est.total_bytes))
                continue
            rows.append(FitRow(name, capacity, *_vllm_fit(up, capacity), up))
            continue
        headroom = capacity - est.total_bytes
        rows.append(FitRow(name, capacity, headroom >= 0, headroom))
    return rows


def _vllm_fit(up: Startup, capacity: int) -> tuple[bool, int]:
    """Whether vLLM starts and stays within the GPU, and the headroom (negative: missing)."""
    if not up.starts:
        return False, -max(up.shortfall_bytes, 1)
    headroom = capacity - up.used_bytes
    return headroom >= 0, headroom


def _margin(
    spec: ModelSpec, workload: Workload, capacity: int, draft: ModelSpec | None = None
) -> tuple[int, int] | None:
    """(memory left on a GPU of ``capacity`` once the setup runs there, the estimate's total);
    the margin is negative when it does not fit. None: settings invalid for the model."""
    fitted = _fitted(spec, workload, capacity, draft)
    return None if fitted is None else (fitted[0].headroom_bytes, fitted[1])


def _fitted(
    spec: ModelSpec, workload: Workload, capacity: int, draft: ModelSpec | None = None
) -> tuple[FitRow, int] | None:
    """(the setup's fit on a GPU of ``capacity``, the estimate's total); None: settings invalid
    for the model."""
    try:
        est = estimate(spec, workload, capacity, draft=draft)
    except VramguiError:
        return None
    return fit_rows(est, [("", capacity)])[0], est.total_bytes


def _pool_room(row: FitRow) -> tuple[int, int, int] | None:
    """(the KV pool's room beyond one request of the context, negative when it lacks some; the
    pool; its tokens) where the engine pre-allocates the pool and its start-up was modelled,
    else None. The room is what the engine's own check compares (vLLM's, or whether SGLang's
    pool holds a request whole)."""
    if row.vllm is not None:
        up = row.vllm
        return -up.shortfall_bytes, up.available_bytes, up.pool_tokens
    if row.sglang is not None:
        sg = row.sglang
        return sg.available_bytes - sg.needed_bytes, sg.available_bytes, sg.pool_tokens
    return None


def largest_fitting(
    spec: ModelSpec,
    workload: Workload,
    capacity_bytes: int,
    field: str = "seq",
    *,
    gpu_name: str = "",
    draft: ModelSpec | None = None,
) -> int | None:
    """The largest ``seq`` (in token blocks) or ``batch`` that fits ``capacity_bytes``.

    Memory grows monotonically with both, so the boundary is one value, found with a few
    estimates (see :func:`vramgui.core.boundary.largest_fitting_value`). Returns None when even the smallest value does not fit.
    Under vLLM, the context is the longest ``--max-model-len`` vLLM starts with (its own
    estimate_max_model_len) and the batch the requests of ``seq`` tokens its pool holds at once.
    """
    if field not in SIZE_FIELDS:
        raise ValueError(f"field must be seq or batch, got {field!r}")
    startup = engine(workload.engine).startup if workload.mode == "inference" else None
    if startup is StartUp.VLLM:
        return _vllm_largest(spec, workload, capacity_bytes, field, gpu_name=gpu_name, draft=draft)
    if startup is StartUp.SGLANG:
        return _sglang_largest(spec, workload, capacity_bytes, field)
    step = TOKEN_BLOCK if field == "seq" else 1
    upper = max(context_limit(spec.facts, workload), workload.seq) if field == "seq" else MAX_BATCH
    sized = Estimator(spec, workload, capacity_bytes)

    def total(value: int) -> int | None:
        try:
            return sized.at(field, value).total_bytes
        except VramguiError:
            return None

    return largest_fitting_value(total, capacity_bytes, step, upper)


def _vllm_largest(
    spec: ModelSpec,
    workload: Workload,
    capacity: int,
    field: str,
    *,
    gpu_name: str,
    draft: ModelSpec | None,
) -> int | None:
    try:
        est = estimate(spec, workload, capacity, gpu_name, draft)
    except VramguiError:
        return None
    if est.vllm is None:
        return None
    up = est.vllm.startup(capacity, gpu_name)
    if field == "seq":
        if not up.largest_model_len or up.used_bytes > capacity:
            return None
        return min(up.largest_model_len, max(context_limit(spec.facts, workload), workload.seq))
    if not up.starts or up.used_bytes > capacity:
        return None
    return max(1, math.floor(up.max_concurrency)) if up.max_concurrency >= 1 else None


def _sglang_largest(spec: ModelSpec, workload: Workload, capacity: int, field: str) -> int | None:
    """SGLang's longest ``--context-length`` whose requests its pool holds whole (in token
    blocks, or the whole context the search looks at), or the requests of ``seq`` tokens it
    holds at once; None where it does not start or its chunked prefill overflows the reserve."""
    try:
        est = estimate(spec, workload, capacity)
    except VramguiError:
        return None
    if est.sglang is None:
        return None
    up = est.sglang.startup(capacity)
    if not up.starts or up.used_bytes + up.activation_bytes > capacity:
        return None
    if field == "seq":
        upper = max(context_limit(spec.facts, workload), workload.seq)
        if up.pool_tokens >= upper:
            return upper
        return up.pool_tokens // TOKEN_BLOCK * TOKEN_BLOCK or None
    return max(1, math.floor(up.max_concurrency)) if up.serves else None


def sweep(
    spec: ModelSpec,
    workload: Workload,
    field: str,
    values: Sequence[int],
    *,
    draft: ModelSpec | None = None,
) -> list[Estimate | None]:
    """Estimates for each value of ``field`` (None where the settings are invalid)."""
    out: list[Estimate | None] = []
    if field in SIZE_FIELDS:
        sized = Estimator(spec, workload, draft=draft)
        for value in values:
            try:
                out.append(sized.at(field, value))
            except VramguiError:
                out.append(None)
        return out
    for value in values:
        try:
            out.append(estimate(spec, workload.with_(**{field: value}), draft=draft))
        except VramguiError:
            out.append(None)
    return out


def gpus_needed(
    spec: ModelSpec,
    workload: Workload,
    capacity_bytes: int,
    limit: int = 64,
    draft: ModelSpec | None = None,
) -> int | None:
    """Fewest GPUs of one kind that fit the workload, sharding the way the workload says.

    Training shards with ZeRO-3 when no sharding is chosen; inference with tensor parallelism
    (under vLLM: the fewest on which vLLM starts), or with the engine's own split of whole
    layers (llama.cpp).
    """
    for count in _gpu_counts(workload, limit):
        margin = _margin(spec, sharded(workload, count), capacity_bytes, draft)
        if margin is not None and margin[0] >= 0:
            return count
    return None


def cheapest(
    spec: ModelSpec,
    workload: Workload,
    gpus: Iterable[tuple[str, int, float | None]],
    limit: int = MAX_GPUS_PER_MACHINE,
    draft: ModelSpec | None = None,
) -> list[tuple[str, int, float]]:
    """Catalog GPUs ranked by the total price of the fewest of them that fit.

    Only as many GPUs as one machine holds are considered: tensor parallelism (how inference is
    sharded here) runs inside a machine, and sixteen consumer cards serving one model are a
    cluster, not a purchase to rank.

    Args:
        gpus: (name, capacity_bytes, price_usd) triples; entries without a price are skipped.
        limit: the most GPUs of one kind to consider.
        draft: the draft model of vLLM's speculative decoding, if any.
    """
    ranked = []
    for name, capacity, price in gpus:
        if price is None:
            continue
        count = gpus_needed(spec, workload, capacity, limit, draft)
        if count is not None:
            ranked.append((name, count, count * price))
    return sorted(ranked, key=lambda r: r[2])


def _gpu_counts(workload: Workload, limit: int) -> Iterable[int]:
    """The GPU counts ``gpus_needed`` tries, fewest first, up to ``limit``: every count up to a
    machine's worth where the engine splits whole layers (llama.cpp's --tensor-split takes any
    number of devices), powers of two otherwise (tensor parallelism divides the heads, and
    ZeRO's shards are sized for them) and beyond a machine."""
    if workload.mode == "inference" and not engine(workload.engine).splits_tensors:
        every = range(1, min(limit, MAX_GPUS_PER_MACHINE) + 1)
        yield from every
        yield from (n for n in _powers_of_two(limit) if n > MAX_GPUS_PER_MACHINE)
        return
    yield from _powers_of_two(limit)


def _powers_of_two(limit: int) -> Iterable[int]:
    n = 1
    while n <= limit:
        yield n
        n *= 2


# --- the fit advisor -----------------------------------------------------------------------------

_Candidate = tuple[str, dict[str, Any], str]


def advise(
    spec: ModelSpec, workload: Workload, capacity_bytes: int, draft: ModelSpec | None = None
) -> list[Suggestion]:
    """Changes that make the setup fit ``capacity_bytes``, those that fit first, then by saving.

    Each candidate is re-estimated with the core; a candidate that is invalid for this model is
    left out. When the setup already fits, nothing is suggested. Under vLLM a change "fits"
    when vLLM starts with it (under SGLang, when its pool holds a request of the context);
    what it saves is what it adds to the KV pool or takes off what one request needs of it,
    from the engine's start-up with the change: the engine takes its share of the GPU whatever
    is set, so the memory left on the GPU is the same for every change that lets it start.
    """
    fitted = _fitted(spec, workload, capacity_bytes, draft)
    if fitted is None or fitted[0].headroom_bytes >= 0:
        return []
    base = fitted[0]
    base_room = _pool_room(base)
    out = []
    for title, changes, cost in _candidates(spec, workload, capacity_bytes):
        try:
            trial = workload.with_(**changes)
        except VramguiError:
            continue
        after = _fitted(spec, trial, capacity_bytes, draft)
        if after is None or after[0].headroom_bytes <= base.headroom_bytes:
            continue
        row, total = after
        room = _pool_room(row)
        if room is None or base_room is None:
            saves, pool, tokens = row.headroom_bytes - base.headroom_bytes, None, None
        else:
            saves, pool, tokens = room[0] - base_room[0], room[1], room[2]
        fits = row.headroom_bytes >= 0
        out.append(Suggestion(title, changes, saves, cost, fits, total, None, pool, tokens))
    out.sort(key=lambda s: (not s.fits, -s.saves_bytes if not s.fits else _cost_rank(s)))
    return out


def _cost_rank(s: Suggestion) -> int:
    """Among changes that fit, prefer the gentlest: the order of the candidates list."""
    return _COST_ORDER.get(next(iter(s.changes)), 99)


_COST_ORDER = {
    "gpu_memory_utilization": 0,
    "max_num_seqs": 0,
    "max_num_batched_tokens": 0,
    "kv_dtype": 0,
    "enforce_eager": 1,
    "grad_checkpointing": 1,
    "optimizer": 2,
    "attention": 3,
    "quant": 4,
    "seq": 5,
    "batch": 6,
    "method": 7,
    "zero": 8,
    "fsdp": 8,
    "gpus": 9,
    "tp": 9,
}


def _candidates(spec: ModelSpec, w: Workload, capacity: int) -> list[_Candidate]:
    out: list[_Candidate] = []

    def add(t: str, c: dict[str, Any], cost: str) -> None:
        return out.append((t, c, cost))

    if w.mode == "inference":
        eng = engine(w.engine)
        if eng.startup is StartUp.VLLM:
            _vllm_candidates(w, add)
        if eng.startup is StartUp.SGLANG:
            _sglang_candidates(w, add)
        kv_bytes = dtypes.kv_bytes_per_element(w.kv_dtype, w.dtype)
        for kv in KV_CACHE_TYPES:
            if (
                kv.saving
                and eng.takes_kv(kv.name)
                and dtypes.kv_bytes_per_element(kv.name, w.dtype) < kv_bytes
            ):
                add(f"{kv.saving} KV cache", {"kv_dtype": kv.name}, kv.saving_cost)
        if w.attention == "eager":
            add("SDPA attention", {"attention": "sdpa"}, "none: same results, less memory")
        for quant in _narrower_quants(spec, w):
            scheme = dtypes.get_scheme(quant)
            if storage.keeps_stored(quant, spec.quantization):
                add(
                    f"Use llama.cpp's {scheme.name} GGUF of this checkpoint",
                    {"quant": quant},
                    f"none: {scheme.description}, its {scheme.gguf_type} weights as stored",
                )
                continue
            add(
                f"Quantize weights to {scheme.label}",
                {"quant": quant},
                f"~{scheme.nominal_bits_per_weight:.1f} bits per weight: some quality loss",
            )
        best_seq = largest_fitting(spec, w, capacity, "seq")
        if best_seq and best_seq < w.seq:
            add(f"Context {best_seq:,} tokens", {"seq": best_seq}, "shorter prompts and answers")
        if w.batch > 1:
            best_batch = largest_fitting(spec, w, capacity, "batch")
            if best_batch and best_batch < w.batch:
                add(f"Batch {best_batch}", {"batch": best_batch}, "lower throughput")
        if eng.splits_tensors:
            for count in (2, 4, 8):
                if count > w.gpus and spec.facts.num_heads % count == 0:
                    add(
                        f"Tensor parallel over {count} GPUs",
                        {"gpus": count, "tp": count},
                        f"{count} GPUs",
                    )
    else:
        if not w.grad_checkpointing:
            add("Gradient checkpointing", {"grad_checkpointing": True}, "~30 % slower steps")
        if w.optimizer in ("adamw", "adamw-fused", "lion"):
            add("8-bit AdamW", {"optimizer": "adamw-8bit"}, "needs bitsandbytes")
        if w.optimizer == "adamw":
            add("Fused AdamW", {"optimizer": "adamw-fused"}, "none")
        if w.attention == "eager":
            add("SDPA attention", {"attention": "sdpa"}, "none: same results, less memory")
        if w.method == "full":
            # As LoRA is usually run: the frozen base loaded in the compute dtype, fp32 adapters.
            add(
                "LoRA instead of a full fine-tune",
                {"method": "lora", "precision": "pure"},
                f"adapters only; the base frozen in {w.dtype}",
            )
        if w.method != "qlora":
            add(
                "QLoRA (4-bit base)",
                {"method": "qlora", "quant": "nf4", "precision": "mixed"},
                "slower, 4-bit base",
            )
        if w.batch > 1:
            add(
                f"Batch 1, accumulate {w.batch}",
                {"batch": 1, "grad_accum": w.batch * w.grad_accum},
                "slower steps, same effective batch",
            )
        for count in (2, 4, 8):
            if count > w.gpus:
                add(
                    f"ZeRO-3 over {count} GPUs",
                    {"gpus": count, "zero": 3, "fsdp": False},
                    f"{count} GPUs",
                )
    return out


# The share of the GPU vLLM is offered when the setting leaves more to spare.
VLLM_HIGH_UTILIZATION = 0.95


def _sglang_candidates(w: Workload, add: Callable[[str, dict[str, Any], str], None]) -> None:
    """SGLang's own knob: a larger static fraction gives the pool more of the GPU."""
    for fraction in (0.9, 0.95):
        if w.mem_fraction_static is None or w.mem_fraction_static < fraction:
            add(
                phrase(Setting("mem_fraction_static", f"{fraction:g}")),
                {"mem_fraction_static": fraction},
                "less room for activations and CUDA graphs (out of memory under load if too "
                "little is left)",
            )


def _vllm_candidates(w: Workload, add: Callable[[str, dict[str, Any], str], None]) -> None:
    """vLLM's own knobs that leave more room for its KV pool."""
    if w.gpu_memory_utilization < VLLM_HIGH_UTILIZATION:
        add(
            phrase(Setting("gpu_memory_utilization", f"{VLLM_HIGH_UTILIZATION:g}")),
            {"gpu_memory_utilization": VLLM_HIGH_UTILIZATION},
            "less room for other processes on the GPU",
        )
    if w.max_num_seqs is None or w.max_num_seqs > 64:
        add(
            phrase(Setting("max_num_seqs", 64)),
            {"max_num_seqs": 64},
            "at most 64 requests at once (a smaller sampler warm-up)",
        )
    if w.max_num_batched_tokens is None or w.max_num_batched_tokens > 2048:
        add(
            phrase(Setting("max_num_batched_tokens", 2048)),
            {"max_num_batched_tokens": 2048},
            "slower prefill of long prompts (a smaller profiling forward)",
        )
    if not w.enforce_eager:
        add(
            phrase(Setting("enforce_eager")),
            {"enforce_eager": True},
            "slower decoding without CUDA graphs",
        )


def _narrower_quants(spec: ModelSpec, w: Workload) -> list[str]:
    current = dtypes.get_scheme(w.quant) if w.quant != "none" else None
    bits_now = current.nominal_bits_per_weight if current else 8 * dtypes.DTYPE_BYTES[w.dtype]
    eng = engine(w.engine)
    options = (
        [*eng.moe_quants, *eng.narrower_quants]
        if spec.facts.num_experts
        else [*eng.narrower_quants]
    )
    return [q for q in options if dtypes.get_scheme(q).nominal_bits_per_weight < bits_now]


# --- setups ranked by time and cost --------------------------------------------------------------

RANK_KEYS = ("cost", "time")


@dataclass(frozen=True, slots=True)
class RankedSetup:
    """The fewest GPUs of one kind that fit, with what the work takes on them.

    Attributes:
        gpu: the catalog GPU.
        count: how many of them.
        workload: the setup timed (sharded as ``gpus_needed`` shards it).
        tokens_per_second: trained (training) or generated (inference) over the GPUs.
        price: the price of one GPU-hour, or None where none is known.
        cost_per_million: the price of a million tokens trained or generated, or None.
        time_seconds: the run's wall time (training with tokens to train), else None.
        gpu_hours: the run's GPU-hours, else None.
        cost: the run's cost, else None.
        basis: what the speed rests on: "measured" or "extrapolated" (llama.cpp, from published
            llama-bench rows), "roofline" (datasheet peaks at the default shares; inference) or
            "" (training, ``core.speed.training_speed``).
    """

    gpu: str
    count: int
    workload: Workload
    tokens_per_second: float
    price: Price | None
    cost_per_million: float | None
    time_seconds: float | None = None
    gpu_hours: float | None = None
    cost: float | None = None
    basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "count": self.count,
            "tokens_per_second": round(self.tokens_per_second, 1),
            "cost_per_million_tokens": None
            if self.cost_per_million is None
            else round(self.cost_per_million, 4),
            "time_seconds": None if self.time_seconds is None else round(self.time_seconds, 1),
            "gpu_hours": None if self.gpu_hours is None else round(self.gpu_hours, 3),
            "cost": None if self.cost is None else round(self.cost, 2),
            "price": None if self.price is None else self.price.to_dict(),
            "basis": self.basis or None,
        }


def rank_setups(
    spec: ModelSpec,
    workload: Workload,
    offers: Iterable[tuple[str, int, Hardware, Price | None]],
    *,
    by: str = "cost",
    train_tokens: int | None = None,
    limit: int = MAX_GPUS_PER_MACHINE,
    utilizations: Mapping[str, Utilization] | None = None,
    draft: ModelSpec | None = None,
) -> list[RankedSetup]:
    """Catalog GPUs ranked by how long the work takes on the fewest of them that fit, or by
    what it costs.

    Training is timed with ``core.speed.training_speed`` (and, with ``train_tokens``, a whole
    run); inference by its decode throughput at the workload's batch as concurrency. Cost is
    per million tokens (trained or generated) and, for a training run, the run's. Setups without
    a price rank after those with one when ranked by cost.

    Args:
        offers: (name, capacity_bytes, hardware, price) of each GPU to consider.
        by: "cost" or "time".
        train_tokens: tokens of a training run to time and price.
        limit: the most GPUs of one kind (one machine).
        utilizations: a utilization per GPU name (measured ones) instead of the defaults.
        draft: the draft model of vLLM's speculative decoding, if any.
    """
    if by not in RANK_KEYS:
        raise ValueError(f"rank by cost or time, not {by!r}")
    ranked = []
    for name, capacity, hardware, price in offers:
        count = gpus_needed(spec, workload, capacity, limit, draft)
        if count is None:
            continue
        trial = sharded(workload, count)
        u = (utilizations or {}).get(name)
        basis = ""
        try:
            if trial.mode == "training":
                per_second = training_speed(spec, trial, hardware, u).tokens_per_second
            else:
                served = serving_speed(spec, trial, hardware, u)
                per_second, basis = served.tokens_per_second, served.basis
        except VramguiError:
            continue
        per_million = None if price is None else cost_per_million_tokens(per_second, count, price)
        run: dict[str, float | None] = {}
        if train_tokens is not None and trial.mode == "training":
            seconds = train_tokens / per_second
            hours = count * seconds / 3600.0
            run = {
                "time_seconds": seconds,
                "gpu_hours": hours,
                "cost": None if price is None else hours * price.per_gpu_hour,
            }
        ranked.append(
            RankedSetup(name, count, trial, per_second, price, per_million, **run, basis=basis)
        )
    return order_setups(ranked, by)


def order_setups(ranked: Iterable[RankedSetup], by: str) -> list[RankedSetup]:
    """``ranked`` fastest first ("time"), or cheapest per million tokens first ("cost"; those
    without a price last, faster first among equals)."""
    if by == "time":
        return sorted(ranked, key=lambda r: -r.tokens_per_second)
    return sorted(
        ranked,
        key=lambda r: (r.cost_per_million is None, r.cost_per_million or 0.0, -r.tokens_per_second),
    )


def sharded(workload: Workload, count: int) -> Workload:
    """The workload on ``count`` GPUs, sharded as ``gpus_needed`` shards it: tensor parallelism
    where the engine shards tensors, else its own split (llama.cpp's whole layers)."""
    if workload.mode == "training":
        return workload.with_(
            gpus=count, zero=workload.zero or (3 if count > 1 and not workload.fsdp else 0)
        )
    tp = count if engine(workload.engine).splits_tensors else 1
    return workload.with_(gpus=count, tp=tp, pp=1)
