"""The precision panel: weight dtype, quantization grouped by family, KV cache dtype."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QFormLayout, QLabel, QWidget

from vramgui.core.dtypes import Scheme
from vramgui.ui.widgets import SHORT_TEXT_ROLE, ChoiceCombo, allow_choice, set_tooltip

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
    "mxfp4": "MXFP4",
    "nvfp4": "NVFP4",
    "bitsandbytes": "bitsandbytes",
    "gptq-awq": "GPTQ / AWQ",
    "int": "compressed-tensors (llm-compressor)",
    "gguf": "GGUF (llama.cpp)",
}


_AS_STORED_HINT = (
    "How the checkpoint itself stores its weights, read from its quantization_config; another "
    "choice estimates the original weights quantized that way instead."
)


def short_label(scheme: Scheme, bits: float | None = None) -> str:
    """A scheme as the closed box shows it: "bnb NF4 · 4.13 bits", "Q4_K_M · 4.89 bits".

    ``bits``: its bits per weight on the model picked; None: the scheme's nominal width.
    """
    if scheme.family == "none":
        return "None (16/32-bit)"
    label = scheme.name if scheme.family == "gguf" else scheme.label.split(" (")[0]
    label = label.replace("bitsandbytes", "bnb")
    return f"{label} · {_bits_text(scheme, bits)} bits"


def item_label(scheme: Scheme, bits: float | None = None) -> str:
    """A scheme as the open list shows it: "Q4_K_M (llama.cpp)  ·  4.89 bits/weight"."""
    return f"    {scheme.label}  ·  {_bits_text(scheme, bits)} bits/weight"


def _bits_text(scheme: Scheme, bits: float | None) -> str:
    return f"{round(scheme.nominal_bits_per_weight if bits is None else bits, 2):g}"


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
        self._schemes = dict(schemes)
        self._fill_schemes(schemes)
        self._none_index = self.quant.findData("none")
        # The checkpoint's own format, and what the estimate does instead when another is picked.
        self.stored = QLabel()
        self.stored.setWordWrap(True)
        self.stored.setObjectName("storedFormat")
        self.stored.setToolTip(_AS_STORED_HINT)
        self._stored_label = QLabel("Stored as")
        self._stored_text = ""
        self._bits: dict[str, float] = {}
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Weights", self.dtype)
        form.addRow("Quantization", self.quant)
        form.addRow(self._stored_label, self.stored)
        form.addRow("KV cache", self.kv_dtype)
        self._show_stored("", "none")
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
            self.quant.addItem(item_label(scheme), scheme.name)
            index = self.quant.count() - 1
            self.quant.setItemData(index, scheme.description, Qt.ItemDataRole.ToolTipRole)
            self.quant.setItemData(index, scheme.description, _DESCRIPTION_ROLE)
            # The closed box is narrow: the label and the bits, without the words around them.
            self.quant.setItemData(index, short_label(scheme), SHORT_TEXT_ROLE)

    def set_bits(self, bits: Mapping[str, float]) -> None:
        """Label each scheme with its average bits per weight on the model picked (by scheme
        name, ``storage.bits_per_weight``: stored bytes x 8 over the model's parameters, as
        the mix assigns each tensor); a scheme left out shows its nominal width."""
        self._bits = dict(bits)
        model = self.quant.model()
        assert isinstance(model, QStandardItemModel)
        for index in range(self.quant.count()):
            name = self.quant.itemData(index)
            if name is None or name == "none":
                continue
            scheme, value = self._schemes[name], self._bits.get(name)
            model.item(index).setText(item_label(scheme, value))
            model.item(index).setData(short_label(scheme, value), SHORT_TEXT_ROLE)
        self._label_stored()
        self.quant.update()  # the closed box paints the item's short text

    def set_values(
        self,
        dtype: str,
        quant: str,
        kv_dtype: str,
        reasons: dict[str, str],
        stored: str = "",
        *,
        converted: bool = False,
        checkpoint_kv: str = "",
    ) -> None:
        """Show the current settings; disable what ``reasons`` names, with the reason as tooltip.

        ``reasons`` names whole controls ("quant") or single choices ("quant:Q4_K_M",
        "kv_dtype:fp8"). ``stored`` is the checkpoint's own format ("MXFP4 experts, bf16
        elsewhere"), "" for a model stored unquantized: the quantization box then offers it as
        "As stored", and says when another choice replaces it. ``converted``: ``quant`` is the
        GGUF the engine runs the checkpoint as, its quantized weights as they are (llama.cpp's
        MXFP4_MOE of an MXFP4 checkpoint), which replaces nothing. ``checkpoint_kv`` is the KV
        cache dtype the engine takes from the checkpoint's own KV-cache scheme ("fp8"), which the
        automatic choice then names.
        """
        self._show_stored(stored, quant, converted)
        auto = self.kv_dtype.findData("auto")
        label = f"As the checkpoint ({checkpoint_kv})" if checkpoint_kv else KV_DTYPES[0][1]
        if self.kv_dtype.itemText(auto) != label:
            self.kv_dtype.setItemText(auto, label)
        self.dtype.set_value(dtype)
        self.quant.set_value(quant)
        self.kv_dtype.set_value(kv_dtype)
        for name, widget, hint in (
            ("dtype", self.dtype, "The dtype of unquantized weights and of compute."),
            (
                "quant",
                self.quant,
                "How the weights are quantized. Bits per weight: this model's average under "
                "each choice, scales and the tensors it keeps wider (in the Weights dtype) "
                "included.",
            ),
            ("kv_dtype", self.kv_dtype, "The dtype of the KV cache."),
        ):
            reason = reasons.get(name)
            widget.setEnabled(reason is None)
            set_tooltip(widget, reason or hint)
        for value, hint in _KV_HINTS.items():
            allow_choice(
                self.kv_dtype, self.kv_dtype.findData(value), reasons.get(f"kv_dtype:{value}"), hint
            )
        for index in range(self.quant.count()):
            value = self.quant.itemData(index)
            if value is not None:
                reason = reasons.get(f"quant:{value}")
                allow_choice(
                    self.quant, index, reason, self.quant.itemData(index, _DESCRIPTION_ROLE)
                )

    def _label_stored(self) -> None:
        """The "none" choice: the checkpoint's own format where it has one, with its bits per
        weight once known."""
        model = self.quant.model()
        assert isinstance(model, QStandardItemModel)
        item = model.item(self._none_index)
        none, stored, bits = self._schemes["none"], self._stored_text, self._bits.get("none")
        if stored:
            per_weight = "" if bits is None else f"  ·  {round(bits, 2):g} bits/weight"
            item.setText(f"    As stored: {stored}{per_weight}")
            item.setData(f"As stored · {stored}", SHORT_TEXT_ROLE)
            item.setData(_AS_STORED_HINT, _DESCRIPTION_ROLE)
        else:
            item.setText(item_label(none, bits))
            item.setData(short_label(none), SHORT_TEXT_ROLE)
            item.setData(none.description, _DESCRIPTION_ROLE)

    def _show_stored(self, stored: str, quant: str, converted: bool = False) -> None:
        """The "none" choice as the checkpoint's own format, and the line that says which."""
        if stored != self._stored_text:
            self._stored_text = stored
            self._label_stored()
            self.quant.update()  # the closed box paints the item's short text
        self._stored_label.setVisible(bool(stored))
        self.stored.setVisible(bool(stored))
        if not stored:
            return
        replaced = quant != "none" and quant in self._schemes and not converted
        if converted:
            self.stored.setText(
                f"{stored}. Estimated as {self._schemes[quant].label}, the GGUF llama.cpp runs "
                f"it as: {self._schemes[quant].description}."
            )
        elif replaced:
            label = self._schemes[quant].label
            self.stored.setText(
                f"{stored}. Estimated as {label} instead: the original weights quantized so, "
                "not this checkpoint."
            )
        else:
            self.stored.setText(stored)
        self.stored.setProperty("overridden", replaced)
        self.stored.setStyleSheet("color: #b35c00;" if replaced else "")
