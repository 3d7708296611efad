"""Shared bounds of the fuzz tests: time per example, memory per example, the errors allowed."""

from __future__ import annotations

import json
import signal
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from vramgui.core.errors import VramguiError

CORPUS = Path(__file__).resolve().parent / "corpus"
# A parser gets this long and this much memory for one input; a header claiming 10^15 bytes
# must be refused without allocating it.
SECONDS_PER_EXAMPLE = 5.0
MAX_PEAK_BYTES = 64 * 2**20

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def corpus(name: str) -> Any:
    """A JSON seed file of ``tests/fuzz/corpus``."""
    return json.loads((CORPUS / name).read_text(encoding="utf-8"))


@contextmanager
def bounded(seconds: float = SECONDS_PER_EXAMPLE) -> Iterator[None]:
    """Fail the example (TimeoutError) when its body runs longer than ``seconds``."""

    def expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"a parser ran longer than {seconds} s on one input")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def parse_safely(fn: Callable[[], Any]) -> Any:
    """Run one parse within the bounds: only vramgui's own errors may escape (returned as None).

    Raises:
        AssertionError: the parse raised anything else, or its peak allocation passed the bound.
    """
    tracemalloc.start()
    try:
        with bounded():
            try:
                return fn()
            except VramguiError as exc:
                assert str(exc), "a vramgui error must say what is wrong"
                return None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < MAX_PEAK_BYTES, f"one input made the parser allocate {peak} bytes"
