"""``vramgui plan``: the JSON document and user errors."""

from __future__ import annotations

import json

import pytest

from vramgui.cli import main
from vramgui.core import offload
from vramgui.core.units import GiB


def _plan(capsys, *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_llamacpp_plan_json(capsys):
    doc = _plan(
        capsys,
        "llama-2-7b",
        "--quant", "Q4_K_M",
        "--engine", "llamacpp",
        "--vram-gib", "4",
        "--ram-gib", "16",
        "--gpu", "RTX 4090",
    )  # fmt: skip
    assert doc["schema"] == "vramgui.plan/1" and doc["planner"] == "llamacpp"
    ngl = doc["gpu_layers"]
    assert 0 < ngl < 33 and doc["fits"] and doc["gpu_bytes"][0] <= 4 * GiB
    devices = [layer["device"] for layer in doc["layers"]]
    assert devices.count("gpu:0") == ngl
    llamacpp = doc["launch"][0]
    assert llamacpp["engine"] == "llama.cpp"
    assert llamacpp["args"][:2] == ["-ngl", str(ngl)]
    assert doc["tokens_per_second"] > 0 and doc["bound"] == "cpu_memory"
    assert doc["min_vram_bytes"] < doc["gpu_bytes"][0]
    assert [t["batch"] for t in doc["throughput"]][:3] == [1, 2, 4]


def test_streaming_plan_is_disk_bound_with_a_slow_disk(capsys):
    doc = _plan(
        capsys,
        "opt-175b",
        "--dtype", "fp16",
        "--planner", "streaming",
        "--vram-gib", "8",
        "--ram-gib", "100",
        "--disk-gbps", "1",
    )  # fmt: skip
    assert doc["fits"] and doc["bound"] == "disk"
    assert doc["disk_bytes"] > 0 and doc["gpu_layers"] == 0
    assert doc["launch"][0]["engine"] == "DeepSpeed ZeRO-Inference"
    args = ["plan", "opt-175b", "--dtype", "fp16", "--planner", "streaming", "--vram-gib", "8",
            "--ram-gib", "100", "--disk-gbps", "1"]  # fmt: skip
    assert main(args) == 0
    assert " tokens/s (disk-bound)" in capsys.readouterr().out  # was "(bound by disk)"


def test_user_errors_exit_2(capsys):
    assert main(["plan", "llama-2-7b"]) == 2
    assert "--vram-gib" in capsys.readouterr().err
    assert main(["plan", "llama-2-7b", "--vram-gib", "8", "--ngl", "3"]) == 2
    assert "--ngl" in capsys.readouterr().err
    assert main(["plan", "llama-2-7b", "--vram-gib", "-1"]) == 2


def test_gguf_weights_are_planned_by_llamacpp_and_refused_by_transformers_planners(capsys):
    doc = _plan(capsys, "llama-2-7b", "--quant", "Q4_K_M", "--vram-gib", "4")
    assert doc["planner"] == "llamacpp" and doc["settings"]["engine"] == "llamacpp"
    assert doc["margin_bytes"] == GiB and doc["gpu_bytes"][0] <= 3 * GiB
    for planner in ("accelerate", "streaming"):
        assert main(["plan", "llama-2-7b", "--quant", "Q4_K_M", "--vram-gib", "4",
                     "--planner", planner]) == 2  # fmt: skip
        assert "--planner llamacpp" in capsys.readouterr().err


def test_ngl_past_the_models_layers_puts_them_all_on_the_gpu_and_says_so(capsys):
    doc = _plan(capsys, "llama-2-7b", "--engine", "llamacpp", "--vram-gib", "24", "--ngl", "500")
    assert doc["gpu_layers"] == 33
    assert any("--ngl 500 is more than" in n and "all 33" in n for n in doc["notices"])
    assert (
        main(["plan", "llama-2-7b", "--engine", "llamacpp", "--vram-gib", "4", "--ngl", "-1"]) == 2
    )
    assert "--ngl must be 0 or more" in capsys.readouterr().err


def test_an_efficiency_given_times_the_gpu_by_the_roofline_at_that_share(capsys):
    argv = ("llama-2-7b", "--quant", "Q4_K_M", "--vram-gib", "24", "--gpu-gbps", "1000")
    doc = _plan(capsys, *argv)
    assert doc["bandwidths"]["gpu_bytes_per_s"] == 800e9
    peak = _plan(capsys, *argv, "--gpu-efficiency", "1", "--ram-efficiency", "1")
    assert peak["bandwidths"]["gpu_bytes_per_s"] == 1000e9
    half = _plan(capsys, *argv, "--gpu-efficiency", "0.5", "--ram-efficiency", "1")
    # The GPU's share of the step doubles at half the share; the two hand-overs (host to GPU
    # and back) stay what they are.
    sync = 2 * offload.LLAMACPP_SPLIT_SECONDS
    step = 1 / peak["tokens_per_second"]
    assert 1 / half["tokens_per_second"] == pytest.approx((step - sync) * 2 + sync)
    # By default llama.cpp's measured kernels time the GPU's layers instead.
    assert doc["tokens_per_second"] != pytest.approx(1 / ((step - sync) / 0.8 + sync), rel=0.01)


def test_cpu_moe_plan_on_a_12_gb_card(capsys):
    common = ("qwen3-30b-a3b", "--quant", "Q4_K_M", "--seq", "32768",
              "--gpu", "RTX 3060 12GB", "--ram-gib", "64")  # fmt: skip
    doc = _plan(capsys, *common, "--cpu-moe")
    assert doc["fits"] and doc["gpu_layers"] == 49 and doc["gpu_bytes"][0] < 6 * GiB
    assert doc["llamacpp"]["cpu_moe"] and "--cpu-moe" in doc["launch"][0]["args"]
    block = doc["layers"][3]
    assert {p["device"] for p in block["pieces"]} == {"gpu:0", "cpu"}
    # the curves beside each other: experts in host RAM beat the best whole-layer split
    best = doc["best"]
    assert best["experts"]["tokens_per_second"] > best["layers"]["tokens_per_second"]
    assert len(doc["curves"]["layers"]) == 50 and len(doc["curves"]["experts"]) == 49
    # each point also gives the time to the first token; the plan's own is the chosen point's
    firsts = [p["first_token_seconds"] for p in doc["curves"]["layers"]]
    assert all(f > 0 for f in firsts) and firsts[-1] < firsts[0]
    engines = [s["engine"] for s in doc["launch"]]
    assert engines == ["llama.cpp", "Ollama", "LM Studio", "vLLM"]
    between = _plan(capsys, *common, "--n-cpu-moe", "24")
    assert doc["gpu_bytes"][0] < between["gpu_bytes"][0] < 20 * GiB
    assert "--n-cpu-moe" in between["launch"][0]["args"]
    text_run = main(["plan", *common, "--override-tensor", "exps=CPU"])
    assert text_run == 0
    out = capsys.readouterr().out
    assert "gpu:0+cpu" in out and "-ot exps=CPU" in out


def test_two_gpus_of_different_sizes(capsys):
    doc = _plan(capsys, "llama-3.1-70b", "--quant", "Q4_K_M", "--seq", "8192",
                "--gpu", "RTX 4090", "--gpu", "RTX 3060 12GB", "--ram-gib", "64")  # fmt: skip
    assert doc["gpus"] == ["RTX 4090", "RTX 3060 12GB"]
    assert len(doc["gpu_bytes"]) == len(doc["per_gpu"]) == 2
    for used, budget in zip(doc["gpu_bytes"], doc["vram_budget_bytes"], strict=True):
        assert used <= budget - doc["margin_bytes"]
    assert "-ts" in doc["launch"][0]["args"]
    fitted = _plan(capsys, "llama-3.1-70b", "--quant", "Q4_K_M", "--seq", "8192",
                   "--vram-gib", "24,12", "--fit")  # fmt: skip
    assert fitted["fit"]["layers_per_gpu"][0] > fitted["fit"]["layers_per_gpu"][1] > 0


def test_llamacpp_flags_are_refused_elsewhere_and_checked(capsys):
    assert main(["plan", "llama-2-7b", "--vram-gib", "8", "--planner", "accelerate",
                 "--cpu-moe"]) == 2  # fmt: skip
    assert "--planner llamacpp" in capsys.readouterr().err
    assert main(["plan", "llama-2-7b", "--engine", "llamacpp", "--vram-gib", "8",
                 "-ot", "exps=TPU0"]) == 2  # fmt: skip
    assert "unknown buffer type" in capsys.readouterr().err
    assert main(["plan", "llama-2-7b", "--engine", "llamacpp", "--vram-gib", "8,8,8",
                 "--gpu", "RTX 4090"]) == 2  # fmt: skip
    assert "3 figures for 1 GPUs" in capsys.readouterr().err
    assert main(["plan", "llama-2-7b", "--engine", "llamacpp", "--vram-gib", "8",
                 "--fit", "--cpu-moe"]) == 2  # fmt: skip
    assert "fits only what is not set" in capsys.readouterr().err


def test_a_plan_under_sglang_gives_its_launch_line(capsys):
    doc = _plan(capsys, "llama-3.1-8b", "--engine", "sglang", "--seq", "8192", "--gpu", "RTX 4090")
    sglang = doc["launch"][-1]
    assert sglang["engine"] == "SGLang"
    assert sglang["text"].startswith("python -m sglang.launch_server --model-path ")
    assert "--context-length 8192" in sglang["text"]
    plain = _plan(capsys, "llama-3.1-8b", "--seq", "8192", "--gpu", "RTX 4090")
    assert "SGLang" not in [s["engine"] for s in plain["launch"]]
