"""A forward pass as the allocations and frees its code makes, each sized over the batch and the
prompt length, and the peak of those live bytes at any batch and length.

Programs (blocks.py, mixers.py, experts.py) are written line by line after transformers'
modelling code: every tensor an op creates is a :meth:`Program.new`, every tensor Python lets go
of (a reassigned local, a function's return) a :meth:`Program.free`. A size is a sum of
:class:`Term` s, each a product of the batch, the prompt length and a few step functions of it
(rounded up to a chunk, capped by a window or a top-k, present only past a threshold), so one
program gives the peak at every shape: the live sum after each allocation is kept as a
:class:`Size`, and :class:`Peak` evaluates the largest of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Term:
    """``batch**batch x S**seq x min(prompt, cap)`` where ``S`` is the prompt length rounded up
    to a multiple of ``pad``; nothing while the prompt is ``above`` tokens or fewer, nor while
    the batch is ``batch_above`` sequences or fewer."""

    batch: int = 0
    seq: int = 0
    pad: int = 1
    cap: int = 0
    above: int = 0
    batch_above: int = 0

    def value(self, batch: int, seq: int) -> int:
        if seq <= self.above or batch <= self.batch_above:
            return 0
        s = -(-seq // self.pad) * self.pad if self.pad > 1 else seq
        out: int = batch**self.batch * s**self.seq
        return out * min(seq, self.cap) if self.cap else out


class Size:
    """Bytes as a sum of terms with integer coefficients (negative where a program gives back
    what another component counts)."""

    __slots__ = ("terms",)

    def __init__(self, terms: Mapping[Term, int] | None = None) -> None:
        self.terms: dict[Term, int] = {t: c for t, c in (terms or {}).items() if c}

    def __add__(self, other: Size) -> Size:
        out = dict(self.terms)
        for t, c in other.terms.items():
            out[t] = out.get(t, 0) + c
        return Size(out)

    def __sub__(self, other: Size) -> Size:
        return self + other * -1

    def __mul__(self, factor: int) -> Size:
        return Size({t: c * factor for t, c in self.terms.items()})

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Size) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def __repr__(self) -> str:
        return f"Size({self.terms!r})"

    def at(self, batch: int, seq: int) -> int:
        return sum(c * t.value(batch, seq) for t, c in self.terms.items())


ONE = Size({Term(): 1})
BATCH = Size({Term(batch=1): 1})  # one element per sequence
SEQ = Size({Term(seq=1): 1})  # one element per position, shared by the batch
TOKENS = Size({Term(batch=1, seq=1): 1})  # one element per prompt token
SCORES = Size({Term(batch=1, seq=2): 1})  # one element per (query, key) pair of a sequence
SEQ_SQUARED = Size({Term(seq=2): 1})  # a (query, key) grid shared by the batch


def padded_tokens(chunk: int) -> Size:
    """One element per token of the prompt padded to a multiple of ``chunk``."""
    return Size({Term(batch=1, seq=1, pad=chunk): 1})


def capped_scores(cap: int) -> Size:
    """One element per query and each of at most ``cap`` keys (a top-k selection)."""
    return Size({Term(batch=1, seq=1, cap=cap): 1})


def longer_than(size: Size, tokens: int) -> Size:
    """``size`` while the prompt is longer than ``tokens``, nothing otherwise."""
    return Size(
        {
            Term(t.batch, t.seq, t.pad, t.cap, max(t.above, tokens), t.batch_above): c
            for t, c in size.terms.items()
        }
    )


def batched(size: Size) -> Size:
    """``size`` while the batch holds more than one sequence (a broadcast that a single sequence
    folds into a view and a batch copies), nothing otherwise."""
    return Size(
        {
            Term(t.batch, t.seq, t.pad, t.cap, t.above, max(t.batch_above, 1)): c
            for t, c in size.terms.items()
        }
    )


class Program:
    """Allocations and frees in the order the code makes them; the live total after each
    allocation is a candidate for the peak."""

    def __init__(self) -> None:
        self._live: dict[int, Size] = {}
        self._total = Size()
        self._next = 0
        self._points: list[Size] = []

    def new(self, size: Size) -> int:
        """A tensor of ``size`` bytes; returns its handle."""
        self._next += 1
        self._live[self._next] = size
        self._total = self._total + size
        self._points.append(self._total)
        return self._next

    def free(self, *handles: int) -> None:
        """Python lets go of these tensors (each handle once)."""
        for h in handles:
            self._total = self._total - self._live.pop(h)

    def scratch(self, size: Size) -> None:
        """A tensor made and let go of at once (an op's temporary)."""
        self.free(self.new(size))

    @property
    def live(self) -> Size:
        return self._total

    def peak(self) -> Peak:
        return Peak(self._points)


class Peak:
    """The largest of a program's live totals, at any batch and prompt length.

    Totals that another total matches or exceeds term by term (every term is non-negative) are
    dropped, so evaluating a shape costs a few dot products.
    """

    __slots__ = ("_points", "_terms")

    def __init__(self, points: Iterable[Size]) -> None:
        unique = list(dict.fromkeys(points))
        terms = sorted({t for p in unique for t in p.terms})
        vectors = [tuple(p.terms.get(t, 0) for t in terms) for p in unique]
        # A total that dominates another is at least as large at every shape, so with the totals
        # in decreasing order of their sum at one shape a total's dominators come before it.
        reference = [t.value(2, 4099) for t in terms]
        vectors.sort(key=lambda v: -sum(c * r for c, r in zip(v, reference, strict=True)))
        kept: list[tuple[int, ...]] = []
        for v in vectors:
            if not any(all(a <= b for a, b in zip(v, w, strict=True)) for w in kept):
                kept.append(v)
        self._terms = tuple(terms)
        self._points = tuple(kept)

    def at(self, batch: int, seq: int) -> int:
        values = [t.value(batch, seq) for t in self._terms]
        return max(
            (sum(c * v for c, v in zip(p, values, strict=True)) for p in self._points), default=0
        )
