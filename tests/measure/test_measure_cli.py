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


def test_mla_on_the_cpu_is_compared_with_the_estimate_for_the_cpus_kernels(capsys, tmp_path):
    # MLA's q / k and v head sizes differ (12 and 8): the CPU's SDPA takes its math kernel (fp32
    # scores), CUDA's memory-efficient kernel does not; the run is held against the CPU's
    # estimate.
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY["deepseek_v3-mla"], "v_head_dim": 8}))
    code, out, _ = _run(capsys, "measure", config, "--device", "fake", "--seq", 512, "--json")
    assert code == 0
    measured = json.loads(out)["measured"]
    assert measured["attention"]["math_kernel_calls"] > 0
    assert abs(measured["cpu_kernels"]["error"]) <= 0.03
    assert measured["cpu_kernels"]["estimate"] > measured["tensor_bytes"]["estimate"]


def test_the_table_shows_the_attention_the_run_built(capsys, tiny):
    # BLOOM: transformers runs it with eager attention only, whatever --attention asks.
    bloom = tiny("bloom-tied")
    code, out, err = _run(capsys, "measure", bloom, "--device", "fake", "--seq", 16)
    assert code == 0, err
    settings_line = out.splitlines()[1]
    assert "eager attention (transformers runs" in settings_line
    assert "with eager only, not sdpa)" in settings_line
    code, out, _ = _run(capsys, "measure", bloom, "--device", "fake", "--seq", 16, "--json")
    assert json.loads(out)["measured"]["attention_used"] == "eager"
    # a model that runs what was asked says it plainly
    code, out, _ = _run(capsys, "measure", tiny("llama-gqa"), "--device", "fake", "--seq", 16)
    assert out.splitlines()[1].endswith(", sdpa")
