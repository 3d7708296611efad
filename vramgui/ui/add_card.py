"""The "Add a card…" dialog: a GPU the catalog lacks, given by its memory and bandwidth, and the
way such cards are kept in the settings."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from vramgui.hardware.errors import CardFigureError
from vramgui.hardware.gpus import CatalogGpu, custom_gpu
from vramgui.ui import palette

SETTINGS_KEY = "gpus/custom"
_GIB = 1 << 30
_FIELDS = {"memory": "Memory", "bandwidth": "Bandwidth", "tflops": "Compute"}


class AddCardDialog(QDialog):
    """Asks for a card's memory (GiB), bandwidth (GB/s) and, optionally, its dense 16-bit tensor
    TFLOPS and a name; ``card()`` is the card once accepted.

    Args:
        taken: whether a name is already in the GPU list (a card may not shadow another).
    """

    def __init__(self, taken: Callable[[str], bool], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a card")
        self._taken = taken
        self._card: CatalogGpu | None = None
        self.memory = _spin(1, 1 << 20, 24, " GiB", 1)
        self.bandwidth = _spin(1, 1e6, 1000, " GB/s", 0)
        # 0 is "unknown": the card is fitted but not timed.
        self.tflops = _spin(0, 1e6, 0, " TFLOPS", 1)
        self.tflops.setSpecialValueText("unknown (no speed)")
        self.name = QLineEdit()
        self.name.setClearButtonEnabled(True)
        # Room for a name such as "Custom 20 GiB, 500 GB/s" or a product name in full.
        self.name.setMinimumWidth(self.name.fontMetrics().horizontalAdvance("0" * 32))
        self.error = QLabel()
        self.error.setStyleSheet(palette.WARNING_STYLE)
        self.error.setWordWrap(True)
        self.error.hide()
        hint = QLabel(
            "Memory is what the card holds; bandwidth its peak memory bandwidth (it sets how fast "
            "tokens are generated); compute its dense 16-bit tensor TFLOPS, from the vendor's "
            'datasheet (half of a figure "with sparsity").'
        )
        hint.setWordWrap(True)
        form = QFormLayout(self)
        form.addRow(hint)
        form.addRow("Memory:", self.memory)
        form.addRow("Bandwidth:", self.bandwidth)
        form.addRow("Compute:", self.tflops)
        form.addRow("Name:", self.name)
        form.addRow(self.error)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        for spin in (self.memory, self.bandwidth):
            spin.valueChanged.connect(lambda _value: self._update_placeholder())
        self._update_placeholder()

    def card(self) -> CatalogGpu | None:
        """The card described, once the dialog was accepted."""
        return self._card

    def accept(self) -> None:
        """Keep the dialog open with the reason when the card cannot be added."""
        try:
            card = custom_gpu(
                self.memory.value(),
                self.bandwidth.value(),
                self.tflops.value() or None,
                self.name.text(),
            )
        except CardFigureError as exc:
            self._refuse(f"{_FIELDS[exc.figure]} must be a positive number.")
            return
        if self._taken(card.name):
            self._refuse(f"“{card.name}” is already in the list: give the card another name.")
            return
        self._card = card
        super().accept()

    def _refuse(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()

    def _update_placeholder(self) -> None:
        default = custom_gpu(self.memory.value(), self.bandwidth.value()).name
        self.name.setPlaceholderText(default)


def _spin(low: float, high: float, value: float, suffix: str, decimals: int) -> QDoubleSpinBox:
    spin = QDoubleSpinBox()
    spin.setRange(low, high)
    spin.setDecimals(decimals)
    spin.setValue(value)
    spin.setSuffix(suffix)
    spin.setGroupSeparatorShown(True)
    return spin


def cards_to_settings(cards: Iterable[CatalogGpu]) -> str:
    """The cards as the settings keep them: a JSON list of their figures."""
    return json.dumps(
        [
            {
                "name": card.name,
                "memory_gib": card.memory_bytes / _GIB,
                "bandwidth_gbps": card.memory_bandwidth_gbps or None,
                "tflops": card.bf16_tflops,
            }
            for card in cards
        ]
    )


def cards_from_settings(value: object) -> list[CatalogGpu]:
    """The cards kept in the settings; an entry that cannot be read is left out (the rest are
    kept), as is a name already used by an earlier entry."""
    if not isinstance(value, str):
        return []
    try:
        raw = json.loads(value)
    except ValueError:
        return []
    cards: dict[str, CatalogGpu] = {}
    for entry in raw if isinstance(raw, list) else []:
        card = _card(entry)
        if card is not None:
            cards.setdefault(card.name, card)
    return list(cards.values())


def _card(entry: Any) -> CatalogGpu | None:
    if not isinstance(entry, dict):
        return None
    figures = [entry.get(key) for key in ("memory_gib", "bandwidth_gbps", "tflops")]
    if not all(
        f is None or (isinstance(f, int | float) and not isinstance(f, bool)) for f in figures
    ):
        return None
    name = entry.get("name")
    if figures[0] is None or not isinstance(name, str):
        return None
    try:
        return custom_gpu(figures[0], figures[1], figures[2], name)
    except CardFigureError:
        return None
