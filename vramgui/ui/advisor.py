"""The fit advisor: what to change so that the setup fits, one click to apply; or the room left."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
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

from vramgui.answers.advice import saving_text
from vramgui.core.units import Unit, format_bytes, format_count
from vramgui.ui import palette
from vramgui.ui.timing import price_sources, ranked_text
from vramgui.ui.wording import in_window

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
        # As tall as its wrapped text at the panel's width (a narrow window needs more lines).
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        policy.setHeightForWidth(True)
        self.summary.setSizePolicy(policy)
        self.suggestions_area = QWidget()
        self._rows = QVBoxLayout(self.suggestions_area)
        self._rows.setContentsMargins(0, 0, 0, 0)
        self._rows.setSpacing(4)
        self.suggestions_area.hide()
        # The catalog GPUs that fit, ranked by what the work costs on them.
        self.ranking = QLabel()
        self.ranking.setWordWrap(True)
        self.ranking.setTextFormat(Qt.TextFormat.RichText)
        self.ranking.setSizePolicy(policy)
        self.ranking.setAccessibleName("Rented GPUs ranked by cost")
        self.ranking.hide()
        self.rank_order = QComboBox()
        self.rank_order.addItem("cheapest first", "cost")
        self.rank_order.addItem("fastest first", "time")
        self.rank_order.setToolTip("Order the GPUs to rent by the cost of the work or its speed")
        self.rank_order.currentIndexChanged.connect(self._show_ranking)
        self.rank_order.hide()
        # The latest ranking in both orders, and what it is of (mode, tokens to train).
        self._ranked: dict[str, Sequence[object]] = {"cost": (), "time": ()}
        self._ranking_of: tuple[str, int] = ("inference", 0)
        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.summary)
        column.addWidget(self.suggestions_area)
        self.ranking_title = QLabel()
        self.ranking_title.setTextFormat(Qt.TextFormat.RichText)
        self.ranking_title.setWordWrap(True)
        self.ranking_title.setSizePolicy(policy)
        self.ranking_title.hide()
        column.addWidget(self.ranking_title)
        column.addWidget(self.rank_order, 0, Qt.AlignmentFlag.AlignLeft)
        column.addWidget(self.ranking)
        column.addStretch(1)
        # Summary and cards scroll together inside the panel. The scroll area also keeps a new
        # summary or card text from laying out (and repainting) the rest of the window.
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setWidget(content)
        # Cards wrap their text to the panel's width rather than scroll sideways.
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # Transparent: the advice sits on the group box, not on a grey slab of its own.
        self.scroll_area.viewport().setAutoFillBackground(False)
        content.setAutoFillBackground(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll_area)
        # The cards are made once and refilled: making and deleting widgets on every estimate
        # would lay out the whole window again (and leave Qt wrappers to collect).
        self._cards = [_Card(self.apply_requested.emit) for _ in range(MAX_SHOWN)]
        for card in self._cards:
            card.hide()
            self._rows.addWidget(card)
        self.buttons: list[QPushButton] = []
        # Wide enough for a card: its text beside a whole Apply button, and the scroll bar.
        self.setMinimumWidth(
            MIN_TEXT_WIDTH
            + QPushButton("Apply").sizeHint().width()
            + self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
            + 30
        )

    def clear(self, text: str) -> None:
        """Drop the suggestions and the GPUs to rent, and say why there are none."""
        self._show_cards((), "GiB")
        self._set_summary(text)
        self.show_ranking((), (), *self._ranking_of)

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
        shortfall: str = "",
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
            shortfall: what a setup that does not fit is short of (``answers.advice.
                shortfall_text``); "" says the memory missing.
        """
        if target is None:
            self.clear("Check a GPU on the right to see whether the setup fits.")
            return
        name = target[0]
        room = []
        if largest.get("seq"):
            room.append(f"largest {seq_word} that fits: <b>{largest['seq']:,}</b> tokens")
        if largest.get("batch"):
            room.append(f"largest batch: <b>{largest['batch']:,}</b>")
        room_text = "; ".join(room)
        room_text = room_text[:1].upper() + room_text[1:]  # it starts a sentence
        if fits:
            self._set_summary(
                f"<span style='color:{palette.FIT}'><b>Fits {name}</b></span> with "
                f"{format_bytes(headroom_bytes, unit)} to spare. {room_text}".rstrip()
            )
        else:
            self._set_summary(
                f"<span style='color:{palette.NO_FIT}'><b>Does not fit {name}</b></span>: "
                f"{shortfall or format_bytes(-headroom_bytes, unit) + ' short'}. "
                + ("Changes that would make it fit:" if suggestions else "No single change fits.")
            )
        self._show_cards(list(suggestions)[:MAX_SHOWN], unit)

    def show_ranking(
        self,
        by_cost: Sequence[object],
        by_time: Sequence[object],
        mode: str,
        train_tokens: int,
    ) -> None:
        """The GPUs to rent that fit (``core.fit.RankedSetup``), in the order the user chose."""
        self._ranked = {"cost": by_cost, "time": by_time}
        self._ranking_of = (mode, train_tokens)
        self._show_ranking()

    def _show_ranking(self) -> None:
        by = self.rank_order.currentData() or "cost"
        ranked = self._ranked[by]
        mode, train_tokens = self._ranking_of
        rows = ranked_text(ranked, mode)
        what = (
            f"a run of {format_count(train_tokens)} tokens"
            if mode == "training"
            else "serving at this batch"
        )
        title = f"<b>GPUs to rent</b> for {what}:"
        if self.ranking_title.text() != title:
            self.ranking_title.setText(title)
        text = rows
        if self.ranking.text() != text:
            self.ranking.setText(text)
            sources = price_sources(ranked)
            self.ranking.setToolTip(
                "On-demand rental prices: "
                + "; ".join(f"{src} ({date})" if date else src for src, date in sources.items())
                if sources
                else ""
            )
        for widget in (self.ranking_title, self.rank_order, self.ranking):
            widget.setVisible(bool(rows))

    def _set_summary(self, text: str) -> None:
        # Only a new text is set: setting one lays the panel out again.
        if self.summary.text() != text:
            self.summary.setText(text)

    def _show_cards(self, suggestions: Sequence[object], unit: Unit) -> None:
        for card, suggestion in zip(self._cards, suggestions, strict=False):
            card.show_suggestion(suggestion, unit)
        for card in self._cards[len(suggestions) :]:
            card.hide()
        self.buttons = [card.button for card in self._cards[: len(suggestions)]]
        self.suggestions_area.setVisible(bool(suggestions))


class _Card(QFrame):
    """One suggestion: what to change, what it saves and costs, and its Apply button."""

    def __init__(self, apply: Callable[[object], None]) -> None:
        super().__init__()
        self.suggestion: object = None
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        # Wrapped labels in a scroll area report too small a height unless asked to grow.
        # Ignored width: the card takes the panel's width, not the label's guess at one.
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.MinimumExpanding)
        policy.setHeightForWidth(True)
        self.text.setSizePolicy(policy)
        self.button = QPushButton("Apply")
        self.button.setToolTip("Change the settings as this suggestion says")
        self.button.clicked.connect(lambda: apply(self.suggestion))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 3, 6, 3)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.button)

    def show_suggestion(self, suggestion: object, unit: Unit) -> None:
        """Fill the card from a ``core.fit.Suggestion`` (title, saves_bytes, cost, fits, and
        the KV pool under an engine that pre-allocates one)."""
        self.suggestion = suggestion
        title = in_window(getattr(suggestion, "title", ""))
        gives = saving_text(
            int(getattr(suggestion, "saves_bytes", 0)),
            getattr(suggestion, "pool_bytes", None),
            getattr(suggestion, "pool_tokens", None),
            lambda n: format_bytes(n, unit),
        )
        cost = getattr(suggestion, "cost", "")
        fits = bool(getattr(suggestion, "fits", False))
        text = (
            f"<b>{title}</b>{' — ' + gives if gives else ''}"
            + ("" if fits else " (not enough alone)")
            + (f"<br><span style='color:gray'>{cost}</span>" if cost else "")
        )
        if self.text.text() != text:
            self.text.setText(text)
        self.show()
