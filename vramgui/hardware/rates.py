"""A catalog GPU as the speed model sees it (``core.speed.Hardware``), and its rental price."""

from __future__ import annotations

from vramgui.core.errors import WorkloadError
from vramgui.core.speed import Hardware, Price
from vramgui.hardware.gpus import CatalogGpu
from vramgui.hardware.host import pcie_bytes_per_s

GB = 1e9


def speed_hardware(gpu: CatalogGpu, dtype: str) -> Hardware:
    """The speed model's view of ``gpu`` computing in ``dtype`` ("bf16", "fp16" or "fp32").

    fp32 training runs its products at the 16-bit tensor rate's TF32 half where the catalog
    knows no fp32 rate (PyTorch leaves TF32 off for matrix products by default: slower still).

    Raises:
        WorkloadError: the catalog has no tensor rate for this GPU in that dtype, or no
            memory bandwidth.
    """
    sixteen = gpu.bf16_tflops if dtype == "bf16" else gpu.fp16_tflops
    if dtype == "fp32":
        sixteen = gpu.bf16_tflops or gpu.fp16_tflops
    if not sixteen:
        raise WorkloadError(
            f"{gpu.name}: the catalog has no {dtype} tensor rate for this GPU, so no speed"
        )
    flops = sixteen * 1e12 / (2 if dtype == "fp32" else 1)
    pcie = pcie_bytes_per_s(gpu.pcie_gen or 4)
    link = gpu.interconnect_gbps * GB if gpu.interconnect_gbps else float(pcie)
    return Hardware(
        name=gpu.name,
        flops=flops,
        memory_bytes_per_s=gpu.memory_bandwidth_bytes_per_s,
        link_bytes_per_s=link,
        pcie_bytes_per_s=float(pcie),
        architecture=gpu.architecture,
        memory_type=gpu.memory_type,
    )


def rental_price(gpu: CatalogGpu) -> Price | None:
    """The catalog's on-demand price of one ``gpu`` for an hour, or None where it has none."""
    if gpu.rent_usd_per_hour is None:
        return None
    return Price(
        per_gpu_hour=gpu.rent_usd_per_hour,
        currency="USD",
        source=gpu.rent_source or "vramgui GPU catalog",
        date=gpu.rent_date or "",
    )
