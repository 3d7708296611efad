"""The window estimates a pre-quantized model as it is stored and says so; another quantization
picked replaces it, visibly; the GPU picked decides what the engine does with the format."""

from __future__ import annotations

import pytest

from tests.ui.test_main_window import check_gpu, settle
from vramgui.core.units import GiB
from vramgui.core.workload import EngineConflictError, Workload
from vramgui.ui import wording

STORED_120B = 65_248_815_744


def test_gpt_oss_120b_fits_one_h100_in_vllm_and_the_window_says_it(make_window, qtbot):
    window = make_window()
    window.controller.load_source("gpt-oss-120b")
    qtbot.waitUntil(lambda: window.controller.spec.name == "openai/gpt-oss-120b", timeout=10000)
    check_gpu(window, "RTX 4090", False)
    check_gpu(window, "H100 SXM")
    window.controller.update(engine="vllm", seq=8192)
    settle(qtbot, window, engine="vllm", seq=8192, gpu_arch="hopper")
    est = window.controller.analysis.estimate
    # As stored, and what vLLM's Triton MXFP4 backend adds on Hopper (every expert scale held
    # twice, the expert biases in float32; tests/core/test_serving.py derives it).
    assert est.components["weights"] == STORED_120B + 3_795_517_440
    assert window.controller.analysis.fit[0].fits
    assert window.gpu_panel.badge("H100 SXM").startswith("✔")
    panel = window.precision_panel
    assert panel.stored.isVisibleTo(window)
    assert panel.stored.text() == "MXFP4 experts, bf16 elsewhere"
    assert panel.quant.currentData() == "none"
    assert "As stored: MXFP4 experts" in panel.quant.itemText(panel.quant.currentIndex())


def test_another_quantization_replaces_the_stored_format_with_a_note(make_window, qtbot):
    window = make_window()
    window.controller.load_source("gpt-oss-120b")
    qtbot.waitUntil(lambda: window.controller.spec.name == "openai/gpt-oss-120b", timeout=10000)
    window.controller.update(engine="vllm")
    settle(qtbot, window, engine="vllm")
    combo = window.precision_panel.quant
    assert combo.model().item(combo.findData("nvfp4")).isEnabled()
    combo.setCurrentIndex(combo.findData("nvfp4"))
    settle(qtbot, window, quant="nvfp4")
    assert "Estimated as NVFP4 instead" in window.precision_panel.stored.text()
    assert "not as the checkpoint is stored" in window.notes.text()
    assert window.controller.analysis.estimate.components["weights"] != STORED_120B


def test_the_target_gpu_decides_whether_transformers_keeps_fp8(make_window, qtbot):
    window = make_window()
    window.controller.load_source("qwen3-30b-a3b-fp8")
    qtbot.waitUntil(lambda: window.controller.spec.quantization == "fp8-block", timeout=10000)
    check_gpu(window, "RTX 4090", False)
    check_gpu(window, "H100 SXM")
    settle(qtbot, window, engine="transformers", gpu_arch="hopper")
    kept = window.controller.analysis.estimate.components["weights"]
    check_gpu(window, "H100 SXM", False)
    check_gpu(window, "A100 SXM 80GB")
    settle(qtbot, window, gpu_arch="ampere")
    dequantized = window.controller.analysis.estimate.components["weights"]
    assert dequantized > 1.8 * kept
    assert "dequantizes them to bf16" in window.notes.text()
    assert kept < 33 * GiB


def test_mtp_layers_are_a_vllm_choice_of_checkpoints_that_store_them(make_window, qtbot):
    window = make_window()
    box = window.workload_panel.mtp
    assert not box.isEnabled()  # Llama 3.1 stores none
    window.controller.load_source("glm-5-fp8")
    qtbot.waitUntil(lambda: window.controller.spec.name == "zai-org/GLM-5-FP8", timeout=10000)
    window.controller.update(engine="vllm")
    settle(qtbot, window, engine="vllm")
    assert box.isEnabled()
    assert "not counted" in window.notes.text()
    before = window.controller.analysis.estimate.components["weights"]
    box.setChecked(True)
    settle(qtbot, window, mtp=True)
    assert window.controller.analysis.estimate.components["weights"] > before
    window.controller.update(engine="transformers")
    settle(qtbot, window, engine="transformers")
    assert not box.isEnabled()


def test_as_stored_with_llama_cpp_is_the_mxfp4_gguf_of_gpt_oss(make_window, qtbot):
    window = make_window()
    window.controller.load_source("gpt-oss-120b")
    qtbot.waitUntil(lambda: window.controller.spec.name == "openai/gpt-oss-120b", timeout=10000)
    engine = window.workload_panel.engine
    engine.setCurrentIndex(engine.findData("llamacpp"))
    settle(qtbot, window, engine="llamacpp", quant="MXFP4_MOE")
    qtbot.waitUntil(lambda: "MXFP4_MOE" in window.banner.text(), timeout=2000)
    notice = window.banner.text()
    assert "llama.cpp runs openai/gpt-oss-120b's checkpoint as its GGUF MXFP4_MOE" in notice
    assert "does not run" not in notice and "Engine is now" not in notice
    panel = window.precision_panel
    assert panel.quant.currentData() == "MXFP4_MOE"
    assert "the GGUF llama.cpp runs it as" in panel.stored.text()
    assert "not this checkpoint" not in panel.stored.text()
    est = window.controller.analysis.estimate
    assert (est.components["weights"] + est.host_bytes) / GiB == pytest.approx(59.02, abs=0.005)
    # "As stored" picked again on llama.cpp: the same GGUF, the engine kept.
    panel.quant.setCurrentIndex(panel.quant.findData("none"))
    settle(qtbot, window, engine="llamacpp", quant="MXFP4_MOE")
    assert window.workload_panel.engine.value() == "llamacpp"
    # Back to Transformers: the checkpoint as stored again.
    engine.setCurrentIndex(engine.findData("transformers"))
    settle(qtbot, window, engine="transformers", quant="none")


def test_the_window_words_llama_cpp_s_mxfp4_as_its_gguf():
    with pytest.raises(EngineConflictError) as refused:
        Workload(engine="llamacpp").check_checkpoint("mxfp4")
    text = wording.refusal(refused.value.conflict, "openai/gpt-oss-120b")
    assert "llama.cpp runs mxfp4 as the GGUF MXFP4_MOE" in text
    assert "GGUF files only" not in text
