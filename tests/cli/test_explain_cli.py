"""`vramgui explain`: text and JSON over a published log, exit 2 with one line for anything else,
and nothing from the log reaches the terminal raw."""

import json

from tests.logs_fixtures import LOGS
from vramgui.cli import main


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_output_names_engine_and_components(capsys):
    code, out, _ = _run(capsys, "explain", LOGS / "llamacpp-glm-z1-32b-3090ti-32k.log")
    assert code == 0
    assert out.startswith("Engine: llama.cpp")
    assert "KV cache" in out and "CUDA0" in out and "Launch:" in out
    assert "kv_cache" not in out  # the JSON's name; the text says what it is


def test_text_output_flags_a_row_beyond_its_accuracy_and_says_the_sign(capsys):
    code, out, _ = _run(
        capsys,
        "explain",
        LOGS / "vllm-refusal-gpt-oss-120b-h100.log",
        "--model",
        "gpt-oss-120b",
        "--gpu",
        "H100 SXM",
    )
    assert code == 0
    pool = next(line for line in out.splitlines() if line.startswith("KV cache pool"))
    assert pool.endswith("! beyond ±10%")
    assert "difference: (estimate - logged) / logged" in out


def test_text_output_says_what_is_not_estimated(capsys):
    code, out, _ = _run(capsys, "explain", LOGS / "pytorch-oom-cads-fragmented.log")
    assert code == 0
    allocated = next(line for line in out.splitlines() if line.startswith("Allocated by PyTorch"))
    assert "not estimated" in allocated
    assert "within ±50%" in out


def test_json_output(capsys):
    code, out, _ = _run(
        capsys,
        "explain",
        LOGS / "vllm-refusal-gpt-oss-120b-h100.log",
        "--json",
        "--model",
        "gpt-oss-120b",
        "--gpu",
        "H100 SXM",
    )
    doc = json.loads(out)
    assert code == 0
    assert doc["schema"] == "vramgui.explain/1"
    assert doc["decision"]["kind"] == "refusal"
    assert doc["model"]["name"] == "openai/gpt-oss-120b"


def test_standard_input(capsys, monkeypatch):
    import io
    import sys

    data = (LOGS / "pytorch-oom-24gib-22mib.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = _run(capsys, "explain", "-")
    assert code == 0 and "Engine: PyTorch" in out


def test_noise_exits_2_with_one_line(capsys, tmp_path):
    noise = tmp_path / "noise.txt"
    noise.write_bytes(bytes(range(256)) * 4000)
    code, out, err = _run(capsys, "explain", noise)
    assert code == 2 and out == ""
    assert err.startswith("vramgui: ") and err.count("\n") == 1


def test_missing_file_exits_2(capsys, tmp_path):
    code, _, err = _run(capsys, "explain", tmp_path / "nope.log")
    assert code == 2 and "cannot read" in err


def test_escape_sequences_never_reach_the_terminal(capsys, tmp_path):
    log = tmp_path / "evil.log"
    log.write_text(
        "print_info: general.name     = Evil\x1b]0;pwned\x07\x1b[2J\u202emodel\n"
        "print_info: n_layer          = 32\n"
        "llama_kv_cache_init:      CUDA0 KV buffer size =   512.00 MiB\n"
        "llama_context:      CUDA0 compute buffer size =   300.00 MiB\n",
        encoding="utf-8",
    )
    for args in ((), ("--json",)):
        code, out, _ = _run(capsys, "explain", log, *args)
        assert code == 0
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
