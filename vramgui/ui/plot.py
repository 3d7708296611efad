"""What the window's charts share: a plot rectangle, a left axis with its title, a log-2 axis along
the bottom, GPU capacity lines, hover tooltips and the text a screen reader reads for a chart.

The window's charts follow every input change, so each is painted with QPainter alone and
redraws in a millisecond or two; pyqtgraph (kept for the profile comparison) spent tens of
milliseconds per change laying out and painting its axes, legends and items. A picture says
nothing to a screen reader: every chart, the comparison included, names what it shows
(``accessibleName``) and says its current values in words (``accessibleDescription``), rewritten
whenever its data changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFontMetricsF,
    QGuiApplication,
    QMouseEvent,
    QPainter,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import QToolTip, QWidget

from vramgui.core.units import Unit, format_bytes
from vramgui.ui import palette
from vramgui.ui.axes import short_count

PAD = 8.0
LEFT_AXIS = 64.0  # room for the vertical title and the tick labels
GRID_ALPHA = 45
LOG2_LABEL_PX = 55.0  # at least this many pixels between labels on a log-2 axis
CAPACITY_PEN_WIDTH = 2
NEAR_LINE_PX = 3.0  # the pointer this close to a capacity line hovers it
EMPTY_TEXT = "No estimate"  # what a chart without data says in place of its axes


class Chart(QWidget):
    """A plot area with a vertical axis on the left and labels below; painting, hover and
    accessible-text helpers.

    Subclasses say what they show now in :meth:`describe` and call :meth:`refresh` when their
    data changes: it repaints and rewrites the accessible description.
    """

    def __init__(self, parent: QWidget | None, name: str) -> None:
        super().__init__(parent)
        self.hover_text = ""
        self.setMouseTracking(True)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.setAccessibleName(name)

    def describe(self) -> str:
        """The chart's current values in words, for screen readers."""
        raise NotImplementedError

    def refresh(self) -> None:
        """Repaint, and say the new values to assistive technology."""
        self.setAccessibleDescription(self.describe())
        self.update()

    def colours(self, grid_alpha: int = GRID_ALPHA) -> tuple[QColor, QColor, QColor]:
        """Background, text and grid colours from the application palette (dark themes too)."""
        colours = QGuiApplication.palette()
        text = colours.color(QPalette.ColorRole.Text)
        grid = QColor(text)
        grid.setAlpha(grid_alpha)
        return colours.color(QPalette.ColorRole.Base), text, grid

    def plot_rect(self, top_rows: int, bottom_rows: int) -> QRectF:
        """The plot rectangle, below ``top_rows`` and above ``bottom_rows`` lines of text."""
        line = QFontMetricsF(self.font()).height()
        top = PAD + top_rows * (line + 2)
        bottom = self.height() - PAD - bottom_rows * line - 4
        return QRectF(LEFT_AXIS, top, max(self.width() - LEFT_AXIS - PAD, 1.0), bottom - top)

    def draw_empty(self, painter: QPainter, text: QColor) -> None:
        """:data:`EMPTY_TEXT` centred where the axes would be: without data a chart draws no
        range (0 to 1.5 GiB) that would read as figures."""
        painter.setPen(QPen(text, 1))
        painter.drawText(QRectF(self.rect()), Qt.AlignmentFlag.AlignCenter, EMPTY_TEXT)

    def draw_y_axis(
        self,
        painter: QPainter,
        plot: QRectF,
        ticks: Sequence[tuple[float, str]],
        title: str,
        *,
        text: QColor,
        grid: QColor,
    ) -> None:
        """Grid lines and labels at ``(y pixel, label)`` ticks, the axis line and its title."""
        metrics = QFontMetricsF(self.font())
        for y, label in ticks:
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            painter.setPen(QPen(text, 1))
            painter.drawLine(QPointF(plot.left() - 4, y), QPointF(plot.left(), y))
            width = metrics.horizontalAdvance(label)
            painter.drawText(QPointF(plot.left() - 6 - width, y + metrics.ascent() / 2.5), label)
        painter.setPen(QPen(text, 1))
        painter.drawLine(plot.topLeft(), plot.bottomLeft())
        painter.drawLine(plot.bottomLeft(), plot.bottomRight())
        if metrics.horizontalAdvance(title) > plot.height() and title.endswith(")"):
            title = title[title.rfind("(") + 1 : -1]  # a short plot keeps the unit: "GiB"
        painter.save()
        painter.translate(2, plot.center().y())
        painter.rotate(-90)
        painter.drawText(
            QRectF(-plot.height() / 2, 0, plot.height(), metrics.height()),
            Qt.AlignmentFlag.AlignCenter,
            title,
        )
        painter.restore()

    def draw_log2_x_axis(
        self,
        painter: QPainter,
        plot: QRectF,
        values: tuple[float, float] | None,
        x_of: Callable[[float], float],
        title: str,
        *,
        text: QColor,
        grid: QColor,
    ) -> None:
        """Grid lines and labels at the powers of two within ``values`` (low, high; None: no
        data yet), thinned to :data:`LOG2_LABEL_PX` apart, and the axis title under them;
        ``x_of`` places a value."""
        metrics = QFontMetricsF(self.font())
        for value in log2_ticks(*values, plot.width()) if values is not None else ():
            x = x_of(value)
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
            painter.setPen(QPen(text, 1))
            label = short_count(value)
            width = metrics.horizontalAdvance(label)
            painter.drawText(QPointF(x - width / 2, plot.bottom() + 4 + metrics.ascent()), label)
        painter.setPen(QPen(text, 1))
        painter.drawText(
            QRectF(
                plot.left(), plot.bottom() + 4 + metrics.height(), plot.width(), metrics.height()
            ),
            Qt.AlignmentFlag.AlignHCenter,
            title,
        )

    def show_hover(self, event: QMouseEvent, text: str) -> None:
        self.hover_text = text
        if text:
            QToolTip.showText(event.globalPosition().toPoint(), text, self)
        else:
            QToolTip.hideText()


def log2_ticks(low: float, high: float, width_px: float) -> list[int]:
    """The powers of two within ``[low, high]`` that a log-2 axis of ``width_px`` labels: every
    one, else every second, third... so that labels stay :data:`LOG2_LABEL_PX` apart."""
    powers = [2**k for k in range(63) if low <= 2**k <= high]
    every = max(1, math.ceil(len(powers) * LOG2_LABEL_PX / max(width_px, 1.0)))
    return powers[::every]


def log2_share(value: float, low: float, high: float, margin: float) -> float:
    """Where ``value`` sits along a log-2 axis from ``low`` to ``high`` with ``margin`` (in
    doublings) of room each side: 0 at the left end, 1 at the right."""
    start, end = math.log2(low), math.log2(high)
    return (math.log2(value) - start + margin) / (max(end - start, 1e-9) + 2 * margin)


def draw_capacity_line(painter: QPainter, start: QPointF, end: QPointF, colour: QColor) -> None:
    """A GPU's capacity: a dashed line across the plot (measured figures are solid)."""
    painter.setPen(QPen(colour, CAPACITY_PEN_WIDTH, Qt.PenStyle.DashLine))
    painter.drawLine(start, end)


def capacity_text(gpu: str, capacity_bytes: int, unit: Unit) -> str:
    """A capacity line's hover text: the GPU, its memory, and the exact bytes."""
    return f"{gpu}: {format_bytes(capacity_bytes, unit)} ({capacity_bytes:,} bytes)"


def capacities_in_words(capacities: Iterable[tuple[str, int]], unit: Unit) -> str:
    """``"GPU capacities: RTX 4090 24.00 GiB, ..."``, or "" without any."""
    shown = [f"{gpu} {format_bytes(capacity, unit)}" for gpu, capacity in capacities]
    return f"GPU capacities: {', '.join(shown)}." if shown else ""


def components_in_words(components: Mapping[str, int], unit: Unit) -> str:
    """Each component's label and size, in the order drawn."""
    return ", ".join(
        f"{palette.component_label(name)} {format_bytes(size, unit)}"
        for name, size in components.items()
    )


def sentences(*parts: str) -> str:
    """The non-empty ``parts`` joined into one accessible description."""
    return " ".join(part for part in parts if part)
