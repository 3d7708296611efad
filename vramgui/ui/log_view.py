"""The explanation of a pasted or dropped log: what the engine printed beside the estimate, why it
decided what it did, and what to change (the same ``answers.explain`` the command prints).

Every string from the log is shown as plain text: a log is never read as markup, and its escape
sequences were taken off by the reader.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QKeyEvent,
    QResizeEvent,
    QShowEvent,
    QTextCursor,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from vramgui.answers.explain import component_label, log_text
from vramgui.core.errors import VramguiError
from vramgui.core.units import Unit, format_bytes
from vramgui.ui.wording import in_window
from vramgui.ui.workers import Worker, submit

if TYPE_CHECKING:
    from vramgui.answers.explain import ComponentRow, Explanation

# Explain(text, model name, GPU name, quantization, unit) -> the explanation, its sentences'
# sizes in the unit; may block (runs on a worker thread).
Explain = Callable[[str, str, str, str, Unit], "Explanation"]
# A dropped file is read up to this many bytes, as the command reads one.
MAX_BYTES = 4_000_000
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
FLAGGED = QColor("#c0392b")
FLAGGED_ROW = QColor("#fdecea")
SOURCE_LINE = QColor("#fff3b0")
# The log's own lines tinted at most: a log of thousands of buffer lines stays quick.
MARKED_LINES = 200
# A launch line longer than this is cut before its options (``continued``).
LAUNCH_WIDTH = 90
# A line is found in the box by this many characters of its start.
FOUND_BY = 80
# Where a decision is printed, for the readers that take it from the whole text: Ollama's
# offload line, vLLM's refusal, PyTorch's message, llama.cpp's failed allocation.
DECISION_MARKERS = (
    'msg="offload',
    "ValueError: ",
    "OutOfMemoryError",
    "CUDA out of memory",
    "cudaMalloc failed",
    "failed to allocate",
)
# The log box's share of the width, in percent: the explanation is the answer.
LEFT_SHARE = 36
# The explanation's widest, in pixels: longer lines are hard to read on a wide screen.
READABLE_WIDTH = 1100
UNESTIMATED = "Not estimated: the log's figure alone"
SAME_THING = "vramgui's estimate of the same figure"
UNHELD = "No stated accuracy: the logged figure is the engine's own estimate, not what it allocated"
INTRO = (
    "Paste on the left what an engine printed, or drop a log file on this window, and press "
    "Explain (Ctrl+Enter). Each figure the engine printed is laid beside vramgui's estimate of the same "
    "thing; then why the engine decided what it did (the layers it offloaded, a refusal, an "
    "out-of-memory), what to change, those that fit first, then the cheapest, and the launch "
    "line that applies it.\n\n"
    "Logs it reads:\n"
    "• llama.cpp: llama-server, llama-cli, llama-bench (its buffer lines, the memory breakdown "
    "table, a failed allocation)\n"
    "• Ollama: the server log (the offload line with memory.required.*, the new engine's "
    "per-device lines)\n"
    "• vLLM: the start-up (model loading, available KV cache memory, GPU KV cache size) and "
    "its refusals\n"
    "• SGLang: the start-up (the KV pool) and its refusals\n"
    "• PyTorch: the 'CUDA out of memory' message, with torch.cuda.memory_summary() if "
    "present\n\n"
    "Name the model, GPU or format on the left when the log does not."
)


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


class LogEdit(QPlainTextEdit):
    """The log box: lines wrapped, a dropped log file opened rather than its path pasted, and
    Ctrl+Enter asking for the explanation (Enter starts a new line)."""

    file_dropped = Signal(str)
    explain_requested = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.explain_requested.emit()
        else:
            super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return _dropped_file(source) is not None or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        path = _dropped_file(source)
        if path is not None:
            self.file_dropped.emit(path)
        elif source.hasText():  # a log copied from a terminal, without its colour codes
            self.insertPlainText(log_text(source.text()))
        else:
            super().insertFromMimeData(source)


def _dropped_file(data: QMimeData) -> str | None:
    """The first local file among dropped or pasted URLs."""
    for url in data.urls() if data.hasUrls() else ():
        if url.isLocalFile():
            return url.toLocalFile()
    return None


def continued(line: str, width: int = LAUNCH_WIDTH) -> str:
    """A long shell command cut before its options into lines of about ``width`` characters,
    each ending with `` \\`` (the same command when copied); a cut falls only at a space outside
    quotes, and a comment or a short line is left as it is."""
    if len(line) <= width or line.startswith("#"):
        return line
    cuts, quote = [], ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == " " and line[i + 1 : i + 2] == "-":
            cuts.append(i)
    out, start, last = [], 0, 0
    for cut in [*cuts, len(line)]:
        if cut - start > width and last > start:
            out.append(line[start:last])
            start = last + 1
        last = cut
    out.append(line[start:])
    return " \\\n    ".join(out)


def _whole_line(cursor: QTextCursor) -> QTextCursor:
    """``cursor`` widened to the whole line (block) it is on."""
    cursor.movePosition(QTextCursor.MoveOperation.StartOfBlock)
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
    return cursor


class LogView(QDialog):
    """Paste a log (or open it with a dropped file), press Explain, read the explanation."""

    COLUMNS = (
        "Component",
        "Device",
        "Logged",
        "Estimate",
        "Difference",
        "Accuracy",
        "What the row compares",
    )
    HEADER_TIPS = (
        "What the engine printed a figure for",
        "The device the figure is on ('all devices': the engine's total)",
        "The figure the engine printed",
        "vramgui's estimate of the same thing (— where it makes none)",
        "Difference = {difference}",
        "How close the estimate is meant to be for this component (docs/accuracy.md); a row "
        "beyond it is flagged: worth reporting with the log",
        "What exactly the two figures are",
    )
    DIFFERENCE, ACCURACY = 4, 5

    def __init__(self, explain: Explain, unit: Unit = "GiB", parent: QWidget | None = None) -> None:
        # The explanation's module is imported with the view, not with the window.
        from vramgui.answers.explain import DIFFERENCE_MEANING

        super().__init__(parent)
        self.setWindowTitle("Explain a log")
        self._explain = explain
        self._unit: Unit = unit
        self._worker: Worker | None = None
        # The last request explained (text, model, GPU, format): explained again in a new unit.
        self._request: tuple[str, str, str, str] | None = None
        self.explanation: Explanation | None = None

        self.log = LogEdit()
        self.log.setPlaceholderText(
            "Paste what llama.cpp, Ollama, vLLM or SGLang printed, or PyTorch's "
            "'CUDA out of memory' message, or drop a log file here; then press Explain."
        )
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.log.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.log.setFont(mono)
        self.log.file_dropped.connect(self.open_file)
        self.model = QLineEdit()
        self.model.setPlaceholderText("as the log names it")
        self.gpu = QLineEdit()
        self.gpu.setPlaceholderText("as the log prints it")
        self.quant = QLineEdit()
        self.quant.setPlaceholderText("as the log prints it (Q4_0, awq-int4...)")
        self.explain_button = QPushButton("Explain")
        self.explain_button.setDefault(True)
        # Enter in the log box starts a new line: Ctrl+Enter explains.
        self.explain_button.setToolTip("Explain the log (Ctrl+Enter)")
        self.log.explain_requested.connect(self._shortcut_run)
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
        self.intro = _plain(INTRO)
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        for j, tip in enumerate(self.HEADER_TIPS):
            header_item = self.table.horizontalHeaderItem(j)
            if header_item is not None:
                header_item.setToolTip(tip.format(difference=DIFFERENCE_MEANING))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(self.COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.table.currentCellChanged.connect(lambda row, *_: self._show_source(row))
        self.why = _plain()
        self.advice = _plain()
        self.launch = _plain()
        self.launch.setFont(mono)
        self.launch.setFrameShape(QFrame.Shape.StyledPanel)
        self.launch.setMargin(6)
        self.notes = _plain()
        self.notes.setStyleSheet("color: gray;")
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 6, 0)
        right_layout.addWidget(self.headline)
        right_layout.addWidget(self.setup_line)
        right_layout.addWidget(self.intro)
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
        right.setMaximumWidth(READABLE_WIDTH)
        scroll = QScrollArea()
        scroll.setWidget(right)
        scroll.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(left)
        self.split.addWidget(scroll)
        # The explanation is the answer: it gets about two thirds of the width.
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 2)
        self._balanced = False
        layout = QVBoxLayout(self)
        layout.addWidget(self.split)
        self.explain_button.clicked.connect(self.run)
        self._show(None)

    # ----------------------------------------------------------------------------- input
    def set_text(self, text: str) -> None:
        self.log.setPlainText(log_text(text))

    def open_file(self, path: str) -> None:
        """Put a dropped or opened log in the box and explain it."""
        try:
            self.set_text(read_log_file(path))
        except OSError as exc:
            self.status.setText(f"Cannot read {path}: {exc.strerror or exc}")
            return
        self.run()

    def set_unit(self, unit: Unit) -> None:
        """Sizes in ``unit``: the table at once, the sentences by explaining the same request
        again (they are written in a unit)."""
        self._unit = unit
        self._show(self.explanation)
        if self.explanation is not None and self._request is not None:
            self._submit(self._request)

    # ----------------------------------------------------------------------------- work
    def _shortcut_run(self) -> None:
        if self.explain_button.isEnabled():
            self.run()

    def run(self) -> None:
        """Explain the box's text on a worker thread; the last request wins."""
        model, gpu, quant = (w.text().strip() for w in (self.model, self.gpu, self.quant))
        self._request = (self.log.toPlainText(), model, gpu, quant)
        self._submit(self._request)

    def _submit(self, request: tuple[str, str, str, str]) -> None:
        if self._worker is not None:
            self._worker.cancel()
        unit = self._unit
        self.status.setText("Reading the log…")
        self.explain_button.setEnabled(False)
        self._worker = submit(lambda: self._explain(*request, unit), self._finished, self._failed)

    def _finished(self, result: Explanation) -> None:
        self._worker = None
        self.explain_button.setEnabled(True)
        self.status.setText("")
        self._show(result)
        self._mark_sources(result)

    def _failed(self, exc: Exception) -> None:
        self._worker = None
        self.explain_button.setEnabled(True)
        # A user's error says what is wrong; anything else is a bug, said as one.
        text = (
            in_window(exc) if isinstance(exc, VramguiError) else f"Could not explain it ({exc!r})"
        )
        self.status.setText(text)
        self._show(None)
        self.log.setExtraSelections([])

    # ----------------------------------------------------------------------------- view
    def _bytes(self, n: int | None) -> str:
        return "—" if n is None else format_bytes(n, self._unit)

    def _show(self, e: Explanation | None) -> None:
        self.explanation = e
        self.table.setRowCount(0)
        explained = e is not None
        self.intro.setVisible(not explained)
        self.table.setVisible(explained)
        for heading in self._headings.values():
            heading.setVisible(explained)
        for label in (self.setup_line, self.why, self.advice, self.launch, self.notes):
            label.setVisible(explained)
        if e is None:
            self.headline.setText("Explain a log")
            return
        from vramgui.answers.explain import advice_text, shown_settings

        s = e.setup
        version = f" {s.engine_version}" if s.engine_version else ""
        model = f" · {e.model_name}" if e.model_name else ""
        self.headline.setText(f"{s.engine_name}{version}{model}")
        shown = ", ".join(f"{k}={v}" for k, v in shown_settings(e))
        assumed = f"Assumed (the engine's default): {', '.join(s.assumed)}" if s.assumed else ""
        self.setup_line.setText("\n".join(x for x in (shown, assumed) if x))
        self.setup_line.setVisible(bool(shown or assumed))
        self.table.setRowCount(len(e.components))
        self.table.setVisible(bool(e.components))
        for i, r in enumerate(e.components):
            self._fill_row(i, r)
        self.why.setText("\n".join(e.decision_lines) or "The log shows no decision to explain.")
        self.advice.setText(
            "\n".join(f"• {advice_text(a, self._bytes)}" for a in e.advice)
            or "Nothing to change: the log shows no shortfall, or no model to re-estimate."
        )
        self.launch.setText("\n".join(continued(x) for x in e.launch_line.splitlines()))
        self.launch.setVisible(bool(e.launch_line))
        self._headings["Launch"].setVisible(bool(e.launch_line))
        self.notes.setText("\n".join(f"• {in_window(n)}" for n in e.notes))
        self.notes.setVisible(bool(e.notes))
        self._headings["Notes"].setVisible(bool(e.notes))
        self._fit_table()

    def _fill_row(self, i: int, r: ComponentRow) -> None:
        from vramgui.answers.explain import (
            DIFFERENCE_MEANING,
            accuracy_text,
            capitalised,
            device_label,
            difference_text,
        )

        unheld = r.accuracy is None and r.difference is not None
        accuracy = "—" if unheld else accuracy_text(r)
        cells = (
            component_label(r.name),
            device_label(r.device),
            self._bytes(r.logged_bytes),
            self._bytes(r.estimated_bytes),
            difference_text(r),
            accuracy,
            capitalised(in_window(r.note))
            or (UNESTIMATED if r.estimated_bytes is None else SAME_THING),
        )
        for j, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if 2 <= j <= 4:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if (r.estimated_bytes is None and j in (3, 6)) or (unheld and j == self.ACCURACY):
                item.setForeground(QColor("gray"))
            if j == 3 and r.estimated_bytes is None:
                item.setToolTip("Not estimated")
            elif j == self.DIFFERENCE and text:
                item.setToolTip(f"Difference = {DIFFERENCE_MEANING}")
            elif j == self.ACCURACY and unheld:
                item.setToolTip(UNHELD)
            elif j == self.ACCURACY and accuracy:
                item.setToolTip(
                    f"Stated accuracy for {component_label(r.name)}: ±{r.accuracy:.0%}"
                    + (": this row is beyond it, worth reporting with the log" if r.flagged else "")
                )
            else:
                item.setToolTip(text)
            if r.flagged:
                item.setBackground(FLAGGED_ROW)
                if j in (self.DIFFERENCE, self.ACCURACY):
                    item.setForeground(FLAGGED)
                    bold = item.font()
                    bold.setBold(True)
                    item.setFont(bold)
            self.table.setItem(i, j, item)

    def _fit_table(self) -> None:
        """As tall as its rows, up to half the view: the explanation below stays in sight."""
        self.table.resizeRowsToContents()
        rows = sum(self.table.rowHeight(i) for i in range(self.table.rowCount()))
        height = self.table.horizontalHeader().height() + rows + 2 * self.table.frameWidth()
        self.table.setFixedHeight(min(height, max(120, self.height() // 2)))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._balanced:  # once: a splitter the user moved stays where it is
            self._balanced = True
            width = self.split.width()
            self.split.setSizes([width * LEFT_SHARE // 100, width * (100 - LEFT_SHARE) // 100])

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_table()

    # ----------------------------------------------------------------------------- the log's lines
    def _source_line(self, row: int) -> str:
        """The log line a table row's figure was read from ('' for a total or an unknown)."""
        e = self.explanation
        if e is None or not 0 <= row < len(e.components):
            return ""
        r = e.components[row]
        return next(
            (c.line for c in e.setup.components if (c.name, c.device) == (r.name, r.device)), ""
        )

    def _find(self, line: str) -> QTextCursor | None:
        """The whole log line in the box that holds ``line`` (the reader took prefixes off; a line
        it joined from wrapped ones is found by its start)."""
        text = line.strip()
        if not text:
            return None
        for needle in (text, text[:FOUND_BY]):
            cursor = self.log.document().find(needle)
            if not cursor.isNull():
                return _whole_line(cursor)
        return None

    def _mark_sources(self, e: Explanation) -> None:
        """Tint the lines the figures came from and bring the first into view."""
        selections = []
        first: QTextCursor | None = None
        found = [self._find(c.line) for c in e.setup.components[:MARKED_LINES]]
        if e.setup.decision is not None:
            found.append(self._decision_line())
        for cursor in found:
            if cursor is None:
                continue
            mark = QTextEdit.ExtraSelection()
            mark.cursor = cursor
            mark.format.setBackground(SOURCE_LINE)
            selections.append(mark)
            if first is None or cursor.position() < first.position():
                first = cursor
        self.log.setExtraSelections(selections)
        if first is not None:
            self._scroll_to(first)

    def _decision_line(self) -> QTextCursor | None:
        """The whole line where the engine printed its decision, when a marker finds it."""
        for marker in DECISION_MARKERS:
            cursor = self.log.document().find(marker)
            if not cursor.isNull():
                return _whole_line(cursor)
        return None

    def _show_source(self, row: int) -> None:
        cursor = self._find(self._source_line(row))
        if cursor is not None:
            self._scroll_to(cursor)

    def _scroll_to(self, cursor: QTextCursor) -> None:
        at = QTextCursor(cursor)
        at.clearSelection()
        self.log.setTextCursor(at)
        self.log.centerCursor()
