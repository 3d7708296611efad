"""The offload view driven through its setters and its own widgets."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from vramgui.answers.host import UNKNOWN_HOST
from vramgui.answers.offload import bandwidths_for as host_bandwidths
from vramgui.core import offload
from vramgui.core.families import spec_from_config
from vramgui.core.llamacpp_speed import kernel_shares
from vramgui.core.offload import Bandwidths
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.sources.catalog import find
from vramgui.ui.offload_charts import DEVICE_COLOURS
from vramgui.ui.offload_view import GpuChoice, OffloadView

Q4 = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)


def bandwidths_for(gpu, **overrides):
    """The speeds of a catalog GPU, the host unknown (default disk, no RAM limit)."""
    return host_bandwidths(gpu, UNKNOWN_HOST, **overrides)


@pytest.fixture(scope="module")
def llama7b():
    entry = find("llama-2-7b")
    return spec_from_config(entry.config, "llama-2-7b")


@pytest.fixture
def view(qtbot, llama7b):
    v = OffloadView()
    qtbot.addWidget(v)
    v.set_bandwidths(bandwidths_for(find_gpu("RTX 3060")))
    v.set_budget(4 * GiB, 16 * GiB)
    v.set_model(llama7b, Q4)
    v.resize(1200, 800)
    v.show()
    return v


def test_the_view_starts_at_the_most_layers_that_fit(view, llama7b):
    # The most that fit with the safety margin (1 GiB, llama.cpp's) kept free.
    assert view.margin_bytes == offload.DEFAULT_MARGIN_BYTES
    ngl = offload.max_gpu_layers(llama7b, Q4, 4 * GiB - view.margin_bytes)
    assert view.planner.currentData() == "llamacpp"
    assert view.placement is not None and view.placement.gpu_layers == ngl
    assert view.slider.isEnabled()
    assert (view.slider.minimum(), view.slider.maximum(), view.slider.value()) == (0, 33, ngl)
    assert view.slider_label.text() == f"-ngl {ngl} of 33"
    assert f"-ngl {ngl} " in view.launch_text.toPlainText()
    assert "tokens/s" in view.summary.text()
    turn = offload.compute_bound_batch(view.placement, bandwidths_for(find_gpu("RTX 3060")))
    assert view.compute_bound_batch == turn
    assert f"compute-bound from batch {turn:,}" in view.summary.text()


def test_bars_are_coloured_by_device_and_explain_themselves_on_hover(view):
    colours = view.layer_chart.bar_colours()
    devices = [p.device for p in view.placement.units]
    assert len(colours) == len(devices) == 34
    for colour, device in zip(colours, devices, strict=True):
        key = "gpu" if device == "gpu:0" else device
        assert colour == DEVICE_COLOURS[key]
    assert view.layer_chart.legend() == ["GPU 0", "CPU RAM", "KV cache (lighter: same device)"]
    text = view.layer_chart.text_at(1.0)
    assert text.startswith("block 0: CPU RAM") and "KV cache" in text
    assert view.layer_chart.text_at(33.1).startswith("output: GPU 0")  # offloaded first
    assert view.layer_chart.text_at(1.5) == ""


def test_the_slider_re_places_layers_and_updates_memory_and_speed(view, qtbot):
    before = view.placement
    speed_before = view.throughput.tokens_per_second
    view.slider.setValue(10)
    after = view.placement
    assert after.gpu_layers == 10
    assert after.gpu_bytes[0] < before.gpu_bytes[0]
    assert view.throughput.tokens_per_second < speed_before
    assert "-ngl 10 " in view.launch_text.toPlainText()
    assert view.slider_label.text() == "-ngl 10 of 33"
    assert view.auto_button.isEnabled()
    # one more than fits: the summary says so
    view.slider.setValue(33)
    assert not view.placement.fits and "does NOT fit" in view.summary.text()
    qtbot.mouseClick(view.auto_button, Qt.MouseButton.LeftButton)
    assert view.placement.gpu_layers == before.gpu_layers


def test_copy_puts_the_settings_on_the_clipboard(view, qtbot):
    qtbot.mouseClick(view.copy_button, Qt.MouseButton.LeftButton)
    copied = QGuiApplication.clipboard().text()
    assert copied.startswith("llama-server -m MODEL.gguf -ngl ")
    view.engine.setCurrentIndex(view.engine.findText("vLLM"))
    assert view.launch_text.toPlainText().startswith("vllm serve MODEL.gguf")


def test_streaming_planner_disables_the_slider_and_offers_zero_inference(view, llama7b):
    view.set_model(llama7b, Q4.with_(quant="none", engine="transformers"))
    view.set_planner("streaming")
    assert not view.slider.isEnabled()
    assert view.placement.planner == "streaming" and view.placement.gpu_layers == 0
    engines = [view.engine.itemText(i) for i in range(view.engine.count())]
    assert engines == ["DeepSpeed ZeRO-Inference", "vLLM"]
    assert view.throughput.bound in ("pcie", "gpu_memory")


def test_edited_speeds_change_the_throughput(view):
    fast = view.throughput.tokens_per_second
    view.spins["cpu_ram_bytes_per_s"].setValue(10.0)  # GB/s
    assert view.throughput.tokens_per_second < fast
    assert view.throughput.bound == "cpu_memory"


def test_an_edited_host_speed_keeps_the_measured_gpu_kernels_a_gpu_speed_does_not(view, llama7b):
    view.set_budget(16 * GiB, 16 * GiB)  # every layer on the 3060
    measured = view.throughput.tokens_per_second
    assert view._bandwidths is not None and view._bandwidths.kernels
    view.spins["disk_bytes_per_s"].setValue(7.0)
    assert view.throughput.tokens_per_second == measured
    view.spins["gpu_bytes_per_s"].setValue(300.0)  # GB/s typed in: the roofline at that speed
    assert not view._bandwidths.kernels
    assert view.throughput.tokens_per_second != measured


def test_settings_that_do_not_apply_show_an_error_in_the_windows_words(view, llama7b):
    view.set_model(llama7b, Workload(gpus=5, tp=5))
    assert view.placement is None
    assert "Tensor parallel “5” does not divide" in view.summary.text()
    assert "--" not in view.summary.text()
    assert view.launch_text.toPlainText() == "" and not view.copy_button.isEnabled()
    view.set_model(None, None)
    assert "Choose a model" in view.summary.text()


def test_a_catalog_gpu_without_tflops_leaves_the_rate_unknown(view):
    thor = find_gpu("Jetson AGX Thor")  # publishes no dense 16-bit rate
    bw = bandwidths_for(thor)
    assert math.isinf(bw.gpu_flops)
    assert bw.gpu_bytes_per_s == 0.8 * thor.memory_bandwidth_bytes_per_s
    assert bandwidths_for(thor, gpu_flops=27e12).gpu_flops == 27e12
    view.set_budget(24 * GiB, 16 * GiB)  # every layer on the GPU
    view.set_bandwidths(bw)
    assert view.spins["gpu_flops"].text() == "unknown"
    assert view.compute_bound_batch is None  # never compute-bound on the GPU
    view.spins["cpu_ram_bytes_per_s"].setValue(40.0)  # editing another speed keeps it unknown
    assert math.isinf(view.bandwidths.gpu_flops)
    assert view.bandwidths.cpu_ram_bytes_per_s == pytest.approx(40e9)
    view.spins["gpu_flops"].setValue(2.0)  # a slow GPU turns compute-bound early
    assert view.bandwidths.gpu_flops == pytest.approx(2e12)
    assert view.compute_bound_batch is not None


def test_bandwidths_reach_the_spin_boxes(view):
    view.set_bandwidths(Bandwidths(1e12, 25e9, 60e9, 7e9, 100e12, 1e12))
    assert view.spins["gpu_bytes_per_s"].value() == pytest.approx(1000.0)
    assert view.spins["disk_bytes_per_s"].value() == pytest.approx(7.0)
    assert view.spins["gpu_flops"].value() == pytest.approx(100.0)


def test_set_inputs_places_once_and_a_new_budget_keeps_the_sized_model(view, llama7b):
    placements = []
    view.placementChanged.connect(placements.append)
    bw = bandwidths_for(find_gpu("RTX 4090"))
    view.set_inputs(llama7b, Q4.with_(seq=4096), budget=(8 * GiB, 16 * GiB), bandwidths=bw)
    assert len(placements) == 1
    assert view.placement.workload.seq == 4096
    most = offload.max_gpu_layers(llama7b, Q4.with_(seq=4096), 8 * GiB - view.margin_bytes)
    assert view.placement.gpu_layers == most
    assert view.bandwidths == bw
    sized = view._llamacpp
    view.set_inputs(llama7b, Q4.with_(seq=4096), budget=(12 * GiB, 16 * GiB))
    assert len(placements) == 2
    assert view._llamacpp is sized  # same model and settings: not sized again
    assert view.placement.gpu_layers >= most
    view.set_inputs(llama7b, Q4)
    assert view._llamacpp is not sized and view.placement.workload.seq == Q4.seq


def test_the_same_unit_again_does_not_redraw(view):
    placements = []
    view.placementChanged.connect(placements.append)
    view.set_unit("GiB")
    assert placements == []
    view.set_unit("GB")
    assert len(placements) == 1 and "GB" in view.summary.text()


def test_in_turns_draws_the_layers_now_and_the_speeds_in_the_next_turn(view, llama7b, qtbot):
    placements = []
    view.placementChanged.connect(placements.append)
    before = view.throughput
    view.set_inputs(llama7b, Q4.with_(seq=8192), budget=(6 * GiB, 16 * GiB), in_turns=True)
    assert view.placement.workload.seq == 8192
    assert view.slider.value() == view.placement.gpu_layers
    assert placements == [] and view.throughput is before
    qtbot.waitUntil(lambda: len(placements) == 1, timeout=2000)
    assert placements == [view.placement]
    assert view.throughput == offload.decode_throughput(view.placement, view.bandwidths)
    assert view.throughput != before
    assert f"-ngl {view.placement.gpu_layers} " in view.launch_text.toPlainText()


def test_a_gpu_is_chosen_among_those_checked_and_named_in_the_summary(view, llama7b):
    small = GpuChoice("RTX 3060 12GB", 12 * GiB, bandwidths_for(find_gpu("RTX 3060")))
    big = GpuChoice("H100 SXM", 80 * GiB, bandwidths_for(find_gpu("H100 SXM")))
    view.set_inputs(llama7b, Q4, gpus=[small, big], host_ram_bytes=64 * GiB)
    assert view.gpu.count() == 2 and view.gpu.isEnabled()
    assert view.gpu_name == "RTX 3060 12GB" and "RTX 3060 12GB:" in view.summary.text()
    assert view.placement.vram_budget_bytes == (12 * GiB,)
    view.gpu.setCurrentIndex(1)
    assert view.placement.vram_budget_bytes == (80 * GiB,)
    assert "H100 SXM:" in view.summary.text()
    assert view.bandwidths == big.bandwidths
    # The choice stays when the checked GPUs come again.
    view.set_inputs(llama7b, Q4.with_(seq=4096), gpus=[small, big], host_ram_bytes=64 * GiB)
    assert view.gpu_name == "H100 SXM"


def test_the_safety_margin_is_kept_free_and_can_be_changed(view, llama7b):
    kept = view.placement
    assert kept.gpu_bytes[0] <= 4 * GiB - view.margin_bytes
    assert "1.00 GiB kept free" in view.summary.text()
    view.margin.setValue(0.0)
    assert view.placement.gpu_layers == offload.max_gpu_layers(llama7b, Q4, 4 * GiB)
    assert view.placement.gpu_layers > kept.gpu_layers


def test_gguf_weights_are_placed_by_llamacpp_only(view, llama7b):
    model = view.planner.model()
    enabled = [model.item(i).isEnabled() for i in range(view.planner.count())]
    assert view.planner.currentData() == "llamacpp" and enabled == [True, False, False]
    assert "dequantizes" in model.item(1).toolTip()
    view.set_model(llama7b, Workload(dtype="fp16", seq=2048))  # transformers, 16-bit
    enabled = [model.item(i).isEnabled() for i in range(view.planner.count())]
    assert view.planner.currentData() == "accelerate" and all(enabled)


def test_what_the_planners_engine_does_not_run_is_reset_and_said(view, llama7b):
    view.set_model(llama7b, Workload(engine="vllm", kv_dtype="fp8", seq=2048))
    assert view.planner.currentData() == "accelerate"
    assert view.placement is not None and view.placement.workload.kv_dtype == "auto"
    assert "Transformers has no fp8 KV cache" in view.summary.text()


def test_settings_the_estimate_refuses_for_another_engine_are_said_above_the_plan(view, llama7b):
    # vLLM refuses fewer batched tokens than sequences; the plan (Transformers, accelerate's
    # planner) does not use vLLM's scheduler, so it stands, and the tab says the refusal.
    view.set_model(
        llama7b,
        Workload(engine="vllm", seq=2048, max_num_seqs=512, max_num_batched_tokens=256),
    )
    assert view.placement is not None
    assert view.refused.isVisible()
    assert view.refused.text() == (
        "This plan is for Transformers, the planner's engine. The Estimate tab refuses the "
        "current settings for vLLM: vLLM needs Batched tokens “256” to be at least "
        "Max sequences “512”."
    )
    view.set_model(llama7b, Workload(engine="vllm", seq=2048))  # vLLM's own defaults
    assert view.refusal is None and not view.refused.isVisible()


def test_training_settings_the_estimate_refuses_are_said_above_the_plan(view, llama7b):
    # The plan is inference: LoRA targets the model lacks are training's refusal alone.
    view.set_model(llama7b, Workload(mode="training", method="lora", lora_targets=("wq",)))
    assert view.placement is not None
    assert view.refused.isVisible()
    assert view.refused.text().startswith(
        "This plan is for Transformers, the planner's engine. The Estimate tab refuses the "
        "current settings for training: LoRA target(s) wq not in llama-2-7b"
    )


@pytest.fixture(scope="module")
def qwen3moe():
    entry = find("qwen3-30b-a3b")
    return spec_from_config(entry.config, "qwen3-30b-a3b")


def _choice(name):
    gpu = find_gpu(name)
    return GpuChoice(gpu.name, gpu.capacity_bytes(), bandwidths_for(gpu))


def test_experts_slider_keeps_the_experts_in_host_ram(qtbot, qwen3moe):
    view = OffloadView()
    qtbot.addWidget(view)
    q4 = Workload(quant="Q4_K_M", engine="llamacpp", seq=32768)
    view.set_inputs(qwen3moe, q4, gpus=[_choice("RTX 3060 12GB")], host_ram_bytes=64 * GiB)
    view.show()
    assert view.experts_slider.isVisible() and view.experts_slider.maximum() == 48
    whole = view.placement
    view.set_gpu_layers(49)
    view.experts_slider.setValue(48)
    p = view.placement
    assert p.layout.cpu_moe and p.gpu_bytes[0] < 6 * GiB and p.fits
    assert view.experts_label.text() == "--cpu-moe (all)"
    assert "--cpu-moe" in view.launch_text.toPlainText()
    # the bars stack the layer's GPU part, its KV cache and its experts in host RAM
    hover = view.layer_chart.text_at(5.0)
    assert "CPU RAM" in hover and "routed experts" in hover
    assert "CPU RAM" in view.layer_chart.legend()
    view.experts_slider.setValue(20)
    assert view.placement.layout.n_cpu_moe == 20
    assert "--n-cpu-moe 20" in view.launch_text.toPlainText()
    # the curves arrive from a worker: experts in host RAM above whole layers
    qtbot.waitUntil(lambda: bool(view.curves[1]), timeout=20000)
    layers, experts = view.curves
    assert len(layers) == 50 and len(experts) == 49
    assert curves_best(experts).tokens_per_second > curves_best(layers).tokens_per_second
    assert "fastest that fits" in view.memory_chart.accessibleDescription()
    # At "most that fit" the tab took the fastest placement that fits: here experts in RAM.
    fastest = curves_best(experts)
    assert whole.layout is not None and whole.layout.n_cpu_moe == fastest.value
    assert whole.gpu_layers == 49 and whole.gpu_bytes == fastest.gpu_bytes


def curves_best(points):
    best = offload.curves.best(points)
    assert best is not None
    return best


def test_several_gpus_and_fit_like_llamacpp(qtbot, qwen3moe):
    view = OffloadView()
    qtbot.addWidget(view)
    q4 = Workload(quant="Q4_K_M", engine="llamacpp", seq=32768)
    gpus = [_choice("RTX 4090"), _choice("RTX 3060 12GB")]
    view.set_inputs(qwen3moe, q4, gpus=gpus, host_ram_bytes=64 * GiB)
    view.show()
    assert len(view.chosen_gpus) == 1 and not view.split_mode.isVisible()
    menu = view.more_gpus.menu()
    actions = menu.actions()
    assert [a.text().split(" (")[0] for a in actions] == ["another RTX 4090", "RTX 3060 12GB"]
    actions[1].setChecked(True)
    assert [g.name for g in view.chosen_gpus] == ["RTX 4090", "RTX 3060 12GB"]
    assert view.split_mode.isVisible() and view.more_gpus.text() == "+ 1 GPU"
    p = view.placement
    assert len(p.gpu_bytes) == 2 and p.fits
    assert all(u <= b - GiB for u, b in zip(p.gpu_bytes, (24 * GiB, 12 * GiB), strict=True))
    assert "RTX 4090:" in view.summary.text() and "RTX 3060 12GB:" in view.summary.text()
    assert "GPU 1" in view.layer_chart.legend()
    assert "-ts 24,12" in view.launch_text.toPlainText()
    # a second RTX 4090 instead of the 3060
    actions[1].setChecked(False)
    view.more_gpus.menu().actions()[0].setChecked(True)
    assert [g.name for g in view.chosen_gpus] == ["RTX 4090", "RTX 4090"]
    # llama.cpp's --fit on the RTX 3060 alone, on a worker
    view.gpu.setCurrentIndex(1)
    view.more_gpus.menu().actions()[0].setChecked(False)
    assert [g.name for g in view.chosen_gpus] == ["RTX 3060 12GB"]
    view.fit_like_llamacpp()
    qtbot.waitUntil(lambda: view._fit is not None, timeout=20000)
    p = view.placement
    assert p.gpu_layers == 49 and p.gpu_bytes[0] <= 11 * GiB
    assert "(fitted)" in view.experts_label.text()
    assert "-ot " in view.launch_text.toPlainText()
    view.experts_slider.setValue(48)  # a control moved: the fit no longer holds
    assert view._fit is None and view.placement.layout.cpu_moe


def test_an_ollama_model_gets_its_ollama_settings_first(qtbot, llama7b):
    from dataclasses import replace

    view = OffloadView()
    qtbot.addWidget(view)
    spec = replace(llama7b, name="llama2:7b", source="Ollama, llama2:7b (GGUF blob 0123456789ab)")
    view.set_inputs(spec, Q4, gpus=[_choice("RTX 3060 12GB")], host_ram_bytes=16 * GiB)
    assert view.engine.itemText(0) == "Ollama"
    assert "FROM llama2:7b" in view.launch_text.toPlainText()


def test_op_offload_can_be_turned_off_for_experts_in_host_ram(qtbot):
    entry = find("mixtral-8x7b")
    mixtral = spec_from_config(entry.config, "mixtral-8x7b")
    view = OffloadView()
    qtbot.addWidget(view)
    q4 = Workload(quant="Q4_K_M", engine="llamacpp", seq=8192)
    view.set_inputs(mixtral, q4, gpus=[_choice("RTX 4090")], host_ram_bytes=64 * GiB)
    view.show()
    assert view.op_offload.isVisible() and view.op_offload.isChecked()  # llama.cpp's default
    view.set_gpu_layers(33)
    view.experts_slider.setValue(view.experts_slider.maximum())
    copied = view.placement
    assert copied.layout.cpu_moe and copied.layout.op_offload
    assert "--no-op-offload" not in view.launch_text.toPlainText()
    view.op_offload.setChecked(False)
    kept = view.placement
    assert not kept.layout.op_offload and kept.layout.cpu_moe
    assert "--no-op-offload" in view.launch_text.toPlainText()
    # The GPU no longer holds a copy of a host expert matrix in its compute buffer.
    assert kept.gpu_bytes[0] < copied.gpu_bytes[0]


def test_the_host_ram_box_names_this_machine_before_any_host_is_given(qtbot):
    """A view given no host yet reads "this machine: unknown", not a RAM of 0.0 GiB."""
    fresh = OffloadView()
    qtbot.addWidget(fresh)
    assert fresh.ram.value() == 0
    assert fresh.ram.text() == "this machine: unknown"


def test_the_speeds_box_shows_the_gpu_memory_speed_the_plan_is_timed_at(view):
    gpu = find_gpu("RTX 3060")
    peak = gpu.memory_bandwidth_bytes_per_s
    shares = kernel_shares(gpu)  # llama.cpp's measured GeForce rows
    box = view.spins["gpu_bytes_per_s"]
    assert view.answer.gpu_memory.weights_bytes_per_s == pytest.approx(peak * shares.weight_share)
    assert box.value() == pytest.approx(peak * shares.weight_share / 1e9, abs=0.01)
    assert box.value() != pytest.approx(offload.GPU_MEMORY_EFFICIENCY * peak / 1e9, abs=0.01)
    assert shares.kind in box.toolTip() and f"{shares.attention_share:.0%}" in box.toolTip()
    # Another speed edited keeps the plan's GPU speed; the streaming planner's roofline shows
    # its own share of the peak.
    timed = view.throughput.tokens_per_second
    view.spins["pcie_bytes_per_s"].setValue(view.spins["pcie_bytes_per_s"].value())
    view.spins["disk_bytes_per_s"].setValue(7.0)
    assert view._bandwidths.kernels and view.throughput.tokens_per_second == timed
    view.set_planner("streaming")
    assert box.value() == pytest.approx(offload.GPU_MEMORY_EFFICIENCY * peak / 1e9, abs=0.01)


def test_without_a_plan_nothing_of_the_last_plan_stays(view, llama7b):
    given = bandwidths_for(find_gpu("RTX 3060")).gpu_bytes_per_s / 1e9
    timed = view.spins["gpu_bytes_per_s"].value()
    assert timed != pytest.approx(given)  # the plan's: llama.cpp's measured share of the peak
    assert view.slider.value() > 0
    view.set_model(None, None)
    assert view.placement is None and not view.slider.isEnabled()
    assert (view.slider.maximum(), view.slider.value()) == (0, 0)
    assert view.spins["gpu_bytes_per_s"].value() == pytest.approx(given)
    assert "Decoding reads the weights at this speed" not in view.spins["gpu_bytes_per_s"].toolTip()
    view.set_model(llama7b, Q4)  # planned again: timed again
    assert view.spins["gpu_bytes_per_s"].value() == pytest.approx(timed)
    assert view.slider.value() > 0


def test_the_first_token_has_its_own_curve_against_gpu_memory(qtbot, qwen3moe):
    view = OffloadView()
    qtbot.addWidget(view)
    q4 = Workload(quant="Q4_K_M", engine="llamacpp", seq=32768, prompt=8192)
    view.set_inputs(qwen3moe, q4, gpus=[_choice("RTX 3060 12GB")], host_ram_bytes=64 * GiB)
    view.show()
    titles = [view.speed_tabs.tabText(i) for i in range(view.speed_tabs.count())]
    assert titles == ["Tokens/s vs GPU memory", "First token vs GPU memory", "Tokens/s vs batch"]
    qtbot.waitUntil(lambda: bool(view.curves[1]), timeout=20000)
    chart = view.first_token_chart
    drawn = [chart.value(p) for series in chart.series.values() for p in series]
    assert len(drawn) == 50 + 49 and all(v is not None and v > 0 for v in drawn)
    # the ring is the plan's own first token, for the 8,192-token prompt asked for
    assert chart.current == (sum(view.placement.gpu_bytes), view.answer.prefill_seconds)
    assert view.answer.prompt_tokens == 8192
    assert (
        "first token after" in view.summary.text() and "(8,192-token prompt)" in view.summary.text()
    )
    described = chart.accessibleDescription()
    assert "the fastest that fits is" in described and "first token after" in described
