"""Build tests/data/families/expected.json from transformers itself.

For every tiny config (tests/data/families/tiny_configs.json) it records the exact list of
parameter names and shapes, and for every real config (tests/data/families/configs.json) the exact
parameter count, of the model transformers builds from that config. Models are built on the meta
device, so even DeepSeek-V3 costs no memory. Tied parameters count once, as ``named_parameters``
lists them.

The model class is the one a user would load to fine-tune or serve the model: AutoModelForCausalLM
for decoders (for a multimodal Gemma 3 config, Gemma3ForConditionalGeneration with its vision
tower) and BertForMaskedLM for BERT.

Needs the ``validate`` extra (torch, transformers). Run from the repository root:

    .venv/bin/python tools/build_family_expectations.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "families"


def build(config: dict) -> torch.nn.Module:
    """The transformers model for a config.json dict, built on the meta device."""
    config = dict(config)
    model_type = config.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **config)
    cls = transformers.BertForMaskedLM if model_type == "bert" else None
    with torch.device("meta"):
        model = (
            cls(cfg)
            if cls is not None
            else AutoModelForCausalLM.from_config(cfg, trust_remote_code=False)
        )
    model.tie_weights()
    return model


def main() -> int:
    tiny = json.loads((DATA / "tiny_configs.json").read_text())
    real = json.loads((DATA / "configs.json").read_text())
    out: dict[str, dict] = {
        "transformers": transformers.__version__,
        "tiny": {},
        "real": {},
    }
    for key, config in tiny.items():
        model = build(config)
        out["tiny"][key] = {
            "architecture": type(model).__name__,
            "tensors": [[n, list(p.shape)] for n, p in model.named_parameters()],
        }
        print(f"{key}: {type(model).__name__}, {len(out['tiny'][key]['tensors'])} tensors")
    for key, config in real.items():
        model = build(config)
        count = sum(p.numel() for p in model.parameters())
        out["real"][key] = {"architecture": type(model).__name__, "parameters": count}
        print(f"{key}: {type(model).__name__}, {count:,} parameters")
        del model
    (DATA / "expected.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
