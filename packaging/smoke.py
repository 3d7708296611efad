"""Smoke check of the real application: start it, wait for the main window, optionally grab it, quit.

Runs ``vramgui.ui.app.main()`` itself (identity, logging, excepthook, real services, first-run
default) and watches it from timers: once the main window is visible and the background work it
started (loading the default model) has finished, it saves a screenshot when asked and quits.
It fails (exit 1) when no window appears in time, when an error reaches the excepthook, or when a
dialog is open at the end (a first run must not greet anyone with an error).

    python packaging/smoke.py [--screenshot PATH] [--settle-ms N] [--timeout-ms N]
    dist/vramgui/vramgui --smoke-test [same options]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow


def process_age_s() -> float:
    """Seconds since this process started (Linux: from /proc, so a bundle's unpacking counts too)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat, open("/proc/uptime") as uptime:
            # Field 22 is the start time in clock ticks after boot; the name (field 2) may hold spaces.
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


# Times are reported from the start of the process where the OS tells it, else from this import.
STARTED = time.perf_counter() - process_age_s()
POLL_MS = 50
log = logging.getLogger("vramgui.smoke")


def say(message: str) -> None:
    """Report one line on stdout (absent in a windowed Windows bundle) and in the log file."""
    log.info(message)
    if sys.stdout is not None:
        print(f"smoke: {message}", flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The smoke check's options."""
    parser = argparse.ArgumentParser(
        prog="vramgui --smoke-test", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--screenshot", type=Path, help="save the main window as this PNG")
    parser.add_argument(
        "--settle-ms",
        type=int,
        default=1500,
        help="wait at least this long after the window shows (charts drawn) before quitting",
    )
    parser.add_argument(
        "--timeout-ms", type=int, default=60_000, help="give up (exit 1) after this long"
    )
    return parser.parse_args(argv)


class Watch:
    """Timers that watch the running application and end it, with what they have seen."""

    def __init__(self, settle_ms: int, timeout_ms: int, screenshot: Path | None) -> None:
        self.settle_ms = settle_ms
        self.timeout_ms = timeout_ms
        self.screenshot = screenshot
        self.shown_s: float | None = None
        self.idle_polls = 0
        self.errors: list[str] = []
        self.qapp: QApplication | None = None
        self.timer: QTimer | None = None

    def attach(self, qapp: QApplication) -> None:
        """Start watching ``qapp`` (its event loop runs the polls)."""
        from PySide6.QtCore import QTimer

        self.qapp = qapp
        self.timer = QTimer()
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.poll)
        self.timer.start()

    def record_error(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        """``sys.excepthook`` while watching: the app's own would wait on a dialog nobody clicks."""
        self.errors.append("".join(traceback.format_exception(kind, value, tb)))
        log.error("Unhandled error during the smoke check", exc_info=(kind, value, tb))
        self.end(1)

    def end(self, status: int) -> None:
        """Stop watching and leave the event loop with ``status``."""
        assert self.qapp is not None and self.timer is not None
        self.timer.stop()
        self.qapp.exit(status)

    def poll(self) -> None:
        """Wait for the main window, then for the background work it started, then finish."""
        from PySide6.QtCore import QThreadPool
        from PySide6.QtWidgets import QMainWindow

        assert self.qapp is not None
        sys.excepthook = self.record_error
        elapsed_ms = (time.perf_counter() - STARTED) * 1000
        windows = [
            w for w in self.qapp.topLevelWidgets() if isinstance(w, QMainWindow) and w.isVisible()
        ]
        if not windows:
            if elapsed_ms > self.timeout_ms:
                self.errors.append(f"no main window after {elapsed_ms:.0f} ms")
                self.end(1)
            return
        window = windows[0]
        if self.shown_s is None:
            self.shown_s = elapsed_ms / 1000
            size = window.size()
            say(
                f"main window shown {self.shown_s:.2f} s after start: "
                f"'{window.windowTitle()}', {size.width()}x{size.height()}, "
                f"platform {self.qapp.platformName()}"
            )
            self.check_identity()
        busy = QThreadPool.globalInstance().activeThreadCount() > 0
        self.idle_polls = 0 if busy else self.idle_polls + 1
        settled = elapsed_ms - self.shown_s * 1000 >= self.settle_ms and self.idle_polls >= 3
        if not settled and elapsed_ms > self.timeout_ms:
            self.errors.append(f"background work still running after {elapsed_ms:.0f} ms")
        if settled or elapsed_ms > self.timeout_ms:
            self.finish(window)

    def check_identity(self) -> None:
        """The name, desktop file and icon the desktop shows; a missing icon is a packaging fault."""
        assert self.qapp is not None
        say(
            f"application '{self.qapp.applicationName()}' {self.qapp.applicationVersion()}, "
            f"desktop file '{self.qapp.desktopFileName()}', "
            f"icon {'missing' if self.qapp.windowIcon().isNull() else 'found'}"
        )
        if self.qapp.windowIcon().isNull():
            self.errors.append("the application icon was not found in vramgui.resources")

    def finish(self, window: QMainWindow) -> None:
        """Grab the window when asked, check no dialog is open, and quit."""
        from PySide6.QtWidgets import QDialog

        from vramgui.ui.app import log_path

        assert self.qapp is not None
        say(f"background work done {time.perf_counter() - STARTED:.2f} s after start")
        if self.screenshot is not None:
            image = window.grab()
            if not image.save(str(self.screenshot), "PNG"):
                self.errors.append(f"could not write {self.screenshot}")
            say(f"screenshot {self.screenshot} ({image.width()}x{image.height()} px)")
        dialogs = [
            w.windowTitle()
            for w in self.qapp.topLevelWidgets()
            if isinstance(w, QDialog) and w.isVisible()
        ]
        if dialogs:
            self.errors.append(f"dialogs open at the end: {dialogs}")
        say(f"log file {log_path()}")
        self.end(1 if self.errors else 0)


def main(argv: list[str] | None = None) -> int:
    """Run the application under watch; returns its exit status (0 when all went well)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from vramgui.ui import app as vramgui_app

    watch = Watch(args.settle_ms, args.timeout_ms, args.screenshot)
    try:
        # main() sets the high-DPI policy before it creates the application: watch from inside.
        status = vramgui_app.main(on_started=watch.attach)
    except Exception:  # building the window failed: report it, as the excepthook would
        watch.errors.append(traceback.format_exc())
        status = 1
    for error in watch.errors:
        say(f"FAILED: {error}")
    status = status or (1 if watch.errors else 0)
    say(f"exit status {status}, {time.perf_counter() - STARTED:.2f} s after start")
    return status


if __name__ == "__main__":
    sys.exit(main())
