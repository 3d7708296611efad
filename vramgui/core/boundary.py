"""The largest value whose total fits a capacity, in few estimates: a search on totals that never
decrease with the value (the batch or the context of :func:`fit.largest_fitting`)."""

from __future__ import annotations

import math
from collections.abc import Callable


def largest_fitting_value(
    total: Callable[[int], int | None], capacity: int, step: int, upper: int
) -> int | None:
    """``upper`` if its total fits ``capacity``, else the largest multiple of ``step`` below it
    whose total fits (None: not even ``step``); totals never decrease with the value, and None
    (invalid settings) never fits.

    Totals are close to straight lines or parabolas in the value (the KV cache, activations and
    gradients grow with the tokens; eager attention's scores with the square of the context),
    so each guess is where a parabola through the bracket's ends and the nearest point before
    them reaches the capacity; guesses that fail to halve the bracket three times in a row give
    way to a halving step. That takes about five estimates where halving alone takes fifteen
    to twenty, and the answer is the same: the one boundary of a monotone total.
    """
    low = step
    low_total = total(low)
    if low_total is None or low_total > capacity:
        return None
    high_total = total(upper)
    if high_total is not None and high_total <= capacity:
        return upper
    high = upper  # invariant: low fits, high does not
    # The last two (value, total) pairs evaluated on each side of the boundary, latest last.
    fitting = [(low, low_total)]
    failing = [] if high_total is None else [(upper, high_total)]
    slow = 0  # guesses in a row that did not halve the bracket
    while high - low > step:
        width = high - low
        guess = _guess(fitting, failing, capacity, low, high) if slow < _PATIENCE else None
        if guess is None:
            guess, slow = (low + high) // 2, 0
        # On the grid of multiples of step, strictly inside the bracket.
        point = min(max(int(guess) // step * step, low + step), (high - 1) // step * step)
        value = total(point)
        if value is not None and value <= capacity:
            low = point
            fitting = [*fitting[-1:], (point, value)]
        else:
            high = point
            if value is not None:
                failing = [*failing[-1:], (point, value)]
        slow = slow + 1 if 2 * (high - low) > width else 0
    return low


# Guesses in a row allowed to leave more than half the bracket before a halving step.
_PATIENCE = 3
_Point = tuple[int, int]  # a value and its total


def _guess(
    fitting: list[_Point], failing: list[_Point], capacity: int, low: int, high: int
) -> float | None:
    """Where the totals reach ``capacity`` inside (low, high), from the points nearest it."""
    if not failing:
        return None
    if len(fitting) == 2 == len(failing) and fitting[0][1] == fitting[1][1]:
        # Flat below the boundary (vLLM's pool takes what the batch leaves): the rise above it
        # tells where it ends.
        root = _line_root(failing[0], failing[1], capacity)
        if root is not None and low < root < high:
            return root
    ends = [fitting[-1], failing[-1]]
    earlier = fitting[:-1] + failing[:-1]
    if earlier:
        third = min(earlier, key=lambda p: min(abs(p[0] - low), abs(p[0] - high)))
        root = _parabola_root((third, ends[0], ends[1]), capacity, low, high)
        if root is not None:
            return root
    root = _line_root(ends[0], ends[1], capacity)
    return root if root is not None and low < root < high else None


def _line_root(a: _Point, b: _Point, capacity: int) -> float | None:
    """Where the line through ``a`` and ``b`` reaches ``capacity`` (None: level)."""
    (x0, y0), (x1, y1) = a, b
    if y0 == y1:
        return None
    return x0 + (capacity - y0) * (x1 - x0) / (y1 - y0)


def _parabola_root(
    points: tuple[_Point, _Point, _Point], capacity: int, low: int, high: int
) -> float | None:
    """The value in (low, high) where the parabola through ``points`` reaches ``capacity``
    (the root nearest the last point), or None."""
    (x0, y0), (x1, y1), (x2, y2) = points
    d01 = (y1 - y0) / (x1 - x0)
    d12 = (y2 - y1) / (x2 - x1)
    a = (d12 - d01) / (x2 - x0)
    b = d01 - a * (x0 + x1)
    c = y0 - d01 * x0 + a * x0 * x1 - capacity
    if a == 0:
        roots = [-c / b] if b else []
    else:
        disc = b * b - 4 * a * c
        if disc < 0:
            return None
        # The numerically stable pair of roots.
        q = -0.5 * (b + math.copysign(math.sqrt(disc), b))
        roots = [q / a, c / q] if q else [q / a]
    inside = [r for r in roots if low < r < high]
    return min(inside, key=lambda r: abs(r - x2), default=None)
