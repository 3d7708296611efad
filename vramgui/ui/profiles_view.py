"""The Profiles tab: the saved setups, their actions, and the comparison of several.

The view works on a :class:`~vramgui.profiles.ProfileStore` and reads the current setup from the
window's :class:`~vramgui.ui.controller.EstimateController`. Every failure (a name taken, a
read-only folder, a model that cannot be loaded any more) becomes a message in the view, never a
dialog; files that cannot be read are listed greyed with the reason and no action touches them.

Saving makes a new profile; only Update replaces the open one, and it keeps the replaced version,
which Undo (or Versions…) brings back: nothing saved is lost by a click.

The tab shares the window's width with the side panels (about 520 pixels of a 1280-pixel
screen), so its actions sit in a tool bar that folds what does not fit into a menu, the list
hides its least needed columns before it cuts a figure, and the comparison stacks its chart
under its table when narrow.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QEvent,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QAction, QBrush, QColor, QFont, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from vramgui.answers.documents import saved_document
from vramgui.answers.estimate import estimate_setup
from vramgui.answers.rates import RatesFor
from vramgui.core.errors import VramguiError
from vramgui.core.units import Unit, format_bytes
from vramgui.core.workload import Workload
from vramgui.profiles import (
    NameTaken,
    OffloadSettings,
    Profile,
    ProfileError,
    ProfileListing,
    ProfileStore,
    TrashedProfile,
    source_of,
)
from vramgui.profiles.store import unique_name
from vramgui.ui import palette
from vramgui.ui.compare_view import (
    MAX_COMPARED,
    MIN_COMPARED,
    CompareView,
    reestimate,
)
from vramgui.ui.controller import EstimateController
from vramgui.ui.table_model import FlatTableModel
from vramgui.ui.wording import in_window
from vramgui.ui.workers import Worker, submit

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel

COLUMNS = ("Name", "Model", "Mode", "GPUs", "Saved total", "Modified")
NAME, MODEL, MODE, GPUS, TOTAL, MODIFIED = range(len(COLUMNS))
# When the list is narrow, these columns go first (their values stay in each row's tooltip);
# name, model and saved total always show, and a figure is never cut.
HIDE_FIRST = (GPUS, MODIFIED, MODE)
# What the name and model columns keep at least before a column is hidden.
MIN_TEXT_COLUMN = 110
# Column 0 answers this role with everything the search box matches against.
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 1
UNREADABLE_TEXT = "#8a8a8a"
INFO_STYLE = (
    "QLabel { background: #e8f1fb; color: #17324d; border: 1px solid #a9c7e8;"
    " border-radius: 4px; padding: 4px 6px; }"
)

_Index = QModelIndex | QPersistentModelIndex


def _untimed(_gpu: str, _dtype: str) -> None:
    return None


def profile_from_setup(
    name: str,
    loaded: ResolvedModel,
    workload: Workload,
    capacities: Sequence[tuple[str, int]],
    notes: str = "",
    *,
    rates: RatesFor = _untimed,
    offload: OffloadSettings | None = None,
) -> Profile:
    """A profile of the window's current setup, with its estimate as computed now, timed with
    ``rates``, its placement and host as ``answers.documents.saved_document`` saves it.

    A setup the core refuses (an invalid combination) is still saved, without an estimate.
    """
    try:
        document = saved_document(loaded, workload, list(capacities), rates=rates, offload=offload)
    except VramguiError:
        document = {}
    return Profile(
        name=name,
        model=loaded.ref,
        workload=workload,
        gpus=tuple(gpu for gpu, _ in capacities),
        notes=notes,
        saved_estimate=document,
        offload=offload,
    )


@dataclass(frozen=True, slots=True)
class Dialogs:
    """The questions the view asks; tests hand in scripted answers.

    Attributes:
        ask_name: (title, prompt, suggestion) -> a name, or None when cancelled.
        ask_text: (title, prompt, current text) -> a longer text, or None when cancelled.
        confirm: (title, question) -> whether the user agreed.
        open_path: (title) -> a file to read, or None.
        save_path: (title, suggested file name) -> a file to write, or None; the dialog itself
            asks before an existing file is replaced.
        choose: (title, prompt, items) -> the index of the chosen item, or None when cancelled.
    """

    ask_name: Callable[[str, str, str], str | None]
    ask_text: Callable[[str, str, str], str | None]
    confirm: Callable[[str, str], bool]
    open_path: Callable[[str], Path | None]
    save_path: Callable[[str, str], Path | None]
    choose: Callable[[str, str, Sequence[str]], int | None]


def qt_dialogs(parent: QWidget) -> Dialogs:
    """The standard Qt dialogs, centred on ``parent``."""

    def ask_name(title: str, prompt: str, suggestion: str) -> str | None:
        text, ok = QInputDialog.getText(
            parent, title, prompt, QLineEdit.EchoMode.Normal, suggestion
        )
        return text if ok else None

    def ask_text(title: str, prompt: str, current: str) -> str | None:
        text, ok = QInputDialog.getMultiLineText(parent, title, prompt, current)
        return text if ok else None

    def confirm(title: str, question: str) -> bool:
        answer = QMessageBox.question(parent, title, question)
        return answer == QMessageBox.StandardButton.Yes

    def open_path(title: str) -> Path | None:
        path, _ = QFileDialog.getOpenFileName(parent, title, "", "vramgui profiles (*.json)")
        return Path(path) if path else None

    def save_path(title: str, suggestion: str) -> Path | None:
        path, _ = QFileDialog.getSaveFileName(
            parent, title, suggestion, "vramgui profiles (*.json)"
        )
        return Path(path) if path else None

    def choose(title: str, prompt: str, items: Sequence[str]) -> int | None:
        item, ok = QInputDialog.getItem(parent, title, prompt, list(items), 0, False)
        return list(items).index(item) if ok and item in items else None

    return Dialogs(ask_name, ask_text, confirm, open_path, save_path, choose)


class ProfileListModel(FlatTableModel):
    """One row per profile file; unreadable files greyed and not selectable.

    Reset with :meth:`set_listings`.
    """

    COLUMNS = COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self._listings: list[ProfileListing] = []
        self._unit: Unit = "GiB"

    def set_listings(self, listings: Sequence[ProfileListing], unit: Unit) -> None:
        """Show ``listings`` (as ``ProfileStore.list`` returns them), sizes in ``unit``."""
        self.beginResetModel()
        self._listings = list(listings)
        self._unit = unit
        self.endResetModel()

    def listing(self, row: int) -> ProfileListing:
        return self._listings[row]

    def row_of(self, name: str) -> int | None:
        """The row of the readable profile ``name`` (case-insensitive), or None."""
        wanted = name.casefold()
        for row, item in enumerate(self._listings):
            if item.readable and item.name.casefold() == wanted:
                return row
        return None

    def row_total(self) -> int:
        return len(self._listings)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        if not self._listings[index.row()].readable:
            # Listed so that the user knows the file is there; never a target of an action.
            return Qt.ItemFlag.ItemIsEnabled
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        item = self._listings[index.row()]
        column = index.column()
        profile = item.profile
        error = in_window(item.error) if item.error is not None else ""
        if role == Qt.ItemDataRole.DisplayRole:
            if profile is None:
                return {NAME: item.name, MODEL: f"unreadable: {error}", TOTAL: "-"}.get(column, "")
            return self._cell(profile, column)
        if role == SEARCH_ROLE and column == NAME:
            if profile is None:
                return f"{item.name} {error}"
            return " ".join((profile.name, source_of(profile.model), profile.notes, *profile.gpus))
        if role == Qt.ItemDataRole.ToolTipRole:
            if profile is None:
                return (
                    f"{item.path.name} cannot be read: {error}.\n"
                    "It is left untouched on disk; fix or remove it by hand."
                )
            # Everything the row holds, for the columns a narrow list hides or cuts.
            lines = [profile.name, source_of(profile.model)]
            lines += [f"{COLUMNS[c]}: {self._cell(profile, c)}" for c in (MODE, GPUS, TOTAL)]
            lines.append(f"Modified: {self._cell(profile, MODIFIED)}")
            lines += [t for t in (profile.notes, str(item.path)) if t]
            return "\n".join(lines)
        if role == Qt.ItemDataRole.ForegroundRole and profile is None:
            return QBrush(QColor(UNREADABLE_TEXT))
        if role == Qt.ItemDataRole.FontRole and profile is None:
            font = QFont()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and column == TOTAL:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _cell(self, profile: Profile, column: int) -> str:
        if column == NAME:
            return profile.name
        if column == MODEL:
            return source_of(profile.model)
        if column == MODE:
            w = profile.workload
            return w.mode if w.mode == "inference" else f"training ({w.method})"
        if column == GPUS:
            return ", ".join(profile.gpus) or "-"
        if column == TOTAL:
            total = (profile.saved_estimate.get("per_gpu") or {}).get("total_bytes")
            return format_bytes(total, self._unit) if isinstance(total, int) else "-"
        return profile.modified.astimezone().strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True, slots=True)
class _Undo:
    """A change Undo takes back: its button text, and what it does.

    ``run`` returns the message to show and the profiles to select afterwards.
    """

    label: str
    run: Callable[[], tuple[str, list[str]]]


class ProfilesView(QWidget):
    """Saved profiles: list with search, save new / update with undo, versions, compare.

    Args:
        controller: the window's controller; the current setup is read from it and an opened
            profile's model and workload are applied to it.
        store: the profiles; by default the user's profile folder.
        load_model: source text -> ``ResolvedModel`` (may block; runs on a worker thread); by
            default ``vramgui.sources.resolve.load_model``.
        dialogs: the questions asked; by default Qt's standard dialogs.
        compare_view: the comparison pane; by default a new one (the window builds it in a
            turn of its own).

    Signals:
        profile_opened(Profile): a profile was opened and its model and workload applied; the
            window checks its GPUs (``profile.gpus``) in the GPU panel.
    """

    profile_opened = Signal(object)

    def __init__(
        self,
        controller: EstimateController,
        store: ProfileStore | None = None,
        load_model: Callable[[str], ResolvedModel] | None = None,
        dialogs: Dialogs | None = None,
        parent: QWidget | None = None,
        *,
        compare_view: CompareView | None = None,
    ) -> None:
        super().__init__(parent)
        if load_model is None:
            from vramgui.sources.resolve import load_model as resolve_load_model

            self._load_model: Callable[[str], ResolvedModel] = resolve_load_model
        else:
            self._load_model = load_model
        self.controller = controller
        self.store = store if store is not None else ProfileStore()
        self.dialogs = dialogs if dialogs is not None else qt_dialogs(self)
        self._unit: Unit = "GiB"
        self._current: str | None = None
        self._undo: list[_Undo] = []
        self._opening: Worker | None = None
        self._comparing: Worker | None = None

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search profiles: name, model, notes, GPU")
        self.search.setClearButtonEnabled(True)
        self.list_model = ProfileListModel()
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.list_model)
        self.proxy.setFilterKeyColumn(NAME)
        self.proxy.setFilterRole(SEARCH_ROLE)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(MODEL, QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        self._fitter = _ColumnFitter(self)
        # The viewport's own resize: when the table's arrives, the viewport is not resized yet.
        self.table.viewport().installEventFilter(self._fitter)

        self.save_new_action = _action(
            self, "Save new…", "Save the current setup as a new profile (Ctrl+S)"
        )
        self.update_action = _action(self, "Update", "")
        self.open_action = _action(
            self, "Open", "Apply the selected profile to the window (Enter)", "Return", "Enter"
        )
        self.compare_action = _action(
            self, "Compare", f"Lay {MIN_COMPARED} to {MAX_COMPARED} selected profiles side by side"
        )
        self.rename_action = _action(self, "Rename…", "Rename the selected profile (F2)", "F2")
        self.duplicate_action = _action(self, "Duplicate", "Save a copy of the selected profile")
        self.notes_action = _action(self, "Notes…", "Edit the notes of the selected profile")
        self.versions_action = _action(
            self, "Versions…", "Bring back an earlier version of the selected profile"
        )
        self.delete_action = _action(
            self,
            "Delete",
            "Move the selected profiles to the trash (Del)",
            QKeySequence.StandardKey.Delete,
        )
        self.import_action = _action(self, "Import…", "Add the profiles of an exported file")
        self.export_action = _action(
            self, "Export…", "Write the selected profiles (all if none is selected) to one file"
        )
        self.toolbar = QToolBar()
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.toolbar.setMovable(False)
        self.toolbar.setFloatable(False)
        # In this order, so that the folding menu takes the least used ones first.
        for group in (
            (self.save_new_action, self.update_action),
            (self.open_action, self.compare_action),
            (
                self.rename_action,
                self.duplicate_action,
                self.notes_action,
                self.versions_action,
                self.delete_action,
            ),
            (self.import_action, self.export_action),
        ):
            if self.toolbar.actions():
                self.toolbar.addSeparator()
            self.toolbar.addActions(list(group))
        # The row's own menu: what acts on the selection.
        for action in (
            self.open_action,
            self.compare_action,
            self.rename_action,
            self.duplicate_action,
            self.notes_action,
            self.versions_action,
            self.delete_action,
            self.export_action,
        ):
            self.table.addAction(action)

        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.hide()
        self.undo_button = QPushButton("Undo")
        self.undo_button.setToolTip("Take back the last change (Ctrl+Z)")
        self.undo_button.hide()
        self.undo_action = _action(self, "Undo", "", QKeySequence.StandardKey.Undo)
        self.undo_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.addAction(self.undo_action)
        self.opening = QProgressBar()
        self.opening.setRange(0, 0)  # busy: no known end
        self.opening.setTextVisible(False)
        self.opening.setMaximumWidth(120)
        self.opening.hide()
        self.compare_view = compare_view if compare_view is not None else CompareView()

        self._build_layout()
        self._connect()
        self.refresh()
        self._update_actions()

    # ----------------------------------------------------------------------------- layout
    def _build_layout(self) -> None:
        message_row = QHBoxLayout()
        message_row.addWidget(self.opening)
        message_row.addWidget(self.message, 1)
        message_row.addWidget(self.undo_button, 0, Qt.AlignmentFlag.AlignTop)

        top = QWidget()
        column = QVBoxLayout(top)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.search)
        column.addWidget(self.toolbar)
        column.addLayout(message_row)
        column.addWidget(self.table, 1)

        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(top)
        self.split.addWidget(self.compare_view)
        self.split.setChildrenCollapsible(False)
        self.split.setSizes([260, 600])
        layout = QVBoxLayout(self)
        layout.addWidget(self.split)

    def _connect(self) -> None:
        self.search.textChanged.connect(self.proxy.setFilterFixedString)
        self.table.selectionModel().selectionChanged.connect(self._update_actions)
        # Double-click or Enter opens; not ``activated``, which some desktops emit on one click.
        self.table.doubleClicked.connect(lambda _index: self.open_selected())
        for action, slot in (
            (self.save_new_action, self.save_as),
            (self.update_action, self.update_current),
            (self.open_action, self.open_selected),
            (self.compare_action, self.compare_selected),
            (self.rename_action, self.rename_selected),
            (self.duplicate_action, self.duplicate_selected),
            (self.notes_action, self.edit_notes),
            (self.versions_action, self.versions_selected),
            (self.delete_action, self.delete_selected),
            (self.import_action, self.import_file),
            (self.export_action, self.export_file),
            (self.undo_action, self.undo),
        ):
            action.triggered.connect(slot)
        self.undo_button.clicked.connect(self.undo)
        self.controller.model_changed.connect(lambda _loaded: self._update_actions())
        self.controller.loading_changed.connect(self._controller_loading)

    def fit_columns(self) -> None:
        """Size the list's columns to the list's width (see ``HIDE_FIRST``)."""
        header = self.table.horizontalHeader()
        available = self.table.viewport().width()
        wanted = {
            c: max(self.table.sizeHintForColumn(c), header.sectionSizeHint(c))
            for c in range(len(COLUMNS))
        }
        shown = [MODE, GPUS, TOTAL, MODIFIED]
        for column in HIDE_FIRST:
            if sum(wanted[c] for c in shown) + 2 * MIN_TEXT_COLUMN <= available:
                break
            shown.remove(column)
        for column in (MODE, GPUS, MODIFIED):
            header.setSectionHidden(column, column not in shown)
        room = available - sum(wanted[c] for c in shown)
        header.resizeSection(MODEL, min(wanted[MODEL], max(MIN_TEXT_COLUMN, room // 2)))

    # ----------------------------------------------------------------------------- state
    def set_unit(self, unit: Unit) -> None:
        """Show sizes in GiB or GB."""
        if unit == self._unit:
            return
        self._unit = unit
        self.compare_view.set_unit(unit)
        self.refresh()

    @property
    def current_profile(self) -> str | None:
        """The name of the profile last opened or saved (Update writes to it)."""
        return self._current

    def refresh(self) -> None:
        """Read the profile folder again, keeping the selection."""
        selected = [p.name for p in self.selected_profiles()]
        try:
            listings = self.store.list()
        except ProfileError as exc:
            self.show_message(str(exc), error=True)
            listings = []
        self.list_model.set_listings(listings, self._unit)
        self.select(selected)
        self.fit_columns()

    def select(self, names: Sequence[str]) -> None:
        """Select the readable profiles named ``names`` (others are ignored)."""
        selection = QItemSelection()
        for name in names:
            row = self.list_model.row_of(name)
            if row is None:
                continue
            index = self.proxy.mapFromSource(self.list_model.index(row, 0))
            if index.isValid():
                selection.select(index, index.siblingAtColumn(len(COLUMNS) - 1))
        self.table.selectionModel().select(
            selection, QItemSelectionModel.SelectionFlag.ClearAndSelect
        )
        self._update_actions()

    def selected_profiles(self) -> list[Profile]:
        """The selected readable profiles, in list order."""
        rows = sorted(
            self.proxy.mapToSource(index).row()
            for index in self.table.selectionModel().selectedRows()
        )
        profiles = [self.list_model.listing(row).profile for row in rows]
        return [p for p in profiles if p is not None]

    def show_message(self, text: str, error: bool = False) -> None:
        """Show ``text`` above the list (errors in red)."""
        self.message.setStyleSheet(palette.ERROR_STYLE if error else INFO_STYLE)
        self.message.setText(text)
        self.message.show()

    def _open_profile_exists(self) -> bool:
        # As listed: the list is read again whenever the tab shows and after every change.
        return self._current is not None and self.list_model.row_of(self._current) is not None

    def _update_actions(self) -> None:
        count = len(self.selected_profiles())
        has_model = self.controller.model is not None
        self.save_new_action.setEnabled(has_model)
        updatable = has_model and self._open_profile_exists()
        self.update_action.setEnabled(updatable)
        self.update_action.setToolTip(
            f"Replace {self._current!r} with the current setup; its previous version is kept "
            "(Undo or Versions… brings it back)"
            if updatable
            else "Open or save a profile first: Update replaces it with the current setup"
        )
        self.open_action.setEnabled(count == 1)
        self.rename_action.setEnabled(count == 1)
        self.duplicate_action.setEnabled(count == 1)
        self.notes_action.setEnabled(count == 1)
        self.versions_action.setEnabled(count == 1)
        self.delete_action.setEnabled(count >= 1)
        self.compare_action.setEnabled(MIN_COMPARED <= count <= MAX_COMPARED)
        self.undo_action.setEnabled(bool(self._undo))
        self.undo_button.setVisible(bool(self._undo))
        if self._undo:
            self.undo_button.setText(self._undo[-1].label)

    # ----------------------------------------------------------------------------- saving
    def save_current(self) -> None:
        """File > Save profile: save the current setup as a new profile (asks its name)."""
        self.save_as()

    def save_as(self) -> None:
        """Ask a name and save the current setup under it as a new profile.

        A name that is taken replaces that profile only once confirmed, and keeps its
        previous version.
        """
        loaded = self.controller.model
        if loaded is None:
            self.show_message("Load a model before saving a profile.", error=True)
            return
        taken = {n.casefold() for n in self._readable_names()}
        base = self._current or f"{loaded.spec.name.split('/')[-1]} {self.controller.workload.mode}"
        suggestion = unique_name(base, taken)
        name = self.dialogs.ask_name("Save profile", "Name of the new profile:", suggestion)
        if name is None:
            return
        clean = name.strip()
        update = clean.casefold() in taken
        if update and not self.dialogs.confirm(
            "Replace profile?",
            f"A profile named {clean!r} exists. Replace it with the current setup?\n"
            "Its previous version is kept: Undo or Versions… brings it back.",
        ):
            return
        self._save(clean, update=update)

    def update_current(self) -> None:
        """Replace the open profile with the current setup, keeping its previous version."""
        if self._current is None or not self._open_profile_exists():
            self.show_message("Open or save a profile first; Update replaces it.", error=True)
            return
        self._save(self._current, update=True)

    def _save(self, name: str, update: bool) -> None:
        loaded = self.controller.model
        if loaded is None:
            self.show_message("Load a model before saving a profile.", error=True)
            return
        try:
            previous = self.store.find(name) if update else None
            profile = profile_from_setup(
                name,
                loaded,
                self.controller.workload,
                self.controller.capacities,
                previous.notes if previous is not None else "",
                rates=self.controller.rates_for,
                offload=self.controller.offload,
            )
            saved = self.store.save(profile, update=update)
        except NameTaken as exc:
            self.show_message(f"Not saved: {exc}; choose another name.", error=True)
            return
        except ProfileError as exc:
            self.show_message(f"Not saved: {exc}", error=True)
            return
        self._current = saved.name
        if previous is not None:
            self._push_restore_previous(saved.name)
        self.refresh()
        self.select([saved.name])
        if previous is None:
            self.show_message(f"Saved profile {saved.name!r}.")
        else:
            self.show_message(f"Updated {saved.name!r}; its previous version is kept.")

    def _push_restore_previous(self, name: str) -> None:
        """Make Undo bring back the version of ``name`` that a change just kept."""
        versions = self.store.versions(name)
        if not versions:
            return
        kept = versions[0]

        def restore() -> tuple[str, list[str]]:
            restored = self.store.restore_version(kept)
            return f"Restored the previous version of {restored.name!r}.", [restored.name]

        self._undo.append(_Undo("Restore previous version", restore))

    # ----------------------------------------------------------------------------- opening
    @property
    def is_opening(self) -> bool:
        """Whether a profile's model is being loaded (the busy bar shows meanwhile)."""
        return self._opening is not None

    def open_selected(self) -> None:
        """Load the selected profile's model and estimate it off the GUI thread, then apply it.

        Opening another profile (or loading another model in the window) meanwhile wins: the
        earlier one is dropped when it arrives.
        """
        profiles = self.selected_profiles()
        if len(profiles) != 1:
            return
        profile = profiles[0]
        source = source_of(profile.model)
        self._cancel_opening()
        load, capacities = self._load_model, self.controller.capacities
        self.show_message(f"Opening {profile.name!r}: loading {source}…")
        self.opening.show()
        self._opening = submit(
            lambda: _load_and_estimate(load, source, profile.workload, capacities),
            lambda loaded: self._opened(profile, source, loaded),
            lambda exc: self._open_failed(profile, exc),
        )

    def _cancel_opening(self) -> None:
        if self._opening is not None:
            self._opening.cancel()
            self._opening = None
        self.opening.hide()

    def _controller_loading(self, loading: bool) -> None:
        # A model picked in the window after the click on Open is the later choice.
        if loading and self._opening is not None:
            self._cancel_opening()
            self.show_message("Opening the profile was dropped: another model is loading.")

    def _opened(self, profile: Profile, source: str, loaded: ResolvedModel) -> None:
        self._opening = None
        self.opening.hide()
        self.controller.set_workload(profile.workload)
        self.controller.set_offload(profile.offload)
        self.controller.set_model(loaded, source)
        self._current = profile.name
        self._update_actions()
        self.profile_opened.emit(profile)
        self.show_message(
            f"Opened profile {profile.name!r}. Update writes the current setup to it (keeping "
            "this version); Save new… makes another."
        )

    def _open_failed(self, profile: Profile, exc: Exception) -> None:
        self._opening = None
        self.opening.hide()
        reason = in_window(exc) if isinstance(exc, VramguiError) else f"{type(exc).__name__}: {exc}"
        self.show_message(
            f"Cannot open {profile.name!r}: its model cannot be loaded ({reason}). "
            "The profile is kept as it was.",
            error=True,
        )

    # ----------------------------------------------------------------------------- editing
    def rename_selected(self) -> None:
        """Ask a new name for the selected profile."""
        profiles = self.selected_profiles()
        if len(profiles) != 1:
            return
        old = profiles[0].name
        new = self.dialogs.ask_name("Rename profile", f"New name for {old!r}:", old)
        if new is None or new.strip() == old:
            return
        try:
            renamed = self.store.rename(old, new)
        except ProfileError as exc:
            self.show_message(f"Not renamed: {exc}", error=True)
            return
        if self._current is not None and self._current.casefold() == old.casefold():
            self._current = renamed.name
        self.refresh()
        self.select([renamed.name])
        self.show_message(f"Renamed {old!r} to {renamed.name!r}.")

    def duplicate_selected(self) -> None:
        """Save a copy of the selected profile."""
        profiles = self.selected_profiles()
        if len(profiles) != 1:
            return
        try:
            copy = self.store.duplicate(profiles[0].name)
        except ProfileError as exc:
            self.show_message(f"Not duplicated: {exc}", error=True)
            return
        self.refresh()
        self.select([copy.name])
        self.show_message(f"Saved a copy as {copy.name!r}.")

    def edit_notes(self) -> None:
        """Edit the notes of the selected profile (the previous version is kept)."""
        profiles = self.selected_profiles()
        if len(profiles) != 1:
            return
        profile = profiles[0]
        notes = self.dialogs.ask_text(
            "Profile notes", f"Notes for {profile.name!r}:", profile.notes
        )
        if notes is None or notes == profile.notes:
            return
        try:
            self.store.save(dataclasses.replace(profile, notes=notes), update=True)
        except ProfileError as exc:
            self.show_message(f"Notes not saved: {exc}", error=True)
            return
        self._push_restore_previous(profile.name)
        self.refresh()
        self.show_message(f"Saved the notes of {profile.name!r}.")

    def versions_selected(self) -> None:
        """Offer the kept versions of the selected profile and bring back the one chosen."""
        profiles = self.selected_profiles()
        if len(profiles) != 1:
            return
        name = profiles[0].name
        try:
            versions = [v for v in self.store.versions(name) if v.profile is not None]
        except ProfileError as exc:
            self.show_message(str(exc), error=True)
            return
        if not versions:
            self.show_message(f"No earlier version of {name!r} is kept yet: each Update keeps one.")
            return
        items = [self._version_text(v.profile) for v in versions if v.profile is not None]
        chosen = self.dialogs.choose(
            "Versions", f"Bring back a version of {name!r} (the current one is kept):", items
        )
        if chosen is None:
            return
        try:
            restored = self.store.restore_version(versions[chosen])
        except ProfileError as exc:
            self.show_message(f"Not restored: {exc}", error=True)
            return
        self._push_restore_previous(restored.name)
        self.refresh()
        self.select([restored.name])
        self.show_message(f"Brought back {restored.name!r} as saved on {items[chosen]}.")

    def _version_text(self, profile: Profile) -> str:
        w = profile.workload
        total = (profile.saved_estimate.get("per_gpu") or {}).get("total_bytes")
        size = format_bytes(total, self._unit) if isinstance(total, int) else "no estimate"
        when = profile.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        return (
            f"{when} · {source_of(profile.model)} · {w.mode}, batch {w.batch}, seq {w.seq} · {size}"
        )

    def delete_selected(self) -> None:
        """Move the selected profiles to the trash; Undo brings them back."""
        profiles = self.selected_profiles()
        if not profiles:
            return
        trashed: list[TrashedProfile] = []
        failure = None
        for profile in profiles:
            try:
                trashed.append(self.store.delete(profile.name))
            except ProfileError as exc:
                failure = f"Not deleted: {exc}"
                break
        if trashed:
            self._undo.append(_Undo("Undo delete", lambda: self._restore_trashed(trashed)))
        self.refresh()
        if failure:
            self.show_message(failure, error=True)
        elif trashed:
            names = ", ".join(repr(t.name) for t in trashed)
            self.show_message(f"Deleted {names}. Undo brings it back.")
        self._update_actions()

    def _restore_trashed(self, batch: list[TrashedProfile]) -> tuple[str, list[str]]:
        restored, failures = [], []
        for trashed in batch:
            try:
                restored.append(self.store.restore(trashed).name)
            except ProfileError as exc:
                failures.append(str(exc))
        if failures:
            raise ProfileError("; ".join(failures))
        return f"Restored {', '.join(repr(n) for n in restored)}.", restored

    def undo(self) -> None:
        """Take back the last delete or update."""
        if not self._undo:
            return
        step = self._undo.pop()
        selected = [p.name for p in self.selected_profiles()]
        try:
            message, selected = step.run()
            error = False
        except ProfileError as exc:
            message, error = str(exc), True
        self.refresh()
        self.select(selected)
        self.show_message(message, error=error)
        self._update_actions()

    # ----------------------------------------------------------------------------- comparing
    def compare_selected(self) -> None:
        """Re-estimate the selected profiles off the GUI thread and lay them side by side."""
        profiles = self.selected_profiles()
        if not MIN_COMPARED <= len(profiles) <= MAX_COMPARED:
            self.show_message(
                f"Select {MIN_COMPARED} to {MAX_COMPARED} profiles to compare.", error=True
            )
            return
        if self._comparing is not None:
            self._comparing.cancel()
        load = self._load_model
        self.compare_view.clear(f"Re-estimating {len(profiles)} profiles…")
        self._comparing = submit(
            lambda: [reestimate(p, load) for p in profiles],
            self._compared,
            self._compare_failed,
        )

    def _compared(self, results: list[Any]) -> None:
        self._comparing = None
        self.compare_view.show_results(results)

    def _compare_failed(self, exc: Exception) -> None:
        self._comparing = None
        self.compare_view.clear("No comparison.")
        self.show_message(f"Could not compare: {type(exc).__name__}: {exc}", error=True)

    # ----------------------------------------------------------------------------- files
    def import_file(self) -> None:
        """Ask for an exported file and add its profiles (taken names get a number)."""
        path = self.dialogs.open_path("Import profiles")
        if path is None:
            return
        try:
            names = self.store.import_(path)
        except ProfileError as exc:
            self.show_message(f"Nothing imported: {exc}", error=True)
            return
        self.refresh()
        self.select(names)
        self.show_message(f"Imported {len(names)} profile(s): {', '.join(names)}.")

    def export_file(self) -> None:
        """Write the selected profiles (all when none is selected) to a file a colleague can open."""
        names = [p.name for p in self.selected_profiles()]
        suggestion = "vramgui-profiles.json" if len(names) != 1 else f"{names[0]}.json"
        path = self.dialogs.save_path("Export profiles", suggestion)
        if path is None:
            return
        try:
            # The file dialog asked before an existing file is replaced.
            exported = self.store.export(names, path, replace=True)
        except ProfileError as exc:
            self.show_message(f"Not exported: {exc}", error=True)
            return
        self.show_message(f"Exported {len(exported)} profile(s) to {path}.")

    def _readable_names(self) -> list[str]:
        try:
            return self.store.names()
        except ProfileError:
            return []

    def showEvent(self, event: QShowEvent) -> None:
        # Profiles saved meanwhile from the command line appear when the tab is shown.
        self.refresh()
        super().showEvent(event)


class _ColumnFitter(QObject):
    """Refits the list's columns whenever the list changes size."""

    def __init__(self, view: ProfilesView) -> None:
        super().__init__(view)
        self._view = view

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self._view.fit_columns()
        return False


def _load_and_estimate(
    load_model: Callable[[str], ResolvedModel],
    source: str,
    workload: Workload,
    capacities: Sequence[tuple[str, int]],
) -> ResolvedModel:
    """Load a profile's model and estimate its setup once (on a worker thread).

    The estimate itself is dropped: it fills the model's memoized sizes, so that the window's own
    estimate of the same setup, on the GUI thread, only adds them up. A setup the core refuses is
    reported by the window's estimate.
    """
    loaded = load_model(source)
    with contextlib.suppress(VramguiError):
        estimate_setup(loaded.spec, workload, capacities[:1], gpu_name="")
    return loaded


def _action(
    parent: QWidget, text: str, tooltip: str, *keys: str | QKeySequence.StandardKey
) -> QAction:
    action = QAction(text, parent)
    action.setToolTip(tooltip)
    if keys:
        action.setShortcuts([QKeySequence(k) for k in keys])
        # Keys act where the list has focus, not in the search box or the rest of the window.
        action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
    return action
