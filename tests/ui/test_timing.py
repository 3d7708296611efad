"""The time / cost line under the headline, the advisor's ranking and the comparison's rows."""

from __future__ import annotations

import dataclasses

import pytest

from tests.ui.waiting import settled
from vramgui.answers.estimate import compute_outlook
from vramgui.answers.host import UNKNOWN_HOST
from vramgui.answers.rates import Rates, catalog_rates
from vramgui.answers.timing import MORE_GPUS, TimedPlacement, time_setup
from vramgui.core.estimate import estimate
from vramgui.core.model import ModelRef
from vramgui.core.speed import Hardware, Price, Utilization
from vramgui.core.units import GiB, format_rate
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu, load_catalog
from vramgui.profiles import Profile
from vramgui.sources.resolve import load_model
from vramgui.ui import compare_view, timing

LORA = Workload(mode="training", method="lora", precision="pure", batch=2, seq=1024)


def _rates(price=2.0):
    hardware = Hardware("Test GPU", 312e12, 2e12, 300e9, 25e9, architecture="Ampere")
    return Rates(find_gpu("A100 80GB"), hardware,
                 None if price is None else Price(price, "USD", "test", "2026-01-01"),
                 Utilization.default_for("Ampere"))  # fmt: skip


def summarize_speed(spec, workload, gpu, rates, train_tokens):
    """The setup timed on one 80 GiB GPU named ``gpu`` (it fits: timed as chosen)."""
    tokens = train_tokens if workload.mode == "training" else None
    est = estimate(spec, workload)
    return time_setup(spec, est, gpu, 80 * GiB, rates, host=UNKNOWN_HOST, train_tokens=tokens)


def test_catalog_rates_know_catalog_and_nvml_names_and_nothing_else():
    rates = catalog_rates(load_catalog())
    a100 = rates("NVIDIA A100-SXM4-80GB", "bf16") or rates("A100 80GB", "bf16")
    assert a100 is not None and a100.hardware.architecture == "Ampere"
    assert a100.price is not None and a100.price.date
    assert rates("Some Unknown Accelerator", "bf16") is None
    assert rates("Apple M2 Ultra 192GB", "bf16") is None  # no tensor rate: no speed
    measured = Utilization(matmul=0.3, attention=0.2, source="measured", detail="here")
    calibrated = catalog_rates(load_catalog(), lambda name: measured)
    assert calibrated("A100 80GB", "bf16").utilization is measured


def test_a_training_line_says_time_cost_and_speed():
    spec = load_model("llama-3.2-1b").spec
    summary = summarize_speed(spec, LORA, "Test GPU", _rates(), 200_000_000)
    text = timing.speed_text(summary)
    assert "200M tokens in <b>" in text and "for <b>$" in text
    assert f"{summary.tokens_per_second:,.0f} tokens/s on Test GPU" in text
    assert summary.cost == pytest.approx(summary.gpu_hours * 2.0)
    tip = timing.speed_tooltip(summary)
    assert "65% of the GPU's 16-bit tensor peak" in tip and "test, 2026-01-01" in tip
    assert "no rental price" in timing.speed_text(
        summarize_speed(spec, LORA, "Test GPU", _rates(None), 10**8)
    )


def test_an_inference_line_says_decode_per_sequence_and_the_cost_per_million_tokens():
    spec = load_model("llama-3.2-1b").spec
    summary = summarize_speed(spec, Workload(batch=8), "Test GPU", _rates(), 10**8)
    text = timing.speed_text(summary)
    per_sequence = format_rate(summary.tokens_per_second / 8)
    assert text.startswith(f"<b>{per_sequence} tokens/s</b> decode per sequence")
    assert "at batch 8" in text and "per million tokens" in text
    # transformers: the roofline, said to be unmeasured
    assert "roofline, not measured" in text
    # What bounds the step in words (was "bound by memory"), as the command line says it.
    assert summary.bound == "memory" and "s, GPU-memory-bound" in timing.speed_tooltip(summary)


def test_a_vllm_line_says_its_step_rests_on_published_serving_runs():
    """vLLM's speed is its fitted step: measured where published vLLM runs covered the GPU,
    extrapolated elsewhere, and the tooltip names serving runs, not llama-bench rows."""
    spec = load_model("llama-3.2-1b").spec
    rates = catalog_rates(load_catalog())
    vllm = Workload(engine="vllm", batch=8)
    covered = summarize_speed(spec, vllm, "H100 SXM", rates("H100 SXM", "bf16"), None)
    assert covered.basis == "measured" and covered.engine == "vllm"
    assert "at batch 8), measured" in timing.speed_text(covered)
    tip = timing.speed_tooltip(covered)
    assert "published serving runs" in tip and "llama-bench" not in tip
    other = summarize_speed(spec, vllm, "L40S", rates("L40S", "bf16"), None)
    assert other.basis == "extrapolated"
    assert "on other GPUs" in timing.speed_tooltip(other)


def test_a_host_bound_vllm_line_gives_the_range_of_the_host_classes_in_its_tooltip():
    """A 1B model under vLLM at one request: the host's CPU sets the step, so the tooltip says
    the figure is the slow host class's and gives the fast class's speed as the range."""
    spec = load_model("llama-3.2-1b").spec
    rates = catalog_rates(load_catalog())
    one = summarize_speed(spec, Workload(engine="vllm", batch=1), "H100 SXM", rates("H100 SXM", "bf16"), None)  # fmt: skip
    low, high = one.host_range
    assert one.bound == "host" and low == one.tokens_per_second and high > 1.5 * low
    tip = timing.speed_tooltip(one)
    assert "host-bound" in tip and f"{low:,.0f} to {high:,.0f} tokens/s by the host" in tip


def test_the_window_shows_the_line_and_takes_tokens_and_a_price(qtbot, make_window):
    window = make_window()
    c = window.controller
    c.set_workload(LORA)
    settled(qtbot, window, mode="training")
    qtbot.waitUntil(lambda: c.analysis is not None and c.analysis.speed is not None)
    line = window.speed_line
    assert "tokens/s on" in line.text.text() and line.tokens.isVisible()
    first = c.analysis.speed
    line.tokens.setText("1B")
    line.tokens.editingFinished.emit()
    qtbot.waitUntil(lambda: c.analysis.speed.train_tokens == 10**9)
    assert c.analysis.speed.time_seconds == pytest.approx(10 * first.time_seconds, rel=1e-6)
    line.tokens.setText("lots")
    line.tokens.editingFinished.emit()
    assert line.tokens.text() == "1B" and c.train_tokens == 10**9  # a bad figure goes back
    line.price.setValue(1.0)
    qtbot.waitUntil(lambda: c.analysis.speed.price.source == "set in the window")
    assert c.analysis.speed.cost == pytest.approx(c.analysis.speed.gpu_hours * 1.0)
    line.price.setValue(0.0)  # back to the catalog's
    qtbot.waitUntil(lambda: c.analysis.speed.price.source != "set in the window")
    qtbot.waitUntil(window.advisor.ranking.isVisible, timeout=15000)
    advisor = window.advisor
    cheapest = advisor.ranking.text()
    assert "GPUs to rent" in advisor.ranking_title.text()
    assert advisor.rank_order.currentData() == "cost"
    advisor.rank_order.setCurrentIndex(advisor.rank_order.findData("time"))
    fastest = advisor.ranking.text()
    outlook = c.outlook
    assert fastest != cheapest
    assert fastest.index(outlook.ranked_by_time[0].gpu) < fastest.index(
        outlook.ranked_by_time[1].gpu
    )
    speeds = [r.tokens_per_second for r in outlook.ranked_by_time]
    assert speeds == sorted(speeds, reverse=True)
    assert {r.gpu for r in outlook.ranked} == {r.gpu for r in outlook.ranked_by_time}


def test_without_a_catalog_gpu_the_line_says_how_to_get_one(qtbot, make_window):
    window = make_window()
    window.controller.set_capacities(())
    qtbot.waitUntil(lambda: window.controller.analysis.speed is None)
    assert window.speed_line.text.text() == timing.NO_TARGET


def test_the_outlook_ranks_the_offered_gpus_by_cost():
    spec = load_model("llama-3.2-1b").spec
    from vramgui.core.estimate import estimate

    cheap, dear = _rates(1.0), _rates(3.0)
    outlook = compute_outlook(
        estimate(spec, LORA), spec, LORA, field="seq", target=None, max_seq=8192,
        offers=[("dear", 80 * 2**30, dear), ("cheap", 80 * 2**30, cheap)], train_tokens=10**8,
    )  # fmt: skip
    assert [r.gpu for r in outlook.ranked] == ["cheap", "dear"]
    text = timing.ranked_text(outlook.ranked, "training")
    assert text.index("cheap") < text.index("dear") and "1. 1 x cheap" in text


def test_the_comparison_times_each_profile_and_orders_them_by_cost(qtbot):
    ref = ModelRef(kind="catalog", id="llama-3.2-1b")
    profiles = [
        Profile("on H100", ref, LORA, ("H100 SXM",)),
        Profile("on A100", ref, LORA, ("A100 SXM 80GB",)),
        Profile("on a 3060", ref, LORA, ("RTX 3060 12GB",)),  # no rental price
    ]
    results = [compare_view.reestimate(p, load_model) for p in profiles]
    rows = {r.label: r for r in compare_view.comparison_rows(results)}
    assert "Time and cost" in rows
    assert all("tokens" not in c or c == "-" for c in rows["Cost per million tokens"].cells)
    assert rows["Cost per million tokens"].cells[2] == "-"
    assert rows["Training 100M tokens"].cells[0] != "-"
    ordered = compare_view.cost_order(results)
    costs = [timing.timed(r.document)["cost_per_million_tokens"] for r in ordered]
    assert costs[-1] is None and costs[0] <= costs[1]
    view = compare_view.CompareView()
    qtbot.addWidget(view)
    view.show_results(results)
    view.cheapest_first.setChecked(True)
    headers = [view.model.headerData(i, compare_view.Qt.Orientation.Horizontal) for i in range(3)]
    assert headers == [r.profile.name for r in ordered]


def test_the_application_reads_the_stored_calibrations_at_start():
    import datetime as dt

    from vramgui.hardware import calibration
    from vramgui.hardware.gpus import find_gpu
    from vramgui.hardware.rates import speed_hardware
    from vramgui.ui import app

    spec = load_model("llama-3.2-1b").spec
    hardware = speed_hardware(find_gpu("A100 80GB"), "bf16")
    from vramgui.core.speed import training_speed

    work = LORA.with_(batch=8, seq=2048)
    speed = training_speed(spec, work, hardware, Utilization(matmul=0.4, attention=0.3))
    calibration.save(
        calibration.calibrate(
            spec,
            work,
            hardware,
            tokens_per_second=speed.tokens_per_second,
            device="NVIDIA A100",
            now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        )
    )
    services = app.real_services()
    measured = services.measured_utilization("A100 SXM 80GB")
    assert measured is not None and measured.source == "measured"
    assert measured.matmul == pytest.approx(0.4, abs=1e-3)
    assert services.measured_utilization("H100 SXM") is None
    rates = catalog_rates(services.gpu_catalog, services.measured_utilization)
    assert rates("A100 80GB", "bf16").utilization is measured
    summary = summarize_speed(spec, work, "A100 SXM 80GB", rates("A100 80GB", "bf16"), 10**8)
    assert "measured on this GPU model (NVIDIA A100" in timing.speed_tooltip(summary)


def test_a_narrow_comparison_shortens_its_title_and_never_cuts_a_word(qtbot):
    """Beside its check boxes at 1280x720 the title says less, then ends in "…", never "(highl"."""
    ref = ModelRef(kind="catalog", id="llama-3.2-1b")
    profiles = [Profile(f"on {g}", ref, LORA, (g,)) for g in ("H100 SXM", "A100 SXM 80GB")]
    view = compare_view.CompareView()
    qtbot.addWidget(view)
    view.show_results([compare_view.reestimate(p, load_model) for p in profiles])
    full = view.title.text()
    assert full.startswith("Comparing 2 profiles: ") and full.endswith("(highlighted)")
    metrics = view.title.fontMetrics()
    for width, ending in (
        (metrics.horizontalAdvance(full) + 8, "(highlighted)"),
        (metrics.horizontalAdvance("2 profiles, 99 line(s) differ") + 8, "differ"),
        (60, "…"),
    ):
        view.title.resize(width, view.title.height())
        shown = view.title.shown_text()
        assert shown.endswith(ending), (width, shown)
        assert metrics.horizontalAdvance(shown) <= width


def test_a_narrow_line_names_the_gpus_timed_and_leaves_the_flags_to_its_tooltip(qtbot):
    """The placement's flags go first when the line is too narrow, never cut mid-word."""
    spec = load_model("llama-3.2-1b").spec
    summary = dataclasses.replace(
        summarize_speed(spec, Workload(), "Test GPU", _rates(), 10**8),
        placement=TimedPlacement(MORE_GPUS, "Test GPU", 2, "tensor parallel over 2 GPUs"),
    )
    line = timing.SpeedLine()
    qtbot.addWidget(line)
    line.resize(3000, line.height())
    line.show()
    qtbot.waitExposed(line)
    line.show_summary(summary, 10**8)
    assert line.text.text().endswith(
        "on 2 x Test GPU (tensor parallel over 2 GPUs; fewer do not hold it)"
    )
    line.resize(700, line.height())
    assert line.text.text().endswith("on 2 x Test GPU")
    assert "tensor parallel over 2 GPUs" in line.text.toolTip()
    line.resize(3000, line.height())
    assert line.text.text().endswith("fewer do not hold it)")
