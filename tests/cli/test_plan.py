"""``vramgui plan``: the JSON document and user errors."""

from __future__ import annotations

import json

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
