"""The main window driven through its real widgets, with a fake Hub and scripted GPUs."""

from __future__ import annotations

import json
import logging
import sys
import threading

from PySide6.QtCore import QModelIndex, QSize, Qt, QThreadPool, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QMessageBox

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, safetensors_bytes
from tests.ui.conftest import NO_DRIVER
from vramgui.hardware import GpuSnapshot, LocalGpu
from vramgui.hardware.gpus import custom_gpu
from vramgui.ui import app, report
from vramgui.ui.breakdown import BreakdownModel
from vramgui.ui.main_window import MainWindow
from vramgui.ui.model_panel import SearchResultsModel, droppable_path

GiB = 1024**3


def components(window) -> dict[str, int]:
    return dict(window.controller.analysis.estimate.components)


def settle(qtbot, window, **expected):
    """Wait until the drawn estimate and outlook belong to a workload with ``expected`` settings."""

    def done():
        analysis, outlook = window.controller.analysis, window.controller.outlook
        if analysis is None or outlook is None:
            return False
        w = analysis.estimate.workload
        return all(getattr(w, k) == v for k, v in expected.items()) and (
            getattr(w, outlook.field) in outlook.values
        )

    qtbot.waitUntil(done, timeout=10000)


def check_gpu(window, name: str, checked: bool = True) -> None:
    window.gpu_panel.set_checked(name, checked)


def test_first_run_shows_a_catalog_model_fitted_to_a_common_gpu(make_window, probe, qtbot):
    window = make_window()
    est = window.controller.analysis.estimate
    assert est.model_name == "meta-llama/Llama-3.1-8B"
    assert est.workload.mode == "inference"
    assert "GiB" in window.headline.text()
    # Components that are zero in inference (gradients, optimizer states) are not listed.
    shown = [name for name, size in est.components.items() if size]
    assert window.breakdown_model.rowCount() == len(shown) + 1
    assert "gradients" not in shown
    assert window.controller.capacities[0][0] == app.DEFAULT_GPU
    assert window.gpu_panel.badge(app.DEFAULT_GPU).startswith(("✔", "✘"))
    # The missing driver is shown as a state, not an error dialog.
    assert probe.calls >= 1
    assert window.gpu_panel.reason.isVisibleTo(window)
    assert window.gpu_panel.reason.text() == NO_DRIVER
    assert "no NVIDIA GPU" in window.gpu_panel.local_group.text(0)
    # Both charts hold data.
    sweep = window.sweep_chart
    assert len(sweep.values) >= 5 and all(total > 0 for total in sweep.totals)
    start, width = window.breakdown_chart.segment("weights")
    assert start == 0 and width > 0
    # Hovering shows exact figures.
    weights = est.components["weights"]
    hover = window.breakdown_chart.text_at(width / 2, 0)
    assert hover.startswith("Weights:") and f"{weights:,} bytes" in hover
    assert window.breakdown_chart.text_at(width / 2, 1.5) == ""
    assert sweep.text_at(2048).startswith("context 2,048: ")


def test_search_picks_a_hub_result(make_window, fake_hub, qtbot):
    files = {
        "config.json": json.dumps(TINY_LLAMA_CONFIG).encode(),
        "model.safetensors": safetensors_bytes(llama_tensors(TINY_LLAMA_CONFIG)),
    }
    fake_hub.add("acme/tiny-llama", files, downloads=1234, parameters=300_000)
    window = make_window()
    panel = window.model_panel
    qtbot.keyClicks(panel.query, "tiny")
    qtbot.waitUntil(lambda: panel.results_model.rowCount() > 0, timeout=5000)
    assert panel.results_model.index(0, 0).data() == "acme/tiny-llama"
    assert panel.results_model.index(0, 2).data() == "1.23K"
    rect = panel.results.visualRect(panel.results_model.index(0, 0))
    qtbot.mouseClick(panel.results.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(
        lambda: (
            window.controller.analysis is not None
            and window.controller.analysis.estimate.model_name == "acme/tiny-llama"
        ),
        timeout=10000,
    )
    assert "acme/tiny-llama" in window.headline.text()
    assert window.workload_panel.seq.spin.maximum() == TINY_LLAMA_CONFIG["max_position_embeddings"]


def test_slow_search_leaves_the_window_responsive(make_window, services, qtbot):
    release = threading.Event()

    def slow_search(query):
        release.wait(5)
        return services.search_models(query)

    from dataclasses import replace

    window = make_window(replace(services, search_models=slow_search))
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    qtbot.keyClicks(window.model_panel.query, "qwen")
    qtbot.waitUntil(lambda: window.model_panel.searching, timeout=2000)
    qtbot.wait(200)
    assert len(ticks) >= 5, "the event loop stalled while the search ran"
    release.set()
    qtbot.waitUntil(lambda: window.model_panel.results_model.rowCount() > 0, timeout=5000)
    timer.stop()


def test_failing_hub_is_a_message_not_a_crash(make_window, fake_hub, qtbot):
    fake_hub.fail["search"] = 500
    window = make_window()
    panel = window.model_panel
    qtbot.keyClicks(panel.query, "llama")
    qtbot.waitUntil(lambda: panel.status.isVisibleTo(window), timeout=15000)
    assert "catalog" in panel.status.text()
    # The catalog still answers offline.
    assert panel.results_model.rowCount() > 0
    window.controller.load_source("nobody/no-such-model")
    qtbot.waitUntil(lambda: window.banner.isVisibleTo(window), timeout=15000)
    assert window.banner.text()


def test_open_a_local_config_file(make_window, qtbot, tmp_path, monkeypatch):
    config = dict(TINY_LLAMA_CONFIG, num_hidden_layers=3, max_position_embeddings=1024)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    monkeypatch.setattr(
        QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(path), ""))
    )
    window = make_window()
    window.action_open_file.trigger()
    qtbot.waitUntil(
        lambda: (
            window.controller.analysis is not None
            and window.controller.analysis.estimate.layers == 3
        ),
        timeout=10000,
    )
    assert window.controller.source == str(path)
    assert window.workload_panel.seq.spin.maximum() == 1024
    assert str(path) in window.settings.value("models/recent")


def test_precision_change_shrinks_the_weights(make_window, qtbot):
    window = make_window()
    before = components(window)["weights"]
    combo = window.precision_panel.quant
    combo.setCurrentIndex(combo.findData("nf4"))
    settle(qtbot, window, quant="nf4")
    after = components(window)["weights"]
    assert after < before * 0.5
    weights_row = window.breakdown_model.index(0, 1)
    assert weights_row.data(Qt.ItemDataRole.UserRole) == after
    assert window.breakdown_chart.segment("weights")[1] < before / GiB * 0.5


def test_context_and_batch_grow_the_kv_cache(make_window, qtbot):
    window = make_window()
    kv = components(window)["kv_cache"]
    spin = window.workload_panel.seq.spin
    spin.selectAll()
    qtbot.keyClicks(spin, "16384")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    settle(qtbot, window, seq=16384)
    assert components(window)["kv_cache"] > kv * 4
    assert window.controller.outlook.values.count(16384) == 1
    window.workload_panel.batch.spin.setValue(4)
    settle(qtbot, window, seq=16384, batch=4)
    assert components(window)["kv_cache"] > kv * 16


def test_fit_badges_follow_the_checked_gpus(make_window, qtbot):
    window = make_window()
    check_gpu(window, "RTX 4090", False)
    check_gpu(window, "T4")
    check_gpu(window, "H100 SXM")
    qtbot.waitUntil(lambda: len(window.controller.analysis.fit) == 2, timeout=5000)
    assert window.gpu_panel.badge("T4").startswith("✘")
    assert window.gpu_panel.badge("H100 SXM").startswith("✔")
    assert window.gpu_panel.badge("RTX 4090") == ""
    assert sorted(mark.gpu for mark in window.breakdown_chart.marks) == ["H100 SXM", "T4"]


def test_gpu_names_and_badges_have_room(make_window):
    window = make_window()
    tree = window.gpu_panel.tree
    metrics = tree.fontMetrics()
    names = window.gpu_panel.catalog_group
    widest = max(
        metrics.horizontalAdvance(names.child(i).text(0)) for i in range(names.childCount())
    )
    assert tree.header().sectionSize(0) > widest + tree.indentation()
    badge = window.gpu_panel.badge(app.DEFAULT_GPU)
    assert tree.header().sectionSize(2) >= metrics.horizontalAdvance(badge)


def test_a_fitting_setup_shows_no_empty_advice_list(make_window, qtbot):
    window = make_window()
    qtbot.waitUntil(lambda: window.controller.outlook is not None, timeout=10000)
    assert "Fits" in window.advisor.summary.text()
    assert "Largest" in window.advisor.summary.text()  # a new sentence after "to spare."
    assert not window.advisor.suggestions_area.isVisibleTo(window)


def test_training_method_changes_the_breakdown(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    panel.mode.setCurrentIndex(panel.mode.findData("training"))
    settle(qtbot, window, mode="training", method="full")
    assert panel.training_box.isVisibleTo(window)
    assert not panel.inference_box.isVisibleTo(window)
    assert not panel.lora_rank.isEnabled()
    assert "LoRA" in panel.lora_rank.toolTip()
    full = components(window)
    assert full["optimizer_states"] > full["weights"]
    panel.method.setCurrentIndex(panel.method.findData("lora"))
    settle(qtbot, window, mode="training", method="lora")
    lora = components(window)
    assert lora["optimizer_states"] < full["optimizer_states"] / 10
    assert panel.lora_rank.isEnabled()
    assert window.sweep_chart.totals[0] > 0


def test_advice_applies_with_one_click(make_window, qtbot):
    window = make_window()
    check_gpu(window, "RTX 4090", False)
    check_gpu(window, "RTX 3060 12GB")
    qtbot.waitUntil(
        lambda: (
            window.controller.outlook is not None
            and window.controller.outlook.target is not None
            and window.controller.outlook.target[0] == "RTX 3060 12GB"
        ),
        timeout=10000,
    )
    assert "Does not fit" in window.advisor.summary.text()
    assert window.advisor.buttons
    assert window.advisor.suggestions_area.isVisibleTo(window)
    before = window.controller.workload
    suggestion = window.controller.outlook.suggestions[0]
    qtbot.mouseClick(window.advisor.buttons[0], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.controller.workload != before, timeout=5000)
    for key, value in suggestion.changes.items():
        assert getattr(window.controller.workload, key) == value


def test_a_vllm_setup_that_does_not_fit_says_what_its_pool_is_short_of(make_window, qtbot):
    window = make_window()
    check_gpu(window, "RTX 4090", False)
    check_gpu(window, "RTX 3060 12GB")
    window.change({"engine": "vllm"})
    qtbot.waitUntil(
        lambda: (
            window.controller.outlook is not None
            and window.controller.workload.engine == "vllm"
            and "Does not fit RTX 3060 12GB" in window.advisor.summary.text()
        ),
        timeout=10000,
    )
    summary = window.advisor.summary.text()
    seq = window.controller.workload.seq
    assert f"one request of {seq:,} tokens" in summary, summary


def test_invalid_setting_is_reported_and_undone(make_window, qtbot):
    window = make_window()
    window.workload_panel.tp.setEnabled(True)
    window.workload_panel.tp.setValue(2)
    qtbot.waitUntil(lambda: window.banner.isVisibleTo(window), timeout=5000)
    assert "tp" in window.banner.text()
    assert window.controller.workload.tp == 1
    assert window.workload_panel.tp.value() == 1


def test_a_message_takes_the_sublines_place_and_moves_no_chart(make_window, qtbot):
    window = make_window()
    window.resize(1400, 900)
    qtbot.wait(50)
    charts = (window.breakdown_chart, window.sweep_chart)
    before = [chart.geometry() for chart in charts]
    assert window.subline.isVisibleTo(window) and not window.banner.isVisibleTo(window)
    text = "A message long enough to wrap onto more lines than the area shows. " * 8
    window.show_message(text)
    qtbot.wait(50)
    assert window.banner.isVisibleTo(window) and not window.subline.isVisibleTo(window)
    assert window.banner.toolTip() == text  # the whole text, where the area cuts it
    assert [chart.geometry() for chart in charts] == before
    qtbot.mouseClick(window.banner_close, Qt.MouseButton.LeftButton)
    qtbot.wait(50)
    assert window.subline.isVisibleTo(window) and not window.banner.isVisibleTo(window)
    assert [chart.geometry() for chart in charts] == before


def test_units_copy_and_export(make_window, qtbot, tmp_path):
    window = make_window()
    window.action_gb.trigger()
    assert window.headline.text().split()[1] == "GB"
    assert window.breakdown_model.index(0, 1).data().endswith(" GB")
    window.action_copy_json.trigger()
    copied = QGuiApplication.clipboard().text()
    document = json.loads(copied)
    assert document["schema"] == "vramgui.estimate/1"
    # The whole document of `vramgui estimate --json` (answers.documents.estimate_json), its
    # serving block naming the placement it times included.
    assert copied == report.as_json(window.controller.document())
    assert document["serving"]["placement"]["text"] and "largest_fitting" in document
    per_gpu = document["per_gpu"]
    assert sum(per_gpu["components"].values()) == per_gpu["total_bytes"]
    # A card added by hand and checked is listed as `estimate --vram-gib --gpu-gbps` lists one.
    card = custom_gpu(20.0, 500.0)
    window.gpu_panel.add_card(card)
    qtbot.waitUntil(lambda: card.name in [name for name, _ in window.controller.capacities])
    window.action_copy_json.trigger()
    listed = json.loads(QGuiApplication.clipboard().text())["custom_gpus"]
    assert [c["name"] for c in listed] == [card.name] and listed[0]["memory_bytes"] == 20 * 2**30
    window.action_copy_text.trigger()
    assert "Peak per GPU" in QGuiApplication.clipboard().text()
    target = tmp_path / "chart.png"
    assert window.export_chart(window.breakdown_chart, str(target))
    assert target.stat().st_size > 1000


def test_window_state_and_inputs_are_restored(make_window, qtbot, services, settings):
    window = make_window()
    window.workload_panel.seq.spin.setValue(4096)
    window.action_gb.trigger()
    settle(qtbot, window, seq=4096)
    window.resize(1234, 777)
    window.close()
    again = make_window(services, settings)
    assert again.controller.workload.seq == 4096
    assert again.unit == "GB"
    # The platform may clamp a restored size to its screen; the default size must not come back.
    assert again.size() != QSize(1500, 940)
    assert abs(again.size().height() - 777) <= 10


def test_local_gpus_are_listed_and_held_against(make_window, probe, qtbot):
    probe.snapshot_value = GpuSnapshot(
        gpus=(
            LocalGpu(
                0,
                "NVIDIA GeForce RTX 3090",
                "GPU-1",
                24 * GiB,
                20 * GiB,
                4 * GiB,
                None,
                (),
                4,
                16,
                False,
                None,
            ),
        ),
        driver_version="550.54",
    )
    window = make_window()
    qtbot.waitUntil(lambda: window.gpu_panel.local_group.childCount() == 1, timeout=5000)
    assert not window.gpu_panel.reason.isVisibleTo(window)
    assert window.controller.capacities[0] == ("GPU 0: NVIDIA GeForce RTX 3090", 24 * GiB)
    window.gpu_panel.use_free.setChecked(True)
    assert window.controller.capacities[0][1] == 20 * GiB


def test_excepthook_logs_and_shows_a_dialog(qtbot, monkeypatch, log_file):
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append(self.text()) or 0)
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        app.handle_exception(RuntimeError, exc, exc.__traceback__)
    assert shown == ["RuntimeError: boom"]
    assert "RuntimeError: boom" in log_file.read_text()


def test_droppable_paths(tmp_path):
    from PySide6.QtCore import QUrl

    (tmp_path / "m.gguf").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    urls = [QUrl("https://example.com/x.gguf"), QUrl.fromLocalFile(str(tmp_path / "notes.txt"))]
    assert droppable_path(urls) is None
    assert droppable_path([*urls, QUrl.fromLocalFile(str(tmp_path / "m.gguf"))]).endswith("m.gguf")
    assert droppable_path([QUrl.fromLocalFile(str(tmp_path))]) == str(tmp_path)


def test_table_models_pass_the_model_tester(qtmodeltester):
    from vramgui.sources.hub import HubModel

    breakdown = BreakdownModel()
    breakdown.set_components({"weights": 10 * GiB, "kv_cache": GiB}, "GiB")
    qtmodeltester.check(breakdown)
    assert breakdown.index(2, 0).data() == "Total per GPU"
    results = SearchResultsModel()
    results.set_results([HubModel("a/b", 7_000_000_000, 10, gated=True), HubModel("c", None)])
    qtmodeltester.check(results)
    assert results.index(0, 1).data() == "7B"
    assert results.rowCount(QModelIndex()) == 2


def test_main_opens_the_window_and_exits(qapp, qtbot, monkeypatch):
    """``vramgui`` without arguments: identity, log file, window, clean exit."""
    from PySide6.QtWidgets import QApplication

    shown = []

    def run_until_shown(_app):
        # Stands in for the real event loop, which a test must not enter (nor quit).
        qtbot.waitUntil(lambda: any(isinstance(w, MainWindow) for w in visible()), timeout=10000)
        for window in visible():
            shown.append(type(window).__name__)
            window.close()
        return 0

    def visible():
        return [w for w in QApplication.topLevelWidgets() if w.isVisible()]

    monkeypatch.setattr("sys.excepthook", sys.excepthook)
    monkeypatch.setattr(QApplication, "exec", run_until_shown)
    root = logging.getLogger()
    handlers = list(root.handlers)
    try:
        started = []
        assert app.main(["vramgui"], on_started=started.append) == 0
    finally:
        for handler in root.handlers[len(handlers) :]:
            root.removeHandler(handler)
            handler.close()
        QThreadPool.globalInstance().waitForDone(5000)
    assert "MainWindow" in shown
    assert started == [qapp]
    assert qapp.desktopFileName() == app.DESKTOP_FILE
    assert qapp.applicationName() == "vramgui"
    assert not qapp.windowIcon().isNull()
    assert "starting" in app.log_path().read_text()


def test_a_pooled_engine_says_whose_pool_the_bar_is(make_window, qtbot):
    window = make_window()
    window.controller.update(engine="vllm")
    settle(qtbot, window, engine="vllm")
    assert "peak at serving (pre-allocated KV pool)" in window.subline.text()  # one GPU
    check_gpu(window, "H100 SXM")
    target = window.controller.capacities[0][0]
    qtbot.waitUntil(
        lambda: f"KV pool pre-allocated on {target}; each GPU its own" in window.subline.text(),
        timeout=10000,
    )
    assert len(window.controller.analysis.fit) == 2
    window.controller.update(engine="transformers")
    settle(qtbot, window, engine="transformers")
    assert "pre-allocated" not in window.subline.text()
