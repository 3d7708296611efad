"""The breakdown table: every component of the estimate, its size and what it is."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont

from vramgui.core.units import Unit, format_bytes
from vramgui.ui.palette import component_label
from vramgui.ui.table_model import FlatTableModel

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

# What the table's last column says: a few words, whole in the room the column gets; the
# sentence above is each row's tooltip.
SHORT_EXPLANATIONS = {
    "weights": "The parameters, as stored",
    "kv_cache": "Keys and values of the cached tokens",
    "activations": "Tensors alive at the peak",
    "gradients": "One per trainable parameter",
    "optimizer_states": "Moments and fp32 master weights",
    "runtime_overhead": "CUDA context, workspaces, slack",
    "lora_adapters": "The LoRA A and B matrices",
    "backward_temporaries": "Buffers of backward, one layer",
    "dequantized_weight": "One layer's weight in 16 bits",
    "optimizer_temporaries": "Buffers of the optimizer step",
    "autocast_weight_copies": "16-bit copies autocast keeps",
    "gathered_parameters": "Shards gathered for the layers",
    "gradient_buckets": "Buckets reducing the gradients",
    "logits": "Vocabulary scores and the loss",
}
_Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Component", "Size", "Share", "What it is")


_DISPLAY = Qt.ItemDataRole.DisplayRole.value
_TOOLTIP = Qt.ItemDataRole.ToolTipRole.value
_ALIGN = Qt.ItemDataRole.TextAlignmentRole.value
_FONT = Qt.ItemDataRole.FontRole.value
_SIZE = Qt.ItemDataRole.UserRole.value
_RIGHT = (Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value


class BreakdownModel(FlatTableModel):
    """Rows: one per component, then the total. Reset with :meth:`set_components`.

    Every cell is worked out once per estimate, so that painting the table only looks them up.
    """

    COLUMNS = COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[tuple[str, int]] = []
        self._cells: dict[tuple[int, int, int], Any] = {}
        self._bold = QFont()
        self._bold.setBold(True)

    def set_components(self, components: dict[str, int], unit: Unit) -> None:
        """Show ``components`` (bytes by name) in ``unit``."""
        rows = list(components.items())
        same_rows = [name for name, _ in rows] == [name for name, _ in self._rows]
        if not same_rows:
            self.beginResetModel()
        self._rows = rows
        self._cells = self._fill(rows, unit)
        if same_rows:
            # The same components with new sizes: only the figures change, so the view repaints
            # those cells without measuring and laying out the table again, as a reset would.
            if rows:
                self.dataChanged.emit(self.index(0, 1), self.index(len(rows), 2))
        else:
            self.endResetModel()

    def _fill(self, rows: list[tuple[str, int]], unit: Unit) -> dict[tuple[int, int, int], Any]:
        total = sum(size for _, size in rows)
        cells: dict[tuple[int, int, int], Any] = {}
        for row, (name, size) in enumerate([*rows, ("total", total)]):
            is_total = row == len(rows)
            explanation = "" if is_total else EXPLANATIONS.get(name, "")
            texts = (
                "Total per GPU" if is_total else component_label(name),
                format_bytes(size, unit),
                f"{size / total:.1%}" if total else "-",
                "" if is_total else SHORT_EXPLANATIONS.get(name, explanation),
            )
            for column, text in enumerate(texts):
                cells[row, column, _DISPLAY] = text
                cells[row, column, _SIZE] = size
                if is_total:
                    cells[row, column, _FONT] = self._bold
            cells[row, 1, _TOOLTIP] = f"{size:,} bytes"
            if explanation:
                # On every cell: a narrow table shows no explanation column.
                for column in (0, 2, 3):
                    cells[row, column, _TOOLTIP] = explanation
            cells[row, 1, _ALIGN] = cells[row, 2, _ALIGN] = _RIGHT
        return cells

    def row_total(self) -> int:
        return len(self._rows) + 1 if self._rows else 0  # the components, then the total

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        return self._cells.get((index.row(), index.column(), int(role)))
