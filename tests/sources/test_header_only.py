"""A header-only safetensors checkpoint (the header, then a sparse hole) of every architecture in
the table loads without refusal, and its weights are its header's, to the byte.

The header's names and shapes are the table's inventory of each type's default config (what
tools/build_architectures.py read from transformers); the check is that reading a checkpoint
never refuses or drops a tensor, whatever the architecture, and says how exact the rest is.
"""

import json
from pathlib import Path

import pytest

from tests.architecture_table import EXPECTED, bare
from tests.fakehub.files import header_totals, write_sparse_safetensors
from vramgui.core.families import spec_from_config
from vramgui.core.model import Inventory
from vramgui.sources.resolve import load_model

TYPES = sorted(EXPECTED)
DTYPES = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}


def load_header_only(tmp_path: Path, config: dict, tensors: dict):
    """A folder of config.json and a header-only model.safetensors, loaded as a user opens it."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    write_sparse_safetensors(folder / "model.safetensors", tensors)
    return load_model(str(folder)).spec


@pytest.mark.parametrize("key", TYPES)
def test_header_only_checkpoint_weighs_its_header(tmp_path, key):
    config = bare(key)
    spec = spec_from_config(config)
    tensors = {t.name: (DTYPES.get(t.dtype or "bf16", "BF16"), t.shape) for t in spec.tensors}
    loaded = load_header_only(tmp_path, config, tensors)
    assert loaded.parameters == header_totals(tensors)[0]
    assert {t.name for t in loaded.tensors} == set(tensors)
    assert loaded.inventory in (Inventory.FROM_HEADERS, Inventory.APPROXIMATE)
    assert (loaded.inventory is Inventory.APPROXIMATE) == bool(loaded.warnings)


def test_unknown_architecture_with_headers_is_weighed_not_refused(tmp_path):
    config = {"model_type": "my_new_lm", "hidden_size": 64, "num_hidden_layers": 2}
    tensors = {
        "model.embed_tokens.weight": ("BF16", (100, 64)),
        "model.layers.0.mixer.in_proj.weight": ("BF16", (256, 64)),
        "model.layers.1.mixer.in_proj.weight": ("BF16", (256, 64)),
        "lm_head.weight": ("BF16", (100, 64)),
    }
    loaded = load_header_only(tmp_path, config, tensors)
    assert loaded.parameters == header_totals(tensors)[0]
    assert loaded.inventory is Inventory.APPROXIMATE
