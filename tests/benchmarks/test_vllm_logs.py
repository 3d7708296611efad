"""benchmarks/vllm_logs.py: the published vLLM start-ups are well formed and each is estimated."""

import pytest

from benchmarks import vllm_logs
from vramgui.core.workload import GPU_ARCHS

LOGS = vllm_logs.load()["logs"]


def test_every_log_cites_its_source_gpu_version_and_split():
    doc = vllm_logs.load()
    ids = [log["id"] for log in doc["logs"]]
    assert len(ids) == len(set(ids))
    for log in doc["logs"]:
        assert log["url"].startswith("https://"), log["id"]
        assert log["what"] and log["vllm"][0].isdigit(), log["id"]
        assert log["gpu"] in doc["gpus"] or "cuda_total_gib" in log, log["id"]
        assert log["split"] in ("tune", "held-out"), log["id"]
        assert log["sampler"] in ("pytorch", "flashinfer"), log["id"]
        logged = log["logged"]
        assert "kv_tokens" in logged or "available_gib" in logged or not logged.get("starts", True)
    for name, config in doc.get("configs", {}).items():
        assert config["source"] and config["config"]["model_type"], name
    # A GPU's generation picks the kernels vLLM runs a format with (and their padding).
    for name, gpu in doc["gpus"].items():
        assert gpu.get("arch", "hopper") in GPU_ARCHS, name
        # nvidia-smi's memory, or CUDA's total where nvidia-smi prints none (unified memory).
        assert ("memory_mib" in gpu) != ("cuda_total_gib" in gpu) and gpu["source"], name


def test_each_log_is_estimated_on_its_gpu_generation():
    doc = vllm_logs.load()
    log = next(log for log in doc["logs"] if log["id"] == "gpt-oss-120b-4xa100-tp4")
    on_a100 = vllm_logs.estimate_log(log, doc)
    anywhere = dict(
        doc,
        gpus={name: {k: v for k, v in g.items() if k != "arch"} for name, g in doc["gpus"].items()},
    )
    unknown = vllm_logs.estimate_log(log, anywhere)
    # On an A100 vLLM runs gpt-oss's MXFP4 experts with Marlin, padded to its tile: more weights.
    assert on_a100["weights_estimate_gib"] > unknown["weights_estimate_gib"]


def test_the_section_lists_every_log_with_its_estimate_and_the_summaries():
    table = vllm_logs.rows()
    assert len(table) == len(vllm_logs.load()["logs"])
    refused = [r for r in table if not r["starts_logged"]]
    assert refused and all("error" not in r for r in refused)
    text = "\n".join(vllm_logs.markdown_section(table))
    for row in table:
        assert f"[{row['id']}](" in text
    assert "- Held out:" in text and "- Tuned on:" in text
    assert "Start or refuse: the estimate agrees with" in text
    # A log that does not name its GPU says how the GPU the estimate uses was told.
    noted = [log for log in vllm_logs.load()["logs"] if "gpu_note" in log]
    assert noted and all(f"{log['gpu']}: {log['gpu_note']}" in text for log in noted)


def test_the_kv_layout_turns_each_logged_pool_into_the_logged_tokens():
    # Apart from the memory model: the pool each log printed, cut into blocks by the estimate's
    # KV layout (sliding windows, MLA, Gated DeltaNet states, FP8 caches, TP and PP), gives the
    # tokens the log printed.
    table = vllm_logs.rows()
    checked = [r for r in table if "layout_error" in r]
    assert len(checked) >= 8
    kinds = " ".join(r["kind"] for r in checked)
    for kind in ("hybrid", "MLA", "MoE", "AWQ", "FP8", "sliding window"):
        assert kind in kinds
    assert max(abs(r["layout_error"]) for r in checked) < 0.02
    assert len(table) >= 25


@pytest.mark.parametrize(
    "log", [log for log in LOGS if not log.get("gap")], ids=lambda log: log["id"]
)
def test_each_log_without_a_stated_gap_is_within_ten_percent_of_its_pool(log):
    row = vllm_logs.estimate_log(log, vllm_logs.load())
    if not row["starts_logged"]:
        assert not row["starts_estimate"]
        return
    assert abs(row["error"]) < 0.10, row


def test_the_gemma_4_start_up_is_estimated_in_the_checkpoint_kv_dtype_on_the_gpu_it_implies():
    # Gemma-4-31B-IT-NVFP4's annotated cold start: the checkpoint's fp8 KV scheme under
    # --kv-dtype auto, on the 128 GB unified-memory GB10 whose CUDA total its GPU entry gives:
    # within 10 % of the 1,563,739 tokens logged. On the 80 GB H100 its companion post names,
    # the same start-up holds half the requests the log prints (the GPU note says why no
    # vLLM layout of this checkpoint can fit them there).
    doc = vllm_logs.load()
    log = next(log for log in LOGS if log["id"] == "robotmunki-gemma4-31b-nvfp4-262k")
    row = vllm_logs.estimate_log(log, doc)
    assert abs(row["weights_estimate_gib"] / log["logged"]["weights_gib"] - 1) < 0.025
    assert abs(row["error"]) < 0.10
    assert row["available_estimate_gib"] > 70  # CUDA's 121.69 GiB, not an nvidia-smi figure
    in_bf16 = vllm_logs.estimate_log(
        dict(log, settings={**log["settings"], "kv-dtype": "bf16"}), doc
    )
    assert 0.45 < in_bf16["tokens_estimate"] / row["tokens_estimate"] < 0.55
    on_h100 = vllm_logs.estimate_log(dict(log, gpu="H100 80GB"), doc)
    assert on_h100["error"] < -0.40
    assert "H100" in log["gpu_note"] and not log.get("gap")
