"""The background-work primitive: results reach the GUI thread; shutdown cancels and waits."""

from __future__ import annotations

import gc
import threading
import weakref

from PySide6.QtCore import QThreadPool

from vramgui.ui import workers


def test_result_is_delivered(qtbot):
    got: list[object] = []
    workers.submit(lambda: 42, got.append, got.append)
    qtbot.waitUntil(lambda: got == [42], timeout=5000)


def test_failure_is_delivered_not_raised(qtbot):
    failures: list[Exception] = []

    def boom() -> None:
        raise ValueError("bad input")

    workers.submit(boom, lambda _: None, failures.append)
    qtbot.waitUntil(lambda: len(failures) == 1, timeout=5000)
    assert str(failures[0]) == "bad input"


def test_shutdown_waits_for_running_work_and_delivers_nothing(qtbot):
    started, release = threading.Event(), threading.Event()
    delivered: list[object] = []

    def slow() -> str:
        started.set()
        release.wait(5)
        return "late"

    workers.submit(slow, delivered.append, delivered.append)
    assert started.wait(5)
    threading.Timer(0.2, release.set).start()
    workers.shutdown(timeout_ms=5000)
    assert QThreadPool.globalInstance().activeThreadCount() == 0
    qtbot.wait(100)  # let any queued delivery run: there must be none
    assert delivered == []


def test_delivered_and_cancelled_work_is_freed(qtbot):
    class Payload:
        pass

    got: list[object] = []
    done = [weakref.ref(workers.submit(Payload, got.append, got.append)) for _ in range(20)]
    qtbot.waitUntil(lambda: len(got) == 20, timeout=5000)
    held = weakref.ref(got[0])
    got.clear()
    gc.collect()
    assert all(ref() is None for ref in done)  # no worker is kept by Qt or by its signals
    assert held() is None  # nor what the work returned


def test_what_the_handlers_hold_is_let_go_on_the_gui_thread(qtbot):
    """Delivered or cancelled, a handler's captures are freed at delivery, on the GUI thread.

    A controller captured by a load's handler was once freed inside a later emit on a pool
    thread (the binding lets go of disconnected slots there): a QObject deleted off its thread,
    and a crash at its next timer (tests/ui/test_loads.py crashed about one run in five). The
    handlers are now dropped at delivery, so whatever the binding frees later holds nothing."""

    class Holder:
        pass

    freed_on: list[threading.Thread] = []
    got: list[object] = []
    for count, cancel in enumerate((False, True), start=1):
        holder = Holder()
        weakref.finalize(holder, lambda: freed_on.append(threading.current_thread()))
        worker = workers.submit(lambda: 1, lambda r, h=holder: got.append(r), got.append)
        if cancel:
            worker.cancel()
        del holder
        qtbot.waitUntil(lambda c=count: len(freed_on) == c, timeout=5000)
    assert freed_on == [threading.main_thread()] * 2
    assert got == [1]


def test_work_that_outlives_its_signals_ends_quietly(qtbot, caplog):
    # A worker still running when the application quits finds its signals' object deleted: its
    # outcome is dropped without the "Signal source has been deleted" traceback.
    import shiboken6

    worker = workers.Worker(lambda: "late")
    shiboken6.delete(worker.signals)
    with caplog.at_level("DEBUG", logger="vramgui.ui.workers"):
        worker.run()
    assert "outcome is dropped" in caplog.text
