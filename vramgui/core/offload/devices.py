"""Where a placed unit can live: a GPU (``gpu:0``, ``gpu:1``...), host RAM (``cpu``) or disk."""

from __future__ import annotations

CPU = "cpu"
DISK = "disk"


def gpu_device(index: int = 0) -> str:
    """The device name of GPU ``index`` (``gpu:0``)."""
    return f"gpu:{index}"


def is_gpu(device: str) -> bool:
    return device.startswith("gpu:")


def gpu_index(device: str) -> int:
    """The index of a GPU device name (``gpu:1`` -> 1)."""
    return int(device.split(":", 1)[1])
