"""pyqtgraph charts: the stacked breakdown against GPU capacities, and the sweep.

Every graphics item is created once and updated in place (``setOpts``, ``setData``, ``setPos``);
redrawing after an input change allocates nothing but the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg  # after PySide6, so that pyqtgraph binds to it
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QCursor, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import QToolTip, QWidget

from vramgui.core.units import Unit, format_bytes, to_unit
from vramgui.ui import palette

_BAR_HEIGHT = 0.6
_TOP = 1.9  # the breakdown chart's y range ends here; the legend hangs from it
LEGEND_COLUMNS = 3
MAX_LEGENDS = 16  # sets of components whose legend is kept


def _theme() -> tuple[QColor, QColor]:
    # The application palette, so that charts follow a light or dark desktop theme.
    colours = QGuiApplication.palette()
    return colours.color(QPalette.ColorRole.Base), colours.color(QPalette.ColorRole.Text)


# Lines this far along the axis or less get their label on their right (a label is about this long).
LEFT_PART = 0.4


class _CapacityLines:
    """A pool of labelled lines, one per chosen GPU, grown on demand and hidden when unused."""

    def __init__(
        self, plot: pg.PlotItem, angle: int, text: QColor, positions: Sequence[float]
    ) -> None:
        self._plot = plot
        self._angle = angle
        self._text = text
        self._positions = positions
        self.lines: list[pg.InfiniteLine] = []
        self._shown: list[tuple[object, ...]] = []
        self._pens: dict[str, QPen] = {}

    def show(
        self, entries: Sequence[tuple[float, str, str, str | QColor]], span: float = 0
    ) -> None:
        """Show ``(position, label, tooltip, colour)`` lines; hide the rest.

        Args:
            entries: the lines to show.
            span: the axis length of a vertical line's plot; labels of lines in its left part
                are drawn right of the line, where the text has room (0: always left of it).
        """
        while len(self.lines) < len(entries):
            line = pg.InfiniteLine(
                angle=self._angle,
                movable=False,
                label="",
                labelOpts={
                    "movable": False,
                    "color": self._text,
                    "fill": (0, 0, 0, 0),
                    # Text ends at the line (vertical) or above its right end (horizontal), so
                    # that it stays inside the plot.
                    "anchors": [(1, 0.5), (1, 0.5)] if self._angle == 90 else [(1, 1), (1, 1)],
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
            state = (position, label, tooltip, colour, span)
            if i < len(self._shown) and self._shown[i] == state and line.isVisible():
                continue
            key = colour if isinstance(colour, str) else colour.name()
            pen = self._pens.get(key)
            if pen is None:
                pen = self._pens[key] = pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine)
            line.setPen(pen)
            line.setPos(position)
            line.label.setText(label)
            line.label.setColor(colour)
            # Stagger labels along the line so that close capacities do not overprint.
            if self._angle == 90:
                side = (0, 0.5) if position < span * LEFT_PART else (1, 0.5)
                line.label.anchors = [side, side]
            line.label.setPosition(self._positions[i % len(self._positions)])
            line.setToolTip(tooltip)
            line.show()
        self._shown = [(*entry, span) for entry in entries]


class StackedBar(pg.GraphicsObject):
    """One horizontal bar of coloured segments, painted as plain rectangles.

    A single item instead of one ``BarGraphItem`` per component: pyqtgraph recomputes each bar
    item's geometry on every change, which cost more than all the painting.
    """

    def __init__(self) -> None:
        super().__init__()
        self._segments: list[tuple[float, float, QBrush]] = []
        self._length = 0.0

    def set_segments(self, segments: Sequence[tuple[float, float, QBrush]]) -> None:
        """Show ``(start, width, brush)`` segments along x, centred on y = 0."""
        self.prepareGeometryChange()
        self._segments = list(segments)
        self._length = max((start + width for start, width, _ in self._segments), default=0.0)
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(0.0, -_BAR_HEIGHT / 2, self._length, _BAR_HEIGHT)

    def paint(self, painter: QPainter, *_args: object) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for start, width, brush in self._segments:
            painter.setBrush(brush)
            painter.drawRect(QRectF(start, -_BAR_HEIGHT / 2, width, _BAR_HEIGHT))


class BreakdownChart(pg.PlotWidget):
    """One stacked horizontal bar of the per-GPU total by component, against GPU capacity lines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        background, text = _theme()
        super().__init__(parent, background=background)
        self._text = text
        self._unit: Unit = "GiB"
        self._components: dict[str, int] = {}
        self._capacities: list[tuple[str, int, bool, int]] = []
        self._brushes: dict[str, QBrush] = {}
        self._listed: tuple[str, ...] = ()
        self._right = 0.0
        self._axis_label = ""
        item = self.getPlotItem()
        item.hideAxis("left")
        item.setMenuEnabled(False)
        item.setMouseEnabled(x=False, y=False)
        item.hideButtons()
        item.showGrid(x=True, y=False, alpha=0.25)
        bottom = item.getAxis("bottom")
        bottom.setTextPen(text)
        bottom.setPen(text)
        # Major ticks only: minor grid lines crowded the bar, and laying out their labels cost
        # more than drawing everything else whenever the range changed.
        bottom.setStyle(maxTickLevel=0, maxTextLevel=0)
        self.bar = StackedBar()
        item.addItem(self.bar)
        # One text item per set of components, kept: pyqtgraph's legend builds a widget per
        # entry, and even one HTML text takes milliseconds to lay out, so switching between
        # methods (full, LoRA, QLoRA) shows a legend already made.
        self._legends: dict[tuple[str, ...], pg.TextItem] = {}
        self.legend: pg.TextItem | None = None
        self.total_label = pg.TextItem(color=text, anchor=(0, 0.5))
        item.addItem(self.total_label, ignoreBounds=True)
        # Capacity labels go in the band under the bar, the legend above it.
        self.lines = _CapacityLines(item, 90, text, (0.06, 0.14, 0.22))
        self.scene().sigMouseMoved.connect(self._mouse_moved)
        self.hover_text = ""
        self.setMinimumHeight(200)  # three legend rows above the bar, labels below
        # Room above the bar for the legend, below it for the capacity labels.
        item.setYRange(-1.25, _TOP, padding=0)
        self._set_range(1.0)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._redraw()

    def set_data(
        self,
        components: dict[str, int],
        capacities: Sequence[tuple[str, int, bool, int]],
    ) -> None:
        """Draw ``components`` (bytes by name) against ``(gpu, capacity, fits, headroom)`` rows."""
        self._components = dict(components)
        self._capacities = list(capacities)
        self._redraw()

    def _brush(self, name: str) -> QBrush:
        brush = self._brushes.get(name)
        if brush is None:
            colour = (
                palette.COMPONENT_COLOURS.get(name)
                or palette.EXTRA_COLOURS[len(self._brushes) % len(palette.EXTRA_COLOURS)]
            )
            brush = self._brushes[name] = pg.mkBrush(colour)
        return brush

    def _show_legend(self, names: tuple[str, ...]) -> None:
        if self.legend is not None:
            self.legend.hide()
        legend = self._legends.get(names)
        if legend is None:
            if len(self._legends) >= MAX_LEGENDS:
                stale = self._legends.pop(next(iter(self._legends)))
                self.getPlotItem().removeItem(stale)
            legend = pg.TextItem(color=self._text, anchor=(0, 0))
            legend.setHtml(self._legend_html(names))
            legend.setPos(0, _TOP)
            self.getPlotItem().addItem(legend, ignoreBounds=True)
            self._legends[names] = legend
        legend.show()
        self.legend = legend

    def _legend_html(self, names: Sequence[str]) -> str:
        cells = [
            f"<td><span style='color:{self._brush(name).color().name()}'>&#9632;</span>"
            f"&nbsp;{palette.component_label(name)}&nbsp;&nbsp;</td>"
            for name in names
        ]
        rows = (
            "<tr>" + "".join(cells[i : i + LEGEND_COLUMNS]) + "</tr>"
            for i in range(0, len(cells), LEGEND_COLUMNS)
        )
        return f"<table cellspacing='0' cellpadding='1'>{''.join(rows)}</table>"

    def legend_text(self) -> str:
        """The legend as plain text: the components shown, in order."""
        return self.legend.textItem.toPlainText() if self.legend is not None else ""

    def segment(self, name: str) -> tuple[float, float]:
        """``(start, width)`` of component ``name`` along the axis, in the current unit."""
        start = 0.0
        for other, size in self._components.items():
            width = to_unit(size, self._unit)
            if other == name:
                return start, width
            start += width
        raise KeyError(name)

    def _redraw(self) -> None:
        unit = self._unit
        total = sum(self._components.values())
        segments = []
        start = 0.0
        for name, size in self._components.items():
            width = to_unit(size, unit)
            segments.append((start, width, self._brush(name)))
            start += width
        self.bar.set_segments(segments)
        listed = tuple(self._components)
        if listed != self._listed:
            # The legend lists the components present; rebuilt only when that set changes.
            self._listed = listed
            self._show_legend(listed)
        self.total_label.setText(f"  {format_bytes(total, unit)}")
        self.total_label.setPos(to_unit(total, unit), 0)
        entries = []
        for gpu, capacity, fits, headroom in self._capacities:
            colour = palette.FIT if fits else palette.NO_FIT
            room = "free" if fits else "short"
            label = f"{gpu}: {format_bytes(abs(headroom), unit, 1)} {room}"
            tooltip = (
                f"{gpu}: {format_bytes(capacity, unit)} ({capacity:,} bytes); "
                f"{format_bytes(abs(headroom), unit)} {'left' if fits else 'missing'}"
            )
            entries.append((to_unit(capacity, unit), label, tooltip, colour))
        self._set_range(max([to_unit(total, unit)] + [e[0] for e in entries]))
        self.lines.show(entries, self._right)

    def _set_range(self, biggest: float) -> None:
        # The range moves in coarse steps, so that small changes keep the axis as it was drawn
        # (redrawing an axis costs more than the bars).
        right = _nice_ceiling(max(biggest, 1.0) * 1.12)
        if right != self._right:
            self._right = right
            self.getPlotItem().setXRange(0, right, padding=0)
        label = f"GPU memory per GPU ({self._unit})"
        if label != self._axis_label:
            self._axis_label = label
            self.getPlotItem().getAxis("bottom").setLabel(label, color=self._text.name())

    def text_at(self, x: float, y: float) -> str:
        """The hover text for a point in chart coordinates: a component's exact size, or ""."""
        if abs(y) > _BAR_HEIGHT / 2:
            return ""
        total = sum(self._components.values())
        start = 0.0
        for name, size in self._components.items():
            width = to_unit(size, self._unit)
            if start <= x < start + width:
                share = size / total if total else 0.0
                return (
                    f"{palette.component_label(name)}: {format_bytes(size, self._unit)} "
                    f"({size:,} bytes, {share:.1%} of the total)"
                )
            start += width
        return ""

    def _mouse_moved(self, position: QPointF) -> None:
        point = self.getPlotItem().vb.mapSceneToView(position)
        self.hover_text = self.text_at(point.x(), point.y())
        if self.hover_text:
            QToolTip.showText(QCursor.pos(), self.hover_text, self)


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k that is at least ``value``."""
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 3, 4, 5, 6, 8):
        if step * power >= value:
            return step * power
    return 10 * power


def _short_count(value: float) -> str:
    n = round(value)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}k"
    return f"{n:,}"


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
        return [_short_count(10**v) for v in values]


class SweepChart(pg.PlotWidget):
    """Memory per GPU against context / sequence length or batch, with capacity lines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        background, text = _theme()
        super().__init__(
            parent, background=background, axisItems={"bottom": PowerOfTwoAxis("bottom")}
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
        item.setMenuEnabled(False)
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
        self.lines = _CapacityLines(item, 0, text, (0.98, 0.7, 0.42))
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
            ranges = (_nice_ceiling(top * 1.05), xs[0], xs[-1])
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
