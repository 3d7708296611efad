"""What the QPainter charts share: a plot rectangle, a left axis with its title, hover tooltips.

The window's charts follow every input change, so each is painted with QPainter alone and
redraws in a millisecond or two; pyqtgraph (kept for the profile comparison) spent tens of
milliseconds per change laying out and painting its axes, legends and items.
"""

from __future__ import annotations

from collections.abc import Sequence

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

PAD = 8.0
LEFT_AXIS = 64.0  # room for the vertical title and the tick labels


class Chart(QWidget):
    """A plot area with a vertical axis on the left and labels below; painting and hover helpers."""

    def __init__(self, parent: QWidget | None) -> None:
        super().__init__(parent)
        self.hover_text = ""
        self.setMouseTracking(True)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def colours(self) -> tuple[QColor, QColor, QColor]:
        colours = QGuiApplication.palette()
        text = colours.color(QPalette.ColorRole.Text)
        grid = QColor(text)
        grid.setAlpha(45)
        return colours.color(QPalette.ColorRole.Base), text, grid

    def plot_rect(self, top_rows: int, bottom_rows: int) -> QRectF:
        """The plot rectangle, below ``top_rows`` and above ``bottom_rows`` lines of text."""
        line = QFontMetricsF(self.font()).height()
        top = PAD + top_rows * (line + 2)
        bottom = self.height() - PAD - bottom_rows * line - 4
        return QRectF(LEFT_AXIS, top, max(self.width() - LEFT_AXIS - PAD, 1.0), bottom - top)

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
        painter.save()
        painter.translate(2, plot.center().y())
        painter.rotate(-90)
        painter.drawText(
            QRectF(-plot.height() / 2, 0, plot.height(), metrics.height()),
            Qt.AlignmentFlag.AlignCenter,
            title,
        )
        painter.restore()

    def show_hover(self, event: QMouseEvent, text: str) -> None:
        self.hover_text = text
        if text:
            QToolTip.showText(event.globalPosition().toPoint(), text, self)
        else:
            QToolTip.hideText()
