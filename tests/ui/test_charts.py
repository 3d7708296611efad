from __future__ import annotations

from vramgui.core.dtypes import SCHEMES
from vramgui.ui.charts import MAX_LEGENDS, BreakdownChart
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
    small, big = chart.lines.lines[:2]
    assert small.label.anchors[0] == (0, 0.5)
    assert big.label.anchors[0] == (1, 0.5)


def test_quantization_box_shows_a_short_text(qtbot):
    panel = PrecisionPanel(SCHEMES)
    qtbot.addWidget(panel)
    panel.quant.set_value("none")
    short = panel.quant.currentData(SHORT_TEXT_ROLE)
    assert short and len(short) < len(panel.quant.currentText().strip())
    assert "16 bits" in short


def test_legend_lists_the_components_shown_in_order(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    chart.set_data({"weights": 8 * GIB, "kv_cache": 2 * GIB}, [])
    assert chart.legend_text().split() == ["■", "Weights", "■", "KV", "cache"]
    chart.set_data({"weights": 8 * GIB, "gradients": 8 * GIB, "optimizer_states": 16 * GIB}, [])
    text = chart.legend_text()
    assert "KV cache" not in text
    assert text.index("Weights") < text.index("Gradients") < text.index("Optimizer")


def test_legends_kept_for_switching_are_bounded(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    names = ["weights", "kv_cache", "activations", "gradients", "optimizer_states", "logits"]
    for mask in range(1, 40):
        chosen = {name: GIB for bit, name in enumerate(names) if mask >> bit & 1}
        chart.set_data(chosen, [])
        shown = [item for item in chart._legends.values() if item.isVisible()]
        assert len(shown) == 1 and shown[0] is chart.legend
    assert len(chart._legends) <= MAX_LEGENDS
    # The last set (bits of 39): weights, KV cache, activations, logits.
    text = chart.legend_text()
    assert "Weights" in text and "Logits" in text and "Gradients" not in text
