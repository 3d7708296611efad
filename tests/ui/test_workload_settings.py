"""The workload panel's engine-specific settings: llama.cpp's batch sizes, transformers' prompt
length and release, each shown for the engine that takes it and reaching the estimate."""

from __future__ import annotations

from .waiting import settled


def test_llamacpp_batch_sizes_show_with_llamacpp_and_size_its_buffer(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    assert not panel.llamacpp_box.isVisible()
    window.controller.update(engine="llamacpp", quant="Q4_K_M", seq=8192)
    settled(qtbot, window, engine="llamacpp", seq=8192)
    qtbot.waitUntil(panel.llamacpp_box.isVisible, timeout=2000)
    assert (panel.ubatch_size.value(), panel.batch_size.value()) == (512, 2048)
    before = window.controller.analysis.estimate.components["activations"]
    panel.ubatch_size.setValue(1024)
    settled(qtbot, window, ubatch_size=1024)
    after = window.controller.analysis.estimate.components["activations"]
    assert after > 1.5 * before
    panel.batch_size.setValue(512)
    settled(qtbot, window, batch_size=512)
    assert window.controller.analysis.estimate.components["activations"] == before


def test_transformers_prompt_and_release_show_with_transformers(make_window, qtbot):
    window = make_window()
    panel = window.workload_panel
    window.controller.update(engine="transformers", seq=8192)
    settled(qtbot, window, engine="transformers", seq=8192)
    assert panel.prompt.isVisible() and panel.transformers_version.isVisible()
    assert panel.prompt.text() == "Whole context"
    full = window.controller.analysis.estimate.components
    panel.prompt.setValue(512)
    settled(qtbot, window, prompt=512)
    chat = window.controller.analysis.estimate.components
    assert chat["kv_cache"] == full["kv_cache"]
    assert chat["activations"] < full["activations"]
    # A shorter context than the prompt: the prompt is the whole context.
    panel.prompt.setValue(4096)
    settled(qtbot, window, prompt=4096)
    window.controller.update(seq=2048)
    settled(qtbot, window, seq=2048)
    assert panel.prompt.text() == "Whole context" and panel.prompt.maximum() == 2048
    combo = panel.transformers_version
    combo.setCurrentIndex(combo.findData("4.57"))
    settled(qtbot, window, transformers_version="4.57")
    window.controller.update(engine="vllm")
    settled(qtbot, window, engine="vllm")
    assert not panel.prompt.isVisible() and not panel.transformers_version.isVisible()
    assert not panel.llamacpp_box.isVisible()


def test_the_kv_cache_box_names_the_checkpoints_own_scheme(make_window, qtbot):
    """nvidia/Gemma-4-31B-IT-NVFP4 ships an FP8 KV-cache scheme, which vLLM takes under auto."""
    window = make_window()
    panel = window.precision_panel
    window.controller.load_source("gemma-4-31b-it-nvfp4")
    qtbot.waitUntil(
        lambda: (
            window.controller.spec is not None
            and window.controller.spec.name.endswith("Gemma-4-31B-IT-NVFP4")
        ),
        timeout=10000,
    )
    window.controller.update(engine="vllm", seq=8192)
    settled(qtbot, window, engine="vllm", seq=8192)
    auto = panel.kv_dtype.findData("auto")
    qtbot.waitUntil(
        lambda: panel.kv_dtype.itemText(auto) == "As the checkpoint (fp8)", timeout=2000
    )
    assert window.controller.analysis.estimate.details["kv_cache_dtype"] == "fp8"
    window.controller.update(vllm_version="0.11")
    qtbot.waitUntil(lambda: panel.kv_dtype.itemText(auto) == "Same as weights", timeout=2000)
