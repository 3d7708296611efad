"""Per-layer offloading: which unit of the model lives on a GPU, in host RAM or on disk, and its speed.

A model is cut into *units*, the pieces engines place as a whole: the embeddings, each decoder
block, and the output (final norm and LM head). Three placement rules follow real engines:

- llama.cpp (``-ngl N``): the last N repeating blocks go to the GPU, the output unit joins them only
  when every block fits (``N > n_layer``), token embeddings always stay in host memory, and each
  block's KV cache lives with its block unless ``--no-kv-offload``.
- accelerate ``infer_auto_device_map``: units fill the GPUs in order, then ``"cpu"``, then
  ``"disk"``; the main devices (first GPU, CPU) keep room for the largest unit, which offloaded
  units are copied into when they run.
- Streaming one unit at a time (FlexGen, ZeRO-Inference, accelerate's sequential offload): every
  unit stays in host RAM or on disk and visits the GPU when it runs. The GPU needs only the largest
  unit (two with prefetching) plus buffers: the one-layer floor.

The speed model is a roofline: per decode step, each unit costs the bytes it must read from where it
lives over that link's bandwidth, against its FLOPs at the device's rate. llama.cpp computes host
layers on the CPU; accelerate and streaming copy them over PCIe to the GPU (accelerate's hooks wait
for each copy, streaming overlaps copies with compute).

The package: placement.py (units, devices, the Placement record), budget.py (what every planner
keeps beside the weights and checks against a budget), llamacpp.py, accelerate.py and
streaming.py (one planner each), planners.py (a planner by name), throughput.py (the roofline),
defaults.py (the figures a user may change, light enough for a command's help).

The package imports a module when one of its names is first used: ``vramgui plan --help`` shows
the defaults without building the planners and the estimator behind them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vramgui.core.offload.accelerate import (
        plan_accelerate,
    )
    from vramgui.core.offload.defaults import (
        DEFAULT_CPU_FLOPS,
        DEFAULT_CPU_RAM_BYTES_PER_S,
        DEFAULT_CPU_RAM_PEAK_BYTES_PER_S,
        DEFAULT_FIT_MIN_CONTEXT,
        DEFAULT_MARGIN_BYTES,
        GPU_MEMORY_EFFICIENCY,
        HOST_MEMORY_EFFICIENCY,
        LLAMACPP_SPLIT_SECONDS,
        PLANNERS,
    )
    from vramgui.core.offload.devices import (
        CPU,
        DISK,
        gpu_device,
        gpu_index,
        is_gpu,
    )
    from vramgui.core.offload.llamacpp import (
        LlamaCppModel,
        llamacpp_gpu_bytes,
        llamacpp_model,
        max_gpu_layers,
        plan_llamacpp,
    )
    from vramgui.core.offload.placement import (
        EMBEDDINGS,
        OUTPUT,
        ModelUnit,
        Piece,
        PlacedUnit,
        Placement,
        UnitTensor,
        layer_weights,
        model_units,
    )
    from vramgui.core.offload.planners import (
        plan,
    )
    from vramgui.core.offload.streaming import (
        min_vram_bytes,
        plan_streaming,
    )
    from vramgui.core.offload.throughput import (
        COMPUTE_RESOURCES,
        CPU_COMPUTE,
        CPU_MEMORY,
        DEFAULT_BATCHES,
        DISK_READ,
        GPU_COMPUTE,
        GPU_MEMORY,
        LLAMACPP_OP_OFFLOAD_MIN_BATCH,
        PCIE,
        SYNC,
        Bandwidths,
        Throughput,
        compute_bound_batch,
        decode_throughput,
        expected_bandwidths,
        prefill_seconds,
        throughput_curve,
    )

# Each module and the names the package takes from it.
_MODULES: dict[str, tuple[str, ...]] = {
    "accelerate": ("plan_accelerate",),
    "defaults": (
        "DEFAULT_CPU_FLOPS",
        "DEFAULT_CPU_RAM_BYTES_PER_S",
        "DEFAULT_CPU_RAM_PEAK_BYTES_PER_S",
        "DEFAULT_FIT_MIN_CONTEXT",
        "DEFAULT_MARGIN_BYTES",
        "GPU_MEMORY_EFFICIENCY",
        "HOST_MEMORY_EFFICIENCY",
        "LLAMACPP_SPLIT_SECONDS",
        "PLANNERS",
    ),
    "devices": ("CPU", "DISK", "gpu_device", "gpu_index", "is_gpu"),
    "llamacpp": (
        "LlamaCppModel",
        "llamacpp_gpu_bytes",
        "llamacpp_model",
        "max_gpu_layers",
        "plan_llamacpp",
    ),
    "placement": (
        "EMBEDDINGS",
        "OUTPUT",
        "ModelUnit",
        "Piece",
        "PlacedUnit",
        "Placement",
        "UnitTensor",
        "layer_weights",
        "model_units",
    ),
    "planners": ("plan",),
    "streaming": ("min_vram_bytes", "plan_streaming"),
    "throughput": (
        "COMPUTE_RESOURCES",
        "CPU_COMPUTE",
        "CPU_MEMORY",
        "DEFAULT_BATCHES",
        "DISK_READ",
        "GPU_COMPUTE",
        "GPU_MEMORY",
        "LLAMACPP_OP_OFFLOAD_MIN_BATCH",
        "PCIE",
        "SYNC",
        "Bandwidths",
        "Throughput",
        "compute_bound_batch",
        "decode_throughput",
        "expected_bandwidths",
        "prefill_seconds",
        "throughput_curve",
    ),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of the package, its module imported on first use (PEP 562)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(_HOME)


__all__ = [
    "COMPUTE_RESOURCES",
    "CPU",
    "CPU_COMPUTE",
    "CPU_MEMORY",
    "DEFAULT_BATCHES",
    "DEFAULT_CPU_FLOPS",
    "DEFAULT_CPU_RAM_BYTES_PER_S",
    "DEFAULT_CPU_RAM_PEAK_BYTES_PER_S",
    "DEFAULT_FIT_MIN_CONTEXT",
    "DEFAULT_MARGIN_BYTES",
    "DISK",
    "DISK_READ",
    "EMBEDDINGS",
    "GPU_COMPUTE",
    "GPU_MEMORY",
    "GPU_MEMORY_EFFICIENCY",
    "HOST_MEMORY_EFFICIENCY",
    "LLAMACPP_OP_OFFLOAD_MIN_BATCH",
    "LLAMACPP_SPLIT_SECONDS",
    "OUTPUT",
    "PCIE",
    "PLANNERS",
    "SYNC",
    "Bandwidths",
    "LlamaCppModel",
    "ModelUnit",
    "Piece",
    "PlacedUnit",
    "Placement",
    "Throughput",
    "UnitTensor",
    "compute_bound_batch",
    "decode_throughput",
    "expected_bandwidths",
    "gpu_device",
    "gpu_index",
    "is_gpu",
    "layer_weights",
    "llamacpp_gpu_bytes",
    "llamacpp_model",
    "max_gpu_layers",
    "min_vram_bytes",
    "model_units",
    "plan",
    "plan_accelerate",
    "plan_llamacpp",
    "plan_streaming",
    "prefill_seconds",
    "throughput_curve",
]
