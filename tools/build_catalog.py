"""Build resources/catalog.json, the bundled offline model catalog, from transformers itself.

tools/catalog_models.json holds, for every catalog model, the values of its published config.json
(plus display name, Hub id, aliases, license, gated flag, context length, a popularity rank and
``config_source``: where those values were read). This script builds each model with transformers
on the meta device (no memory, so even a trillion-parameter MoE is cheap), counts its parameters
exactly (``named_parameters``, so tied tensors count once) and writes the catalog with each entry's
config and counts, the transformers and torch versions and the date. The numbers in the catalog
are therefore never typed by hand; ``tests/sources/test_catalog.py`` checks ``core.families``
against them.

The model class is the one a user loads: the class the checkpoint names in ``architectures`` when
transformers has it (so a multimodal checkpoint is built whole, vision and audio towers included),
otherwise the image-text-to-text class of its type when the config has a vision part, otherwise
AutoModelForCausalLM. Each entry stores three counts:

- ``parameters_transformers``: the whole model of that class;
- ``parameters_by_part``: the same split by top-level module (``language_model``, ``visual``,
  ``vision_tower``, ``multi_modal_projector``, ...), the output head counted with the language
  model; a text-only model is one part, ``language_model``;
- ``parameters_text``: the language model alone (its part above).

A config whose sizes transformers would not apply (a type it builds from other keys, say) is an
error, never a silent count of default sizes.

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
from typing import Any

import torch
import transformers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    PretrainedConfig,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "catalog_models.json"
TARGET = ROOT / "resources" / "catalog.json"

FORMAT = "vramgui.catalog"
FORMAT_VERSION = 1

# Fields the build adds to each source record; the source file must not carry them.
GENERATED = ("architecture", "parameters_transformers", "parameters_text", "parameters_by_part")
LANGUAGE_MODEL = "language_model"
# Sizes that must reach the built model as published; a mismatch means transformers read other keys.
# (Not head or MLP widths: heterogeneous configs such as Gemma 4 refuse a global value for those.)
CHECKED_SIZES = ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads")


def _checkpoint_class(config: dict[str, Any]) -> type[torch.nn.Module] | None:
    """The transformers class the checkpoint names in ``architectures``, if transformers has it."""
    for name in config.get("architectures") or ():
        cls = getattr(transformers, name, None)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            return cls
    return None


def _config_object(config: dict[str, Any], cls: type | None) -> PretrainedConfig:
    """The transformers config for a config.json dict.

    A ``model_type`` transformers does not register (Kimi K2's ``kimi_k2``, whose checkpoint runs
    DeepSeek-V3 code) is read with the config class of the class named in ``architectures``.
    """
    values = copy.deepcopy(config)
    model_type = values.pop("model_type")
    if model_type in CONFIG_MAPPING_NAMES:
        return AutoConfig.for_model(model_type, **values)
    if cls is None:
        raise ValueError(f"transformers has neither model type {model_type!r} nor its class")
    return cls.config_class(**values)


def _published_text_config(config: dict[str, Any]) -> dict[str, Any]:
    return config.get("text_config") or config


def _check_sizes(published: dict[str, Any], built: PretrainedConfig) -> None:
    """Fail when the built language model does not have the published sizes."""
    text = built.get_text_config()
    wrong = {
        key: (published[key], getattr(text, key, None))
        for key in CHECKED_SIZES
        if key in published and getattr(text, key, None) != published[key]
    }
    if wrong:
        raise ValueError(
            f"transformers did not apply the published sizes (published, built): {wrong}"
        )


def build(config: dict[str, Any]) -> torch.nn.Module:
    """The transformers model a user would load for a config.json dict, built on the meta device."""
    cls = _checkpoint_class(config)
    cfg = _config_object(config, cls)
    _check_sizes(_published_text_config(config), cfg)
    with torch.device("meta"):
        if cls is not None and isinstance(cfg, cls.config_class):
            model = cls(cfg)
        elif "vision_config" in config and config["model_type"] in (
            MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
        ):
            model = AutoModelForImageTextToText.from_config(cfg, trust_remote_code=False)
        else:
            model = AutoModelForCausalLM.from_config(cfg, trust_remote_code=False)
    model.tie_weights()
    return model


def count_parameters(model: torch.nn.Module) -> int:
    """Exact parameter count; ``named_parameters`` yields a tied tensor once."""
    return sum(p.numel() for _, p in model.named_parameters())


def count_by_part(model: torch.nn.Module) -> dict[str, int]:
    """Parameters per top-level module of the base model, the output head in the language model.

    A multimodal model holds its language model under ``language_model`` and each tower or
    projector under its own name; a text-only model is all language model.
    """
    names = [name for name, _ in model.named_parameters()]
    multimodal = any(f".{LANGUAGE_MODEL}." in f".{name}" for name in names)
    parts: dict[str, int] = {}
    for name, p in model.named_parameters():
        path = name.split(".")
        if path[0] == "model" and len(path) > 1:
            path = path[1:]
        part = path[0] if multimodal and path[0] != "lm_head" else LANGUAGE_MODEL
        parts[part] = parts.get(part, 0) + p.numel()
    return parts


def build_entries(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Catalog entries: the source fields plus the class and parameter counts transformers gives."""
    entries = []
    for model_info in models:
        model = build(model_info["config"])
        parts = count_by_part(model)
        entry = dict(model_info)
        entry["architecture"] = type(model).__name__
        entry["parameters_transformers"] = count_parameters(model)
        entry["parameters_text"] = parts[LANGUAGE_MODEL]
        entry["parameters_by_part"] = parts
        del model
        print(
            f"{entry['name']:<28} {entry['architecture']:<36} "
            f"{entry['parameters_transformers']:>18,} {entry['parameters_text']:>18,}"
        )
        entries.append(entry)
    return entries


def render(entries: list[dict[str, Any]]) -> str:
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
    typed = [m["name"] for m in models if any(field in m for field in GENERATED)]
    if typed:
        print(f"generated fields written by hand in: {', '.join(typed)}", file=sys.stderr)
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
