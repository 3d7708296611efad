"""The offload view's QPainter charts: what they draw, their axes and their hover texts."""

from __future__ import annotations

import itertools
import math

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QFontMetricsF, QMouseEvent
from PySide6.QtWidgets import QApplication

from vramgui.answers.host import UNKNOWN_HOST
from vramgui.answers.offload import bandwidths_for as host_bandwidths
from vramgui.core import offload
from vramgui.core.families import spec_from_config
from vramgui.core.units import GiB, format_rate
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.sources.catalog import find
from vramgui.ui.axes import log_bounds, log_ticks, log_ticks_within, rate_label, short_count
from vramgui.ui.offload_charts import DEVICE_COLOURS, LayerChart, ThroughputChart

Q4 = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)


def bandwidths_for(gpu, **overrides):
    """The speeds of a catalog GPU, the host unknown (default disk, no RAM limit)."""
    return host_bandwidths(gpu, UNKNOWN_HOST, **overrides)


@pytest.fixture(scope="module")
def placement():
    spec = spec_from_config(find("llama-2-7b").config, "llama-2-7b")
    return offload.llamacpp_model(spec, Q4).place(4 * GiB, host_ram_bytes=16 * GiB)


def colours_in(widget) -> set[str]:
    image = widget.grab().toImage()
    return {
        image.pixelColor(x, y).name()
        for x in range(0, image.width(), 2)
        for y in range(0, image.height(), 2)
    }


def hover(widget, at: QPointF) -> None:
    QApplication.sendEvent(
        widget,
        QMouseEvent(
            QEvent.Type.MouseMove,
            at,
            widget.mapToGlobal(at),
            Qt.MouseButton.NoButton,
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
        ),
    )


def test_layer_chart_paints_each_device_and_a_round_axis(qtbot, placement):
    chart = LayerChart()
    qtbot.addWidget(chart)
    chart.resize(900, 300)
    chart.set_placement(placement)
    assert chart.axis_unit == "MiB"  # a 7B layer reads better in MiB
    tallest = max((p.gpu_bytes or p.unit.bytes) + p.unit.kv_cache_bytes for p in placement.units)
    assert chart.top >= tallest / 2**20 * 1.1
    assert chart.top in {m * 10**e for e in range(4) for m in (1, 1.5, 2, 3, 4, 5, 6, 8)}
    painted = colours_in(chart)
    assert DEVICE_COLOURS["gpu"].lower() in painted
    assert DEVICE_COLOURS["cpu"].lower() in painted
    chart.set_unit("GB")
    assert chart.axis_unit == "MB"
    chart.set_placement(None)
    assert chart.legend() == [] and chart.text_at(0.0) == ""
    assert DEVICE_COLOURS["gpu"].lower() not in colours_in(chart)


def test_layer_chart_hover_names_the_bar_under_the_pointer(qtbot, placement):
    chart = LayerChart()
    qtbot.addWidget(chart)
    chart.resize(900, 300)
    chart.set_placement(placement)
    chart.show()
    plot = chart.plot_rect(top_rows=1, bottom_rows=1)
    last = len(placement.units) - 1
    hover(chart, QPointF(chart._x(last, plot), plot.bottom() - 5))
    assert chart.hover_text.startswith("output: GPU 0")  # llama.cpp offloads it first
    hover(chart, QPointF((chart._x(0, plot) + chart._x(1, plot)) / 2, plot.bottom() - 5))
    assert chart.hover_text == ""  # the gap between two bars


def test_throughput_chart_ranges_hold_the_curve_and_its_hover_tells_the_bound(qtbot, placement):
    chart = ThroughputChart()
    qtbot.addWidget(chart)
    chart.resize(700, 240)
    bw = bandwidths_for(find_gpu("RTX 3060"))
    curve = offload.throughput_curve(placement, bw)
    current = offload.decode_throughput(placement, bw)
    turn = offload.compute_bound_batch(placement, bw)
    chart.set_curve(curve, current, turn)
    rates = [t.tokens_per_second for t in curve]
    low, high = chart.y_range
    assert low <= min(rates) and high >= max(rates)
    assert chart.x_range == (1.0, 1024.0)
    plot = chart.plot_rect(top_rows=0, bottom_rows=2)
    point = chart._points(plot)[3][1]
    text = chart.text_at(point.x() + 2, point.y() - 2)
    assert text.startswith(
        f"batch {curve[3].batch}: {format_rate(curve[3].tokens_per_second)} tokens/s"
    )
    assert "bound by" in text
    assert chart.text_at(plot.left() - 30, plot.top()) == ""
    assert "#009e73" in colours_in(chart)  # the compute-bound line
    chart.set_curve((), None, None)
    assert chart._points(plot) == []
    chart.grab()  # an empty chart paints


def test_log_axis_ends_and_ticks_are_round():
    assert log_bounds(27.0, 120.0) == (20.0, 200.0)
    assert log_bounds(0.004, 0.009) == (0.003, 0.02)
    low, high = log_bounds(1.0, 1.0)
    assert low < 1.0 < high
    assert log_ticks(20.0, 200.0) == [20.0, 30.0, 50.0, 100.0, 200.0]
    assert all(
        math.isclose(a, b) for a, b in zip(log_ticks(0.1, 0.5), [0.1, 0.2, 0.3, 0.5], strict=True)
    )
    assert log_ticks_within(0.2, 50.0, most=20) == log_ticks(0.2, 50.0)
    assert log_ticks_within(0.2, 50.0, most=8) == pytest.approx(
        [0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
    )
    assert log_ticks_within(0.2, 50.0, most=6) == pytest.approx([0.3, 1.0, 3.0, 10.0, 30.0])
    assert log_ticks_within(0.2, 50.0, most=2) == [1.0, 10.0]
    assert [rate_label(v) for v in (0.02, 1.0, 1500.0)] == ["0.02", "1", "1,500"]
    assert [short_count(v) for v in (512, 1024, 3 << 20, 1500)] == ["512", "1k", "3M", "1,500"]


def test_unit_names_under_the_bars_never_overlap(qtbot, placement):
    chart = LayerChart()
    qtbot.addWidget(chart)
    chart.set_placement(placement)
    metrics = QFontMetricsF(chart.font())
    for width in (300, 500, 900):
        chart.resize(width, 300)
        plot = chart.plot_rect(top_rows=1, bottom_rows=1)
        labels = chart.name_labels(plot, metrics)
        names = [name for _, name in labels]
        assert names[0] == "emb" and names[-1] == "out"
        spans = [(left, left + metrics.horizontalAdvance(name)) for left, name in labels]
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), (width, names)
