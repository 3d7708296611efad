"""Build resources/catalog.json, the bundled offline model catalog, from transformers itself.

tools/catalog_models.json holds, for every catalog model, the values of its published config.json
(plus display name, Hub id, aliases, license, gated flag, context length and a popularity rank).
This script builds each model with transformers on the meta device (no memory, so even
DeepSeek-V3 and Llama 3.1 405B are cheap), counts its parameters exactly (``named_parameters``,
so tied tensors count once) and writes the catalog with each entry's config and that count, the
transformers and torch versions and the date. The numbers in the catalog are therefore never typed
by hand; ``tests/sources/test_catalog.py`` checks ``core.families`` against them.

The model class is the one a user would load to serve or fine-tune the model, as in
tools/build_family_expectations.py: AutoModelForCausalLM for decoders, BertForMaskedLM for BERT,
and Gemma3ForCausalLM on the text config of a multimodal Gemma 3 config (the vision tower is not
part of the estimate).

Needs the ``validate`` extra (torch, transformers). To refresh the catalog, edit
tools/catalog_models.json and run from the repository root:

    .venv/bin/python tools/build_catalog.py            # all entries
    .venv/bin/python tools/build_catalog.py --check    # rebuild in memory, report differences only
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "catalog_models.json"
TARGET = ROOT / "resources" / "catalog.json"

FORMAT = "vramgui.catalog"
FORMAT_VERSION = 1


def build(config: dict) -> torch.nn.Module:
    """The transformers model for a config.json dict, built on the meta device."""
    # transformers fills nested dicts (rope_scaling) in place; the catalog keeps the published values.
    config = copy.deepcopy(config)
    model_type = config.pop("model_type")
    if model_type == "gemma3":
        text = dict(config["text_config"])
        text.pop("model_type", None)
        cfg = transformers.Gemma3TextConfig(**text)
        cls = transformers.Gemma3ForCausalLM
    else:
        cfg = AutoConfig.for_model(model_type, **config)
        cls = transformers.BertForMaskedLM if model_type == "bert" else None
    with torch.device("meta"):
        model = cls(cfg) if cls is not None else AutoModelForCausalLM.from_config(cfg)
    model.tie_weights()
    return model


def count_parameters(model: torch.nn.Module) -> int:
    """Exact parameter count; ``named_parameters`` yields a tied tensor once."""
    return sum(p.numel() for _, p in model.named_parameters())


def build_entries(models: list[dict]) -> list[dict]:
    """Catalog entries: the source fields plus the architecture and parameter count transformers gives."""
    entries = []
    for model_info in models:
        model = build(model_info["config"])
        entry = dict(model_info)
        entry["architecture"] = type(model).__name__
        entry["parameters_transformers"] = count_parameters(model)
        del model
        print(
            f"{entry['name']:<22} {entry['architecture']:<28} {entry['parameters_transformers']:>16,}"
        )
        entries.append(entry)
    return entries


def render(entries: list[dict]) -> str:
    """The catalog document, one entry per line so that diffs stay readable."""
    head = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "generated": dt.date.today().isoformat(),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "generator": "tools/build_catalog.py",
    }
    lines = ["{"]
    lines += [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "entries": [')
    lines += [
        "  " + json.dumps(e, sort_keys=False) + ("," if i < len(entries) - 1 else "")
        for i, e in enumerate(entries)
    ]
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the current catalog, write nothing"
    )
    args = parser.parse_args(argv)
    models = json.loads(SOURCE.read_text())["models"]
    names = [m["name"] for m in models]
    if len(set(names)) != len(names):
        print("duplicate catalog names", file=sys.stderr)
        return 1
    entries = build_entries(models)
    if args.check:
        old = {e["name"]: e for e in json.loads(TARGET.read_text())["entries"]}
        changed = [e["name"] for e in entries if old.get(e["name"]) != e]
        print("differences: " + (", ".join(changed) if changed else "none"))
        return 1 if changed or set(old) != set(names) else 0
    TARGET.write_text(render(entries))
    print(f"wrote {len(entries)} entries to {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
