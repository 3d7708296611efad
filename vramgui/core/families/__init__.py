"""config.json -> ModelSpec, for every architecture transformers builds.

Three ways, most detailed first:

- ``classic``: hand-written builders of the families whose KV cache and activations are modelled
  op by op (Llama-style decoders, GPT-2, OPT, GPT-NeoX, Falcon, BLOOM, BERT);
- ``table``: every other model type transformers ships, described as data in
  ``architectures.json`` (written from transformers by tools/build_architectures.py): its tensors
  are exact, its facts read from those tensors and the config (``facts``);
- a config of a type neither knows is read as a Llama-style decoder of the same sizes, marked
  approximate.

Every spec says which it is (``ModelSpec.inventory``) and what in it is uncertain (``warnings``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vramgui.core import rope
from vramgui.core.errors import ConfigError
from vramgui.core.families import configs, table, validation
from vramgui.core.families.classic import CLASSIC_TYPES, classic_spec, llama_style
from vramgui.core.families.facts import facts_for
from vramgui.core.families.reader import MissingFieldError
from vramgui.core.model import Inventory, ModelSpec, Role

# Model types GGUF metadata is mapped to (vramgui.sources): the classic families.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(CLASSIC_TYPES))


# Sizes a config.json describing a real model always states; where one is left out, transformers
# builds its class default, which is rarely the model the user means.
_CORE_SIZES = {
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "dim", "emb_dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}


def _defaulted_sizes(config: dict[str, Any], defaults: dict[str, Any] | Any) -> list[str]:
    """A warning for each core size the config leaves to the class default."""
    text = config.get("text_config")
    scopes = [config, text] if isinstance(text, dict) else [config]
    out = []
    for aliases in _CORE_SIZES.values():
        if any(any(a in scope for a in aliases) for scope in scopes):
            continue
        # The family's own name for the size (GPT-2's n_embd), as its config class defaults it.
        named = [
            (a, defaults[k]) for a in aliases for k in (a, f"text_config.{a}") if k in defaults
        ]
        if named and isinstance(named[0][1], int):
            alias, default = named[0]
            out.append(
                f"the config gives no '{alias}': transformers' default, {default:,}, is used"
            )
    return out


def spec_from_config(config: dict[str, Any], name: str = "") -> ModelSpec:
    """Build the exact ModelSpec a transformers model of this config.json would have.

    The RoPE scaling the config carries (``rope_scaling`` / ``rope_parameters``) and its rotary
    base are read into its facts, whatever the family.

    Args:
        config: the parsed config.json.
        name: what to call the model; defaults to the config's ``_name_or_path`` or model_type.

    Returns:
        The spec: every parameter tensor (tied once) and the architecture facts.

    Raises:
        ConfigError: the config is not a dict, lacks a needed field, has a wrongly typed or
            impossible value, or is of an unknown type without the common fields.
    """
    spec = _spec_from_config(config, name)
    own, theta = rope.config_scaling(config), rope.config_theta(config)
    if own is None and theta is None:
        return spec
    return replace(spec, facts=replace(spec.facts, rope_scaling=own, rope_theta=theta))


def _spec_from_config(config: dict[str, Any], name: str) -> ModelSpec:
    if not isinstance(config, dict):
        raise ConfigError(f"a model config must be a JSON object, not {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"'model_type' must be a string, not {model_type!r}")
    model_type = model_type or ""
    label = name or config.get("_name_or_path") or model_type
    label = label if isinstance(label, str) and label else "model"
    named = config.get("architectures")
    class_name = named[0] if isinstance(named, list) and named and isinstance(named[0], str) else ""
    arch = table.architecture(model_type, class_name)
    if arch is None and model_type not in CLASSIC_TYPES:
        # A type of its own whose config names a known class (Kimi K2: "kimi_k2",
        # DeepseekV3ForCausalLM): the class builds the tensors, as transformers' auto_map does.
        model_type = table.type_of_class(class_name) or model_type
        arch = table.architecture(model_type, class_name)
    if model_type in CLASSIC_TYPES:
        spec = _classic(config, model_type, label, arch)
    elif arch is not None:
        spec = _table_spec(arch, config, label)
    else:
        return replace(llama_style(config, model_type), name=label)
    extra = [
        w for w in (_uncounted_towers(config, spec), validation.measured_miss(model_type)) if w
    ]
    if not extra:
        return spec
    return replace(spec, warnings=(*spec.warnings, *extra), inventory=Inventory.APPROXIMATE)


def _uncounted_towers(config: dict[str, Any], spec: ModelSpec) -> str | None:
    """A multimodal checkpoint read through its language model's class: its towers are missing."""
    towers = [k for k in ("vision_config", "audio_config") if isinstance(config.get(k), dict)]
    named = config.get("architectures")
    if not towers or any(t.role is Role.ENCODER for t in spec.tensors):
        return None
    if isinstance(named, list) and spec.architecture in named:
        return None
    return (
        f"the checkpoint's {' and '.join(towers)} towers are not counted: the weights are "
        f"{spec.architecture}'s, the language model alone"
    )


def _classic(
    config: dict[str, Any], model_type: str, label: str, arch: table.Architecture | None
) -> ModelSpec:
    """A classic family's spec; where its builder cannot read the config, the table's."""
    try:
        spec = classic_spec(config, model_type, label)
    except MissingFieldError as exc:
        # A left-out field takes its class default, as transformers does; a present but wrong
        # value stays the family's own error.
        if arch is None:
            raise
        return _classic_fallback(config, model_type, label, arch, exc)
    return spec if arch is None else _as_its_class(spec, config, arch)


def _as_its_class(spec: ModelSpec, config: dict[str, Any], arch: table.Architecture) -> ModelSpec:
    """A classic family's spec with what its class's table entry knows: whether transformers
    runs it with SDPA, and which core sizes the config left to the class default."""
    defaulted = _defaulted_sizes(config, arch.defaults)
    return replace(
        spec,
        facts=replace(spec.facts, sdpa=arch.sdpa),
        warnings=(*defaulted, *spec.warnings),
        inventory=Inventory.APPROXIMATE if defaulted else spec.inventory,
    )


def _classic_fallback(
    config: dict[str, Any],
    model_type: str,
    label: str,
    arch: table.Architecture,
    exc: MissingFieldError,
) -> ModelSpec:
    # What the config leaves out takes the config class's default, as transformers does. Only
    # plain values: per-layer lists follow the config's own layer count, and what the class
    # derives (head_dim from hidden_size) the family's builder derives itself.
    defaults = {
        k: v
        for k, v in arch.defaults.items()
        if "." not in k and k not in arch.derived and not isinstance(v, list | dict)
    }
    try:
        spec = classic_spec({**defaults, **config}, model_type, label)
    except ConfigError:
        pass
    else:
        return _as_its_class(spec, config, arch)
    # A config the detailed model cannot read (a setting it does not know) still has exact
    # tensors from the table; its facts are then the table's, said as such.
    try:
        spec = _table_spec(arch, config, label)
    except ConfigError:
        raise exc from None  # the family's own reason is the clearer one
    return replace(
        spec,
        warnings=(f"read without {model_type}'s detailed model: {exc}", *spec.warnings),
        inventory=Inventory.APPROXIMATE,
    )


def _table_spec(arch: table.Architecture, config: dict[str, Any], label: str) -> ModelSpec:
    flat, guesses = configs.resolve(arch, config)
    tensors = table.tensors(arch, flat)
    layers = 1 + max((t.layer for t in tensors if t.layer is not None), default=-1)
    if not layers:
        raise ConfigError(f"the {arch.model_type} config makes no decoder blocks")
    found = facts_for(arch.model_type, flat, tensors, layers)
    facts = replace(found.facts, sdpa=arch.sdpa)
    warnings = [*_defaulted_sizes(config, arch.defaults), *guesses, *found.warnings]
    text_type = flat.get("text_config.model_type")
    if isinstance(text_type, str) and text_type in CLASSIC_TYPES:
        # A multimodal checkpoint around a classic family's language model: that family's
        # facts (modelled in detail), the whole checkpoint's tensors.
        text = {
            k.removeprefix("text_config."): v
            for k, v in flat.items()
            if k.startswith("text_config.")
        }
        text.setdefault("torch_dtype", config.get("torch_dtype", config.get("dtype")))
        facts = classic_spec(text, text_type, label).facts
        warnings = [*_defaulted_sizes(config, arch.defaults), *guesses]
    towers = sum(t.numel for t in tensors if t.role is Role.ENCODER)
    if towers:
        warnings.append(
            f"{towers / 1e6:,.0f}M parameters of vision / audio towers and projectors are "
            "counted in the weights wherever the engine loads them with the language model "
            "(llama.cpp keeps them in an mmproj file); their activations per image or clip are "
            "not"
        )
    return ModelSpec(
        name=label,
        facts=facts,
        tensors=tuple(tensors),
        architecture=arch.architecture,
        warnings=tuple(warnings),
        source="config.json",
        inventory=Inventory.APPROXIMATE if warnings else Inventory.EXACT,
    )
