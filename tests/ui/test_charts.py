from __future__ import annotations

from vramgui.core.dtypes import SCHEMES
from vramgui.ui.axes import nice_ceiling, nice_step
from vramgui.ui.breakdown_chart import BreakdownChart
from vramgui.ui.palette import COMPONENT_COLOURS
from vramgui.ui.precision_panel import PrecisionPanel
from vramgui.ui.widgets import SHORT_TEXT_ROLE

GIB = 1 << 30


def test_capacity_labels_near_the_left_edge_go_right_of_their_line(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    chart.set_data(
        {"weights": 20 * GIB},
        [("small", 2 * GIB, False, -18 * GIB), ("big", 80 * GIB, True, 60 * GIB)],
    )
    small, big = chart.marks
    assert small.label_right
    assert not big.label_right
    assert chart.right >= 80  # the axis reaches past the biggest capacity


def test_quantization_box_shows_a_short_text(qtbot):
    panel = PrecisionPanel(SCHEMES)
    qtbot.addWidget(panel)
    for value, expected in (("nf4", "bnb NF4 · 4.13 bits"), ("Q4_K_M", "Q4_K_M · 4.5 bits")):
        panel.quant.set_value(value)
        short = panel.quant.currentData(SHORT_TEXT_ROLE)
        assert short == expected and len(short) < len(panel.quant.currentText().strip())


def test_legend_lists_the_components_shown_in_order(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    chart.set_data({"weights": 8 * GIB, "kv_cache": 2 * GIB}, [])
    assert chart.legend_text() == "Weights  KV cache"
    chart.set_data({"weights": 8 * GIB, "gradients": 8 * GIB, "optimizer_states": 16 * GIB}, [])
    text = chart.legend_text()
    assert "KV cache" not in text
    assert text.index("Weights") < text.index("Gradients") < text.index("Optimizer")


def test_chart_paints_its_bar_in_component_colours(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    chart.resize(600, 220)
    chart.set_data({"weights": 30 * GIB, "kv_cache": 10 * GIB}, [("big", 80 * GIB, True, 40 * GIB)])
    image = chart.grab().toImage()
    start, width = chart.segment("weights")
    assert (start, width) == (0.0, 30.0)
    colours = {image.pixelColor(x, y).name() for x in range(0, 600, 3) for y in range(0, 220, 3)}
    assert COMPONENT_COLOURS["weights"].lower() in colours
    assert COMPONENT_COLOURS["kv_cache"].lower() in colours


def test_axis_steps_are_round():
    assert nice_ceiling(23.1) == 30
    assert nice_ceiling(0.9) == 1
    assert nice_step(80, 8) == 10
    assert nice_step(3, 6) == 0.5
