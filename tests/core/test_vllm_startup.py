"""vLLM's start-up (core/vllm/): the KV layout rules against vLLM's own logs, start or refuse,
and every knob moving the answer the way vLLM moves it."""

import json
from dataclasses import replace

import pytest

from vramgui.core.activations import vllm_profile_peak
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.fit import advise, fit_rows, gpus_needed, largest_fitting
from vramgui.core.launch import vllm_settings
from vramgui.core.model import Role, Tensor
from vramgui.core.rank_weights import rank_tensor_bytes
from vramgui.core.report import document_for
from vramgui.core.units import GiB, MiB
from vramgui.core.vllm.encoders import (
    PixtralTower,
    SiglipTower,
    VisionTower,
    encoder_items,
    encoder_profile,
    encoder_towers,
    image_patches,
    largest_image,
    towers_named,
    unmodelled_note,
)
from vramgui.core.vllm.kv_layout import LayerKv, kv_layout, layer_specs
from vramgui.core.vllm.profile import Scheduler, lora_slot_bytes, scheduler_settings
from vramgui.core.vllm.rules import RULES, Rules, rules_for
from vramgui.core.vllm.startup import VllmEngine, pipeline_layers
from vramgui.core.workload import VLLM_VERSIONS, Workload
from vramgui.sources.catalog import load_catalog

RTX_4090 = 24564 * MiB  # what nvidia-smi reports
H100 = 81559 * MiB


@pytest.fixture(scope="module")
def catalog():
    entries = {e.name: e for e in load_catalog()}
    return lambda name: entries[name].spec()


def _plan(spec, workload, capacity=RTX_4090):
    engine = VllmEngine(spec, workload, rank_tensor_bytes(spec, workload))
    return engine, engine.plan(capacity)


def _layout(spec, workload):
    layers = range(spec.facts.num_layers)
    return kv_layout(layer_specs(spec, workload, layers), RULES[workload.vllm_version])


def test_sliding_and_full_groups_count_tokens_as_vllm_logs_them(catalog):
    # dennislee22/vLLM-benchmarking, vllm-120B-4gpuA10080GB-0.8GRAM-diff-nodes.log (vLLM
    # 0.10.1.1): gpt-oss-120b at TP 4, --max-model-len 16384, 2048 batched tokens.
    # "GPU KV cache size: 2,640,144 tokens", "Maximum concurrency ... 284.25x": 330,018 blocks.
    w = Workload(engine="vllm", tp=4, gpus=4, seq=16384, vllm_version="0.10")
    layout = _layout(catalog("gpt-oss-120b"), w)
    assert [(g.spec.kind, g.layers) for g in layout.groups] == [("sliding", 18), ("full", 18)]
    assert layout.groups[0].spec.page_bytes == 16 * 2 * 64 * 2 * 2  # 2 K/V heads of 64 per rank
    # A request: 1024 full blocks, and the window (128 - 1 + 2048 tokens) plus one.
    assert layout.blocks_per_request(16384, 2048) == 1024 + 137
    assert layout.reported_tokens(330018, 16384, 2048, RULES["0.10"]) == 2640144
    assert round(layout.concurrency(330018, 16384, 2048), 2) == 284.25
    # From 0.20 the log line is the concurrency times the length: the window's saving shows.
    tokens = layout.reported_tokens(330018, 16384, 2048, RULES["0.20"])
    assert tokens == int(330018 / 1161 * 16384) > 2640144


def test_a_rare_kind_sets_the_group_size_and_the_others_are_padded(catalog):
    # Gemma 3 27B: 52 sliding-window layers and 10 full ones -> groups of 10, the sliding
    # layers in 6 of them (the last padded with 8 layers, as vLLM warns).
    layout = _layout(catalog("gemma-3-27b"), Workload(engine="vllm"))
    assert [g.layers for g in layout.groups] == [10] * 7
    assert sum(g.spec.kind == "sliding" for g in layout.groups) == 6
    assert layout.block_bytes == 10 * layout.groups[0].spec.page_bytes


def test_state_pages_and_attention_blocks_are_made_equal(catalog):
    # Nemotron-H: Mamba layers' state and attention blocks share one page size; the attention
    # block grows in steps of 16 tokens until it holds a state.
    specs = layer_specs(catalog("nemotron-3-nano-30b-a3b"), Workload(engine="vllm"), range(52))
    state = max(s.state_bytes for s in specs)
    layout = kv_layout(specs, RULES["0.20"])
    pages = {s.page_bytes for s in layout.specs}
    assert len(pages) == 1 and pages.pop() >= state
    attention = next(s for s in layout.specs if s.kind == "full")
    assert attention.block_size % 16 == 0 and attention.block_size > 16
    assert (attention.block_size - 16) * attention.token_bytes < state
    # One state block per request, whatever the length.
    mamba = next(s for s in layout.specs if s.kind == "state")
    assert mamba.blocks_per_request(1_000_000, 2048) == 1


def test_gated_deltanet_states_as_vllm_sizes_them(catalog):
    # noonghunna/club-3090 issue 652 (vLLM 0.24.0, RTX 5090): Qwen3.6-35B-A3B, fp8 KV cache,
    # --max-model-len 131072, prefix caching on. "Available KV cache memory: 6.01 GiB",
    # "GPU KV cache size: 569,878 tokens", "Maximum concurrency ...: 4.35x". The recurrent
    # state is float32 (the config's mamba_ssm_dtype), the convolution keeps kernel - 1 inputs,
    # attention blocks grow to 2096 tokens to hold a state, and prefix caching keeps one more
    # state per request ("align"): 300 blocks, 63 + 3 x 2 per request.
    spec = catalog("qwen3.6-35b-a3b-nvfp4")
    w = Workload(engine="vllm", seq=131072, kv_dtype="fp8", enable_prefix_caching=True)
    layout = _layout(spec, w)
    attention = next(g.spec for g in layout.groups if g.spec.kind == "full")
    assert attention.block_size == 2096
    assert layout.blocks(round(6.01 * GiB)) == 300
    assert layout.blocks_per_request(131072, 8192) == 69
    assert layout.reported_tokens(300, 131072, 8192, RULES["0.20"]) == 569878
    # Without prefix caching (0.24's default for hybrid models) one state per request.
    plain = _layout(spec, w.with_(enable_prefix_caching=None))
    assert plain.blocks_per_request(131072, 8192) == 66
    # Each speculative token keeps one more state and one more convolution input.
    mtp = _layout(spec, w.with_(mtp=True, num_speculative_tokens=3))
    state = next(g.spec for g in mtp.groups if g.spec.kind == "state")
    assert state.state_blocks == 1 + 3 + 1


def test_more_sequences_than_state_blocks_is_refused(catalog):
    # vLLM 0.20.2 and later refuse a hybrid model whose pool has fewer blocks than
    # --max-num-seqs when it captures full decode graphs (resolve_cudagraph_mode_and_sizes):
    # Qwen3.5-27B in 16 bits on an H100 at its default 1024 sequences.
    spec = catalog("qwen3.5-27b")
    w = Workload(engine="vllm", seq=32768)
    _, plan = _plan(spec, w, H100)
    assert plan.scheduler.max_num_seqs == 1024
    up = plan.startup(H100, 0.9, 32768)
    assert not up.starts and "exceeds available Mamba cache blocks" in up.message
    assert f"at most {up.blocks}" in up.message
    assert up.blocks < 1024
    # No CUDA graphs, or fewer sequences, and it starts.
    _, eager = _plan(spec, w.with_(enforce_eager=True), H100)
    assert eager.startup(H100, 0.9, 32768).starts
    _, fewer = _plan(spec, w.with_(max_num_seqs=256), H100)
    assert fewer.startup(H100, 0.9, 32768).starts
    # 0.11 has no such check.
    _, old = _plan(spec, w.with_(vllm_version="0.11"), H100)
    assert "Mamba" not in old.startup(H100, 0.9, 32768).message


def test_mla_keeps_one_latent_per_token_on_every_rank(catalog):
    spec = catalog("deepseek-v2-lite")
    for tp in (1, 2):
        specs = layer_specs(spec, Workload(engine="vllm", tp=tp, gpus=tp), range(27))
        assert {s.token_bytes for s in specs} == {(512 + 64) * 2}


def test_pages_of_different_sizes_need_a_newer_vllm():
    specs = [
        LayerKv("full", 512),
        LayerKv("sliding", 1024, window=512),
    ] * 4
    with pytest.raises(WorkloadError, match=r"0\.11 cannot allocate"):
        kv_layout(specs, RULES["0.11"])
    layout = kv_layout(specs, RULES["0.20"])
    assert {s.page_bytes for s in layout.specs} == {16 * 1024}
    assert {s.block_size for s in layout.specs if s.kind == "full"} == {32}


def test_a_refused_start_names_the_longest_length_that_starts(catalog):
    spec = catalog("llama-3.1-8b")
    w = Workload(engine="vllm", seq=131072)
    engine, _ = _plan(spec, w)
    up = engine.startup(RTX_4090)
    assert not up.starts
    assert up.message.startswith("To serve at least one request with the models's max seq len")
    assert f"the estimated maximum model length is {up.largest_model_len}." in up.message
    longest = up.largest_model_len
    assert 0 < longest < 131072
    assert engine.startup(RTX_4090, max_model_len=longest).starts
    assert not engine.startup(RTX_4090, max_model_len=longest + 1).starts
    # The estimate says so: it does not fit, and the JSON carries vLLM's figures.
    est = estimate(spec, w, RTX_4090, "RTX 4090")
    (row,) = fit_rows(est, [("RTX 4090", RTX_4090)])
    assert not row.fits and row.headroom_bytes == -(up.needed_bytes - up.available_bytes)
    assert est.details["vllm_starts"] is False and "estimated maximum" in est.details["vllm_error"]
    assert largest_fitting(spec, w, RTX_4090, "seq") == longest
    # The cheapest change that makes it start comes first.
    first = advise(spec, w, RTX_4090)[0]
    assert first.fits
    assert estimate(spec, w.with_(**first.changes), RTX_4090).details["vllm_starts"]


def test_utilization_beyond_free_memory_is_refused_as_vllm_refuses_it(catalog):
    engine, _ = _plan(catalog("llama-3.2-1b"), Workload(engine="vllm", gpu_memory_utilization=1.0))
    up = engine.startup(RTX_4090)
    assert not up.starts and up.message.startswith("Free memory on device")
    assert up.largest_model_len == 0


def test_the_document_gives_the_pool_in_tokens_and_the_concurrency(catalog):
    doc = document_for(
        catalog("qwen3-8b"),
        Workload(engine="vllm", seq=8192),
        [("RTX 4090", RTX_4090), ("H100 SXM", H100)],
    )
    details = doc["details"]
    assert details["kv_pool_tokens"] > 0
    assert details["max_concurrency"] == pytest.approx(
        details["kv_pool_blocks"] / (8192 // details["kv_block_size"]), abs=0.01
    )
    h100 = doc["fit"][1]["vllm"]
    assert h100["starts"] and h100["kv_pool_tokens"] > 4 * details["kv_pool_tokens"]
    json.dumps(doc)  # plain JSON


def _pool(spec, capacity=RTX_4090, **settings):
    w = Workload(engine="vllm", seq=4096, **settings)
    engine, _ = _plan(spec, w, capacity)
    return engine.startup(capacity)


def test_each_knob_moves_the_pool_the_way_vllm_does(catalog):
    spec = catalog("qwen3-8b")
    base = _pool(spec)
    # FP8 halves every token's bytes: twice the blocks from the same memory.
    fp8 = _pool(spec, kv_dtype="fp8")
    assert fp8.available_bytes == base.available_bytes
    assert fp8.blocks in (2 * base.blocks, 2 * base.blocks + 1)
    # More of the GPU, more pool; the difference is the extra share, byte for byte.
    more = _pool(spec, gpu_memory_utilization=0.95)
    assert more.available_bytes - base.available_bytes == more.requested_bytes - (
        base.requested_bytes
    )
    # Fewer sequences to warm the sampler up, fewer batched tokens to profile: a smaller peak.
    assert _pool(spec, max_num_seqs=16).available_bytes > base.available_bytes
    assert _pool(spec, max_num_batched_tokens=8192).available_bytes < base.available_bytes
    # CUDA graphs come out of the pool from 0.20; before, out of the margin.
    eager = _pool(spec, enforce_eager=True)
    assert eager.available_bytes > base.available_bytes
    old, old_eager = (
        _pool(spec, vllm_version="0.11"),
        _pool(spec, vllm_version="0.11", enforce_eager=True),
    )
    assert old.available_bytes == old_eager.available_bytes
    assert old.used_bytes > old_eager.used_bytes
    # LoRA slots: rank x (in + out) of every linear module, per adapter, in bf16.
    lora = _pool(spec, enable_lora=True, max_loras=4, max_lora_rank=64)
    slots = lora_slot_bytes(
        spec, Workload(engine="vllm", enable_lora=True, max_loras=4, max_lora_rank=64), range(36)
    )
    assert slots == 4 * 64 * 2 * sum(
        sum(t.shape)
        for t in spec.tensors
        if t.layer is not None and len(t.shape) == 2 and t.role.value in ("attention", "mlp")
    )
    assert base.available_bytes - lora.available_bytes == slots
    # Weights kept in host RAM leave their room to the pool.
    offload = _pool(spec, cpu_offload_gb=4)
    assert offload.available_bytes - base.available_bytes == 4 * GiB


def test_parallelism_shards_weights_and_heads(catalog):
    spec = catalog("qwen3-8b")
    one = _plan(spec, Workload(engine="vllm"))[1]
    two = _plan(spec, Workload(engine="vllm", tp=2, gpus=2))[1]
    assert two.weights_bytes == pytest.approx(one.weights_bytes / 2, rel=0.05)
    assert two.stages[0].layout.token_bytes * 2 == one.stages[0].layout.token_bytes
    pp = _plan(spec, Workload(engine="vllm", pp=2, gpus=2))[1]
    assert len(pp.stages) == 2
    assert [len(s.layout.specs) for s in pp.stages] == [18, 18]
    assert pipeline_layers(7, 3) == ((0, 1), (2, 3, 4), (5, 6))
    with pytest.raises(WorkloadError, match="KV heads"):
        _plan(spec, Workload(engine="vllm", tp=3, gpus=3))


def test_speculative_decoding_adds_its_layers(catalog):
    spec = catalog("deepseek-v2-lite")
    with pytest.raises(WorkloadError, match="multi-token-prediction"):
        _plan(spec, Workload(engine="vllm", mtp=True))
    v3 = catalog("deepseek-v3")
    w = Workload(engine="vllm", gpus=8, tp=8)
    plain = _plan(v3, w, H100)[1]
    mtp = _plan(v3, w.with_(mtp=True), H100)[1]
    assert len(mtp.stages[0].layout.specs) == len(plain.stages[0].layout.specs) + 1
    assert mtp.weights_bytes > plain.weights_bytes
    target, draft = catalog("llama-3.1-8b"), catalog("llama-3.2-1b")
    w = Workload(engine="vllm", speculative="draft", draft_model="llama-3.2-1b")
    unread = estimate(target, w, RTX_4090)
    assert "No draft model read yet" in unread.notes[0]
    with_draft = estimate(target, w, RTX_4090, draft=draft)
    without = estimate(target, w.with_(speculative="none"), RTX_4090)
    # Llama 3.2 1B in bf16, its tied embedding counted once.
    assert with_draft.components["weights"] - without.components["weights"] == 2 * draft.parameters
    assert with_draft.details["kv_pool_tokens"] < without.details["kv_pool_tokens"]


def test_more_gpus_are_needed_until_vllm_starts(catalog):
    spec = catalog("llama-3.1-70b")
    w = Workload(engine="vllm", seq=32768)
    count = gpus_needed(spec, w, H100)
    assert count is not None and count > 1

    def starts(n):
        return estimate(spec, w.with_(gpus=n, tp=n), H100, "H100 SXM").details["vllm_starts"]

    assert starts(count) and not starts(count // 2)


def test_the_launch_line_reproduces_every_knob(catalog):
    w = Workload(
        engine="vllm",
        seq=16384,
        tp=2,
        pp=2,
        gpus=4,
        kv_dtype="fp8",
        max_num_seqs=64,
        max_num_batched_tokens=4096,
        enforce_eager=True,
        enable_lora=True,
        max_loras=2,
        max_lora_rank=32,
        speculative="draft",
        draft_model="llama-3.2-1b",
        num_speculative_tokens=4,
        cpu_offload_gb=2.5,
        gpu_memory_utilization=0.85,
        enable_prefix_caching=False,
    )
    text = vllm_settings(catalog("llama-3.1-8b"), w).text
    for flag in (
        "--max-model-len 16384",
        "--tensor-parallel-size 2",
        "--pipeline-parallel-size 2",
        "--kv-cache-dtype fp8",
        "--max-num-seqs 64",
        "--max-num-batched-tokens 4096",
        "--enforce-eager",
        "--enable-lora --max-loras 2 --max-lora-rank 32",
        "--cpu-offload-gb 2.5",
        "--gpu-memory-utilization 0.85",
        "--no-enable-prefix-caching",
    ):
        assert flag in text
    assert '"model":"llama-3.2-1b","num_speculative_tokens":4' in text
    plain = vllm_settings(catalog("llama-3.1-8b"), Workload(engine="vllm")).text
    for flag in (
        "--max-num-seqs",
        "--enforce-eager",
        "--enable-lora",
        "--speculative-config",
        "prefix-caching",
    ):
        assert flag not in plain


def test_scheduler_defaults_follow_the_gpu():
    w = Workload(engine="vllm")
    small = scheduler_settings(w, 23 * GiB)
    large = scheduler_settings(w, 79 * GiB, "H100 SXM")
    a100 = scheduler_settings(w, 79 * GiB, "A100 SXM 80GB")
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 2048)
    assert (large.max_num_seqs, large.max_num_batched_tokens) == (1024, 8192)
    assert a100 == small
    with pytest.raises(WorkloadError, match="at least --max-num-seqs"):
        scheduler_settings(w.with_(max_num_seqs=512, max_num_batched_tokens=256), None)


def test_versions_map_to_the_rules_read():
    assert rules_for("0.10.1.1") is RULES["0.10"]
    assert rules_for("0.11.0") is RULES["0.11"]
    assert rules_for("0.20.2rc1.dev9") is RULES["0.20"]
    assert rules_for("0.34.0") is RULES["0.20"]
    assert rules_for("0.9.2") is RULES["0.10"]
    assert replace(RULES["0.20"], sampler="pytorch").cuda_graphs_in_pool


def test_the_version_table_is_one_named_record_per_version():
    assert tuple(RULES) == VLLM_VERSIONS
    assert all(version == rules.version for version, rules in RULES.items())
    with pytest.raises(TypeError):  # a row of unlabelled values is refused
        Rules("0.30", True, True, True, True, True, True, True, "flashinfer", True, True)  # type: ignore[misc]


# The vision encoder's profile (vLLM 0.24 gpu_model_runner.profile_run, Qwen3VLProcessingInfo).


def test_the_tower_is_read_from_the_checkpoint_weights(catalog):
    tower = VisionTower.of(catalog("qwen3.6-35b-a3b-nvfp4"))
    assert tower == VisionTower(
        depth=27,
        hidden=1152,
        intermediate=4304,
        patch=16,
        temporal_patch=2,
        channels=3,
        merge=2,
        out_hidden=2048,
        deepstack=0,
    )
    assert VisionTower.of(catalog("qwen3-32b")) is None


def _tower(patch=16, merge=2):
    return VisionTower(27, 1152, 4304, patch, 2, 3, merge, 2048, 0)


def test_the_largest_image_factors_the_most_tokens_into_the_squarest_grid():
    unit = 32  # patch 16 x merge 2
    # 16,777,216 pixels hold 16,384 merged tokens: a 128 x 128 grid.
    assert largest_image(_tower(), 16_777_216) == (128 * unit, 128 * unit)
    # The video's share of a frame pair, 12,582,912 pixels: 12,288 tokens, 96 x 128.
    assert largest_image(_tower(), 25_165_824 // 2) == (96 * unit, 128 * unit)
    # 211 tokens (a prime) only factor as 1 x 211, past the 200 aspect ratio: one token less.
    assert largest_image(_tower(), 211 * unit * unit) == (14 * unit, 15 * unit)


def test_images_carry_more_tokens_than_a_video_frame_pair_under_qwen_limits():
    tower = _tower()
    image = image_patches(tower)
    video = image_patches(tower, video=True)
    assert image == (4096 // 16) ** 2  # one frame, padded to the temporal patch: grid_t 1
    assert video == 1 * (3072 // 16) * (4096 // 16)
    assert image // 4 > video // 4


def _encoder(spec, tokens=8192, seqs=1, seq=131072, tp=1):
    w = Workload(engine="vllm", seq=seq, tp=tp, gpus=tp, vllm_version="0.20")
    scheduler = Scheduler(seqs, tokens)
    return encoder_profile(spec, w, scheduler, RULES["0.20"])


@pytest.mark.parametrize(
    ("tokens", "seqs", "seq", "items"),
    [
        (8192, 1, 131072, 1),  # budget max(8192, 16384) holds one image
        (40000, 4, 131072, 2),  # 40,000 // 16,384
        (40000, 1, 16384, 1),  # one request of 16,384 tokens holds one image
    ],
)
def test_the_encoder_budget_picks_how_many_images(catalog, tokens, seqs, seq, items):
    profile = _encoder(catalog("qwen3.6-35b-a3b-nvfp4"), tokens, seqs, seq)
    assert profile.tokens_per_item == 16384
    assert profile.items == items
    assert profile.patches == items * 65536


@pytest.mark.parametrize("tp", [1, 2])
def test_the_encoder_peak_is_one_block_beside_its_inputs(catalog, tp):
    profile = _encoder(catalog("qwen3.6-35b-a3b-nvfp4"), tp=tp)
    e = 2  # bf16
    n = 65536
    h = n * 1152 * e
    pixels = n * 3 * 2 * 16 * 16 * e
    attention = 3 * h + 8 * h // tp  # residual, normed, proj output; qkv, q/k copy, rotated, out
    mlp = 2 * h + 2 * n * 4304 * e // tp  # residual, normed; fc1 and its activation
    assert profile.peak_bytes == pixels + h + max(attention, mlp)  # h: position embeddings
    assert profile.kept_bytes == pixels + 16384 * 2048 * e
    assert "uncertain" in profile.note


def test_the_encoder_runs_before_the_text_profile_and_its_outputs_stay(catalog):
    spec = catalog("qwen3.6-35b-a3b-nvfp4")
    w = Workload(engine="vllm", seq=131072, max_num_seqs=1, max_num_batched_tokens=8192)
    _, plan = _plan(spec, w, 32607 * MiB)
    text = vllm_profile_peak(spec, w, 8192, 1, plan.rules.sampler)
    encoder = plan.encoder
    assert encoder is not None
    assert plan.stages[0].activation_bytes == max(text + encoder.kept_bytes, encoder.peak_bytes)
    # Versions whose code was not read, and text-only models, profile the text alone.
    old = replace(w, vllm_version="0.11")
    assert _plan(spec, old, 32607 * MiB)[1].encoder is None
    assert _plan(catalog("qwen3-32b"), w, H100)[1].encoder is None


def _with_audio(spec):
    audio = Tensor("model.audio_tower.layers.0.fc1.weight", (1024, 1024), Role.ENCODER)
    return replace(spec, tensors=(*spec.tensors, audio))


def test_the_towers_are_read_from_the_weights(catalog):
    assert encoder_towers(catalog("lfm2.5-vl-1.6b")) == ("vision",)
    assert encoder_towers(catalog("qwen3-32b")) == ()
    both = _with_audio(catalog("lfm2.5-vl-1.6b"))
    assert encoder_towers(both) == ("vision", "audio")
    assert towers_named(("vision", "audio")) == "vision and audio towers"


def test_a_tower_whose_profile_is_not_modelled_makes_the_pool_an_upper_bound(catalog):
    spec = catalog("lfm2.5-vl-1.6b")  # SigLIP2 NaViT: not modelled
    w = Workload(engine="vllm", seq=32768)
    _, plan = _plan(spec, w, H100)
    assert plan.encoder is None and plan.unmodelled == ("vision",)
    up = plan.startup(H100, 0.9, 32768)
    assert up.starts and up.unmodelled == ("vision",)
    # The same model without its tower: the same pool, now without the doubt.
    text = replace(spec, tensors=tuple(t for t in spec.tensors if t.role is not Role.ENCODER))
    _, bare = _plan(text, w, H100)
    assert bare.unmodelled == () and bare.startup(H100, 0.9, 32768).unmodelled == ()
    est = estimate(spec, w, H100, "H100 SXM")
    note = next(n for n in est.notes if n.startswith("This model has a vision tower"))
    assert "may be smaller than shown" in note and "profile_run" in note
    assert "at most" in next(n for n in est.notes if n.startswith("vLLM takes"))
    assert est.details["vllm_unmodelled"] == "vision"
    row = fit_rows(est, [("H100 SXM", H100)])[0].to_dict()["vllm"]
    assert row["unmodelled"] == ["vision"]
    bare_row = fit_rows(estimate(text, w, H100), [("H100", H100)])[0].to_dict()["vllm"]
    assert "unmodelled" not in bare_row


def test_a_modelled_tower_leaves_no_doubt_but_an_unmodelled_audio_tower_does(catalog):
    w = Workload(engine="vllm", seq=131072, max_num_seqs=1, max_num_batched_tokens=8192)
    spec = catalog("qwen3.6-35b-a3b-nvfp4")
    _, plan = _plan(spec, w, 32607 * MiB)
    assert plan.encoder is not None and plan.unmodelled == ()
    _, with_audio = _plan(_with_audio(spec), w, 32607 * MiB)
    assert with_audio.unmodelled == ("audio",)
    # Rules under which no tower is modelled still say so: vLLM profiles the encoder there too.
    old = replace(w, vllm_version="0.11")
    _, plan = _plan(spec, old, 32607 * MiB)
    assert plan.encoder is None and plan.unmodelled == ("vision",)
    note = unmodelled_note(spec, plan.unmodelled, plan.rules)
    assert "under the vLLM 0.11 rules" in note


# Gemma 3's SigLIP tower (vLLM 0.24 gemma3_mm.py, siglip.py, MMEncoderAttention).


def test_gemma3s_tower_is_read_from_the_weights(catalog):
    tower = SiglipTower.of(catalog("gemma-3-27b"))
    assert tower == SiglipTower(
        depth=27,
        hidden=1152,
        intermediate=4304,
        patch=14,
        channels=3,
        patches=4096,
        out_hidden=5376,
    )
    assert tower.image_size == 896
    assert SiglipTower.of(catalog("gemma-3-1b")) is None  # text only


@pytest.mark.parametrize(
    ("tokens", "seqs", "seq", "items"),
    [
        (2048, 256, 32768, 8),  # 2048 // 256
        (8192, 1024, 32768, 32),  # 8192 // 256
        (8192, 1, 300, 1),  # one request of 300 tokens holds one image
        (8192, 1, 600, 2),  # ... of 600 tokens, two
    ],
)
def test_gemma3s_budget_counts_images_of_256_tokens(tokens, seqs, seq, items):
    w = Workload(engine="vllm", seq=seq)
    assert encoder_items(256, w, Scheduler(seqs, tokens)) == items


@pytest.mark.parametrize("tp", [1, 2])
def test_gemma3s_peak_is_the_busiest_moment_of_one_siglip_layer(catalog, tp):
    spec = catalog("gemma-3-27b")
    w = Workload(engine="vllm", seq=32768, tp=tp, gpus=tp)
    profile = encoder_profile(spec, w, Scheduler(1024, 8192), RULES["0.20"])
    e = 2  # bf16
    n = 32 * 4096  # 32 images of 64 x 64 patches
    h = n * 1152 * e
    i = n * 4304 * e // tp
    pixels = 32 * 3 * 896 * 896 * e
    reduced = h if tp > 1 else 0  # a row-parallel output all-reduced out of place
    # Embeddings, the layer's input, and per stage: normed, qkv + attention out, projection;
    # attention output and its normed copy, fc1 and GELU; or the GELU and fc2.
    attention = 2 * h + h + 4 * h // tp + h + reduced
    mlp = 2 * h + 2 * h + 2 * i
    down = 2 * h + 2 * h + i + h + reduced
    assert profile.items == 32 and profile.tokens_per_item == 256 and profile.patches == n
    assert profile.peak_bytes == pixels + max(attention, mlp, down)
    assert profile.peak_bytes == pixels + (mlp if tp == 1 else down)
    assert profile.kept_bytes == pixels + 32 * 256 * 5376 * e
    assert "pan-and-scan off" in profile.note and "FlashAttention" in profile.note


def test_gemma3s_tower_runs_before_the_text_profile(catalog):
    spec = catalog("gemma-3-27b")
    w = Workload(engine="vllm", seq=32768)
    _, plan = _plan(spec, w, H100)
    text = vllm_profile_peak(spec, w, 8192, 1024, plan.rules.sampler)
    encoder = plan.encoder
    assert encoder is not None and plan.unmodelled == ()
    assert plan.stages[0].activation_bytes == max(text + encoder.kept_bytes, encoder.peak_bytes)
    assert plan.startup(H100, 0.9, 32768).unmodelled == ()
    # Under the rules of versions whose code was not read, the tower is named as not modelled.
    _, old = _plan(spec, replace(w, vllm_version="0.11"), H100)
    assert old.encoder is None and old.unmodelled == ("vision",)


# Mistral 3's Pixtral tower (vLLM 0.24 mistral3.py, pixtral.py PixtralHFVisionModel).


def test_pixtrals_tower_is_read_from_the_weights(catalog):
    tower = PixtralTower.of(catalog("devstral-small-2-24b"))
    assert tower == PixtralTower(
        depth=24, hidden=1024, intermediate=4096, patch=14, channels=3, merge=2, out_hidden=5120
    )
    assert PixtralTower.of(catalog("devstral-small-2507")) is None  # text only


@pytest.mark.parametrize("tokens", [8192, 2048])
def test_pixtrals_peak_holds_the_dense_mask_that_keeps_images_apart(catalog, tokens):
    spec = catalog("devstral-small-2-24b")
    w = Workload(engine="vllm", seq=32768)
    profile = encoder_profile(spec, w, Scheduler(256, tokens), RULES["0.20"])
    e = 2
    items = tokens // 3025 or 1  # 55 x 55 merged tokens per 1540 x 1540 image
    n = items * 110 * 110
    h = n * 1024 * e
    mask = n * n * e
    pixels = items * 3 * 1540 * 1540 * e
    # 24,200 patches: mask rows a multiple of 8, no padded copy; the MLP's moment is the peak.
    # 12,100: SDPA pads the rows to 12,104 elements, and its moment is the peak.
    mlp = 6 * h + 3 * n * 4096 * e
    sdpa = 9 * h + n * 12104 * e
    busiest = mlp if items == 2 else sdpa
    assert profile.items == items and profile.tokens_per_item == 3025 and profile.patches == n
    assert profile.peak_bytes == pixels + h + mask + busiest
    assert profile.kept_bytes == pixels + items * 3025 * 5120 * e
    assert "no xformers" in profile.note and "1540" in profile.note


def test_pixtrals_tower_runs_before_the_text_profile(catalog):
    spec = catalog("devstral-small-2-24b")
    w = Workload(engine="vllm", seq=32768)
    _, plan = _plan(spec, w, H100)
    encoder = plan.encoder
    assert encoder is not None and plan.unmodelled == ()
    text = vllm_profile_peak(spec, w, 8192, 1024, plan.rules.sampler)
    assert plan.stages[0].activation_bytes == max(text + encoder.kept_bytes, encoder.peak_bytes)
    assert encoder.peak_bytes > text  # the mask of 24,200 x 24,200 patches outweighs the text
