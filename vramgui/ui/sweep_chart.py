"""The sweep chart: memory per GPU against context / sequence length or batch, with capacities.

Painted with QPainter alone (``ui/plot.py``): it is redrawn after every input change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from vramgui.core.units import Unit, format_bytes, to_unit
from vramgui.ui import palette
from vramgui.ui.axes import nice_ceiling, nice_step
from vramgui.ui.plot import (
    NEAR_LINE_PX,
    Chart,
    capacities_in_words,
    capacity_text,
    draw_capacity_line,
    log2_share,
    sentences,
)

# Where along the plot each capacity's label ends, so that close lines keep their labels apart.
LABEL_ENDS = (0.98, 0.7, 0.42)
# How far above the capacities and the current estimate the axis follows the curve.
CURVE_REACH = 2.0
_X_MARGIN = 0.03  # of the log span, each side
_Y_TICK_PX = 28.0
_HOVER_PX = 30.0


class SweepChart(Chart):
    """The total per GPU at each swept value, the GPUs' capacities and the largest that fits."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, "Memory per GPU against context length or batch size")
        self._unit: Unit = "GiB"
        self.field = "seq"
        self.values: tuple[int, ...] = ()
        self.totals: tuple[int, ...] = ()
        self.capacities: tuple[tuple[str, int], ...] = ()
        self.largest: int | None = None
        self.current: int | None = None
        self.top = 1.0  # the axis ends here, in the display unit
        # Short enough that on a 1280x720 screen the breakdown table below it ends in view, its
        # total row included; a taller window gives it more.
        self.setMinimumHeight(105)

    def sizeHint(self) -> QSize:
        return QSize(800, 250)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._rescale()

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
        self.field = field
        self.values = tuple(values)
        self.totals = tuple(totals_bytes)
        self.capacities = tuple(capacities)
        self.largest = largest
        self.current = current
        self._rescale()

    def _rescale(self) -> None:
        ys = [to_unit(t, self._unit) for t in self.totals]
        capacities = [to_unit(c, self._unit) for _gpu, c in self.capacities]
        current = [y for v, y in zip(self.values, ys, strict=False) if v == self.current]
        # Every capacity and the current estimate are always on the chart; the rest of the curve
        # too, unless it runs so far above them that it would flatten the part that matters
        # (the points past the top are then marked there).
        anchors = max(capacities + current, default=0.0)
        top = max(anchors, min(max(ys, default=0.0), anchors * CURVE_REACH if anchors else 0.0))
        if not anchors:
            top = max(ys, default=0.0)
        self.top = nice_ceiling(top * 1.05) if top > 0 else 1.0
        self.refresh()

    def describe(self) -> str:
        """Each swept value's total, the current one, the largest that fits, the capacities."""
        if not self.values or not self.totals:
            return "No sweep yet."
        what = "context length" if self.field == "seq" else "batch size"
        points = ", ".join(
            f"{value:,}: {format_bytes(total, self._unit)}"
            for value, total in zip(self.values, self.totals, strict=False)
        )
        current = (
            f"The current {what}, {self.current:,}, is circled."
            if self.current in self.values
            else ""
        )
        largest = f"Largest {what} that fits: {self.largest:,}." if self.largest is not None else ""
        return sentences(
            f"Memory per GPU by {what}: {points}.",
            current,
            largest,
            capacities_in_words(self.capacities, self._unit),
        )

    # ----------------------------------------------------------------------------- geometry
    def _x(self, value: float, plot: QRectF) -> float:
        low, high = self.values[0], self.values[-1]
        margin = _X_MARGIN * max(math.log2(high) - math.log2(low), 1e-9)
        return plot.left() + log2_share(value, low, high, margin) * plot.width()

    def _y(self, value: float, plot: QRectF) -> float:
        # Values past the top run off the plot (clipped there), as the curve leaves the range.
        return plot.bottom() - value / self.top * plot.height()

    def _plot(self) -> QRectF:
        return self.plot_rect(top_rows=0, bottom_rows=2)

    # ----------------------------------------------------------------------------- painting
    def paintEvent(self, event: QPaintEvent) -> None:
        background, text, grid = self.colours()
        painter = QPainter(self)
        painter.fillRect(self.rect(), background)
        if not self.values or not self.totals:
            self.draw_empty(painter, text)
            painter.end()
            return
        metrics = QFontMetricsF(self.font())
        plot = self._plot()
        # Three ticks at least: one alone does not tell the scale.
        step = nice_step(self.top, max(plot.height() / _Y_TICK_PX, 3.0))
        ticks = [
            (self._y(i * step, plot), f"{i * step:g}")
            for i in range(1, int(self.top / step + 1e-9) + 1)
        ]
        self.draw_y_axis(painter, plot, ticks, f"Per GPU ({self._unit})", text=text, grid=grid)
        self.draw_log2_x_axis(
            painter,
            plot,
            (self.values[0], self.values[-1]),
            lambda value: self._x(value, plot),
            "Context length (tokens)" if self.field == "seq" else "Batch size",
            text=text,
            grid=grid,
        )
        painter.setClipRect(plot.adjusted(-8, 0, 8, 1))
        # GPU capacities: dashed lines, each labelled above its line, the labels staggered.
        for gpu_line, (label, rect) in zip(
            self.capacities, self.capacity_labels(plot, metrics), strict=True
        ):
            y = self._y(to_unit(gpu_line[1], self._unit), plot)
            draw_capacity_line(painter, QPointF(plot.left(), y), QPointF(plot.right(), y), text)
            painter.setPen(QPen(text, 1))
            painter.drawText(QPointF(rect.left(), rect.bottom() - metrics.descent()), label)

        largest = self.largest_label(plot, metrics)
        if largest is not None:
            label, rect = largest
            colour = QColor(palette.FIT)
            x = self._x(self.largest, plot)  # type: ignore[arg-type]
            painter.setPen(QPen(colour, 2))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
            painter.drawText(QPointF(rect.left(), rect.bottom() - metrics.descent()), label)

        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        colour = QColor(palette.COMPONENT_COLOURS["weights"])
        points = self._points(plot)
        painter.setPen(QPen(colour, 2))
        if len(points) > 1:
            painter.drawPolyline(points)
        painter.setBrush(colour)
        for point in points:
            if point.y() < plot.top():
                # Past the top of the axis: an arrow where the point leaves the chart.
                x, y = point.x(), plot.top()
                painter.drawPolygon([QPointF(x, y), QPointF(x - 5, y + 8), QPointF(x + 5, y + 8)])
            else:
                painter.drawEllipse(point, 3, 3)
        if self.current in self.values:
            point = points[self.values.index(self.current)]
            painter.setPen(QPen(text, 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawEllipse(point, 6.5, 6.5)
        painter.end()

    def capacity_labels(self, plot: QRectF, metrics: QFontMetricsF) -> list[tuple[str, QRectF]]:
        """Each capacity line's label and where it is drawn: above its line (else below it), at
        the first of a few places along it that clears the curve's points and the labels placed
        before."""
        points = [QRectF(p.x() - 5, p.y() - 5, 10, 10) for p in self._points(plot)]
        taken: list[QRectF] = []
        out = []
        for i, (gpu, capacity) in enumerate(self.capacities):
            y = self._y(to_unit(capacity, self._unit), plot)
            label = f"{gpu} ({format_bytes(capacity, self._unit, 0)})"
            width = metrics.horizontalAdvance(label)
            ends = LABEL_ENDS[i % len(LABEL_ENDS) :] + LABEL_ENDS[: i % len(LABEL_ENDS)]
            # Above the line first, then below it where the plot has room there.
            tops = [y - 2 - metrics.height()]
            if y + 2 + metrics.height() <= plot.bottom():
                tops.append(y + 2)
            places = [
                QRectF(
                    max(plot.left() + 2, plot.left() + plot.width() * end - width),
                    top,
                    width,
                    metrics.height(),
                )
                for top in tops
                for end in (*ends, 0.14)
            ]
            clear = [
                rect
                for rect in places
                if not any(rect.intersects(other) for other in (*points, *taken))
            ]
            rect = clear[0] if clear else places[0]
            taken.append(rect.adjusted(-4, 0, 4, 0))
            out.append((label, rect))
        return out

    def largest_label(self, plot: QRectF, metrics: QFontMetricsF) -> tuple[str, QRectF] | None:
        """The "largest that fits" label and where it is drawn: beside its line (right, else left),
        at the bottom, the top or the middle of the plot, wherever it clears every capacity label
        and the curve's points."""
        if not self.values or not self.capacities or self.largest is None:
            return None
        if not self.values[0] <= self.largest <= self.values[-1]:
            return None
        x = self._x(self.largest, plot)
        label = f"largest that fits: {self.largest:,}"
        width, height = metrics.horizontalAdvance(label), metrics.height()
        sides = [x + 6, x - 6 - width]
        if x + 6 + width > plot.right():
            sides.reverse()
        taken = [
            rect.adjusted(-4, -2, 4, 2) for _label, rect in self.capacity_labels(plot, metrics)
        ]
        taken += [QRectF(p.x() - 5, p.y() - 5, 10, 10) for p in self._points(plot)]
        tops = (plot.bottom() - 4 - height, plot.top() + 4, plot.center().y() - height / 2)
        places = [
            QRectF(left, top, width, height)
            for top in tops
            for left in sides
            if plot.left() <= left and left + width <= plot.right()
        ] or [QRectF(sides[0], tops[0], width, height)]
        for rect in places:
            if not any(rect.intersects(other) for other in taken):
                return label, rect
        return label, places[0]

    def _points(self, plot: QRectF) -> list[QPointF]:
        return [
            QPointF(self._x(v, plot), self._y(to_unit(t, self._unit), plot))
            for v, t in zip(self.values, self.totals, strict=True)
        ]

    # ----------------------------------------------------------------------------- hover
    def text_at(self, value: float) -> str:
        """The hover text of the swept point nearest to ``value`` on the (log) axis, or ""."""
        if not self.values or value <= 0:
            return ""
        index = min(
            range(len(self.values)),
            key=lambda i: abs(math.log2(self.values[i]) - math.log2(value)),
        )
        what = "context" if self.field == "seq" else "batch"
        total = self.totals[index]
        return (
            f"{what} {self.values[index]:,}: {format_bytes(total, self._unit)} per GPU "
            f"({total:,} bytes)"
        )

    def _capacity_at(self, y: float, plot: QRectF) -> str:
        for gpu, capacity in self.capacities:
            if abs(self._y(to_unit(capacity, self._unit), plot) - y) <= NEAR_LINE_PX:
                return capacity_text(gpu, capacity, self._unit)
        return ""

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        plot = self._plot()
        position = event.position()
        text = ""
        if self.values and plot.adjusted(-4, -4, 4, 4).contains(position):
            points = self._points(plot)
            nearest = min(range(len(points)), key=lambda i: abs(points[i].x() - position.x()))
            if abs(points[nearest].x() - position.x()) <= _HOVER_PX:
                text = self.text_at(self.values[nearest])
            text = self._capacity_at(position.y(), plot) or text
        self.show_hover(event, text)
