"""Bytes <-> human units. The one place that knows 1000 versus 1024."""

from __future__ import annotations

import re
from typing import Literal

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4

Unit = Literal["GiB", "GB"]

_FACTORS = {
    "b": 1,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, default_unit: str = "GiB") -> int:
    """Parse "24", "24 GiB", "80GB", "512 MiB" into bytes.

    Raises:
        ValueError: the text is not a non-negative size with a known unit.
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    number, unit = float(match.group(1)), (match.group(2) or default_unit).lower()
    if unit not in _FACTORS:
        raise ValueError(f"unknown unit {match.group(2)!r} in {text!r}")
    return round(number * _FACTORS[unit])


def format_bytes(n: int | float, unit: Unit = "GiB", digits: int = 2) -> str:
    """Format a byte count in GiB (binary) or GB (decimal), falling back to smaller units."""
    if unit == "GiB":
        steps = (("GiB", GiB), ("MiB", MiB), ("KiB", KiB))
    else:
        steps = (("GB", GB), ("MB", MB), ("KB", KB))
    # Stay in the large unit down to a tenth of it ("0.50 GiB" reads better than "512.00 MiB").
    for i, (name, factor) in enumerate(steps):
        if abs(n) >= (factor / 10 if i == 0 else factor):
            return f"{n / factor:,.{digits}f} {name}"
    return f"{int(n):,} B"


def to_unit(n: int | float, unit: Unit = "GiB") -> float:
    """Bytes as a float in GiB or GB, for charts."""
    return n / (GiB if unit == "GiB" else GB)
