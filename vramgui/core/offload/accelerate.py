"""accelerate's ``infer_auto_device_map``: units fill the GPUs in order, then host RAM, then
disk; the first GPU keeps the activations, the slot offloaded units are copied into and the
KV cache of every block that runs there."""

from __future__ import annotations

from collections.abc import Sequence

from vramgui.core.errors import WorkloadError
from vramgui.core.model import ModelSpec
from vramgui.core.offload.budget import (
    compute_buffers,
    engine_workload,
    finish,
    tensor_room,
)
from vramgui.core.offload.devices import CPU, DISK, gpu_device, is_gpu
from vramgui.core.offload.placement import ModelUnit, PlacedUnit, Placement, model_units
from vramgui.core.workload import Workload

# Rounds of re-placing until the main GPU's KV reservation matches the blocks it serves.
_ACCELERATE_ROUNDS = 8


def _accelerate_fill(
    units: Sequence[ModelUnit], rooms: Sequence[int], cpu_room: int | None
) -> list[int]:
    """infer_auto_device_map's walk: per unit, a GPU index, len(rooms) for CPU or one more for disk.

    ``rooms`` are the bytes each GPU gives to units; units on the first GPU count their weights only
    (its KV cache is reserved by the caller), on the others their weights and KV cache.
    """
    used = [0] * len(rooms)
    current, cpu_used, cpu_full = 0, 0, False
    out = []
    for u in units:
        need = u.bytes
        while current < len(rooms):
            need = u.bytes + (u.kv_cache_bytes if current > 0 else 0)
            if used[current] + need <= rooms[current]:
                break
            current += 1
        if current < len(rooms):
            used[current] += need
            out.append(current)
        elif not cpu_full and (cpu_room is None or cpu_used + u.bytes <= cpu_room):
            cpu_used += u.bytes
            out.append(len(rooms))
        else:
            # Like the GPUs, a device once passed is never returned to.
            cpu_full = True
            out.append(len(rooms) + 1)
    return out


def plan_accelerate(
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int | Sequence[int],
    *,
    host_ram_bytes: int | None = None,
    margin_bytes: int = 0,
) -> Placement:
    """accelerate's ``infer_auto_device_map`` with the decoder block as the unit it never splits.

    Units fill each GPU in order, then ``"cpu"`` up to ``host_ram_bytes``, then ``"disk"``. The
    first GPU and the CPU keep room for the largest unit. Offloaded units execute on the first
    GPU, so it also holds their KV cache and the activations; the budget given to accelerate's
    ``max_memory`` is what is left after them.

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as transformers).
        vram_budget_bytes: GPU memory allowed, one figure per GPU (or one for a single GPU).
        host_ram_bytes: host RAM allowed; None means no limit.
        margin_bytes: memory each GPU keeps free of what ``max_memory`` gives accelerate.

    Raises:
        WorkloadError: settings transformers does not support, or no GPU budget.
    """
    budgets = (
        (vram_budget_bytes,) if isinstance(vram_budget_bytes, int) else tuple(vram_budget_bytes)
    )
    if not budgets:
        raise WorkloadError("accelerate needs at least one GPU budget")
    workload = engine_workload(spec, workload, "transformers")
    units = model_units(spec, workload)
    buffers = compute_buffers(spec, workload)
    largest = max(u.bytes for u in units)
    devices = [gpu_device(i) for i in range(len(budgets))]
    room = [tensor_room(workload, b - margin_bytes) for b in budgets]
    cpu_room = None if host_ram_bytes is None else host_ram_bytes - largest
    # The main GPU keeps the activations, the slot for the largest unit and the KV cache of every
    # block that does not sit on another GPU (offloaded blocks run on the main GPU). Which blocks
    # those are depends on the placement, so place until the reservation settles.
    kv_main = sum(u.kv_cache_bytes for u in units)
    gpus = len(budgets)
    for _ in range(_ACCELERATE_ROUNDS):
        room_main = room[0] - kv_main - buffers - largest
        devices_of = _accelerate_fill(units, [room_main, *room[1:]], cpu_room)
        settled = sum(
            u.kv_cache_bytes for u, d in zip(units, devices_of, strict=True) if not 0 < d < gpus
        )
        if settled == kv_main:
            break
        kv_main = settled
    placed: list[PlacedUnit] = []
    for u, d in zip(units, devices_of, strict=True):
        device = devices[d] if d < gpus else (CPU if d == gpus else DISK)
        kv_device = device if is_gpu(device) else devices[0]
        placed.append(PlacedUnit(u, device, kv_device, u.bytes if is_gpu(device) else 0))
    stream = max((p.unit.bytes for p in placed if not is_gpu(p.device)), default=0)
    tensors = []
    for i, dev in enumerate(devices):
        weights = sum(p.unit.bytes for p in placed if p.device == dev)
        kv = sum(p.unit.kv_cache_bytes for p in placed if p.kv_device == dev)
        tensors.append(weights + kv + (buffers + stream if i == 0 else 0))
    notes = []
    if stream:
        notes.append(
            "Offloaded units are copied to the first GPU on every forward; accelerate waits for "
            "each copy."
        )
    return finish(
        "accelerate",
        workload,
        placed,
        gpu_layers=sum(
            1 for p in placed if is_gpu(p.device) and 0 < p.unit.index <= len(units) - 2
        ),
        budgets=budgets,
        tensors=tensors,
        stream=stream,
        buffers=buffers,
        host_ram_bytes=host_ram_bytes,
        notes=notes,
        margin_bytes=margin_bytes,
    )
