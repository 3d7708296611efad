"""Inference memory against published component figures (benchmarks/data/published.json)."""

import pytest

from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import COMPONENTS, RUNTIME_OVERHEAD, estimate
from vramgui.core.inference import inference_breakdown, kv_cache_bytes
from vramgui.core.units import GiB, MiB
from vramgui.core.workload import Workload

LLAMA2 = "meta-llama/Llama-2-7b-hf"
LLAMA3 = "meta-llama/Meta-Llama-3-8B"
MISTRAL = "mistralai/Mistral-7B-v0.1"


def test_vllm_llama3_weights_match_published(real_spec):
    # vllm-project/vllm pull request 10511: "model weights 14.96 GiB" (16063177687 bytes).
    b = inference_breakdown(real_spec(LLAMA3), Workload(engine="vllm", dtype="bf16"))
    assert b.weights_bytes == pytest.approx(16063177687, rel=0.01)


def test_vllm_llama3_tp2_weights_per_gpu(real_spec):
    b = inference_breakdown(real_spec(LLAMA3), Workload(engine="vllm", gpus=2, tp=2))
    assert b.weights_bytes / GiB == pytest.approx(7.48, rel=0.01)


def test_vllm_pool_matches_a_published_start_up(real_spec):
    # abinavChandar/demo_env_l4 vllm.log, vLLM 0.11.0 on an L4 (23,034 MiB): Llama-3.1-8B-Instruct,
    # --max-model-len 32000 --gpu-memory-utilization 0.92 --max-num-seqs 128: "Model loading took
    # 14.9889 GiB", "Available KV cache memory: 4.75 GiB", "GPU KV cache size: 38,944 tokens".
    w = Workload(
        engine="vllm", seq=32000, gpu_memory_utilization=0.92, max_num_seqs=128, vllm_version="0.11"
    )
    b = inference_breakdown(real_spec("meta-llama/Llama-3.1-8B"), w, 23034 * MiB, "L4")
    assert b.weights_bytes / GiB == pytest.approx(14.9889, rel=0.01)
    assert b.details["kv_pool_bytes"] / GiB == pytest.approx(4.75, rel=0.05)
    assert b.details["kv_pool_tokens"] == pytest.approx(38944, rel=0.05)
    assert b.details["kv_pool_tokens"] == b.details["kv_pool_blocks"] * 16
    assert b.details["max_concurrency"] == pytest.approx(1.22, rel=0.05)


def test_llamacpp_llama2_q4km_matches_log(real_spec):
    # utilityai/llama-cpp-rs README log: CUDA0 weights 3820.94 MiB, token embeddings 70.31 MiB
    # on the host, KV cache 1024.00 MiB at n_ctx 2048. Its compute buffer (164.01 MiB) is that of
    # an early-2024 llama.cpp, whose graph kept its inputs in a buffer of their own: today's
    # buffers are checked against today's llama.cpp (test_llamacpp_buffers.py).
    w = Workload(engine="llamacpp", quant="Q4_K_M", seq=2048, kv_dtype="fp16", attention="eager")
    b = inference_breakdown(real_spec(LLAMA2), w)
    assert b.weights_bytes / MiB == pytest.approx(3820.94, rel=0.01)
    assert b.host_bytes / MiB == pytest.approx(70.31, rel=0.01)
    assert b.kv_cache_bytes == 1024 * MiB
    # Without flash attention the scores of 32 heads against the 2,048 cells dominate, as there.
    assert b.activations_bytes > 128 * MiB


def test_kv_cache_gqa_is_smaller_by_the_group(real_spec):
    llama2 = kv_cache_bytes(real_spec(LLAMA2), Workload(seq=4096))
    llama3 = kv_cache_bytes(real_spec(LLAMA3), Workload(seq=4096))
    assert llama2 == 2 * 32 * 32 * 128 * 4096 * 2
    assert llama3 * 4 == llama2  # 8 KV heads instead of 32


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_llamacpp_caches_in_f16_whatever_the_weights(real_spec, dtype):
    # llama-server's --cache-type-k / -v default to f16; the weights' type does not change it.
    spec = real_spec(LLAMA3)
    auto = kv_cache_bytes(spec, Workload(engine="llamacpp", seq=4096, dtype=dtype))
    assert auto == kv_cache_bytes(spec, Workload(engine="llamacpp", seq=4096, kv_dtype="fp16"))
    # The other engines cache in the compute dtype.
    kept = kv_cache_bytes(spec, Workload(seq=4096, dtype=dtype))
    assert kept == auto * (2 if dtype == "fp32" else 1)


def test_sliding_window_kept_whole_by_transformers_and_windowed_by_engines(real_spec):
    spec = real_spec(MISTRAL)
    full = kv_cache_bytes(spec, Workload(seq=8192))
    assert full == 2 * 32 * 8 * 128 * 8192 * 2
    assert kv_cache_bytes(spec, Workload(seq=8192, engine="vllm")) == full // 2
    assert kv_cache_bytes(spec, Workload(seq=2048, engine="vllm")) == full // 4


def test_mla_caches_the_compressed_latent(real_spec):
    spec = real_spec("deepseek-ai/DeepSeek-V2-Lite")
    f = spec.facts
    latent = f.num_layers * 1024 * (f.kv_lora_rank + f.qk_rope_head_dim) * 2
    assert kv_cache_bytes(spec, Workload(seq=1024, engine="vllm")) == latent
    # transformers 5 also caches the latent (DeepseekV2Attention updates the cache compressed).
    assert kv_cache_bytes(spec, Workload(seq=1024)) == latent


@pytest.mark.parametrize(
    ("kv_dtype", "factor"), [("fp8", 0.5), ("q8_0", 34 / 64), ("q4_0", 18 / 64)]
)
def test_narrow_kv_dtypes(real_spec, kv_dtype, factor):
    engine = "vllm" if kv_dtype == "fp8" else "llamacpp"
    spec = real_spec(LLAMA3)
    wide = kv_cache_bytes(spec, Workload(engine=engine, seq=4096, kv_dtype="fp16"))
    narrow = kv_cache_bytes(spec, Workload(engine=engine, seq=4096, kv_dtype=kv_dtype))
    assert narrow == pytest.approx(wide * factor, rel=1e-9)


@pytest.mark.parametrize(
    ("engine", "kv_dtype"),
    [("transformers", "fp8"), ("transformers", "q4_0"), ("vllm", "q8_0"), ("llamacpp", "fp8")],
)
def test_kv_dtype_the_engine_lacks_is_explained(real_spec, engine, kv_dtype):
    with pytest.raises(WorkloadError, match=kv_dtype):
        estimate(real_spec(LLAMA3), Workload(engine=engine, kv_dtype=kv_dtype))


def test_tensor_parallel_must_divide_heads(real_spec):
    with pytest.raises(WorkloadError, match="heads"):
        estimate(real_spec(LLAMA3), Workload(gpus=3, tp=3))


def test_components_sum_to_total_and_overhead_is_separate(real_spec):
    est = estimate(real_spec(LLAMA3), Workload(seq=8192, batch=2))
    assert set(COMPONENTS) <= set(est.components)
    assert est.total_bytes == sum(est.components.values())
    assert est.tensor_bytes == est.total_bytes - est.components[RUNTIME_OVERHEAD]
    assert all(v >= 0 for v in est.components.values())
    assert est.phase == "prefill"


def test_user_overhead_replaces_the_default(real_spec):
    est = estimate(real_spec(LLAMA3), Workload(overhead_bytes=GiB))
    assert est.components[RUNTIME_OVERHEAD] == GiB


def test_eager_attention_costs_quadratic_memory(real_spec):
    spec = real_spec(LLAMA2)
    sdpa = estimate(spec, Workload(seq=4096, attention="sdpa")).components["activations"]
    eager = estimate(spec, Workload(seq=4096, attention="eager")).components["activations"]
    # Scores of one layer: 32 heads x 4096^2, bf16 plus fp32 upcast and softmax.
    assert eager - sdpa > 32 * 4096 * 4096 * 8


def test_encoder_forward_has_no_kv_cache(real_spec):
    est = estimate(real_spec("google-bert/bert-base-cased"), Workload(seq=512, dtype="fp32"))
    assert est.components["kv_cache"] == 0
    assert est.phase == "forward"
    with pytest.raises(WorkloadError, match="encoder"):
        estimate(real_spec("google-bert/bert-base-cased"), Workload(engine="vllm", seq=512))


def test_a_short_prompt_prefills_its_own_length_beside_the_whole_context_cache(real_spec):
    """--prompt: the prefill's moment at the prompt's length, the KV cache at --seq, the peak the
    larger of the prefill and the last step."""
    spec = real_spec(LLAMA3)
    full = inference_breakdown(spec, Workload(seq=8192))
    assert inference_breakdown(spec, Workload(seq=8192, prompt=8192)) == full
    chat = inference_breakdown(spec, Workload(seq=8192, prompt=512))
    assert chat.kv_cache_bytes == full.kv_cache_bytes
    assert chat.activations_bytes < full.activations_bytes / 10
    assert chat.phase.startswith("generation")
    assert any("prompt of 512 tokens" in n for n in chat.notes)
    served = inference_breakdown(spec, Workload(engine="llamacpp", seq=8192, prompt=512))
    assert any("whatever the prompt's length" in n for n in served.notes)
    # A prompt near the context: the prefill's moment is that of a context of the prompt's
    # length (its activations and its cache), the breakdown's KV the whole context's.
    long = inference_breakdown(spec, Workload(seq=8192, prompt=8000))
    alone = inference_breakdown(spec, Workload(seq=8000))
    assert long.phase == "prefill"
    assert long.kv_cache_bytes == full.kv_cache_bytes
    moment = long.kv_cache_bytes + long.activations_bytes
    assert moment == alone.kv_cache_bytes + alone.activations_bytes


def test_a_prompt_longer_than_the_context_is_the_whole_context(real_spec):
    """The window's context can shrink below the prompt it had: the prompt is then all of it."""
    spec = real_spec(LLAMA3)
    assert inference_breakdown(spec, Workload(seq=1024, prompt=2048)) == inference_breakdown(
        spec, Workload(seq=1024)
    )
    with pytest.raises(WorkloadError, match="--prompt"):
        Workload(prompt=0)


def test_llamacpp_compute_buffer_follows_the_micro_batch(real_spec):
    """The buffer is sized for min(-ub, -b) tokens (llama_context: n_ubatch = min(n_batch,
    n_ubatch)); the logits of each token of the micro-batch make most of a dense model's."""
    spec = real_spec(LLAMA3)
    w = Workload(engine="llamacpp", quant="Q4_K_M", seq=8192)
    base = inference_breakdown(spec, w).activations_bytes
    double = inference_breakdown(spec, w.with_(ubatch_size=1024)).activations_bytes
    assert double == pytest.approx(2 * base, rel=0.01)
    capped = inference_breakdown(spec, w.with_(ubatch_size=1024, batch_size=512))
    assert capped.activations_bytes == base
    assert any("-b 512" in n for n in capped.notes)


def test_llamacpp_sliding_window_cache_holds_one_micro_batch_more(real_spec):
    """llama_kv_cache_iswa sizes a sliding-window layer's cache to the window plus one
    micro-batch, in 256-cell pages: -ub 1024 adds 512 cells to each such layer over -ub 512."""
    spec = real_spec("google/gemma-3-1b-pt")
    w = Workload(engine="llamacpp", quant="Q8_0", seq=32768)
    base = kv_cache_bytes(spec, w)
    wider = kv_cache_bytes(spec, w.with_(ubatch_size=1024))
    facts = spec.facts
    sliding = sum(1 for kind in facts.layer_types if kind.name == "SLIDING")
    per_cell = 2 * facts.num_kv_heads * facts.head_dim * 2  # K and V in f16
    assert wider - base == 512 * sliding * per_cell
    assert kv_cache_bytes(spec, w.with_(ubatch_size=1024, batch_size=512)) == base
