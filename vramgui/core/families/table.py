"""The architecture table: every transformers model type described as data.

``architectures.json`` is written by tools/build_architectures.py from transformers itself (see
its docstring for how each expression was found and checked). For each model type it holds the
class transformers builds, the config class's defaults, how the config class fills attributes a
config.json leaves out, the length of each block list, and every parameter tensor with its size
expressions and the condition under which a block holds it. This module reads the table (once,
lazily: it is package data, not user input) and turns a config.json into the tensor list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from vramgui.core import naming
from vramgui.core.errors import ConfigError, shown
from vramgui.core.families.expressions import compile_expression, names_in
from vramgui.core.model import Role, Tensor

TABLE_FORMAT = "vramgui.architectures"
TABLE_FORMAT_VERSION = 1
# Beyond these a config describes no real model (the largest published ones are far below):
# a guard against a typing mistake making millions of tensors.
MAX_BLOCKS = 65_536
MAX_TENSORS = 2_000_000
MAX_DIM = 1 << 24


# Architecture.names_read, once per entry (the table never changes while running).
_NAMES_READ: dict[tuple[str, str], frozenset[str]] = {}


@dataclass(frozen=True, slots=True)
class TensorRule:
    """One parameter tensor (or one per block) of an architecture."""

    name: str  # with "{}" for each block index
    shape: tuple[str, ...]
    when: str | None
    dtype: str | None


@dataclass(frozen=True, slots=True)
class Architecture:
    """What the table says of one model type."""

    model_type: str
    architecture: str
    defaults: Mapping[str, Any]
    derived: Mapping[str, str]
    containers: Mapping[str, str]
    tensors: tuple[TensorRule, ...]
    sdpa: bool = True
    # Names the config class maps to its attributes (``num_experts`` -> ``num_local_experts``).
    aliases: Mapping[str, str] = field(default_factory=dict)
    # Attributes the config class derives by a rule the table does not hold: a config that
    # leaves one out is read at the default's value, and said to be uncertain.
    underived: frozenset[str] = frozenset()
    # Sub-configs a config.json may give (``text_config``) whose omitted attributes then take
    # their own class's defaults, not the outer class's: those defaults, where they differ.
    sub_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Sizes the default leaves unset that no variation could set: what they change is unknown.
    unlearned: frozenset[str] = frozenset()
    # Sizes the modelling code may read that were given and found to change no tensor.
    ignored: frozenset[str] = frozenset()

    def names_read(self) -> frozenset[str]:
        """Every config attribute an expression of this entry reads."""
        key = (self.model_type, self.architecture)
        if key in _NAMES_READ:
            return _NAMES_READ[key]
        texts = [*self.derived.values(), *self.containers.values()]
        for rule in self.tensors:
            texts += [*rule.shape, rule.when or "0"]
        _NAMES_READ[key] = frozenset().union(*(names_in(t) for t in texts))
        return _NAMES_READ[key]

    @classmethod
    def from_entry(cls, model_type: str, entry: Mapping[str, Any]) -> Architecture:
        """One model type's entry of the table."""
        return cls(
            model_type=model_type,
            architecture=entry["architecture"],
            defaults=entry["defaults"],
            derived=entry.get("derived", {}),
            containers=entry["containers"],
            tensors=tuple(
                TensorRule(t["name"], tuple(t["shape"]), t.get("when"), t.get("dtype"))
                for t in entry["tensors"]
            ),
            sdpa=entry.get("sdpa", True),
            aliases=entry.get("aliases", {}),
            underived=frozenset(entry.get("underived", ())),
            sub_defaults=entry.get("sub_defaults", {}),
            unlearned=frozenset(entry.get("unlearned", ())),
            ignored=frozenset(entry.get("ignored", ())),
        )


@cache
def _table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("architectures.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    if data.get("format") != TABLE_FORMAT or data.get("format_version") != TABLE_FORMAT_VERSION:
        raise RuntimeError("architectures.json is not a table this version of vramgui reads")
    return data


def type_of_class(class_name: str) -> str | None:
    """The model type whose entry is this class (``DeepseekV3ForCausalLM`` -> ``deepseek_v3``)."""
    if not class_name:
        return None
    for key, entry in _table()["architectures"].items():
        if entry["architecture"] == class_name:
            return str(key).partition(":")[0]
    return None


def known_types() -> frozenset[str]:
    return frozenset(key.partition(":")[0] for key in _table()["architectures"])


@cache
def architecture(model_type: str, class_name: str = "") -> Architecture | None:
    """The entry of this model type; of the class a checkpoint names where the table has one of
    its own (a multimodal ``...ForConditionalGeneration`` beside the text model's class)."""
    entries = _table()["architectures"]
    entry = entries.get(f"{model_type}:{class_name}") or entries.get(model_type)
    return None if entry is None else Architecture.from_entry(model_type, entry)


def _value(text: str, flat: Mapping[str, Any], idx: tuple[int, ...], what: str) -> Any:
    try:
        return compile_expression(text)(flat, idx)
    except KeyError as exc:
        raise ConfigError(f"the config has no '{exc.args[0]}', needed for {what}") from None
    except IndexError:
        raise ConfigError(
            f"a per-layer list of the config is shorter than its layers ({what}: {text})"
        ) from None
    except (TypeError, ZeroDivisionError, ValueError, OverflowError):
        raise ConfigError(f"the config's values do not give {what} ({text})") from None


def _size(text: str, flat: Mapping[str, Any], idx: tuple[int, ...], what: str) -> int:
    value = _value(text, flat, idx, what)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} is not a whole number ({text} = {shown(value)})")
    if value < 0 or value > MAX_DIM * MAX_DIM:
        raise ConfigError(f"{what} = {value} is not a possible size")
    return value


def tensors(arch: Architecture, flat: Mapping[str, Any]) -> list[Tensor]:
    """Every parameter tensor of ``arch`` built from the resolved config ``flat``.

    Raises:
        ConfigError: an attribute the architecture needs is missing or of the wrong kind, or
            the sizes are impossible.
    """
    lengths: dict[str, Any] = {}
    out: list[Tensor] = []
    blocks = _block_lists(arch)
    for rule in arch.tensors:
        paths = _paths(rule.name)
        in_blocks = bool(paths) and paths[0] in blocks
        for idx in _indices(arch, paths, flat, lengths):
            if rule.when is not None and not _value(rule.when, flat, idx, rule.name):
                continue
            name = rule.name.format(*idx)
            shape = tuple(_size(d, flat, idx, f"a size of {name}") for d in rule.shape)
            if 0 in shape:
                raise ConfigError(_empty(name, rule.shape[shape.index(0)], flat))
            info = naming.classify(name)
            # The block is the index in the decoder's block lists, whatever the list is called
            # (``transformer.attentions.3``); a tower's own blocks are not the decoder's.
            layer = idx[0] if in_blocks and info.role is not Role.ENCODER else None
            out.append(Tensor(name, shape, info.role, layer, info.module, rule.dtype, info.is_bias))
            if len(out) > MAX_TENSORS:
                raise ConfigError(f"the config makes over {MAX_TENSORS:,} tensors")
    return out


def _empty(name: str, text: str, flat: Mapping[str, Any]) -> str:
    """Why a tensor has no elements: the sizes of the config that are 0 (as the classic families
    refuse them: every size at least 1)."""
    zeros = sorted(n for n in names_in(text) if _has_zero(flat.get(n)))
    given = ", ".join(f"'{n}' = 0" for n in zeros) or f"{text} = 0"
    return f"{given} leaves {name} without elements: every size must be at least 1"


def _has_zero(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_zero(v) for v in value)
    return value == 0 and not isinstance(value, bool)


def _block_lists(arch: Architecture) -> frozenset[str]:
    """The block lists of the decoder: the first-level lists as long as the one holding the most
    tensor kinds (several parallel lists per block, as XLM's, count alike)."""
    counts: dict[str, int] = {}
    for rule in arch.tensors:
        paths = _paths(rule.name)
        if paths and naming.classify(rule.name.replace("{}", "0")).role is not Role.ENCODER:
            counts[paths[0]] = counts.get(paths[0], 0) + 1
    if not counts:
        return frozenset()
    main = max(counts, key=lambda p: (counts[p], p))
    length = arch.containers.get(main)
    return frozenset(p for p in counts if arch.containers.get(p) == length)


def _paths(name: str) -> tuple[str, ...]:
    parts = name.split(".{}")
    return tuple(".{}".join(parts[: k + 1]) for k in range(len(parts) - 1))


def _indices(
    arch: Architecture,
    paths: tuple[str, ...],
    flat: Mapping[str, Any],
    lengths: dict[str, Any],
) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for path in paths:
        nxt: list[tuple[int, ...]] = []
        for outer in out:
            key = f"{path}{outer}"
            n = lengths.get(key)
            if n is None:
                text = arch.containers.get(path)
                if text is None:
                    raise RuntimeError(f"architectures.json lacks the length of {path}")
                n = lengths[key] = _size(text, flat, outer, f"the number of {path}")
                if n > MAX_BLOCKS:
                    raise ConfigError(f"{n:,} blocks in {path} is not a possible model")
            if len(nxt) + n > MAX_TENSORS:
                raise ConfigError(f"the config makes over {MAX_TENSORS:,} blocks in {path}")
            nxt.extend((*outer, i) for i in range(n))
        out = nxt
    return out
