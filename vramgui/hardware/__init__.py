"""What the machine has: local NVIDIA GPUs (NVML), the GPU catalog, host RAM and disk.

Nothing here touches a driver or a file at import time; NVML is loaded on the first snapshot.
"""

from vramgui.hardware.errors import HardwareError
from vramgui.hardware.gpus import CatalogGpu, find_gpu, load_catalog
from vramgui.hardware.host import (
    DEFAULT_DISK_READ_BYTES_PER_S,
    HostInfo,
    pcie_bytes_per_s,
    read_host_info,
)
from vramgui.hardware.nvml import GpuProcess, GpuSnapshot, LocalGpu, MigInstance, NvmlProbe

__all__ = [
    "DEFAULT_DISK_READ_BYTES_PER_S",
    "CatalogGpu",
    "GpuProcess",
    "GpuSnapshot",
    "HardwareError",
    "HostInfo",
    "LocalGpu",
    "MigInstance",
    "NvmlProbe",
    "find_gpu",
    "load_catalog",
    "pcie_bytes_per_s",
    "read_host_info",
]
