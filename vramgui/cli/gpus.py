"""``vramgui gpus``: the NVIDIA GPUs of this machine (and why none), or the GPU catalog."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.text import table
from vramgui.core.units import format_bytes

if TYPE_CHECKING:
    from vramgui.hardware.gpus import CatalogGpu
    from vramgui.hardware.nvml import GpuSnapshot, NvmlProbe

SCHEMA = "vramgui.gpus/1"
CATALOG_SCHEMA = "vramgui.gpu-catalog/1"


def probe_factory() -> NvmlProbe:
    """The probe this command reads; tests replace it with one over a fake NVML module."""
    from vramgui.hardware.nvml import NvmlProbe

    return NvmlProbe()


def add_parser(subparsers: Any) -> None:
    """Register ``vramgui gpus`` on the top-level subparsers."""
    parser = subparsers.add_parser(
        "gpus",
        help=SUBCOMMANDS["gpus"],
        description="List the NVIDIA GPUs of this machine with their memory, or the GPU catalog.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--catalog", action="store_true", help="list the catalog GPUs used for what-if fits instead"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the local GPUs or the catalog; a machine without GPUs is not an error."""
    if args.catalog:
        from vramgui.hardware.gpus import load_catalog

        gpus = load_catalog()
        if args.json:
            document = {"schema": CATALOG_SCHEMA, "gpus": [_catalog_dict(gpu) for gpu in gpus]}
            print(json.dumps(document, indent=2))
        else:
            print(_catalogtable(gpus))
        return 0
    probe = probe_factory()
    try:
        snapshot = probe.snapshot()
    finally:
        probe.close()
    if args.json:
        print(json.dumps(snapshot_document(snapshot), indent=2))
    else:
        print(_snapshottable(snapshot))
    return 0


def snapshot_document(snapshot: GpuSnapshot) -> dict[str, Any]:
    """The ``vramgui.gpus/1`` JSON document of a snapshot (bytes as integers)."""
    return {
        "schema": SCHEMA,
        "gpus": [dataclasses.asdict(gpu) for gpu in snapshot.gpus],
        "driver_version": snapshot.driver_version,
        "cuda_version": snapshot.cuda_version,
        "reason": snapshot.reason,
    }


def _catalog_dict(gpu: CatalogGpu) -> dict[str, Any]:
    document = dataclasses.asdict(gpu)
    document["capacity_bytes"] = gpu.capacity_bytes()
    document["engines_unavailable"] = dict(gpu.engines_unavailable)
    return document


def _size(n: int | None) -> str:
    return "?" if n is None else format_bytes(n)


def _nvml_total(gpu: CatalogGpu) -> str:
    """NVML's total for the GPU: "?" where no published output gave it, "-" where NVML does not
    see the GPU."""
    if not gpu.nvml:
        return "-"
    return "?" if gpu.nvml_total_bytes is None else format_bytes(gpu.nvml_total_bytes)


def _tflops(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _snapshottable(snapshot: GpuSnapshot) -> str:
    versions = f"Driver {snapshot.driver_version or '?'}, CUDA {snapshot.cuda_version or '?'}"
    if not snapshot.gpus:
        return f"No NVIDIA GPUs. {snapshot.reason or ''}".rstrip()
    rows = []
    for gpu in snapshot.gpus:
        pcie = f"gen{gpu.pcie_gen or '?'} x{gpu.pcie_width or '?'}"
        processes = "?" if gpu.processes is None else str(len(gpu.processes))
        rows.append(
            (
                str(gpu.index),
                gpu.name or "?",
                _size(gpu.total_bytes),
                _size(gpu.used_bytes),
                _size(gpu.free_bytes),
                pcie,
                processes,
                gpu.error or "",
            )
        )
        rows.extend(
            (
                f"{gpu.index}.{mig.index}",
                f"  {mig.name or 'MIG device'}",
                _size(mig.total_bytes),
                _size(mig.used_bytes),
                _size(mig.free_bytes),
                "",
                "",
                mig.error or "",
            )
            for mig in gpu.mig_instances or ()
        )
    listing = table(("#", "GPU", "total", "used", "free", "PCIe", "procs", "problem"), rows)
    footer = f"\n{snapshot.reason}" if snapshot.reason else ""
    return f"{versions}\n{listing}{footer}"


def _catalogtable(gpus: tuple[CatalogGpu, ...]) -> str:
    rows = [
        (
            gpu.name,
            gpu.vendor,
            format_bytes(gpu.memory_bytes),
            "-" if gpu.usable_memory_bytes is None else format_bytes(gpu.usable_memory_bytes),
            _nvml_total(gpu),
            f"{gpu.memory_bandwidth_gbps:,.0f} GB/s",
            _tflops(gpu.bf16_tflops or gpu.fp16_tflops),
            "-" if gpu.typical_price_usd is None else f"${gpu.typical_price_usd:,}",
            "-" if gpu.rent_usd_per_hour is None else f"${gpu.rent_usd_per_hour:,.2f}",
            "yes" if gpu.nvml else "no",
        )
        for gpu in gpus
    ]
    header = ("GPU", "vendor", "memory", "GPU share", "NVML total", "bandwidth", "16-bit TFLOPS",
              "price", "rent/hour", "NVML")  # fmt: skip
    return table(header, rows)
