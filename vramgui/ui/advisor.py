"""The fit advisor: what to change so that the setup fits, one click to apply; or the room left."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from vramgui.core.units import Unit, format_bytes
from vramgui.ui import palette

MAX_SHOWN = 8
MIN_TEXT_WIDTH = 100


class AdvisorPanel(QWidget):
    """Shows the room left, or ranked suggestions each with an Apply button.

    ``apply_requested`` carries the suggestion object (``core.fit.Suggestion``) the user chose.
    """

    apply_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("Pick a model to see whether it fits.")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # As tall as its wrapped text at the panel's width (a narrow window needs more lines);
        # a new summary lays out only this panel, whose size the splitter holds.
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        policy.setHeightForWidth(True)
        self.summary.setSizePolicy(policy)
        self._list = QWidget()
        self._rows = QVBoxLayout(self._list)
        self._rows.setContentsMargins(0, 0, 0, 0)
        self._rows.setSpacing(4)
        self._rows.addStretch(1)
        self.suggestions_area = QScrollArea()
        self.suggestions_area.setWidgetResizable(True)
        self.suggestions_area.setFrameShape(QFrame.Shape.NoFrame)
        self.suggestions_area.setWidget(self._list)
        # Cards wrap their text to the panel's width rather than scroll sideways.
        self.suggestions_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # Transparent: the suggestions sit on the group box, not on a grey slab of their own.
        self.suggestions_area.viewport().setAutoFillBackground(False)
        self._list.setAutoFillBackground(False)
        self.suggestions_area.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.suggestions_area, 1)
        # Takes the height only while the suggestions are hidden (the list's stretch wins otherwise).
        layout.addStretch(0)
        self.buttons: list[QPushButton] = []
        self._row_widgets: list[QWidget] = []
        # Wide enough for a card: its text beside a whole Apply button, and the scroll bar.
        self.setMinimumWidth(
            MIN_TEXT_WIDTH
            + QPushButton("Apply").sizeHint().width()
            + self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
            + 30
        )

    def clear(self, text: str) -> None:
        """Drop the suggestions and say why there are none."""
        for widget in self._row_widgets:
            widget.deleteLater()
        self._row_widgets.clear()
        self.buttons.clear()
        self.suggestions_area.hide()
        self.summary.setText(text)

    def show_outlook(
        self,
        target: tuple[str, int] | None,
        *,
        fits: bool | None,
        headroom_bytes: int,
        largest: dict[str, int | None],
        suggestions: Sequence[object],
        unit: Unit,
        seq_word: str,
    ) -> None:
        """Show the advice for the target GPU.

        Args:
            target: ``(name, capacity_bytes)`` of the GPU held against, or None.
            fits: whether the setup fits the target (None without a target).
            headroom_bytes: capacity minus total (negative when short).
            largest: largest ``seq`` / ``batch`` that fits, None where not even 1 does.
            suggestions: ranked ``core.fit.Suggestion`` objects.
            unit: display unit.
            seq_word: "context" or "sequence length".
        """
        if target is None:
            self.clear("Check a GPU on the right to see whether the setup fits.")
            return
        self.clear("")
        name = target[0]
        room = []
        if largest.get("seq"):
            room.append(f"largest {seq_word} that fits: <b>{largest['seq']:,}</b> tokens")
        if largest.get("batch"):
            room.append(f"largest batch: <b>{largest['batch']:,}</b>")
        room_text = "; ".join(room)
        room_text = room_text[:1].upper() + room_text[1:]  # it starts a sentence
        if fits:
            self.summary.setText(
                f"<span style='color:{palette.FIT}'><b>Fits {name}</b></span> with "
                f"{format_bytes(headroom_bytes, unit)} to spare. {room_text}".rstrip()
            )
        else:
            self.summary.setText(
                f"<span style='color:{palette.NO_FIT}'><b>Does not fit {name}</b></span>: "
                f"{format_bytes(-headroom_bytes, unit)} short. "
                + ("Changes that would make it fit:" if suggestions else "No single change fits.")
            )
        for suggestion in list(suggestions)[:MAX_SHOWN]:
            self._add_row(suggestion, unit)
        self.suggestions_area.setVisible(bool(self._row_widgets))

    def _add_row(self, suggestion: object, unit: Unit) -> None:
        title = getattr(suggestion, "title", "")
        saves = int(getattr(suggestion, "saves_bytes", 0))
        cost = getattr(suggestion, "cost", "")
        fits = bool(getattr(suggestion, "fits", False))
        row = QFrame()
        row.setFrameShape(QFrame.Shape.StyledPanel)
        text = QLabel(
            f"<b>{title}</b> — saves {format_bytes(saves, unit)}"
            + ("" if fits else " (not enough alone)")
            + (f"<br><span style='color:gray'>{cost}</span>" if cost else "")
        )
        text.setWordWrap(True)
        text.setTextFormat(Qt.TextFormat.RichText)
        # Wrapped labels in a scroll area report too small a height unless asked to grow.
        # Ignored width: the card takes the panel's width, not the label's guess at one.
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.MinimumExpanding)
        policy.setHeightForWidth(True)
        text.setSizePolicy(policy)
        button = QPushButton("Apply")
        button.setToolTip("Change the settings as this suggestion says")
        button.clicked.connect(lambda: self.apply_requested.emit(suggestion))
        layout = QHBoxLayout(row)
        layout.setContentsMargins(6, 3, 6, 3)
        layout.addWidget(text, 1)
        layout.addWidget(button)
        self._rows.insertWidget(self._rows.count() - 1, row)
        self._row_widgets.append(row)
        self.buttons.append(button)
