"""The Training panel's loop choice, driven through the real window."""

from __future__ import annotations


def _settle(qtbot, window, **expected):
    def done():
        analysis = window.controller.analysis
        if analysis is None:
            return False
        w = analysis.estimate.workload
        return all(getattr(w, k) == v for k, v in expected.items())

    qtbot.waitUntil(done, timeout=10000)


def test_custom_loop_adds_the_kept_logits(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    assert panel.loop.value() == "trainer"
    assert "outputs = model(**batch)" in panel.loop.toolTip()
    assert "Trainer" in panel.loop.toolTip()
    panel.mode.setCurrentIndex(panel.mode.findData("training"))
    _settle(qtbot, window, mode="training", loop="trainer")
    assert panel.loop.isVisibleTo(window) and panel.loop.isEnabled()
    trainer = window.controller.analysis.estimate
    panel.loop.setCurrentIndex(panel.loop.findData("custom"))
    _settle(qtbot, window, mode="training", loop="custom")
    custom = window.controller.analysis.estimate
    assert custom.components.get("logits", 0) > trainer.components.get("logits", 0)
    assert custom.total_bytes > trainer.total_bytes


def test_the_loop_is_hidden_for_inference(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    _settle(qtbot, window, mode="inference")
    assert not panel.loop.isVisibleTo(window)
