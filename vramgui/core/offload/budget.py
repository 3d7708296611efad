"""What a GPU keeps beside the weights (compute buffers, runtime overhead), the room left for
tensors in a budget, host RAM handed out in order, and a placement's totals checked against
its budgets: the parts every planner shares."""

from __future__ import annotations

import math
from collections.abc import Sequence

from vramgui.core import estimate, inference
from vramgui.core.model import ModelSpec
from vramgui.core.offload.devices import CPU, DISK
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.offload.placement import GpuShare, ModelUnit, PlacedUnit, Placement
from vramgui.core.units import format_bytes
from vramgui.core.workload import Workload


def engine_workload(spec: ModelSpec, workload: Workload, engine: str) -> Workload:
    """The workload served by ``engine``.

    Raises:
        WorkloadError: the engine does not run the settings or the checkpoint as stored (a GGUF
            quantization under transformers, which dequantizes it on load).
    """
    if workload.mode != "inference":
        workload = workload.with_(mode="inference")
    if workload.engine != engine:
        workload = workload.with_(engine=engine)
    workload.check_checkpoint(spec.quantization)
    return workload


def compute_buffers(spec: ModelSpec, workload: Workload) -> int:
    """Activations / compute buffers of one forward with the workload's engine."""
    return inference.inference_breakdown(spec, workload).activations_bytes


def overhead(workload: Workload, gpu_tensor_bytes: int) -> int:
    return estimate.runtime_overhead_bytes(workload, gpu_tensor_bytes)


def tensor_room(workload: Workload, budget: int) -> int:
    """The most tensor bytes a GPU of ``budget`` bytes holds once its runtime overhead is paid."""
    base = overhead(workload, 0)
    # The overhead grows linearly with the tensors it serves (allocator slack); undo that share.
    slope = (overhead(workload, 1 << 40) - base) / (1 << 40)
    return math.floor((budget - base) / (1 + slope))


def finish(
    planner: str,
    workload: Workload,
    placed: Sequence[PlacedUnit],
    *,
    gpu_layers: int,
    budgets: tuple[int, ...],
    tensors: Sequence[int],
    stream: int,
    buffers: int,
    host_ram_bytes: int | None,
    notes: list[str],
    margin_bytes: int,
    used_gpus: Sequence[int] | None = None,
    layout: LlamaCppLayout | None = None,
    shares: Sequence[GpuShare] = (),
) -> Placement:
    """The placement record: each GPU's memory (tensors plus runtime overhead, on the GPUs the
    engine uses), host RAM and disk, and whether it all fits."""
    in_use = set(range(len(tensors)) if used_gpus is None else used_gpus)
    used = tuple(t + overhead(workload, t) if i in in_use else t for i, t in enumerate(tensors))
    host = sum(piece.bytes for p in placed for piece in p.parts if piece.device == CPU)
    host += sum(p.unit.kv_cache_bytes for p in placed if p.kv_device == CPU)
    disk = sum(piece.bytes for p in placed for piece in p.parts if piece.device == DISK)
    fits = True
    for i, (need, budget) in enumerate(zip(used, budgets, strict=True)):
        if need > budget:
            fits = False
            notes.append(
                f"GPU {i} needs {format_bytes(need)}, over its budget of {format_bytes(budget)}."
            )
        elif need > budget - margin_bytes:
            notes.append(
                f"GPU {i} keeps {format_bytes(budget - need)} free, less than the "
                f"{format_bytes(margin_bytes)} safety margin."
            )
    if host_ram_bytes is not None and host > host_ram_bytes:
        fits = False
        notes.append(
            f"Host RAM needs {format_bytes(host)}, over the {format_bytes(host_ram_bytes)} allowed."
        )
    return Placement(
        planner=planner,
        workload=workload,
        units=tuple(placed),
        gpu_layers=gpu_layers,
        vram_budget_bytes=budgets,
        gpu_bytes=used,
        host_bytes=host,
        disk_bytes=disk,
        stream_bytes=stream,
        buffers_bytes=buffers,
        overhead_bytes=max(used[i] - tensors[i] for i in range(len(used))),
        fits=fits,
        notes=tuple(notes),
        margin_bytes=margin_bytes,
        layout=layout,
        shares=tuple(shares),
    )


class HostRam:
    """Host RAM handed out to units in order; what does not fit is read from disk."""

    def __init__(self, capacity_bytes: int | None) -> None:
        self.left = capacity_bytes  # None: unlimited

    def place(self, unit: ModelUnit) -> str:
        """``cpu`` while the RAM lasts, then ``disk``."""
        return self.place_bytes(unit.bytes)

    def place_bytes(self, size: int) -> str:
        """``cpu`` for ``size`` bytes while the RAM lasts, then ``disk``."""
        if self.left is None:
            return CPU
        if size <= self.left:
            self.left -= size
            return CPU
        return DISK
