"""``vramgui plan``: the JSON document and user errors."""

from __future__ import annotations

import json

import pytest

from vramgui.cli import main
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


def test_default_speeds_are_the_measured_share_of_the_peaks(capsys):
    argv = ("llama-2-7b", "--quant", "Q4_K_M", "--vram-gib", "24", "--gpu-gbps", "1000")
    doc = _plan(capsys, *argv)
    assert doc["bandwidths"]["gpu_bytes_per_s"] == 800e9
    peak = _plan(capsys, *argv, "--gpu-efficiency", "1", "--ram-efficiency", "1")
    assert peak["bandwidths"]["gpu_bytes_per_s"] == 1000e9
    assert peak["tokens_per_second"] == pytest.approx(doc["tokens_per_second"] / 0.8)
