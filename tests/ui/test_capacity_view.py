"""The Serving tab and the vLLM controls: what vLLM does with each chosen GPU, in the window."""

from __future__ import annotations

from vramgui.answers.capacity import serving_report
from vramgui.core.units import GiB
from vramgui.ui.capacity_view import ServingChart
from vramgui.ui.extra_views import LazyTab, view_of
from vramgui.ui.workload_panel import VLLM_DEFAULT

from .test_offload_tab import show_tab
from .waiting import settled

RTX_4090 = ("RTX 4090", 24 * GiB)
H100 = ("H100 SXM", 80 * GiB)


def _serving(window, qtbot):
    tab = window.extra_tabs["Serving"]
    assert isinstance(tab, LazyTab)
    show_tab(window, "Serving")
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    return view_of(tab)


def test_the_tab_shows_each_gpu_start_pool_and_concurrency(make_window, qtbot):
    window = make_window()
    c = window.controller
    c.set_capacities((RTX_4090, H100))
    c.update(engine="vllm", seq=131072)
    settled(qtbot, window, engine="vllm", seq=131072)
    view = _serving(window, qtbot)
    qtbot.waitUntil(lambda: view.report is not None and view.report.seq == 131072, timeout=10000)
    rows = {
        view.table.item(r, 0).text(): [view.table.item(r, col).text() for col in range(7)]
        for r in range(view.table.rowCount())
    }
    report = {g.name: g for g in view.report.gpus}
    # The RTX 4090 cannot hold one request of 131,072 tokens: vLLM's own error, the longest
    # length that starts and the change that makes it start.
    rtx = report["RTX 4090"].startup
    assert rows["RTX 4090"][1] == "would not start"
    assert rows["RTX 4090"][3] == f"{rtx.pool_tokens:,}"
    assert rows["RTX 4090"][4] == f"{rtx.max_concurrency:.2f}"
    assert rows["RTX 4090"][5] == f"{rtx.largest_model_len:,}"
    assert report["RTX 4090"].cheapest is not None and report["RTX 4090"].cheapest.fits
    assert "estimated maximum model length" in view.error.text() and view.error.isVisible()
    assert rows["H100 SXM"][1] == "starts"
    assert float(rows["H100 SXM"][4]) > 1
    # The estimate's details say the same of the target GPU (the first).
    details = c.analysis.estimate.details
    assert details["kv_pool_tokens"] == rtx.pool_tokens
    assert details["max_concurrency"] == round(rtx.max_concurrency, 2)
    # The chart names every GPU for a screen reader, and the one that does not start.
    assert "RTX 4090: vLLM would not start" in view.chart.accessibleDescription()
    # Applying the cheapest change makes vLLM start on the target.
    assert view.apply.isVisible()
    view.apply.click()
    qtbot.waitUntil(
        lambda: c.analysis is not None and c.analysis.estimate.details.get("vllm_starts"),
        timeout=10000,
    )


def test_another_engine_offers_vllm(make_window, qtbot):
    window = make_window()
    window.controller.set_capacities((RTX_4090,))
    view = _serving(window, qtbot)
    qtbot.waitUntil(view.use_vllm.isVisible, timeout=10000)
    assert view.report is None and not view.table.isVisible()
    view.use_vllm.click()
    qtbot.waitUntil(lambda: view.report is not None, timeout=10000)
    assert window.controller.workload.engine == "vllm"


def test_vllm_controls_show_with_vllm_and_move_the_estimate(make_window, qtbot):
    window = make_window()
    panel, c = window.workload_panel, window.controller
    c.set_capacities((RTX_4090,))
    assert not panel.vllm_box.isVisible()
    c.update(engine="vllm", seq=8192)
    settled(qtbot, window, engine="vllm", seq=8192)
    assert panel.vllm_box.isVisible()
    assert panel.max_num_seqs.text() == VLLM_DEFAULT
    before = c.analysis.estimate.details["kv_pool_tokens"]
    panel.max_num_seqs.setValue(8)
    settled(qtbot, window, max_num_seqs=8)
    assert c.analysis.estimate.details["kv_pool_tokens"] > before
    panel.enable_lora.setChecked(True)
    settled(qtbot, window, enable_lora=True)
    assert panel.max_loras.isEnabled() and c.analysis.estimate.details["vllm_lora_bytes"] > 0
    assert not panel.draft_model.isEnabled()
    panel.speculative.setCurrentIndex(panel.speculative.findData("draft"))
    settled(qtbot, window, speculative="draft")
    assert panel.draft_model.isEnabled()
    panel.draft_model.setText("llama-3.2-1b")
    panel.draft_model.editingFinished.emit()
    qtbot.waitUntil(lambda: c.draft is not None, timeout=10000)
    assert c.draft.name == "meta-llama/Llama-3.2-1B"


def test_the_report_and_chart_without_a_window(qtbot):
    from vramgui.core.workload import Workload
    from vramgui.sources.catalog import load_catalog

    spec = next(e for e in load_catalog() if e.name == "qwen3-8b").spec()
    report = serving_report(spec, Workload(engine="vllm", seq=40960), [RTX_4090, H100])
    rtx, h100 = report.gpus
    lengths = [length for length, _ in rtx.curve]
    assert lengths == sorted(lengths) and 40960 in lengths and lengths[0] == 1024
    # Longer requests, fewer of them at once.
    values = [value for _, value in rtx.curve]
    assert values == sorted(values, reverse=True)
    assert all(b > a for (_, a), (_, b) in zip(rtx.curve, h100.curve, strict=True))
    chart = ServingChart()
    qtbot.addWidget(chart)
    chart.resize(800, 300)
    chart.set_report(report)
    assert chart.grab().width() == 800
    assert "H100 SXM:" in chart.accessibleDescription()


def test_the_prefix_caching_choice_reaches_the_workload(qtbot):
    from vramgui.core.workload import Workload
    from vramgui.ui.workload_panel import WorkloadPanel

    panel = WorkloadPanel()
    qtbot.addWidget(panel)
    panel.set_workload(Workload(engine="vllm", enable_prefix_caching=False), {}, 4096)
    assert panel.enable_prefix_caching.value() == "off"
    combo = panel.enable_prefix_caching
    with qtbot.waitSignal(panel.changed) as signal:
        combo.setCurrentIndex(combo.findData("on"))
    assert signal.args == [{"enable_prefix_caching": True}]
    with qtbot.waitSignal(panel.changed) as signal:
        combo.setCurrentIndex(combo.findData("default"))
    assert signal.args == [{"enable_prefix_caching": None}]


def test_a_tower_left_out_of_the_profile_marks_the_figures_as_upper_bounds(qtbot):
    from unittest.mock import MagicMock

    from vramgui.core.workload import Workload
    from vramgui.sources.catalog import load_catalog
    from vramgui.ui.capacity_view import CapacityView

    spec = next(e for e in load_catalog() if e.name == "lfm2.5-vl-1.6b").spec()
    report = serving_report(spec, Workload(engine="vllm", seq=32768), [H100])
    view = CapacityView(MagicMock())
    qtbot.addWidget(view)
    view.show_report(report)
    cells = [view.table.item(0, col).text() for col in range(7)]
    up = report.gpus[0].startup
    assert cells[1] == "may start"
    assert cells[3] == f"≤ {up.pool_tokens:,}" and cells[4] == f"≤ {up.max_concurrency:.2f}"
    assert "vision tower" in view.error.text() and "upper bounds" in view.error.text()
    assert "at most" in view.chart.accessibleDescription()


def test_the_window_offers_sglang_and_its_own_settings(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    assert panel.engine.findData("sglang") >= 0
    assert not panel.sglang_box.isVisible()
    panel.engine.setCurrentIndex(panel.engine.findData("sglang"))
    settled(qtbot, window, engine="sglang")
    qtbot.waitUntil(panel.sglang_box.isVisible, timeout=2000)
    assert not panel.vllm_box.isVisible()
    # The static share starts at SGLang's default for the GPU; a value set reaches the estimate.
    assert panel.mem_fraction_static.text() == "Default"
    panel.mem_fraction_static.setValue(0.8)
    settled(qtbot, window, engine="sglang", mem_fraction_static=0.8)
    combo = panel.sglang_version
    combo.setCurrentIndex(combo.findData("0.4.9"))
    settled(qtbot, window, sglang_version="0.4.9")
    estimate = window.controller.analysis.estimate
    assert estimate.sglang is not None
    assert any("SGLang" in note for note in estimate.notes)
    # Back to its default: the spin box's minimum.
    panel.mem_fraction_static.setValue(panel.mem_fraction_static.minimum())
    settled(qtbot, window, mem_fraction_static=None)
