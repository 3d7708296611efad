"""The estimate document (``vramgui.estimate/1``) with the setup timed on its first GPU: what a
profile is compared with, in the window and on the command line alike."""

from __future__ import annotations

from typing import Any

from vramgui.answers.host import HostSettings, host_settings
from vramgui.answers.rates import RatesFor
from vramgui.answers.timing import NO_RATES, Untimed, time_setup
from vramgui.core.estimate import estimate
from vramgui.core.fit import fit_rows
from vramgui.core.model import ModelSpec
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.report import estimate_document
from vramgui.core.workload import Workload
from vramgui.profiles import OffloadSettings, Profile
from vramgui.profiles.reopen import Loaded, LoadModel, Reestimate, ResolveGpus, reestimate

# The training run timed where nobody said how long (the window, a comparison of profiles).
DEFAULT_TRAIN_TOKENS = 100_000_000


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
    gpu, capacity = first
    r = rates(gpu, workload.dtype)
    timing = (
        Untimed(gpu, NO_RATES, f"{gpu} is not in the GPU catalog (its peak rates are unknown)")
        if r is None
        else time_setup(
            spec,
            est,
            gpu,
            capacity,
            r,
            host=host,
            train_tokens=train_tokens if workload.mode == "training" else None,
            n_gpu_layers=None if offload is None else offload.n_gpu_layers,
            layout=None if offload is None else _layout(offload),
        )
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
