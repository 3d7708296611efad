"""The Profiles tab driven through its real widgets: save, open, rename, delete + undo, compare."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QThreadPool
from PySide6.QtGui import QColor

from vramgui.answers.documents import saved_document
from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload
from vramgui.hardware.capacity import resolve_capacities
from vramgui.profiles import Profile, ProfileStore, source_of
from vramgui.profiles.reopen import Reestimate
from vramgui.sources.resolve import load_model
from vramgui.ui.compare_view import (
    DIFFERS_BACKGROUND,
    CompareView,
    ComparisonModel,
    comparison_rows,
    reestimate,
)
from vramgui.ui.controller import EstimateController
from vramgui.ui.extra_views import view_of
from vramgui.ui.profiles_view import (
    COLUMNS,
    NAME,
    SEARCH_ROLE,
    TOTAL,
    Dialogs,
    ProfileListModel,
    ProfilesView,
    profile_from_setup,
)

GiB = 1024**3
MiB = 1024**2
GPU = ("RTX 4090", 24564 * MiB)  # NVML's total, the catalog's capacity


class Script:
    """Scripted answers to the view's dialogs; records every question asked."""

    def __init__(self) -> None:
        self.names: list[str | None] = []
        self.texts: list[str | None] = []
        self.confirms: list[bool] = []
        self.paths: list[Path | None] = []
        self.choices: list[int | None] = []
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

        def choose(title: str, prompt: str, items) -> int | None:
            self.asked.append(f"{title}: {' | '.join(items)}")
            return self.choices.pop(0)

        return Dialogs(ask_name, ask_text, confirm, path, path, choose)


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


def test_save_new_then_update_keeps_the_previous_version(qtbot, view, controller, store, script):
    script.names = ["GPT-2 serving"]
    view.save_new_action.trigger()
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

    # Update writes to the open profile without asking, and keeps what it replaces.
    assert view.update_action.isEnabled()
    controller.update(batch=4)
    view.update_action.trigger()
    assert store.get("GPT-2 serving").workload.batch == 4
    assert len(store.list()) == 1
    assert script.asked == ["Save profile: gpt2 inference"]
    assert "previous version is kept" in view.message.text()
    assert view.undo_button.isVisible() and view.undo_button.text() == "Restore previous version"
    qtbot.mouseClick(view.undo_button, Qt.MouseButton.LeftButton)
    assert store.get("GPT-2 serving").workload.batch == 1
    assert [v.profile.workload.batch for v in store.versions("GPT-2 serving")] == [4, 1]


def test_save_with_a_profile_open_makes_a_new_profile(qtbot, view, controller, store, script):
    # A second Save with a profile open replaced it: a Q4_K_M plan became a Q2_K one.
    q4 = saved(store, "laptop plan", "gpt2", engine="llamacpp", quant="Q4_K_M")
    view.refresh()
    view.select(["laptop plan"])
    with qtbot.waitSignal(view.profile_opened, timeout=5000):
        view.open_action.trigger()
    controller.update(quant="Q2_K")
    script.names = ["laptop plan (2)"]
    view.save_current()  # File > Save profile…
    assert script.asked == ["Save profile: laptop plan (2)"]
    assert store.get("laptop plan") == q4
    assert store.get("laptop plan (2)").workload.quant == "Q2_K"
    assert view.current_profile == "laptop plan (2)"
    # Cancelling the name asked saves nothing.
    script.names = [None]
    view.save_current()
    assert sorted(store.names()) == ["laptop plan", "laptop plan (2)"]
    assert store.versions() == []


def test_save_as_a_taken_name_replaces_only_when_confirmed(qtbot, view, controller, store, script):
    saved(store, "plan", "gpt2", batch=2)
    view.refresh()
    script.names = ["plan", "PLAN"]
    script.confirms = [False, True]
    view.save_new_action.trigger()
    assert store.get("plan").workload.batch == 2
    view.save_new_action.trigger()
    assert store.get("plan").workload.batch == 1
    assert len(store.list()) == 1
    [kept] = store.versions("plan")
    assert kept.profile.workload.batch == 2


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
    view.open_action.trigger()
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
    view.rename_action.trigger()
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
    assert view.undo_button.isVisible() and view.undo_button.text() == "Undo delete"
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
    view.duplicate_action.trigger()
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
    view.save_new_action.trigger()
    view.table.selectAll()
    view.delete_action.trigger()
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
    store.save(dataclasses.replace(older, saved_estimate=doc), update=True)
    view.refresh()
    click_row(qtbot, view, "small batch")
    assert not view.compare_action.isEnabled()
    click_row(qtbot, view, "big batch", add=True)
    click_row(qtbot, view, "qwen", add=True)
    assert view.compare_action.isEnabled()
    view.compare_action.trigger()
    qtbot.waitUntil(lambda: len(view.compare_view.results) == 3, timeout=10000)

    model = view.compare_view.model
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert headers == ["big batch", "qwen", "small batch"]
    rows = {model.headerData(r, Qt.Orientation.Vertical): r for r in range(model.rowCount())}
    batch = model.index(rows["Batch"], 0)
    assert [model.index(rows["Batch"], c).data() for c in range(3)] == ["16", "1", "1"]
    assert batch.data(Qt.ItemDataRole.BackgroundRole).color() == QColor(DIFFERS_BACKGROUND)
    assert model.index(rows["Context"], 0).data(Qt.ItemDataRole.BackgroundRole) is None
    assert model.index(rows["Model"], 1).data() == "qwen2.5-0.5b"
    weights = model.index(rows["Weights"], 1).data()
    assert "(saved " in weights
    assert "(saved" not in model.index(rows["Weights"], 0).data()
    assert model.index(rows["RTX 4090"], 0).data().startswith("fits")

    chart = view.compare_view.chart
    assert len(chart.bars("weights").opts["width"]) == 3
    assert list(chart.saved_outline.opts["y"]) == [1]
    # What a screen reader reads: each profile's total, qwen's saved one, the capacities.
    described = chart.accessibleDescription()
    assert chart.accessibleName()
    assert described.startswith("big batch: ")
    assert "qwen: " in described and "(saved: " in described
    assert described.count("(saved: ") == 1
    assert "GPU capacities: RTX 4090 23.99 GiB" in described

    view.compare_view.only_differences.setChecked(True)
    labels = [model.headerData(r, Qt.Orientation.Vertical) for r in range(model.rowCount())]
    assert "Batch" in labels and "Context" not in labels


def test_compare_shows_the_saved_estimate_when_the_model_is_gone(qtbot, view, store, tmp_path):
    ok = saved(store, "ok", "gpt2")
    gone = dataclasses.replace(
        ok, name="gone", model=ModelRef(kind="local", id=str(tmp_path / "missing"))
    )
    store.save(gone)
    view.refresh()
    click_row(qtbot, view, "gone")
    click_row(qtbot, view, "ok", add=True)
    view.compare_action.trigger()
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
    view.export_action.trigger()
    assert [p["name"] for p in json.loads(bundle.read_text())["profiles"]] == ["one", "two"]
    view.import_action.trigger()
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
    view.save_new_action.trigger()
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
    view.notes_action.trigger()
    assert store.get("plan").notes == "for the two 4090s at work"
    qtbot.keyClicks(view.search, "two 4090s")
    assert names_shown(view) == ["plan"]
    # Replacing the setup keeps the notes.
    script.names = ["plan"]
    script.confirms = [True]
    view.save_new_action.trigger()
    assert store.get("plan").notes == "for the two 4090s at work"
    # The notes edit kept the version before it, which Undo brings back.
    assert [v.profile.notes for v in store.versions("plan")] == ["for the two 4090s at work", ""]


def test_a_profile_saved_in_the_window_has_the_cli_and_window_figures(
    qtbot, view, controller, store, script
):
    controller.update(batch=2, seq=1024)
    controller.recompute_now()
    script.names = ["same figures"]
    view.save_new_action.trigger()
    profile = store.get("same figures")
    window = controller.analysis.estimate
    saved_per_gpu = profile.saved_estimate["per_gpu"]
    assert saved_per_gpu["components"] == dict(window.components)
    assert saved_per_gpu["total_bytes"] == window.total_bytes
    capacities = resolve_capacities(list(profile.gpus))
    cli = saved_document(
        load_model(source_of(profile.model)), profile.workload, capacities, rates=lambda *_: None
    )
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


def test_versions_brings_back_the_chosen_one_and_undo_takes_it_back(qtbot, view, store, script):
    saved(store, "plan", "gpt2", batch=1)
    for batch in (2, 3):
        store.save(dataclasses.replace(store.get("plan"), workload=Workload(seq=1024, batch=batch)),
                   update=True)  # fmt: skip
    view.refresh()
    click_row(qtbot, view, "plan")
    script.choices = [1]  # newest first: batch 2, then batch 1
    view.versions_action.trigger()
    assert "batch 2" in script.asked[-1] and "batch 1" in script.asked[-1]
    assert store.get("plan").workload.batch == 1
    assert "Brought back 'plan'" in view.message.text()
    qtbot.mouseClick(view.undo_button, Qt.MouseButton.LeftButton)
    assert store.get("plan").workload.batch == 3
    script.choices = [None]
    view.versions_action.trigger()
    assert store.get("plan").workload.batch == 3


def test_versions_of_a_profile_never_updated_is_a_message(qtbot, view, store, script):
    saved(store, "plan", "gpt2")
    view.refresh()
    click_row(qtbot, view, "plan")
    view.versions_action.trigger()
    assert "No earlier version of 'plan'" in view.message.text()
    assert script.asked == []


def test_bad_profiles_are_greyed_and_the_tab_still_builds(qtbot, controller, store):
    # A 401-digit number made the tab fail to build; `per_gpu: "x"` raised four error dialogs
    # in ten seconds, one per repaint.
    good = saved(store, "good", "gpt2").to_dict()
    for stem, (section, key, value) in {
        "gmu": ("workload", "gpu-memory-utilization", 10**400),
        "mtime": ("model", "mtime", 10**400),
        "per-gpu": ("saved_estimate", "per_gpu", "x"),
        "kv": ("workload", "kv-dtype", "fp9"),
    }.items():
        doc = json.loads(json.dumps(good))
        doc["name"] = stem
        doc[section][key] = value
        (store.directory / f"{stem}.json").write_text(json.dumps(doc))
    view = ProfilesView(controller, store, load_model)  # no question is asked
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    model = view.list_model
    assert [model.listing(r).readable for r in range(model.rowCount())] == [True] + [False] * 4
    for row in range(model.rowCount()):
        for column in range(model.columnCount()):
            for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, SEARCH_ROLE):
                model.index(row, column).data(role)
    assert "bad profile field" in model.index(1, 1).data()
    kv = next(r for r in range(model.rowCount()) if model.listing(r).name == "kv")
    assert "KV cache dtype must be one of auto" in model.index(kv, 1).data()
    view.table.selectAll()
    assert [p.name for p in view.selected_profiles()] == ["good"]


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768)], ids=["1280x720", "1366x768"])
def test_the_tab_fits_a_laptop_screen_and_cuts_no_figure(make_window, qtbot, size):
    store = ProfileStore()
    for name, source, workload in (
        ("Llama 3.1 8B chat, 8k context", "llama-3.1-8b", {"seq": 8192}),
        ("Llama 3.1 8B QLoRA on one 4090", "llama-3.1-8b",
         {"mode": "training", "method": "qlora", "quant": "nf4", "batch": 4}),
        ("Qwen2.5 0.5B batch serving", "qwen2.5-0.5b", {"batch": 16}),
    ):  # fmt: skip
        store.save(profile_from_setup(name, load_model(source), Workload(**workload), [GPU]))
    window = make_window()
    window.resize(*size)
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    window.tabs.setCurrentIndex(titles.index("Profiles"))
    view = view_of(window.extra_tabs["Profiles"])
    view.table.selectAll()
    view.compare_selected()
    qtbot.waitUntil(lambda: len(view.compare_view.results) == 3, timeout=10000)
    qtbot.wait(50)

    # The tab was wider than the window: it scrolled sideways inside its tab.
    holder = window.tabs.currentWidget()
    assert holder.horizontalScrollBar().maximum() == 0
    assert view.width() <= holder.viewport().width()
    for action in (view.save_new_action, view.update_action, view.compare_action):
        # What does not fit folds into the tool bar's menu; the first actions stay in sight.
        button = view.toolbar.widgetForAction(action)
        assert button.isVisible() and view.toolbar.rect().contains(button.geometry())

    # Figures are never cut: "1,248.75 ..." in the list, "(saved ...)" in the comparison.
    table, header = view.table, view.table.horizontalHeader()
    assert not header.isSectionHidden(TOTAL) and not header.isSectionHidden(NAME)
    shown = sum(header.sectionSize(c) for c in range(len(COLUMNS)) if not header.isSectionHidden(c))
    assert shown <= table.viewport().width()
    metrics = table.fontMetrics()
    for row in range(view.proxy.rowCount()):
        text = view.proxy.index(row, TOTAL).data()
        assert metrics.horizontalAdvance(text) < header.sectionSize(TOTAL), text
    compare = view.compare_view
    metrics = compare.table.fontMetrics()
    for row in compare.model.figure_rows():
        for column in range(compare.model.columnCount()):
            text = compare.model.index(row, column).data()
            width = compare.table.horizontalHeader().sectionSize(column)
            assert metrics.horizontalAdvance(text) < width, text
    assert not compare.side_by_side  # too narrow for both: table and chart have a page each


def test_the_comparison_goes_side_by_side_when_wide_and_back(qtbot):
    compare = CompareView()
    qtbot.addWidget(compare)
    compare.resize(700, 500)
    compare.show()
    qtbot.waitExposed(compare)
    assert not compare.side_by_side
    assert compare.table.isVisible() and not compare.chart.isVisible()
    compare.pages.setCurrentIndex(1)
    assert compare.chart.isVisible() and not compare.table.isVisible()
    for width, side_by_side in ((1200, True), (700, False), (1200, True)):
        compare.resize(width, 500)
        qtbot.waitUntil(lambda s=side_by_side: compare.side_by_side == s, timeout=2000)
        shown = [w.isVisible() for w in (compare.table, compare.chart)]
        assert shown == [True, True] if side_by_side else sum(shown) == 1
