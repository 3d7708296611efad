"""The Profiles tab driven through its real widgets: save, open, rename, delete + undo, compare."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QThreadPool
from PySide6.QtGui import QColor

from vramgui.cli.profile import estimate_for
from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload
from vramgui.profiles import Profile, ProfileStore, source_of
from vramgui.sources.resolve import load_model
from vramgui.ui.compare_view import (
    DIFFERS_BACKGROUND,
    ComparisonModel,
    Reestimate,
    comparison_rows,
    reestimate,
)
from vramgui.ui.controller import EstimateController
from vramgui.ui.profiles_view import (
    Dialogs,
    ProfileListModel,
    ProfilesView,
    profile_from_setup,
)

GiB = 1024**3
GPU = ("RTX 4090", 24 * GiB)


class Script:
    """Scripted answers to the view's dialogs; records every question asked."""

    def __init__(self) -> None:
        self.names: list[str | None] = []
        self.texts: list[str | None] = []
        self.confirms: list[bool] = []
        self.paths: list[Path | None] = []
        self.asked: list[str] = []

    def dialogs(self) -> Dialogs:
        def ask_name(title: str, prompt: str, suggestion: str) -> str | None:
            self.asked.append(f"{title}: {suggestion}")
            return self.names.pop(0)

        def ask_text(title: str, prompt: str, current: str) -> str | None:
            self.asked.append(f"{title}: {current}")
            return self.texts.pop(0)

        def confirm(title: str, question: str) -> bool:
            self.asked.append(title)
            return self.confirms.pop(0)

        def path(title: str, *_rest: str) -> Path | None:
            self.asked.append(title)
            return self.paths.pop(0)

        return Dialogs(ask_name, ask_text, confirm, path, path)


@pytest.fixture
def store(tmp_path) -> ProfileStore:
    return ProfileStore(tmp_path / "profiles")


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def controller(qtbot) -> EstimateController:
    c = EstimateController(load_model, Workload(seq=1024))
    c.set_model(load_model("gpt2"), "gpt2")
    c.set_capacities((GPU,))
    return c


@pytest.fixture
def view(qtbot, controller, store, script):
    v = ProfilesView(controller, store, load_model, script.dialogs())
    qtbot.addWidget(v)
    v.resize(1200, 800)
    v.show()
    qtbot.waitExposed(v)
    yield v
    QThreadPool.globalInstance().waitForDone(5000)


def saved(store: ProfileStore, name: str, source: str, **workload) -> Profile:
    # GPT-2 has learned positions for 1,024 tokens: the default context of 2,048 is refused.
    workload = {"seq": 1024, **workload}
    profile = profile_from_setup(name, load_model(source), Workload(**workload), [GPU])
    return store.save(profile)


def click_row(qtbot, view: ProfilesView, name: str, add: bool = False) -> None:
    row = view.list_model.row_of(name)
    index = view.proxy.mapFromSource(view.list_model.index(row, 0))
    rect = view.table.visualRect(index)
    modifier = Qt.KeyboardModifier.ControlModifier if add else Qt.KeyboardModifier.NoModifier
    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, modifier, rect.center())


def names_shown(view: ProfilesView) -> list[str]:
    return [view.proxy.index(r, 0).data() for r in range(view.proxy.rowCount())]


def test_save_as_then_save_writes_the_current_setup(qtbot, view, controller, store, script):
    script.names = ["GPT-2 serving"]
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    profile = store.get("GPT-2 serving")
    assert profile.model == controller.model.ref
    assert profile.workload == controller.workload
    assert profile.gpus == ("RTX 4090",)
    total = profile.saved_estimate["per_gpu"]["total_bytes"]
    assert (
        total
        == profile_from_setup("x", controller.model, controller.workload, [GPU]).saved_estimate[
            "per_gpu"
        ]["total_bytes"]
    )
    assert names_shown(view) == ["GPT-2 serving"]
    assert view.current_profile == "GPT-2 serving"
    assert "Saved" in view.message.text()

    # Save writes to the open profile without asking again.
    controller.update(batch=4)
    qtbot.mouseClick(view.save_button, Qt.MouseButton.LeftButton)
    assert store.get("GPT-2 serving").workload.batch == 4
    assert len(store.list()) == 1
    assert script.asked == ["Save profile: gpt2 inference"]


def test_save_as_a_taken_name_replaces_only_when_confirmed(qtbot, view, controller, store, script):
    saved(store, "plan", "gpt2", batch=2)
    view.refresh()
    script.names = ["plan", "PLAN"]
    script.confirms = [False, True]
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    assert store.get("plan").workload.batch == 2
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    assert store.get("plan").workload.batch == 1
    assert len(store.list()) == 1


def test_open_applies_the_profile_and_emits_it(qtbot, view, controller, store):
    saved(store, "qwen long", "qwen2.5-0.5b", seq=4096, batch=3)
    saved(store, "gpt2 short", "gpt2", seq=512)
    view.refresh()
    click_row(qtbot, view, "qwen long")
    with qtbot.waitSignal(view.profile_opened, timeout=5000) as blocker:
        qtbot.keyClick(view.table, Qt.Key.Key_Return)
    opened = blocker.args[0]
    assert opened == store.get("qwen long")
    assert controller.workload == opened.workload
    assert controller.source == "qwen2.5-0.5b"
    assert controller.model.ref == opened.model
    assert view.current_profile == "qwen long"


def test_open_with_a_model_gone_is_a_message_and_keeps_the_file(
    qtbot, view, controller, store, tmp_path
):
    gone = Profile(name="gone", model=ModelRef(kind="local", id=str(tmp_path / "nowhere.gguf")))
    store.save(gone)
    before = store.list()[0].path.read_bytes()
    view.refresh()
    workload = controller.workload
    click_row(qtbot, view, "gone")
    qtbot.mouseClick(view.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Cannot open" in view.message.text(), timeout=5000)
    assert "nowhere.gguf" in view.message.text()
    assert controller.workload == workload
    assert store.list()[0].path.read_bytes() == before


def test_rename_with_f2(qtbot, view, store, script):
    saved(store, "old name", "gpt2")
    view.refresh()
    old_file = store.list()[0].path
    script.names = ["new name"]
    click_row(qtbot, view, "old name")
    qtbot.keyClick(view.table, Qt.Key.Key_F2)
    assert store.names() == ["new name"]
    assert not old_file.exists()
    assert [p.name for p in view.selected_profiles()] == ["new name"]


def test_rename_to_a_taken_name_is_refused_with_a_message(qtbot, view, store, script):
    saved(store, "a", "gpt2")
    saved(store, "b", "gpt2")
    view.refresh()
    script.names = ["B"]
    click_row(qtbot, view, "a")
    qtbot.mouseClick(view.rename_button, Qt.MouseButton.LeftButton)
    assert sorted(store.names()) == ["a", "b"]
    assert "exists" in view.message.text()


def test_delete_then_undo(qtbot, view, store):
    saved(store, "keep", "gpt2")
    saved(store, "drop", "gpt2", batch=8)
    view.refresh()
    original = store.get("drop")
    click_row(qtbot, view, "drop")
    qtbot.keyClick(view.table, Qt.Key.Key_Delete)
    assert store.names() == ["keep"]
    assert names_shown(view) == ["keep"]
    assert view.undo_button.isVisible()
    qtbot.mouseClick(view.undo_button, Qt.MouseButton.LeftButton)
    assert sorted(store.names()) == ["drop", "keep"]
    assert store.get("drop") == original
    assert not view.undo_button.isVisible()
    assert [p.name for p in view.selected_profiles()] == ["drop"]


def test_duplicate_and_search(qtbot, view, store):
    saved(store, "llama plan", "llama-3.1-8b")
    saved(store, "tiny", "gpt2")
    view.refresh()
    click_row(qtbot, view, "llama plan")
    qtbot.mouseClick(view.duplicate_button, Qt.MouseButton.LeftButton)
    assert "llama plan (copy)" in store.names()
    qtbot.keyClicks(view.search, "LLAMA")
    assert names_shown(view) == ["llama plan", "llama plan (copy)"]
    view.search.clear()
    qtbot.keyClicks(view.search, "gpt2")  # matches the model, not the name
    assert names_shown(view) == ["tiny"]


def test_unreadable_file_is_greyed_never_selected_and_left_on_disk(qtbot, view, store, script):
    saved(store, "good", "gpt2")
    broken = store.directory / "broken.json"
    broken.write_bytes(b'{"format": "vramgui.profile", "name": "broken", "trunc')
    newer = store.directory / "future.json"
    newer.write_text(
        json.dumps({"format": "vramgui.profile", "format_version": 99, "name": "future"})
    )
    view.refresh()
    assert sorted(names_shown(view)) == ["broken", "future", "good"]
    row = view.list_model.row_of("good")
    for name, reason in (("broken", "not valid JSON"), ("future", "newer vramgui")):
        index = next(
            view.list_model.index(r, 0)
            for r in range(view.list_model.rowCount())
            if view.list_model.listing(r).name == name
        )
        assert index.data(Qt.ItemDataRole.ForegroundRole).color() == QColor("#8a8a8a")
        assert reason in index.siblingAtColumn(1).data()
        assert not index.flags() & Qt.ItemFlag.ItemIsSelectable
    assert row is not None
    view.table.selectAll()
    assert [p.name for p in view.selected_profiles()] == ["good"]
    # Saving under the unreadable file's name makes a new file; delete-all spares the unreadable.
    script.names = ["broken"]
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    view.table.selectAll()
    qtbot.mouseClick(view.delete_button, Qt.MouseButton.LeftButton)
    assert broken.read_bytes() == b'{"format": "vramgui.profile", "name": "broken", "trunc'
    assert json.loads(newer.read_text())["format_version"] == 99
    assert sorted(names_shown(view)) == ["broken", "future"]


def test_compare_three_profiles_through_the_widgets(qtbot, view, store):
    saved(store, "small batch", "gpt2", batch=1)
    saved(store, "big batch", "gpt2", batch=16)
    older = saved(store, "qwen", "qwen2.5-0.5b", batch=1)
    # A figure saved by an older core: the comparison shows today's and the saved one.
    doc = json.loads(json.dumps(older.saved_estimate))
    doc["per_gpu"]["components"]["weights"] += GiB
    doc["per_gpu"]["total_bytes"] += GiB
    store.save(dataclasses.replace(older, saved_estimate=doc), overwrite=True)
    view.refresh()
    click_row(qtbot, view, "small batch")
    assert not view.compare_button.isEnabled()
    click_row(qtbot, view, "big batch", add=True)
    click_row(qtbot, view, "qwen", add=True)
    assert view.compare_button.isEnabled()
    qtbot.mouseClick(view.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(view.compare_view.results) == 3, timeout=10000)

    model = view.compare_view.model
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert headers == ["big batch", "qwen", "small batch"]
    rows = {model.headerData(r, Qt.Orientation.Vertical): r for r in range(model.rowCount())}
    batch = model.index(rows["Batch"], 0)
    assert [model.index(rows["Batch"], c).data() for c in range(3)] == ["16", "1", "1"]
    assert batch.data(Qt.ItemDataRole.BackgroundRole).color() == QColor(DIFFERS_BACKGROUND)
    assert model.index(rows["Context / sequence"], 0).data(Qt.ItemDataRole.BackgroundRole) is None
    assert model.index(rows["Model"], 1).data() == "qwen2.5-0.5b"
    weights = model.index(rows["Weights"], 1).data()
    assert "(saved " in weights
    assert "(saved" not in model.index(rows["Weights"], 0).data()
    assert model.index(rows["RTX 4090"], 0).data().startswith("fits")

    chart = view.compare_view.chart
    assert len(chart.bars("weights").opts["width"]) == 3
    assert list(chart.saved_outline.opts["y"]) == [1]

    view.compare_view.only_differences.setChecked(True)
    labels = [model.headerData(r, Qt.Orientation.Vertical) for r in range(model.rowCount())]
    assert "Batch" in labels and "Context / sequence" not in labels


def test_compare_shows_the_saved_estimate_when_the_model_is_gone(qtbot, view, store, tmp_path):
    ok = saved(store, "ok", "gpt2")
    gone = dataclasses.replace(
        ok, name="gone", model=ModelRef(kind="local", id=str(tmp_path / "missing"))
    )
    store.save(gone)
    view.refresh()
    click_row(qtbot, view, "gone")
    click_row(qtbot, view, "ok", add=True)
    qtbot.mouseClick(view.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(view.compare_view.results) == 2, timeout=10000)
    model = view.compare_view.model
    rows = {model.headerData(r, Qt.Orientation.Vertical): r for r in range(model.rowCount())}
    assert model.index(rows["Estimated with"], 0).data().startswith("saved only")
    assert model.index(rows["Total per GPU"], 0).data().endswith("(saved)")
    assert "missing" in view.compare_view.notes.text()


def test_import_export_round_trip(qtbot, view, store, script, tmp_path):
    saved(store, "one", "gpt2")
    saved(store, "two", "gpt2", batch=2)
    view.refresh()
    bundle = tmp_path / "bundle.json"
    script.paths = [bundle, bundle]
    qtbot.mouseClick(view.export_button, Qt.MouseButton.LeftButton)
    assert [p["name"] for p in json.loads(bundle.read_text())["profiles"]] == ["one", "two"]
    qtbot.mouseClick(view.import_button, Qt.MouseButton.LeftButton)
    assert sorted(names_shown(view)) == ["one", "one (2)", "two", "two (2)"]
    assert "Imported 2" in view.message.text()


def test_a_folder_that_cannot_be_written_is_a_message(qtbot, controller, script, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    view = ProfilesView(
        controller, ProfileStore(blocker / "profiles"), load_model, script.dialogs()
    )
    qtbot.addWidget(view)
    script.names = ["x"]
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    assert view.message.text().startswith("Not saved: cannot")
    assert blocker.read_text() == "not a folder"


def test_models_pass_the_model_tester(qtmodeltester, store, tmp_path):
    saved(store, "a", "gpt2")
    (store.directory / "bad.json").write_text("garbage")
    listing = ProfileListModel()
    listing.set_listings(store.list(), "GiB")
    qtmodeltester.check(listing)

    profile = store.get("a")
    results = [
        reestimate(profile, load_model),
        Reestimate(dataclasses.replace(profile, name="b", workload=Workload(batch=2))),
    ]
    comparison = ComparisonModel()
    comparison.set_rows(["a", "b"], comparison_rows(results))
    qtmodeltester.check(comparison)
    comparison.set_only_differences(True)
    qtmodeltester.check(comparison)


def test_notes_are_edited_searched_and_kept_by_save(qtbot, view, controller, store, script):
    saved(store, "plan", "gpt2")
    view.refresh()
    click_row(qtbot, view, "plan")
    script.texts = ["for the two 4090s at work"]
    qtbot.mouseClick(view.notes_button, Qt.MouseButton.LeftButton)
    assert store.get("plan").notes == "for the two 4090s at work"
    qtbot.keyClicks(view.search, "two 4090s")
    assert names_shown(view) == ["plan"]
    # Replacing the setup keeps the notes.
    script.names = ["plan"]
    script.confirms = [True]
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    assert store.get("plan").notes == "for the two 4090s at work"


def test_a_profile_saved_in_the_window_has_the_cli_and_window_figures(
    qtbot, view, controller, store, script
):
    controller.update(batch=2, seq=1024)
    controller.recompute_now()
    script.names = ["same figures"]
    qtbot.mouseClick(view.save_as_button, Qt.MouseButton.LeftButton)
    profile = store.get("same figures")
    window = controller.analysis.estimate
    saved_per_gpu = profile.saved_estimate["per_gpu"]
    assert saved_per_gpu["components"] == dict(window.components)
    assert saved_per_gpu["total_bytes"] == window.total_bytes
    cli = estimate_for(load_model(source_of(profile.model)), profile.workload, profile.gpus)
    now = reestimate(profile, load_model)
    assert now.error is None
    assert now.document["per_gpu"] == cli["per_gpu"] == saved_per_gpu
    assert now.document["fit"] == cli["fit"] == profile.saved_estimate["fit"]


class GatedLoad:
    """``load_model`` whose loads of the sources in ``held`` wait until released."""

    def __init__(self, *held: str) -> None:
        self.gates = {source: threading.Event() for source in held}
        self.threads: list[str] = []

    def __call__(self, source: str):
        self.threads.append(threading.current_thread().name)
        gate = self.gates.get(source)
        if gate is not None:
            gate.wait(10)
        return load_model(source)

    def release(self) -> None:
        for gate in self.gates.values():
            gate.set()


@pytest.fixture
def gated(qtbot, controller, store, script):
    load = GatedLoad("qwen2.5-0.5b")
    v = ProfilesView(controller, store, load, script.dialogs())
    qtbot.addWidget(v)
    v.show()
    qtbot.waitExposed(v)
    yield v, load
    load.release()
    QThreadPool.globalInstance().waitForDone(5000)


def test_opening_is_busy_off_the_gui_thread_and_the_last_click_wins(
    qtbot, gated, controller, store
):
    view, load = gated
    saved(store, "slow qwen", "qwen2.5-0.5b", seq=2048)
    saved(store, "gpt2 batch", "gpt2", batch=5)
    view.refresh()
    view.select(["slow qwen"])
    view.open_selected()
    assert view.is_opening and view.opening.isVisible()
    assert "Opening 'slow qwen'" in view.message.text()
    view.select(["gpt2 batch"])
    with qtbot.waitSignal(view.profile_opened, timeout=5000) as blocker:
        view.open_selected()
    assert blocker.args[0].name == "gpt2 batch"
    assert not view.is_opening and not view.opening.isVisible()
    load.release()  # the first click's model arrives late and is dropped
    QThreadPool.globalInstance().waitForDone(5000)
    qtbot.wait(50)
    assert controller.source == "gpt2" and controller.workload.batch == 5
    assert view.current_profile == "gpt2 batch"
    assert threading.main_thread().name not in load.threads


def test_a_model_loaded_in_the_window_meanwhile_wins_over_the_profile(
    qtbot, gated, controller, store
):
    view, load = gated
    saved(store, "slow qwen", "qwen2.5-0.5b", seq=2048)
    view.refresh()
    view.select(["slow qwen"])
    view.open_selected()
    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_source("gpt2")
    assert not view.is_opening and "dropped" in view.message.text()
    load.release()
    QThreadPool.globalInstance().waitForDone(5000)
    qtbot.wait(50)
    assert controller.source == "gpt2" and view.current_profile is None
