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


def host_settings(
    ram_bytes: int | None = None, disk_bytes_per_s: float | None = None
) -> HostSettings:
    """The host figures to plan with: those given, else this machine's available RAM now and
    the default disk speed.

    Raises:
        WorkloadError: a figure given that is not positive.
    """
    if ram_bytes is not None and ram_bytes <= 0:
        raise WorkloadError(f"host RAM must be positive, got {ram_bytes}")
    if disk_bytes_per_s is not None and not disk_bytes_per_s > 0:
        raise WorkloadError(f"disk speed must be positive, got {disk_bytes_per_s}")
    if ram_bytes is not None:
        ram, ram_source = ram_bytes, SET
    else:
        ram = read_host_info().ram_available_bytes
        ram_source = THIS_MACHINE if ram is not None else UNKNOWN
    if disk_bytes_per_s is not None:
        return HostSettings(ram, float(disk_bytes_per_s), ram_source, SET)
    return HostSettings(ram, float(DEFAULT_DISK_READ_BYTES_PER_S), ram_source, DEFAULT)
