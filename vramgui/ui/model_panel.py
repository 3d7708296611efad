"""The model panel: search the Hub and the catalog, open a local folder or file, recent models."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from vramgui.core.model import Inventory, ModelSpec
from vramgui.core.units import Unit
from vramgui.ui import palette
from vramgui.ui.table_model import FlatTableModel
from vramgui.ui.wording import as_sentence
from vramgui.ui.workers import Worker, submit

SEARCH_DEBOUNCE_MS = 150
RESULTS_HEIGHT_PX = 130
MAX_RECENT = 10
MODEL_FILE_SUFFIXES = (".safetensors", ".gguf", ".json")
_Index = QModelIndex | QPersistentModelIndex
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# Plain ints: the view calls data() about ten times per cell, and enum members cost more there.
_DISPLAY = int(Qt.ItemDataRole.DisplayRole.value)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole.value)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole.value)
_RIGHT = int((Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value)
_ORIGINS = {
    "hub": "From the Hugging Face Hub.",
    "cache": "From a saved Hub answer (offline).",
    "catalog": "From the bundled catalog: works offline.",
}


def droppable_path(urls: Iterable[QUrl]) -> str | None:
    """The first dropped local folder, .safetensors, .gguf or config .json, or None."""
    for url in urls:
        if not url.isLocalFile():
            continue
        path = Path(url.toLocalFile())
        if path.is_dir() or path.suffix.lower() in MODEL_FILE_SUFFIXES:
            return str(path)
    return None


def _is_path(text: str) -> bool:
    """Whether ``text`` names a file or folder here (typed or pasted into the search box)."""
    try:
        return Path(text).expanduser().exists()
    except OSError:
        return False


def count_text(n: int | None, digits: int = 3) -> str:
    """A count in K, M, B or T to ``digits`` significant digits (124M, 8.03B, 70.6B).

    The unit is chosen after rounding, so that 999,885,952 reads 1B, never "1e+03M".
    """
    if not n:
        return ""
    for factor, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        rounded = float(f"{n / factor:.{digits}g}")
        if rounded >= 1:
            return f"{rounded:g}{suffix}"
    return str(n)


def parameters_text(spec: ModelSpec) -> str:
    """The parameter count as exact as the inventory is: an approximate one reads as such."""
    if spec.inventory is Inventory.APPROXIMATE:
        return f"about {count_text(spec.parameters, 2)} parameters (approximate)"
    return f"{count_text(spec.parameters)} parameters"


# A word of a repo name with the separator before it: "Llama-3.1-8B" is "Llama", "-3", ".1", "-8B".
_NAME_WORD = re.compile(r"[-_.]?[^-_.]+|[-_.]+")


def shorten_id(repo_id: str, others: Iterable[str], fits: Callable[[str], bool]) -> str:
    """``repo_id`` shortened until ``fits`` says it does, keeping what tells it from ``others``
    (the other results listed with it).

    Cut in the middle, "nvidia/DeepSeek-V3.1-NVFP4" beside "nvidia/Llama-3.1-NVFP4" both read
    "nvidia/…1-NVFP4". Left out instead, in turn, each gap shown as "…": the owner every
    other result shares, the words of the name every other result has too (from the end: a
    format suffix all share), then the owner; what is left keeps its start (the model's name),
    for the caller to cut at the right if it still does not fit.
    """
    if fits(repo_id):
        return repo_id
    owner, _, name = repo_id.rpartition("/")
    owners: set[str] = set()
    common: set[str] | None = None
    for other in others:
        if other == repo_id:
            continue
        other_owner, _, other_name = other.rpartition("/")
        owners.add(other_owner.lower())
        words = {_bare(w) for w in _NAME_WORD.findall(other_name)}
        common = words if common is None else common & words
    pieces = _NAME_WORD.findall(name)
    kept = [True] * len(pieces)

    def shown(with_owner: bool) -> str:
        body, gap = "", False
        for piece, keep in zip(pieces, kept, strict=True):
            if keep:
                body, gap = body + piece, False
            elif not gap:
                body, gap = body + "…", True
        if not owner:
            return body
        return f"{owner}/{body}" if with_owner else f"…/{body}"

    with_owner = not (owner and owners == {owner.lower()})
    if fits(shown(with_owner)):
        return shown(with_owner)
    for i in reversed(range(1, len(pieces))):  # the first word names the model: it stays
        if common is not None and _bare(pieces[i]) in common:
            kept[i] = False
            if fits(shown(with_owner)):
                return shown(with_owner)
    return shown(False)


def _bare(piece: str) -> str:
    return piece.lstrip("-_.").lower()


class _DistinguishingElide(QStyledItemDelegate):
    """Draws a repo id too long for its cell as ``shorten_id`` shortens it against the other
    results (the tooltip has the whole id)."""

    def __init__(self, ids: Callable[[], Sequence[str]], parent: QObject) -> None:
        super().__init__(parent)
        self._ids = ids

    def initStyleOption(self, option: QStyleOptionViewItem, index: _Index) -> None:
        super().initStyleOption(option, index)
        metrics = option.fontMetrics
        # The cell's text room: its width less the style's margins (a few pixels a side).
        room = option.rect.width() - 2 * (metrics.horizontalAdvance(" ") + 2)
        short = shorten_id(option.text, self._ids(), lambda t: metrics.horizontalAdvance(t) <= room)
        option.text = metrics.elidedText(short, Qt.TextElideMode.ElideRight, room)


def _cells(hit: Any) -> tuple[str, str, str, str]:
    # One word, the one that matters most (the tooltip has both): a narrow panel keeps its room
    # for the repo ids.
    note = "gated" if hit.gated else "" if hit.source == "hub" else hit.source
    return hit.id, count_text(hit.parameters), count_text(hit.downloads), note


def _tooltip(hit: Any) -> str:
    parts = [hit.id]
    if hit.gated:
        parts.append("Gated: accept the license on the Hub and log in to read it.")
    parts.append(_ORIGINS.get(hit.source, hit.source))
    return "\n".join(parts)


class SearchResultsModel(FlatTableModel):
    """Search hits: repo id, parameters, downloads, gated, where the hit came from.

    The texts are made once per result set: the view asks ``data`` for every cell and role each
    time it sizes its columns, on the GUI thread.
    """

    # Short headers, so that a narrow side panel leaves the repo ids their room; each header's
    # tooltip says what the column holds.
    COLUMNS = ("Model", "Params", "↓", "")
    HEADER_TIPS = ("Repository or catalog name", "Parameters", "Downloads on the Hub", "Notes")

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[Any] = []
        self._cells: list[tuple[str, str, str, str]] = []
        self._tips: list[str] = []

    def set_results(self, results: Sequence[Any]) -> None:
        self.beginResetModel()
        self._rows = list(results)
        self._cells = [_cells(hit) for hit in self._rows]
        self._tips = [_tooltip(hit) for hit in self._rows]
        self.endResetModel()

    def result(self, row: int) -> Any:
        return self._rows[row]

    def ids(self) -> list[str]:
        """The repo ids listed, in order."""
        return [cells[0] for cells in self._cells]

    def row_total(self) -> int:
        return len(self._rows)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == _DISPLAY:
            return self.COLUMNS[section]
        if role == _TOOLTIP:
            return self.HEADER_TIPS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == _DISPLAY:
            return self._cells[index.row()][index.column()] if index.isValid() else None
        if role == _TOOLTIP:
            return self._tips[index.row()] if index.isValid() else None
        if role == _ALIGNMENT and index.column() in (1, 2):
            return _RIGHT
        return None


class ModelPanel(QWidget):
    """Finds a model and emits ``source_chosen`` with what to load (repo id, path or name).

    Args:
        search: ``query -> SearchResult`` (``vramgui.sources.resolve.search_models`` shape: with
            ``results`` and ``offline_notice``); called on a worker thread.
        recent: sources opened before, newest first.
    """

    source_chosen = Signal(str)

    def __init__(
        self,
        search: Callable[[str], Any],
        recent: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._search = search
        self._pending: Worker | None = None
        self._shown_query = ""  # the query the results listed are for
        self._pending_query = ""  # the query searched for now
        self._pick_when_found = False  # Enter came before the results: take the best one
        self._local_view: QWidget | None = None  # "On this machine", where there is one
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search the Hub or the catalog, or type a repo id…")
        self.query.setClearButtonEnabled(True)
        self.results_model = SearchResultsModel()
        self.results = QTableView()
        self.results.setModel(self.results_model)
        self.results.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.results.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.results.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.results.verticalHeader().hide()
        self.results.setShowGrid(False)
        self.results.setWordWrap(False)
        # Always in the layout at one height: results arriving then move no other panel, which
        # would re-lay out and repaint the whole side column while the user types.
        self.results.setFixedHeight(RESULTS_HEIGHT_PX)
        # A repo id too long for a narrow panel keeps what tells it from the other results
        # (``shorten_id``); the tooltip has the whole id.
        self.results.setItemDelegateForColumn(
            0, _DistinguishingElide(self.results_model.ids, self.results)
        )
        self.results.verticalHeader().setDefaultSectionSize(self.results.fontMetrics().height() + 6)
        header = self.results.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setStyleSheet(palette.WARNING_STYLE)
        self.status.hide()
        self.open_folder = QPushButton("Open folder…")
        self.open_file = QPushButton("Open file…")
        self.open_folder.setToolTip("A model folder with config.json (and .safetensors headers)")
        self.open_file.setToolTip("A .gguf, .safetensors or config.json file; or drop one here")
        self.recent = QComboBox()
        self.recent.setPlaceholderText("Recent models")
        self.recent.setToolTip("Models opened before")
        self.set_recent(recent)
        self._description = "No model yet."
        self.info = QLabel(self._description)
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        buttons = QHBoxLayout()
        buttons.addWidget(self.open_folder)
        buttons.addWidget(self.open_file)
        layout = self._column = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.query)
        layout.addWidget(self.status)
        layout.addWidget(self.results)
        layout.addLayout(buttons)
        layout.addWidget(self.recent)
        layout.addWidget(self.info)

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(SEARCH_DEBOUNCE_MS)
        self._debounce.timeout.connect(self._start_search)
        self.query.textEdited.connect(lambda _text: self._debounce.start())
        self.query.returnPressed.connect(self._return_pressed)
        self.results.clicked.connect(self._picked)
        self.results.activated.connect(self._picked)
        self.open_folder.clicked.connect(self._choose_folder)
        self.open_file.clicked.connect(self._choose_file)
        self.recent.activated.connect(lambda i: self.source_chosen.emit(self.recent.itemData(i)))

    def add_local_models(self, view: QWidget) -> None:
        """Show ``view`` ("On this machine") in the results' place while the search box is empty:
        the panel keeps its height, and typing a search brings the results back."""
        self.result_area = QStackedWidget()
        layout = self._column
        at = layout.indexOf(self.results)
        # At least as tall as the results alone, and any height the side column can spare: a
        # tall window lists more models. The layout sets it, so no list moves another panel.
        self.results.setMinimumHeight(RESULTS_HEIGHT_PX)
        self.results.setMaximumHeight(16777215)
        self.result_area.setMinimumHeight(RESULTS_HEIGHT_PX)
        self.result_area.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.result_area.addWidget(self.results)
        self.result_area.addWidget(view)
        layout.insertWidget(at, self.result_area, 1)
        self._local_view = view

        def follow(text: str) -> None:
            self.result_area.setCurrentWidget(self.results if text.strip() else view)

        self.query.textChanged.connect(follow)
        follow(self.query.text())

    def set_unit(self, unit: Unit) -> None:
        """Show the local models' sizes in GiB or GB."""
        set_view_unit = getattr(self._local_view, "set_unit", None)
        if callable(set_view_unit):
            set_view_unit(unit)

    @property
    def searching(self) -> bool:
        return self._pending is not None

    def set_recent(self, sources: Sequence[str]) -> None:
        """Fill the recent-models list (newest first)."""
        blocked = self.recent.blockSignals(True)
        self.recent.clear()
        for source in sources[:MAX_RECENT]:
            self.recent.addItem(
                Path(source).name if "/" in source and Path(source).exists() else source, source
            )
        self.recent.setCurrentIndex(-1)
        self.recent.setEnabled(bool(sources))
        self.recent.blockSignals(blocked)

    def show_model(self, spec: ModelSpec, where: str, notices: Sequence[str]) -> None:
        """Describe the current model under the search box."""
        facts = spec.facts
        parts = [
            f"<b>{spec.name}</b>",
            f"{parameters_text(spec)} · {facts.num_layers} layers · "
            f"context {facts.max_position_embeddings:,}",
            f"{spec.architecture or facts.model_type}"
            + (f" · stored as {spec.quantization}" if spec.quantization else ""),
        ]
        if facts.is_moe:
            parts.append(f"MoE: {facts.num_experts} experts, {facts.experts_per_token} per token")
        if where:
            parts.append(f"<span style='color:gray'>{where}</span>")
        parts.extend(f"<span style='color:#b26a00'>{n}</span>" for n in (*spec.warnings, *notices))
        self._description = "<br>".join(parts)
        self.info.setText(self._description)

    def show_loading(self, loading: bool) -> None:
        """Say a model is being read; the description keeps its height meanwhile, so that the
        panels below do not move (and repaint) twice for one model change."""
        self.info.setMinimumHeight(self.info.height() if loading else 0)
        # Done, loaded or not: the description is the current model's again (a new model's
        # replaces it when one arrives).
        self.info.setText("Reading the model…" if loading else self._description)
        self.open_folder.setEnabled(not loading)
        self.open_file.setEnabled(not loading)

    def _start_search(self) -> None:
        query = self.query.text().strip()
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if not query:
            self._shown_query = ""
            self.results_model.set_results(())
            return
        self._pending_query = query
        self._pending = submit(
            lambda: self._search(query),
            lambda outcome: self._show_results(query, outcome),
            self._search_failed,
        )

    def _show_results(self, query: str, outcome: Any) -> None:
        self._pending = None
        self._shown_query = query
        self.results_model.set_results(outcome.results)
        notice = as_sentence(outcome.offline_notice or "")
        if not outcome.results:
            notice = f"{notice} No models match.".lstrip()
        self.status.setText(notice)
        self.status.setVisible(bool(notice))
        if self._pick_when_found:
            self._pick_when_found = False
            if outcome.results:
                self._pick_best(query)
            elif _HUB_ID.match(query):
                # Not listed (a private repo, a search index behind): the Hub may still have it.
                self.source_chosen.emit(query)

    def _search_failed(self, exc: Exception) -> None:
        self._pending = None
        self._pick_when_found = False
        self.status.setText(f"Search failed: {exc}")
        self.status.show()

    def _return_pressed(self) -> None:
        """Enter opens what was typed: the best result of its search (searching first if its
        results are not listed yet), or a file or folder path."""
        text = self.query.text().strip()
        if not text:
            return
        if _is_path(text):
            self.source_chosen.emit(text)
        elif text == self._shown_query and not self.searching and self.results_model.rowCount():
            self._pick_best(text)
        else:
            self._pick_when_found = True
            self._debounce.stop()
            if not (self.searching and self._pending_query == text):
                self._start_search()

    def _pick_best(self, query: str) -> None:
        """The result named exactly as typed, else the first (the most downloaded)."""
        rows = range(self.results_model.rowCount())
        exact = [r for r in rows if self.results_model.result(r).id.lower() == query.lower()]
        self._picked(self.results_model.index(exact[0] if exact else 0, 0))

    def _picked(self, index: QModelIndex) -> None:
        if index.isValid():
            self.source_chosen.emit(self.results_model.result(index.row()).id)

    def _choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a model folder")
        if path:
            self.source_chosen.emit(path)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a model file", "", "Models (*.gguf *.safetensors *.json);;All files (*)"
        )
        if path:
            self.source_chosen.emit(path)
