"""The trade between GPU memory and decode speed, for llama.cpp: whole layers on the GPU
(``-ngl`` from 0 to every layer), or every layer on the GPU with the routed experts of the first
N layers in host RAM (``--n-cpu-moe`` from 0 to all of them). Each point is a placement and its
roofline, so the curves follow the same rules as a single plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramgui.core.offload.llamacpp import LlamaCppModel
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.offload.placement import Placement
from vramgui.core.offload.throughput import Bandwidths, decode_throughput

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
    """

    kind: str
    value: int
    gpu_bytes: tuple[int, ...]
    host_bytes: int
    tokens_per_second: float
    fits: bool

    @property
    def total_gpu_bytes(self) -> int:
        return sum(self.gpu_bytes)

    @property
    def flag(self) -> str:
        return f"-ngl {self.value}" if self.kind == LAYERS else f"--n-cpu-moe {self.value}"


def _point(kind: str, value: int, placement: Placement, bandwidths: Bandwidths) -> CurvePoint:
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
