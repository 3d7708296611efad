"""The estimate document (``vramgui.estimate/1``): whole, as ``vramgui estimate --json`` prints it
and the window copies it (``estimate_json``); and with the setup timed on its first GPU, what a
profile is compared with, in the window and on the command line alike (``timed_document``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from vramgui.answers.advice import advise
from vramgui.answers.capacity import serving_report
from vramgui.answers.host import HostSettings, host_settings
from vramgui.answers.rates import NoRates, Rates, RatesFor, timing_dtype
from vramgui.answers.timing import NO_RATES, Timing, Untimed, time_setup
from vramgui.core.estimate import Estimate, estimate
from vramgui.core.fit import fit_rows, gpus_needed, largest_fitting
from vramgui.core.model import ModelSpec
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.report import estimate_document
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import CatalogGpu, engine_notes
from vramgui.profiles import OffloadSettings, Profile
from vramgui.profiles.reopen import Loaded, LoadModel, Reestimate, ResolveGpus, reestimate

# The training run timed where nobody said how long (the window, a comparison of profiles).
DEFAULT_TRAIN_TOKENS = 100_000_000
# The changes the document lists when a setup does not fit, best first.
ADVICE_SHOWN = 5
# (GPU name, compute dtype) -> its rates; None, or NoRates raised with the reason, where the GPU
# cannot be timed.
TimingRates = Callable[[str, str], "Rates | None"]


class Sourced(Loaded, Protocol):
    """A loaded model with what its source said of it (``ResolvedModel``, by its shape)."""

    @property
    def notices(self) -> Sequence[str]: ...


def estimate_json(
    loaded: Sourced,
    workload: Workload,
    capacities: Sequence[tuple[str, int]],
    *,
    rates: TimingRates,
    host: HostSettings,
    train_tokens: int | None = None,
    draft: ModelSpec | None = None,
    placement: OffloadSettings | None = None,
    flagged: Mapping[str, Any] | None = None,
    custom: Sequence[CatalogGpu] = (),
) -> dict[str, Any]:
    """The ``vramgui estimate --json`` document of ``workload`` on ``loaded`` against
    ``capacities`` (docs/cli.md): the estimate and its fit, the largest context and batch and
    the GPUs needed on each GPU, the setup timed on the first (``speed`` or ``serving``, naming
    its placement; a note says why where it cannot be), what makes it fit the first GPU, vLLM's
    start-up there, the notes, the source.

    Args:
        rates: the rates the first GPU is timed with (the user's price and utilization).
        host: the RAM and disk a llama.cpp offload is placed with.
        train_tokens: the training run timed (None: its speed only).
        placement: a llama.cpp placement to time instead of the fastest (the window's).
        flagged: answers the command line gives on request (``cheapest``, ``ranked``), placed
            after ``gpus_needed``.
        custom: cards given by their figures rather than named from the catalog.

    Raises:
        VramguiError: the workload does not apply to the model.
    """
    spec, capacities = loaded.spec, list(capacities)
    first = capacities[0] if capacities else None
    est = estimate(spec, workload, first[1] if first else None, first[0] if first else "", draft)
    rows = fit_rows(est, capacities)
    extra: dict[str, Any] = {}
    if capacities and workload.mode == "inference":
        extra["largest_fitting"] = {
            name: {
                field: largest_fitting(spec, workload, cap, field, gpu_name=name, draft=draft)
                for field in ("seq", "batch")
            }
            for name, cap in capacities
        }
    if capacities:
        extra["gpus_needed"] = {
            name: gpus_needed(spec, workload, cap, draft=draft) for name, cap in capacities
        }
    extra.update(flagged or {})
    untimed = None
    if first is not None:
        timing = _timing(
            spec,
            est,
            first,
            rates,
            host=host,
            train_tokens=train_tokens,
            draft=draft,
            placement=placement,
        )
        untimed = timing if isinstance(timing, Untimed) else None
        key = "speed" if workload.mode == "training" else "serving"
        extra[key] = None if isinstance(timing, Untimed) else timing.block()
    if first is not None and rows and not rows[0].fits:
        extra["advice"] = _advice(spec, est, first, rates, host=host, draft=draft)
    if capacities and est.vllm is not None:
        # The Serving tab's report: concurrency against --max-model-len, the change that starts.
        extra["serving_report"] = serving_report(spec, workload, capacities, draft).to_dict()
    doc = estimate_document(spec, est, rows, extra)
    if untimed is not None:
        doc["notes"].append(untimed.note())
    doc["notes"] += engine_notes(workload.engine, [name for name, _ in capacities])
    if custom:
        doc["custom_gpus"] = [
            {
                "name": card.name,
                "memory_bytes": card.memory_bytes,
                "memory_bandwidth_gbps": card.memory_bandwidth_gbps or None,
                "tflops_16bit": card.bf16_tflops,
            }
            for card in custom
        ]
    doc["source"] = loaded.ref.to_dict()
    doc["notices"] = list(loaded.notices)
    return doc


def _rates_or_why(rates: TimingRates, gpu: str, dtype: str) -> Rates | NoRates:
    try:
        found = rates(gpu, dtype)
    except NoRates as exc:
        return exc
    if found is None:
        return NoRates(gpu, f"{gpu} is not in the GPU catalog (its peak rates are unknown)")
    return found


def _timing(
    spec: ModelSpec,
    est: Estimate,
    target: tuple[str, int],
    rates: TimingRates,
    *,
    host: HostSettings,
    train_tokens: int | None,
    draft: ModelSpec | None = None,
    placement: OffloadSettings | None = None,
) -> Timing | Untimed:
    """``est``'s setup timed on ``target`` (``answers.timing``), or why it cannot be."""
    gpu, capacity = target
    found = _rates_or_why(rates, gpu, timing_dtype(est.workload))
    if isinstance(found, NoRates):
        return Untimed(gpu, NO_RATES, found.reason)
    return time_setup(
        spec,
        est,
        gpu,
        capacity,
        found,
        host=host,
        train_tokens=train_tokens if est.workload.mode == "training" else None,
        draft=draft,
        n_gpu_layers=None if placement is None else placement.n_gpu_layers,
        layout=None if placement is None else _layout(placement),
    )


def _advice(
    spec: ModelSpec,
    est: Estimate,
    target: tuple[str, int],
    rates: TimingRates,
    *,
    host: HostSettings,
    draft: ModelSpec | None,
) -> list[dict[str, Any]]:
    """What makes the setup fit ``target``, as the window's fit advisor says it
    (``answers.advice``): llama.cpp's placements with host RAM first, then the settings."""
    gpu, capacity = target
    found = _rates_or_why(rates, gpu, timing_dtype(est.workload))
    timed_with = None if isinstance(found, NoRates) else found
    suggestions = advise(spec, est, capacity, host=host, rates=timed_with, draft=draft)
    return [
        {
            "title": s.title,
            "changes": s.changes,
            "fits": s.fits,
            "saves_bytes": s.saves_bytes,
            "total_bytes": s.total_bytes,
            "kv_pool_bytes": s.pool_bytes,
            "kv_pool_tokens": s.pool_tokens,
            "cost": s.cost,
            "placement": None
            if s.placement is None
            else {"n_gpu_layers": s.placement[0], "n_cpu_moe": s.placement[1]},
        }
        for s in suggestions[:ADVICE_SHOWN]
    ]


def timed_document(
    spec: ModelSpec,
    workload: Workload,
    capacities: list[tuple[str, int]],
    *,
    rates: RatesFor,
    host: HostSettings,
    train_tokens: int = DEFAULT_TRAIN_TOKENS,
    offload: OffloadSettings | None = None,
) -> dict[str, Any]:
    """``workload`` on ``spec`` estimated and fitted against ``capacities``, timed on the first
    (``answers.timing``): ``speed`` (training, a run of ``train_tokens``) or ``serving``
    (inference), each naming the placement it times; a setup that cannot be timed has none, and
    a note says why. ``offload`` places a llama.cpp setup as saved (else the fastest).

    Raises:
        VramguiError: the workload does not apply to the model.
    """
    first = capacities[0] if capacities else None
    est = estimate(spec, workload, first[1] if first else None, first[0] if first else "")
    doc = estimate_document(spec, est, fit_rows(est, capacities))
    if first is None:
        return doc
    timing = _timing(
        spec, est, first, rates, host=host, train_tokens=train_tokens, placement=offload
    )
    if isinstance(timing, Untimed):
        doc["notes"].append(timing.note())
    else:
        doc["speed" if workload.mode == "training" else "serving"] = timing.block()
    return doc


def _layout(offload: OffloadSettings) -> LlamaCppLayout:
    return LlamaCppLayout(
        cpu_moe=offload.cpu_moe, n_cpu_moe=offload.n_cpu_moe, op_offload=offload.op_offload
    )


def profile_host(saved: OffloadSettings | None) -> HostSettings:
    """The host a profile is placed with: its saved RAM and disk, else this machine's."""
    if saved is None:
        return host_settings()
    return host_settings(saved.ram_bytes, saved.disk_bytes_per_s)


def saved_document(
    loaded: Loaded,
    workload: Workload,
    capacities: list[tuple[str, int]],
    *,
    rates: RatesFor,
    offload: OffloadSettings | None = None,
) -> dict[str, Any]:
    """The estimate a profile is saved with: ``timed_document`` with the saved placement and
    host, and where the model came from; what ``reestimate_profile`` gives back unchanged.

    Raises:
        VramguiError: the workload does not apply to the model.
    """
    document = timed_document(
        loaded.spec,
        workload,
        capacities,
        rates=rates,
        host=profile_host(offload),
        offload=offload,
    )
    document["source"] = loaded.ref.to_dict()
    return document


def reestimate_profile(
    profile: Profile, load_model: LoadModel, resolve_gpus: ResolveGpus, rates: RatesFor
) -> Reestimate:
    """A profile estimated again with today's core and timed on its first GPU with its saved
    placement and host (``profiles.reopen.reestimate``; never raises)."""
    host = profile_host(profile.offload)

    def document(
        spec: ModelSpec, workload: Workload, capacities: list[tuple[str, int]]
    ) -> dict[str, Any]:
        return timed_document(
            spec, workload, capacities, rates=rates, host=host, offload=profile.offload
        )

    return reestimate(profile, load_model, resolve_gpus, document)
