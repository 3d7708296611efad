"""Text output that a file could turn against the terminal, or that the terminal cannot hold:
control characters in a config's names and quantization method, and names a cp1252 console
(Windows, output redirected) cannot encode."""

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from vramgui.cli import main

ROOT = Path(__file__).resolve().parents[2]
# OSC 0 (window title), clear screen, a C1 CSI, right-to-left override, a line of its own.
EVIL = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e\nforged line"
TINY = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "vocab_size": 1000,
}


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c)[0] == "C"]


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "{config}"],
        ["estimate", "{config}", "--engine", "vllm"],
        ["estimate", "{config}", "--mode", "training"],
        ["plan", "{config}", "--vram-gib", "8"],
        ["profile", "save", "evil", "{config}"],
        ["profile", "list"],
    ],
)
def test_no_control_character_from_a_file_reaches_the_terminal(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VRAMGUI_HOME", str(tmp_path / "home"))
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                **TINY,
                "architectures": [f"LlamaForCausalLM{EVIL}"],
                "quantization_config": {"quant_method": f"own{EVIL}"},
            }
        )
    )
    main(["profile", "save", "evil", str(config)])
    capsys.readouterr()
    assert main([a.format(config=config) for a in argv]) in (0, 2)
    out, err = capsys.readouterr()
    assert _raw_controls(out + err) == []
    assert "\nforged line" not in out + err


def test_names_the_output_encoding_cannot_hold_are_escaped_not_fatal(tmp_path):
    folder = tmp_path / "名前"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "VRAMGUI_HOME": str(tmp_path / "home")}
    for argv in (
        ["estimate", str(folder)],
        ["profile", "save", "名前", str(folder)],
        ["profile", "list"],
        ["profile", "show", "名前"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "vramgui", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode("cp1252")
        assert b"\\u540d\\u524d" in done.stdout
