"""GPU names as the user gives them ("RTX 4090", "local") to capacities the fit logic takes."""

from __future__ import annotations

from vramgui.hardware.errors import HardwareError


def resolve_capacities(names: list[str], use_free: bool = False) -> list[tuple[str, int]]:
    """Catalog GPU names and "local" to (name, capacity_bytes) pairs.

    Args:
        names: catalog GPU names, or "local" for the GPUs NVML reports.
        use_free: measure local GPUs by their free memory rather than their total.
    """
    capacities: list[tuple[str, int]] = []
    for name in names:
        if name.strip().lower() == "local":
            from vramgui.hardware.nvml import NvmlProbe

            probe = NvmlProbe()
            try:
                snapshot = probe.snapshot()
            finally:
                probe.close()
            if not snapshot.gpus:
                raise HardwareError(snapshot.reason or "no local NVIDIA GPU found")
            capacities.extend(snapshot.capacities(use_free))
        else:
            from vramgui.hardware.gpus import find_gpu

            gpu = find_gpu(name)
            capacities.append((gpu.name, gpu.capacity_bytes()))
    return capacities
