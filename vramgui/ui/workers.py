"""The one background-work primitive: a QRunnable with its own QObject of signals.

Work runs on ``QThreadPool.globalInstance()``; it returns a plain object or raises, and the
signals deliver either to the GUI thread (queued, because the signals object lives there).
Only the GUI thread touches widgets.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

# Workers stay referenced until their outcome reaches the GUI thread, so neither Python nor Qt
# frees one mid-run.
_RUNNING: set[Worker] = set()


class WorkerSignals(QObject):
    """What a worker reports: the work's return value, or the exception it raised."""

    finished = Signal(object)
    failed = Signal(object)


class Worker(QRunnable):
    """Runs ``fn()`` off the GUI thread; cancelling drops whatever it later returns."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__()
        self.setAutoDelete(False)
        self._fn = fn
        self._cancelled = threading.Event()
        self.signals = WorkerSignals()

    def cancel(self) -> None:
        """Forget the result: neither ``finished`` nor ``failed`` will be emitted."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def run(self) -> None:
        if self.cancelled:  # superseded while it waited for a thread
            _release(self)
            return
        try:
            result = self._fn()
        except Exception as exc:  # a worker must never take the application down
            outcome, value = self.signals.failed, exc
        else:
            outcome, value = self.signals.finished, result
        if self.cancelled:
            # Nothing will be delivered, so nothing waits for the reference.
            _release(self)
        else:
            outcome.emit(value)


def submit(
    fn: Callable[[], Any],
    on_finished: Callable[[Any], None],
    on_failed: Callable[[Exception], None],
) -> Worker:
    """Run ``fn`` on the global thread pool and deliver its outcome to the GUI thread.

    Args:
        fn: the work; it must not touch widgets.
        on_finished: called in the GUI thread with the return value.
        on_failed: called in the GUI thread with the exception.

    Returns:
        The worker, so that the caller can cancel it.
    """
    worker = Worker(fn)

    def finished(result: Any) -> None:
        _release(worker)
        on_finished(result)

    def failed(exc: Exception) -> None:
        _release(worker)
        on_failed(exc)

    worker.signals.finished.connect(finished)
    worker.signals.failed.connect(failed)
    _RUNNING.add(worker)
    # The pool runs a plain callable and frees its own wrapper; handing it the QRunnable (which
    # must not auto-delete, as Python holds it) would keep every worker alive in Qt.
    QThreadPool.globalInstance().start(worker.run)
    return worker


def _release(worker: Worker) -> None:
    # The signals hold the delivery closures and the closures hold the worker: a cycle through
    # Qt's connections that Python's collector cannot see. Cutting it lets the worker go.
    _RUNNING.discard(worker)
    worker.signals.finished.disconnect()
    worker.signals.failed.disconnect()


def shutdown(timeout_ms: int = 5000) -> None:
    """Cancel pending work and wait for running work to end (before the application exits).

    Work still running when the interpreter tears down Qt can crash the exit; cancelled work
    delivers nothing, so no slot runs on a window that is gone.
    """
    for worker in list(_RUNNING):
        worker.cancel()
    QThreadPool.globalInstance().waitForDone(timeout_ms)
