"""RoPE scaling beside the context: it lifts the context's limit as the engines do, and a context
past the limit is refused with the control named."""

from __future__ import annotations

from tests.ui.test_main_window import settle


def _qwen3(make_window, qtbot):
    window = make_window()
    window.controller.load_source("qwen3-30b-a3b")
    qtbot.waitUntil(lambda: window.controller.spec.name == "Qwen/Qwen3-30B-A3B", timeout=10000)
    settle(qtbot, window)
    return window


def test_a_context_past_the_model_s_names_the_rope_scaling_control(make_window, qtbot):
    window = _qwen3(make_window, qtbot)
    panel = window.workload_panel
    assert panel.seq.spin.maximum() == 40960
    assert not panel.rope_factor.isVisibleTo(window)
    before = window.controller.workload
    assert not window.controller.update(seq=65536)
    qtbot.waitUntil(lambda: window.banner_kind == "error", timeout=2000)
    text = window.banner.text()
    assert "Context “65,536” is longer than Qwen/Qwen3-30B-A3B's context of 40,960" in text
    assert "RoPE scaling “YaRN” with RoPE factor “2”" in text and "--" not in text
    assert window.controller.workload == before


def test_rope_scaling_lifts_the_context_s_limit_and_taking_it_off_brings_it_back(
    make_window, qtbot
):
    window = _qwen3(make_window, qtbot)
    panel = window.workload_panel
    panel.rope_scaling.setCurrentIndex(panel.rope_scaling.findData("yarn"))
    # Picked, YaRN starts at a factor of 2 of the config's 40,960 tokens.
    settle(qtbot, window, rope_scaling="yarn", rope_factor=2.0)
    assert panel.rope_factor.isVisibleTo(window) and panel.rope_original_context.isVisibleTo(window)
    assert panel.rope_original_context.text() == "40,960 (config)"
    assert panel.seq.spin.maximum() == 81920
    # Qwen's YaRN: factor 4 of 32,768 tokens.
    panel.rope_factor.setValue(4.0)
    panel.rope_original_context.setValue(32768)
    settle(qtbot, window, rope_factor=4.0, rope_original_context=32768)
    assert panel.seq.spin.maximum() == 131072
    assert window.controller.update(seq=131072)
    settle(qtbot, window, seq=131072)
    assert "contexts up to 131,072 tokens" in window.notes.text()
    # Off again: the context comes back within the model's, and the user is told.
    panel.rope_scaling.setCurrentIndex(panel.rope_scaling.findData("none"))
    settle(qtbot, window, rope_scaling="none", rope_factor=1.0, seq=40960)
    qtbot.waitUntil(lambda: "Context is now 40,960 tokens" in window.banner.text(), timeout=2000)
    assert not panel.rope_factor.isVisibleTo(window)
    assert panel.seq.spin.maximum() == 40960


def test_a_model_without_rotary_embeddings_offers_no_rope_scaling(make_window, qtbot):
    window = make_window()
    window.controller.load_source("gpt2")
    qtbot.waitUntil(lambda: window.controller.spec.facts.model_type == "gpt2", timeout=10000)
    settle(qtbot, window)
    combo = window.workload_panel.rope_scaling
    assert not combo.isEnabled() and "no rotary position embeddings" in combo.toolTip()
