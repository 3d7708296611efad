"""vLLM's KV layout of Gemma 4 (core/vllm/kv_layout.py) against vLLM's own reports."""

from dataclasses import replace

import pytest

from vramgui.core.units import GiB
from vramgui.core.vllm.kv_layout import Kind, LayerKv, kv_layout, layer_specs
from vramgui.core.vllm.rules import RULES
from vramgui.core.workload import Workload
from vramgui.sources.catalog import load_catalog


@pytest.fixture(scope="module")
def gemma4():
    entries = {e.name: e for e in load_catalog()}
    return entries["gemma-4-31b-it-nvfp4"].spec()


@pytest.mark.parametrize("batched", [2048, 4096])
def test_a_16_bit_gemma_4_cache_holds_what_vllm_0_21_reports(gemma4, batched):
    # vllm-project/vllm#43308: cyankiwi/gemma-4-31B-it-AWQ-4bit on an A100 80GB at
    # --gpu-memory-utilization 0.9, vLLM 0.21.0: "~525k tokens" of KV cache in "~50 GB"
    # (bf16 KV, the model's 262,144-token context). The same text layers, so the NVFP4
    # checkpoint's layout stands for it: 50 sliding layers of 16 x 256 in groups beside 10
    # global ones of 4 x 512, keys and values both cached.
    w = Workload(engine="vllm", seq=262144, kv_dtype="bf16", vllm_version="0.20")
    layout = kv_layout(layer_specs(gemma4, w, range(60)), RULES["0.20"])
    blocks = layout.blocks(50 * 10**9)
    tokens = layout.reported_tokens(blocks, 262144, batched, RULES["0.20"])
    assert abs(tokens / 525_000 - 1) < 0.10


def test_no_80_gb_gpu_holds_the_published_8_bit_gemma_4_start_up(gemma4):
    # robotmunki.com's annotated start-up of Gemma-4-31B-IT-NVFP4 (benchmarks/data/
    # vllm_logs.json): 31.18 GiB of weights, 5.97 requests of 262,144 tokens at 4,096 batched
    # tokens and gpu_memory_utilization 0.9, the checkpoint's fp8 cache. An H100's 79.19 GiB of
    # CUDA memory leave at most 0.9 x 79.19 - 31.18 GiB before any activation: 56 % of what
    # the layout needs for 5.97 requests, and short of it even were the global layers'
    # keys cached alone. The 121.69 GiB of a 128 GB GB10 leave about what it needs.
    w = Workload(engine="vllm", seq=262144, kv_dtype="fp8", vllm_version="0.20")
    specs = layer_specs(gemma4, w, range(60))

    def pool_needed(specs):
        layout = kv_layout(specs, RULES["0.20"])
        return 5.97 * layout.blocks_per_request(262144, 4096) * layout.block_bytes

    def most_left(cuda_gib):
        return (0.9 * cuda_gib - 31.18) * GiB

    assert pool_needed(specs) > 1.7 * most_left(79.19)
    keys_only = [
        replace(s, token_bytes=s.token_bytes // 2) if s.kind == "full" else s for s in specs
    ]
    assert pool_needed(keys_only) > most_left(79.19)
    assert 0.9 < pool_needed(specs) / most_left(121.69) < 1.0


def test_gemma_4s_global_layers_take_their_own_heads_and_width(gemma4):
    # vLLM's Gemma4DecoderLayer: global layers of global_head_dim (512) with
    # num_global_key_value_heads (4) under attention_k_eq_v, both K and V cached; sliding
    # layers of head_dim (256) with num_key_value_heads (16).
    w = Workload(engine="vllm", seq=262144, kv_dtype="bf16")
    specs = layer_specs(gemma4, w, range(60))
    assert {s.token_bytes for s in specs if s.kind == "sliding"} == {16 * 256 * 2 * 2}
    assert {s.token_bytes for s in specs if s.kind == "full"} == {4 * 512 * 2 * 2}
    # Pages unified: the global layers' blocks hold twice the tokens.
    layout = kv_layout(specs, RULES["0.20"])
    sizes = {g.spec.kind: g.spec.block_size for g in layout.groups}
    assert sizes == {"sliding": 16, "full": 32}
    assert layout.block_bytes == 10 * 16 * 16 * 256 * 2 * 2 < GiB


def test_near_equal_kinds_share_groups_of_the_commonest_from_0_20():
    # kv_cache_utils._get_kv_cache_groups_uniform_page_size (0.20.2): gpt-oss-20b with an
    # EAGLE drafter, 12 sliding + 13 full layers, is padded to (13 sw, 13 full), not split
    # into (12 sw, 12 full, 1 full + 11 padding) as 0.11.0 does.
    sliding = LayerKv(Kind.SLIDING, 1024, window=128)
    full = LayerKv(Kind.FULL, 1024)
    specs = [sliding] * 12 + [full] * 13
    later = kv_layout(specs, RULES["0.20"])
    assert [g.layers for g in later.groups] == [13, 13]
    assert later.block_bytes == 13 * full.page_bytes
    earlier = kv_layout(specs, RULES["0.11"])
    assert [g.layers for g in earlier.groups] == [12, 12, 12]
    # Kinds far apart (Gemma 3's 5:1) keep groups of the rarest.
    assert [g.layers for g in kv_layout([sliding] * 10 + [full] * 2, RULES["0.20"]).groups] == [
        2
    ] * 6
