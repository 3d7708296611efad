"""Typed, validated reading of a classic family's config.json, and the pieces every hand-written
builder shares (the tensor list, the core sizes, head checks, layer kinds)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vramgui.core.errors import ConfigError, shown
from vramgui.core.model import LayerType, Role, Tensor

# Sizes beyond these are typing mistakes, not models (the largest published ones are far below).
MAX_DIM = 1 << 20
MAX_LAYERS = 4096
MAX_VOCAB = 1 << 24
MAX_EXPERTS = 65536

MISSING = object()


class MissingFieldError(ConfigError):
    """The config leaves out a field the family's builder needs (its class has a default)."""


class ConfigReader:
    """Typed, validated access to a config.json dict; every problem becomes one ConfigError."""

    def __init__(self, data: Mapping[builtins.str, Any], family: builtins.str) -> None:
        self.data = data
        self.family = family

    def has(self, *keys: builtins.str) -> bool:
        return any(self.data.get(k) is not None for k in keys)

    def _raw(self, keys: tuple[builtins.str, ...], default: Any) -> tuple[builtins.str, Any]:
        for key in keys:
            if key in self.data and self.data[key] is not None:
                return key, self.data[key]
        if default is MISSING:
            raise MissingFieldError(f"the {self.family} config has no '{keys[0]}'")
        return keys[0], default

    def int(
        self,
        *keys: builtins.str,
        default: Any = MISSING,
        minimum: builtins.int = 1,
        maximum: builtins.int = MAX_DIM,
    ) -> builtins.int:
        key, value = self._raw(keys, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"'{key}' must be a whole number, not {shown(value)}")
        if value < minimum:
            raise ConfigError(f"'{key}' must be at least {minimum}, not {value}")
        if value > maximum:
            raise ConfigError(f"'{key}' = {value} is implausibly large (at most {maximum})")
        return value

    def opt_int(
        self,
        key: builtins.str,
        default: builtins.int | None = None,
        minimum: builtins.int = 1,
        maximum: builtins.int = MAX_DIM,
    ) -> builtins.int | None:
        """An optional size: the default when the key is absent, None when it is null."""
        if key not in self.data:
            return default
        if self.data[key] is None:
            return None
        return self.int(key, minimum=minimum, maximum=maximum)

    def float(self, *keys: builtins.str, default: float = 0.0) -> float:
        key, value = self._raw(keys, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"'{key}' must be a number, not {shown(value)}")
        return float(value)

    def bool(self, *keys: builtins.str, default: bool = False) -> bool:
        key, value = self._raw(keys, default)
        if not isinstance(value, bool):
            raise ConfigError(f"'{key}' must be true or false, not {shown(value)}")
        return value

    def str(self, *keys: builtins.str, default: builtins.str = "") -> builtins.str:
        key, value = self._raw(keys, default)
        if not isinstance(value, str):
            raise ConfigError(f"'{key}' must be a string, not {shown(value)}")
        return value

    def int_list(self, key: builtins.str, layers: builtins.int) -> tuple[builtins.int, ...]:
        """A list of layer numbers, at most one per layer."""
        value = self.data.get(key)
        if value is None:
            return ()
        if isinstance(value, list) and len(value) > layers:
            raise ConfigError(
                f"'{key}' lists {len(value):,} entries, more than the model's {layers} layers"
            )
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"'{key}' must be a list of whole numbers, not {shown(value)}")
        return tuple(value)

    def str_list(self, key: builtins.str) -> tuple[builtins.str, ...] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"'{key}' must be a list of strings, not {shown(value)}")
        return tuple(value)

    def torch_dtype(self) -> builtins.str | None:
        for key in ("torch_dtype", "dtype"):
            value = self.data.get(key)
            if isinstance(value, str):
                return value.removeprefix("torch.")
        return None


@dataclass
class InventoryBuilder:
    """Collects tensors in the order a model class creates them."""

    tensors: list[Tensor] = field(default_factory=list)

    def add(
        self,
        name: str,
        shape: tuple[int, ...],
        role: Role,
        layer: int | None = None,
        module: str = "",
        *,
        is_bias: bool = False,
        dtype: str | None = None,
    ) -> None:
        self.tensors.append(Tensor(name, shape, role, layer, module, dtype, is_bias))

    def linear(
        self,
        prefix: str,
        module: str,
        out_features: int,
        in_features: int,
        role: Role,
        *,
        layer: int | None = None,
        bias: bool = False,
        dtype: str | None = None,
    ) -> None:
        """An nn.Linear: weight (out, in) and optionally bias (out,)."""
        name = f"{prefix}.{module}" if prefix else module
        self.add(f"{name}.weight", (out_features, in_features), role, layer, module, dtype=dtype)
        if bias:
            self.add(f"{name}.bias", (out_features,), role, layer, module, is_bias=True)

    def conv1d(
        self,
        prefix: str,
        module: str,
        in_features: int,
        out_features: int,
        role: Role,
        *,
        layer: int,
    ) -> None:
        """GPT-2's Conv1D: weight stored (in, out), always with a bias."""
        name = f"{prefix}.{module}"
        self.add(f"{name}.weight", (in_features, out_features), role, layer, module)
        self.add(f"{name}.bias", (out_features,), role, layer, module, is_bias=True)

    def norm(
        self, prefix: str, module: str, width: int, layer: int | None = None, *, bias: bool = False
    ) -> None:
        name = f"{prefix}.{module}" if prefix else module
        self.add(f"{name}.weight", (width,), Role.NORM, layer, module)
        if bias:
            self.add(f"{name}.bias", (width,), Role.NORM, layer, module, is_bias=True)

    def embedding(self, name: str, rows: int, width: int, role: Role = Role.EMBEDDING) -> None:
        module = name.rsplit(".", 1)[-1]
        self.add(f"{name}.weight", (rows, width), role, None, module)


@dataclass(frozen=True)
class CoreSizes:
    """The sizes every family has."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int


def check_heads(
    cfg: ConfigReader, hidden: int, heads: int, kv_heads: int, *, derived: bool
) -> None:
    if heads > hidden:
        raise ConfigError(f"{heads} attention heads cannot split a hidden size of {hidden}")
    if derived and hidden % heads:
        raise ConfigError(
            f"hidden size {hidden} is not divisible by the {heads} attention heads "
            f"of this {cfg.family} config"
        )
    if kv_heads > heads or heads % kv_heads:
        raise ConfigError(
            f"{heads} attention heads cannot be shared among {kv_heads} key/value heads"
        )


def layer_types_from(cfg: ConfigReader, layers: int) -> tuple[LayerType, ...] | None:
    """Explicit ``layer_types`` from the config, validated, or None when absent."""
    names = cfg.str_list("layer_types")
    if names is None:
        return None
    if len(names) != layers:
        raise ConfigError(f"'layer_types' lists {len(names)} layers but the model has {layers}")
    known = {t.value: t for t in LayerType}
    unknown = sorted({n for n in names if n not in known})
    if unknown:
        raise ConfigError(f"'layer_types' holds unknown attention kinds: {', '.join(unknown)}")
    return tuple(known[n] for n in names)
