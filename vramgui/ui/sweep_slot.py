"""The sweep chart's place in the window, held until pyqtgraph is loaded.

pyqtgraph and numpy take most of a second to import: more than everything else the window needs
before it can be shown. The slot paints a note first; after the window's first paint it imports the
chart module on a worker thread and then swaps the chart in, replaying the latest data.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import QLabel, QStackedLayout, QWidget

from vramgui.core.units import Unit
from vramgui.ui.workers import Worker, submit

CHART_MODULE = "vramgui.ui.charts"


def _import_charts() -> ModuleType:
    return importlib.import_module(CHART_MODULE)


class SweepSlot(QWidget):
    """Stands in for ``charts.SweepChart`` until it exists; ``chart`` is the chart (or None).

    ``set_data`` and ``set_unit`` are accepted at any time; ``loaded`` is emitted once the chart
    is showing.
    """

    loaded = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.chart: Any = None
        self._unit: Unit = "GiB"
        self._data: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._pending: Worker | None = None
        self.note = QLabel("Loading the chart…")
        self.note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.note.setStyleSheet("color: gray;")
        self._stack = QStackedLayout(self)
        self._stack.addWidget(self.note)
        self.setMinimumHeight(170)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        if self.chart is not None:
            self.chart.set_unit(unit)

    def set_data(self, *args: Any, **kwargs: Any) -> None:
        """What ``SweepChart.set_data`` takes; kept and replayed if the chart is not there yet."""
        self._data = (args, kwargs)
        if self.chart is not None:
            self.chart.set_data(*args, **kwargs)

    def load(self) -> None:
        """Import the chart module off the GUI thread, then show the chart (once)."""
        if self.chart is not None or self._pending is not None:
            return
        self._pending = submit(_import_charts, self._show_chart, self._failed)

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        # The window has been painted with this note in it: now is the time to fetch the chart.
        if self.chart is None and self._pending is None:
            QTimer.singleShot(0, self.load)

    def _show_chart(self, module: ModuleType) -> None:
        self._pending = None
        chart = module.SweepChart()
        chart.set_unit(self._unit)
        if self._data is not None:
            args, kwargs = self._data
            chart.set_data(*args, **kwargs)
        self._stack.addWidget(chart)
        self._stack.setCurrentWidget(chart)
        self.chart = chart
        self.loaded.emit()

    def _failed(self, exc: Exception) -> None:
        self._pending = None
        self.note.setText(f"The chart could not be loaded: {exc}")
