"""Fit an estimate against GPUs, and the solvers built on it.

GPUs reach the core as plain ``(name, capacity_bytes)`` pairs; the hardware layer makes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vramgui.core import dtypes
from vramgui.core.errors import VramguiError
from vramgui.core.estimate import Estimate, estimate
from vramgui.core.model import ModelSpec
from vramgui.core.workload import MAX_BATCH, Workload

Capacity = tuple[str, int]
# Context lengths are searched in blocks of this many tokens (vLLM's and llama.cpp's granularity).
TOKEN_BLOCK = 16


@dataclass(frozen=True, slots=True)
class FitRow:
    """One GPU against one estimate."""

    gpu: str
    capacity_bytes: int
    fits: bool
    headroom_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "headroom_bytes": self.headroom_bytes,
        }


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A change that makes a setup fit (or fit better), with what it saves and costs.

    Attributes:
        title: what to do, e.g. "Quantize to Q4_K_M".
        changes: workload fields to set, e.g. {"quant": "Q4_K_M"}.
        saves_bytes: memory saved per GPU.
        cost: what the user gives up.
        fits: whether the setup fits the GPU after the change.
        total_bytes: the estimate after the change.
    """

    title: str
    changes: dict[str, Any]
    saves_bytes: int
    cost: str
    fits: bool
    total_bytes: int


def fit_rows(est: Estimate, capacities: Iterable[Capacity]) -> list[FitRow]:
    """Fit and headroom of ``est`` on each GPU (headroom is negative when it does not fit)."""
    rows = []
    for name, capacity in capacities:
        headroom = capacity - est.total_bytes
        rows.append(FitRow(name, capacity, headroom >= 0, headroom))
    return rows


def _total(spec: ModelSpec, workload: Workload, capacity: int | None) -> int | None:
    try:
        return estimate(spec, workload, capacity).total_bytes
    except VramguiError:
        return None


def largest_fitting(
    spec: ModelSpec, workload: Workload, capacity_bytes: int, field: str = "seq"
) -> int | None:
    """The largest ``seq`` (in token blocks) or ``batch`` that fits ``capacity_bytes``.

    Memory grows monotonically with both, so a bisection finds the boundary. Returns None when
    even the smallest value does not fit.
    """
    if field not in ("seq", "batch"):
        raise ValueError(f"field must be seq or batch, got {field!r}")
    step = TOKEN_BLOCK if field == "seq" else 1
    upper = max(spec.facts.max_position_embeddings, workload.seq) if field == "seq" else MAX_BATCH

    def fits(value: int) -> bool:
        total = _total(spec, workload.with_size(field, value), capacity_bytes)
        return total is not None and total <= capacity_bytes

    low = step
    if not fits(low):
        return None
    if fits(upper):
        return upper
    high = upper  # invariant: fits(low) and not fits(high)
    while high - low > step:
        mid = (low + high) // 2 // step * step
        if mid <= low:
            mid = low + step
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


def sweep(
    spec: ModelSpec, workload: Workload, field: str, values: Sequence[int]
) -> list[Estimate | None]:
    """Estimates for each value of ``field`` (None where the settings are invalid)."""
    out: list[Estimate | None] = []
    for value in values:
        try:
            out.append(estimate(spec, _with(workload, field, value)))
        except VramguiError:
            out.append(None)
    return out


def _with(workload: Workload, field: str, value: int) -> Workload:
    if field in ("batch", "seq"):
        return workload.with_size(field, value)
    return workload.with_(**{field: value})


def gpus_needed(
    spec: ModelSpec, workload: Workload, capacity_bytes: int, limit: int = 64
) -> int | None:
    """Fewest GPUs of one kind that fit the workload, sharding the way the workload says.

    Training shards with ZeRO-3 when no sharding is chosen; inference with tensor parallelism.
    """
    for count in _powers_of_two(limit):
        if workload.mode == "training":
            trial = workload.with_(
                gpus=count, zero=workload.zero or (3 if count > 1 and not workload.fsdp else 0)
            )
        else:
            trial = workload.with_(gpus=count, tp=count, pp=1)
        total = _total(spec, trial, capacity_bytes)
        if total is not None and total <= capacity_bytes:
            return count
    return None


def cheapest(
    spec: ModelSpec,
    workload: Workload,
    gpus: Iterable[tuple[str, int, float | None]],
    limit: int = 64,
) -> list[tuple[str, int, float]]:
    """Catalog GPUs ranked by the total price of the fewest of them that fit.

    Args:
        gpus: (name, capacity_bytes, price_usd) triples; entries without a price are skipped.
    """
    ranked = []
    for name, capacity, price in gpus:
        if price is None:
            continue
        count = gpus_needed(spec, workload, capacity, limit)
        if count is not None:
            ranked.append((name, count, count * price))
    return sorted(ranked, key=lambda r: r[2])


def _powers_of_two(limit: int) -> Iterable[int]:
    n = 1
    while n <= limit:
        yield n
        n *= 2


# --- the fit advisor -----------------------------------------------------------------------------

_Candidate = tuple[str, dict[str, Any], str]


def advise(spec: ModelSpec, workload: Workload, capacity_bytes: int) -> list[Suggestion]:
    """Changes that make the setup fit ``capacity_bytes``, those that fit first, then by saving.

    Each candidate is re-estimated with the core; a candidate that is invalid for this model is
    left out. When the setup already fits, nothing is suggested.
    """
    base = _total(spec, workload, capacity_bytes)
    if base is None or base <= capacity_bytes:
        return []
    out = []
    for title, changes, cost in _candidates(spec, workload, capacity_bytes):
        try:
            trial = workload.with_(**changes)
        except VramguiError:
            continue
        total = _total(spec, trial, capacity_bytes)
        if total is None or total >= base:
            continue
        out.append(Suggestion(title, changes, base - total, cost, total <= capacity_bytes, total))
    out.sort(key=lambda s: (not s.fits, -s.saves_bytes if not s.fits else _cost_rank(s)))
    return out


def _cost_rank(s: Suggestion) -> int:
    """Among changes that fit, prefer the gentlest: the order of the candidates list."""
    return _COST_ORDER.get(next(iter(s.changes)), 99)


_COST_ORDER = {
    "kv_dtype": 0,
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
        if w.engine == "vllm" and w.kv_dtype != "fp8":
            add("FP8 KV cache", {"kv_dtype": "fp8"}, "slightly less accurate attention")
        if w.engine == "llamacpp" and w.kv_dtype not in ("q8_0", "q4_0"):
            add("q8_0 KV cache", {"kv_dtype": "q8_0"}, "negligible quality loss")
        if w.engine == "llamacpp" and w.kv_dtype != "q4_0":
            add("q4_0 KV cache", {"kv_dtype": "q4_0"}, "some quality loss on long contexts")
        if w.attention == "eager":
            add("SDPA attention", {"attention": "sdpa"}, "none: same results, less memory")
        for quant in _narrower_quants(w):
            scheme = dtypes.get_scheme(quant)
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
        if w.engine != "llamacpp":
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
            add("LoRA instead of a full fine-tune", {"method": "lora"}, "adapters only")
        if w.method != "qlora":
            add("QLoRA (4-bit base)", {"method": "qlora", "quant": "nf4"}, "slower, 4-bit base")
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


def _narrower_quants(w: Workload) -> list[str]:
    current = dtypes.get_scheme(w.quant) if w.quant != "none" else None
    bits_now = current.nominal_bits_per_weight if current else 8 * dtypes.DTYPE_BYTES[w.dtype]
    if w.engine == "llamacpp":
        options = ["Q8_0", "Q6_K", "Q4_K_M", "Q3_K_M", "IQ2_M"]
    elif w.engine == "vllm":
        options = ["fp8", "awq-int4"]
    else:
        options = ["int8", "nf4"]
    return [q for q in options if dtypes.get_scheme(q).nominal_bits_per_weight < bits_now]
