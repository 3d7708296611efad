"""The host side of offloading: RAM that can hold layers, and how fast they arrive from disk or RAM.

Figures nobody can read reliably without a benchmark (disk read speed, real PCIe throughput) are
defaults here that the user may edit; RAM is read from the OS and is None where it cannot be.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# A mainstream PCIe 4.0 NVMe SSD reads sequentially at about 3.5 GB/s (PCIe 3.0 drives ~2-3.5,
# 5.0 drives up to ~12); loading weights is a large sequential read, so this is the default.
DEFAULT_DISK_READ_BYTES_PER_S = 3_500_000_000

# Theoretical bytes per second of one PCIe lane: GT/s x encoding efficiency / 8 bits.
# Gen 1-2 use 8b/10b, gen 3-5 128b/130b; gen 6 (PAM4, FLIT) doubles gen 5.
PCIE_LANE_BYTES_PER_S: dict[int, int] = {
    1: 250_000_000,
    2: 500_000_000,
    3: 984_615_385,
    4: 1_969_230_769,
    5: 3_938_461_538,
    6: 7_876_923_077,
}

# What host-to-GPU copies from pinned memory reach in practice on x16, about 80% of theoretical
# after packet overhead: CUDA's bandwidthTest shows ~12-13 GB/s on gen 3, ~25 on gen 4 and
# ~50-55 on gen 5. The offload view uses these; pageable memory is slower still.
PCIE_X16_PRACTICAL_BYTES_PER_S: dict[int, int] = {
    1: 3_000_000_000,
    2: 6_000_000_000,
    3: 12_000_000_000,
    4: 25_000_000_000,
    5: 50_000_000_000,
    6: 100_000_000_000,
}

_MEMINFO = Path("/proc/meminfo")


def pcie_bytes_per_s(gen: int, width: int = 16, practical: bool = True) -> int:
    """Host-to-GPU bandwidth of a PCIe link, practical (default) or theoretical.

    Unknown generations are treated as the nearest known one, so a newer bus is never slower.
    """
    known = max(1, min(gen, max(PCIE_LANE_BYTES_PER_S)))
    if practical:
        return PCIE_X16_PRACTICAL_BYTES_PER_S[known] * width // 16
    return PCIE_LANE_BYTES_PER_S[known] * width


@dataclass(frozen=True, slots=True)
class HostInfo:
    """This machine's RAM (None where the OS would not say) and the disk read speed to assume.

    ``ram_available_bytes`` is what can be allocated without swapping (Linux MemAvailable), not
    merely the free pages.
    """

    ram_total_bytes: int | None
    ram_available_bytes: int | None
    disk_read_bytes_per_s: int


def read_host_info(
    disk_read_bytes_per_s: int = DEFAULT_DISK_READ_BYTES_PER_S, meminfo: Path = _MEMINFO
) -> HostInfo:
    """Read the host's RAM now. Never raises.

    Args:
        disk_read_bytes_per_s: the user's figure for their disk; the default otherwise.
        meminfo: the Linux meminfo file (a parameter so tests can hand in a sample).
    """
    total, available = _linux_meminfo(meminfo)
    if total is None and sys.platform == "win32":
        total, available = _windows_memory()
    if total is None:
        total, available = _sysconf_memory()
    return HostInfo(
        ram_total_bytes=total,
        ram_available_bytes=available,
        disk_read_bytes_per_s=disk_read_bytes_per_s,
    )


def _linux_meminfo(path: Path) -> tuple[int | None, int | None]:
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None, None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            # meminfo says "kB" and means KiB.
            values[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    total = values.get("MemTotal")
    # Kernels before 3.14 have no MemAvailable; free + page cache is the usual estimate.
    available = values.get("MemAvailable")
    if available is None and "MemFree" in values:
        available = values["MemFree"] + values.get("Cached", 0) + values.get("Buffers", 0)
    return total, available


def _sysconf_memory() -> tuple[int | None, int | None]:
    """Physical pages via sysconf (Linux, macOS, BSD). Available pages exist on Linux only."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
    except (AttributeError, ValueError, OSError):
        return None, None
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * page
    except (ValueError, OSError):
        available = None
    return (total if total > 0 else None), available


class _MemoryStatusEx(ctypes.Structure):
    _fields_ = (
        ("dwLength", ctypes.c_ulong),
        ("dwMemoryLoad", ctypes.c_ulong),
        ("ullTotalPhys", ctypes.c_ulonglong),
        ("ullAvailPhys", ctypes.c_ulonglong),
        ("ullTotalPageFile", ctypes.c_ulonglong),
        ("ullAvailPageFile", ctypes.c_ulonglong),
        ("ullTotalVirtual", ctypes.c_ulonglong),
        ("ullAvailVirtual", ctypes.c_ulonglong),
        ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
    )


def _windows_memory() -> tuple[int | None, int | None]:
    """GlobalMemoryStatusEx, the Win32 call Task Manager's figures come from."""
    try:
        status = _MemoryStatusEx()
        status.dwLength = ctypes.sizeof(_MemoryStatusEx)
        if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):  # type: ignore[attr-defined]
            return None, None
    except (AttributeError, OSError):
        return None, None
    return int(status.ullTotalPhys), int(status.ullAvailPhys)
