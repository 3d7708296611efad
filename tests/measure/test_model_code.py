"""A model folder's own code is never imported or offered, and a run is bounded before it starts.

A config whose type transformers' ``AutoModelForCausalLM`` does not map (qwen3_vl) and that
names code of its own (``auto_map``) once made transformers ask "Do you wish to run the custom
code? [y/N]" on standard input; answering "y" imported the folder's ``modeling_*.py``. Each run
here is the command in a child held to 1.5 GB (tests/bounded.py), with "y" waiting on its
standard input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.architecture_table import EXPECTED
from tests.bounded import command, run_bounded

CODE = (
    'import pathlib\npathlib.Path(__file__).with_name("RAN").write_text("the folder\'s code ran")\n'
)
AUTO_MAP = {
    "AutoConfig": "configuration_own.OwnConfig",
    "AutoModelForCausalLM": "modeling_own.OwnForCausalLM",
}


def _folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    # The folder names itself, so that the code would be found there.
    config = {**config, "auto_map": AUTO_MAP, "_name_or_path": str(folder)}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_own.py").write_text(CODE)
    (folder / "configuration_own.py").write_text(CODE)
    return folder


def _measure(folder: Path, *, codes: tuple[int, ...] = (0,)):
    return run_bounded(
        command("measure", folder, "--device", "fake", "--seq", 16, "--json"),
        stdin="y\n",
        codes=codes,
    )


def test_a_multimodal_model_naming_its_own_code_is_built_by_its_transformers_class(tmp_path):
    (case,) = [
        c for c in EXPECTED["qwen3_vl"] if set(c["config"]) == {"model_type", "architectures"}
    ]
    folder = _folder(tmp_path, case["config"])
    done = _measure(folder)
    assert not (folder / "RAN").exists()
    assert "custom code" not in done.stderr
    measured = json.loads(done.stdout)["measured"]
    # Built whole by Qwen3VLForConditionalGeneration (vision tower included), as counted.
    assert measured["parameters"]["measured"] == case["parameters"]


def test_a_type_transformers_does_not_ship_is_refused_with_the_reason(tmp_path):
    folder = _folder(tmp_path, {"model_type": "own_llm", "hidden_size": 64, "num_hidden_layers": 2,
                                "num_attention_heads": 4, "intermediate_size": 128,
                                "vocab_size": 100})  # fmt: skip
    done = _measure(folder, codes=(2,))
    assert not (folder / "RAN").exists()
    message = done.stderr.strip().splitlines()
    assert len(message) == 1, done.stderr
    assert "no model type 'own_llm'" in message[0] and "auto_map" in message[0]
    assert "never a model's own code" in message[0]


def test_a_model_too_deep_for_a_fake_run_is_refused_before_it_starts(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4096,
                                  "num_attention_heads": 4, "intermediate_size": 128,
                                  "vocab_size": 100}))  # fmt: skip
    done = run_bounded(
        command("measure", config, "--device", "fake", "--seq", 16), codes=(2,), seconds=30
    )
    assert "4,096 layers x 2 forward passes" in done.stderr
    assert "torch" not in done.stderr
