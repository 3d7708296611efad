"""The sweep chart (pyqtgraph): memory per GPU against context / sequence length or batch.

Every graphics item is created once and updated in place (``setData``, ``setPos``). This module
is imported once the window is on screen (pyqtgraph and numpy take most of a second to import).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg  # after PySide6, so that pyqtgraph binds to it
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QCursor, QGuiApplication, QPalette, QPen
from PySide6.QtWidgets import QToolTip, QWidget

from vramgui.core.units import Unit, format_bytes, to_unit
from vramgui.ui import palette
from vramgui.ui.axes import nice_ceiling, short_count


def _theme() -> tuple[QColor, QColor]:
    # The application palette, so that charts follow a light or dark desktop theme.
    colours = QGuiApplication.palette()
    return colours.color(QPalette.ColorRole.Base), colours.color(QPalette.ColorRole.Text)


class _CapacityLines:
    """A pool of labelled horizontal lines, one per chosen GPU, grown on demand, hidden unused."""

    def __init__(self, plot: pg.PlotItem, text: QColor, positions: Sequence[float]) -> None:
        self._plot = plot
        self._text = text
        self._positions = positions
        self.lines: list[pg.InfiniteLine] = []
        self._shown: list[tuple[object, ...]] = []
        self._pens: dict[str, QPen] = {}

    def show(self, entries: Sequence[tuple[float, str, str, QColor]]) -> None:
        """Show ``(position, label, tooltip, colour)`` lines; hide the rest."""
        while len(self.lines) < len(entries):
            line = pg.InfiniteLine(
                angle=0,
                movable=False,
                label="",
                labelOpts={
                    "movable": False,
                    "color": self._text,
                    "fill": (0, 0, 0, 0),
                    # Text above the line's right end, so that it stays inside the plot.
                    "anchors": [(1, 1), (1, 1)],
                },
            )
            self._plot.addItem(line, ignoreBounds=True)
            self.lines.append(line)
        count = len(entries)
        for i, line in enumerate(self.lines):
            if i >= count:
                line.hide()
                continue
            position, label, tooltip, colour = entries[i]
            # A line as it was drawn stays untouched: restyling it costs more than drawing it.
            state = (position, label, tooltip, colour.name())
            if i < len(self._shown) and self._shown[i] == state and line.isVisible():
                continue
            pen = self._pens.get(colour.name())
            if pen is None:
                pen = self._pens[colour.name()] = pg.mkPen(
                    colour, width=2, style=Qt.PenStyle.DashLine
                )
            line.setPen(pen)
            line.setPos(position)
            line.label.setText(label)
            line.label.setColor(colour)
            # Stagger labels along the line so that close capacities do not overprint.
            line.label.setPosition(self._positions[i % len(self._positions)])
            line.setToolTip(tooltip)
            line.show()
        self._shown = [(p, lab, tip, col.name()) for p, lab, tip, col in entries]


class PowerOfTwoAxis(pg.AxisItem):
    """A log-scale axis ticked at powers of two (512, 1k, 2k, ..., 128k), as sizes are chosen."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:
        low, high = 10**minVal, 10**maxVal
        powers = [2**k for k in range(0, 31) if low * 0.999 <= 2**k <= high * 1.001]
        # Keep labels apart: at most one every ~55 pixels.
        step = max(1, math.ceil(len(powers) * 55 / max(size, 1)))
        major = powers[::step]
        return [(1.0, [math.log10(v) for v in major])]

    def tickStrings(self, values: list, scale: float, spacing: float) -> list[str]:
        return [short_count(10**v) for v in values]


class SweepChart(pg.PlotWidget):
    """Memory per GPU against context / sequence length or batch, with capacity lines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        background, text = _theme()
        super().__init__(
            parent,
            background=background,
            axisItems={"bottom": PowerOfTwoAxis("bottom")},
            enableMenu=False,  # never built: the menus cost more to make than the plot
        )
        self._text = text
        self._unit: Unit = "GiB"
        self._field = "seq"
        self._values: tuple[int, ...] = ()
        self._totals: tuple[int, ...] = ()
        self._capacities: list[tuple[str, int]] = []
        self._largest: int | None = None
        self._current: int | None = None
        self._labels: tuple[str, str] = ("", "")
        self._ranges: tuple[float, int, int] = (0.0, 0, 0)
        item = self.getPlotItem()
        item.hideButtons()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLogMode(x=True, y=False)
        for axis in ("bottom", "left"):
            item.getAxis(axis).setTextPen(text)
            item.getAxis(axis).setPen(text)
        self.curve = item.plot(
            [],
            [],
            pen=pg.mkPen(palette.COMPONENT_COLOURS["weights"], width=2),
            symbol="o",
            symbolSize=6,
            symbolBrush=palette.COMPONENT_COLOURS["weights"],
        )
        self.current_point = pg.ScatterPlotItem(
            size=13, brush=pg.mkBrush(0, 0, 0, 0), pen=pg.mkPen(text, width=2)
        )
        item.addItem(self.current_point)
        self.largest_line = pg.InfiniteLine(
            angle=90,
            movable=False,
            pen=pg.mkPen(palette.FIT, width=2),
            label="",
            labelOpts={"position": 0.08, "color": palette.FIT, "movable": False},
        )
        item.addItem(self.largest_line, ignoreBounds=True)
        self.lines = _CapacityLines(item, text, (0.98, 0.7, 0.42))
        self.scene().sigMouseMoved.connect(self._mouse_moved)
        self.hover_text = ""
        self.setMinimumHeight(170)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._redraw()

    def set_data(
        self,
        field: str,
        values: Sequence[int],
        *,
        totals_bytes: Sequence[int],
        capacities: Sequence[tuple[str, int]],
        largest: int | None,
        current: int,
    ) -> None:
        """Draw the totals at ``values`` of ``field``, the capacities and the largest fitting value."""
        self._field = field
        self._values = tuple(values)
        self._totals = tuple(totals_bytes)
        self._capacities = list(capacities)
        self._largest = largest
        self._current = current
        self._redraw()

    def _redraw(self) -> None:
        unit = self._unit
        xs = list(self._values)
        ys = [to_unit(t, unit) for t in self._totals]
        self.curve.setData(xs, ys)
        if self._current in self._values:
            y = ys[self._values.index(self._current)]
            self.current_point.setData([math.log10(self._current)], [y])
        else:
            self.current_point.setData([], [])
        entries = [
            (
                to_unit(capacity, unit),
                f"{gpu} ({format_bytes(capacity, unit, 0)})",
                f"{gpu}: {format_bytes(capacity, unit)}",
                self._text,
            )
            for gpu, capacity in self._capacities
        ]
        self.lines.show(entries)
        what = "Context length (tokens)" if self._field == "seq" else "Batch size"
        item = self.getPlotItem()
        if (what, unit) != self._labels:
            self._labels = (what, unit)
            item.getAxis("bottom").setLabel(what, color=self._text.name())
            item.getAxis("left").setLabel(f"Per GPU ({unit})", color=self._text.name())
        if self._largest is not None and self._capacities:
            self.largest_line.setPos(math.log10(self._largest))
            self.largest_line.label.setText(f"largest that fits: {self._largest:,}")
            self.largest_line.show()
        else:
            self.largest_line.hide()
        if ys:
            # A curve that runs far past every capacity would flatten the part that matters.
            capacities = [e[0] for e in entries]
            top = max(ys + capacities)
            if capacities:
                top = min(top, max(capacities) * 2.5)
            ranges = (nice_ceiling(top * 1.05), xs[0], xs[-1])
            if ranges != self._ranges:
                self._ranges = ranges
                item.setYRange(0, ranges[0], padding=0)
                item.setXRange(math.log10(xs[0]), math.log10(xs[-1]), padding=0.03)

    def text_at(self, x_log10: float) -> str:
        """The hover text of the sweep point nearest to ``x_log10`` (the axis is log scale)."""
        if not self._values:
            return ""
        index = min(
            range(len(self._values)), key=lambda i: abs(math.log10(self._values[i]) - x_log10)
        )
        what = "context" if self._field == "seq" else "batch"
        total = self._totals[index]
        return (
            f"{what} {self._values[index]:,}: {format_bytes(total, self._unit)} per GPU "
            f"({total:,} bytes)"
        )

    def _mouse_moved(self, position: QPointF) -> None:
        if not self.getPlotItem().sceneBoundingRect().contains(position):
            return
        point = self.getPlotItem().vb.mapSceneToView(position)
        self.hover_text = self.text_at(point.x())
        if self.hover_text:
            QToolTip.showText(QCursor.pos(), self.hover_text, self)
