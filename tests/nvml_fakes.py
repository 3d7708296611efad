"""Stand-ins for ``vramgui.hardware.nvml.NvmlProbe`` that the command-line tests patch in."""

from vramgui.core.units import GiB


def one_gpu_probe(name: str, total_gib: int, used_gib: int) -> type:
    """An NvmlProbe class that sees one GPU called ``name`` with ``used_gib`` of ``total_gib``
    in use (driver 560.0, CUDA 12.6, PCIe 4.0 x16)."""

    class OneGpuProbe:
        def snapshot(self):
            from vramgui.hardware.nvml import GpuSnapshot, LocalGpu

            gpu = LocalGpu(
                index=0,
                name=name,
                uuid="GPU-0",
                total_bytes=total_gib * GiB,
                free_bytes=(total_gib - used_gib) * GiB,
                used_bytes=used_gib * GiB,
                reserved_bytes=None,
                processes=(),
                pcie_gen=4,
                pcie_width=16,
                mig_enabled=False,
                mig_instances=(),
            )
            return GpuSnapshot(gpus=(gpu,), driver_version="560.0", cuda_version="12.6")

        def close(self):
            pass

    return OneGpuProbe
