"""SGLang's start-up (core/sglang_startup.py): the engine choice, the pool SGLang's formula gives
on a small model, its default --mem-fraction-static per version, refusals, the launch line."""

import pytest

from vramgui.core import sglang_startup
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.fit import fit_rows, largest_fitting
from vramgui.core.launch import launch_settings, sglang_settings
from vramgui.core.rank_weights import rank_tensor_bytes
from vramgui.core.units import GiB, MiB
from vramgui.core.vllm.profile import CUDA_CONTEXT_BYTES, CUDA_RESERVED_BYTES, NON_TORCH_TP_BYTES
from vramgui.core.workload import SGLANG_VERSIONS, EngineConflictError, Workload
from vramgui.sources.catalog import load_catalog

RTX_4090 = 24564 * MiB  # what nvidia-smi reports
H100 = 81559 * MiB

# A small Llama: 4 layers, 2 KV heads of 64.
SMALL = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


@pytest.fixture(scope="module")
def small():
    return spec_from_config(SMALL, "small-llama")


@pytest.fixture(scope="module")
def catalog():
    entries = {e.name: e for e in load_catalog()}
    return lambda name: entries[name].spec()


def _engine(spec, workload):
    return sglang_startup.SglangEngine(spec, workload, rank_tensor_bytes(spec, workload))


def test_sglang_is_an_engine_with_its_own_kv_dtypes_and_settings():
    w = Workload(engine="sglang", kv_dtype="fp8", mem_fraction_static=0.8, sglang_version="0.4.9")
    assert Workload.from_dict(w.to_dict()) == w
    assert w.to_dict()["mem-fraction-static"] == 0.8
    assert Workload.from_dict({"engine": "sglang"}).mem_fraction_static is None
    # SGLang's --kv-cache-dtype has no fp16 / fp32 and no llama.cpp types.
    for kv in ("fp16", "fp32", "q8_0"):
        with pytest.raises(EngineConflictError, match="SGLang has no"):
            Workload(engine="sglang", kv_dtype=kv)
    with pytest.raises(WorkloadError, match="mem-fraction-static"):
        Workload(engine="sglang", mem_fraction_static=1.2)
    with pytest.raises(WorkloadError, match="sglang-version"):
        Workload(engine="sglang", sglang_version="0.3")
    # It loads the formats vLLM does: an AWQ or NVFP4 quantization is no conflict.
    Workload(engine="sglang", quant="awq-int4")


def test_the_pool_is_the_static_share_of_free_memory_less_the_weights(small):
    w = Workload(engine="sglang", seq=4096, mem_fraction_static=0.5)
    engine = _engine(small, w)
    plan = engine.plan()
    cell = 4 * 2 * 64 * 2 * 2  # layers x KV heads x head_dim x (K and V) x bf16
    assert plan.stages[0].cell_bytes == cell
    capacity = 2 * GiB
    up = engine.startup(capacity)
    free = capacity - CUDA_RESERVED_BYTES - CUDA_CONTEXT_BYTES
    rest = (free - plan.weights_bytes) - free * (1 - 0.5)
    assert up.free_bytes == free
    assert up.pool_tokens == int(rest // cell)
    assert up.available_bytes == up.pool_tokens * cell
    assert up.starts and up.serves and up.message == ""
    assert up.max_concurrency == pytest.approx(up.pool_tokens / 4096)
    # The model's own context caps the longest --context-length.
    assert up.largest_context == min(up.pool_tokens, 4096)
    # An FP8 cache halves the cell and doubles the tokens (to one token).
    fp8 = _engine(small, w.with_(kv_dtype="fp8")).startup(capacity)
    assert abs(fp8.pool_tokens - 2 * up.pool_tokens) <= 1
    # Under tensor parallelism each rank keeps its KV heads and pays the distributed set-up.
    tp = w.with_(tp=2, gpus=2)
    tp_up = _engine(small, tp).startup(capacity)
    assert tp_up.free_bytes == free - NON_TORCH_TP_BYTES
    assert _engine(small, tp).plan().stages[0].cell_bytes == cell // 2


def test_mla_keeps_its_compressed_latent_whole_on_every_rank(catalog):
    spec = catalog("deepseek-v2-lite")
    f = spec.facts
    for tp in (1, 2):
        w = Workload(engine="sglang", tp=tp, gpus=tp)
        cell = _engine(spec, w).plan().stages[0].cell_bytes
        assert cell == (f.kv_lora_rank + f.qk_rope_head_dim) * f.num_layers * 2


def test_sliding_window_layers_keep_a_full_length_cache(catalog):
    spec = catalog("gemma-3-4b")
    f = spec.facts
    w = Workload(engine="sglang")
    cell = _engine(spec, w).plan().stages[0].cell_bytes
    assert cell == f.num_layers * f.num_kv_heads * f.head_dim * 2 * 2
    assert any("full-length" in n for n in sglang_startup.notes(spec, w))


@pytest.mark.parametrize(
    ("version", "mib", "tp", "expected"),
    [
        ("0.4.4", 24564, 1, 0.88),  # by tensor-parallel size alone
        ("0.4.4", 81559, 4, 0.85),
        ("0.4.4", 81559, 8, 0.81),
        ("0.4.9", 24564, 1, 0.879),  # (24564 - 2.9 GiB) / 24564
        ("0.4.9", 81559, 1, 0.874),  # (81559 - 10 GiB) / 81559
        ("0.5.6", 24564, 1, 0.847),  # 512 + 2048 x 1.5 + 24 x 2 + 128 MiB reserved
        ("0.5.6", 81559, 1, 0.835),  # 512 + 8192 x 1.5 + 256 x 2 + 128 MiB reserved
        ("0.5.6", None, 1, 0.88),  # no GPU: SGLang's fallback
    ],
)
def test_the_default_fraction_follows_the_version(version, mib, tp, expected):
    fraction = sglang_startup.default_mem_fraction(version, mib, tp, 1, False)
    assert fraction == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize(
    ("version", "mib", "expected"),
    [
        ("0.4.4", 24564, 2048),  # server_args.py: 2048 under 25,000 MiB, else 8192
        ("0.4.4", 40960, 8192),
        ("0.4.4", None, 8192),
        ("0.4.9", 24564, 2048),  # 2048 under 35 GiB, 8192 under 160 GiB, else 16384
        ("0.4.9", 81559, 8192),
        ("0.4.9", 183359, 16384),
        ("0.4.9", None, 4096),
        ("0.5.6", 15360, 2048),  # _handle_gpu_memory_settings: T4, 4080
        ("0.5.6", 46068, 4096),  # L40
        ("0.5.6", 143771, 8192),  # H200
        ("0.5.6", 183359, 16384),  # B200
        ("0.5.6", None, 4096),
    ],
)
def test_the_default_chunked_prefill_follows_the_version(version, mib, expected):
    assert sglang_startup.chunked_prefill_size(version, mib) == expected


def test_the_version_table_names_every_version_once():
    assert set(sglang_startup.SGLANG_RULES) == set(SGLANG_VERSIONS)
    assert all(v == r.version for v, r in sglang_startup.SGLANG_RULES.items())
    # The GPU sizes the search for the smallest GPU bisects between are the tables' edges.
    assert sglang_startup.SIZE_EDGES_MIB == (20480, 25000, 35840, 61440, 92160, 163840)


def test_a_pool_of_no_tokens_refuses_and_a_short_one_caps_requests(small, catalog):
    w = Workload(engine="sglang", seq=4096, mem_fraction_static=0.5)
    engine = _engine(small, w)
    weights = engine.plan().weights_bytes
    # Half the free memory holds the weights and not one token more: SGLang's own error.
    up = engine.startup(weights * 2 + CUDA_RESERVED_BYTES + CUDA_CONTEXT_BYTES)
    assert not up.starts and "Not enough memory" in up.message
    assert "--mem-fraction-static" in up.message
    assert engine.startup(weights * 2 + CUDA_RESERVED_BYTES + CUDA_CONTEXT_BYTES + MiB).starts
    # A pool shorter than the context starts but rejects the longer requests.
    llama = catalog("llama-3.1-8b")
    long = Workload(engine="sglang", seq=131072)
    up = _engine(llama, long).startup(RTX_4090)
    assert up.starts and not up.serves
    assert "Input length" in up.message and 0 < up.largest_context < 131072
    est = estimate(llama, long, RTX_4090, "RTX 4090")
    row = fit_rows(est, [("RTX 4090", RTX_4090)])[0]
    assert not row.fits and row.headroom_bytes < 0
    assert row.to_dict()["sglang"]["largest_context_length"] == up.largest_context
    # In token blocks, as every engine's longest context is searched.
    assert largest_fitting(llama, long, RTX_4090, "seq") == up.largest_context // 16 * 16
    # Weights larger than the free memory: out of memory while loading.
    big = _engine(llama, Workload(engine="sglang")).startup(12 * 1024 * MiB)
    assert not big.starts and "out of memory while loading" in big.message


def test_the_estimate_reports_the_pool_and_the_gpu_it_needs(catalog):
    llama = catalog("llama-3.1-8b")
    w = Workload(engine="sglang", seq=32768, sglang_version="0.4.4")
    est = estimate(llama, w, H100, "H100 SXM")
    d = est.details
    assert d["sglang_mem_fraction_static"] == 0.88
    assert d["kv_pool_tokens"] * d["sglang_cell_bytes"] == d["kv_pool_bytes"]
    assert d["max_concurrency"] == round(d["kv_pool_tokens"] / 32768, 2)
    assert est.components["kv_cache"] == d["kv_pool_bytes"]
    row = fit_rows(est, [("H100 SXM", H100)])[0]
    assert row.fits and row.headroom_bytes == H100 - est.total_bytes
    # Without a GPU: the request's cache and the GPU SGLang needs for it, on which it serves.
    bare = estimate(llama, w)
    assert bare.components["kv_cache"] == 32768 * d["sglang_cell_bytes"]
    needed = bare.total_bytes
    assert _engine(llama, w).startup(needed).serves
    assert not _engine(llama, w).startup(needed - 64 * MiB).serves


def test_the_launch_line_reproduces_the_setting(catalog):
    llama = catalog("llama-3.1-8b")
    w = Workload(engine="sglang", seq=16384, tp=2, gpus=2, kv_dtype="fp8", mem_fraction_static=0.9)
    s = sglang_settings(llama, w)
    assert s.engine == "SGLang"
    assert s.text == (
        f"python -m sglang.launch_server --model-path {llama.name} --dtype bfloat16 "
        "--context-length 16384 --mem-fraction-static 0.9 --tp-size 2 --kv-cache-dtype fp8_e4m3"
    )
    default = sglang_settings(llama, Workload(engine="sglang", quant="fp8"))
    assert "--mem-fraction-static" not in default.text and "--quantization fp8" in default.text
    assert any("0.5.6" in note for note in default.notes)
    engines = [s.engine for s in launch_settings(llama, w)]
    assert engines == ["vLLM", "SGLang"]
    assert [s.engine for s in launch_settings(llama, w.with_(engine="vllm"))] == ["vLLM"]
