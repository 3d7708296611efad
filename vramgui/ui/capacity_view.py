"""The Serving tab: what vLLM does with each chosen GPU.

For every GPU of the GPU panel it shows vLLM's start-up as vLLM works it out
(``core/vllm/``): whether ``vllm serve`` starts, its KV pool in bytes and tokens, how many
requests of the current context it holds at once, the longest ``--max-model-len`` that starts
and, where it does not start, the cheapest change that makes it start. The chart draws the
concurrency against ``--max-model-len`` for every GPU, with the band where vLLM refuses to start.

The figures are computed on a worker thread (a refusing GPU asks the advisor for a change, a
dozen estimates) whenever the setup changes while the tab is visible.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QFontMetricsF, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from vramgui.answers.capacity import SHORTEST_LEN, GpuServing, ServingReport, serving_report
from vramgui.core.engines import StartUp, engine
from vramgui.core.units import Unit, format_bytes
from vramgui.ui import palette
from vramgui.ui.axes import short_count
from vramgui.ui.controller import EstimateController
from vramgui.ui.plot import Chart, log2_share, sentences
from vramgui.ui.wording import in_window
from vramgui.ui.workers import Worker, submit

# The report waits this long after the last change (a slider drag computes once).
FEED_DELAY_MS = 150
COLUMNS = (
    ("GPU", ""),
    ("vLLM", "Whether `vllm serve` starts with these settings"),
    ("KV pool", "Available KV cache memory, as vLLM logs it"),
    ("Tokens", 'The pool in tokens: vLLM\'s "GPU KV cache size"'),
    (
        "At once",
        'Requests of --max-model-len tokens the pool holds at once ("Maximum concurrency")',
    ),
    ("Longest", "The longest --max-model-len vLLM starts with on this GPU"),
    ("Cheapest change to start", "The gentlest change that makes vLLM start here"),
)


class ServingChart(Chart):
    """Requests held at once against --max-model-len, one curve per GPU, over the band where
    vLLM refuses to start (fewer than one request)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, "vLLM: requests held at once against --max-model-len, per GPU")
        self.report: ServingReport | None = None
        self._points: list[tuple[QPointF, str]] = []
        self.setMinimumHeight(220)

    def sizeHint(self) -> QSize:
        return QSize(800, 300)

    def set_report(self, report: ServingReport | None) -> None:
        self.report = report
        self.refresh()

    def describe(self) -> str:
        report = self.report
        if report is None or not report.gpus:
            return "No GPU chosen."
        parts = []
        for gpu in report.gpus:
            up = gpu.startup
            if up is None:
                parts.append(f"{gpu.name}: {in_window(gpu.error)}.")
            elif up.starts:
                at_most = "at most " if up.unmodelled else ""
                parts.append(
                    f"{gpu.name}: {at_most}{up.max_concurrency:.2f} requests of {report.seq:,} "
                    f"tokens at once, the longest --max-model-len that starts "
                    f"{at_most}{up.largest_model_len:,}."
                )
            else:
                parts.append(f"{gpu.name}: vLLM would not start at {report.seq:,} tokens.")
        return sentences(*parts)

    def _range(self) -> tuple[float, float]:
        report = self.report
        values = [c for g in (report.gpus if report else ()) for _, c in g.curve if c > 0]
        top = max(values, default=4.0)
        bottom = min(values, default=0.125)
        low = 2 ** max(math.floor(math.log2(max(bottom, 1 / 64))), -6)
        return min(low, 0.125), 2 ** math.ceil(math.log2(max(top, 2.0)))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        base, text, grid = self.colours()
        painter.fillRect(self.rect(), base)
        plot = self.plot_rect(top_rows=1, bottom_rows=2)
        report = self.report
        self._points = []
        low, high = self._range()

        def y_of(value: float) -> float:
            share = log2_share(max(value, low), low, high, 0.0)
            return plot.bottom() - share * plot.height()

        if report is None or not report.gpus:
            painter.setPen(QPen(text, 1))
            painter.drawText(plot, Qt.AlignmentFlag.AlignCenter, "Choose a GPU in the GPU panel.")
            painter.end()
            return
        lengths = [length for g in report.gpus for length, _ in g.curve] or [SHORTEST_LEN]
        first, last = min(lengths), max(lengths)

        def x_of(length: float) -> float:
            return plot.left() + log2_share(length, first, last, 0.1) * plot.width()

        # Below one request of the context, vLLM refuses to start.
        refuse = QColor(palette.NO_FIT)
        refuse.setAlpha(28)
        painter.fillRect(
            QRectF(plot.left(), y_of(1.0), plot.width(), plot.bottom() - y_of(1.0)), refuse
        )
        ticks = []
        value = low
        while value <= high:
            ticks.append((y_of(value), _count_label(value)))
            value *= 2
        self.draw_y_axis(painter, plot, ticks, "requests at once", text=text, grid=grid)
        self.draw_log2_x_axis(
            painter, plot, (first, last), x_of, "--max-model-len (tokens)", text=text, grid=grid
        )
        painter.setPen(QPen(QColor(palette.NO_FIT), 1, Qt.PenStyle.DashLine))
        painter.drawLine(QPointF(plot.left(), y_of(1.0)), QPointF(plot.right(), y_of(1.0)))
        painter.drawText(
            QPointF(plot.left() + 4, y_of(1.0) + QFontMetricsF(self.font()).ascent() + 2),
            "vLLM refuses to start",
        )
        # The current --max-model-len.
        metrics = QFontMetricsF(self.font())
        x_now = x_of(report.seq)
        painter.setPen(QPen(text, 1, Qt.PenStyle.DotLine))
        painter.drawLine(QPointF(x_now, plot.top()), QPointF(x_now, plot.bottom()))
        now = f"--max-model-len {report.seq:,}"
        width = metrics.horizontalAdvance(now)
        painter.drawText(
            QPointF(min(x_now + 4, plot.right() - width), plot.top() + metrics.ascent()), now
        )
        legend_x = plot.left()
        for index, gpu in enumerate(report.gpus):
            colour = QColor(palette.EXTRA_COLOURS[index % len(palette.EXTRA_COLOURS)])
            painter.setPen(QPen(colour, 2))
            previous: QPointF | None = None
            for length, concurrency in gpu.curve:
                point = QPointF(
                    x_of(length), y_of(concurrency) if concurrency > 0 else plot.bottom()
                )
                if previous is not None:
                    painter.drawLine(previous, point)
                previous = point
                what = (
                    f"{concurrency:.2f} requests at once"
                    if concurrency >= 1
                    else f"vLLM would not start (its pool holds {concurrency:.2f} of a request)"
                )
                self._points.append((point, f"{gpu.name}, --max-model-len {length:,}: {what}"))
            label = gpu.name
            painter.drawLine(
                QPointF(legend_x, PAD_TOP + metrics.height() / 2),
                QPointF(legend_x + 14, PAD_TOP + metrics.height() / 2),
            )
            painter.setPen(QPen(text, 1))
            painter.drawText(QPointF(legend_x + 18, PAD_TOP + metrics.ascent()), label)
            legend_x += 30 + metrics.horizontalAdvance(label)
        painter.end()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        position = event.position()
        near = [
            (math.hypot(p.x() - position.x(), p.y() - position.y()), text)
            for p, text in self._points
        ]
        best = min(near, default=(math.inf, ""))
        self.show_hover(event, best[1] if best[0] < HOVER_PX else "")


PAD_TOP = 6.0
HOVER_PX = 14.0


def _count_label(value: float) -> str:
    if value >= 1:
        return short_count(value)
    return f"1/{round(1 / value)}"


class CapacityView(QWidget):
    """The Serving tab's view: the table of GPUs and the chart, fed from the controller."""

    def __init__(self, controller: EstimateController, chart: ServingChart | None = None) -> None:
        super().__init__()
        self._controller = controller
        self._unit: Unit = "GiB"
        self.report: ServingReport | None = None
        self.heading = QLabel()
        self.heading.setWordWrap(True)
        self.use_vllm = QPushButton("Serve it with vLLM")
        self.use_vllm.clicked.connect(lambda: controller.update(engine="vllm"))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([title for title, _ in COLUMNS])
        for column, (_, tip) in enumerate(COLUMNS):
            header_item = self.table.horizontalHeaderItem(column)
            if header_item is not None and tip:
                header_item.setToolTip(tip)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.chart = chart or ServingChart()
        self.apply = QPushButton()
        self.apply.clicked.connect(self._apply)
        self.apply.hide()
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(palette.WARNING_STYLE)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
        top = QHBoxLayout()
        top.addWidget(self.heading, 1)
        top.addWidget(self.use_vllm, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table)
        layout.addWidget(self.error)
        row = QHBoxLayout()
        row.addWidget(self.apply)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addWidget(self.chart, 1)
        # Without the chart (no report), the spare height below the text: it stays at the top.
        layout.addStretch(0)
        self._feed = _Feed(self, controller)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self.show_report(self.report)

    def show_report(self, report: ServingReport | None) -> None:
        """Show vLLM's start-up on every GPU (None: the engine is not vLLM)."""
        self.report = report
        vllm = report is not None
        self.use_vllm.setVisible(not vllm)
        self.table.setVisible(vllm)
        self.chart.setVisible(vllm)
        if report is None:
            self.heading.setText(
                "What vLLM does with each GPU: whether it starts, its KV pool and how many "
                "requests it holds at once. The engine chosen is not vLLM."
            )
            self.apply.hide()
            self.error.hide()
            self.chart.set_report(None)
            return
        self.heading.setText(
            f"vLLM on each GPU at --max-model-len {report.seq:,}: whether `vllm serve` starts "
            "(its own start-up arithmetic), its KV pool, and the requests of that length it "
            "holds at once."
        )
        self.table.setRowCount(len(report.gpus))
        for row, gpu in enumerate(report.gpus):
            for column, (value, colour) in enumerate(self._cells(gpu)):
                item = QTableWidgetItem(value)
                item.setToolTip(value)
                if colour:
                    item.setForeground(QColor(colour))
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()
        bar = self.table.horizontalScrollBar()
        self.table.setFixedHeight(
            self.table.horizontalHeader().height()
            + sum(self.table.rowHeight(r) for r in range(self.table.rowCount()))
            + bar.sizeHint().height()
            + 4
        )
        errors = [
            f"{gpu.name}: {gpu.startup.message}"
            for gpu in report.gpus
            if gpu.startup is not None and gpu.startup.message
        ]
        lines = [f"vLLM on {text}" for text in errors]
        if report.unmodelled:
            lines.append(
                f"The share of the model's {report.unmodelled} in vLLM's profile run is "
                'not counted: figures marked ≤ are upper bounds, and "may start" is not '
                "certain (the notes say why)."
            )
        self.error.setStyleSheet(palette.WARNING_STYLE)
        self.error.setText("\n".join(lines))
        self.error.setVisible(bool(lines))
        target = report.gpus[0] if report.gpus else None
        if target is not None and target.cheapest is not None:
            self.apply.setText(f"Apply on {target.name}: {target.cheapest.title}")
            self.apply.show()
        else:
            self.apply.hide()
        self.chart.set_report(report)

    def show_failure(self, text: str) -> None:
        """No report for these settings: nothing of the last one stays, and ``text`` says why."""
        self.report = None
        self.heading.setText("What vLLM does with each GPU: no figures for these settings.")
        for widget in (self.use_vllm, self.table, self.chart, self.apply):
            widget.hide()
        self.table.setRowCount(0)
        self.chart.set_report(None)
        self.error.setStyleSheet(palette.ERROR_STYLE)
        self.error.setText(text)
        self.error.show()

    def _cells(self, gpu: GpuServing) -> list[tuple[str, str]]:
        up = gpu.startup
        if up is None:
            return [(gpu.name, ""), (gpu.error, palette.NO_FIT)] + [("", "")] * (len(COLUMNS) - 2)
        fits = up.starts and up.used_bytes <= gpu.capacity_bytes
        verdict = "starts" if fits else "would not start" if not up.starts else "out of memory"
        # A tower's profile left out of the estimate: upper bounds, and a start not certain.
        bound = "≤ " if up.unmodelled else ""
        if fits and up.unmodelled:
            verdict = "may start"
        change = gpu.cheapest.title if gpu.cheapest else ("—" if fits else "none found")
        return [
            (gpu.name, ""),
            (verdict, palette.FIT if fits else palette.NO_FIT),
            (bound + format_bytes(max(up.available_bytes, 0), self._unit), ""),
            (f"{bound}{up.pool_tokens:,}", ""),
            (f"{bound}{up.max_concurrency:.2f}", ""),
            (f"{bound}{up.largest_model_len:,}" if up.largest_model_len else "none", ""),
            (change, ""),
        ]

    def _apply(self) -> None:
        report = self.report
        if report and report.gpus and report.gpus[0].cheapest is not None:
            self._controller.apply_suggestion(report.gpus[0].cheapest)


class _Feed(QObject):
    """Keeps the view on the controller's setup while it is visible, off the GUI thread."""

    def __init__(self, view: CapacityView, controller: EstimateController) -> None:
        super().__init__(view)
        self._view = view
        self._controller = controller
        self._stale = True
        self._worker: Worker | None = None
        self._due = QTimer(self)
        self._due.setSingleShot(True)
        self._due.setInterval(FEED_DELAY_MS)
        self._due.timeout.connect(self.feed)
        for signal in (
            controller.model_changed,
            controller.workload_changed,
            controller.capacities_changed,
            controller.estimate_changed,
            controller.estimate_failed,
        ):
            signal.connect(self._changed)
        view.installEventFilter(self)
        view.destroyed.connect(self._cancel)

    def _cancel(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._view and event.type() == QEvent.Type.Show and self._stale:
            self._due.start()
        return False

    def _changed(self, _what: object = None) -> None:
        self._stale = True
        if self._view.isVisible():
            self._due.start()

    def feed(self) -> None:
        """Compute the report of the controller's current setup now."""
        self._stale = False
        c = self._controller
        spec, workload = c.spec, c.workload
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
        vllm = engine(workload.engine).startup is StartUp.VLLM
        if spec is None or workload.mode != "inference" or not vllm:
            self._view.show_report(None)
            return
        if c.estimate_error:  # the settings the core refuses have no start-up either
            self._view.show_failure(c.estimate_error)
            return
        capacities, draft = c.capacities, c.draft
        self._worker = submit(
            lambda: serving_report(spec, workload, capacities, draft), self._done, self._failed
        )

    def _done(self, report: ServingReport) -> None:
        self._worker = None
        if isValid(self._view):  # a report may arrive after the window closed
            self._view.show_report(report)

    def _failed(self, exc: Exception) -> None:
        self._worker = None
        if not isValid(self._view):
            return
        text = f"vLLM's serving capacity could not be computed: {in_window(exc)}"
        self._view.show_failure(text)
        self._controller.show_message(text)
