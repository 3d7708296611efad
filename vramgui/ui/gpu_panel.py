"""The GPU panel: local GPUs from NVML (refreshed off the GUI thread), cards added by hand and
catalog GPUs to compare.

Checked GPUs are the ones the estimate is held against; the first checked is the target of the
fit advisor. Each row carries a fit badge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QStyle,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vramgui.core.units import Unit, format_bytes, to_unit
from vramgui.core.workload import ENGINE_NAMES
from vramgui.hardware import CatalogGpu, GpuSnapshot
from vramgui.hardware.gpus import CUSTOM_VENDOR
from vramgui.ui import palette
from vramgui.ui.add_card import AddCardDialog
from vramgui.ui.workers import Worker, submit

REFRESH_MS = 3000
_NAME, _MEMORY, _FIT = range(3)
# The longest name the list shows whole: longer ones (a card added by hand, "Ryzen AI Max+ 395
# 128GB") keep both ends and the tooltip holds them, so that the panel leaves the estimate its
# room on a laptop screen.
_NAME_RULER = "Apple M2 Ultra 192GB"
# The widest fit badge.
_BADGE_RULER = "✘ 888.8 short"


class GpuPanel(QWidget):
    """Lists local GPUs, cards added by hand and catalog GPUs; emits ``capacities_changed`` with
    the checked ones, and ``cards_changed`` with the cards added by hand when one is added or
    removed.

    Args:
        probe: returns a fresh :class:`GpuSnapshot`; called on a worker thread, never raises.
        catalog: GPUs to compare against.
        checked_catalog: names of catalog GPUs (and cards added by hand) checked at start.
        refresh_ms: how often local GPUs are read again; 0 reads them once.
        cards: cards added by hand earlier (``hardware.gpus.custom_gpu``).
    """

    capacities_changed = Signal(object)
    cards_changed = Signal(object)

    def __init__(
        self,
        probe: Callable[[], GpuSnapshot],
        catalog: Sequence[CatalogGpu],
        checked_catalog: Iterable[str] = (),
        refresh_ms: int = REFRESH_MS,
        parent: QWidget | None = None,
        *,
        cards: Sequence[CatalogGpu] = (),
    ) -> None:
        super().__init__(parent)
        self._probe = probe
        self._unit: Unit = "GiB"
        self._snapshot: GpuSnapshot | None = None
        self._pending: Worker | None = None
        self._fit: dict[str, tuple[bool, int]] = {}
        self.reason = QLabel()
        self.reason.setWordWrap(True)
        self.reason.setStyleSheet(palette.WARNING_STYLE)
        self.reason.hide()
        self.use_free = QCheckBox("Count only free memory on local GPUs")
        self.tree = QTreeWidget()
        self.tree.setColumnCount(3)
        # Memory in the unit the header names ("GiB"), and short fit badges: the panel leaves
        # the estimate its room on a laptop screen.
        self.tree.setHeaderLabels(["GPU", "GiB", "Fit"])
        self.tree.headerItem().setToolTip(_MEMORY, "Memory of each GPU")
        self.tree.setRootIsDecorated(False)
        self.tree.setIndentation(12)  # no branch lines to draw: just set GPUs off their group
        self.tree.setUniformRowHeights(True)
        # Names too long for a narrow panel keep both ends ("Apple M…192GB"); tooltips hold all.
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.tree.header()
        # Names and memory are measured when they change (rarely); the fit badges change with
        # every estimate, so their column just takes the width left over.
        for column in (_NAME, _MEMORY):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
        # The stretched badge column shrinks no narrower than its size when stretching starts:
        # the widest badge, not Qt's default 100 px.
        header.resizeSection(_FIT, self._badge_width())
        header.setStretchLastSection(True)
        self.local_group = QTreeWidgetItem(self.tree, ["This machine"])
        self.cards_group = QTreeWidgetItem(self.tree, ["Added by hand"])
        self.catalog_group = QTreeWidgetItem(self.tree, ["Compare with"])
        self._groups = (self.local_group, self.cards_group, self.catalog_group)
        for group in self._groups:
            group.setFlags(Qt.ItemFlag.ItemIsEnabled)
            font = group.font(_NAME)
            font.setBold(True)
            group.setFont(_NAME, font)
        self._catalog: dict[str, CatalogGpu] = {}
        wanted = set(checked_catalog)
        for gpu in cards:
            self._add_item(self.cards_group, gpu, gpu.name in wanted)
        for gpu in catalog:
            self._add_item(self.catalog_group, gpu, gpu.name in wanted)
        for group in self._groups:
            group.setFirstColumnSpanned(True)
        self.cards_group.setHidden(not cards)
        self.tree.expandAll()
        self._fit_name_column()
        self.add_button = QPushButton("Add a card…")
        self.add_button.setToolTip(
            "A GPU the list lacks, by its memory and bandwidth (and, for a speed, its compute)"
        )
        self.add_button.clicked.connect(self.open_add_dialog)
        self.dialog: AddCardDialog | None = None
        self.remove_action = QAction("Remove this card", self.tree)
        self.remove_action.setShortcut(QKeySequence.StandardKey.Delete)
        self.remove_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.remove_action.triggered.connect(self._remove_current)
        self.tree.addAction(self.remove_action)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.reason)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.add_button)
        layout.addWidget(self.use_free)
        self._refresh_memory_column()
        self.tree.itemChanged.connect(self._item_changed)
        self.use_free.toggled.connect(lambda _checked: self._emit_capacities())
        self._timer = QTimer(self)
        self._timer.setInterval(refresh_ms)
        self._timer.timeout.connect(self.refresh)
        if refresh_ms > 0:
            self._timer.start()

    @property
    def snapshot(self) -> GpuSnapshot | None:
        return self._snapshot

    def refresh(self) -> None:
        """Read the local GPUs again on a worker thread (skipped while a read is running)."""
        if self._pending is not None:
            return
        self._pending = submit(self._probe, self._show_snapshot, self._probe_failed)

    def stop(self) -> None:
        """Stop the periodic refresh (window closing)."""
        self._timer.stop()
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def capacities(self) -> tuple[tuple[str, int], ...]:
        """Checked GPUs as ``(name, capacity_bytes)``: local ones first, then the cards added by
        hand, then catalog ones."""
        pairs: list[tuple[str, int]] = []
        for group in self._groups:
            for item in _children(group):
                capacity = item.data(_MEMORY, Qt.ItemDataRole.UserRole)
                if item.checkState(_NAME) == Qt.CheckState.Checked and capacity is not None:
                    pairs.append((item.data(_NAME, Qt.ItemDataRole.UserRole), int(capacity)))
        return tuple(pairs)

    def checked_catalog(self) -> list[str]:
        """Names of the checked cards added by hand and catalog GPUs (saved between runs)."""
        return [
            item.data(_NAME, Qt.ItemDataRole.UserRole)
            for group in (self.cards_group, self.catalog_group)
            for item in _children(group)
            if item.checkState(_NAME) == Qt.CheckState.Checked
        ]

    def cards(self) -> list[CatalogGpu]:
        """The cards added by hand, in the order shown."""
        return [
            self._catalog[item.data(_NAME, Qt.ItemDataRole.UserRole)]
            for item in _children(self.cards_group)
        ]

    def gpus(self) -> tuple[CatalogGpu, ...]:
        """Every GPU the panel knows the figures of: the catalog's and the cards added by hand."""
        return tuple(self._catalog.values())

    def has_gpu(self, name: str) -> bool:
        """Whether a GPU of this name is listed (local, added by hand or in the catalog)."""
        return self._find(name) is not None

    def add_card(self, gpu: CatalogGpu, checked: bool = True) -> None:
        """List a card added by hand (checked: the estimate is held against it).

        Raises:
            ValueError: a GPU of that name is already listed.
        """
        if self.has_gpu(gpu.name):
            raise ValueError(f"{gpu.name!r} is already listed")
        blocked = self.tree.blockSignals(True)
        self._add_item(self.cards_group, gpu, checked)
        self.cards_group.setHidden(False)
        self.tree.expandItem(self.cards_group)
        self.tree.blockSignals(blocked)
        self._fit_name_column()
        self.cards_changed.emit(self.cards())
        self._emit_capacities()

    def remove_card(self, name: str) -> None:
        """Take a card added by hand off the list.

        Raises:
            KeyError: no card added by hand has that name.
        """
        item = next(
            (
                i
                for i in _children(self.cards_group)
                if i.data(_NAME, Qt.ItemDataRole.UserRole) == name
            ),
            None,
        )
        if item is None:
            raise KeyError(name)
        self.cards_group.removeChild(item)
        del self._catalog[name]
        self.cards_group.setHidden(self.cards_group.childCount() == 0)
        self._fit_name_column()
        self.cards_changed.emit(self.cards())
        self._emit_capacities()

    def open_add_dialog(self) -> AddCardDialog:
        """Show the "Add a card" dialog; an accepted card is listed and checked."""
        dialog = AddCardDialog(self.has_gpu, self)
        dialog.accepted.connect(lambda: self._card_accepted(dialog))
        dialog.finished.connect(lambda _result: self._dialog_closed(dialog))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _dialog_closed(self, dialog: AddCardDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    def _card_accepted(self, dialog: AddCardDialog) -> None:
        card = dialog.card()
        if card is not None:
            self.add_card(card)

    def _context_menu(self, position: QPoint) -> None:
        item = self.tree.itemAt(position)
        if item is None or item.parent() is not self.cards_group:
            return
        self.tree.setCurrentItem(item)
        menu = QMenu(self.tree)
        menu.addAction(self.remove_action)
        menu.popup(self.tree.viewport().mapToGlobal(position))

    def _remove_current(self) -> None:
        item = self.tree.currentItem()
        if item is not None and item.parent() is self.cards_group:
            self.remove_card(item.data(_NAME, Qt.ItemDataRole.UserRole))

    def _add_item(self, group: QTreeWidgetItem, gpu: CatalogGpu, checked: bool) -> None:
        self._catalog[gpu.name] = gpu
        item = QTreeWidgetItem(group, [gpu.name, "", ""])
        item.setData(_NAME, Qt.ItemDataRole.UserRole, gpu.name)
        item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(_NAME, Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        item.setToolTip(_NAME, _catalog_tooltip(gpu))

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self.tree.headerItem().setText(_MEMORY, unit)
        self._refresh_memory_column()
        self._paint_fit()

    def show_fit(self, rows: Iterable[object]) -> None:
        """Show a badge per GPU from ``core.fit.FitRow``-like rows (gpu, fits, headroom_bytes)."""
        self._fit = {row.gpu: (row.fits, row.headroom_bytes) for row in rows}  # type: ignore[attr-defined]
        self._paint_fit()

    def set_checked(self, name: str, checked: bool = True) -> None:
        """Check or uncheck GPU ``name`` (as a click on its box would)."""
        item = self._find(name)
        if item is None:
            raise KeyError(name)
        item.setCheckState(_NAME, Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)

    def badge(self, name: str) -> str:
        """The fit badge text shown for GPU ``name`` ("" when none)."""
        item = self._find(name)
        return item.text(_FIT) if item is not None else ""

    def _show_snapshot(self, snapshot: GpuSnapshot) -> None:
        self._pending = None
        self._snapshot = snapshot
        self.reason.setVisible(bool(snapshot.reason))
        self.reason.setText(snapshot.reason or "")
        use_free = self.use_free.isChecked()
        pairs = snapshot.capacities(use_free)
        known = {
            item.data(_NAME, Qt.ItemDataRole.UserRole): item for item in _children(self.local_group)
        }
        blocked = self.tree.blockSignals(True)
        for name, _capacity in pairs:
            if name not in known:
                item = QTreeWidgetItem(self.local_group, [name, "", ""])
                item.setData(_NAME, Qt.ItemDataRole.UserRole, name)
                item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(_NAME, Qt.CheckState.Checked)
                item.setToolTip(_NAME, name)
                known[name] = item
        names = {name for name, _ in pairs}
        for name, item in list(known.items()):
            if name not in names:
                self.local_group.removeChild(item)
        if not pairs:
            self.local_group.setText(_NAME, "This machine: no NVIDIA GPU")
        else:
            self.local_group.setText(_NAME, "This machine")
        self.tree.blockSignals(blocked)
        self.tree.expandItem(self.local_group)
        self._fit_name_column()
        self._refresh_memory_column()
        self._emit_capacities()

    def _probe_failed(self, exc: Exception) -> None:
        self._pending = None
        self.reason.setText(f"Could not read the local GPUs: {exc}")
        self.reason.show()

    def _refresh_memory_column(self) -> None:
        blocked = self.tree.blockSignals(True)
        unit = self._unit
        use_free = self.use_free.isChecked()
        local: dict[str, int] = {}
        details = {}
        if self._snapshot is not None:
            local = dict(self._snapshot.capacities(use_free))
            details = {gpu.label: gpu for gpu in self._snapshot.gpus}
        for item in _children(self.local_group):
            name = item.data(_NAME, Qt.ItemDataRole.UserRole)
            capacity = local.get(name)
            item.setData(_MEMORY, Qt.ItemDataRole.UserRole, capacity)
            gpu = details.get(name)
            if gpu is not None and gpu.total_bytes is not None:
                used = gpu.used_bytes
                item.setText(_MEMORY, _figure(gpu.total_bytes, unit))
                item.setToolTip(
                    _MEMORY,
                    f"total {format_bytes(gpu.total_bytes, unit)}, "
                    f"used {format_bytes(used, unit) if used is not None else 'unknown'}, "
                    f"free {format_bytes(gpu.free_bytes, unit) if gpu.free_bytes is not None else 'unknown'}",
                )
                if used is not None:
                    item.setText(
                        _MEMORY, f"{_figure(used, unit)} / {_figure(gpu.total_bytes, unit)}"
                    )
            elif capacity is not None:
                item.setText(_MEMORY, _figure(capacity, unit))
        for item in [*_children(self.cards_group), *_children(self.catalog_group)]:
            entry = self._catalog[item.data(_NAME, Qt.ItemDataRole.UserRole)]
            item.setData(_MEMORY, Qt.ItemDataRole.UserRole, entry.capacity_bytes())
            item.setText(_MEMORY, _figure(entry.capacity_bytes(), unit))
            item.setToolTip(_MEMORY, format_bytes(entry.capacity_bytes(), unit))
        self.tree.blockSignals(blocked)
        self._fit_column(_MEMORY, self._texts(_MEMORY))

    def _texts(self, column: int) -> list[str]:
        return [item.text(column) for group in self._groups for item in _children(group)]

    def _fit_name_column(self) -> None:
        # The group titles span all columns, so only the GPU names set the width.
        self._fit_column(_NAME, self._texts(_NAME))

    def _badge_width(self) -> int:
        return self.tree.fontMetrics().horizontalAdvance(_BADGE_RULER) + 12

    def _fit_column(self, column: int, texts: list[str]) -> None:
        metrics = self.tree.fontMetrics()
        widest = max((metrics.horizontalAdvance(text) for text in texts), default=0)
        if column == _NAME:
            widest = min(widest, metrics.horizontalAdvance(_NAME_RULER))
        # Room for the indentation and the check box (first column), and the cell margins.
        extra = 12 + (self.tree.indentation() + 24 if column == _NAME else 0)
        width = max(widest + extra, self.tree.header().sectionSizeHint(column))
        header = self.tree.header()
        if header.sectionSize(column) != width:
            header.resizeSection(column, width)
        # Never so narrow that a badge is cut: the panel keeps room for all three columns.
        badge = self._badge_width()
        scrollbar = self.tree.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        self.tree.setMinimumWidth(
            header.sectionSize(_NAME)
            + header.sectionSize(_MEMORY)
            + badge
            + scrollbar
            + 2 * self.tree.frameWidth()
        )

    def _paint_fit(self) -> None:
        blocked = self.tree.blockSignals(True)
        for group in self._groups:
            for item in _children(group):
                name = item.data(_NAME, Qt.ItemDataRole.UserRole)
                fit = self._fit.get(name)
                checked = item.checkState(_NAME) == Qt.CheckState.Checked
                if fit is None or not checked:
                    text, tip, colour = "", "", None
                elif fit[0]:
                    text = f"✔ {_figure(fit[1], self._unit)} free"
                    tip = f"Fits, with {format_bytes(fit[1], self._unit)} free"
                    colour = palette.FIT
                else:
                    text = f"✘ {_figure(-fit[1], self._unit)} short"
                    tip = f"Does not fit: {format_bytes(-fit[1], self._unit)} short"
                    colour = palette.NO_FIT
                # Only a changed badge is set: each set repaints the row.
                if item.text(_FIT) == text:
                    continue
                item.setText(_FIT, text)
                item.setToolTip(_FIT, tip)
                if colour is None:
                    item.setBackground(_FIT, QBrush())
                else:
                    item.setForeground(_FIT, QBrush(QColor("white")))
                    item.setBackground(_FIT, QBrush(QColor(colour)))
        self.tree.blockSignals(blocked)

    def _find(self, name: str) -> QTreeWidgetItem | None:
        for group in self._groups:
            for item in _children(group):
                if item.data(_NAME, Qt.ItemDataRole.UserRole) == name:
                    return item
        return None

    def _item_changed(self, _item: QTreeWidgetItem, column: int) -> None:
        if column == _NAME:
            self._emit_capacities()

    def _emit_capacities(self) -> None:
        self._refresh_memory_column()
        self._paint_fit()
        self.capacities_changed.emit(self.capacities())


def _figure(n: int, unit: Unit) -> str:
    """A size in ``unit`` without the unit (the column header names it) as narrow as it reads:
    to a tenth, whole when the tenth is 0 or the size reaches 100 (an RTX 4090's 23.99 GiB as
    24, an L4's 22.49 as 22.5, an H200's 140.4 as 140)."""
    value = to_unit(n, unit)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}".removesuffix(".0")


def _catalog_tooltip(gpu: CatalogGpu) -> str:
    if gpu.vendor == CUSTOM_VENDOR:
        parts = [gpu.name, f"{format_bytes(gpu.memory_bytes)} of memory"]
        if gpu.memory_bandwidth_gbps:
            parts.append(f"{gpu.memory_bandwidth_gbps:g} GB/s memory bandwidth")
        parts.append(
            f"{gpu.bf16_tflops:g} TFLOPS (16-bit)"
            if gpu.bf16_tflops
            else "compute unknown: no speed"
        )
        parts.append("Added by hand; right-click to remove it")
        return "\n".join(parts)
    parts = [f"{gpu.vendor} {gpu.name}", f"{gpu.memory_bandwidth_gbps:g} GB/s memory bandwidth"]
    if gpu.typical_price_usd:
        parts.append(f"about ${gpu.typical_price_usd:,}")
    if gpu.notes:
        parts.append(gpu.notes)
    parts.extend(
        f"{ENGINE_NAMES.get(engine, engine)} does not run here: {why}"
        for engine, why in gpu.engines_unavailable
    )
    return "\n".join(parts)


def _children(group: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    """The items under ``group`` (Qt types ``child(i)`` as optional: past ``childCount()``)."""
    return [item for i in range(group.childCount()) if (item := group.child(i)) is not None]
