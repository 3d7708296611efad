"""The sweep chart: its axis, what it paints and its hover texts."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QFontMetricsF, QMouseEvent
from PySide6.QtWidgets import QApplication

from vramgui.ui import palette
from vramgui.ui.sweep_chart import SweepChart

GIB = 1 << 30
VALUES = (1024, 2048, 4096, 8192)
TOTALS = (10 * GIB, 12 * GIB, 16 * GIB, 30 * GIB)


def chart_with_data(qtbot, **changes) -> SweepChart:
    chart = SweepChart()
    qtbot.addWidget(chart)
    chart.resize(800, 250)
    data = {
        "totals_bytes": TOTALS,
        "capacities": (("RTX 4090", 24 * GIB),),
        "largest": 4096,
        "current": 2048,
    }
    chart.set_data("seq", VALUES, **(data | changes))
    return chart


def painted(chart: SweepChart) -> set[str]:
    image = chart.grab().toImage()
    return {
        image.pixelColor(x, y).name()
        for x in range(0, image.width(), 2)
        for y in range(0, image.height(), 2)
    }


def move_to(chart: SweepChart, at: QPointF) -> None:
    QApplication.sendEvent(
        chart,
        QMouseEvent(
            QEvent.Type.MouseMove,
            at,
            chart.mapToGlobal(at),
            Qt.MouseButton.NoButton,
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
        ),
    )


def test_axis_holds_curve_and_capacity_in_the_chosen_unit(qtbot):
    chart = chart_with_data(qtbot)
    assert chart.top == 40  # 30 GiB, rounded up
    chart.set_unit("GB")
    assert chart.top == 40  # 32.2 GB
    chart.set_data("batch", VALUES, totals_bytes=TOTALS, capacities=(), largest=None, current=1)
    assert chart.field == "batch" and chart.top == 40


def test_a_curve_far_past_every_capacity_is_cut_where_it_still_reads(qtbot):
    chart = chart_with_data(qtbot, totals_bytes=(10 * GIB, 20 * GIB, 80 * GIB, 400 * GIB))
    assert chart.top == 60  # 2 x the 24 GiB capacity and a margin, rounded; not 400


def test_the_current_estimate_is_always_on_the_chart(qtbot):
    # A full fine-tune of an 8B model: 172 GiB now, the whole curve above a 24 GiB card.
    totals = (160 * GIB, 172 * GIB, 200 * GIB, 900 * GIB)
    chart = chart_with_data(qtbot, totals_bytes=totals, largest=None)
    assert 172 <= chart.top <= 400  # not 900: the curve past twice the current point is cut
    plot = chart.plot_rect(top_rows=0, bottom_rows=2)
    current = chart._points(plot)[VALUES.index(2048)]
    assert plot.top() <= current.y() <= plot.bottom()
    assert palette.COMPONENT_COLOURS["weights"].lower() in painted(chart)


def test_the_largest_that_fits_label_clears_the_capacity_labels(qtbot):
    # A capacity just above the axis floor: its label sits where the largest's label would.
    chart = chart_with_data(qtbot, capacities=(("RTX 4090", 3 * GIB),), largest=8192)
    plot = chart.plot_rect(top_rows=0, bottom_rows=2)
    metrics = QFontMetricsF(chart.font())
    (_, capacity), *_ = chart.capacity_labels(plot, metrics)
    label, rect = chart.largest_label(plot, metrics)
    assert label == "largest that fits: 8,192"
    assert not rect.intersects(capacity)


def test_paints_the_curve_and_the_largest_that_fits(qtbot):
    chart = chart_with_data(qtbot)
    colours = painted(chart)
    assert palette.COMPONENT_COLOURS["weights"].lower() in colours
    assert palette.FIT.lower() in colours
    no_fit_line = chart_with_data(qtbot, largest=None)
    assert palette.FIT.lower() not in painted(no_fit_line)
    empty = chart_with_data(qtbot, totals_bytes=())
    empty.set_data("seq", (), totals_bytes=(), capacities=(), largest=None, current=0)
    assert palette.COMPONENT_COLOURS["weights"].lower() not in painted(empty)


def test_hover_gives_the_nearest_point_and_the_capacity_lines(qtbot):
    chart = chart_with_data(qtbot)
    assert chart.text_at(2048) == f"context 2,048: 12.00 GiB per GPU ({12 * GIB:,} bytes)"
    assert chart.text_at(3000).startswith("context 4,096")  # nearer on the log axis
    plot = chart.plot_rect(top_rows=0, bottom_rows=2)
    move_to(chart, QPointF(chart._x(8192, plot), plot.top() + 10))
    assert chart.hover_text.startswith("context 8,192: 30.00 GiB")
    move_to(chart, QPointF(chart._x(1500, plot), chart._y(24.0, plot)))
    assert chart.hover_text.startswith("RTX 4090: 24.00 GiB")
    move_to(chart, QPointF(2, 2))
    assert chart.hover_text == ""
