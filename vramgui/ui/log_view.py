"""The explanation of a pasted or dropped log: what the engine printed beside the estimate, why it
decided what it did, and what to change (the same ``answers.explain`` the command prints).

Every string from the log is shown as plain text: a log is never read as markup, and its escape
sequences were taken off by the reader.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vramgui.core.errors import VramguiError
from vramgui.core.units import Unit, format_bytes
from vramgui.ui.workers import Worker, submit

if TYPE_CHECKING:
    from vramgui.answers.explain import Explanation

# Explain(text, model name, GPU name, quantization) -> the explanation; may block (runs on a
# worker thread).
Explain = Callable[[str, str, str, str], "Explanation"]
# A dropped file is read up to this many bytes, as the command reads one.
MAX_BYTES = 4_000_000
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
FLAGGED = QColor("#c0392b")


def read_log_file(path: str) -> str:
    """The first ``MAX_BYTES`` of a dropped or opened log, decoded leniently."""
    with open(path, "rb") as fh:
        return fh.read(MAX_BYTES).decode("utf-8", errors="replace")


def is_log_file(path: str) -> bool:
    return Path(path).suffix.lower() in LOG_SUFFIXES


def _plain(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class LogView(QDialog):
    """Paste a log (or open it with a dropped file), press Explain, read the explanation."""

    COLUMNS = ("Component", "Device", "Logged", "Estimate", "Difference", "What the row compares")

    def __init__(self, explain: Explain, unit: Unit = "GiB", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Explain a log")
        self._explain = explain
        self._unit: Unit = unit
        self._worker: Worker | None = None
        self.explanation: Explanation | None = None

        self.log = QPlainTextEdit()
        self.log.setPlaceholderText(
            "Paste what llama.cpp, Ollama, vLLM or SGLang printed, or PyTorch's "
            "'CUDA out of memory' message, then press Explain."
        )
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.log.setFont(mono)
        self.model = QLineEdit()
        self.model.setPlaceholderText("as the log names it")
        self.gpu = QLineEdit()
        self.gpu.setPlaceholderText("as the log prints it")
        self.quant = QLineEdit()
        self.quant.setPlaceholderText("as the log prints it (Q4_0, awq-int4...)")
        self.explain_button = QPushButton("Explain")
        self.explain_button.setDefault(True)
        self.status = _plain()
        form = QFormLayout()
        form.addRow("Model:", self.model)
        form.addRow("GPU:", self.gpu)
        form.addRow("Format:", self.quant)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.log, 1)
        left_layout.addLayout(form)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        row.addWidget(self.explain_button)
        left_layout.addLayout(row)

        self.headline = _plain()
        font = self.headline.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self.headline.setFont(font)
        self.setup_line = _plain()
        self.setup_line.setStyleSheet("color: gray;")
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.why = _plain()
        self.advice = _plain()
        self.launch = QPlainTextEdit()
        self.launch.setReadOnly(True)
        self.launch.setFont(mono)
        self.launch.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.launch.setFixedHeight(self._launch_height(1))
        self.notes = _plain()
        self.notes.setStyleSheet("color: gray;")
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.headline)
        right_layout.addWidget(self.setup_line)
        right_layout.addWidget(self.table)
        self._headings: dict[str, QLabel] = {}
        for title, widget in (
            ("Why", self.why),
            ("What to change (those that fit first, then the cheapest)", self.advice),
            ("Launch", self.launch),
            ("Notes", self.notes),
        ):
            heading = QLabel(title)
            heading.setContentsMargins(0, 6, 0, 0)
            bold = QFont(heading.font())
            bold.setBold(True)
            heading.setFont(bold)
            right_layout.addWidget(heading)
            right_layout.addWidget(widget)
            self._headings[title] = heading
        right_layout.addStretch(1)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.addWidget(split)
        self.explain_button.clicked.connect(self.run)
        self._show(None)

    # ----------------------------------------------------------------------------- input
    def set_text(self, text: str) -> None:
        self.log.setPlainText(text)

    def open_file(self, path: str) -> None:
        """Put a dropped or opened log in the box and explain it."""
        try:
            self.set_text(read_log_file(path))
        except OSError as exc:
            self.status.setText(f"Cannot read {path}: {exc.strerror or exc}")
            return
        self.run()

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._show(self.explanation)

    # ----------------------------------------------------------------------------- work
    def run(self) -> None:
        """Explain the box's text on a worker thread; the last request wins."""
        if self._worker is not None:
            self._worker.cancel()
        text = self.log.toPlainText()
        model, gpu, quant = (w.text().strip() for w in (self.model, self.gpu, self.quant))
        self.status.setText("Reading the log…")
        self.explain_button.setEnabled(False)
        self._worker = submit(
            lambda: self._explain(text, model, gpu, quant), self._finished, self._failed
        )

    def _finished(self, result: Explanation) -> None:
        self._worker = None
        self.explain_button.setEnabled(True)
        self.status.setText("")
        self._show(result)

    def _failed(self, exc: Exception) -> None:
        self._worker = None
        self.explain_button.setEnabled(True)
        # A user's error says what is wrong; anything else is a bug, said as one.
        text = str(exc) if isinstance(exc, VramguiError) else f"Could not explain it ({exc!r})"
        self.status.setText(text)
        self._show(None)

    # ----------------------------------------------------------------------------- view
    def _bytes(self, n: int | None) -> str:
        return "-" if n is None else format_bytes(n, self._unit)

    def _show(self, e: Explanation | None) -> None:
        self.explanation = e
        self.table.setRowCount(0)
        if e is None:
            self.headline.setText("No log explained yet")
            for label in (self.setup_line, self.why, self.advice, self.notes):
                label.setText("")
            self.launch.setPlainText("")
            self._fit_table()
            return
        s = e.setup
        version = f" {s.engine_version}" if s.engine_version else ""
        model = f" · {e.model_name}" if e.model_name else ""
        self.headline.setText(f"{s.engine_name}{version}{model}")
        from vramgui.answers.explain import shown_settings

        shown = ", ".join(f"{k}={v}" for k, v in shown_settings(e))
        assumed = f"  (assumed: {', '.join(s.assumed)})" if s.assumed else ""
        self.setup_line.setText(shown + assumed)
        self.table.setRowCount(len(e.components))
        for i, r in enumerate(e.components):
            diff = "" if r.difference is None else f"{r.difference:+.1%}"
            if r.flagged:
                diff += f"  beyond ±{r.accuracy:.0%}"
            cells = (
                r.name,
                r.device,
                self._bytes(r.logged_bytes),
                self._bytes(r.estimated_bytes),
                diff,
                r.note,
            )
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if 2 <= j <= 4:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if r.flagged and j == 4:
                    item.setForeground(FLAGGED)
                if r.note:
                    item.setToolTip(r.note)
                self.table.setItem(i, j, item)
        self.why.setText("\n".join(e.decision_lines) or "The log shows no decision to explain.")
        self.advice.setText(
            "\n".join(
                f"• {a.title}"
                + (f" — frees {self._bytes(a.frees_bytes)}" if a.frees_bytes else "")
                + f" (costs: {a.cost})"
                for a in e.advice
            )
            or "Nothing to change: the log shows no shortfall, or no model to re-estimate."
        )
        self.launch.setPlainText(e.launch_line)
        self.launch.setFixedHeight(self._launch_height(e.launch_line.count("\n") + 1))
        self.launch.setVisible(bool(e.launch_line))
        self._headings["Launch"].setVisible(bool(e.launch_line))
        self.notes.setText("\n".join(f"• {n}" for n in e.notes) or "None.")
        self._fit_table()

    def _launch_height(self, lines: int) -> int:
        """As tall as the launch text, up to ten lines (a scroll bar below a long line)."""
        spacing = self.launch.fontMetrics().lineSpacing()
        bar = self.launch.horizontalScrollBar().sizeHint().height()
        margin = 2 * round(self.launch.document().documentMargin()) + 2 * self.launch.frameWidth()
        return min(max(lines, 1), 10) * spacing + bar + margin + 8

    def _fit_table(self) -> None:
        """As tall as its rows, up to half the view: the explanation below stays in sight."""
        rows = sum(self.table.rowHeight(i) for i in range(self.table.rowCount()))
        height = self.table.horizontalHeader().height() + rows + 2 * self.table.frameWidth()
        self.table.setFixedHeight(min(max(height, 60), max(120, self.height() // 2)))
