"""The Training panel's loop choice, driven through the real window."""

from __future__ import annotations

from tests.ui.waiting import settled


def test_custom_loop_adds_the_kept_logits(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    assert panel.loop.value() == "trainer"
    assert "outputs = model(**batch)" in panel.loop.toolTip()
    assert "Trainer" in panel.loop.toolTip()
    panel.mode.setCurrentIndex(panel.mode.findData("training"))
    settled(qtbot, window, mode="training", loop="trainer")
    assert panel.loop.isVisibleTo(window) and panel.loop.isEnabled()
    trainer = window.controller.analysis.estimate
    panel.loop.setCurrentIndex(panel.loop.findData("custom"))
    settled(qtbot, window, mode="training", loop="custom")
    custom = window.controller.analysis.estimate
    assert custom.components.get("logits", 0) > trainer.components.get("logits", 0)
    assert custom.total_bytes > trainer.total_bytes


def test_the_loop_is_hidden_for_inference(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    settled(qtbot, window, mode="inference")
    assert not panel.loop.isVisibleTo(window)
