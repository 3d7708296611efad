"""The breakdown table: every component of the estimate, its size and what it is."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont

from vramgui.core.units import Unit, format_bytes
from vramgui.ui.palette import component_label

EXPLANATIONS = {
    "weights": "The model's parameters, in the chosen dtype or quantization (scales included).",
    "kv_cache": "Keys and values kept for every token of every sequence, per attention layer.",
    "activations": "Intermediate tensors at the peak: saved for backward, or the prefill's buffers.",
    "gradients": "One gradient per trainable parameter, built up during backward.",
    "optimizer_states": "Optimizer moments and fp32 master weights of the trainable parameters.",
    "runtime_overhead": "CUDA context, library workspaces and allocator slack.",
    "lora_adapters": "The LoRA A and B matrices added to the targeted modules.",
    "backward_temporaries": "Buffers that live only while backward runs through a layer.",
    "dequantized_weight": "A quantized weight unpacked to 16 bits for the layer being computed.",
    "optimizer_temporaries": "Full-size buffers the optimizer step allocates while it runs.",
    "autocast_weight_copies": "16-bit copies of fp32 weights that autocast caches for the step.",
    "gathered_parameters": "Sharded parameters gathered whole for the layers in flight.",
    "gradient_buckets": "Communication buckets that reduce gradients across GPUs.",
    "logits": "Scores over the vocabulary for every position, and the loss over them.",
}

_Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Component", "Size", "Share", "What it is")


class BreakdownModel(QAbstractTableModel):
    """Rows: one per component, then the total. Reset with :meth:`set_components`."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[tuple[str, int]] = []
        self._total = 0
        self._unit: Unit = "GiB"

    def set_components(self, components: dict[str, int], unit: Unit) -> None:
        """Show ``components`` (bytes by name) in ``unit``."""
        self.beginResetModel()
        self._rows = list(components.items())
        self._total = sum(components.values())
        self._unit = unit
        self.endResetModel()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() or not self._rows else len(self._rows) + 1

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, column = index.row(), index.column()
        is_total = row == len(self._rows)
        name, size = ("total", self._total) if is_total else self._rows[row]
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return "Total per GPU" if is_total else component_label(name)
            if column == 1:
                return format_bytes(size, self._unit)
            if column == 2:
                return f"{size / self._total:.1%}" if self._total else "-"
            return "" if is_total else EXPLANATIONS.get(name, "")
        if role == Qt.ItemDataRole.ToolTipRole and column == 1:
            return f"{size:,} bytes"
        if role == Qt.ItemDataRole.ToolTipRole and column == 3 and not is_total:
            return EXPLANATIONS.get(name)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (1, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.FontRole and is_total:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.UserRole:
            return size
        return None
