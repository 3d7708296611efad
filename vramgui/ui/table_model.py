"""The base of the window's fixed-column table models: flat tables, their columns named once."""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex

Index = QModelIndex | QPersistentModelIndex


class FlatTableModel(QAbstractTableModel):
    """A table whose cells hang off the root only (no tree, as every table of the window is).

    Subclasses name their ``COLUMNS`` and say how many rows they hold in :meth:`row_total`;
    Qt's ``rowCount`` / ``columnCount`` follow, zero under any valid parent.
    """

    COLUMNS: tuple[str, ...] = ()

    def row_total(self) -> int:
        """Rows in the table."""
        raise NotImplementedError

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else self.row_total()

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.COLUMNS)
