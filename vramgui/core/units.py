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


_COUNT_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
MAX_COUNT = 10**18


def parse_count(text: str) -> int:
    """A count as people write it: "200M", "1.5B", "500k", "2e9", "1,000,000".

    Raises:
        ValueError: not a count of at least 1 (and below 10^18).
    """
    cleaned = text.strip().replace(",", "").replace("_", "").lower()
    factor = _COUNT_SUFFIXES.get(cleaned[-1:], 1.0)
    if factor != 1.0:
        cleaned = cleaned[:-1]
    try:
        value = float(cleaned) * factor
    except ValueError:
        raise ValueError(f"not a count: {text!r} (e.g. 200M, 1.5B)") from None
    if not 1 <= value < MAX_COUNT:
        raise ValueError(f"a count must be at least 1, got {text!r}")
    return round(value)


def format_count(value: int) -> str:
    """200M, 1.5B, 12k, 950: a count short enough for a label (parse_count reads it back)."""
    for suffix, factor in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= factor:
            return f"{value / factor:.3g}{suffix}"
    return str(value)


def format_duration(seconds: float) -> str:
    """A wall time at a glance: 3 s, 12 min, 5.2 h, 3.1 days."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def format_wait(seconds: float) -> str:
    """A wait of a few seconds or less, to the hundredth (0.84 s); longer ones as durations."""
    return f"{seconds:.2f} s" if seconds < 10 else format_duration(seconds)


def format_money(amount: float, currency: str | None = "USD") -> str:
    """$1,234, $12.50, 85.00 EUR."""
    if currency in (None, "USD"):
        return f"${amount:,.0f}" if amount >= 100 else f"${amount:,.2f}"
    return f"{amount:,.2f} {currency}"


def format_rate(tokens_per_second: float) -> str:
    """Tokens/s with the digits that matter, from 0.0035 to 12,000."""
    if tokens_per_second >= 100:
        return f"{tokens_per_second:,.0f}"
    if tokens_per_second >= 1:
        return f"{tokens_per_second:.1f}"
    return f"{tokens_per_second:.2g}"
