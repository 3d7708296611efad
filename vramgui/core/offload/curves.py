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


def place_point(
    model: LlamaCppModel,
    kind: str,
    value: int,
    budgets: Sequence[int],
    *,
    layout: LlamaCppLayout | None = None,
    host_ram_bytes: int | None = None,
    margin_bytes: int = 0,
) -> Placement:
    """The placement a curve point stands for: ``-ngl value``, experts kept with their layer
    (``LAYERS``), or every layer on the GPUs with the routed experts of the first ``value``
    layers in host RAM (``EXPERTS``); the rest of ``layout`` as given."""
    base = replace(layout or LlamaCppLayout(), cpu_moe=False, overrides=())
    if kind == LAYERS:
        base, n_gpu_layers = replace(base, n_cpu_moe=0), value
    else:
        base, n_gpu_layers = replace(base, n_cpu_moe=value), model.blocks + 1
    return model.place(
        budgets,
        host_ram_bytes=host_ram_bytes,
        n_gpu_layers=n_gpu_layers,
        layout=base,
        margin_bytes=margin_bytes,
    )


def expert_counts(model: LlamaCppModel) -> list[int]:
    """The ``--n-cpu-moe`` values of the experts curve: 0 up to the last layer with experts,
    counted from 0 as --n-cpu-moe does (DeepSeek's leading dense blocks move nothing more, so
    they are skipped); none for a model without routed experts."""
    if not model.moe_blocks:
        return []
    last = max(u.index for u in model.units if u.expert_bytes)
    return [n for n in range(last + 1) if not n or model.units[n].expert_bytes]


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
    where = _Where(model, budgets, layout, host_ram_bytes, margin_bytes)
    return tuple(where.point(LAYERS, ngl, bandwidths) for ngl in range(model.blocks + 2))


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
    from 0 to every layer with experts (``expert_counts``); empty for a model without routed
    experts."""
    where = _Where(model, budgets, layout, host_ram_bytes, margin_bytes)
    return tuple(where.point(EXPERTS, n, bandwidths) for n in expert_counts(model))


@dataclass(frozen=True, slots=True)
class _Where:
    """What every point of a curve is placed with."""

    model: LlamaCppModel
    budgets: Sequence[int]
    layout: LlamaCppLayout | None
    host_ram_bytes: int | None
    margin_bytes: int

    def point(
        self, kind: str, value: int, bandwidths: Bandwidths, *, first_token: bool = True
    ) -> CurvePoint:
        placement = place_point(
            self.model,
            kind,
            value,
            self.budgets,
            layout=self.layout,
            host_ram_bytes=self.host_ram_bytes,
            margin_bytes=self.margin_bytes,
        )
        return _point(kind, value, placement, bandwidths, first_token=first_token)


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
    where = _Where(model, budgets, layout, host_ram_bytes, margin_bytes)

    def at(kind: str) -> Callable[[int], CurvePoint]:
        return lambda value: where.point(kind, value, bandwidths, first_token=False)

    layers = list(range(model.blocks + 2))
    # Fewest expert layers in host RAM first: the search runs over the reversed counts.
    experts = expert_counts(model)[::-1]
    return {
        LAYERS: _last_within(layers, at(LAYERS), budgets, margin_bytes),
        EXPERTS: _last_within(experts, at(EXPERTS), budgets, margin_bytes) if experts else None,
    }


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
