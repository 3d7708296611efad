"""Settings the core refuses leave no figure of the last estimate in any tab: each part of it is
cleared or says it belongs to the failure, and all of it comes back with settings that stand."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QGuiApplication, QImage

from tests.ui.test_main_window import settle
from tests.ui.test_offload_tab import show_tab
from vramgui.ui.extra_views import view_of

# Tensor parallel over 3 GPUs cannot split Llama 3.1 8B's 32 attention heads: a setting each
# control allows that the estimate refuses.
REFUSED = {"gpus": 3, "tp": 3}
STANDS = {"gpus": 1, "tp": 1}
REASON = "Tensor parallel “3” does not divide the model's 32 attention heads"


def _estimate_tab(window) -> dict[str, object]:
    """What the Estimate tab shows, part by part."""
    return {
        "speed": window.speed_line.text.text(),
        "rules": window.rules.text(),
        "notes": window.notes.text(),
        "badge tip": window.badge.toolTip(),
        "rows": window.breakdown_model.rowCount(),
        "chart": window.breakdown_chart.legend_text(),
        "ranking": window.advisor.ranking.isVisibleTo(window),
        "ranking text": window.advisor.ranking.text(),
        "advice": window.advisor.summary.text(),
        "gpu badges": dict(window.gpu_panel._fit),
    }


def _drawn_box(chart) -> tuple[float, float, float, float] | None:
    """Where ``chart`` draws anything but its background, as shares of its width and height
    (left, top, right, bottom); None where it draws nothing."""
    image = chart.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    height, width = image.height(), image.width()
    pixels = np.frombuffer(image.constBits(), np.uint32, height * image.bytesPerLine() // 4)
    pixels = pixels.reshape(height, -1)[:, :width]
    ys, xs = np.nonzero(pixels != pixels[0, 0])
    if not len(xs):
        return None
    return xs.min() / width, ys.min() / height, xs.max() / width, ys.max() / height


def _assert_says_no_estimate(chart) -> None:
    """``chart`` draws nothing but a short text in its middle (no axes, no range)."""
    box = _drawn_box(chart)
    assert box is not None, chart.accessibleName()
    left, top, right, bottom = box
    assert 0.3 < left < right < 0.7 and 0.2 < top < bottom < 0.8, (chart.accessibleName(), box)


def test_a_refused_setup_shows_no_figure_of_the_last_estimate_and_they_come_back(
    make_window, qtbot
):
    window = make_window()
    # A setup with notes (vLLM's), a speed, GPUs to rent and rules of thumb.
    with qtbot.waitSignal(window.controller.outlook_changed, timeout=10000):
        window.change({"engine": "vllm"})
    valid = _estimate_tab(window)
    assert valid["rules"] and valid["notes"] and valid["rows"] and valid["ranking text"]
    assert valid["gpu badges"]
    assert "tokens/s" in str(valid["speed"])

    window.change(REFUSED)
    qtbot.waitUntil(lambda: window.banner_kind == "estimate", timeout=10000)
    qtbot.wait(300)  # an outlook of the last setup, were one still on its way
    assert REASON in window.banner.text()
    assert window.headline.text() == "No estimate for these settings"
    failed = _estimate_tab(window)
    assert failed["rules"] == "" and failed["notes"] == ""
    assert failed["rows"] == 0 and failed["chart"] == ""
    assert failed["ranking"] is False
    assert failed["advice"] == "No estimate, so no advice."
    assert failed["gpu badges"] == {}
    assert failed["speed"] == "No speed or cost: these settings have no estimate."
    assert window.controller.outlook is None and window.controller.estimate_error
    # The charts draw no axes (a range of 0 to 1.5 GiB reads as data): "No estimate", centred.
    for chart in (window.breakdown_chart, window.sweep_chart):
        _assert_says_no_estimate(chart)
    # Nothing to copy: the clipboard keeps what it held.
    QGuiApplication.clipboard().setText("kept")
    window.copy_json()
    window.copy_text()
    assert QGuiApplication.clipboard().text() == "kept"
    # Another unit redraws nothing of the last estimate.
    window.set_unit("GB")
    assert _estimate_tab(window) == failed

    window.set_unit("GiB")
    with qtbot.waitSignal(window.controller.outlook_changed, timeout=10000):
        window.change(STANDS)
    assert window.banner_kind == ""
    assert _estimate_tab(window) == valid


def test_the_serving_tab_shows_the_refusal_in_place_of_the_last_start_up(make_window, qtbot):
    window = make_window()
    window.change({"engine": "vllm"})
    settle(qtbot, window, engine="vllm")
    tab = window.extra_tabs["Serving"]
    show_tab(window, "Serving")
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    view = view_of(tab)
    qtbot.waitUntil(lambda: view.report is not None, timeout=10000)
    assert view.table.rowCount() == 1 and not view.error.isVisible()

    window.change(REFUSED)
    qtbot.waitUntil(lambda: view.report is None, timeout=10000)
    assert not view.table.isVisible() and view.table.rowCount() == 0
    assert not view.chart.isVisible() and not view.apply.isVisible()
    assert view.error.isVisible() and REASON in view.error.text()

    window.change(STANDS)
    qtbot.waitUntil(lambda: view.report is not None, timeout=10000)
    assert view.table.isVisible() and view.table.rowCount() == 1
    assert not view.error.isVisible()


def test_the_offloading_tab_places_nothing_for_a_refused_setup(make_window, qtbot):
    window = make_window()
    tab = window.extra_tabs["Offloading"]
    show_tab(window, "Offloading")
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    view = view_of(tab)
    qtbot.waitUntil(lambda: "tokens/s" in view.summary.text(), timeout=10000)
    assert view.placement is not None and view.launch_text.toPlainText()

    window.change(REFUSED)

    def placed_nothing() -> bool:
        # The placement at once, its speeds and launch settings in the next turn.
        return view.placement is None and view.throughput is None

    qtbot.waitUntil(placed_nothing, timeout=10000)
    assert REASON in view.summary.text() and "tokens/s" not in view.summary.text()
    assert view.launch_text.toPlainText() == ""
    # No plan, so no axes: the layer chart's 0 to 1 and the batch chart's ranges of the last
    # plan read as figures. Each chart says "No estimate", centred.
    for chart in (
        view.layer_chart,
        view.memory_chart,
        view.first_token_chart,
        view.throughput_chart,
    ):
        _assert_says_no_estimate(chart)

    window.change(STANDS)
    qtbot.waitUntil(lambda: "tokens/s" in view.summary.text(), timeout=10000)
    assert view.placement is not None
