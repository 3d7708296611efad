"""`vramgui measure`: a fake run of real transformers models beside the estimate.

CI installs the measure extra (a CPU build of torch) and measures a small model here.
"""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from vramgui.cli import main

TINY = json.loads(
    (Path(__file__).parents[1] / "data" / "families" / "tiny_configs.json").read_text()
)


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tiny(tmp_path):
    def write(name: str) -> Path:
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(TINY[name]))
        return path

    return write


def test_a_small_model_measures_within_three_percent_of_its_estimate(capsys):
    code, out, _ = _run(
        capsys, "measure", "smollm-135m", "--device", "fake", "--batch", 2, "--seq", 512, "--json"
    )
    assert code == 0
    doc = json.loads(out)
    measured = doc["measured"]
    assert doc["schema"] == "vramgui.estimate/1"
    assert measured["device"] == "fake"
    assert measured["parameters"]["difference"] == 0
    assert abs(measured["tensor_bytes"]["error"]) <= 0.03
    assert measured["components"]["kv_cache"]["difference_bytes"] == 0
    assert measured["phase"] == "prefill"
    assert measured["attention"]["math_kernel_calls"] == 0
    assert measured["host_peak_rss_bytes"] < 2 * 2**30  # 270 MB of weights, never allocated


def test_training_with_lora_and_the_table(capsys, tiny):
    code, out, err = _run(
        capsys,
        "measure",
        tiny("llama-gqa"),
        "--mode",
        "training",
        "--method",
        "lora",
        "--precision",
        "pure",
        "--seq",
        32,
        "--progress",
    )
    assert code == 0, err
    assert "tensors at peak" in out and "optimizer states" in out
    steps = [json.loads(line)["progress"] for line in err.splitlines() if line.startswith("{")]
    assert [s["step"] for s in steps[:3]] == ["starting", "load", "forward"]
    assert steps[-1] == {"step": "zero_grad", "done": 9, "of": 10}


def test_a_model_transformers_cannot_build_is_one_line(capsys, tmp_path):
    config = tmp_path / "config.json"
    # A type vramgui estimates as a Llama-style decoder and transformers does not know.
    config.write_text(json.dumps({**TINY["llama-gqa"], "model_type": "no_such_type"}))
    code, out, err = _run(capsys, "measure", config, "--device", "fake", "--seq", 8)
    assert code == 2 and out == ""
    assert err.startswith("vramgui: cannot measure this setup: transformers ")
    assert "has no model type 'no_such_type'" in err
    assert len(err.strip().splitlines()) == 1


def test_cuda_without_a_gpu_says_so(capsys):
    code, _, err = _run(capsys, "measure", "smollm-135m", "--device", "cuda")
    assert code == 2
    assert "sees no CUDA device" in err and "--device fake" in err


def test_the_table_says_how_the_timed_steps_calibrated_the_estimate():
    from vramgui.cli.measure import speed_lines

    block = {"step_seconds": 2.0, "steps_seconds": [2.0] * 5, "tokens_per_step": 8192,
             "tokens_per_second": 4096.0, "device": "NVIDIA A100-SXM4-80GB",
             "default_tokens_per_second": 5000.0, "gpu": "A100 SXM 80GB", "matmul": 0.52,
             "stored": "/home/u/.local/share/vramgui/calibration.json"}  # fmt: skip
    text = "\n".join(speed_lines(block))
    assert "4,096 tokens/s over 5 timed steps (median 2 s) on NVIDIA A100-SXM4-80GB" in text
    assert "default for this GPU: 5,000 tokens/s" in text
    assert "matrix products at 52% of A100 SXM 80GB's peak" in text
    refused = "\n".join(speed_lines({**block, "stored": None, "reason": "bound by launch"}))
    assert "not calibrated: bound by launch" in refused
    failed = "\n".join(speed_lines({"stored": None, "reason": "the timed steps failed: x"}))
    assert "speed: the timed steps failed: x" in failed
