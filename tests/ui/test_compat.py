"""The PySide6 work-arounds of ui/compat.py: applied exactly where the defect is."""

from __future__ import annotations

import json
import subprocess
import sys

import PySide6
import pytest

from vramgui.ui import compat

CALLS = 200  # far below what None and True hold at start-up (a few thousand each)

# Run in an interpreter of its own: what the suite ran before (other Qt objects, threads, imports)
# changes the reference counts read here, and an interpreter that lost references to True aborts
# when it collects them at exit, so the probe leaves with os._exit.
_PROBE = f"""
import json, os, sys
from PySide6.QtCore import QCoreApplication, QObject, Signal

class Emitter(QObject):
    changed = Signal()

app = QCoreApplication([])
emitter = Emitter()
none_before = sys.getrefcount(None)
for _ in range({CALLS}):
    emitter.setObjectName("probe")
none_lost = none_before - sys.getrefcount(None)
true_before = sys.getrefcount(True)
for _ in range({CALLS}):
    emitter.changed.emit()
print(json.dumps({{"None": none_lost, "True": true_before - sys.getrefcount(True)}}), flush=True)
os._exit(0)
"""


def _references_dropped() -> dict[str, int]:
    """How many references to None and True this PySide6 loses over CALLS void calls / emits."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    dropped: dict[str, int] = json.loads(done.stdout)
    return dropped


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None and True are immortal from 3.12")
def test_the_reserve_is_kept_exactly_where_pyside6_drops_references():
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
