"""The comparison of 2 to 6 profiles: every input and component side by side, and their bars.

Profiles are re-estimated with the current core (off the GUI thread: a Hub model may need the
network). A profile whose model cannot be loaded any more is shown with the estimate saved with
it, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyqtgraph as pg  # after PySide6, so that pyqtgraph binds to it
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QGuiApplication, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vramgui.answers.documents import reestimate_profile
from vramgui.answers.rates import catalog_rates
from vramgui.core.units import (
    Unit,
    format_bytes,
    format_count,
    format_duration,
    format_money,
    format_rate,
    to_unit,
)
from vramgui.hardware.capacity import resolve_capacities
from vramgui.hardware.gpus import load_catalog
from vramgui.profiles import Profile
from vramgui.profiles.compare import (
    MODEL,
    TOTAL,
    Figure,
    compare,
    components,
    fits_by_gpu,
    per_gpu,
    whole,
)
from vramgui.profiles.reopen import Reestimate
from vramgui.ui import palette, timing
from vramgui.ui.plot import capacities_in_words, capacity_text, components_in_words, sentences
from vramgui.ui.widgets import FittedLabel
from vramgui.ui.wording import setting_label

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel

MIN_COMPARED = 2
MAX_COMPARED = 6
# Cells that differ across profiles: a light amber that keeps dark text readable on any theme.
DIFFERS_BACKGROUND = "#ffe8a3"
DIFFERS_TEXT = "#3d2e00"
HEADING_BACKGROUND = "#e8e8e8"
_BAR_HEIGHT = 0.5
# About two profiles beside the row names in a laptop's Profiles tab; longer names are cut
# (their tooltip holds them whole).
MAX_COLUMN_WIDTH = 160
# Room around a cell's text (margins, the italic of a changed figure).
FIGURE_PADDING = 20
# Narrower than this, the chart goes under the table.
SIDE_BY_SIDE_WIDTH = 900

_Index = QModelIndex | QPersistentModelIndex


def reestimate(profile: Profile, load_model: Callable[[str], ResolvedModel]) -> Reestimate:
    """Load a profile's model again and estimate it with the current core (see profiles.reopen).

    Never raises: a model that cannot be loaded or a setup the core refuses becomes ``error``.
    """
    return reestimate_profile(
        profile, load_model, resolve_capacities, catalog_rates(load_catalog())
    )


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One line of the comparison table.

    Attributes:
        label: what the line shows.
        cells: one text per profile.
        differs: the profiles do not all agree on this line.
        heading: a section title rather than a figure.
        changed: per profile, whether today's figure differs from the saved one.
        problems: per profile, whether the cell reports a problem.
        tooltips: per profile, the exact figure or the reason.
        figures: the cells hold figures, which the table never cuts short.
    """

    label: str
    cells: tuple[str, ...]
    differs: bool = False
    heading: bool = False
    changed: tuple[bool, ...] = ()
    problems: tuple[bool, ...] = ()
    tooltips: tuple[str, ...] = ()
    figures: bool = False


def _setting_text(key: str, value: Any, unit: Unit) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "default"
    if key == "overhead_bytes" and isinstance(value, int):
        return format_bytes(value, unit)
    if isinstance(value, tuple):
        return ", ".join(value)
    return str(value)


def _figure_row(
    label: str, figure: Figure, results: Sequence[Reestimate], unit: Unit
) -> CompareRow:
    """A row of byte figures: today's value, with the saved one beside it when they differ."""
    cells, tips = [], []
    for value, now, saved, changed, r in zip(
        figure.shown, figure.now, figure.saved, figure.changed, results, strict=True
    ):
        text = format_bytes(value, unit) if value is not None else "-"
        if changed:
            text += f" (saved {format_bytes(saved, unit)})"  # type: ignore[arg-type]
        elif r.document is None and value is not None:
            text += " (saved)"
        cells.append(text)
        tip = f"now {now:,} bytes" if now is not None else ""
        if saved is not None:
            tip += ("; " if tip else "") + f"saved {saved:,} bytes"
        tips.append(tip)
    return CompareRow(
        label,
        tuple(cells),
        differs=figure.differs,
        changed=figure.changed,
        tooltips=tuple(tips),
        figures=True,
    )


def comparison_rows(results: Sequence[Reestimate], unit: Unit = "GiB") -> list[CompareRow]:
    """The comparison of ``results`` (``profiles.compare``), one row per line, in display order:
    the settings that apply to any of them, the components, time and cost, the fits."""
    comparison = compare(results)
    blank = ("",) * len(results)
    rows: list[CompareRow] = [CompareRow("Inputs", blank, heading=True)]
    for setting in comparison.settings:
        # Each setting named as the window names it everywhere (its control, its messages).
        label = setting_label(setting.key)
        if setting.key == MODEL:
            tips = tuple(
                ", ".join(f"{k}: {v}" for k, v in r.profile.model.to_dict().items() if k != "id")
                for r in results
            )
        else:
            tips = ()
        cells = tuple(
            _setting_text(setting.key, value, unit) if applies else "-"
            for value, applies in zip(setting.values, setting.applies, strict=True)
        )
        rows.append(CompareRow(label, cells, differs=setting.differs, tooltips=tips))

    rows.append(CompareRow("Estimate per GPU", blank, heading=True))
    rows.append(
        CompareRow(
            "Estimated with",
            tuple(
                "current core" if r.document is not None else "saved only (cannot re-estimate)"
                for r in results
            ),
            problems=tuple(r.document is None for r in results),
            tooltips=tuple(r.error or "; ".join(r.notices) for r in results),
        )
    )
    phases = tuple(p or "-" for p in comparison.phases)
    rows.append(CompareRow("Peak at", phases, differs=len(set(phases)) > 1))
    for figure in comparison.figures:
        label = "Total per GPU" if figure.key == TOTAL else palette.component_label(figure.key)
        rows.append(_figure_row(label, figure, results, unit))

    rows.extend(_timing_rows(results))
    if comparison.fits:
        rows.append(CompareRow("Fit", blank, heading=True))
    for fit in comparison.fits:
        cells = tuple(
            "-"
            if c is None
            else (
                f"{'fits' if c.fits else 'does not fit'}, "
                f"{format_bytes(abs(c.headroom_bytes), unit)} {'free' if c.fits else 'short'}"
            )
            for c in fit.cells
        )
        rows.append(
            CompareRow(
                fit.gpu,
                cells,
                differs=len(set(cells)) > 1,
                problems=tuple(c is not None and not c.fits for c in fit.cells),
                figures=True,
            )
        )
    return rows


def _timing_rows(results: Sequence[Reestimate]) -> list[CompareRow]:
    """Speed and cost on each profile's first GPU (today's estimate only: saved ones have none)."""
    blocks = [timing.timed(r.document) if r.document is not None else None for r in results]
    if not any(blocks):
        return []

    def row(label: str, cells: list[str], tips: Sequence[str] = ()) -> CompareRow:
        return CompareRow(
            label, tuple(cells), differs=len(set(cells)) > 1, tooltips=tuple(tips), figures=True
        )

    speeds, per_million, runs, tips = [], [], [], []
    for result, block in zip(results, blocks, strict=True):
        if block is None:
            speeds.append("-")
            per_million.append("-")
            runs.append("-")
            tips.append("No catalog GPU to time it on, or no estimate today")
            continue
        price = block.get("price") or {}
        currency = price.get("currency", "USD")
        count = result.profile.workload.gpus
        where = f"{count} x {block['gpu']}" if count > 1 else block["gpu"]
        placement = block.get("placement")
        if placement and placement["kind"] != "as set":
            where = placement["text"]  # what runs where the setup as saved does not fit
        if "concurrency" in block:
            where += f", batch {block['concurrency']}"
        speeds.append(f"{format_rate(block['tokens_per_second'])} ({where})")
        cost = block.get("cost_per_million_tokens")
        per_million.append("-" if cost is None else format_money(cost, currency))
        if block.get("time_seconds") is not None:
            run = format_duration(block["time_seconds"])
            if block.get("cost") is not None:
                run += f", {format_money(block['cost'], currency)}"
            runs.append(run)
        else:
            runs.append("-")
        tips.append(
            f"{format_money(price['per_gpu_hour'], currency)} per GPU-hour ({price['source']}"
            + (f", {price['date']}" if price.get("date") else "")
            + ")"
            if price
            else "No rental price for this GPU"
        )
    tokens = next((b["train_tokens"] for b in blocks if b and "train_tokens" in b), None)
    out = [
        CompareRow("Time and cost", ("",) * len(results), heading=True),
        row("Tokens per second, all GPUs", speeds),
        row("Cost per million tokens", per_million, tips),
    ]
    if tokens is not None:
        out.append(row(f"Training {format_count(tokens)} tokens", runs, tips))
    return out


def cost_order(results: Sequence[Reestimate]) -> list[Reestimate]:
    """``results`` cheapest per million tokens first; those without a cost keep their order last."""

    def key(pair: tuple[int, Reestimate]) -> tuple[bool, float, int]:
        index, r = pair
        block = timing.timed(r.document) if r.document is not None else None
        cost = block.get("cost_per_million_tokens") if block else None
        return (cost is None, cost or 0.0, index)

    return [r for _, r in sorted(enumerate(results), key=key)]


class ComparisonModel(QAbstractTableModel):
    """Rows: inputs, then components, then fits; columns: the compared profiles.

    Reset with :meth:`set_rows`; :meth:`set_only_differences` hides the lines where all agree.
    """

    def __init__(self) -> None:
        super().__init__()
        self._headers: list[str] = []
        self._all: list[CompareRow] = []
        self._rows: list[CompareRow] = []
        self._only_differences = False

    def set_rows(self, headers: Sequence[str], rows: Sequence[CompareRow]) -> None:
        """Show ``rows`` under one column per name of ``headers``."""
        self.beginResetModel()
        self._headers = list(headers)
        self._all = list(rows)
        self._rows = self._visible()
        self.endResetModel()

    def set_only_differences(self, only: bool) -> None:
        """Hide (or show again) the lines on which every profile agrees."""
        self.beginResetModel()
        self._only_differences = only
        self._rows = self._visible()
        self.endResetModel()

    def _visible(self) -> list[CompareRow]:
        if not self._only_differences:
            return list(self._all)
        return [r for r in self._all if r.heading or r.differs or any(r.changed)]

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._headers)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal:
            if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole) and (
                0 <= section < len(self._headers)
            ):
                return self._headers[section]
            return None
        if not 0 <= section < len(self._rows):
            return None
        row = self._rows[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return row.label
        if role == Qt.ItemDataRole.FontRole and (row.heading or row.differs):
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole and row.differs:
            return "The profiles differ here."
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return row.cells[column]
        if role == Qt.ItemDataRole.BackgroundRole:
            if row.heading:
                return QBrush(QColor(HEADING_BACKGROUND))
            if row.differs:
                return QBrush(QColor(DIFFERS_BACKGROUND))
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if row.problems and row.problems[column]:
                return QBrush(QColor(palette.NO_FIT))
            if row.differs or row.heading:
                return QBrush(QColor(DIFFERS_TEXT))
            return None
        if role == Qt.ItemDataRole.FontRole and row.changed and row.changed[column]:
            font = QFont()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            # The exact figure or the reason; else the whole text of a cell cut short.
            tip = row.tooltips[column] if row.tooltips else ""
            return tip or row.cells[column] or None
        return None

    def figure_rows(self) -> list[int]:
        """The shown rows that hold figures."""
        return [i for i, row in enumerate(self._rows) if row.figures]


class CompareChart(pg.GraphicsLayoutWidget):
    """One bar per profile, stacked by component, against the capacities of the profiles' GPUs.

    Items are created once and updated in place: one bar item per component holds that
    component's bars for every profile; a dashed outline shows the saved total where it differs.
    The legend sits under the plot so that it never hides a bar.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        colours = QGuiApplication.palette()
        background = colours.color(QPalette.ColorRole.Base)
        self._text = colours.color(QPalette.ColorRole.Text)
        super().__init__(parent)
        self.setBackground(background)
        self.setAccessibleName("Compared profiles: memory per GPU by component")
        self._unit: Unit = "GiB"
        self._results: list[Reestimate] = []
        self._bars: dict[str, pg.BarGraphItem] = {}
        self._totals: list[pg.TextItem] = []
        self._lines: list[pg.InfiniteLine] = []
        # No context menu: building pyqtgraph's menus costs more than the rest of the chart.
        self.plot = self.addPlot(row=0, col=0, enableMenu=False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        # Each bar is named above itself, which leaves the chart's width to the bars.
        self.plot.hideAxis("left")
        self.plot.getAxis("bottom").setTextPen(self._text)
        self.plot.getAxis("bottom").setPen(self._text)
        self.legend = pg.LegendItem(colCount=2, labelTextColor=self._text)
        self.addItem(self.legend, row=1, col=0)
        self.saved_outline = pg.BarGraphItem(
            x0=[],
            width=[],
            y=[],
            height=_BAR_HEIGHT + 0.08,
            brush=None,
            pen=pg.mkPen(self._text, width=1.5, style=Qt.PenStyle.DashLine),
        )
        self.plot.addItem(self.saved_outline)
        self.setMinimumHeight(220)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._redraw()

    def set_results(self, results: Sequence[Reestimate]) -> None:
        """Draw one bar per profile of ``results``."""
        self._results = list(results)
        self._redraw()

    def bars(self, name: str) -> pg.BarGraphItem | None:
        """The bar item of component ``name`` (None if it was never drawn)."""
        return self._bars.get(name)

    def _bar(self, name: str) -> pg.BarGraphItem:
        bar = self._bars.get(name)
        if bar is None:
            colour = (
                palette.COMPONENT_COLOURS.get(name)
                or palette.EXTRA_COLOURS[len(self._bars) % len(palette.EXTRA_COLOURS)]
            )
            bar = pg.BarGraphItem(
                x0=[], width=[], y=[], height=_BAR_HEIGHT, brush=colour, pen=pg.mkPen(None)
            )
            self.plot.addItem(bar)
            self.legend.addItem(bar, palette.component_label(name))
            self._bars[name] = bar
        return bar

    def _redraw(self) -> None:
        unit = self._unit
        plot = self.plot
        shown = [components(r.shown) for r in self._results]
        names: list[str] = []
        for parts in shown:
            names.extend(n for n in parts if n not in names and parts[n] > 0)
        starts = [0.0] * len(shown)
        for name in names:
            bar = self._bar(name)
            x0, width, ys = [], [], []
            for i, parts in enumerate(shown):
                size = parts.get(name, 0)
                if size <= 0:
                    continue
                x0.append(starts[i])
                width.append(to_unit(size, unit))
                ys.append(i)
                starts[i] += to_unit(size, unit)
            bar.setOpts(x0=x0, width=width, y=ys)
        for name, bar in self._bars.items():
            bar.setVisible(name in names)

        outline_x, outline_y = [], []
        for i, r in enumerate(self._results):
            saved = whole(per_gpu(r.profile.saved_estimate).get("total_bytes"))
            now = whole(per_gpu(r.document).get("total_bytes")) if r.document else None
            if saved is not None and now is not None and saved != now:
                outline_x.append(to_unit(saved, unit))
                outline_y.append(i)
        self.saved_outline.setOpts(x0=[0] * len(outline_x), width=outline_x, y=outline_y)
        self.saved_outline.setVisible(bool(outline_x))
        # The outline's legend entry is only there while an outline is.
        self.legend.removeItem(self.saved_outline)
        if outline_x:
            self.legend.addItem(self.saved_outline, "saved total, where it differs")

        while len(self._totals) < len(self._results):
            label = pg.TextItem(color=self._text, anchor=(0, 1))
            plot.addItem(label, ignoreBounds=True)
            self._totals.append(label)
        for i, label in enumerate(self._totals):
            if i >= len(self._results):
                label.hide()
                continue
            result = self._results[i]
            total = whole(per_gpu(result.shown).get("total_bytes"))
            figure = format_bytes(total, unit) if total is not None else "no estimate"
            label.setText(f"{result.profile.name} · {figure}")
            label.setPos(0, i - _BAR_HEIGHT / 2 - 0.06)
            label.show()

        capacities: dict[str, int] = {}
        for r in self._results:
            for gpu, row in fits_by_gpu(r.shown).items():
                capacity = whole(row.get("capacity_bytes"))
                if capacity is not None:
                    capacities.setdefault(gpu, capacity)
        while len(self._lines) < len(capacities):
            line = pg.InfiniteLine(
                angle=90,
                movable=False,
                label="",
                labelOpts={"movable": False, "fill": (0, 0, 0, 0)},
            )
            plot.addItem(line, ignoreBounds=True)
            self._lines.append(line)
        entries = list(capacities.items())
        for i, line in enumerate(self._lines):
            if i >= len(entries):
                line.hide()
                continue
            gpu, capacity = entries[i]
            colour = palette.EXTRA_COLOURS[(i + 2) % len(palette.EXTRA_COLOURS)]
            line.setPen(pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine))
            line.setPos(to_unit(capacity, unit))
            line.label.setText(f"{gpu} ({format_bytes(capacity, unit, 0)})")
            line.label.setColor(colour)
            # Stagger the labels so that close capacities do not overprint.
            # The y axis is inverted, so small positions are at the top, above the bars.
            line.label.setPosition(0.04 + 0.06 * (i % 6))
            line.setToolTip(capacity_text(gpu, capacity, unit))
            line.show()

        biggest = max([*starts, *outline_x, *(to_unit(c, unit) for c in capacities.values()), 1.0])
        plot.setXRange(0, biggest * 1.2, padding=0)
        count = max(len(self._results), 1)
        # Room above the first bar for its name and the capacity labels.
        plot.setYRange(-0.8 - 0.25 * min(len(entries), 6), count - 0.5, padding=0)
        plot.getAxis("bottom").setLabel(f"GPU memory per GPU ({unit})", color=self._text.name())
        self.setAccessibleDescription(self.describe(capacities))

    def describe(self, capacities: dict[str, int]) -> str:
        """Each compared profile's total per GPU and its components (the saved total where it
        differs), then the capacities drawn."""
        if not self._results:
            return "No profiles compared."
        unit = self._unit
        profiles = []
        for r in self._results:
            total = whole(per_gpu(r.shown).get("total_bytes"))
            if total is None:
                profiles.append(f"{r.profile.name}: no estimate.")
                continue
            saved = whole(per_gpu(r.profile.saved_estimate).get("total_bytes"))
            now = whole(per_gpu(r.document).get("total_bytes")) if r.document else None
            differs = (
                f" (saved: {format_bytes(saved, unit)})"
                if saved is not None and now is not None and saved != now
                else ""
            )
            shown = {name: size for name, size in components(r.shown).items() if size > 0}
            profiles.append(
                f"{r.profile.name}: {format_bytes(total, unit)} per GPU{differs}, "
                f"{components_in_words(shown, unit)}."
            )
        return sentences(*profiles, capacities_in_words(capacities.items(), unit))


class CompareView(QWidget):
    """The comparison table beside the chart; shows what :meth:`show_results` hands it.

    Args:
        parent: the parent widget.
        chart: the chart, when made beforehand (the window makes it in a turn of its own).
    """

    def __init__(self, parent: QWidget | None = None, *, chart: CompareChart | None = None) -> None:
        super().__init__(parent)
        self._unit: Unit = "GiB"
        self._results: list[Reestimate] = []
        self.title = FittedLabel()
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        # The title gives way to the check boxes on a narrow screen: shorter, then cut with "…"
        # (its tooltip keeps it whole).
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.only_differences = QCheckBox("Only lines that differ")
        self.cheapest_first = QCheckBox("Cheapest first")
        self.cheapest_first.setToolTip(
            "Order the profiles by the cost of a million tokens on their first GPU"
        )
        self.model = ComparisonModel()
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setWordWrap(False)
        self.table.setAlternatingRowColors(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # A long profile name is cut at its end, not at both (its tooltip holds it whole).
        self.table.horizontalHeader().setTextElideMode(Qt.TextElideMode.ElideRight)
        self.chart = chart if chart is not None else CompareChart()
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: gray;")

        header = QHBoxLayout()
        header.addWidget(self.title, 1)
        header.addWidget(self.cheapest_first)
        header.addWidget(self.only_differences)
        # Side by side where there is room, else one page each (see resizeEvent).
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.setChildrenCollapsible(False)
        self.pages = QTabWidget()
        self.pages.setDocumentMode(True)
        self.arrangement = QStackedWidget()
        self.arrangement.addWidget(self.split)
        self.arrangement.addWidget(self.pages)
        self._side_by_side: bool | None = None
        self._arrange(side_by_side=False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self.arrangement, 1)
        layout.addWidget(self.notes)
        self.only_differences.toggled.connect(self.model.set_only_differences)
        self.cheapest_first.toggled.connect(lambda _checked: self._redraw())
        self.clear("Select 2 to 6 profiles and press Compare.")

    def clear(self, text: str) -> None:
        """Show no comparison, with ``text`` in its place."""
        self._results = []
        self.title.setText(text)
        self.notes.clear()
        self.model.set_rows([], [])
        self.chart.set_results([])

    def show_results(self, results: Sequence[Reestimate]) -> None:
        """Lay ``results`` side by side."""
        self._results = list(results)
        self._redraw()

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self.chart.set_unit(unit)
        if self._results:
            self._redraw()

    @property
    def results(self) -> list[Reestimate]:
        return list(self._results)

    @property
    def side_by_side(self) -> bool:
        """Whether the table and the chart show side by side (else on pages of their own)."""
        return bool(self._side_by_side)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._arrange(event.size().width() >= SIDE_BY_SIDE_WIDTH)
        super().resizeEvent(event)

    def _arrange(self, side_by_side: bool) -> None:
        """Put the table and the chart side by side, or each on a page when narrow.

        Stacked one above the other in a laptop's height, neither had room: the chart's legend
        took what was left of its bars.
        """
        if side_by_side == self._side_by_side:
            return
        self._side_by_side = side_by_side
        if side_by_side:
            # Adding them to the splitter takes them off their pages, which had hidden the one
            # not in front.
            self.split.addWidget(self.table)
            self.split.addWidget(self.chart)
            self.table.show()
            self.chart.show()
            self.split.setSizes([600, 420])
            self.arrangement.setCurrentWidget(self.split)
        else:
            self.pages.addTab(self.table, "Table")
            self.pages.addTab(self.chart, "Chart")
            self.arrangement.setCurrentWidget(self.pages)

    def _redraw(self) -> None:
        if not self._results:
            return
        results = cost_order(self._results) if self.cheapest_first.isChecked() else self._results
        rows = comparison_rows(results, self._unit)
        differing = sum(1 for r in rows if r.differs)
        self.title.set_texts(
            f"Comparing {len(results)} profiles: {differing} line(s) differ (highlighted)",
            f"{len(results)} profiles, {differing} line(s) differ",
        )
        self.model.set_rows([r.profile.name for r in results], rows)
        # Fit the columns to their text, but keep one long name from pushing the others away;
        # figures are never cut (the table scrolls instead).
        self.table.resizeColumnsToContents()
        header = self.table.horizontalHeader()
        metrics = self.table.fontMetrics()
        figure_rows = self.model.figure_rows()
        for column in range(self.model.columnCount()):
            figures = max(
                (
                    metrics.horizontalAdvance(str(self.model.index(row, column).data()))
                    for row in figure_rows
                ),
                default=0,
            )
            width = min(header.sectionSize(column), MAX_COLUMN_WIDTH)
            header.resizeSection(column, max(width, figures + FIGURE_PADDING))
        self.chart.set_results(results)
        lines = []
        for r in results:
            if r.error:
                lines.append(
                    f"{r.profile.name}: cannot re-estimate now ({r.error}); saved figures shown"
                )
            lines.extend(f"{r.profile.name}: {n}" for n in r.notices)
        self.notes.setText("\n".join(lines))
