"""Waiting for the real window to finish what a change started."""

from __future__ import annotations


def settled(qtbot, window, **expected) -> None:
    """Until the window's estimate is of a workload with these settings."""

    def done() -> bool:
        analysis = window.controller.analysis
        if analysis is None:
            return False
        w = analysis.estimate.workload
        return all(getattr(w, k) == v for k, v in expected.items())

    qtbot.waitUntil(done, timeout=10000)
