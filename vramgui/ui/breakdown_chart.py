"""The breakdown chart: one stacked bar of the per-GPU total by component, against GPU capacities.

Painted with QPainter alone. It changes on every input change, so it must redraw in about a
millisecond; a pyqtgraph plot spent ten times that re-laying out its items, and importing
pyqtgraph would hold up the window's first paint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QMouseEvent, QPainter, QPaintEvent, QPen, QPolygonF
from PySide6.QtWidgets import QWidget

from vramgui.core.units import Unit, format_bytes, to_unit
from vramgui.ui import palette
from vramgui.ui.axes import nice_ceiling, nice_step
from vramgui.ui.plot import (
    NEAR_LINE_PX,
    Chart,
    capacity_text,
    components_in_words,
    draw_capacity_line,
    sentences,
)

BAR_HEIGHT = 0.6  # in chart units: the bar spans y in [-0.3, 0.3]
LEGEND_COLUMNS = 3
LABEL_ROWS = 3  # capacity labels are staggered over this many rows under the bar
# Lines this far along the axis or less get their label on their right (a label is about this long).
LEFT_PART = 0.4
_PAD = 8.0
_TICK_PX = 90.0  # about one axis label per this many pixels


@dataclass(frozen=True)
class MeasuredMark:
    """A measured figure drawn across the bar: its name in the legend, where, and its tooltip."""

    name: str
    bytes: int
    tooltip: str


# Measured figures in a colour no component takes, solid where capacities are dashed.
MEASURED_COLOUR = "#6A3D9A"


@dataclass(frozen=True)
class CapacityMark:
    """A GPU's capacity line as drawn: where, its label, which side of the line the label is on."""

    gpu: str
    position: float  # in the display unit
    label: str
    tooltip: str
    colour: str
    label_right: bool


class BreakdownChart(Chart):
    """The stacked breakdown bar, its legend, the GPU capacity lines and an axis in GiB or GB."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, "Memory per GPU by component, against GPU capacities")
        self._unit: Unit = "GiB"
        self._components: dict[str, int] = {}
        self._capacities: list[tuple[str, int, bool, int]] = []
        self._colours: dict[str, QColor] = {}
        self._measured: tuple[MeasuredMark, ...] = ()
        self.marks: list[CapacityMark] = []
        self.right = 1.0  # the axis ends here, in the display unit
        self.setMinimumHeight(200)  # legend rows above the bar, labels and axis below

    def sizeHint(self) -> QSize:
        return QSize(600, 210)

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

    def set_measured(self, marks: Sequence[MeasuredMark]) -> None:
        """Draw measured figures across the bar (none: clear them); they stay until replaced."""
        self._measured = tuple(marks)
        self._redraw()

    def measured_positions(self) -> list[tuple[str, float]]:
        """``(name, position)`` of each measured mark, in the current unit."""
        return [(m.name, to_unit(m.bytes, self._unit)) for m in self._measured]

    def segment(self, name: str) -> tuple[float, float]:
        """``(start, width)`` of component ``name`` along the axis, in the current unit."""
        start = 0.0
        for other, size in self._components.items():
            width = to_unit(size, self._unit)
            if other == name:
                return start, width
            start += width
        raise KeyError(name)

    def legend_text(self) -> str:
        """The legend as plain text: the components shown, in order, then measured figures."""
        return "  ".join(self._legend_entries())

    def _legend_entries(self) -> list[str]:
        return [palette.component_label(name) for name in self._components] + [
            f"{m.name}: {format_bytes(m.bytes, self._unit)}" for m in self._measured
        ]

    def text_at(self, x: float, y: float) -> str:
        """The hover text at ``x`` (display unit) and ``y`` (bar units): a component's size, or ""."""
        if abs(y) > BAR_HEIGHT / 2:
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

    # ----------------------------------------------------------------------------- geometry
    def _redraw(self) -> None:
        unit = self._unit
        total = to_unit(sum(self._components.values()), unit)
        marks = []
        for gpu, capacity, fits, headroom in self._capacities:
            room = "free" if fits else "short"
            marks.append(
                (
                    gpu,
                    to_unit(capacity, unit),
                    f"{gpu}: {format_bytes(abs(headroom), unit, 1)} {room}",
                    f"{capacity_text(gpu, capacity, unit)}; "
                    f"{format_bytes(abs(headroom), unit)} {'left' if fits else 'missing'}",
                    palette.FIT if fits else palette.NO_FIT,
                )
            )
        measured = [to_unit(m.bytes, unit) for m in self._measured]
        biggest = max([total] + [m[1] for m in marks] + measured)
        self.right = nice_ceiling(max(biggest, 1.0) * 1.12)
        self.marks = [
            CapacityMark(gpu, x, label, tip, colour, x < self.right * LEFT_PART)
            for gpu, x, label, tip, colour in marks
        ]
        self.refresh()

    def describe(self) -> str:
        """The total and each component, each GPU's room or shortfall, measured figures."""
        if not self._components:
            return "No estimate yet."
        unit = self._unit
        total = format_bytes(sum(self._components.values()), unit)
        gpus = [
            f"{gpu} {format_bytes(capacity, unit)}: "
            + (
                f"fits, {format_bytes(headroom, unit)} free."
                if fits
                else f"does not fit, {format_bytes(-headroom, unit)} short."
            )
            for gpu, capacity, fits, headroom in self._capacities
        ]
        measured = [f"{m.name}: {format_bytes(m.bytes, unit)}." for m in self._measured]
        return sentences(
            f"Total per GPU {total}: {components_in_words(self._components, unit)}.",
            *gpus,
            *measured,
        )

    def _rows(self) -> tuple[QFontMetricsF, float, float, QRectF]:
        """Font metrics, the legend's height, the bar's top, and the plot rectangle."""
        metrics = QFontMetricsF(self.font())
        line = metrics.height()
        entries = len(self._components) + len(self._measured)
        legend_rows = math.ceil(entries / LEGEND_COLUMNS) if entries else 0
        legend = legend_rows * (line + 2)
        axis = 2 * line + 10  # tick labels and the axis title
        plot = QRectF(_PAD, _PAD, self.width() - 2 * _PAD, self.height() - 2 * _PAD - axis)
        labels = LABEL_ROWS * line
        bar_height = max(12.0, min(44.0, plot.height() - legend - labels - 12))
        bar_top = plot.top() + legend + 6
        return metrics, bar_top, bar_height, plot

    def _x(self, value: float, plot: QRectF) -> float:
        return plot.left() + plot.width() * value / self.right

    # ----------------------------------------------------------------------------- painting
    def paintEvent(self, event: QPaintEvent) -> None:
        background, text, grid = self.colours(grid_alpha=50)
        painter = QPainter(self)
        painter.fillRect(self.rect(), background)
        if not self._components:
            self.draw_empty(painter, text)
            painter.end()
            return
        metrics, bar_top, bar_height, plot = self._rows()
        line = metrics.height()

        # Axis: grid lines and tick labels at a round step.
        step = nice_step(self.right, plot.width() / _TICK_PX)
        painter.setPen(QPen(grid, 1))
        ticks = [i * step for i in range(1, int(self.right / step + 1e-9) + 1)]
        # Lines run from just above the bar down to the axis, clear of the legend.
        lines_top = bar_top - 4
        for value in ticks:
            x = self._x(value, plot)
            painter.drawLine(QPointF(x, lines_top), QPointF(x, plot.bottom()))
        painter.setPen(QPen(text, 1))
        painter.drawLine(plot.bottomLeft(), plot.bottomRight())
        for value in (0.0, *ticks):
            x = self._x(value, plot)
            painter.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4))
            label = f"{value:g}"
            width = metrics.horizontalAdvance(label)
            left = min(max(x - width / 2, 0.0), self.width() - width)
            painter.drawText(QPointF(left, plot.bottom() + 4 + metrics.ascent()), label)
        title = f"GPU memory per GPU ({self._unit})"
        painter.drawText(
            QRectF(0, plot.bottom() + 6 + line, self.width(), line),
            Qt.AlignmentFlag.AlignHCenter,
            title,
        )

        # Legend: a swatch and a name per component, then measured figures, in columns.
        column_width = plot.width() / LEGEND_COLUMNS
        measured_colour = QColor(MEASURED_COLOUR)
        for i, label in enumerate(self._legend_entries()):
            row, column = divmod(i, LEGEND_COLUMNS)
            x = plot.left() + column * column_width
            y = plot.top() + row * (line + 2)
            if i < len(self._components):
                swatch = QRectF(x, y + line * 0.2, line * 0.6, line * 0.6)
                painter.fillRect(swatch, self._colour(list(self._components)[i]))
            else:
                _triangle(painter, x + line * 0.3, y + line * 0.75, line * 0.6, measured_colour)
                painter.setPen(QPen(text, 1))
            painter.drawText(
                QRectF(x + line * 0.9, y, column_width - line, line),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                label,
            )

        # The bar, then its total at its end.
        start = 0.0
        for name, size in self._components.items():
            width = to_unit(size, self._unit)
            left, right = self._x(start, plot), self._x(start + width, plot)
            painter.fillRect(QRectF(left, bar_top, right - left, bar_height), self._colour(name))
            start += width
        total = sum(self._components.values())
        painter.setPen(QPen(text, 1))
        painter.drawText(
            QPointF(self._x(start, plot) + 6, bar_top + bar_height / 2 + metrics.ascent() / 2.5),
            format_bytes(total, self._unit),
        )

        # Capacity lines, dashed, with labels staggered under the bar.
        for i, mark in enumerate(self.marks):
            colour = QColor(mark.colour)
            x = self._x(mark.position, plot)
            draw_capacity_line(painter, QPointF(x, lines_top), QPointF(x, plot.bottom()), colour)
            painter.setPen(QPen(colour, 1))
            y = bar_top + bar_height + 4 + (i % LABEL_ROWS) * line
            width = metrics.horizontalAdvance(mark.label)
            left = x + 4 if mark.label_right else x - 4 - width
            left = min(max(left, plot.left()), plot.right() - width)
            painter.drawText(QPointF(left, y + metrics.ascent()), mark.label)

        # Measured figures: a solid line across the bar under a marker pointing at it.
        for measured in self._measured:
            x = self._x(to_unit(measured.bytes, self._unit), plot)
            painter.setPen(QPen(measured_colour, 2))
            painter.drawLine(QPointF(x, bar_top - 2), QPointF(x, bar_top + bar_height + 4))
            _triangle(painter, x, bar_top - 1, line * 0.7, measured_colour)
        painter.end()

    def _colour(self, name: str) -> QColor:
        colour = self._colours.get(name)
        if colour is None:
            choice = (
                palette.COMPONENT_COLOURS.get(name)
                or palette.EXTRA_COLOURS[len(self._colours) % len(palette.EXTRA_COLOURS)]
            )
            colour = self._colours[name] = QColor(choice)
        return colour

    # ----------------------------------------------------------------------------- hover
    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        _metrics, bar_top, bar_height, plot = self._rows()
        position = event.position()
        x = (position.x() - plot.left()) / plot.width() * self.right if plot.width() else 0.0
        # Bar units: the bar's centre is 0 and its edges +-BAR_HEIGHT / 2.
        y = (bar_top + bar_height / 2 - position.y()) / bar_height * BAR_HEIGHT
        self.show_hover(
            event,
            self._measured_at(position.x(), plot)
            or self.text_at(x, y)
            or self._mark_at(position.x(), plot),
        )

    def _measured_at(self, x: float, plot: QRectF) -> str:
        for measured in self._measured:
            if abs(self._x(to_unit(measured.bytes, self._unit), plot) - x) <= 4:
                return measured.tooltip
        return ""

    def _mark_at(self, x: float, plot: QRectF) -> str:
        for mark in self.marks:
            if abs(self._x(mark.position, plot) - x) <= NEAR_LINE_PX:
                return mark.tooltip
        return ""


def _triangle(painter: QPainter, x: float, tip_y: float, size: float, colour: QColor) -> None:
    """A filled triangle pointing down, its tip at ``(x, tip_y)``."""
    half = size / 2
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour)
    painter.drawPolygon(
        QPolygonF(
            [QPointF(x - half, tip_y - size), QPointF(x + half, tip_y - size), QPointF(x, tip_y)]
        )
    )
    painter.setBrush(Qt.BrushStyle.NoBrush)
