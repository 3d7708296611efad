"""The time / cost line under the headline: how fast the setup runs on the target GPU, how long a
training run takes and what it costs; and the rates it is timed with, from the GPU catalog."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QWidget,
)

from vramgui.core.errors import VramguiError, WorkloadError
from vramgui.core.model import ModelSpec
from vramgui.core.report import document_for
from vramgui.core.speed import Utilization
from vramgui.core.units import format_count, format_duration, format_money, parse_count
from vramgui.core.workload import Workload
from vramgui.hardware.errors import HardwareError
from vramgui.hardware.gpus import CatalogGpu, find_gpu
from vramgui.hardware.rates import rental_price, speed_hardware
from vramgui.ui.controller import (
    DEFAULT_TRAIN_TOKENS,
    Rates,
    RatesFor,
    SpeedSummary,
    summarize_speed,
)

NO_TARGET = (
    "Check a GPU of the catalog on the right to see how fast the setup runs and what it costs."
)


def catalog_rates(
    catalog: Sequence[CatalogGpu] | Callable[[], Sequence[CatalogGpu]],
    measured: Callable[[str], Utilization | None] = lambda _name: None,
) -> RatesFor:
    """Rates for the GPUs of ``catalog`` (a local GPU by its NVML name): datasheet peaks, the
    catalog's rental price, and the utilization measured on that GPU model where there is one,
    else its architecture's default. ``catalog`` may be a function that gives the GPUs known
    now (the catalog and the cards added by hand); a GPU's own name wins over a tolerant match.
    """
    fixed = () if callable(catalog) else tuple(catalog)
    current = catalog if callable(catalog) else lambda: fixed

    def rates(name: str, dtype: str) -> Rates | None:
        gpus = tuple(current())
        try:
            gpu = next((g for g in gpus if g.name == name), None) or find_gpu(name, gpus)
            hardware = speed_hardware(gpu, dtype)
        except (HardwareError, WorkloadError):
            return None
        utilization = measured(gpu.name) or Utilization.default_for(gpu.architecture)
        return Rates(hardware, rental_price(gpu), utilization)

    return rates


_SOURCES = {
    "default": "the published figure for {detail} GPUs",
    "unmeasured": "a guess: no measurement on {detail} GPUs",
    "measured": "measured on this GPU model ({detail})",
    "set": "set by hand",
}


def speed_text(summary: SpeedSummary | None) -> str:
    """The line's words, what decides first: a training run's time and cost, or the cost per
    million generated tokens; then the speed behind them."""
    if summary is None:
        return NO_TARGET
    where = f"{summary.gpus} x {summary.gpu}" if summary.gpus > 1 else summary.gpu
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
        parts.append(f"{summary.tokens_per_second:,.0f} tokens/s on {where}")
        parts.append(f"{summary.step_seconds:.2g} s a step")
    else:
        if summary.cost_per_million is not None and price is not None:
            parts.append(
                f"<b>{format_money(summary.cost_per_million, price.currency)}</b> per million "
                "tokens"
            )
        parts.append(
            f"<b>{summary.tokens_per_second:,.0f} tokens/s</b> at batch {summary.concurrency} "
            f"on {where}"
        )
    if price is None:
        parts.append("no rental price for this GPU")
    return " · ".join(parts)


def speed_tooltip(summary: SpeedSummary | None) -> str:
    """What the line rests on: utilization and where it comes from, the price and its source."""
    if summary is None:
        return NO_TARGET
    u = summary.utilization
    lines = [
        f"Matrix products at {u.matmul:.0%} of the GPU's 16-bit tensor peak: "
        + _SOURCES.get(u.source, u.source).format(detail=u.detail or "these"),
        f"Step: {summary.step_seconds:.3g} s, bound by {summary.bound.replace('_', ' ')}"
        + (f"; MFU {summary.mfu:.0%}" if summary.mfu is not None else ""),
    ]
    if summary.price is not None:
        p = summary.price
        dated = f", {p.date}" if p.date else ""
        lines.append(f"{format_money(p.per_gpu_hour, p.currency)} per GPU-hour ({p.source}{dated})")
    lines += [f"• {note}" for note in summary.notes]
    lines.append("docs/performance.md, 'Training time', compares these figures with measurements.")
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

    def show_summary(self, summary: SpeedSummary | None, train_tokens: int) -> None:
        """Show ``summary``; the tokens and price controls apply to training only."""
        text, tip = speed_text(summary), speed_tooltip(summary)
        if self.text.text() != text:  # a new text lays the row out again
            self.text.setText(text)
            self.text.setToolTip(tip)
        training = summary is not None and summary.mode == "training"
        for widget in (self.tokens_label, self.tokens):
            widget.setVisible(training)
        self.price.setVisible(summary is not None)
        if train_tokens != self._tokens:
            self._tokens = train_tokens
            self.tokens.setText(format_count(train_tokens))

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


def document_with_speed(
    rates: RatesFor, train_tokens: int = DEFAULT_TRAIN_TOKENS
) -> Callable[[ModelSpec, Workload, list[tuple[str, int]]], dict[str, Any]]:
    """``core.report.document_for`` with the setup timed and priced on its first GPU, for the
    comparison of profiles: ``speed`` as `vramgui estimate` writes it (training, a run of
    ``train_tokens``), or ``serving`` (inference: tokens per second at the batch as
    concurrency and the cost per million tokens). A GPU that cannot be timed adds neither."""

    def document(
        spec: ModelSpec, workload: Workload, capacities: list[tuple[str, int]]
    ) -> dict[str, Any]:
        doc = document_for(spec, workload, capacities)
        if not capacities:
            return doc
        gpu = capacities[0][0]
        r = rates(gpu, workload.dtype)
        if r is None:
            return doc
        try:
            summary = summarize_speed(spec, workload, gpu, r, train_tokens)
        except VramguiError:
            return doc
        block: dict[str, Any] = {
            "gpu": gpu,
            "tokens_per_second": summary.tokens_per_second,
            "cost_per_million_tokens": summary.cost_per_million,
            "price": None if r.price is None else r.price.to_dict(),
        }
        if workload.mode == "training":
            block.update(
                {
                    "step_seconds": summary.step_seconds,
                    "train_tokens": train_tokens,
                    "time_seconds": summary.time_seconds,
                    "cost": summary.cost,
                }
            )
            doc["speed"] = block
        else:
            doc["serving"] = {**block, "concurrency": summary.concurrency}
        return doc

    return document


def timed(document: dict[str, Any]) -> dict[str, Any] | None:
    """The speed or serving block of a comparison's document, or None."""
    block = document.get("speed") or document.get("serving")
    return block if isinstance(block, dict) else None
