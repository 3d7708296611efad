"""A config.json read as its config class reads it: flat attributes, defaults and derived values.

The table's expressions read attributes by their transformers names; sub-configs are dotted
(``text_config.hidden_size``). A config.json rarely lists every attribute: what it leaves out takes
the config class's default, or, for the attributes the class computes from others (``head_dim``
from ``hidden_size // num_attention_heads``, ``layer_types`` from a pattern), the class's rule,
as the table records it. Older names some published configs still use are mapped to today's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from vramgui.core.errors import ConfigError, shown
from vramgui.core.families.expressions import MAX_RANGE, MemberList, compile_expression
from vramgui.core.families.facts import check_core_sizes
from vramgui.core.families.table import Architecture, architecture

# Published config.json files hold integers, but some write them as floats (4096.0).
_MAX_INT = 1 << 62
# A pattern (``block_types``) may be longer than a small test model's layers; any other list the
# table reads has one entry per layer at most.
_SHORT_LIST = 32


def _scalar(value: Any, key: str) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < _MAX_INT:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_INT:
        raise ConfigError(f"'{key}' = {value} is implausibly large")
    return value


def _clean(value: Any, key: str) -> Any:
    """The value with its whole-number floats as ints, nested lists included (walked without
    recursion: a config may nest lists hundreds deep)."""
    if not isinstance(value, list):
        return _scalar(value, key)
    out: list[Any] = []
    pending = [(value, out)]
    while pending:
        source, target = pending.pop()
        for item in source:
            if isinstance(item, list):
                copy: list[Any] = []
                target.append(copy)
                pending.append((item, copy))
            else:
                target.append(_scalar(item, key))
    return out


def flatten(config: Mapping[str, Any], arch: Architecture) -> dict[str, Any]:
    """The config's attributes, those of the sub-configs the architecture has as ``sub.attr``."""
    subs = {k.split(".", 1)[0] for k in (*arch.defaults, *arch.derived) if "." in k}
    out: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            if not isinstance(key, str):
                continue
            name = f"{prefix}{key}"
            if isinstance(value, Mapping) and (
                name in subs or any(s.startswith(name + ".") for s in subs)
            ):
                walk(value, f"{name}.")
            else:
                out[name] = _clean(value, name)

    walk(config, "")
    return out


def _per_layer(flat: dict[str, Any], given: dict[str, Any]) -> None:
    """``per_layer_config`` ({"05": {"head_dim": 512}, ...}) as per-layer lists of the attribute."""
    for key in [k for k in given if k == "per_layer_config" or k.endswith(".per_layer_config")]:
        prefix = key[: -len("per_layer_config")]
        overrides = given[key]
        if not isinstance(overrides, Mapping):
            continue
        layers = flat.get(f"{prefix}num_hidden_layers")
        if not isinstance(layers, int) or isinstance(layers, bool):
            continue
        for index, values in overrides.items():
            if not isinstance(values, Mapping):
                raise ConfigError(f"'{key}' must map layer numbers to attribute values")
            try:
                i = int(index)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"'{key}' names a layer {shown(index)} that is not a number"
                ) from None
            if not 0 <= i < layers:
                raise ConfigError(f"'{key}' names layer {i}, but the model has {layers}")
            for attr, value in values.items():
                name = f"{prefix}{attr}"
                current = flat.get(name)
                if not isinstance(current, list):
                    current = flat[name] = [current] * layers
                current[i] = _clean(value, name)


def _common(value: Any) -> Any:
    """The value most layers have, for a per-layer list (the first of the most frequent); the
    value itself otherwise."""
    if isinstance(value, list) and value:
        try:
            return Counter(value).most_common(1)[0][0]
        except TypeError:  # unhashable entries: not a list of sizes
            return value[0]
    return value


def _text_default(attr: str) -> Any:
    """Gemma 4's text config class default for ``attr`` (as the gemma4_text entry holds it)."""
    text = architecture("gemma4_text")
    return None if text is None else text.defaults.get(attr)


def _global_attention_sizes(flat: dict[str, Any], given: Mapping[str, Any], prefix: str) -> None:
    """Gemma 4: full-attention layers take ``global_head_dim`` (and, where ``attention_k_eq_v``,
    ``num_global_key_value_heads``), which the config class writes as per-layer overrides."""
    if given.get(f"{prefix}per_layer_config") is not None:
        return
    kinds = flat.get(f"{prefix}layer_types")
    if not isinstance(kinds, list):
        return
    for attr, legacy in (
        ("head_dim", "global_head_dim"),
        ("num_key_value_heads", "num_global_key_value_heads"),
    ):
        base = _common(given.get(f"{prefix}{attr}", flat.get(f"{prefix}{attr}")))
        special = given.get(f"{prefix}{legacy}", flat.get(f"{prefix}{legacy}"))
        if special is None and prefix:
            # A multimodal entry keeps only the text config's attributes its tensors read; the
            # text config class's own default stands for the rest.
            special = _text_default(legacy)
        if attr == "num_key_value_heads" and not flat.get(f"{prefix}attention_k_eq_v", True):
            special = None
        if not isinstance(flat.get(f"{prefix}{attr}"), list):
            if special is not None and special != base:
                raise ConfigError(
                    f"'{legacy}' gives full-attention layers their own {attr}, which this "
                    "version's table of the architecture does not describe"
                )
            continue
        if special is None:
            continue  # the per-layer list the class derives stands
        flat[f"{prefix}{attr}"] = [special if kind == "full_attention" else base for kind in kinds]


_BLOCK_KINDS = {"mamba": "linear_attention", "attention": "full_attention"}


def _layer_pattern(given: dict[str, Any]) -> None:
    """Nemotron-H: ``hybrid_override_pattern`` ("M-M*-E") names each block's kind."""
    for key in ("layers_block_type", "mtp_layers_block_type"):
        # Configs written before transformers 5 name the kinds "mamba" and "attention".
        kinds = given.get(key)
        if isinstance(kinds, list):
            given[key] = [_BLOCK_KINDS.get(k, k) if isinstance(k, str) else k for k in kinds]
    kinds = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    for key, target in (
        ("hybrid_override_pattern", "layers_block_type"),
        ("mtp_hybrid_override_pattern", "mtp_layers_block_type"),
    ):
        pattern = given.get(key)
        if not isinstance(pattern, str) or target in given:
            continue
        try:
            given[target] = [kinds[c] for c in pattern]
        except KeyError as exc:
            raise ConfigError(f"'{key}' holds an unknown block kind {exc}") from None


def _attention_indices(given: dict[str, Any], prefix: str = "") -> None:
    """LFM2's ``full_attn_idxs``: the attention blocks, every other one a convolution."""
    indices = given.get(f"{prefix}full_attn_idxs")
    layers = given.get(f"{prefix}num_hidden_layers")
    if given.get(f"{prefix}layer_types") is not None or not isinstance(indices, list):
        return
    if not isinstance(layers, int) or isinstance(layers, bool):
        return
    attention = {i for i in indices if isinstance(i, int)}
    given[f"{prefix}layer_types"] = [
        "full_attention" if i in attention else "conv" for i in range(min(layers, MAX_RANGE))
    ]


def _text_attention_indices(given: dict[str, Any]) -> None:
    """LFM2-VL: its language model's ``full_attn_idxs``."""
    _attention_indices(given, "text_config.")


def _dory_saved(given: dict[str, Any]) -> None:
    """Dory: a saved config lists each block as an attention and an "mlp" entry, with every
    layer count doubled; the config class halves them back when "mlp" is among the kinds."""
    kinds = given.get("layer_types")
    if not isinstance(kinds, list) or "mlp" not in kinds:
        return
    given["layer_types"] = kinds[::2]
    for key in ("num_hidden_layers", "n_input_layers", "n_output_layers", "n_recurrent_layers"):
        value = given.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            given[key] = value // 2


def _last_layer_full(given: dict[str, Any]) -> None:
    """Gemma 4: the config class makes the last block full attention whatever ``layer_types``
    says (its K/V heads and head size are the full-attention ones)."""
    for key in ("layer_types", "text_config.layer_types"):
        kinds = given.get(key)
        if isinstance(kinds, list) and kinds and kinds[-1] != "full_attention":
            given[key] = [*kinds[:-1], "full_attention"]


# DeepSeek V4's published configs name each block's attention by its compression ratio.
_V4_RATIO_KINDS = {
    0: "sliding_attention",
    4: "compressed_sparse_attention",
    128: "heavily_compressed_attention",
}


def _v4_legacy(given: dict[str, Any]) -> None:
    """DeepSeek V4's config class reads ``compress_ratios`` (one per block) as ``layer_types``
    and ``num_hash_layers`` (the first blocks' hash-routed MoE) as ``mlp_layer_types``."""
    layers = given.get("num_hidden_layers")
    ratios = given.get("compress_ratios")
    if given.get("layer_types") is None and isinstance(ratios, list):
        try:
            kinds = [_V4_RATIO_KINDS[r] for r in ratios]
        except (KeyError, TypeError):
            raise ConfigError(
                f"'compress_ratios' holds a ratio other than {sorted(_V4_RATIO_KINDS)}"
            ) from None
        given["layer_types"] = kinds[:layers] if isinstance(layers, int) else kinds
    hashed = given.get("num_hash_layers")
    if (
        given.get("mlp_layer_types") is None
        and isinstance(hashed, int)
        and isinstance(layers, int)
        and not isinstance(hashed, bool)
        and 0 <= layers <= MAX_RANGE
    ):
        given["mlp_layer_types"] = ["hash_moe"] * min(layers, hashed) + ["moe"] * max(
            0, layers - hashed
        )


# Older or alternative names that published configs use, by the model type that reads them, and
# how the config class turns them into today's attributes.
_LEGACY = {
    "gemma4": _global_attention_sizes,
    "gemma4_text": _global_attention_sizes,
    "gemma4_unified": _global_attention_sizes,
    "gemma4_unified_text": _global_attention_sizes,
}
# How a type's published configs name what its class reads (a block pattern, attention indices).
_GIVEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "nemotron_h": _layer_pattern,
    "lfm2": _attention_indices,
    "lfm2_moe": _attention_indices,
    "lfm2_vl": _text_attention_indices,
    "deepseek_v4": _v4_legacy,
    "dory": _dory_saved,
    "gemma4": _last_layer_full,
    "gemma4_text": _last_layer_full,
    "gemma4_unified": _last_layer_full,
    "gemma4_unified_text": _last_layer_full,
}
_RENAMED = {
    "nemotron_h": {
        "mamba_n_groups": "n_groups",
        "mamba_d_conv": "conv_kernel",
        "mamba_expand": "expand",
        "mamba_conv_bias": "use_conv_bias",
        "mamba_chunk_size": "chunk_size",
    },
    "lfm2": {"block_ff_dim": "intermediate_size", "tie_embedding": "tie_word_embeddings"},
    "lfm2_moe": {"tie_embedding": "tie_word_embeddings"},
    "lfm2_vl": {"block_ff_dim": "intermediate_size", "tie_embedding": "tie_word_embeddings"},
}


def _check_lengths(arch: Architecture, given: Mapping[str, Any]) -> None:
    """Refuse a layer count past ``MAX_RANGE`` and a list the table reads that is longer than
    the layer count, before anything is built from them: per-layer work over such a list is
    quadratic, and ``[x] * num_hidden_layers`` of a hostile count is gigabytes.

    Raises:
        ConfigError: naming the count or the list.
    """
    layers: dict[str, int] = {}
    for key, value in {**arch.defaults, **given}.items():
        prefix, _, attr = key.rpartition(".")
        if attr != "num_hidden_layers" or not isinstance(value, int) or isinstance(value, bool):
            continue
        if value > MAX_RANGE:
            raise ConfigError(
                f"'{key}' = {value:,} is implausibly large (at most {MAX_RANGE:,} layers)"
            )
        layers[prefix] = value
    read = arch.names_read()
    for key, value in given.items():
        if not isinstance(value, list):
            continue
        if key not in read and not isinstance(arch.defaults.get(key), list):
            continue
        prefix = key.rpartition(".")[0]
        count = layers.get(prefix, layers.get(""))
        limit = MAX_RANGE if count is None else max(count, _SHORT_LIST)
        if len(value) > limit:
            what = f"the model's {count:,} layers" if count is not None else f"{limit:,}"
            raise ConfigError(f"'{key}' lists {len(value):,} entries, more than {what}")


def _unlearned_sizes(arch: Architecture, given: Mapping[str, Any]) -> list[str]:
    """Sizes the config sets where its class leaves them unset, and the table was learned
    without them (no variation of its class could set them), so their effect on the tensors is
    unknown."""
    read = arch.names_read()
    out = []
    for key, value in given.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if key in arch.unlearned and key not in read:
            out.append(
                f"the config sets '{key}' ({value:,}), which {arch.model_type}'s table entry was "
                "learned without: the tensors it changes may be miscounted"
            )
    return out


def _unread_head_dims(arch: Architecture, given: Mapping[str, Any]) -> list[str]:
    """A ``head_dim`` the config gives, other than the width over the heads, that the entry
    does not read: much modelling code reads it where its config class has no such attribute
    (``getattr(config, "head_dim", None) or hidden_size // num_attention_heads``), so the
    attention weights may be miscounted, unless the learner found the code ignores it."""
    read = arch.names_read()
    out = []
    for key, value in given.items():
        prefix, _, leaf = key.rpartition(".")
        if leaf != "head_dim" or key in read or key in arch.ignored:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        scope = f"{prefix}." if prefix else ""
        width = given.get(f"{scope}hidden_size", arch.defaults.get(f"{scope}hidden_size"))
        heads = given.get(
            f"{scope}num_attention_heads", arch.defaults.get(f"{scope}num_attention_heads")
        )
        if isinstance(width, int) and isinstance(heads, int) and heads and value == width // heads:
            continue
        out.append(
            f"the config sets '{key}' ({value:,}), which {arch.model_type}'s table entry does not "
            "read: where the model's code reads it, the attention weights are miscounted"
        )
    return out


_TOWERS = ("vision_config.", "audio_config.")


def _untabled_sub_configs(arch: Architecture, config: Mapping[str, Any]) -> list[str]:
    """Sub-configs the config gives (an audio tower's ``audio_config``) where the type's default
    has none and the entry describes no tensor of theirs: those tensors are not counted. (An
    entry with no tower at all is the language model read alone, which the families module says
    of the whole checkpoint.)"""
    read = arch.names_read()
    if not any(n.startswith(_TOWERS) for n in read):
        return []
    out = []
    for key, value in config.items():
        if not isinstance(value, Mapping) or not value or key not in arch.defaults:
            continue
        if arch.defaults[key] is not None or any(n.startswith(f"{key}.") for n in read):
            continue
        out.append(
            f"the config gives '{key}', whose tensors {arch.model_type}'s table entry does not "
            "describe: they are left out of the count"
        )
    return out


def resolve(arch: Architecture, config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Every attribute the architecture's expressions read, as its config class would hold them,
    and what is uncertain: the guesses made where the config left a per-layer list out, and the
    sizes it sets that the table was learned without.

    Raises:
        ConfigError: a core size given or derived is not a whole number of at least 1, or a
            derived attribute cannot be computed from the config's values.
    """
    given = flatten(config, arch)
    check_core_sizes(given)  # before anything is derived from them: the message names them
    unlearned = [
        *_unlearned_sizes(arch, given),
        *_unread_head_dims(arch, given),
        *_untabled_sub_configs(arch, config),
    ]
    for alias, name in arch.aliases.items():
        if alias in given:
            given.setdefault(name, given[alias])
    for old, new in _RENAMED.get(arch.model_type, {}).items():
        for key in [k for k in given if k == old or k.endswith(f".{old}")]:
            given.setdefault(key[: -len(old)] + new, given[key])
    read_given = _GIVEN.get(arch.model_type)
    if read_given is not None:
        read_given(given)
    _check_lengths(arch, given)
    flat: dict[str, Any] = dict(arch.defaults)
    # A sub-config the config gives takes its own class's defaults where it is silent; where it
    # gives none, the outer class's defaults stand, and no rule of that sub-config applies.
    absent = {sub for sub in arch.sub_defaults if not isinstance(config.get(sub), Mapping)}
    for sub, values in arch.sub_defaults.items():
        if sub not in absent:
            flat.update({f"{sub}.{k}": v for k, v in values.items()})
    for key, value in given.items():
        if value is None and key in arch.derived:
            continue
        flat[key] = value
    for key, text in arch.derived.items():
        if key.partition(".")[0] in absent and "." in key:
            continue
        if given.get(key) is None:
            try:
                flat[key] = compile_expression(text)(flat, ())
            except KeyError as exc:
                raise ConfigError(f"the config has no '{exc.args[0]}', needed for {key}") from None
            except (TypeError, ValueError, ZeroDivisionError, IndexError, OverflowError):
                raise ConfigError(f"the config's values do not give '{key}' ({text})") from None
    # A per-layer list the config leaves out, with no rule to derive it, is the default's
    # pattern stretched to the config's layer count: a guess, said as one.
    guesses: list[str] = []
    for key, default in arch.defaults.items():
        if not isinstance(default, list):
            continue
        prefix = key.rpartition(".")[0]
        layers = flat.get(f"{prefix}.num_hidden_layers" if prefix else "num_hidden_layers")
        value = flat.get(key)
        if isinstance(layers, int) and layers > MAX_RANGE:
            raise ConfigError(f"'{key}' follows a layer count of {layers:,}, implausibly large")
        if isinstance(value, int) and not isinstance(value, bool):
            # A per-layer attribute given once, for every layer.
            flat[key] = [value] * (layers if isinstance(layers, int) else len(default))
            continue
        if key in given or key in arch.derived:
            continue
        default_layers = arch.defaults.get(
            f"{prefix}.num_hidden_layers" if prefix else "num_hidden_layers"
        )
        if len(default) != default_layers:
            continue  # not one per block (a pair of limits, the MTP blocks): the default stands
        if isinstance(layers, int) and default and len(default) != layers:
            flat[key] = [default[i % len(default)] for i in range(layers)]
            guesses.append(
                f"the config has no '{key}'; its per-layer pattern was taken from "
                f"{arch.model_type}'s default"
            )
    for key in sorted(arch.underived):
        default = arch.defaults.get(key)
        if key in given or isinstance(default, list):
            continue  # given, or a per-layer list (guessed above, and said so)
        guesses.append(
            f"the config has no '{key}', which {arch.model_type}'s config class derives from "
            f"other sizes by a rule not known here; its default, {default!r}, was used"
        )
    _per_layer(flat, given)
    normalize = _LEGACY.get(arch.model_type)
    if normalize is not None:
        prefixes = {k.rpartition(".")[0] + "." for k in flat if "." in k} | {""}
        for prefix in prefixes:
            normalize(flat, given, prefix)
    check_core_sizes(flat)
    return {k: MemberList(v) if type(v) is list else v for k, v in flat.items()}, [
        *guesses,
        *unlearned,
    ]
