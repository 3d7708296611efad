"""The one background-work primitive: a QRunnable with its own QObject of signals.

Work runs on ``QThreadPool.globalInstance()`` (or the pool it is given); it returns a plain
object or raises, and the signals deliver either to the GUI thread (queued, because the signals
object lives there). Only the GUI thread touches widgets.

Work on data anyone may have written (a model folder, a local store, a Hub repo) runs in a child
process instead (``in_process``): a thread cannot be stopped, a process can. The worker thread
waits for the child, and kills it when the worker is cancelled (a newer load supersedes it) or
the child runs past its time bound; the child is also held to ``CHILD_ADDRESS_SPACE_BYTES`` of
memory where the system allows it. Children fork from a server started once
(``multiprocessing``'s forkserver, with the readers preloaded; spawn where there is none), so
that each costs tens of milliseconds, not an interpreter's start. The server imports the
vramgui this process imported, wherever it was started from (``_start_server``). What a child
raises reaches the caller, and the log file with the child's traceback.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import select
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from vramgui.core.errors import VramguiError

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

# How long a model read may take in all (the Hub's own calls are held to 5 s each; the largest
# local checkpoints read in about 4 s here) before it is stopped, and how much memory it may
# take (the largest read in about 250 MiB).
LOAD_SECONDS = 30.0
CHILD_ADDRESS_SPACE_BYTES = 4 * 2**30
# How often a waiting worker looks at its child, its cancellation and the clock.
_POLL_SECONDS = 0.05
# What the children import before they fork: every reader a load may need.
_PRELOAD = ["vramgui.sources.resolve", "vramgui.sources.on_disk", __name__]

log = logging.getLogger(__name__)

# Workers stay referenced until their outcome reaches the GUI thread, so neither Python nor Qt
# frees one mid-run.
_RUNNING: set[Worker] = set()


class WorkerSignals(QObject):
    """What a worker reports: the work's return value, or the exception it raised."""

    finished = Signal(object)
    failed = Signal(object)


class Stopped(VramguiError):
    """Work in a child process was stopped: past its time bound, out of memory, or it died."""


class _Cancelled(Exception):
    """The worker waiting for a child was cancelled (what it returns is dropped anyway)."""


_current = threading.local()


def cancelled() -> bool:
    """Whether the worker running on this thread has been cancelled (False off a worker):
    the cooperative check of long work."""
    worker = getattr(_current, "worker", None)
    return worker is not None and worker.cancelled


def _without_tracebacks(exc: BaseException) -> BaseException:
    """``exc`` and the exceptions it was raised from or during, without their tracebacks."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = None
        pending += [current.__cause__, current.__context__]
    return exc


def _done() -> None:
    """The work of a worker that has delivered."""


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

    def drop_work(self) -> None:
        """Forget the work once it has run (what it captured goes with it)."""
        self._fn = _done

    def run(self) -> None:
        # The outcome always goes to the GUI thread, cancelled or not, and the GUI thread lets
        # the worker go: released here, the last reference to what the work holds (a window's
        # controller, whose timers are the GUI thread's) could be dropped on this thread, and
        # a QObject deleted off its thread leaves the event loop a dangling timer.
        if self.cancelled:  # superseded while it waited for a thread
            _emit(self.signals.failed, None)
            return
        _current.worker = self
        try:
            result = self._fn()
        except Exception as exc:  # a worker must never take the application down
            # Its tracebacks hold the work's frames, and through them what the work captured.
            outcome, value = self.signals.failed, _without_tracebacks(exc)
        else:
            outcome, value = self.signals.finished, result
        finally:
            _current.worker = None
        _emit(outcome, value)


def _emit(outcome: Any, value: Any) -> None:
    """Send a worker's outcome to the GUI thread, unless the application went first.

    A worker still running when the application quits finds its signals' object deleted with
    it; there is nobody left to tell, and raising here would only print a traceback at exit.
    """
    try:
        outcome.emit(value)
    except RuntimeError:  # "Signal source has been deleted"
        log.debug("a worker finished after the application: its outcome is dropped")


def submit(
    fn: Callable[[], Any],
    on_finished: Callable[[Any], None],
    on_failed: Callable[[Exception], None],
    pool: QThreadPool | None = None,
) -> Worker:
    """Run ``fn`` on a thread pool and deliver its outcome to the GUI thread.

    Args:
        fn: the work; it must not touch widgets.
        on_finished: called in the GUI thread with the return value.
        on_failed: called in the GUI thread with the exception.
        pool: where it runs; the global pool by default (``loads()`` for work that waits on a
            child process, so that waiting never holds the threads other work needs).

    Returns:
        The worker, so that the caller can cancel it.
    """
    worker = Worker(fn)
    # The handlers (and what they hold: a controller, a view) are let go on delivery, here on
    # the GUI thread; the binding frees a disconnected slot later, on whichever thread emits.
    handlers = [on_finished, on_failed]

    def deliver(index: int, value: Any) -> None:
        handler = handlers[index]
        handlers.clear()
        _release(worker)
        if not worker.cancelled:
            handler(value)

    worker.signals.finished.connect(lambda result: deliver(0, result))
    worker.signals.failed.connect(lambda exc: deliver(1, exc))
    _RUNNING.add(worker)
    # The pool runs a plain callable and frees its own wrapper; handing it the QRunnable (which
    # must not auto-delete, as Python holds it) would keep every worker alive in Qt.
    (pool or QThreadPool.globalInstance()).start(worker.run)
    return worker


def _release(worker: Worker) -> None:
    """Let a worker go, on the GUI thread. The signals hold the delivery closures and the
    closures hold the worker: a cycle through Qt's connections that Python's collector cannot
    see. Cutting it, and dropping the work, lets the worker go with nothing of the caller's."""
    _RUNNING.discard(worker)
    worker.signals.finished.disconnect()
    worker.signals.failed.disconnect()
    worker.drop_work()


def shutdown(timeout_ms: int = 5000) -> None:
    """Cancel pending work and wait for running work to end (before the application exits).

    Work still running when the interpreter tears down Qt can crash the exit; cancelled work
    delivers nothing, so no slot runs on a window that is gone. Children of cancelled work are
    killed within ``_POLL_SECONDS``.
    """
    for worker in list(_RUNNING):
        worker.cancel()
    QThreadPool.globalInstance().waitForDone(timeout_ms)
    if loads.cache_info().currsize:
        loads().waitForDone(timeout_ms)


# Several loads may wait at once (the window's, a profile's), each on its own thread.
_LOAD_THREADS = 4


@functools.cache
def loads() -> QThreadPool:
    """The pool of work that waits on child processes (created on first use)."""
    pool = QThreadPool()
    pool.setMaxThreadCount(_LOAD_THREADS)
    return pool


# ----------------------------------------------------------------------------- child processes


@functools.cache
def _context() -> ForkServerContext | SpawnContext:
    """Forkserver where the system has it (children fork from a clean, preloaded server, never
    from this process and its threads), spawn elsewhere."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(_PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


def start_processes() -> None:
    """Start the server children fork from now, so that the first load does not wait for it
    (it imports the readers on its own core meanwhile)."""
    _start_server(_context())


# The server starts once, by whichever thread needs it first; while it starts, this process's
# environment holds the server's path, which no child's copy of the environment may take.
_SERVER_LOCK = threading.Lock()


def _start_server(context: ForkServerContext | SpawnContext) -> None:
    """Start the process server, if this context has one and it is not running, on this
    process's import path.

    Python 3.11 starts it with ``python -c``, which puts the current folder first on its path,
    and its preloading ignores the path it is given: started in a source checkout, it imported
    the checkout's ``vramgui/`` while this process ran an installed one (which alone has
    ``vramgui.resources``), and every load failed. It starts here with the safe path (no
    current folder) and this process's path in ``PYTHONPATH``, set for the start alone. Spawned
    children are given this process's path by multiprocessing itself.
    """
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    path = [entry or os.getcwd() for entry in sys.path]  # "": the current folder
    with _SERVER_LOCK:
        saved = {name: os.environ.get(name) for name in ("PYTHONSAFEPATH", "PYTHONPATH")}
        os.environ["PYTHONSAFEPATH"] = "1"
        os.environ["PYTHONPATH"] = os.pathsep.join(e for e in path if os.pathsep not in e)
        try:
            forkserver.ensure_running()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def in_process(fn: Callable[[str], Any], seconds: float = LOAD_SECONDS) -> Callable[[str], Any]:
    """``fn`` run in a child process for each call (see ``run_in_process``); ``fn`` must be a
    module-level function, as the child imports it by name."""
    return functools.partial(run_in_process, fn, seconds=seconds)


def run_in_process(fn: Callable[..., Any], *args: Any, seconds: float = LOAD_SECONDS) -> Any:
    """``fn(*args)`` in a child process: its return value, or the exception it raised.

    Called on a worker thread, which waits. The child is killed when the worker is cancelled,
    or when it has run ``seconds``.

    Raises:
        Stopped: the child ran past ``seconds``, ran out of memory, or died; the message says
            which.
    """
    context = _context()
    _start_server(context)
    receiving, sending = context.Pipe(duplex=False)
    # This process's environment now (the server's is the one it started with).
    with _SERVER_LOCK:
        environment = dict(os.environ)
    child = context.Process(target=_child, args=(sending, environment, fn, args), daemon=True)
    child.start()
    sending.close()
    deadline = time.monotonic() + seconds
    try:
        while not receiving.poll(_POLL_SECONDS):
            if cancelled():
                raise _Cancelled
            if not child.is_alive() and not receiving.poll(0):
                raise _logged(
                    Stopped(f"Reading {_what(args)} failed: {_death(child.exitcode)}"), args
                )
            if time.monotonic() > deadline:
                raise _logged(
                    Stopped(
                        f"Stopped reading {_what(args)}: it took longer than {seconds:.0f} s (a "
                        "folder on a slow or hung disk, or a network that does not answer?)"
                    ),
                    args,
                )
        try:
            ok, value, child_traceback = receiving.recv()
        except (EOFError, OSError):
            child.join(1)
            stopped = Stopped(f"Reading {_what(args)} failed: {_death(child.exitcode)}")
            raise _logged(stopped, args) from None
    finally:
        receiving.close()
        if child.is_alive():
            child.kill()
        child.join(1)
    if ok:
        return value
    raise _logged(value, args, child_traceback)


def _logged(exc: BaseException, args: tuple[Any, ...], child_traceback: str = "") -> BaseException:
    """``exc``, written to the log (the file a bug report attaches) with the traceback the child
    gave: an error of vramgui's own (a model that cannot be read) as a warning, any other (a
    bug) as an error."""
    level = logging.WARNING if isinstance(exc, VramguiError) else logging.ERROR
    text = child_traceback or f"{type(exc).__name__}: {exc}"
    log.log(level, "The process reading %s failed: %s", _what(args), text.rstrip())
    return exc


def _child(
    sending: Connection, environment: dict[str, str], fn: Callable[..., Any], args: tuple[Any, ...]
) -> None:
    os.environ.clear()
    os.environ.update(environment)
    _hold_memory(CHILD_ADDRESS_SPACE_BYTES)
    _end_with_the_caller(sending)
    # What it returned or raised, and the traceback of what it raised (which does not pickle).
    try:
        outcome: tuple[bool, Any, str] = (True, fn(*args), "")
    except MemoryError:
        limit = CHILD_ADDRESS_SPACE_BYTES // 2**30
        outcome = (
            False,
            Stopped(f"Stopped reading {_what(args)}: it took more than {limit} GiB of memory"),
            "",
        )
    except Exception as exc:
        outcome = (False, exc, "".join(traceback.format_exception(exc)))
    try:
        sending.send(outcome)
    except Exception as exc:  # a result or an exception that does not pickle
        stopped = Stopped(f"Reading {_what(args)} failed: {type(exc).__name__}")
        sending.send((False, stopped, "".join(traceback.format_exception(exc))))


def _end_with_the_caller(sending: Connection) -> None:
    """End this process as soon as nobody waits for its answer: the window closed or crashed
    before it could stop the child (a hung disk would otherwise keep it, and the process
    server it holds open, alive for ever). The pipe's far end closing is the sign."""
    if not hasattr(select, "poll"):
        return  # Windows: the child lives until its load ends
    poller = select.poll()
    poller.register(sending.fileno(), 0)  # only POLLERR and POLLHUP: the reader went away

    def watch() -> None:
        poller.poll()
        os._exit(1)

    threading.Thread(target=watch, name="caller-watch", daemon=True).start()


def _hold_memory(limit: int) -> None:
    """Hold this process to ``limit`` bytes of address space, where the system allows it."""
    if sys.platform != "linux":
        return  # macOS does not enforce it; Windows has no such limit
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _what(args: tuple[Any, ...]) -> str:
    text = str(args[0]) if args else "the model"
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the process reading it ended on signal {-exitcode}"
    return f"the process reading it ended (exit status {exitcode})"
