"""The time / cost line under the headline: how fast the setup runs on the target GPU, how long a
training run takes and what it costs; and the rates it is timed with, from the GPU catalog."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QWidget,
)

from vramgui.answers.bounds import bound_text
from vramgui.answers.timing import AS_SET, OFFLOAD, TimedPlacement, Timing, Untimed
from vramgui.core.engines import engine
from vramgui.core.units import (
    format_bytes,
    format_count,
    format_duration,
    format_money,
    format_rate,
    format_wait,
    parse_count,
)
from vramgui.ui.wording import in_window

NO_TARGET = (
    "Check a GPU of the catalog on the right to see how fast the setup runs and what it costs."
)


_SOURCES = {
    "default": "the published figure for {detail} GPUs",
    "unmeasured": "a guess: no measurement on {detail} GPUs",
    "measured": "measured on this GPU model ({detail})",
    "set": "set by hand",
}


# What a speed rests on (``Timing.basis``, ``RankedSetup.basis``), in the window's words.
BASIS_WORDS = {
    "measured": "measured",
    "extrapolated": "extrapolated",
    "roofline": "roofline, not measured",
}


# What a measured or extrapolated speed rests on, in the tooltip: (timed by a step fitted on
# published serving runs, ``Engine.step_model``?, basis) -> words.
BASIS_TOOLTIPS = {
    (False, "measured"): (
        "Speed measured: published llama-bench rows of this GPU and quantization set it "
        "(docs/performance.md, 'llama.cpp speed')"
    ),
    (False, "extrapolated"): (
        "Speed extrapolated from published llama-bench rows (docs/performance.md, "
        "'llama.cpp speed'); the notes below say what they do not cover"
    ),
    (True, "measured"): (
        "Speed measured: vLLM's step fitted on published serving runs, runs of this engine on "
        "this GPU among them (docs/performance.md, 'vLLM and SGLang serving')"
    ),
    (True, "extrapolated"): (
        "Speed extrapolated: vLLM's step fitted on published serving runs on other GPUs "
        "(docs/performance.md, 'vLLM and SGLang serving')"
    ),
}


def speed_text(summary: Timing | Untimed | None, brief: bool = False) -> str:
    """The line's words, what decides first: a training run's time and cost, then the speed
    behind them; for inference the decode speed and whether it is measured, the time to first
    token, the cost per million generated tokens; and the placement timed (``brief``: without
    what is in brackets). A setup nothing runs says so instead."""
    if summary is None:
        return NO_TARGET
    if isinstance(summary, Untimed):
        return f"No speed or cost: {escape(in_window(summary.reason))}"
    where = escape(placement_words(summary.placement, brief))
    price = summary.price
    parts = []
    if summary.mode == "training":
        if summary.time_seconds is not None and summary.train_tokens is not None:
            run = (
                f"{format_count(summary.train_tokens)} tokens in "
                f"<b>{format_duration(summary.time_seconds)}</b>"
            )
            if summary.cost is not None and price is not None:
                run += f" for <b>{format_money(summary.cost, price.currency)}</b>"
            parts.append(run)
        parts.append(f"{format_rate(summary.tokens_per_second)} tokens/s on {where}")
        parts.append(f"{summary.step_seconds:.2g} s a step")
    else:
        # What a user waits on first: the decode speed and what it rests on, the first token;
        # then the cost and the placement, which may be cut at the window's edge.
        decode = f"<b>{format_rate(summary.decode_tokens_per_second)} tokens/s</b> decode"
        if summary.concurrency > 1:
            decode += (
                f" per sequence ({format_rate(summary.tokens_per_second)} at batch "
                f"{summary.concurrency})"
            )
        if summary.basis:
            decode += f", {BASIS_WORDS.get(summary.basis, summary.basis)}"
        parts.append(decode)
        if summary.prefill_seconds is not None and summary.prompt_tokens is not None:
            parts.append(
                f"first token in <b>{format_wait(summary.prefill_seconds)}</b> "
                f"({summary.prompt_tokens:,}-token prompt)"
            )
        if summary.cost_per_million is not None and price is not None:
            parts.append(
                f"<b>{format_money(summary.cost_per_million, price.currency)}</b> per million "
                "tokens"
            )
        parts.append(f"on {where}")
    if price is None:
        parts.append("no rental price for this GPU")
    return " · ".join(parts)


def placement_words(placement: TimedPlacement, brief: bool = False) -> str:
    """The placement timed, short enough for the line: the GPUs, and what differs from the
    setup as chosen (llama.cpp's flags and the weights in host RAM, or the GPUs it takes);
    ``brief``: without what is in brackets."""
    where = f"{placement.gpus} x {placement.gpu}" if placement.gpus > 1 else placement.gpu
    if placement.kind == AS_SET or not placement.flags:
        return where
    if placement.kind != OFFLOAD:
        return where if brief else f"{where} ({placement.flags}; fewer do not hold it)"
    if brief:
        return f"{where} with {placement.flags}"
    moved = [f"{format_bytes(placement.host_bytes)} in RAM"] if placement.host_bytes else []
    if placement.disk_bytes:
        moved.append(f"{format_bytes(placement.disk_bytes)} from disk")
    return f"{where} with {placement.flags}" + (f" ({', '.join(moved)})" if moved else "")


def speed_tooltip(summary: Timing | Untimed | None) -> str:
    """What the line rests on: utilization and where it comes from, the price and its source."""
    if summary is None:
        return NO_TARGET
    if isinstance(summary, Untimed):
        return in_window(summary.reason)
    u = summary.utilization
    lines = [f"Timed on: {summary.placement.describe()}"]
    stepped = bool(summary.engine) and bool(engine(summary.engine).step_model)
    rests_on = BASIS_TOOLTIPS.get((stepped, summary.basis))
    if rests_on:
        lines.append(rests_on)
    else:
        lines.append(
            f"Matrix products at {u.matmul:.0%} of the GPU's 16-bit tensor peak: "
            + _SOURCES.get(u.source, u.source).format(detail=u.detail or "these")
        )
    lines += [
        f"Step: {summary.step_seconds:.3g} s, {bound_text(summary.bound)}"
        + (f"; MFU {summary.mfu:.0%}" if summary.mfu is not None else ""),
    ]
    if summary.price is not None:
        p = summary.price
        dated = f", {p.date}" if p.date else ""
        lines.append(f"{format_money(p.per_gpu_hour, p.currency)} per GPU-hour ({p.source}{dated})")
    lines += [f"• {in_window(note)}" for note in summary.notes]
    if summary.mode == "training":
        lines.append(
            "docs/performance.md, 'Training time', compares these figures with measurements."
        )
    return "\n".join(lines)


class SpeedLine(QWidget):
    """One line: the time / cost text, then the tokens to train and the price of a GPU-hour.

    ``tokens_changed(int)`` and ``price_changed(object)`` (a float, or None for the catalog's
    price) carry the user's edits.
    """

    tokens_changed = Signal(int)
    price_changed = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = QLabel(NO_TARGET)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.text.setAccessibleName("Training time and cost")
        # The words shown, and the same with the placement's brackets left out for a narrow line.
        self._texts = (NO_TARGET, NO_TARGET)
        self.text.installEventFilter(self)
        self.tokens_label = QLabel("Tokens")
        self.tokens = QLineEdit()
        self.tokens.setMaximumWidth(self.fontMetrics().horizontalAdvance("0000.0M") + 16)
        self.tokens.setToolTip("Tokens of the training run to time and price: 200M, 1.5B, 2e9")
        self.tokens.editingFinished.connect(self._tokens_edited)
        self.tokens_label.setBuddy(self.tokens)
        self.price = QDoubleSpinBox()
        self.price.setRange(0.0, 1000.0)
        self.price.setDecimals(2)
        self.price.setSingleStep(0.1)
        self.price.setPrefix("$")
        self.price.setSuffix("/h")
        # 0 means "the catalog's price": the usual case needs no typing.
        self.price.setSpecialValueText("catalog $")
        self.price.setToolTip(
            "Price of one GPU for one hour; 'catalog $' uses the catalog's on-demand rental rate"
        )
        self.price.valueChanged.connect(self._price_edited)
        # As tall as a line of text: the window's lines under the headline keep their height.
        height = self.text.fontMetrics().lineSpacing() + 6
        for widget in (self.tokens, self.price):
            widget.setFixedHeight(height)
        self.setFixedHeight(height)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.tokens_label)
        layout.addWidget(self.tokens)
        layout.addWidget(self.price)
        self._tokens = 0

    def show_summary(self, summary: Timing | Untimed | None, train_tokens: int) -> None:
        """Show ``summary``; the tokens and price controls apply to training only."""
        self._texts = (speed_text(summary), speed_text(summary, brief=True))
        self.text.setToolTip(speed_tooltip(summary))
        self._fit_text()
        timed = isinstance(summary, Timing)
        training = timed and summary.mode == "training"  # type: ignore[union-attr]
        for widget in (self.tokens_label, self.tokens):
            widget.setVisible(training)
        self.price.setVisible(timed)
        if train_tokens != self._tokens:
            self._tokens = train_tokens
            self.tokens.setText(format_count(train_tokens))

    def clear(self, text: str) -> None:
        """No figure, and ``text`` saying why (settings that have no estimate)."""
        self._texts = (text, text)
        self.text.setToolTip("")
        self._fit_text()
        for widget in (self.tokens_label, self.tokens, self.price):
            widget.hide()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.text and event.type() == QEvent.Type.Resize:
            self._fit_text()
        return super().eventFilter(watched, event)

    def _fit_text(self) -> None:
        """The whole line where it fits, else the placement without what is in brackets (the
        tooltip says it all); a line wider still is cut at the window's edge."""
        full, brief = self._texts
        text = full
        if brief != full:
            document = QTextDocument()
            document.setDocumentMargin(0)
            document.setDefaultFont(self.text.font())
            document.setHtml(full)
            if document.idealWidth() > self.text.contentsRect().width():
                text = brief
        if self.text.text() != text:  # a new text lays the row out again
            self.text.setText(text)

    def _tokens_edited(self) -> None:
        try:
            tokens = parse_count(self.tokens.text())
        except ValueError:
            self.tokens.setText(format_count(self._tokens))  # back to the last good figure
            return
        if tokens != self._tokens:
            self._tokens = tokens
            self.tokens_changed.emit(tokens)

    def _price_edited(self, value: float) -> None:
        self.price_changed.emit(value if value > 0 else None)


def ranked_text(ranked: Sequence[object], mode: str, limit: int = 5) -> str:
    """The advisor's list of rented setups, cheapest work first (``core.fit.RankedSetup``)."""
    if not ranked:
        return ""
    made = "trained" if mode == "training" else "generated"
    rows = []
    for place, r in enumerate(list(ranked)[:limit], 1):
        count, gpu = getattr(r, "count", 1), getattr(r, "gpu", "")
        per_second = getattr(r, "tokens_per_second", 0.0)
        price = getattr(r, "price", None)
        text = f"{place}. {count} x {gpu}: {per_second:,.0f} tokens/s"
        basis = getattr(r, "basis", "")
        if basis:
            text += f" ({BASIS_WORDS.get(basis, basis)})"
        seconds, cost = getattr(r, "time_seconds", None), getattr(r, "cost", None)
        if seconds is not None:
            text += f", {format_duration(seconds)}"
        if cost is not None and price is not None:
            text += f", <b>{format_money(cost, price.currency)}</b>"
        per_million = getattr(r, "cost_per_million", None)
        if per_million is not None and price is not None and seconds is None:
            text += (
                f", <b>{format_money(per_million, price.currency)}</b> per million tokens {made}"
            )
        if price is None:
            text += " (no price)"
        rows.append(text)
    return "<br>".join(rows)


def price_sources(ranked: Sequence[object]) -> Mapping[str, str]:
    """The price sources of a ranking, for its tooltip: source -> date."""
    out: dict[str, str] = {}
    for r in ranked:
        price = getattr(r, "price", None)
        if price is not None:
            out.setdefault(price.source, price.date)
    return out


def timed(document: dict[str, Any]) -> dict[str, Any] | None:
    """The speed or serving block of a comparison's document, or None."""
    block = document.get("speed") or document.get("serving")
    return block if isinstance(block, dict) else None
