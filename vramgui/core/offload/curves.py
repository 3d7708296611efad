"""The trade between GPU memory and speed (decode, and the time to the first token), for
llama.cpp: whole layers on the GPU (``-ngl`` from 0 to every layer), or every layer on the GPU
with the routed experts of the first N layers in host RAM (``--n-cpu-moe`` from 0 to all of
them). Each point is a placement and its timing, so the curves follow the same rules as a single
plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from vramgui.core.offload.llamacpp import LlamaCppModel
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.offload.placement import Placement
from vramgui.core.offload.throughput import Bandwidths, decode_throughput, prefill_seconds

LAYERS = "layers"
EXPERTS = "experts"


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One placement on a curve.

    Attributes:
        kind: ``layers`` (``-ngl value``) or ``experts`` (``--n-cpu-moe value`` with every layer
            on the GPU).
        value: the ``-ngl`` or ``--n-cpu-moe`` value.
        gpu_bytes: memory of each GPU.
        host_bytes: host RAM the weights (and any host KV cache) take.
        tokens_per_second: decode speed at the workload's batch and context.
        fits: every GPU within its budget with the safety margin kept free.
        first_token_seconds: the time to the first token: one sequence's prompt (the workload's
            ``prompt``, else its whole context) processed from an empty cache; None where only
            the fastest point was searched for (``best_points``).
    """

    kind: str
    value: int
    gpu_bytes: tuple[int, ...]
    host_bytes: int
    tokens_per_second: float
    fits: bool
    first_token_seconds: float | None = None

    @property
    def total_gpu_bytes(self) -> int:
        return sum(self.gpu_bytes)

    @property
    def flag(self) -> str:
        return f"-ngl {self.value}" if self.kind == LAYERS else f"--n-cpu-moe {self.value}"


def _point(
    kind: str, value: int, placement: Placement, bandwidths: Bandwidths, *, first_token: bool = True
) -> CurvePoint:
    speed = decode_throughput(placement, bandwidths)
    margin = placement.margin_bytes
    within = all(
        used <= budget - margin
        for used, budget in zip(placement.gpu_bytes, placement.vram_budget_bytes, strict=True)
    )
    return CurvePoint(
        kind,
        value,
        placement.gpu_bytes,
        placement.host_bytes,
        speed.tokens_per_second,
        placement.fits and within,
        prefill_seconds(placement, bandwidths, placement.workload.prompt, batch=1)
        if first_token
        else None,
    )


def layer_curve(
    model: LlamaCppModel,
    budgets: Sequence[int],
    bandwidths: Bandwidths,
    *,
    layout: LlamaCppLayout | None = None,
    host_ram_bytes: int | None = None,
    margin_bytes: int = 0,
) -> tuple[CurvePoint, ...]:
    """Whole layers on the GPUs: ``-ngl`` 0 to n_layer + 1, experts kept with their layer."""
    base = replace(layout or LlamaCppLayout(), cpu_moe=False, n_cpu_moe=0, overrides=())
    return tuple(
        _point(
            LAYERS,
            ngl,
            model.place(
                budgets,
                host_ram_bytes=host_ram_bytes,
                n_gpu_layers=ngl,
                layout=base,
                margin_bytes=margin_bytes,
            ),
            bandwidths,
        )
        for ngl in range(model.blocks + 2)
    )


def expert_curve(
    model: LlamaCppModel,
    budgets: Sequence[int],
    bandwidths: Bandwidths,
    *,
    layout: LlamaCppLayout | None = None,
    host_ram_bytes: int | None = None,
    margin_bytes: int = 0,
) -> tuple[CurvePoint, ...]:
    """Every layer on the GPUs, the routed experts of the first N layers in host RAM, for N
    from 0 to every layer with experts; empty for a model without routed experts."""
    moe = model.moe_blocks
    if not moe:
        return ()
    base = replace(layout or LlamaCppLayout(), cpu_moe=False, overrides=())
    # The layers with experts may not start at block 0 (DeepSeek's leading dense blocks): N
    # counts layers from 0, as --n-cpu-moe does, up to the last one that has experts.
    last = max(u.index for u in model.units if u.expert_bytes)
    points = []
    for n in range(last + 1):
        if n and not model.units[n].expert_bytes:
            continue  # moves nothing more than n - 1
        placement = model.place(
            budgets,
            host_ram_bytes=host_ram_bytes,
            n_gpu_layers=model.blocks + 1,
            layout=replace(base, n_cpu_moe=n),
            margin_bytes=margin_bytes,
        )
        points.append(_point(EXPERTS, n, placement, bandwidths))
    return tuple(points)


def best(points: Sequence[CurvePoint]) -> CurvePoint | None:
    """The fastest point that fits, or None."""
    fitting = [p for p in points if p.fits]
    return max(fitting, key=lambda p: p.tokens_per_second, default=None)


def best_points(
    model: LlamaCppModel,
    budgets: Sequence[int],
    bandwidths: Bandwidths,
    *,
    layout: LlamaCppLayout | None = None,
    host_ram_bytes: int | None = None,
    margin_bytes: int = 0,
) -> dict[str, CurvePoint | None]:
    """The fastest point that fits of each curve (``best`` of ``layer_curve`` and of
    ``expert_curve``), found with a few placements instead of every one.

    On either curve more on the GPUs decodes faster and takes more GPU memory and less host RAM:
    the best whole-layer point is the most layers within the GPUs' budgets, the best experts
    point the fewest expert layers in host RAM within them; where that point overflows host RAM,
    every point with less on the GPUs does too, and the curve has none.
    """
    layers_base = replace(layout or LlamaCppLayout(), cpu_moe=False, n_cpu_moe=0, overrides=())
    experts_base = replace(layout or LlamaCppLayout(), cpu_moe=False, overrides=())

    def layers_at(ngl: int) -> CurvePoint:
        placement = model.place(
            budgets,
            host_ram_bytes=host_ram_bytes,
            n_gpu_layers=ngl,
            layout=layers_base,
            margin_bytes=margin_bytes,
        )
        return _point(LAYERS, ngl, placement, bandwidths, first_token=False)

    def experts_at(n: int) -> CurvePoint:
        placement = model.place(
            budgets,
            host_ram_bytes=host_ram_bytes,
            n_gpu_layers=model.blocks + 1,
            layout=replace(experts_base, n_cpu_moe=n),
            margin_bytes=margin_bytes,
        )
        return _point(EXPERTS, n, placement, bandwidths, first_token=False)

    out: dict[str, CurvePoint | None] = {
        LAYERS: _last_within(list(range(model.blocks + 2)), layers_at, budgets, margin_bytes)
    }
    out[EXPERTS] = None
    if model.moe_blocks:
        last = max(u.index for u in model.units if u.expert_bytes)
        counts = [n for n in range(last + 1) if not n or model.units[n].expert_bytes]
        # Fewest expert layers in host RAM first: the search runs over the reversed list.
        out[EXPERTS] = _last_within(counts[::-1], experts_at, budgets, margin_bytes)
    return out


def _last_within(
    values: list[int],
    point_at: Callable[[int], CurvePoint],
    budgets: Sequence[int],
    margin_bytes: int,
) -> CurvePoint | None:
    """The point of the last of ``values`` whose GPUs stay within their budgets less the margin
    (GPU memory grows along ``values``), if it fits; a binary search."""

    def within(point: CurvePoint) -> bool:
        return all(
            used <= budget - margin_bytes
            for used, budget in zip(point.gpu_bytes, budgets, strict=True)
        )

    low, high = 0, len(values) - 1
    found: CurvePoint | None = None
    while low <= high:
        middle = (low + high) // 2
        point = point_at(values[middle])
        if within(point):
            found, low = point, middle + 1
        else:
            high = middle - 1
    return found if found is not None and found.fits else None
