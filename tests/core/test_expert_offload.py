"""Expert placement, several GPUs, llama.cpp's fitting and the memory / speed curves, on the
published configs of Qwen3-30B-A3B, DeepSeek-V2-Lite and Llama-3.1-70B."""

from __future__ import annotations

import pytest

from vramgui.core import launch, offload
from vramgui.core.errors import WorkloadError
from vramgui.core.families import spec_from_config
from vramgui.core.offload import curves
from vramgui.core.offload.fit import fit_llamacpp
from vramgui.core.offload.overrides import (
    LlamaCppLayout,
    cpu_moe,
    n_cpu_moe,
    parse_overrides,
    parse_tensor_split,
)
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find


def _spec(name: str):
    entry = find(name)
    assert entry is not None, name
    return spec_from_config(entry.config, name)


# An RTX 3060 12GB and its host: 360 GB/s at 80 %, PCIe 4.0, DDR5 at 70 % of 76.8 GB/s.
RTX3060 = offload.Bandwidths(288e9, 25e9, 53.76e9, 3.5e9, 25.4e12, 0.5e12)
Q4_32K = Workload(quant="Q4_K_M", engine="llamacpp", seq=32768)


@pytest.fixture(scope="module")
def qwen3moe():
    return _spec("qwen3-30b-a3b")


@pytest.fixture(scope="module")
def model(qwen3moe):
    return offload.llamacpp_model(qwen3moe, Q4_32K)


def test_overrides_read_as_llama_cpp_spells_them():
    (o,) = parse_overrides("exps=CPU")
    assert (o.device, o.buffer) == ("cpu", "CPU") and o.matches("blk.3.ffn_up_exps.weight")
    pair = parse_overrides(r"blk\.1[0-9]\.ffn_.*=CUDA1,attn=CPU")
    assert [p.device for p in pair] == ["gpu:1", "cpu"]
    for bad in ("exps", "=CPU", "exps=GPU", "(=CPU"):
        with pytest.raises(WorkloadError):
            parse_overrides(bad)
    assert parse_tensor_split("3,1") == parse_tensor_split("3/1") == (3.0, 1.0)
    with pytest.raises(WorkloadError):
        parse_tensor_split("3,x")
    # --n-cpu-moe 2 matches layers 0 and 1 only: blk.1 must not catch blk.10
    patterns = n_cpu_moe(2)
    assert any(p.matches("blk.1.ffn_down_exps.weight") for p in patterns)
    assert not any(p.matches("blk.10.ffn_down_exps.weight") for p in patterns)
    assert cpu_moe()[0].matches("blk.47.ffn_gate_exps.weight")
    assert not cpu_moe()[0].matches("blk.47.ffn_gate_shexp.weight")


def test_cpu_moe_keeps_only_the_routed_experts_in_host_ram(model):
    p = model.place(12 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(cpu_moe=True))
    block = p.units[5]
    assert block.device == "gpu:0" and block.kv_device == "gpu:0"
    (gpu,) = [x for x in block.pieces if x.device == "gpu:0"]
    (cpu,) = [x for x in block.pieces if x.device == "cpu"]
    assert cpu.bytes == cpu.expert_bytes == block.unit.expert_bytes
    assert gpu.expert_bytes == 0 and gpu.bytes + cpu.bytes == block.unit.bytes
    assert {n.split(".")[2] for n in cpu.names} == {
        "ffn_gate_exps",
        "ffn_up_exps",
        "ffn_down_exps",
    }
    # the GPU holds everything else: attention, norms, router, KV cache, compute buffer
    share = p.shares[0]
    assert share.weights_bytes == sum(u.gpu_bytes for u in p.units)
    assert share.kv_cache_bytes == sum(u.unit.kv_cache_bytes for u in p.units)
    assert p.host_bytes == sum(u.unit.expert_bytes for u in p.units) + p.units[0].unit.bytes


def test_done_when_qwen3_30b_a3b_at_32k_on_a_12_gb_card(model):
    # --cpu-moe keeps the GPU under 6 GiB and fits a 12 GB card with 1 GiB kept free...
    moe = model.place(12 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(cpu_moe=True))
    assert moe.gpu_bytes[0] < 6 * GiB and moe.gpu_bytes[0] <= 11 * GiB and moe.fits
    # ...and decodes faster than the fastest whole-layer split that fits the same card
    layers = curves.layer_curve(model, [12 * GiB], RTX3060, margin_bytes=GiB)
    best_layers = curves.best(layers)
    assert best_layers is not None and 0 < best_layers.value < 49
    fast = offload.decode_throughput(moe, RTX3060).tokens_per_second
    assert fast > best_layers.tokens_per_second
    # --n-cpu-moe N lies between all experts on the GPU and all in host RAM
    experts = curves.expert_curve(model, [12 * GiB], RTX3060, margin_bytes=GiB)
    assert [p.value for p in experts] == list(range(49))
    gpu = [p.gpu_bytes[0] for p in experts]
    assert gpu == sorted(gpu, reverse=True)
    assert experts[-1].gpu_bytes[0] == moe.gpu_bytes[0]
    middle = experts[24]
    assert moe.gpu_bytes[0] < middle.gpu_bytes[0] < experts[0].gpu_bytes[0]
    assert fast < middle.tokens_per_second < experts[0].tokens_per_second
    # the launch line carries the flag
    line = launch.llamacpp_settings(_spec("qwen3-30b-a3b"), moe).text
    assert "--cpu-moe" in line and "-ngl 49" in line
    some = model.place(12 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(n_cpu_moe=30))
    assert "--n-cpu-moe 30" in launch.llamacpp_settings(_spec("qwen3-30b-a3b"), some).text


def test_experts_in_host_ram_cost_their_active_share_at_ram_speed(model):
    moe = model.place(24 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(cpu_moe=True))
    t = offload.decode_throughput(moe, RTX3060)
    experts = sum(u.unit.expert_bytes for u in moe.units)
    # 8 of 128 experts per token per layer
    expected = experts * 8 / 128 / RTX3060.cpu_ram_bytes_per_s
    assert t.seconds_by_resource["cpu_memory"] == pytest.approx(expected, rel=1e-6)
    # a long prompt copies them to the GPU for every 512-token micro-batch (op offload)
    prefill = offload.prefill_seconds(moe, RTX3060, 4096)
    assert prefill > 8 * experts / RTX3060.pcie_bytes_per_s


def test_two_gpus_of_different_sizes_each_get_a_split_within_the_card(model):
    budgets = (24 * GiB, 12 * GiB)  # an RTX 4090 and an RTX 3060
    p = model.place(budgets, margin_bytes=GiB)
    assert p.fits and p.gpu_layers == 49
    assert all(u <= b - GiB for u, b in zip(p.gpu_bytes, budgets, strict=True))
    devices = [u.device for u in p.units[1:]]
    first_on_1 = devices.index("gpu:1")
    assert set(devices[:first_on_1]) == {"gpu:0"} and set(devices[first_on_1:]) == {"gpu:1"}
    # llama.cpp's default split follows the memory: about two thirds of the blocks on GPU 0
    assert 30 <= first_on_1 <= 34
    # each GPU holds its layers' KV cache and a compute buffer of its own
    assert all(s.kv_cache_bytes > 0 and s.buffers_bytes > 0 for s in p.shares)
    # an explicit --tensor-split wins, and card order matters
    even = model.place(budgets, n_gpu_layers=49, layout=LlamaCppLayout(tensor_split=(1, 1)))
    # llama.cpp's split points: layer k of 49 goes to GPU 0 while k / 49 < 1 / 2
    assert [u.device for u in even.units[1:]].index("gpu:1") == 25
    swapped = model.place((12 * GiB, 24 * GiB), margin_bytes=GiB)
    assert [u.device for u in swapped.units[1:]].index("gpu:1") < first_on_1


def test_row_split_keeps_the_cache_and_buffers_on_the_main_gpu(model):
    p = model.place(
        (24 * GiB, 24 * GiB), n_gpu_layers=49, layout=LlamaCppLayout(split_mode="row", main_gpu=1)
    )
    assert all(u.kv_device == "gpu:1" for u in p.units[1:-1])
    assert p.shares[0].kv_cache_bytes == 0 and p.shares[0].buffers_bytes == 0
    assert p.shares[0].weights_bytes > 0  # its rows of the matrices
    # the stacked experts are not row-split: they stay on the main GPU
    assert p.shares[1].weights_bytes > 3 * p.shares[0].weights_bytes
    with pytest.raises(WorkloadError, match="--main-gpu"):
        model.place(24 * GiB, layout=LlamaCppLayout(main_gpu=1))


def test_fit_keeps_the_margin_and_moves_experts_of_the_last_layers(qwen3moe):
    r = fit_llamacpp(qwen3moe, Q4_32K, [12 * GiB])
    p = r.placement
    assert r.changed and p.gpu_layers == 49 and p.gpu_bytes[0] <= 11 * GiB
    moved = [u.unit.index for u in p.units if u.pieces]
    # llama.cpp's --fit keeps the experts of the last layers in host RAM
    assert moved == list(range(moved[0], 49)) and len(moved) == r.expert_layers_on_cpu
    # one more expert layer on the GPU would break the margin
    denser = offload.llamacpp_model(qwen3moe, Q4_32K).gpu_bytes_each(
        49, [12 * GiB], LlamaCppLayout(n_cpu_moe=r.expert_layers_on_cpu - 2)
    )
    assert denser[0] > 11 * GiB
    # a model that fits is left alone; an unset context shrinks first
    small = fit_llamacpp(_spec("llama-3.2-1b"), Q4_32K.with_(seq=8192), [12 * GiB])
    assert not small.changed and small.placement.gpu_layers == 17
    auto = fit_llamacpp(
        _spec("llama-3.1-8b"), Q4_32K, [8 * GiB], context_auto=True, min_context=4096
    )
    assert 4096 <= auto.context < 131072 and auto.context % 256 == 0
    assert auto.placement.gpu_layers == 33


def test_fit_fills_two_dense_gpus_back_to_front():
    spec = _spec("llama-3.1-70b")
    r = fit_llamacpp(spec, Q4_32K.with_(seq=8192), [24 * GiB, 12 * GiB])
    p = r.placement
    assert all(u <= b - GiB for u, b in zip(p.gpu_bytes, (24 * GiB, 12 * GiB), strict=True))
    assert r.layers_per_gpu[0] > r.layers_per_gpu[1] > 0
    assert p.gpu_layers == sum(r.layers_per_gpu) < 81
    with pytest.raises(WorkloadError, match="fits only what is not set"):
        fit_llamacpp(spec, Q4_32K, [24 * GiB], layout=LlamaCppLayout(cpu_moe=True))


def test_ollama_defaults_and_settings(qwen3moe):
    w, notes = launch.ollama_workload(qwen3moe, Q4_32K, [12 * GiB], seq_given=False)
    assert w.seq == 4096 and "num_ctx" in notes[0]
    assert launch.ollama_context(24 * GiB) == 32768 and launch.ollama_context(80 * GiB) == 262144
    # The code's bounds (23 / 47 GiB), not the docs' (24 / 48): an RTX 4090 reports 23.99 GiB.
    assert launch.ollama_context(25_757_220_864) == 32768
    assert launch.ollama_context(23 * GiB - 1) == 4096
    assert launch.ollama_context(47 * GiB) == 262144
    kept, _ = launch.ollama_workload(qwen3moe, Q4_32K, [12 * GiB], seq_given=True)
    assert kept.seq == 32768
    moe = offload.llamacpp_model(qwen3moe, Q4_32K).place(
        12 * GiB, n_gpu_layers=99, margin_bytes=GiB, layout=LlamaCppLayout(cpu_moe=True)
    )
    settings = launch.ollama_settings(qwen3moe, "qwen3:30b-a3b", moe)
    assert "FROM qwen3:30b-a3b" in settings.text and "PARAMETER num_ctx 32768" in settings.text
    # Ollama has no expert offload: its num_gpu is the whole-layer count that fits
    num_gpu = int(settings.text.split("PARAMETER num_gpu ")[1].split()[0])
    assert 0 < num_gpu < 49 and "whole layers" in settings.notes[0]
    lms = launch.lmstudio_settings(qwen3moe, moe)
    assert lms.config["Number of layers for which to force MoE weights onto CPU"] == 48
    assert "--context-length 32768" in lms.text


def test_expert_curve_starts_where_deepseek_has_experts():
    spec = _spec("deepseek-v2-lite")
    m = offload.llamacpp_model(spec, Workload(quant="Q4_K_M", engine="llamacpp", seq=8192))
    points = curves.expert_curve(m, [8 * GiB], RTX3060)
    # block 0 is dense: --n-cpu-moe 1 would move nothing, so the curve skips it
    assert points[0].value == 0 and points[1].value == 2
    assert points[-1].value == m.blocks
    dense = offload.llamacpp_model(_spec("llama-3.1-8b"), Q4_32K)
    assert curves.expert_curve(dense, [8 * GiB], RTX3060) == ()


def test_each_curve_point_has_its_time_to_the_first_token(model):
    """The curves give the first token beside the decode speed: the placement's prefill of
    the prompt (the whole context here) for one sequence, shorter the more sits on the GPU;
    the search for the fastest point alone does not time it."""
    layers = curves.layer_curve(model, [12 * GiB], RTX3060, margin_bytes=GiB)
    first = [p.first_token_seconds for p in layers]
    assert all(s is not None and s > 0 for s in first)
    assert first[-1] < first[len(first) // 2] < first[0]
    placed = model.place(12 * GiB, n_gpu_layers=layers[20].value, margin_bytes=GiB)
    assert first[20] == pytest.approx(offload.prefill_seconds(placed, RTX3060, batch=1))
    best = curves.best_points(model, [12 * GiB], RTX3060, margin_bytes=GiB)
    assert all(p is None or p.first_token_seconds is None for p in best.values())
