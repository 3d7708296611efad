"""The estimate of a setup on the GPUs chosen, and what surrounds it: the sweep of the context
or the batch, the largest of each that fits, the advice, the rules of thumb and the GPUs to rent
ranked by the cost of the work. The window's Estimate tab, the local models and the profiles
render these."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.answers.advice import advise
from vramgui.answers.host import UNKNOWN_HOST, HostSettings
from vramgui.answers.rates import Rates
from vramgui.answers.timing import rank_setups
from vramgui.core import fit
from vramgui.core.errors import VramguiError
from vramgui.core.estimate import Estimate, estimate
from vramgui.core.fit import FitRow, RankedSetup, Suggestion
from vramgui.core.inference import POOLED_PHASE
from vramgui.core.model import ModelSpec
from vramgui.core.report import rules_of_thumb
from vramgui.core.workload import Workload

__all__ = [
    "POOLED_PHASE",
    "SWEEP_FIELDS",
    "Estimate",
    "FitRow",
    "Fitted",
    "Outlook",
    "RankedSetup",
    "Refusal",
    "Suggestion",
    "compute_outlook",
    "estimate_setup",
    "refusal",
    "sweep_values",
]

SWEEP_FIELDS = ("seq", "batch")


@dataclass(frozen=True, slots=True)
class Fitted:
    """A setup's estimate and how it sits on each GPU given (the target first)."""

    estimate: Estimate
    fit: tuple[FitRow, ...]


def estimate_setup(
    spec: ModelSpec,
    workload: Workload,
    capacities: Sequence[tuple[str, int]] = (),
    *,
    gpu_name: str | None = None,
    draft: ModelSpec | None = None,
) -> Fitted:
    """``workload``'s estimate on the first of ``capacities`` (name, bytes), fitted to each.

    ``gpu_name``: the GPU the engine's per-GPU defaults are taken for (vLLM's scheduler on a
    large GPU); the first of ``capacities`` unless given ("" for none).

    Raises:
        VramguiError: settings the model or the engine refuses.
    """
    name, target = capacities[0] if capacities else ("", None)
    result = estimate(spec, workload, target, name if gpu_name is None else gpu_name, draft)
    return Fitted(result, tuple(fit.fit_rows(result, capacities)))


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the estimate refuses a setup, and what the setup is (a view that plans for another
    engine, the Offloading tab's, says the refusal beside its own figures).

    Attributes:
        engine: the key of the engine the setup is for.
        training: whether it trains (the refusal may then be about training alone).
        error: the estimate's reason.
    """

    engine: str
    training: bool
    error: VramguiError


def refusal(
    spec: ModelSpec,
    workload: Workload,
    capacities: Sequence[tuple[str, int]] = (),
    *,
    draft: ModelSpec | None = None,
) -> Refusal | None:
    """Why :func:`estimate_setup` refuses ``workload`` on ``capacities``, or None where it
    estimates it."""
    try:
        estimate_setup(spec, workload, capacities, draft=draft)
    except VramguiError as exc:
        return Refusal(workload.engine, workload.mode == "training", exc)
    return None


@dataclass(frozen=True, slots=True)
class Outlook:
    """What surrounds the current setup: the sweep, the room left and the advice.

    Attributes:
        field: the swept setting ("seq" or "batch").
        values: the swept values, ascending.
        totals_bytes: the per-GPU total at each value.
        target: the GPU held against, ``(name, capacity_bytes)``, or None when none is chosen.
        largest: for "seq" and "batch", the largest value that fits the target (None: not even 1).
        suggestions: ranked changes that make the setup fit the target (or save memory).
        rules: the classic rules of thumb for the same setup, bytes by rule name.
        ranked: the catalog GPUs that fit (the fewest of each), cheapest work first.
        ranked_by_time: the same, fastest first.
    """

    field: str
    values: tuple[int, ...]
    totals_bytes: tuple[int, ...]
    target: tuple[str, int] | None
    largest: dict[str, int | None]
    suggestions: tuple[Suggestion, ...]
    rules: dict[str, int]
    ranked: tuple[RankedSetup, ...] = ()
    ranked_by_time: tuple[RankedSetup, ...] = ()


def sweep_values(field: str, current: int, max_seq: int) -> tuple[int, ...]:
    """Powers of two across the useful range of ``field``, plus the current value."""
    if field == "seq":
        low, high = 256, max(max_seq, current, 512)
    else:
        low, high = 1, max(128, current)
    values = {2**k for k in range(int(math.log2(low)), int(math.log2(high)) + 1)}
    values.update({current, high})
    return tuple(sorted(v for v in values if low <= v <= high or v == current))


def compute_outlook(
    current: Estimate,
    spec: ModelSpec,
    workload: Workload,
    *,
    field: str,
    target: tuple[str, int] | None,
    max_seq: int,
    draft: ModelSpec | None = None,
    offers: list[tuple[str, int, Rates]] | None = None,
    train_tokens: int | None = None,
    host: HostSettings = UNKNOWN_HOST,
    target_rates: Rates | None = None,
) -> Outlook:
    """The sweep of ``field``, the largest context and batch that fit ``target``, the advice
    (``answers.advice``: offloading under llama.cpp, timed with ``target_rates`` and ``host``),
    the rules of thumb around the ``current`` estimate, and the GPUs of ``offers`` that fit
    ranked by the cost of the work (a training run of ``train_tokens``).

    Pure: safe to run on a worker thread.
    """
    values = sweep_values(field, getattr(workload, field), max_seq)
    points = [
        (value, e.total_bytes)
        for value, e in zip(
            values, fit.sweep(spec, workload, field, values, draft=draft), strict=True
        )
        if e is not None  # a value the model cannot take
    ]
    largest: dict[str, int | None] = {}
    suggestions: tuple[Suggestion, ...] = ()
    if target is not None:
        gpu, capacity = target
        for name in SWEEP_FIELDS:
            largest[name] = fit.largest_fitting(
                spec, workload, capacity, name, gpu_name=gpu, draft=draft
            )
        suggestions = tuple(
            advise(spec, current, capacity, host=host, rates=target_rates, draft=draft)
        )
    ranked: tuple[RankedSetup, ...] = ()
    if offers:
        ranked = tuple(
            rank_setups(
                spec,
                workload,
                offers,
                by="cost",
                host=host,
                draft=draft,
                train_tokens=train_tokens if workload.mode == "training" else None,
            )
        )
    return Outlook(
        field,
        tuple(v for v, _ in points),
        tuple(t for _, t in points),
        target,
        largest,
        suggestions,
        rules_of_thumb(spec, current),
        ranked,
        tuple(fit.order_setups(ranked, "time")),
    )
