"""The "On this machine" list: the Hugging Face cache, Ollama and LM Studio models built in
temporary folders, listed with their sizes and whether they fit at the current settings, read
on workers only, and opened in the window with a click."""

import threading

import pytest
from PySide6.QtCore import Qt

from tests.fakehub.stores import sample_stores, tree_state
from vramgui.core import launch
from vramgui.core.units import GB
from vramgui.core.workload import Workload
from vramgui.sources import on_disk
from vramgui.ui import app
from vramgui.ui.local_models import LocalModelsView


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """The sample stores, and this user's stores pointed at them."""
    found = sample_stores(tmp_path / "stores")
    monkeypatch.setattr(on_disk, "default_stores", lambda: found)
    monkeypatch.setenv("HF_HUB_CACHE", str(found.hf_cache))
    # The window reads a model in a child process, which finds the stores as vramgui does.
    monkeypatch.setenv("OLLAMA_MODELS", str(found.ollama[0]))
    return found


@pytest.fixture
def threads():
    """The threads each step ran on."""
    return {}


@pytest.fixture
def view(qtbot, stores, threads):
    def scan():
        threads["scan"] = threading.current_thread()
        return on_disk.scan(stores)

    def open_model(model):
        threads.setdefault("open", threading.current_thread())
        return on_disk.open_model(model)

    widget = LocalModelsView(scan, open_model)
    qtbot.addWidget(widget)
    widget.resize(700, 300)
    return widget


def _rows(view):
    model = view.table_model
    return {
        model.index(r, 0).data(): [
            model.index(r, 0).data(Qt.ItemDataRole.ToolTipRole).split("\n")[1].split(" (")[0],
            model.index(r, 1).data(),
            model.index(r, 2).data(),
        ]
        for r in range(model.rowCount())
    }


def _shown_and_fitted(qtbot, view):
    view.show()
    qtbot.waitUntil(lambda: view.table_model.rowCount() > 0 and not view.busy, timeout=10000)


def test_the_stores_are_read_when_the_list_is_first_shown_on_a_worker(qtbot, view, threads):
    view.set_setup(Workload(), ("RTX 4090", 24 * GB))
    qtbot.wait(50)
    assert "scan" not in threads  # nothing read at start-up
    _shown_and_fitted(qtbot, view)
    assert threads["scan"] is not threading.main_thread()
    assert threads["open"] is not threading.main_thread()
    rows = _rows(view)
    assert set(rows) == {
        "org/tiny",
        "org/tiny-GGUF:tiny-Q4_K_M.gguf",
        "llama3.2:3b",
        "someone/tiny:latest",
        "Tiny-Q4_K_M.gguf",  # in lmstudio-community/Tiny-GGUF/ (the tooltip's path)
        "mlx-community/Tiny-4bit",
    }
    assert rows["llama3.2:3b"][0] == "In Ollama"
    assert rows["org/tiny"][0] == "In Hugging Face cache"
    assert rows["mlx-community/Tiny-4bit"][0] == "In LM Studio"
    # In GiB like every other figure of the window (and in GB when the window is).
    assert all(size.endswith("KiB") for _, size, _ in rows.values())
    view.set_unit("GB")
    assert all(size.endswith("KB") for _, size, _ in _rows(view).values())
    header = view.table_model.headerData(0, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)
    assert header == "On this machine (6)"
    assert view.status.isHidden()


def test_each_model_says_whether_it_fits_at_the_current_settings(qtbot, view):
    view.set_setup(Workload(seq=256), ("big GPU", 80 * GB))
    _shown_and_fitted(qtbot, view)
    needs = {name: cells[2] for name, cells in _rows(view).items()}
    assert all(text.endswith("✓") for text in needs.values()), needs
    model = view.table_model
    assert model.index(0, 2).data(Qt.ItemDataRole.ForegroundRole).name() == "#2e7d32"
    assert "fits big GPU" in model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)

    view.set_setup(Workload(seq=256), ("tiny GPU", 1000))
    qtbot.waitUntil(lambda: all(c[2].endswith("✗") for c in _rows(view).values()), timeout=5000)
    assert model.index(0, 2).data(Qt.ItemDataRole.ForegroundRole).name() == "#c62828"

    before = _rows(view)["org/tiny"][2]
    view.set_setup(Workload(seq=256, batch=1024), ("tiny GPU", 1000))
    qtbot.waitUntil(lambda: _rows(view)["org/tiny"][2] != before, timeout=5000)


def test_a_context_longer_than_a_model_is_cut_to_its_own(qtbot, view):
    view.set_setup(Workload(seq=131072), None)
    _shown_and_fitted(qtbot, view)
    row = next(
        r
        for r in range(view.table_model.rowCount())
        if view.table_model.index(r, 0).data() == "org/tiny"
    )
    tip = view.table_model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert "at its longest context, 512 tokens" in tip
    assert view.table_model.index(row, 2).data().endswith(" GiB")  # a figure, no verdict


def test_an_unreadable_model_is_listed_with_the_reason(qtbot, view, stores):
    gguf = stores.lm_studio[0] / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    view.set_setup(Workload(), None)
    _shown_and_fitted(qtbot, view)
    row = next(
        r
        for r in range(view.table_model.rowCount())
        if view.table_model.index(r, 0).data().endswith("Tiny-Q4_K_M.gguf")
        and "LM Studio" in view.table_model.index(r, 0).data(Qt.ItemDataRole.ToolTipRole)
    )
    assert view.table_model.index(row, 2).data() == "n/a"
    assert "truncated" in view.table_model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)


def test_looking_again_finds_new_models_and_never_writes(qtbot, view, stores):
    before = tree_state(stores.hf_cache.parent)
    view.set_setup(Workload(), None)
    _shown_and_fitted(qtbot, view)
    assert tree_state(stores.hf_cache.parent) == before
    (stores.ollama[0] / "manifests" / "registry.ollama.ai" / "library" / "llama3.2" / "3b").unlink()
    view.rescan.trigger()
    qtbot.waitUntil(lambda: view.table_model.rowCount() == 5 and not view.busy, timeout=10000)


def test_the_window_shows_the_list_and_opens_a_model_from_it(qtbot, stores, services, settings):
    window = app.build_window(services, settings)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.controller.outlook is not None, timeout=10000)
    area = window.model_panel.result_area
    view = area.currentWidget()
    assert isinstance(view, LocalModelsView)  # in the results' place while nothing is searched
    qtbot.waitUntil(lambda: view.table_model.rowCount() == 6 and not view.busy, timeout=10000)
    target = window.controller.capacities[0][0]
    header = view.table_model.headerData(2, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
    assert f"green fits {target}" in header
    row = next(r for r in range(6) if view.table_model.index(r, 0).data() == "llama3.2:3b")
    view.table.clicked.emit(view.table_model.index(row, 0))
    qtbot.waitUntil(
        lambda: window.controller.spec is not None and window.controller.spec.name == "llama3.2:3b",
        timeout=10000,
    )
    assert window.controller.spec.source.startswith("Ollama, llama3.2:3b")
    # Estimated at the context Ollama would give it on the target GPU (num_ctx unset).
    memory = window.controller.capacities[0][1]
    assert window.controller.workload.seq == min(
        launch.ollama_context(memory), window.controller.max_seq
    )
    qtbot.keyClicks(window.model_panel.query, "q")
    assert area.currentWidget() is window.model_panel.results  # a search shows its results
    window.model_panel.query.clear()
    assert area.currentWidget() is view
    window.close()


def test_a_gguf_with_an_infinite_size_costs_only_its_own_row(qtbot, view, stores):
    from tests.fakehub.files import write_gguf

    gguf = stores.lm_studio[0] / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf"
    write_gguf(gguf, floats={"block_count": float("inf")})
    view.set_setup(Workload(), None)
    _shown_and_fitted(qtbot, view)
    rows = _rows(view)
    assert len(rows) > 1 and "org/tiny" in rows
    bad = next(r for r in range(view.table_model.rowCount()) if "Tiny-Q4_K_M" in _name(view, r))
    assert view.table_model.index(bad, 2).data() == "n/a"
    tip = view.table_model.index(bad, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert "llama.block_count is inf" in tip


def _name(view, row):
    return view.table_model.index(row, 0).data()


def test_any_fault_in_one_model_costs_only_its_own_row(stores, monkeypatch):
    """Whatever one model's reading or estimate raises, the other rows stand."""
    from vramgui.ui import local_models

    scanned = on_disk.scan(stores)
    first = scanned.models[0]

    def open_model(model):
        if model is first:
            raise OverflowError("cannot convert float infinity to integer")
        return on_disk.open_model(model)

    found = local_models.read_all(lambda: scanned, open_model)
    assert found[0].spec is None and "OverflowError" in found[0].problem
    assert all(item.spec is not None for item in found[1:])

    real = local_models.estimate_setup

    def estimate_setup(spec, *args, **kwargs):
        if spec is found[1].spec:
            raise ZeroDivisionError("division by zero")
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(local_models, "estimate_setup", estimate_setup)
    fits = local_models.fits_of(found, Workload(), None)
    assert "OverflowError" in fits[0].note and "ZeroDivisionError" in fits[1].note
    assert all(fit.total_bytes for fit in fits[2:]) and len(fits) == len(found) > 2
