"""The Profiles tab: the saved setups, their actions, and the comparison of several.

The view works on a :class:`~vramgui.profiles.ProfileStore` and reads the current setup from the
window's :class:`~vramgui.ui.controller.EstimateController`. Every failure (a name taken, a
read-only folder, a model that cannot be loaded any more) becomes a message in the view; files
that cannot be read are listed greyed with the reason and no action touches them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QBrush, QColor, QFont, QKeySequence, QShortcut, QShowEvent
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
    QVBoxLayout,
    QWidget,
)

from vramgui.core.errors import VramguiError
from vramgui.core.estimate import estimate
from vramgui.core.fit import fit_rows
from vramgui.core.report import estimate_document
from vramgui.core.units import Unit, format_bytes
from vramgui.core.workload import Workload
from vramgui.profiles import (
    Profile,
    ProfileError,
    ProfileListing,
    ProfileStore,
    TrashedProfile,
    source_of,
)
from vramgui.ui import palette
from vramgui.ui.compare_view import (
    MAX_COMPARED,
    MIN_COMPARED,
    CompareView,
    Reestimate,
    reestimate,
)
from vramgui.ui.controller import EstimateController, LoadedModel
from vramgui.ui.workers import Worker, submit

COLUMNS = ("Name", "Model", "Mode", "GPUs", "Saved total", "Modified")
# Column 0 answers this role with everything the search box matches against.
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 1
UNREADABLE_TEXT = "#8a8a8a"
INFO_STYLE = (
    "QLabel { background: #e8f1fb; color: #17324d; border: 1px solid #a9c7e8;"
    " border-radius: 4px; padding: 4px 6px; }"
)

_Index = QModelIndex | QPersistentModelIndex


def profile_from_setup(
    name: str,
    loaded: LoadedModel,
    workload: Workload,
    capacities: Sequence[tuple[str, int]],
    notes: str = "",
) -> Profile:
    """A profile of the window's current setup, with its estimate as computed now.

    A setup the core refuses (an invalid combination) is still saved, without an estimate.
    """
    try:
        est = estimate(loaded.spec, workload, capacities[0][1] if capacities else None)
        document = estimate_document(loaded.spec, est, fit_rows(est, capacities))
        document["source"] = loaded.ref.to_dict()
    except VramguiError:
        document = {}
    return Profile(
        name=name,
        model=loaded.ref,
        workload=workload,
        gpus=tuple(gpu for gpu, _ in capacities),
        notes=notes,
        saved_estimate=document,
    )


@dataclass(frozen=True, slots=True)
class Dialogs:
    """The questions the view asks; tests hand in scripted answers.

    Attributes:
        ask_name: (title, prompt, suggestion) -> a name, or None when cancelled.
        ask_text: (title, prompt, current text) -> a longer text, or None when cancelled.
        confirm: (title, question) -> whether the user agreed.
        open_path: (title) -> a file to read, or None.
        save_path: (title, suggested file name) -> a file to write, or None.
    """

    ask_name: Callable[[str, str, str], str | None]
    ask_text: Callable[[str, str, str], str | None]
    confirm: Callable[[str, str], bool]
    open_path: Callable[[str], Path | None]
    save_path: Callable[[str, str], Path | None]


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

    return Dialogs(ask_name, ask_text, confirm, open_path, save_path)


class ProfileListModel(QAbstractTableModel):
    """One row per profile file; unreadable files greyed and not selectable.

    Reset with :meth:`set_listings`.
    """

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

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._listings)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(COLUMNS)

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
        if role == Qt.ItemDataRole.DisplayRole:
            if profile is None:
                return {0: item.name, 1: f"unreadable: {item.error}", 4: "-"}.get(column, "")
            return self._cell(profile, column)
        if role == SEARCH_ROLE and column == 0:
            if profile is None:
                return f"{item.name} {item.error}"
            return " ".join((profile.name, source_of(profile.model), profile.notes, *profile.gpus))
        if role == Qt.ItemDataRole.ToolTipRole:
            if profile is None:
                return (
                    f"{item.path.name} cannot be read: {item.error}.\n"
                    "It is left untouched on disk; fix or remove it by hand."
                )
            return "\n".join(t for t in (profile.notes, str(item.path)) if t)
        if role == Qt.ItemDataRole.ForegroundRole and profile is None:
            return QBrush(QColor(UNREADABLE_TEXT))
        if role == Qt.ItemDataRole.FontRole and profile is None:
            font = QFont()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and column == 4:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _cell(self, profile: Profile, column: int) -> str:
        if column == 0:
            return profile.name
        if column == 1:
            return source_of(profile.model)
        if column == 2:
            w = profile.workload
            return w.mode if w.mode == "inference" else f"training ({w.method})"
        if column == 3:
            return ", ".join(profile.gpus) or "-"
        if column == 4:
            total = profile.saved_estimate.get("per_gpu", {}).get("total_bytes")
            return format_bytes(total, self._unit) if isinstance(total, int) else "-"
        return profile.modified.astimezone().strftime("%Y-%m-%d %H:%M")


class ProfilesView(QWidget):
    """Saved profiles: list with search, save / rename / duplicate / delete with undo, compare.

    Args:
        controller: the window's controller; the current setup is read from it and an opened
            profile's model and workload are applied to it.
        store: the profiles; by default the user's profile folder.
        load_model: source text -> ``LoadedModel`` (may block; runs on a worker thread); by
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
        load_model: Callable[[str], LoadedModel] | None = None,
        dialogs: Dialogs | None = None,
        parent: QWidget | None = None,
        *,
        compare_view: CompareView | None = None,
    ) -> None:
        super().__init__(parent)
        if load_model is None:
            from vramgui.sources.resolve import load_model as resolve_load_model

            load_model = resolve_load_model
        self.controller = controller
        self.store = store if store is not None else ProfileStore()
        self._load_model = load_model
        self.dialogs = dialogs if dialogs is not None else qt_dialogs(self)
        self._unit: Unit = "GiB"
        self._current: str | None = None
        self._undo: list[list[TrashedProfile]] = []
        self._opening: Worker | None = None
        self._comparing: Worker | None = None

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search profiles: name, model, notes, GPU")
        self.search.setClearButtonEnabled(True)
        self.list_model = ProfileListModel()
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.list_model)
        self.proxy.setFilterKeyColumn(0)
        self.proxy.setFilterRole(SEARCH_ROLE)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)

        self.save_button = _button("Save", "Save the current setup in the open profile (Ctrl+S)")
        self.save_as_button = _button("Save as…", "Save the current setup under a new name")
        self.open_button = _button("Open", "Apply the selected profile to the window (Enter)")
        self.rename_button = _button("Rename…", "Rename the selected profile (F2)")
        self.duplicate_button = _button("Duplicate", "Save a copy of the selected profile")
        self.notes_button = _button("Notes…", "Edit the notes of the selected profile")
        self.delete_button = _button("Delete", "Move the selected profiles to the trash (Del)")
        self.compare_button = _button(
            "Compare", f"Lay {MIN_COMPARED} to {MAX_COMPARED} selected profiles side by side"
        )
        self.import_button = _button("Import…", "Add the profiles of an exported file")
        self.export_button = _button(
            "Export…", "Write the selected profiles (all if none is selected) to one file"
        )
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.hide()
        self.undo_button = _button("Undo delete", "Bring back the profiles just deleted (Ctrl+Z)")
        self.undo_button.hide()
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
        actions = QHBoxLayout()
        for button in (
            self.save_button,
            self.save_as_button,
            self.open_button,
            self.rename_button,
            self.duplicate_button,
            self.notes_button,
            self.delete_button,
        ):
            actions.addWidget(button)
        actions.addSpacing(12)
        actions.addWidget(self.compare_button)
        actions.addStretch(1)
        actions.addWidget(self.import_button)
        actions.addWidget(self.export_button)
        message_row = QHBoxLayout()
        message_row.addWidget(self.opening)
        message_row.addWidget(self.message, 1)
        message_row.addWidget(self.undo_button)

        top = QWidget()
        column = QVBoxLayout(top)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.search)
        column.addLayout(actions)
        column.addLayout(message_row)
        column.addWidget(self.table, 1)

        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(top)
        self.split.addWidget(self.compare_view)
        self.split.setSizes([220, 600])
        layout = QVBoxLayout(self)
        layout.addWidget(self.split)

    def _connect(self) -> None:
        self.search.textChanged.connect(self.proxy.setFilterFixedString)
        self.table.selectionModel().selectionChanged.connect(self._update_actions)
        # Double-click or Enter opens; not ``activated``, which some desktops emit on one click.
        self.table.doubleClicked.connect(lambda _index: self.open_selected())
        self.save_button.clicked.connect(self.save_current)
        self.save_as_button.clicked.connect(self.save_as)
        self.open_button.clicked.connect(self.open_selected)
        self.rename_button.clicked.connect(self.rename_selected)
        self.duplicate_button.clicked.connect(self.duplicate_selected)
        self.notes_button.clicked.connect(self.edit_notes)
        self.delete_button.clicked.connect(self.delete_selected)
        self.undo_button.clicked.connect(self.undo_delete)
        self.compare_button.clicked.connect(self.compare_selected)
        self.import_button.clicked.connect(self.import_file)
        self.export_button.clicked.connect(self.export_file)
        self.controller.model_changed.connect(lambda _loaded: self._update_actions())
        self.controller.loading_changed.connect(self._controller_loading)
        for keys, slot, widget, context in (
            (QKeySequence.StandardKey.Delete, self.delete_selected, self.table, "widget"),
            (QKeySequence(Qt.Key.Key_F2), self.rename_selected, self.table, "widget"),
            (QKeySequence(Qt.Key.Key_Return), self.open_selected, self.table, "widget"),
            (QKeySequence(Qt.Key.Key_Enter), self.open_selected, self.table, "widget"),
            (QKeySequence.StandardKey.Undo, self.undo_delete, self, "children"),
        ):
            shortcut = QShortcut(QKeySequence(keys), widget)
            shortcut.setContext(
                Qt.ShortcutContext.WidgetShortcut
                if context == "widget"
                else Qt.ShortcutContext.WidgetWithChildrenShortcut
            )
            shortcut.activated.connect(slot)

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
        """The name of the profile last opened or saved ("Save" writes to it)."""
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

    def _update_actions(self) -> None:
        count = len(self.selected_profiles())
        has_model = self.controller.model is not None
        self.save_button.setEnabled(has_model)
        self.save_as_button.setEnabled(has_model)
        self.open_button.setEnabled(count == 1)
        self.rename_button.setEnabled(count == 1)
        self.duplicate_button.setEnabled(count == 1)
        self.notes_button.setEnabled(count == 1)
        self.delete_button.setEnabled(count >= 1)
        self.compare_button.setEnabled(MIN_COMPARED <= count <= MAX_COMPARED)
        self.undo_button.setVisible(bool(self._undo))
        self.save_button.setToolTip(
            f"Save the current setup in {self._current!r} (Ctrl+S)"
            if self._current
            else "Save the current setup under a new name (Ctrl+S)"
        )

    # ----------------------------------------------------------------------------- actions
    def save_current(self) -> None:
        """Save the current setup in the open profile, or ask a name when none is open."""
        current = self._current
        if current is None or current.casefold() not in {
            n.casefold() for n in self._readable_names()
        }:
            self.save_as()
            return
        self._save(current, overwrite=True)

    def save_as(self) -> None:
        """Ask a name and save the current setup under it (replacing a profile only if confirmed)."""
        loaded = self.controller.model
        if loaded is None:
            self.show_message("Load a model before saving a profile.", error=True)
            return
        suggestion = f"{loaded.spec.name.split('/')[-1]} {self.controller.workload.mode}"
        name = self.dialogs.ask_name("Save profile", "Profile name:", suggestion)
        if name is None:
            return
        clean = name.strip()
        taken = clean.casefold() in {n.casefold() for n in self._readable_names()}
        if taken and not self.dialogs.confirm(
            "Replace profile?", f"A profile named {clean!r} exists. Replace it with this setup?"
        ):
            return
        self._save(clean, overwrite=taken)

    def _save(self, name: str, overwrite: bool) -> None:
        loaded = self.controller.model
        if loaded is None:
            self.show_message("Load a model before saving a profile.", error=True)
            return
        try:
            notes = self.store.get(name).notes if overwrite else ""
            profile = profile_from_setup(
                name, loaded, self.controller.workload, self.controller.capacities, notes
            )
            saved = self.store.save(profile, overwrite=overwrite)
        except ProfileError as exc:
            self.show_message(f"Not saved: {exc}", error=True)
            return
        self._current = saved.name
        self.refresh()
        self.select([saved.name])
        self.show_message(f"Saved profile {saved.name!r}.")

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

    def _opened(self, profile: Profile, source: str, loaded: LoadedModel) -> None:
        self._opening = None
        self.opening.hide()
        self.controller.set_workload(profile.workload)
        self.controller.set_model(loaded, source)
        self._current = profile.name
        self.profile_opened.emit(profile)
        self.show_message(f"Opened profile {profile.name!r}; Save writes to it.")

    def _open_failed(self, profile: Profile, exc: Exception) -> None:
        self._opening = None
        self.opening.hide()
        reason = str(exc) if isinstance(exc, VramguiError) else f"{type(exc).__name__}: {exc}"
        self.show_message(
            f"Cannot open {profile.name!r}: its model cannot be loaded ({reason}). "
            "The profile is kept as it was.",
            error=True,
        )

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
        """Edit the notes of the selected profile."""
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
            self.store.save(dataclasses.replace(profile, notes=notes), overwrite=True)
        except ProfileError as exc:
            self.show_message(f"Notes not saved: {exc}", error=True)
            return
        self.refresh()
        self.show_message(f"Saved the notes of {profile.name!r}.")

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
            self._undo.append(trashed)
        self.refresh()
        if failure:
            self.show_message(failure, error=True)
        elif trashed:
            names = ", ".join(repr(t.name) for t in trashed)
            self.show_message(f"Deleted {names}. Undo brings it back.")
        self._update_actions()

    def undo_delete(self) -> None:
        """Restore the profiles of the last deletion."""
        if not self._undo:
            return
        batch = self._undo.pop()
        restored, failures = [], []
        for trashed in batch:
            try:
                restored.append(self.store.restore(trashed).name)
            except ProfileError as exc:
                failures.append(str(exc))
        self.refresh()
        self.select(restored)
        if failures:
            self.show_message("; ".join(failures), error=True)
        else:
            self.show_message(f"Restored {', '.join(repr(n) for n in restored)}.")
        self._update_actions()

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

    def _compared(self, results: list[Reestimate]) -> None:
        self._comparing = None
        self.compare_view.show_results(results)

    def _compare_failed(self, exc: Exception) -> None:
        self._comparing = None
        self.compare_view.clear("No comparison.")
        self.show_message(f"Could not compare: {type(exc).__name__}: {exc}", error=True)

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
            exported = self.store.export(names, path)
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


def _load_and_estimate(
    load_model: Callable[[str], LoadedModel],
    source: str,
    workload: Workload,
    capacities: Sequence[tuple[str, int]],
) -> LoadedModel:
    """Load a profile's model and estimate its setup once (on a worker thread).

    The estimate itself is dropped: it fills the model's memoized sizes, so that the window's own
    estimate of the same setup, on the GUI thread, only adds them up. A setup the core refuses is
    reported by the window's estimate.
    """
    loaded = load_model(source)
    with contextlib.suppress(VramguiError):
        estimate(loaded.spec, workload, capacities[0][1] if capacities else None)
    return loaded


def _button(text: str, tooltip: str) -> QPushButton:
    button = QPushButton(text)
    button.setToolTip(tooltip)
    return button
