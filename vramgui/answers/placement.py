"""The words of an offload plan a front end draws: its devices, units and pieces, what bounds
its speed, the kinds of llama.cpp curves, and the speeds and margin it starts from. Names only;
the plans themselves are ``answers.offload``'s."""

from __future__ import annotations

from vramgui.core.offload import (
    CPU,
    CPU_COMPUTE,
    CPU_MEMORY,
    DEFAULT_MARGIN_BYTES,
    DISK,
    DISK_READ,
    GPU_COMPUTE,
    GPU_MEMORY,
    GPU_MEMORY_EFFICIENCY,
    HOST_MEMORY_EFFICIENCY,
    PCIE,
    SYNC,
    Bandwidths,
    LlamaCppModel,
    Piece,
    PlacedUnit,
    Placement,
    Throughput,
    gpu_index,
    is_gpu,
)
from vramgui.core.offload.curves import EXPERTS, LAYERS, CurvePoint
from vramgui.core.offload.fit import FitResult
from vramgui.core.offload.overrides import LlamaCppLayout

__all__ = [
    "CPU",
    "CPU_COMPUTE",
    "CPU_MEMORY",
    "DEFAULT_MARGIN_BYTES",
    "DISK",
    "DISK_READ",
    "EXPERTS",
    "GPU_COMPUTE",
    "GPU_MEMORY",
    "GPU_MEMORY_EFFICIENCY",
    "HOST_MEMORY_EFFICIENCY",
    "LAYERS",
    "PCIE",
    "SYNC",
    "Bandwidths",
    "CurvePoint",
    "FitResult",
    "LlamaCppLayout",
    "LlamaCppModel",
    "Piece",
    "PlacedUnit",
    "Placement",
    "Throughput",
    "gpu_index",
    "is_gpu",
]
