"""The config.json a run builds its model from, wherever the model was found (no torch needed)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, repo_files, write_model_folder
from vramgui.core.model import ModelRef
from vramgui.sources.configs import config_of
from vramgui.sources.errors import IncompleteModel, ModelNotFound
from vramgui.sources.resolve import load_model

ROOT = Path(__file__).resolve().parents[2]


def test_catalog_models_give_their_published_config():
    config = config_of(load_model("smollm-135m").ref)
    assert config["model_type"] == "llama" and config["hidden_size"] == 576


def test_local_folders_files_and_configs(tmp_path):
    folder = write_model_folder(
        tmp_path / "model", TINY_LLAMA_CONFIG, llama_tensors(TINY_LLAMA_CONFIG)
    )
    assert config_of(load_model(str(folder)).ref) == TINY_LLAMA_CONFIG
    assert config_of(ModelRef("config", str(folder / "config.json"))) == TINY_LLAMA_CONFIG
    shard = next(folder.glob("*.safetensors"))
    assert config_of(ModelRef("local", str(shard))) == TINY_LLAMA_CONFIG  # the config beside it


def test_a_model_without_config_json_is_refused_with_the_reason(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")
    with pytest.raises(IncompleteModel, match=r"config\.json"):
        config_of(ModelRef("local", str(gguf)))
    with pytest.raises(IncompleteModel, match="GGUF"):
        config_of(ModelRef("hub", "org/name", file="model-Q4_K_M.gguf"))
    with pytest.raises(ModelNotFound):
        config_of(ModelRef("catalog", "no-such-model"))


def _config_in_child(fake_hub, tmp_path, ref: ModelRef) -> subprocess.CompletedProcess:
    # huggingface_hub reads HF_ENDPOINT when it is imported: a fresh process sees the fake Hub.
    code = (
        "import json, sys\n"
        "from vramgui.core.model import ModelRef\n"
        "from vramgui.core.errors import VramguiError\n"
        "from vramgui.sources.configs import config_of\n"
        "try:\n"
        f"    print(json.dumps(config_of(ModelRef.from_dict({json.dumps(ref.to_dict())}))))\n"
        "except VramguiError as exc:\n"
        "    print(type(exc).__name__, exc, file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    env = {**os.environ, "HF_ENDPOINT": fake_hub.url, "HF_HOME": str(tmp_path / "hf")}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_hub_repos_through_huggingface_hub(fake_hub, tmp_path):
    fake_hub.add("acme/tiny", repo_files(TINY_LLAMA_CONFIG, llama_tensors(TINY_LLAMA_CONFIG)))
    fake_hub.add(
        "acme/gated", repo_files(TINY_LLAMA_CONFIG, llama_tensors(TINY_LLAMA_CONFIG)), gated=True
    )
    done = _config_in_child(fake_hub, tmp_path, ModelRef("hub", "acme/tiny"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == TINY_LLAMA_CONFIG
    assert (tmp_path / "hf" / "hub" / "models--acme--tiny").is_dir()  # the shared HF cache
    gated = _config_in_child(fake_hub, tmp_path, ModelRef("hub", "acme/gated"))
    assert gated.returncode == 2 and gated.stderr.startswith("GatedModel")
    missing = _config_in_child(fake_hub, tmp_path, ModelRef("hub", "acme/none"))
    assert missing.returncode == 2 and missing.stderr.startswith("ModelNotFound")
