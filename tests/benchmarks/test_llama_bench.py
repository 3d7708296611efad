"""llama.cpp's speed estimate against every published llama-bench row of
benchmarks/data/llama_bench.json: a change that moves one row out of its bound fails."""

from collections import defaultdict
from pathlib import Path

import pytest

from benchmarks import llama_bench
from vramgui.core import llamacpp_speed as lcs
from vramgui.core.offload.placement import attention_width
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

ROWS = llama_bench.load_rows()
# What the model reaches (docs/performance.md, "llama.cpp speed"), per kind of row (test, split
# over several GPUs): the share of counted rows within the bound (generation 20 %,
# prompt 25 %), and the largest error of any row the estimate marks measured. Rows it marks
# extrapolated may miss further, as far as EXTRAPOLATED_WORST: flash attention deep in the
# context on a GPU no flash row set (the DGX Spark: Qwen3-30B-A3B's pp2048 @ d32768 -39 %, its
# tg32 -29 %; gpt-oss-20b's and 120b's pp2048 @ d32768 -32 %).
SHARE_WITHIN = {("tg", False): 0.96, ("tg", True): 0.93, ("pp", False): 0.94}
WORST = {("tg", False): 0.25, ("tg", True): 0.40, ("pp", False): 0.40}
EXTRAPOLATED_WORST = {("tg", False): 0.30, ("tg", True): 0.25, ("pp", False): 0.40}


@pytest.fixture(scope="module")
def results():
    return llama_bench.evaluate_all(ROWS, with_before=False)


def test_every_row_names_a_catalog_gpu_and_model_and_its_source():
    assert len(ROWS) >= 120
    for row in ROWS:
        assert find_gpu(row["gpu"]) is not None, row["gpu"]
        assert catalog.find(row["model"]) is not None, row["model"]
        assert row["source"].startswith("https://") and row["build"]
        assert row["measured_tps"] > 0 and row["test"][:2] in ("pp", "tg")


def _setup(row):
    return row["gpu"], row["gpus"], row["model"], row["quant"], row["build"], row["ubatch"]


def test_rows_left_out_are_those_whose_prompt_speed_rises_with_length():
    by_setup = defaultdict(dict)
    for row in ROWS:
        if not row["depth"]:
            by_setup[_setup(row)][row["test"]] = row["measured_tps"]
    for row in ROWS:
        tests = by_setup[_setup(row)]
        rises = row["test"].startswith("pp") and tests.get("pp8192", 0) > tests.get("pp512", 0)
        assert ("anomalous" in row) == rises, llama_bench._label(row)


@pytest.mark.parametrize(("kind", "several"), list(SHARE_WITHIN))
def test_share_of_rows_within_the_bound(results, kind, several):
    figures = llama_bench.summary(results, kind, several=several)
    assert figures["rows"] >= 100
    assert figures["within"] >= SHARE_WITHIN[kind, several], figures


def test_no_row_off_by_more_than_its_worst_bound(results):
    def bound(r):
        worst = WORST if r.basis == lcs.MEASURED else EXTRAPOLATED_WORST
        return worst[r.kind, r.row["gpus"] > 1]

    off = [
        f"{llama_bench._label(r.row)}: {r.error:+.0%}"
        for r in results
        if "anomalous" not in r.row and r.error is not None and abs(r.error) > bound(r)
    ]
    assert not off


def test_prompt_speed_falls_with_the_prompt_as_measured(results):
    """Attention without flash attention grows with the context: pp8192 below pp512."""
    by_setup = defaultdict(dict)
    for r in results:
        if r.kind == "pp" and "anomalous" not in r.row:
            by_setup[r.row["gpu"], r.row["model"], r.row["quant"]][r.row["test"]] = r.estimate
    falls = [tests["pp8192"] < tests["pp512"] for tests in by_setup.values() if "pp8192" in tests]
    assert falls and all(falls)


def _speed(gpu, quant="Q4_K_M", model="llama-3-8b", attention="eager", path=lcs.MMQ):
    """tg128 as the rows ran it: without flash attention (``-fa 0``), by a current build."""
    spec = catalog.find(model).spec()
    w = Workload(mode="inference", engine="llamacpp", quant=quant, seq=512, attention=attention)
    return lcs.decode(spec, w, speed_hardware(find_gpu(gpu), "fp16"), 0, 128, prompt_path=path)


def test_a_gpu_or_quantization_without_rows_is_extrapolated_and_says_so():
    # The H100 PCIe's rows are of May 2024 builds: current builds' generation is extrapolated.
    assert _speed("H100 PCIe", path=lcs.DEQUANTIZE_CUBLAS).basis == lcs.MEASURED
    current = _speed("H100 PCIe")
    assert current.basis == lcs.EXTRAPOLATED
    assert any("generation in current builds" in note for note in current.notes)
    assert _speed("RTX 4090").basis == lcs.MEASURED
    sxm = _speed("H100 SXM")
    assert sxm.basis == lcs.EXTRAPOLATED and sxm.kind == lcs.HBM.kind
    assert any("H100 SXM" in note for note in sxm.notes)
    assert _speed("RTX 4090", quant="Q8_0").basis == lcs.EXTRAPOLATED
    # Flash attention (llama.cpp's default): rows with -fa 1 on GeForce cards, none on HBM.
    assert _speed("RTX 4090", attention="flash").basis == lcs.MEASURED
    a100 = _speed("A100 SXM 80GB", attention="flash")
    assert a100.basis == lcs.EXTRAPOLATED and any("flash attention" in n for n in a100.notes)
    moe = _speed("RTX 4090", model="qwen3-30b-a3b")
    assert moe.basis == lcs.EXTRAPOLATED and any("mixture of experts" in n for n in moe.notes)


def test_flash_attention_keeps_the_score_matrix_off_memory():
    spec = catalog.find("llama-3-8b").spec()
    hw = speed_hardware(find_gpu("RTX 4090"), "fp16")
    runs = {
        a: lcs.prefill(spec, Workload(mode="inference", engine="llamacpp", quant="Q4_K_M",
                                      seq=8192, attention=a), hw, 8192)
        for a in ("eager", "flash")
    }  # fmt: skip
    assert runs["flash"].tokens_per_second > runs["eager"].tokens_per_second


def _prompt(gpu, quant, path):
    spec = catalog.find("llama-3-8b").spec()
    w = Workload(mode="inference", engine="llamacpp", quant=quant, seq=512, attention="eager")
    hw = speed_hardware(find_gpu(gpu), "fp16")
    return lcs.prefill(spec, w, hw, 512, prompt_path=path).tokens_per_second


def test_mmq_pads_each_experts_tokens_to_whole_tiles():
    """ggml-cuda's mul_mat_q with ids: the tile width follows the micro-batch, not the expert;
    an expert's tokens (binomial under random routing) fill whole tiles."""
    assert lcs.expert_columns(512, 32, 4) == pytest.approx(128)  # ~64 tokens, one 128-wide tile
    assert lcs.expert_columns(128, 32, 4) == pytest.approx(
        128
    )  # ~16 in a tile as wide as the batch
    assert lcs.expert_columns(16, 32, 4) < 16  # ~2 in a 16-wide tile, or none: nothing computed
    # ~128 tokens an expert: the half routed more than 128 compute a second tile.
    assert 180 < lcs.expert_columns(1024, 32, 4) < 200
    assert lcs.expert_columns(4096, 8, 8) == 4096  # every expert takes every token: full tiles
    spec = catalog.find("gpt-oss-20b").spec()
    w = Workload(mode="inference", engine="llamacpp", quant="MXFP4_MOE", seq=512)
    terms = {p: lcs.prompt_terms(spec, w, 512, 0, p)[0] for p in lcs.PROMPT_PATHS}
    assert terms[lcs.MMQ] > 1.5 * terms[lcs.DEQUANTIZE_CUBLAS]


def test_a_mixtures_tokens_take_a_time_per_block_on_ampere_and_ada_cards_only():
    """The RTX 3090's and 4090's mixture-of-experts prompts take a time per token and block with
    experts beyond MMQ's tiles; the DGX Spark's, RTX PRO 6000 Blackwell's and RX 7900 XTX's rows
    show none, so none is added there. DeepSeek-V2-Lite's first block is dense."""
    gemma = catalog.find("gemma-4-26b-a4b").spec()
    w = Workload(mode="inference", engine="llamacpp", quant="Q4_K_M", seq=2048)
    assert lcs.moe_blocks(gemma, w) == 30
    assert lcs.moe_blocks(catalog.find("deepseek-v2-lite").spec(), w) == 26
    assert lcs.moe_blocks(catalog.find("llama-3-8b").spec(), w) == 0

    def per_token_and_block(gpu, quantized=True):
        k = lcs.gpu_kernels(llama_bench.hardware(gpu))
        return k.moe_tokens_seconds(1, quantized=quantized)

    assert per_token_and_block("RTX 3090") > 2 * per_token_and_block("RTX 4090") > 0
    assert per_token_and_block("RTX 3090", quantized=False) == 0  # 16-bit weights: cuBLAS
    for gpu in ("DGX Spark", "RTX PRO 6000 Blackwell", "Radeon RX 7900 XTX"):
        assert per_token_and_block(gpu) == 0


def test_latent_attention_runs_absorbed_in_llama_cpp():
    """src/models/deepseek2.cpp: each DeepSeek-V2 head attends the cached 512-wide latent and
    64-wide rotary key and returns the 512-wide latent, where other engines' heads are 192 / 128
    wide."""
    spec = catalog.find("deepseek-v2-lite").spec()
    llama = Workload(mode="inference", engine="llamacpp", quant="Q4_0", seq=512)
    vllm = Workload(mode="inference", engine="vllm", seq=512)
    assert attention_width(spec, llama) == 16 * (576 + 512) // 2
    assert attention_width(spec, vllm) == 16 * 192
    flops, _ = lcs.prompt_attention(llama, 512, 0, attention_width(spec, llama), 16)
    assert flops == 512 * 512 * 2 * 16 * (576 + 512)  # one block: K x Q and P x V


def test_flash_attention_costs_a_narrow_heads_score_as_a_128_wide_ones():
    """The DGX Spark's prompt grows with depth by about the same time per score for gpt-oss's
    64-wide heads as for Qwen3's 128-wide ones: under flash attention a head narrower than 128
    costs its score as a 128-wide one; without it, and for wider heads, the products' FLOPs."""
    flash = Workload(mode="inference", engine="llamacpp", quant="Q4_0", seq=512)
    eager = Workload(mode="inference", engine="llamacpp", quant="Q4_0", seq=512, attention="eager")
    cells = 512 * 512  # one micro-batch of 512 tokens attending to its 512 cells
    assert lcs.prompt_attention(flash, 512, 0, 64 * 64, 64)[0] == 4 * cells * 64 * 128
    assert lcs.prompt_attention(eager, 512, 0, 64 * 64, 64)[0] == 4 * cells * 64 * 64
    assert lcs.prompt_attention(flash, 512, 0, 8 * 256, 8)[0] == 4 * cells * 8 * 256


def test_current_builds_multiply_quantized_prompts_without_a_16_bit_copy():
    """MMQ (pull requests 7676, 7860) against the dequantize + cuBLAS path of May 2024 builds:
    quantized prompts faster, 16-bit ones the same."""
    mmq, cublas = lcs.MMQ, lcs.DEQUANTIZE_CUBLAS
    assert _prompt("RTX 4090", "Q4_0", mmq) > 1.3 * _prompt("RTX 4090", "Q4_0", cublas)
    assert _prompt("RTX 4090", "F16", mmq) == _prompt("RTX 4090", "F16", cublas)


def test_an_unknown_prompt_path_is_refused():
    from vramgui.core.errors import WorkloadError

    with pytest.raises(WorkloadError, match="prompt path"):
        _prompt("RTX 4090", "Q4_0", "cuBLAS 2023")


def test_flash_attention_runs_half_its_products_at_the_fp32_accumulate_rate():
    """fattn-mma-f16 accumulates K x Q in fp32, P x V in fp16: 4/3 of a GeForce card's listed
    (FP32-accumulate) rate, where cuBLAS's fp16 accumulation runs at twice it; the listed rate
    on a workstation card, whose listed rate is the fp16-accumulate one."""
    geforce = llama_bench.hardware("RTX 4090")
    k = lcs.gpu_kernels(geforce)
    assert k.flash_flops == pytest.approx(geforce.flops * 4 / 3)
    assert k.tensor_flops == pytest.approx(geforce.flops * 2)
    ada = llama_bench.hardware("RTX 6000 Ada")
    assert lcs.gpu_kernels(ada).flash_flops == pytest.approx(ada.flops)


def test_current_builds_spend_less_per_block_than_may_2024_builds():
    """CUDA graphs and fused kernels: a small model's tg128 on an RTX 4090 (pull request 15035's
    rows) runs at 45 us per block where May 2024 builds took 95."""
    may, now = (_speed("RTX 4090", path=p) for p in (lcs.DEQUANTIZE_CUBLAS, lcs.MMQ))
    assert now.tokens_per_second > 1.1 * may.tokens_per_second


def test_sliding_window_blocks_read_their_window_only():
    """gpt-oss interleaves 128-token sliding-window blocks with full ones: deep in the context
    only the full blocks' cache grows."""
    spec = catalog.find("gpt-oss-20b").spec()
    w = Workload(mode="inference", engine="llamacpp", quant="MXFP4_MOE", seq=40000)
    _, near, _ = lcs.generation_terms(spec, w, 128)
    _, deep, _ = lcs.generation_terms(spec, w, 32768)
    full_blocks_only = (deep - near) / (32768 - 128)
    assert abs(full_blocks_only - 12 * 2 * 8 * 64 * 2) < 1  # 12 blocks, K and V, 8 x 64, fp16


def test_hbm_reads_weights_at_a_smaller_share_than_gddr():
    """The A100 80GB has twice the RTX 3090's bandwidth, yet generates about as fast."""
    a100, rtx3090 = _speed("A100 SXM 80GB"), _speed("RTX 3090")
    assert a100.tokens_per_second < 1.5 * rtx3090.tokens_per_second


def test_apple_prompts_are_costed_on_the_alu_peak_and_the_held_out_m3_max_lands(results):
    """The M2 Ultra's prompt rows set Metal's shares; the M3 Max's (another generation, half
    the GPU) check them: all within the prompt bound."""
    held_out = [r for r in results if r.kind == "pp" and r.row["gpu"] == "Apple M3 Max 64GB"]
    assert len(held_out) == 12
    assert all(abs(r.error) <= 0.25 for r in held_out), [f"{r.error:+.0%}" for r in held_out]
    # Metal writes no 16-bit copy of quantized weights in any build: the older build's prompt
    # is the same as the current one's with flash attention off.
    spec = catalog.find("llama-3-8b").spec()
    w = Workload(mode="inference", engine="llamacpp", quant="Q4_K_M", seq=512, attention="eager")
    hw = llama_bench.hardware("Apple M2 Ultra 192GB")
    old = lcs.prefill(spec, w, hw, 512, prompt_path=lcs.DEQUANTIZE_CUBLAS).tokens_per_second
    assert old == pytest.approx(lcs.prefill(spec, w, hw, 512).tokens_per_second)


def test_a_gpu_of_unknown_16_bit_rate_costs_no_prompt():
    gpu = find_gpu("Jetson AGX Thor")
    assert gpu.fp16_tflops is None
    kernels = lcs.kernels_for(gpu, gpu.memory_bandwidth_bytes_per_s, None)
    assert not kernels.prompts and kernels.weights_seconds(1e9) > 0


def test_the_document_lists_every_row_with_its_current_estimate(results):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    missing = [
        llama_bench._label(r.row) for r in results if llama_bench.markdown_cells(r)[0] not in doc
    ]
    assert not missing, "re-run `python -m benchmarks.llama_bench --markdown`"


def test_every_catalog_gpu_names_its_memory_and_falls_in_a_kind():
    from vramgui.hardware.gpus import load_catalog

    for gpu in load_catalog():
        assert gpu.memory_type.startswith(("HBM", "GDDR", "LPDDR")), gpu.name
    kinds = {
        "H100 SXM": lcs.HBM,
        "Instinct MI300X": lcs.HBM,
        "RTX 5090": lcs.GEFORCE,
        "RTX 2080 Ti": lcs.GEFORCE,
        "RTX PRO 6000 Blackwell": lcs.WORKSTATION,
        "RTX 6000 Ada": lcs.WORKSTATION,
        "DGX Spark": lcs.WORKSTATION,
        "Apple M4 Max 128GB": lcs.UNIFIED,
        "Radeon RX 7900 XTX": lcs.RADEON,
        "Ryzen AI Max+ 395 128GB": lcs.RADEON,
    }
    for name, kind in kinds.items():
        assert lcs.kernel_shares(llama_bench.hardware(name)) is kind, name
