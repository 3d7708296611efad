"""Round numbers for chart axes: where ticks go and how they read. Qt-free."""

from __future__ import annotations

import math


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k that is at least ``value``."""
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 3, 4, 5, 6, 8):
        if step * power >= value:
            return step * power
    return 10 * power


def nice_step(span: float, count: float) -> float:
    """A tick step of 1, 2 or 5 x 10^k that gives about ``count`` ticks over ``span``."""
    raw = span / max(count, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 5):
        if step * power >= raw:
            return step * power
    return 10 * power


def short_count(value: float) -> str:
    """A count as sizes are written: 512, 1k, 128k, 1M (powers of two), else with separators."""
    n = round(value)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}k"
    return f"{n:,}"


LOG_MANTISSAS = (1, 2, 3, 5)


def log_bounds(low: float, high: float) -> tuple[float, float]:
    """A range on a log axis holding ``[low, high]`` with a margin, ending at 1-2-3-5 values.

    Ends at round values so that nearby data keeps the same range (and the same ticks).
    """
    low, high = max(low, 1e-12), max(high, low)
    values = [
        m * 10.0**e
        for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 2)
        for m in LOG_MANTISSAS
    ]
    bottom = max((v for v in values if v <= low * 0.85), default=values[0])
    top = min((v for v in values if v >= high * 1.2), default=values[-1])
    return bottom, top


def log_ticks(low: float, high: float, mantissas: tuple[int, ...] = LOG_MANTISSAS) -> list[float]:
    """The ``mantissas`` x 10^k values (default 1, 2, 3, 5) within ``[low, high]``."""
    return [
        m * 10.0**e
        for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        for m in mantissas
        if low * (1 - 1e-9) <= m * 10.0**e <= high * (1 + 1e-9)
    ]


def log_ticks_within(low: float, high: float, most: float) -> list[float]:
    """Ticks on a log axis, at most about ``most`` of them: 1-2-3-5, else 1-2-5, 1-3, decades."""
    for mantissas in ((1, 2, 3, 5), (1, 2, 5), (1, 3), (1,)):
        values = log_ticks(low, high, mantissas)
        if len(values) <= most:
            return values
    return values[:: math.ceil(len(values) / max(most, 1.0))]


def rate_label(value: float) -> str:
    """A tick label on a rate axis: 1,000 or 0.02."""
    return f"{value:,.0f}" if value >= 1 else f"{value:.2g}"
