"""Streaming one unit at a time (FlexGen, ZeRO-Inference, accelerate's sequential offload):
every unit in host RAM or on disk, copied through a GPU slot when it runs; the one-layer
floor."""

from __future__ import annotations

from collections.abc import Sequence

from vramgui.core.model import ModelSpec
from vramgui.core.offload.budget import (
    HostRam,
    compute_buffers,
    engine_workload,
    finish,
    overhead,
    tensor_room,
)
from vramgui.core.offload.devices import CPU, gpu_device
from vramgui.core.offload.placement import ModelUnit, PlacedUnit, Placement, model_units
from vramgui.core.workload import Workload, served_family


def _slot_bytes(units: Sequence[ModelUnit], prefetch: bool) -> int:
    largest = sorted((u.bytes for u in units), reverse=True)
    return sum(largest[: 2 if prefetch else 1])


def min_vram_bytes(spec: ModelSpec, workload: Workload, *, prefetch: bool = False) -> int:
    """The one-layer floor: the largest unit (two with prefetching) plus buffers and overhead.

    The KV cache is left in host memory, as FlexGen does when the GPU is this small, so its dtype
    (even one only llama.cpp or vLLM offers) does not matter here. GGUF weights are streamed by
    llama.cpp (with its compute buffer), others by transformers.

    Raises:
        WorkloadError: a quantization that does not apply to the model.
    """
    engine = (
        "llamacpp" if served_family(workload.quant, spec.quantization) == "gguf" else "transformers"
    )
    workload = engine_workload(spec, workload.with_(kv_dtype="auto"), engine)
    tensors = _slot_bytes(model_units(spec, workload), prefetch) + compute_buffers(spec, workload)
    return tensors + overhead(workload, tensors)


def plan_streaming(
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int,
    *,
    host_ram_bytes: int | None = None,
    prefetch: bool = False,
    margin_bytes: int = 0,
) -> Placement:
    """Every unit in host RAM (then on disk), copied through a GPU slot when it runs.

    The KV cache stays on the GPU when it fits beside the slot, else in host memory, where the
    attention over it runs on the CPU (FlexGen's choice for small GPUs).

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as transformers).
        vram_budget_bytes: GPU memory allowed.
        host_ram_bytes: host RAM allowed; units beyond it are read from disk. None: no limit.
        prefetch: copy the next unit while the current one computes (two slots).
        margin_bytes: GPU memory kept free when deciding where the KV cache goes.

    Raises:
        WorkloadError: settings transformers does not support.
    """
    workload = engine_workload(spec, workload, "transformers")
    units = model_units(spec, workload)
    buffers = compute_buffers(spec, workload)
    stream = _slot_bytes(units, prefetch)
    kv_total = sum(u.kv_cache_bytes for u in units)
    room = tensor_room(workload, vram_budget_bytes - margin_bytes)
    kv_on_gpu = stream + buffers + kv_total <= room
    host = HostRam(host_ram_bytes)
    if host.left is not None and not kv_on_gpu:
        host.left -= kv_total
    kv_device = gpu_device(0) if kv_on_gpu else CPU
    placed = [PlacedUnit(u, host.place(u), kv_device, 0) for u in units]
    notes = [
        "Each unit is copied to the GPU when it runs"
        + (", the next one while the current computes." if prefetch else ".")
    ]
    if not kv_on_gpu:
        notes.append("The KV cache does not fit beside the slot: it stays in host RAM.")
    return finish(
        "streaming",
        workload,
        placed,
        gpu_layers=0,
        budgets=(vram_budget_bytes,),
        tensors=(stream + buffers + (kv_total if kv_on_gpu else 0),),
        stream=stream,
        buffers=buffers,
        host_ram_bytes=host_ram_bytes,
        notes=notes,
        margin_bytes=margin_bytes,
    )
