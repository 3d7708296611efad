"""The "On this machine" list: models other tools downloaded (the Hugging Face cache, Ollama,
LM Studio), each with its size and whether it fits the target GPU at the current settings.

Nothing here runs on the GUI thread but the table: scanning the stores and reading each model's
headers happen once per scan on a worker, and the estimates of every listed model run on a
worker again after the settings rest (``REFIT_DELAY_MS``), a newer change cancelling an older
pass. The stores are only read (``vramgui.sources.on_disk``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QColor, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from vramgui.answers.estimate import estimate_setup
from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
from vramgui.core.units import Unit, format_bytes
from vramgui.core.workload import Workload, adjusted
from vramgui.ui import palette
from vramgui.ui.table_model import FlatTableModel
from vramgui.ui.wording import in_window
from vramgui.ui.workers import Worker, submit

_LOG = logging.getLogger(__name__)
REFIT_DELAY_MS = 250
# The first look waits for the window to be complete (about 1 s after start here): the workers
# first draw the estimate, its sweep and the advice.
FIRST_SCAN_DELAY_MS = 1500
# Shown again after a search, the list looks again if its last look is older than this.
RESCAN_AFTER_S = 30.0
_Index = QModelIndex | QPersistentModelIndex
_DISPLAY = int(Qt.ItemDataRole.DisplayRole.value)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole.value)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole.value)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole.value)
_RIGHT = int((Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value)


@dataclass(frozen=True, slots=True)
class Found:
    """A listed model and what reading its headers gave: a spec, or why there is none."""

    model: Any  # vramgui.sources.results.LocalModel
    spec: ModelSpec | None
    problem: str = ""


@dataclass(frozen=True, slots=True)
class Fit:
    """One model at the current settings: its per-GPU total and whether it fits the target.

    ``total_bytes`` is None when there is no estimate; ``note`` then says why.
    """

    total_bytes: int | None
    fits: bool | None
    note: str = ""


def read_all(scan: Callable[[], Any], open_model: Callable[[Any], Any]) -> tuple[Found, ...]:
    """Every model a scan finds, each with its spec (run on a worker: it reads every header)."""
    found = []
    for model in scan().models:
        try:
            found.append(Found(model, open_model(model).spec))
        except Exception as exc:  # one model's fault costs only its own row
            found.append(Found(model, None, _problem(exc, "read")))
    return tuple(found)


def _problem(exc: Exception, doing: str) -> str:
    """Why a row has no spec or no estimate: our message, or a fault named as one (and logged)."""
    if isinstance(exc, VramguiError):
        return in_window(exc)
    _LOG.warning("a local model could not be %s", doing, exc_info=exc)
    return f"could not be {doing} ({type(exc).__name__}: {str(exc)[:200]})"


def fits_of(
    found: Sequence[Found], workload: Workload, target: tuple[str, int] | None
) -> tuple[Fit, ...]:
    """Each model's estimate at ``workload``, held against ``target`` (pure: for a worker).

    A context longer than a model's is cut to the model's, and a checkpoint stored for another
    engine (a GGUF file) is estimated on the engine that runs it, as the window does on opening it.
    """
    fits = []
    for item in found:
        if item.spec is None:
            fits.append(Fit(None, None, item.problem))
            continue
        longest = item.spec.facts.max_position_embeddings
        setup = workload
        note = ""
        if longest and workload.seq > longest:
            setup = workload.with_size("seq", longest)
            note = f"at its longest context, {longest:,} tokens"
        try:
            setup, resets = adjusted(setup, {}, item.spec.quantization)
            if any(r.setting == "engine" for r in resets):
                note = ", ".join(filter(None, (note, f"with {setup.engine}")))
            fitted = estimate_setup(item.spec, setup, (target,) if target else (), gpu_name="")
        except Exception as exc:  # one model's fault costs only its own row
            fits.append(Fit(None, None, _problem(exc, "estimated")))
            continue
        row = fitted.fit[0] if target else None
        fits.append(Fit(fitted.estimate.total_bytes, row.fits if row else None, note))
    return tuple(fits)


class LocalModelsTable(FlatTableModel):
    """The listed models: name, size on disk, and the estimate at the current settings (the
    store each is in, and its path, in the tooltip: the side column has no room for them)."""

    COLUMNS = ("On this machine", "Size", "Needs")
    NEEDS = 2

    def __init__(self) -> None:
        super().__init__()
        self._found: tuple[Found, ...] = ()
        self._fits: tuple[Fit, ...] = ()
        self._target: str | None = None
        self._unit: Unit = "GiB"

    def set_unit(self, unit: Unit) -> None:
        """Sizes in GiB or GB, as the rest of the window shows them."""
        if unit != self._unit:
            self.beginResetModel()
            self._unit = unit
            self.endResetModel()

    def set_found(self, found: Sequence[Found]) -> None:
        self.beginResetModel()
        self._found = tuple(found)
        self._fits = ()
        self.endResetModel()

    def set_fits(self, fits: Sequence[Fit], target: str | None) -> None:
        """The estimates of the listed models (in their order) and the GPU they were held to."""
        if len(fits) != len(self._found):
            return
        self._fits = tuple(fits)
        self._target = target
        if self._found:
            last = len(self._found) - 1
            self.dataChanged.emit(self.index(0, self.NEEDS), self.index(last, self.NEEDS))
        self.headerDataChanged.emit(Qt.Orientation.Horizontal, self.NEEDS, self.NEEDS)

    def found(self, row: int) -> Found:
        return self._found[row]

    def fit(self, row: int) -> Fit | None:
        return self._fits[row] if self._fits else None

    def row_total(self) -> int:
        return len(self._found)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == _DISPLAY:
            if section == 0 and self._found:
                return f"{self.COLUMNS[0]} ({len(self._found)})"
            return self.COLUMNS[section]
        if role == _TOOLTIP and section == 0:
            return (
                "Models the Hugging Face cache, Ollama and LM Studio hold (right-click: look again)"
            )
        if role == _TOOLTIP and section == self.NEEDS:
            held = f"; green fits {self._target}, red does not" if self._target else ""
            return f"GPU memory per GPU at the current settings{held}"
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, column = index.row(), index.column()
        item = self._found[row]
        fit = self.fit(row)
        if role == _DISPLAY:
            return self._text(item, fit, column)
        if role == _TOOLTIP:
            return self._tooltip(item, fit)
        if role == _ALIGNMENT and column > 0:
            return _RIGHT
        if (
            role == _FOREGROUND
            and column == self.NEEDS
            and fit is not None
            and fit.fits is not None
        ):
            return QColor(palette.FIT if fit.fits else palette.NO_FIT)
        return None

    def _text(self, item: Found, fit: Fit | None, column: int) -> str:
        model = item.model
        if column == 0:
            # A GGUF file in LM Studio's publisher/repo/ folders: its name says what they say.
            parts = model.name.split("/")
            return parts[-1] if len(parts) > 2 else model.name
        if column == 1:
            return format_bytes(model.size_bytes, self._unit, 1)
        if fit is None:
            return "…" if item.spec is not None else "unreadable"
        if fit.total_bytes is None:
            return "n/a"
        mark = "" if fit.fits is None else (" ✓" if fit.fits else " ✗")
        return format_bytes(fit.total_bytes, self._unit, 1) + mark

    def _tooltip(self, item: Found, fit: Fit | None) -> str:
        model = item.model
        size = format_bytes(model.size_bytes, self._unit)
        lines = [model.name, f"In {model.where} ({model.format}, {size}): {model.path}"]
        if fit is not None and fit.total_bytes is not None and fit.fits is not None:
            verdict = "fits" if fit.fits else "does not fit"
            needs = format_bytes(fit.total_bytes, self._unit)
            lines.append(f"{needs} per GPU: {verdict} {self._target}")
        if fit is not None and fit.note:
            lines.append(fit.note)
        elif item.problem:
            lines.append(item.problem)
        lines.append("Click to open it; right-click to look in the stores again.")
        return "\n".join(lines)


class LocalModelsView(QWidget):
    """The list, and a status line while it looks (or finds nothing); ``source_chosen`` on a
    click. The stores are read when the list is first shown (after ``FIRST_SCAN_DELAY_MS``),
    when it is shown again after ``RESCAN_AFTER_S``, and on "Look again" (right-click).

    Args:
        scan: ``() -> Scan`` of the stores (``vramgui.sources.on_disk.scan``); runs on a worker.
        open_model: ``LocalModel -> ResolvedModel`` from its files only (``on_disk.open_model``);
            runs on a worker.
    """

    source_chosen = Signal(str)

    def __init__(
        self,
        scan: Callable[[], Any],
        open_model: Callable[[Any], Any],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._scan = scan
        self._open_model = open_model
        self._workload: Workload | None = None
        self._target: tuple[str, int] | None = None
        self._scanning: Worker | None = None
        self._fitting: Worker | None = None
        self._scanned_at: float | None = None
        self.table_model = LocalModelsTable()
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        # The start of the title, where the column is narrower than it.
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.rescan = QAction("Look again", self)
        self.rescan.setToolTip("Read the Hugging Face cache, Ollama and LM Studio folders again")
        self.table.addAction(self.rescan)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.status = QLabel()
        self.status.setStyleSheet("color: gray;")
        # Any text fits: a long one is cut, and never widens the side column.
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.status.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status)

        self._refit_timer = _single_shot(self, REFIT_DELAY_MS, self._refit)
        self._first_scan = _single_shot(self, FIRST_SCAN_DELAY_MS, self.refresh)
        self.rescan.triggered.connect(self.refresh)
        self.table.clicked.connect(self._picked)
        self.table.activated.connect(self._picked)

    def set_unit(self, unit: Unit) -> None:
        """Show sizes in GiB or GB."""
        self.table_model.set_unit(unit)

    @property
    def busy(self) -> bool:
        """Whether a look at the stores or a pass of estimates is due or running."""
        pending = self._first_scan.isActive() or self._refit_timer.isActive()
        return pending or self._scanning is not None or self._fitting is not None

    def set_setup(self, workload: Workload, target: tuple[str, int] | None) -> None:
        """The settings and the GPU (``(name, bytes)``, or None) to estimate every model at."""
        if (workload, target) == (self._workload, self._target):
            return
        self._workload, self._target = workload, target
        if self._scanned_at is not None:
            self._refit_timer.start()

    def refresh(self) -> None:
        """Look in the stores again (on a worker)."""
        self._first_scan.stop()
        if self._scanning is not None:
            self._scanning.cancel()
        self._say("Looking in the Hugging Face cache, Ollama and LM Studio…")
        self.rescan.setEnabled(False)
        scan, open_model = self._scan, self._open_model
        self._scanning = submit(
            lambda: read_all(scan, open_model), self._scan_done, self._scan_failed
        )

    def showEvent(self, event: QShowEvent) -> None:
        # Read when first shown (not at start-up), and again when shown after a while.
        super().showEvent(event)
        if self._scanning is not None or self._first_scan.isActive():
            return
        if self._scanned_at is None:
            self._first_scan.start()
        elif time.monotonic() - self._scanned_at > RESCAN_AFTER_S:
            self.refresh()

    def _say(self, text: str) -> None:
        self.status.setText(text)
        self.status.setToolTip(text)
        self.status.setVisible(bool(text))

    def _scan_done(self, found: tuple[Found, ...]) -> None:
        self._scanning = None
        self._scanned_at = time.monotonic()
        self.rescan.setEnabled(True)
        self.table_model.set_found(found)
        self._say("" if found else "No models in the Hugging Face cache, Ollama or LM Studio.")
        self._refit()

    def _scan_failed(self, exc: Exception) -> None:
        self._scanning = None
        self._scanned_at = time.monotonic()
        self.rescan.setEnabled(True)
        self._say(f"Could not look: {exc}")

    def _refit(self) -> None:
        self._refit_timer.stop()
        if self._workload is None or not self.table_model.rowCount():
            return
        if self._fitting is not None:
            self._fitting.cancel()
        found = tuple(self.table_model.found(r) for r in range(self.table_model.rowCount()))
        workload, target = self._workload, self._target
        self._fitting = submit(
            lambda: fits_of(found, workload, target),
            lambda fits: self._fits_done(fits, target),
            self._fits_failed,
        )

    def _fits_done(self, fits: tuple[Fit, ...], target: tuple[str, int] | None) -> None:
        self._fitting = None
        self.table_model.set_fits(fits, target[0] if target else None)

    def _fits_failed(self, exc: Exception) -> None:
        self._fitting = None
        self._say(f"Could not estimate the listed models: {exc}")

    def _picked(self, index: QModelIndex) -> None:
        if index.isValid():
            self.source_chosen.emit(self.table_model.found(index.row()).model.source)


def _single_shot(parent: QWidget, interval_ms: int, slot: Callable[[], None]) -> QTimer:
    timer = QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(interval_ms)
    timer.timeout.connect(slot)
    return timer


def attach(panel: Any, controller: Any) -> LocalModelsView:
    """Put the list in the model panel, estimating at the controller's settings and target.

    Args:
        panel: the ``ModelPanel``.
        controller: the window's ``EstimateController``; a click on a model loads it there.
    """
    view = LocalModelsView(_scan, _open_model)

    def follow(_changed: object = None) -> None:
        capacities = controller.capacities
        # Each listed model at the user's settings (fits_of applies each one's own format).
        view.set_setup(controller.chosen_workload, capacities[0] if capacities else None)

    controller.workload_changed.connect(follow)
    controller.capacities_changed.connect(follow)
    view.source_chosen.connect(controller.load_source)
    follow()
    panel.add_local_models(view)
    return view


def _scan() -> Any:
    # The stores' readers are imported on the worker that first reads them, not at start-up.
    from vramgui.sources import on_disk

    return on_disk.scan()


def _open_model(model: Any) -> Any:
    from vramgui.sources import on_disk

    return on_disk.open_model(model)
