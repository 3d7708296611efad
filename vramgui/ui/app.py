"""The composition root: the application's identity, its safety nets, the real services, the window."""

from __future__ import annotations

import gc
import logging
import logging.handlers
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QIcon, QPixmap
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from vramgui import __version__
from vramgui.paths import UserDirError, bundled, user_dir
from vramgui.ui import local_models, main_window, workers
from vramgui.ui.compat import forget_imported_sources, keep_singletons_alive
from vramgui.ui.main_window import MainWindow, Services

APP_NAME = "vramgui"
ORGANIZATION = "vramgui"
ORGANIZATION_DOMAIN = "vramgui.github.io"
DESKTOP_FILE = "io.github.vramgui.vramgui"
DEFAULT_GPU = "RTX 4090"
LOG_NAME = "vramgui.log"
CATALOG_HITS = 8
SWITCH_INTERVAL_S = 0.001  # how often a thread waiting for the interpreter lock gets it
# The window is complete ~0.2 s after its first paint here; importing huggingface_hub (~140 ms of
# a worker's time) beside the first outlook delayed it by 20-30 ms.
WARM_HUB_DELAY_MS = 1000

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel, SearchResult

log = logging.getLogger("vramgui")


def log_path() -> Path:
    """The log file a user can attach to a bug report."""
    return user_dir("log") / LOG_NAME


NO_DISPLAY = """vramgui: there is no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY is set).
The command line needs none:
    vramgui estimate meta-llama/Llama-3.1-8B --gpu "RTX 4090"
    vramgui --help
To open the window without a screen, give it a virtual display:
    xvfb-run vramgui                      (Debian / Ubuntu: sudo apt install xvfb)
or run it invisibly, as the tests do:
    QT_QPA_PLATFORM=offscreen vramgui
"""


def missing_display(environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """What to tell a user who starts the window where it cannot show, or None if it can.

    On Linux without X11 or Wayland, Qt's xcb plugin fails to load and Qt aborts with a message
    about libxcb-cursor0 even when it is installed; this says what is really missing instead.
    A platform chosen by the user (offscreen, vnc, eglfs...) is taken as it is.
    """
    if not sys.platform.startswith("linux"):
        return None
    platform = environ.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith(("xcb", "wayland")):
        return None
    if environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return None
    return NO_DISPLAY


def setup_logging() -> Path:
    """Log to a rotating file in the user log directory; returns its path."""
    path = log_path()
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=1_000_000, backupCount=2, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return path


def handle_exception(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """``sys.excepthook``: log the error and show it in a dialog; the application keeps running."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    log.error("Unhandled error", exc_info=(kind, value, tb))
    if QApplication.instance() is None:
        sys.__excepthook__(kind, value, tb)
        return
    details = "".join(traceback.format_exception(kind, value, tb))
    box = QMessageBox(
        QMessageBox.Icon.Critical, "vramgui: unexpected error", f"{kind.__name__}: {value}"
    )
    box.setInformativeText(
        "The window keeps running, but this is a bug. The details are in the log file:\n"
        f"{log_path()}"
    )
    box.setDetailedText(details)
    box.exec()


def app_icon() -> QIcon:
    """The application icon at every bundled size; an empty icon when none is bundled."""
    icon = QIcon()
    folder = bundled().joinpath("icons")
    if not folder.is_dir():
        return icon
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.startswith("vramgui") and entry.name.endswith((".svg", ".png")):
            # Loaded from bytes now: a QIcon reads files lazily, and a zipped resource has none.
            pixmap = QPixmap()
            if pixmap.loadFromData(entry.read_bytes()):
                icon.addPixmap(pixmap)
    return icon


def settings() -> QSettings:
    """The window's settings file, in the user config directory (tests redirect it)."""
    return QSettings(str(user_dir("config") / "window.ini"), QSettings.Format.IniFormat)


def search_everywhere(query: str) -> SearchResult:
    """Hub results (or their offline fallback) followed by bundled catalog models not among them."""
    from vramgui.sources import catalog, resolve
    from vramgui.sources.results import HubModel

    found = resolve.search_models(query)
    seen = {hit.id.lower() for hit in found.results}
    extra = [
        HubModel(
            id=entry.hub_id or entry.name,
            parameters=entry.parameters,
            gated=entry.gated,
            source="catalog",
        )
        for entry in catalog.search(query, CATALOG_HITS)
        if (entry.hub_id or entry.name).lower() not in seen
    ]
    return replace(found, results=(*found.results, *extra))


def real_services() -> Services:
    """The services of the installed application: the Hub, the catalog, NVML."""
    from vramgui.hardware import NvmlProbe, calibration, load_catalog, read_host_info
    from vramgui.sources import catalog

    probe = NvmlProbe()
    gpus = load_catalog()
    try:
        default_source: str | None = catalog.popular_default().name
    except Exception:  # A broken catalog must not stop the window from opening.
        log.exception("The bundled model catalog could not be read")
        default_source = None
    return Services(
        load_model=load_model,
        search_models=search_everywhere,
        probe=probe.snapshot,
        gpu_catalog=gpus,
        default_source=default_source,
        default_gpus=(DEFAULT_GPU,) if any(g.name == DEFAULT_GPU for g in gpus) else (),
        host_ram_bytes=read_host_info().ram_available_bytes,
        # Read once at start: `vramgui measure --device cuda` stores a new one for the next.
        measured_utilization={n: c.utilization() for n, c in calibration.load().items()}.get,
    )


def load_model(source: str) -> ResolvedModel:
    """A model of the bundled catalog at once; any other in a child process, stopped when a
    newer load supersedes it or past ``workers.LOAD_SECONDS``: a model folder, a local store or
    a Hub repo can be anyone's (see ``workers.run_in_process``)."""
    from vramgui.sources import resolve

    if resolve.is_bundled(source):
        return resolve.load_model(source)
    return workers.run_in_process(resolve.load_model, source)


def build_window(services: Services, settings: QSettings) -> MainWindow:
    """The window of ``main_window.build_window``, with the "On this machine" list in its model
    panel; huggingface_hub is imported on a worker once the window has painted and its first
    estimate's outlook is drawn (``WARM_HUB_DELAY_MS``)."""
    window = main_window.build_window(services, settings)
    local_models.attach(window.model_panel, window.controller)
    _AfterFirstPaint(window, WARM_HUB_DELAY_MS, lambda: workers.submit(_warm_hub, _ignore, _ignore))
    # The server the loads' processes fork from, started once the window is complete (a load
    # before then starts it itself).
    _AfterFirstPaint(window, WARM_HUB_DELAY_MS, workers.start_processes)
    return window


class _AfterFirstPaint(QObject):
    """Calls ``then`` once, ``delay_ms`` after ``widget`` first paints."""

    def __init__(self, widget: QWidget, delay_ms: int, then: Callable[[], object]) -> None:
        super().__init__(widget)
        self._delay_ms = delay_ms
        self._then = then
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            watched.removeEventFilter(self)
            QTimer.singleShot(self._delay_ms, self._then)
        return False


def _warm_hub() -> None:
    """huggingface_hub imported and its client built before the first search needs them."""
    from vramgui.sources.hub_http import warm

    warm()


def _ignore(_outcome: object) -> None:
    """A warm-up's outcome: a failure only costs the first search the same time later."""


def freeze_startup_objects() -> None:
    """Exempt what start-up built (modules, classes, widgets, the catalog) from garbage collection.

    They live as long as the window, yet every full collection walks them all: about 80 ms on
    two shared cores, a frozen frame whenever a later allocation (a search on a worker, a
    redraw) happens to set one off. Frozen, a full collection walks only newer objects. The
    cycles start-up leaves unreachable stay for the window's life: a handful (17 measured).
    """
    gc.freeze()


def create_application(argv: list[str]) -> QApplication:
    """A QApplication with vramgui's identity and high-DPI settings.

    The interpreter's switch interval drops from 5 ms to :data:`SWITCH_INTERVAL_S`. The GUI
    thread lets go of the interpreter lock on its calls into Qt, and while a worker computes
    (loading a model, an outlook) it waited up to the whole interval to get the lock back after
    each: a paint of a few hundred Qt calls took 60-105 ms instead of 20-28 ms (1 ms: 27-48).
    """
    keep_singletons_alive()
    forget_imported_sources()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(
        Qt.HighDpiScaleFactorRoundingPolicy.PassThrough
    )
    app = QApplication.instance() or QApplication(argv)
    assert isinstance(app, QApplication)
    app.setApplicationName(APP_NAME)
    app.setApplicationDisplayName("vramgui")
    app.setApplicationVersion(__version__)
    app.setOrganizationName(ORGANIZATION)
    app.setOrganizationDomain(ORGANIZATION_DOMAIN)
    app.setDesktopFileName(DESKTOP_FILE)
    app.setWindowIcon(app_icon())
    return app


def main(
    argv: list[str] | None = None, *, on_started: Callable[[QApplication], object] | None = None
) -> int:
    """Open the window; returns the exit status (what the ``vramgui`` command runs without args).

    Args:
        argv: the application's arguments (default ``sys.argv``).
        on_started: called with the application once it exists, before the window is built
            (the bundle's smoke check watches the start from there).
    """
    problem = missing_display()
    if problem is not None:
        sys.stderr.write(problem)
        return 1
    try:
        path = setup_logging()
    except UserDirError as exc:  # VRAMGUI_HOME names a file, a read-only place
        sys.stderr.write(f"vramgui: {exc}\n")
        return 2
    sys.excepthook = handle_exception
    log.info("vramgui %s starting; log file %s", __version__, path)
    app = create_application(sys.argv if argv is None else argv)
    if on_started is not None:
        on_started(app)
    window: MainWindow = build_window(real_services(), settings())
    window.show()
    freeze_startup_objects()
    status = app.exec()
    gc.unfreeze()  # the window is gone: what it held may be collected again
    workers.shutdown()
    log.info("vramgui exiting with status %s", status)
    return status
