"""answers/explain: the published logs beside the estimate, each engine's decision in its own
terms, the advice and the JSON document."""

import json
import re
import statistics

import pytest

from tests.configs import LLAMA
from tests.logs_fixtures import SOURCES, text
from vramgui.answers.explain import advice_text, explain_text, shown_settings, to_json
from vramgui.core.units import GiB, MiB
from vramgui.sources.catalog import find


def _explain(name):
    src = SOURCES[name]
    return explain_text(
        text(name),
        model_name=src.get("model", ""),
        gpu=src.get("gpu", ""),
        quant=src.get("quant", ""),
    )


@pytest.fixture(scope="module")
def explained():
    return {name: _explain(name) for name in SOURCES}


def _rows(explained, kind):
    return [
        r
        for e in explained.values()
        for r in e.components
        if r.name == kind and r.difference is not None
    ]


def test_kv_caches_match_the_printed_figures(explained):
    # KV cache within 2 % of the engines' printed figures (median over the published logs).
    diffs = [abs(r.difference) for r in _rows(explained, "kv_cache")]
    assert len(diffs) >= 100
    assert statistics.median(diffs) <= 0.02


def test_compute_buffers_and_vllm_pools_within_ten_percent(explained):
    compute = [abs(r.difference) for r in _rows(explained, "compute_buffer")]
    pools = [abs(r.difference) for r in _rows(explained, "kv_pool")]
    assert len(compute) >= 10 and statistics.median(compute) <= 0.10
    assert len(pools) >= 5 and statistics.median(pools) <= 0.10


def test_most_logs_are_explained_and_every_miss_has_a_cause(explained):
    assert sum(e.compared > 0 for e in explained.values()) >= 0.8 * len(SOURCES)
    for name, e in explained.items():
        misses = SOURCES[name].get("misses", {})
        for r in e.components:
            if r.flagged:
                assert misses, f"{name}: {r.name} on {r.device} is off by {r.difference:+.1%}"


def test_vllm_start_up_beside_the_estimate():
    e = _explain("vllm-llmcompressor-llama3-8b-awq.log")
    rows = {r.name: r for r in e.components}
    assert abs(rows["weights"].difference) < 0.02
    assert abs(rows["kv_pool"].difference) < 0.02
    assert abs(rows["kv_cache"].difference) < 0.005
    assert e.launch_line.startswith("vllm serve")


def test_vllm_refusal_says_why_in_vllms_terms():
    e = _explain("vllm-refusal-gpt-oss-120b-h100.log")
    assert e.setup.decision.kind == "refusal"
    assert any("gpu_memory_utilization" in line for line in e.decision_lines)
    assert any("short" in line for line in e.decision_lines)
    needed = next(r for r in e.components if r.note.startswith("one request"))
    assert needed.logged_bytes == round(4.54 * GiB)


def test_ollama_layer_decision_in_ollamas_terms():
    e = _explain("ollama-old-4gpu-64k.log")
    why = " ".join(e.decision_lines)
    assert "memory.required.partial" in why and "memory.available" in why
    assert "44 of 81 layers" in why


def test_llamacpp_per_device_buffers_from_the_command_line():
    e = _explain("llamacpp-pull370-8.log")  # two GPUs, experts placed with -ot
    compared = [r for r in e.components if r.difference is not None]
    assert {r.device for r in compared} >= {"CUDA0", "CUDA1"}
    for r in compared:
        if r.name in ("kv_cache", "weights"):
            assert abs(r.difference) < 0.02, (r.name, r.device, r.difference)


# Published llama.cpp logs without flash attention, from builds before the KV cache was written
# with ggml_set_rows (their graph holds no int64 index of the transposed V): (log, device, the
# compute buffer the log prints in MiB).
EARLY_BUILDS_WITHOUT_FLASH_ATTENTION = [
    ("llamacpp-issue514-9.log", "CUDA0", 1080.00),  # build 5622, Qwen3-30B-A3B, 16k, 2 GPUs
    ("llamacpp-issue514-9.log", "CUDA1", 1080.00),
]


@pytest.mark.parametrize(("log", "device", "mib"), EARLY_BUILDS_WITHOUT_FLASH_ATTENTION)
def test_compute_buffer_of_a_build_before_set_rows_without_flash_attention(log, device, mib):
    row = next(
        r for r in _explain(log).components if r.name == "compute_buffer" and r.device == device
    )
    assert row.logged_bytes == round(mib * MiB)
    # The log prints two decimals of a MiB.
    assert abs(row.estimated_bytes - row.logged_bytes) <= 0.005 * MiB


def test_ik_llamacpp_options_leave_the_compute_buffer_uncompared():
    e = _explain("llamacpp-ik-issue455-0.log")
    assert all(r.estimated_bytes is None for r in e.components if r.name == "compute_buffer")
    assert any("ik_llama.cpp" in n for n in e.notes)


def test_pytorch_oom_advice_cheapest_first():
    e = _explain("pytorch-oom-cads-fragmented.log")
    titles = [a.title for a in e.advice]
    assert titles[0].startswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments")
    assert e.advice[0].frees_bytes == round(9.35 * GiB)
    assert any("fragmentation" in line for line in e.decision_lines)


def test_a_component_beyond_its_accuracy_is_flagged():
    e = _explain("llamacpp-issue271-3.log")
    flagged = [r for r in e.components if r.flagged]
    assert flagged and any("worth reporting" in n for n in e.notes)


def test_json_document_keys():
    doc = to_json(_explain("vllm-dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM.log"))
    for key in (
        "engine",
        "engine_version",
        "model",
        "settings",
        "devices",
        "components",
        "decision",
        "advice",
    ):
        assert key in doc
    assert doc["engine"] == "vllm" and doc["engine_version"] == "0.10.1.1"
    assert "assumed" in doc["settings"]
    for c in doc["components"]:
        assert {"name", "device", "logged_bytes", "estimated_bytes"} <= set(c)


def test_llamacpp_failed_allocation_beside_the_estimate():
    log = text("llamacpp-glm-z1-32b-3090ti-32k.log") + (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 353.00 MiB on device 0: "
        "cudaMalloc failed: out of memory\n"
        "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 370147328\n"
        "llama_init_from_model: failed to allocate compute buffers\n"
    )
    e = explain_text(log)
    assert e.setup.decision.kind == "oom"
    assert any(
        line.startswith("vramgui's estimate of that compute buffer on CUDA0")
        for line in e.decision_lines
    )
    assert any("llama.cpp asked for 0.34 GiB" in line for line in e.decision_lines)


def test_rows_listed_by_component_then_device():
    e = _explain("llamacpp-ik-pull262-2.log")
    kinds = [r.name for r in e.components]
    assert kinds.index("weights") < kinds.index("kv_cache") < kinds.index("compute_buffer")
    devices = [r.device for r in e.components if r.name == "kv_cache"]
    assert devices[:3] == ["CUDA0", "CUDA1", "CUDA2"]


def test_long_settings_are_shortened_for_display_and_whole_in_json():
    log = (
        "\n".join(
            f"Tensor blk.{i}.ffn_up_exps.weight buffer type overriden to CPU" for i in range(400)
        )
        + "\nllama_kv_cache_init:      CUDA0 KV buffer size =   512.00 MiB\n"
    )
    e = explain_text(log)
    shown = dict(shown_settings(e))
    assert shown["override_tensor"].endswith("characters)")
    assert len(shown["override_tensor"]) < 160
    assert len(to_json(e)["settings"]["override_tensor"]) > 1000


def test_pytorch_memory_summary_in_the_explanation():
    log = text("pytorch-oom-24gib-22mib.log") + (
        "| Allocated memory      |  23450 MiB |  23460 MiB |  90000 MiB |  66550 MiB |\n"
        "| Reserved memory       |  23645 MiB |  23645 MiB |  23645 MiB |      0 B   |\n"
    )
    e = explain_text(log)
    assert any("tensors peaked at 22.91 GiB" in line for line in e.decision_lines)


def test_a_model_that_cannot_be_loaded_still_explains_the_log(tmp_path):
    e = explain_text(
        text("pytorch-oom-cads-fragmented.log"), model_name=str(tmp_path / "nope.gguf")
    )
    assert e.setup.engine == "pytorch" and e.decision_lines
    assert any("could not be loaded" in n for n in e.notes)


def test_ollama_layer_count_beside_vramgui_s():
    e = _explain("ollama-old-rocm-llama3-70b.log")
    line = next(x for x in e.decision_lines if x.startswith("In vramgui's estimate"))
    assert "of 81 layers fit 24.00 GiB" in line and line.endswith("Ollama offloaded 43.")


def test_launch_lines_apply_the_fit():
    ollama = _explain("ollama-old-rocm-llama3-70b.log")
    layers = int(ollama.launch_line.split("PARAMETER num_gpu ")[1].split()[0])
    assert layers > 43  # more than Ollama's estimator put on the GPU, 1 GiB still free
    vllm = _explain("vllm-refusal-gpt-oss-120b-h100.log")
    first = next(a for a in vllm.advice if a.fits)
    assert vllm.launch_line.startswith(f'# with "{first.title}" applied')
    doc = to_json(vllm)
    assert doc["advice"][0]["changes"] and "fits" in doc["advice"][0]


def test_every_component_has_a_label():
    from vramgui.core.logs import COMPONENT_LABELS, COMPONENTS, component_label

    assert set(COMPONENT_LABELS) == set(COMPONENTS)
    assert component_label("torch_reserved_free") == "Reserved by PyTorch, unallocated"
    assert component_label("something_new") == "something_new"


def test_why_lines_and_notes_are_sentences():
    e = explain_text(
        text("vllm-refusal-gpt-oss-120b-h100.log"), model_name="gpt-oss-120b", gpu="H100 SXM"
    )
    assert e.decision_lines and e.notes
    for line in (*e.decision_lines, *e.notes):
        assert line.endswith((".", "?", "!")), line
        first = line.split(" ", 1)[0]  # a plain lower-case word starts no line; vLLM may
        assert not first.isalpha() or not first.islower() or first == "vramgui's", line
    assert any(line.startswith("It refuses to start") for line in e.decision_lines)
    assert any(n.startswith("KV cache pool on GPU 0 differs") for n in e.notes)


def test_advice_reads_the_same_in_both_front_ends():
    from vramgui.answers.explain import Advice
    from vramgui.core.units import GiB

    assert advice_text(Advice("FP8 KV cache", 2 * GiB, "some accuracy")) == (
        "FP8 KV cache — frees 2.00 GiB · costs: some accuracy"
    )
    assert advice_text(Advice("Gradient checkpointing (training)", None, "compute")) == (
        "Gradient checkpointing (training) — costs: compute"
    )
    in_bytes = advice_text(Advice("x", 2 * GiB, "y"), lambda n: f"{n:,} B")  # the window's unit
    assert in_bytes == "x — frees 2,147,483,648 B · costs: y"
    # An engine that pre-allocates its pool: the pool it starts with and the room gained there.
    pooled = Advice("--max-num-seqs 64", GiB, "fewer requests", True, {}, 6 * GiB, 165_054)
    assert advice_text(pooled) == (
        "--max-num-seqs 64 — KV pool 6.00 GiB (165,054 tokens), 1.00 GiB more room for a "
        "request of the context · costs: fewer requests"
    )


def test_vllm_refusal_advice_tells_each_move_by_the_pool_it_gives():
    # The moves used to read "frees 8.75 GiB" each: what vLLM leaves on the GPU once it starts,
    # the same for every move. Now each is told in vLLM's pool, from its start-up with the move.
    e = explain_text(
        text("vllm-refusal-gpt-oss-120b-h100.log"), model_name="gpt-oss-120b", gpu="H100 SXM"
    )
    fitting = [a for a in e.advice if a.fits]
    titles = {a.title for a in fitting}
    assert {"--max-num-seqs 64", "FP8 KV cache", "Tensor parallel over 2 GPUs"} <= titles
    assert len({a.frees_bytes for a in fitting}) == len(fitting)
    assert all(a.pool_bytes is not None and a.pool_tokens for a in fitting)
    fp8 = next(a for a in fitting if a.title == "FP8 KV cache")
    base = next(a for a in fitting if a.title.startswith("Context "))
    assert fp8.pool_tokens > 1.9 * base.pool_tokens  # the same pool holds twice the tokens
    shown = [advice_text(a) for a in e.advice]
    assert all("KV pool" in line and "frees" not in line for line in shown)
    doc = to_json(e)["advice"]
    assert doc[0]["kv_pool_bytes"] == fitting[0].pool_bytes


def test_an_oom_with_more_free_than_asked_is_not_called_short():
    # PyTorch printed 2.26 GiB asked and 3.03 GiB free: no shortfall to state.
    e = explain_text(text("pytorch-oom-old-6gib.log"))
    asked = next(x for x in e.decision_lines if x.startswith("PyTorch asked CUDA"))
    assert "not short on paper" in asked and "B short" not in asked


def test_a_checkpoint_kv_scheme_sets_the_pool_under_auto(tmp_path):
    # vLLM 0.20 caches a compressed-tensors checkpoint with a kv_cache_scheme in fp8 whatever
    # --kv-cache-dtype says; the explanation follows it as the estimate does: twice the tokens.
    log = text("vllm-llmcompressor-llama3-8b-awq.log").replace(
        "0.15.0rc2.dev46+gc4e744dbd", "0.20.2"
    )
    weights = {"num_bits": 4, "type": "int", "symmetric": True, "group_size": 128}
    quantized = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": ["lm_head"],
    }
    pools = []
    for kv in (None, {"num_bits": 8, "type": "float", "strategy": "tensor"}):
        folder = tmp_path / ("fp8-kv" if kv else "plain")
        folder.mkdir()
        config = {**LLAMA, "quantization_config": {**quantized, "kv_cache_scheme": kv}}
        (folder / "config.json").write_text(json.dumps(config))
        e = explain_text(log, model_name=str(folder), gpu="A100 SXM 80GB")
        line = next(x for x in e.decision_lines if x.startswith("In vramgui's estimate"))
        pools.append(int(re.search(r"\(([\d,]+) tokens\)", line)[1].replace(",", "")))
    assert pools[1] == pytest.approx(2 * pools[0], rel=0.02)


def test_sglang_explanation_follows_a_modelopt_kv_scheme_under_auto(tmp_path):
    # SGLang 0.5 caches a ModelOpt checkpoint whose kv_cache_quant_algo is FP8 in fp8 under
    # auto: the KV cache of the tokens it logged is half the 16-bit one, as the estimate has it.
    config = find("qwen3-30b-a3b").config
    kv_bytes = []
    for kv in (None, "FP8"):
        folder = tmp_path / f"kv-{kv}"
        folder.mkdir()
        quantized = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": kv}
        (folder / "config.json").write_text(
            json.dumps({**config, "quantization_config": quantized})
        )
        e = explain_text(text("sglang-mi-qwen3moe-aiter.log"), model_name=str(folder))
        kv_bytes.append(next(r.estimated_bytes for r in e.components if r.name == "kv_cache"))
    assert kv_bytes[1] == pytest.approx(kv_bytes[0] / 2, rel=0.01)
