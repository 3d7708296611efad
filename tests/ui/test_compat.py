"""The PySide6 work-arounds of ui/compat.py: applied exactly where the defect is."""

from __future__ import annotations

import sys

import PySide6
import pytest
from PySide6.QtCore import QObject, Signal

from vramgui.ui import compat

CALLS = 200  # far below what None and True hold at start-up (a few thousand each)


class _Emitter(QObject):
    changed = Signal()


def _references_dropped() -> dict[str, int]:
    """How many references to None and True this PySide6 loses over CALLS void calls / emits."""
    emitter = _Emitter()
    none_before = sys.getrefcount(None)
    for _ in range(CALLS):
        emitter.setObjectName("probe")
    none_lost = none_before - sys.getrefcount(None)
    true_before = sys.getrefcount(True)
    for _ in range(CALLS):
        emitter.changed.emit()
    return {"None": none_lost, "True": true_before - sys.getrefcount(True)}


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None and True are immortal from 3.12")
def test_the_reserve_is_kept_exactly_where_pyside6_drops_references(qapp):
    dropped = _references_dropped()
    leaks = all(lost >= CALLS for lost in dropped.values())
    version = PySide6.__version__
    if leaks:
        assert compat.needs_reserve(), (
            f"PySide6 {version} drops references ({dropped} over {CALLS} calls) outside "
            f"compat.DROPPING_RELEASES {compat.DROPPING_RELEASES}: widen the range"
        )
    else:
        assert not compat.needs_reserve(), (
            f"PySide6 {version} no longer drops references ({dropped}): end "
            "compat.DROPPING_RELEASES before it, or remove keep_singletons_alive once no "
            "supported release needs it"
        )
        assert max(dropped.values()) <= 0


@pytest.mark.parametrize(
    ("pyside", "python", "needed"),
    [
        ((6, 11), (3, 11), False),
        ((6, 12), (3, 11), True),
        ((6, 13), (3, 11), False),
        ((6, 12), (3, 12), False),
    ],
)
def test_the_reserve_follows_the_release_range(pyside, python, needed):
    assert compat.needs_reserve(pyside, python) is needed
