"""The host side of an offload plan: the RAM that holds what the GPUs do not, and the disk that
holds what RAM does not, each as the user set it or as this machine has it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vramgui.core.errors import WorkloadError
from vramgui.hardware.host import DEFAULT_DISK_READ_BYTES_PER_S, read_host_info

# Where a figure comes from (``HostSettings.ram_source`` / ``disk_source``).
SET = "set"
THIS_MACHINE = "this machine"
UNKNOWN = "unknown"
DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class HostSettings:
    """Host RAM and disk read speed for offloaded weights.

    Attributes:
        ram_bytes: RAM for weights; None where nothing says (no limit is then assumed).
        disk_bytes_per_s: sequential read speed of the disk holding what RAM does not.
        ram_source: ``set`` (by the user or a profile), ``this machine`` (available now), or
            ``unknown``.
        disk_source: ``set`` or ``default`` (a PCIe 4.0 NVMe drive).
    """

    ram_bytes: int | None
    disk_bytes_per_s: float
    ram_source: str
    disk_source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "ram_bytes": self.ram_bytes,
            "ram_source": self.ram_source,
            "disk_bytes_per_s": self.disk_bytes_per_s,
            "disk_source": self.disk_source,
        }


def this_machine(ram_available_bytes: int | None) -> HostSettings:
    """The host as a machine with ``ram_available_bytes`` free has it, the default disk."""
    source = THIS_MACHINE if ram_available_bytes is not None else UNKNOWN
    return HostSettings(ram_available_bytes, float(DEFAULT_DISK_READ_BYTES_PER_S), source, DEFAULT)


def choose_host(
    machine: HostSettings, ram_bytes: int | None = None, disk_bytes_per_s: float | None = None
) -> HostSettings:
    """The figures given (``set``), the ``machine``'s where None.

    Raises:
        WorkloadError: a figure given that is not positive.
    """
    if ram_bytes is not None and ram_bytes <= 0:
        raise WorkloadError(f"host RAM must be positive, got {ram_bytes}")
    if disk_bytes_per_s is not None and not disk_bytes_per_s > 0:
        raise WorkloadError(f"disk speed must be positive, got {disk_bytes_per_s}")
    ram = (machine.ram_bytes, machine.ram_source) if ram_bytes is None else (ram_bytes, SET)
    disk = (
        (machine.disk_bytes_per_s, machine.disk_source)
        if disk_bytes_per_s is None
        else (float(disk_bytes_per_s), SET)
    )
    return HostSettings(ram[0], disk[0], ram[1], disk[1])


def host_settings(
    ram_bytes: int | None = None, disk_bytes_per_s: float | None = None
) -> HostSettings:
    """The host figures to plan with: those given, else this machine's available RAM now and
    the default disk speed.

    Raises:
        WorkloadError: a figure given that is not positive.
    """
    return choose_host(
        this_machine(read_host_info().ram_available_bytes), ram_bytes, disk_bytes_per_s
    )


# Nothing known of the host: no RAM limit, the default disk (a window's tests, a fresh controller).
UNKNOWN_HOST = this_machine(None)
