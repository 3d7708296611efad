"""The precision panel: weight dtype, quantization grouped by family, KV cache dtype."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QFormLayout, QWidget

from vramgui.core.dtypes import Scheme
from vramgui.ui.widgets import SHORT_TEXT_ROLE, ChoiceCombo, set_tooltip

DTYPES = (("bf16", "bf16"), ("fp16", "fp16"), ("fp32", "fp32"))
KV_DTYPES = (
    ("auto", "Same as weights"),
    ("fp16", "fp16"),
    ("bf16", "bf16"),
    ("fp32", "fp32"),
    ("fp8", "fp8 (vLLM)"),
    ("q8_0", "q8_0 (llama.cpp)"),
    ("q4_0", "q4_0 (llama.cpp)"),
)
_KV_HINTS = {
    "auto": "The weights' dtype; llama.cpp's own default, f16, on llama.cpp.",
    "fp8": "vLLM's FP8 KV cache.",
    "q8_0": "A llama.cpp block-quantized KV cache.",
    "q4_0": "A llama.cpp block-quantized KV cache.",
}
_DESCRIPTION_ROLE = Qt.ItemDataRole.UserRole + 2
FAMILY_TITLES = {
    "none": "Unquantized",
    "fp8": "FP8",
    "bitsandbytes": "bitsandbytes",
    "gptq-awq": "GPTQ / AWQ",
    "gguf": "GGUF (llama.cpp)",
}


def short_label(scheme: Scheme) -> str:
    """A scheme as the closed box shows it: "bnb NF4 · 4.13 bits", "Q4_K_M · 4.5 bits"."""
    if scheme.family == "none":
        return "None (16/32-bit)"
    label = scheme.name if scheme.family == "gguf" else scheme.label.split(" (")[0]
    label = label.replace("bitsandbytes", "bnb")
    return f"{label} · {round(scheme.nominal_bits_per_weight, 2):g} bits"


class PrecisionPanel(QWidget):
    """Edits ``dtype``, ``quant`` and ``kv_dtype``; emits ``changed`` with what the user picked.

    Args:
        schemes: the quantization schemes by ``--quant`` name, in display order.
    """

    changed = Signal(dict)

    def __init__(self, schemes: Mapping[str, Scheme], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dtype = ChoiceCombo(DTYPES)
        self.dtype.setToolTip("The dtype of unquantized weights and of compute.")
        self.quant = ChoiceCombo(())
        self.kv_dtype = ChoiceCombo(KV_DTYPES)
        self.kv_dtype.setToolTip("The dtype of the KV cache.")
        self._fill_schemes(schemes)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Weights", self.dtype)
        form.addRow("Quantization", self.quant)
        form.addRow("KV cache", self.kv_dtype)
        self.dtype.currentIndexChanged.connect(
            lambda: self.changed.emit({"dtype": self.dtype.value()})
        )
        self.quant.currentIndexChanged.connect(
            lambda: self.changed.emit({"quant": self.quant.value()})
        )
        self.kv_dtype.currentIndexChanged.connect(
            lambda: self.changed.emit({"kv_dtype": self.kv_dtype.value()})
        )

    def _fill_schemes(self, schemes: Mapping[str, Scheme]) -> None:
        model = self.quant.model()
        assert isinstance(model, QStandardItemModel)
        family = None
        for scheme in schemes.values():
            if scheme.family != family:
                family = scheme.family
                self.quant.addItem(FAMILY_TITLES.get(family, family), None)
                header = model.item(self.quant.count() - 1)
                # A family title: shown in bold, never selectable.
                header.setFlags(Qt.ItemFlag.NoItemFlags)
                font = header.font()
                font.setBold(True)
                header.setFont(font)
            self.quant.addItem(
                f"    {scheme.label}  ·  {scheme.nominal_bits_per_weight:g} bits/weight",
                scheme.name,
            )
            index = self.quant.count() - 1
            self.quant.setItemData(index, scheme.description, Qt.ItemDataRole.ToolTipRole)
            self.quant.setItemData(index, scheme.description, _DESCRIPTION_ROLE)
            # The closed box is narrow: the label and the bits, without the words around them.
            self.quant.setItemData(index, short_label(scheme), SHORT_TEXT_ROLE)

    def set_values(self, dtype: str, quant: str, kv_dtype: str, reasons: dict[str, str]) -> None:
        """Show the current settings; disable what ``reasons`` names, with the reason as tooltip.

        ``reasons`` names whole controls ("quant") or single choices ("quant:Q4_K_M",
        "kv_dtype:fp8").
        """
        self.dtype.set_value(dtype)
        self.quant.set_value(quant)
        self.kv_dtype.set_value(kv_dtype)
        for name, widget, hint in (
            ("dtype", self.dtype, "The dtype of unquantized weights and of compute."),
            ("quant", self.quant, "How the weights are quantized; bits per weight include scales."),
            ("kv_dtype", self.kv_dtype, "The dtype of the KV cache."),
        ):
            reason = reasons.get(name)
            widget.setEnabled(reason is None)
            set_tooltip(widget, reason or hint)
        for value, hint in _KV_HINTS.items():
            _allow(
                self.kv_dtype, self.kv_dtype.findData(value), reasons.get(f"kv_dtype:{value}"), hint
            )
        for index in range(self.quant.count()):
            value = self.quant.itemData(index)
            if value is not None:
                reason = reasons.get(f"quant:{value}")
                _allow(self.quant, index, reason, self.quant.itemData(index, _DESCRIPTION_ROLE))


def _allow(combo: ChoiceCombo, index: int, reason: str | None, hint: str) -> None:
    """Enable choice ``index`` of ``combo``, or disable it with ``reason`` as its tooltip."""
    model = combo.model()
    assert isinstance(model, QStandardItemModel)
    item = model.item(index)
    # Set only on a change: each set makes the popup's model report a change.
    if item.isEnabled() != (reason is None):
        item.setEnabled(reason is None)
    text = reason or hint
    if item.toolTip() != text:
        item.setToolTip(text)
