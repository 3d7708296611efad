"""Per-layer placement (llama.cpp, accelerate, streaming) and the throughput roofline."""

from __future__ import annotations

import pytest

from vramgui.core import inference, offload, rules, storage
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import parameters_without_embeddings
from vramgui.core.families import spec_from_config
from vramgui.core.offload import CPU, DISK, Bandwidths
from vramgui.core.units import GB, GiB
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find


def _spec(name: str):
    entry = find(name)
    assert entry is not None, name
    return spec_from_config(entry.config, name)


@pytest.fixture(scope="module")
def opt175b():
    return _spec("opt-175b")


@pytest.fixture(scope="module")
def llama7b():
    return _spec("llama-2-7b")


# T4-class GPU (320 GB/s, 65 TFLOPS fp16) on PCIe 3.0, as in FlexGen's OPT-175B runs.
T4 = Bandwidths(
    gpu_bytes_per_s=320e9,
    pcie_bytes_per_s=12e9,
    cpu_ram_bytes_per_s=50e9,
    disk_bytes_per_s=2e9,
    gpu_flops=65e12,
    cpu_flops=0.5e12,
)


# --- units ---------------------------------------------------------------------------------------


def test_units_cover_every_weight_once_and_the_whole_kv_cache(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=4096)
    units = offload.model_units(llama7b, w)
    assert [u.name for u in units[:2]] == ["embeddings", "block 0"]
    assert units[-1].name == "output" and len(units) == 34
    assert sum(u.bytes for u in units) == storage.weight_bytes(llama7b, "fp16", "Q4_K_M")
    assert sum(u.kv_cache_bytes for u in units) == inference.kv_cache_bytes(llama7b, w)
    # the per-block module a device_map names
    assert units[1].modules == ("model.layers.0",)
    assert set(units[-1].modules) == {"model.norm", "lm_head"}
    layers = offload.layer_weights(llama7b, w)
    assert [(x.index, x.bytes) for x in layers] == [(u.index, u.bytes) for u in units]


def test_sliding_window_layers_keep_less_kv_where_the_engine_saves_it():
    spec = _spec("gemma-2-9b")
    w = Workload(seq=8192, engine="llamacpp")
    kv = [u.kv_cache_bytes for u in offload.model_units(spec, w)[1:-1]]
    # llama.cpp keeps a local layer's 4k window plus one 512-token micro-batch, in 256-cell
    # pages (llama_kv_cache_iswa); a global layer keeps all 8k
    assert kv[0] * 8192 == kv[1] * (4096 + 512)
    assert sum(kv) == inference.kv_cache_bytes(spec, w)


def test_training_units_hold_no_kv_cache(llama7b):
    units = offload.model_units(llama7b, Workload(mode="training"))
    assert all(u.kv_cache_bytes == 0 for u in units)


# --- streaming and the one-layer floor -----------------------------------------------------------


def test_opt175b_fp16_streams_through_an_8_gib_gpu(opt175b):
    w = Workload(dtype="fp16", seq=2048)
    units = offload.model_units(opt175b, w)
    block = units[1].bytes
    assert block == pytest.approx(3.62 * GB, rel=0.002)
    # the published rule (2 x 175e9 / 96 = 3.65 GB) agrees within 1%
    rule = rules.one_layer_floor(parameters_without_embeddings(opt175b), 96, 16)
    assert block == pytest.approx(rule, rel=0.01)
    assert max(u.bytes for u in units) == block

    floor = offload.min_vram_bytes(opt175b, w)
    p = offload.plan_streaming(opt175b, w, 8 * GiB, host_ram_bytes=200 * GB)
    assert p.fits
    assert p.stream_bytes == block
    assert floor == p.gpu_bytes[0] == block + p.buffers_bytes + p.overhead_bytes
    assert floor < 8 * GiB
    # 96 blocks of KV (9.7 GB) do not fit beside the slot: the cache stays in host RAM
    assert all(u.kv_device == CPU for u in p.units)
    assert all(u.device in (CPU, DISK) for u in p.units)
    assert p.host_bytes + p.disk_bytes == sum(u.bytes + u.kv_cache_bytes for u in units)
    assert p.host_bytes <= 200 * GB < p.host_bytes + units[1].bytes + units[1].kv_cache_bytes
    # prefetching the next block needs a second slot
    assert offload.min_vram_bytes(opt175b, w, prefetch=True) > floor + block - 1


def test_the_floor_ignores_the_kv_dtype_it_leaves_on_the_host(llama7b):
    w = Workload(quant="Q4_K_M", engine="llamacpp", kv_dtype="q8_0")
    assert offload.min_vram_bytes(llama7b, w) == offload.min_vram_bytes(
        llama7b, w.with_(kv_dtype="auto")
    )


def test_a_gpu_below_the_floor_does_not_fit(opt175b):
    w = Workload(dtype="fp16", seq=2048)
    p = offload.plan_streaming(opt175b, w, 3 * GiB, host_ram_bytes=None)
    assert not p.fits
    assert any("over its budget" in note for note in p.notes)


def test_streaming_opt175b_is_bound_by_the_disk_or_pcie_as_the_bandwidths_say(opt175b):
    w = Workload(dtype="fp16", seq=2048)
    p = offload.plan_streaming(opt175b, w, 8 * GiB, host_ram_bytes=200 * GB)
    slow_disk = offload.decode_throughput(p, T4)
    assert slow_disk.bound == "disk"
    assert slow_disk.step_seconds == pytest.approx(p.disk_bytes / T4.disk_bytes_per_s)
    total = (
        p.host_bytes + p.disk_bytes - sum(u.kv_cache_bytes for u in offload.model_units(opt175b, w))
    )
    fast_disk = offload.decode_throughput(p, Bandwidths(320e9, 12e9, 50e9, 50e9, 65e12, 0.5e12))
    assert fast_disk.bound == "pcie"
    assert fast_disk.step_seconds == pytest.approx(total / 12e9)
    assert fast_disk.tokens_per_second > slow_disk.tokens_per_second


# --- llama.cpp -----------------------------------------------------------------------------------


def test_llama7b_q4_k_m_on_4_gib_takes_layers_until_one_more_would_not_fit(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)
    budget = 4 * GiB
    p = offload.plan_llamacpp(llama7b, w, budget)
    ngl = p.gpu_layers
    assert 0 < ngl <= 32
    assert p.fits and p.gpu_bytes[0] <= budget
    assert offload.llamacpp_gpu_bytes(llama7b, w, ngl + 1) > budget
    assert offload.max_gpu_layers(llama7b, w, budget) == ngl

    # the VRAM is the output layer and the last ngl - 1 blocks with their KV, the compute buffer
    # and overhead: llama.cpp offloads the output layer first (pull request 18148)
    layers = offload.layer_weights(llama7b, w)
    blocks = layers[1:-1]
    expected = layers[-1].bytes + sum(b.bytes + b.kv_cache_bytes for b in blocks[33 - ngl :])
    assert p.gpu_bytes[0] == expected + p.buffers_bytes + p.overhead_bytes
    assert p.buffers_bytes == inference.inference_breakdown(llama7b, w).activations_bytes
    # one more block (the next one down) would go over
    nxt = blocks[33 - ngl - 1]
    assert p.gpu_bytes[0] + nxt.bytes + nxt.kv_cache_bytes > budget

    devices = [u.device for u in p.units]
    assert devices[0] == CPU  # token embeddings stay in host memory
    assert devices[1 : 34 - ngl] == [CPU] * (33 - ngl)
    assert devices[34 - ngl : 33] == ["gpu:0"] * (ngl - 1)
    assert devices[-1] == "gpu:0"  # the output layer goes first


def test_llamacpp_offloads_the_output_layer_first(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)
    p = offload.plan_llamacpp(llama7b, w, 24 * GiB)
    assert p.gpu_layers == 33
    assert [u.device for u in p.units] == [CPU] + ["gpu:0"] * 33
    at_32 = offload.plan_llamacpp(llama7b, w, 24 * GiB, n_gpu_layers=32)
    assert at_32.units[-1].device == "gpu:0" and at_32.units[1].device == CPU
    first = at_32.units[1].unit
    assert p.gpu_bytes[0] - at_32.gpu_bytes[0] == first.bytes + first.kv_cache_bytes
    one = offload.plan_llamacpp(llama7b, w, 24 * GiB, n_gpu_layers=1)
    assert [u.device for u in one.units] == [CPU] * 33 + ["gpu:0"]


def test_llamacpp_duplicates_tied_embeddings_as_the_output_on_the_gpu():
    spec = _spec("qwen2.5-0.5b")
    assert spec.facts.tie_word_embeddings
    w = Workload(dtype="bf16", quant="Q8_0", engine="llamacpp", seq=2048)
    full = offload.plan_llamacpp(spec, w, 24 * GiB)
    out = full.units[-1]
    assert out.gpu_bytes == out.unit.bytes + full.units[0].unit.bytes
    # the LM head reads the GPU copy: nothing is read from host RAM per token
    speed = offload.decode_throughput(full, T4)
    assert speed.seconds_by_resource["cpu_memory"] == 0
    partial = offload.plan_llamacpp(spec, w, 24 * GiB, n_gpu_layers=10)
    assert offload.decode_throughput(partial, T4).seconds_by_resource["cpu_memory"] > 0


def test_llamacpp_no_kv_offload_keeps_the_cache_on_the_host(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=4096)
    on = offload.plan_llamacpp(llama7b, w, 6 * GiB)
    off = offload.plan_llamacpp(llama7b, w, 6 * GiB, kv_offload=False)
    assert off.gpu_layers > on.gpu_layers
    assert all(u.kv_device == CPU for u in off.units)
    assert off.host_bytes > sum(u.unit.kv_cache_bytes for u in off.units)


def test_llamacpp_pages_from_disk_when_host_ram_is_short(llama7b):
    w = Workload(dtype="fp16", engine="llamacpp", seq=2048)
    p = offload.plan_llamacpp(llama7b, w, 2 * GiB, host_ram_bytes=4 * GiB)
    assert p.disk_bytes > 0
    assert p.host_bytes <= 4 * GiB
    t = offload.decode_throughput(p, T4)
    assert t.bound == "disk"


# --- accelerate ----------------------------------------------------------------------------------


def _rank(device: str) -> int:
    return {"gpu:0": 0, "gpu:1": 1, CPU: 2, DISK: 3}[device]


def test_accelerate_fills_gpus_in_order_then_cpu_then_disk(llama7b):
    w = Workload(dtype="fp16", seq=1024)
    p = offload.plan_accelerate(llama7b, w, [4 * GiB, 3 * GiB], host_ram_bytes=5 * GiB)
    ranks = [_rank(u.device) for u in p.units]
    assert ranks == sorted(ranks)
    assert {u.device for u in p.units} == {"gpu:0", "gpu:1", CPU, DISK}
    assert p.fits
    assert all(
        used <= budget for used, budget in zip(p.gpu_bytes, p.vram_budget_bytes, strict=True)
    )
    # the main GPU runs the offloaded blocks: it holds their KV cache and the copy slot
    largest = max(u.unit.bytes for u in p.units)
    assert p.stream_bytes == largest
    assert all(u.kv_device == "gpu:0" for u in p.units if u.device in (CPU, DISK))
    # the CPU kept room for the largest unit
    assert sum(u.unit.bytes for u in p.units if u.device == CPU) <= 5 * GiB - largest


def test_accelerate_counts_the_kv_cache_of_blocks_on_a_second_gpu(llama7b):
    w = Workload(dtype="fp16", seq=8192, batch=2)  # 268 MB of KV per block
    p = offload.plan_accelerate(llama7b, w, [10 * GiB, 6 * GiB], host_ram_bytes=64 * GiB)
    on_second = [u for u in p.units if u.device == "gpu:1"]
    assert on_second and all(u.kv_device == "gpu:1" for u in on_second)
    second = sum(u.unit.bytes + u.unit.kv_cache_bytes for u in on_second)
    assert second < p.gpu_bytes[1] <= 6 * GiB
    # the main GPU holds the KV cache of its own and of the offloaded blocks, not of GPU 1's
    assert [u.device for u in p.units[:3]] == ["gpu:0"] * 3
    kv_total = sum(u.unit.kv_cache_bytes for u in p.units)
    served = sum(u.unit.kv_cache_bytes for u in p.units if u.kv_device == "gpu:0")
    assert served == kv_total - sum(u.unit.kv_cache_bytes for u in on_second)
    assert p.gpu_bytes[0] <= 10 * GiB
    assert p.fits


def test_accelerate_puts_everything_on_the_gpu_when_it_fits(llama7b):
    w = Workload(dtype="fp16", seq=1024)
    p = offload.plan_accelerate(llama7b, w, 80 * GiB)
    assert {u.device for u in p.units} == {"gpu:0"}
    assert p.gpu_layers == 32 and p.stream_bytes == 0 and p.host_bytes == 0


# --- throughput ----------------------------------------------------------------------------------


def test_a_model_on_the_gpu_decodes_at_memory_bandwidth_then_turns_compute_bound(llama7b):
    # A short context: at long ones the KV reads of a large batch keep decode memory-bound.
    w = Workload(dtype="fp16", seq=16)
    p = offload.plan_accelerate(llama7b, w, 80 * GiB)
    h100 = Bandwidths(3.35e12, 50e9, 50e9, 3.5e9, 989e12, 1e12)
    one = offload.decode_throughput(p, h100, 1)
    assert one.bound == "gpu_memory"
    weights = storage.weight_bytes(llama7b, "fp16", "none")
    # every weight but the embedding rows is read once per step
    assert one.tokens_per_second == pytest.approx(h100.gpu_bytes_per_s / weights, rel=0.06)
    curve = offload.throughput_curve(p, h100)
    speeds = [t.tokens_per_second for t in curve]
    assert speeds == sorted(speeds)
    turn = offload.compute_bound_batch(p, h100)
    assert turn is not None and 100 < turn < 1000
    assert offload.decode_throughput(p, h100, turn).compute_bound
    assert not offload.decode_throughput(p, h100, turn - 1).compute_bound


def test_llamacpp_cpu_layers_read_host_ram(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=512)
    bw = Bandwidths(360e9, 12e9, 50e9, 3.5e9, 30e12, 0.5e12)
    none = offload.plan_llamacpp(llama7b, w, 4 * GiB, n_gpu_layers=0)
    some = offload.plan_llamacpp(llama7b, w, 4 * GiB)
    t0 = offload.decode_throughput(none, bw)
    t1 = offload.decode_throughput(some, bw)
    assert t0.bound == "cpu_memory"
    assert t1.tokens_per_second > t0.tokens_per_second
    # a long prompt goes through the GPU in micro-batches, weights copied over PCIe
    assert offload.prefill_seconds(none, bw, 2048) < 2048 / t0.tokens_per_second


def test_moe_decode_reads_only_the_routed_experts():
    spec = _spec("mixtral-8x7b")
    w = Workload(dtype="bf16", seq=512)
    p = offload.plan_accelerate(spec, w, 200 * GiB)
    bw = Bandwidths(3.35e12, 50e9, 50e9, 3.5e9, 989e12, 1e12)
    units = offload.model_units(spec, w)
    experts = sum(u.expert_bytes for u in units)
    dense = sum(u.read_bytes for u in units)
    t = offload.decode_throughput(p, bw, 1)
    kv = sum(u.kv_cache_bytes for u in units)
    assert t.step_seconds == pytest.approx((dense + experts * 2 / 8 + kv) / bw.gpu_bytes_per_s)


def test_bad_inputs_are_user_errors(llama7b):
    with pytest.raises(WorkloadError):
        Bandwidths(0, 1, 1, 1, 1, 1)
    with pytest.raises(WorkloadError):
        offload.plan("vllm", llama7b, Workload(), 8 * GiB)
    with pytest.raises(WorkloadError):
        offload.plan_accelerate(llama7b, Workload(), [])


def test_the_most_that_fit_keep_the_safety_margin_free(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)
    budget, margin = 4 * GiB, offload.DEFAULT_MARGIN_BYTES
    tight = offload.plan_llamacpp(llama7b, w, budget)
    kept = offload.plan_llamacpp(llama7b, w, budget, margin_bytes=margin)
    assert kept.margin_bytes == margin and tight.margin_bytes == 0
    assert kept.gpu_bytes[0] <= budget - margin < tight.gpu_bytes[0]
    assert kept.gpu_layers < tight.gpu_layers
    assert offload.max_gpu_layers(llama7b, w, budget - margin) == kept.gpu_layers
    # Chosen by hand past the margin: it still fits, and the summary says the margin is gone.
    by_hand = offload.plan_llamacpp(
        llama7b, w, budget, n_gpu_layers=tight.gpu_layers, margin_bytes=margin
    )
    assert by_hand.fits and any("safety margin" in note for note in by_hand.notes)
    accelerate = offload.plan_accelerate(
        llama7b, Workload(dtype="fp16"), [8 * GiB], margin_bytes=margin
    )
    assert accelerate.gpu_bytes[0] <= 7 * GiB


def test_transformers_planners_refuse_gguf_weights_it_would_dequantize(llama7b):
    gguf = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp")
    for planner in ("accelerate", "streaming"):
        with pytest.raises(WorkloadError, match="dequantizes"):
            offload.plan(planner, llama7b, gguf, 8 * GiB)
    # The one-layer floor of GGUF weights is llama.cpp's: a Q4_K_M block, not a 16-bit one.
    floor = offload.min_vram_bytes(llama7b, gguf)
    assert floor < offload.min_vram_bytes(llama7b, Workload(dtype="fp16"))


def test_default_speeds_take_the_share_of_peak_bandwidth_decoding_reaches():
    bw = offload.expected_bandwidths(
        gpu_peak_bytes_per_s=1000e9, pcie_bytes_per_s=25e9, gpu_flops=100e12, disk_bytes_per_s=3e9
    )
    assert bw.gpu_bytes_per_s == pytest.approx(800e9)
    assert bw.cpu_ram_bytes_per_s == pytest.approx(0.7 * offload.DEFAULT_CPU_RAM_PEAK_BYTES_PER_S)
    assert bw.pcie_bytes_per_s == 25e9 and bw.gpu_flops == 100e12
    peak = offload.expected_bandwidths(
        gpu_peak_bytes_per_s=1000e9,
        pcie_bytes_per_s=25e9,
        gpu_flops=100e12,
        disk_bytes_per_s=3e9,
        gpu_efficiency=1,
        host_efficiency=1,
    )
    assert peak.gpu_bytes_per_s == 1000e9
    with pytest.raises(WorkloadError, match="efficiency"):
        offload.expected_bandwidths(
            gpu_peak_bytes_per_s=1e9,
            pcie_bytes_per_s=1e9,
            gpu_flops=1e12,
            disk_bytes_per_s=1e9,
            gpu_efficiency=1.5,
        )


def test_llama_cpp_places_a_multimodal_checkpoints_language_model_and_names_its_mmproj():
    # Gemma 3 12B: the SigLIP tower and projector (421M parameters) are an mmproj file that
    # llama-server loads only with --mmproj; the output unit holds the final norm alone (the
    # head is tied), not the tower.
    spec = find("gemma-3-12b").spec()
    plan = offload.plan_llamacpp(spec, Workload(engine="llamacpp", quant="Q4_0"), 12 * GiB)
    output = plan.units[-1]
    assert output.unit.bytes < 1024**2
    assert "separate mmproj GGUF (0.8 GiB" in plan.notes[0]
