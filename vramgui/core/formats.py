"""Checkpoints as they ship: a config's ``quantization_config`` read into how each weight is stored.

A pre-quantized checkpoint says how it was quantized in its config.json (``quantization_config``,
possibly inside a multimodal model's ``text_config``) or, for NVIDIA ModelOpt exports, in
``hf_quant_config.json``. :func:`read_format` turns either into a :class:`StoredFormat`: the
schemes the checkpoint uses (``dtypes.Scheme``, laid out as each library writes them) and, for
every weight of the model, which of them stores it, following the library's own rules for what
it quantizes and what it leaves in 16 bits:

- transformers' MXFP4 (``quant_method: mxfp4``): the routed experts only, as
  ``Mxfp4GptOssExperts`` replaces them; ``modules_to_not_convert`` kept;
- fine-grained FP8 (``fp8``, DeepSeek / Qwen3 / MiniMax / Kimi): every linear layer but the
  head, with a scale per ``weight_block_size`` block (or one per tensor), ``scale_fmt: ue8m0``
  scales in one byte, DeepSeek-V4's ``expert_dtype: fp4`` experts in FP4;
- fbgemm FP8: a scale per output channel and an input bound per layer;
- compressed-tensors: each config group's weights (int or float, 4 or 8 bits, per tensor,
  channel, group or block, symmetric or not, activation ordering), its ``targets`` (``Linear``,
  ``re:`` regexes, module names) and the ``ignore`` list, in the group's storage format;
- NVIDIA ModelOpt: FP8 per tensor, per channel or per block, NVFP4 (W4A4 or W4A16), and mixed
  precision layer by layer (``quantized_layers``); ``exclude_modules`` / ``ignore`` wildcards;
- GPTQ and AWQ: every linear layer of the decoder blocks (bits, group size, ``desc_act``);
- bitsandbytes pre-quantized 4-bit (NF4 / FP4, double quantization) and 8-bit.

A method vramgui does not model is kept as a name (``StoredFormat.known`` False): its weights are
then counted in the checkpoint's dtype and the spec says so.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from vramgui.core import dtypes
from vramgui.core.dtypes import Scheme
from vramgui.core.errors import ConfigError, shown
from vramgui.core.model import Role, Tensor

# Roles whose 2-D weights are linear layers a quantizer may replace; routers stay in 16 bits
# everywhere (transformers keeps DeepSeek's gate a parameter, and every published recipe skips
# the others), so do embeddings and norms.
_LINEAR_ROLES = frozenset(
    {
        Role.ATTENTION,
        Role.MLP,
        Role.EXPERT,
        Role.SHARED_EXPERT,
        Role.MIXER,
        Role.HEAD,
        Role.ENCODER,
        Role.OTHER,
    }
)
# Module names that are not quantized linear layers even where their role says "other" or
# "encoder": embeddings, convolutions, norms, attention sinks, routers (a MoE block's ``gate``,
# Qwen-MoE's ``shared_expert_gate``); an MTP module's eh_proj is a plain nn.Linear in vLLM, stored
# in 16 bits. Other ``*_gate`` layers are linear (MiniMax's output_gate, Gemma 3n's
# per_layer_input_gate).
_NOT_LINEAR = re.compile(r"embed|conv|norm|sinks|router|^gate$|shared_expert_gate$|eh_proj")
# Leading containers a checkpoint name may or may not carry: "model.language_model.layers.0" and
# "language_model.model.layers.0" both name the module "layers.0".
_CONTAINERS = ("model.", "language_model.", "text_model.", "backbone.", "transformer.")
# transformers' should_convert_module: a pattern ends at a module boundary.
_BOUNDARY = r"(?:(?<=\.)|(?=\.|$))"
# The model types whose checkpoints store the experts' gate and up projections fused, as their
# transformers class holds them; everywhere else each expert's gate_proj and up_proj are stored
# apart (and quantized apart, with their own scales).
FUSED_EXPERT_CHECKPOINTS = frozenset({"gpt_oss"})

_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
_DTYPE_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


@dataclass(frozen=True, slots=True)
class FormatRule:
    """One scheme of a checkpoint and the weights it stores.

    Attributes:
        scheme: how the weights it covers are stored.
        targets: what it covers, in its library's terms: () for every linear layer the method
            quantizes, else compressed-tensors targets (``Linear``, ``re:<regex>``, module
            names) or ModelOpt's layer names.
        experts_only: it covers the routed experts only.
    """

    scheme: Scheme
    targets: tuple[str, ...] = ()
    experts_only: bool = False


@dataclass(frozen=True, slots=True)
class StoredFormat:
    """How a pre-quantized checkpoint stores its weights.

    Attributes:
        method: the config's ``quant_method`` ("mxfp4", "fp8", "fbgemm_fp8",
            "compressed-tensors", "modelopt", "gptq", "awq", "bitsandbytes"...).
        rules: the schemes, the first that covers a weight stores it.
        ignore: modules the checkpoint keeps in 16 bits, in the library's own notation.
        matching: whose rules match names: "hf-quantizer" (transformers' quantizers),
            "compressed-tensors" or "modelopt".
        decoder_only: the method quantizes the decoder blocks only (GPTQ, AWQ).
        known: False for a method vramgui does not model (its weights are then counted in
            ``dtype``, said as approximate).
        dtype: the checkpoint's 16-bit dtype ("bf16"), what the rest of it is stored in.
        kv_cache_fp8: the checkpoint ships FP8 scales for the KV cache.
    """

    method: str
    rules: tuple[FormatRule, ...] = ()
    ignore: tuple[str, ...] = ()
    matching: str = "hf-quantizer"
    decoder_only: bool = False
    known: bool = True
    dtype: str = "bf16"
    kv_cache_fp8: bool = False

    @property
    def scheme(self) -> Scheme | None:
        """The scheme that names the checkpoint (the fewest bits; None when not modelled)."""
        if not self.rules:
            return None
        return min((r.scheme for r in self.rules), key=lambda s: s.bits)

    @property
    def name(self) -> str:
        """What ``ModelSpec.quantization`` says: the scheme's ``--quant`` name, ``modelopt-fp8``
        for ModelOpt's FP8 (only vLLM loads ModelOpt checkpoints), or the method itself."""
        scheme = self.scheme
        if scheme is None:
            return self.method
        if self.method == "modelopt" and scheme.family == "fp8":
            return "modelopt-fp8"
        return scheme.name

    def scheme_for(self, tensor: Tensor, model_type: str = "") -> Scheme | None:
        """The scheme that stores ``tensor``, or None when it is kept in 16 bits."""
        if not self.known or not is_linear(tensor):
            return None
        if self.decoder_only and (tensor.layer is None or tensor.role is Role.ENCODER):
            return None
        if self.decoder_only and tensor.module in dtypes.GATE_PROJECTIONS:
            return None  # GPTQModel / AutoAWQ leave Gated DeltaNet's per-head gates unquantized
        if self.matching == "hf-quantizer" and tensor.role is Role.HEAD:
            return None  # transformers' quantizers always keep the output head
        if self.matching == "modelopt" and tensor.role is Role.ENCODER:
            return None  # vLLM keeps vision towers of ModelOpt checkpoints unquantized
        names = module_names(tensor, model_type)
        if self.ignore and _ignored(names, self.ignore, self.matching):
            return None
        for rule in self.rules:
            if rule.experts_only and tensor.role is not Role.EXPERT:
                continue
            if not rule.targets or _targeted(names, rule.targets, self.matching):
                return rule.scheme
        return None


def is_linear(tensor: Tensor) -> bool:
    """Whether a tensor is the weight of a linear layer (or a stack of expert matrices)."""
    if tensor.is_bias or tensor.role not in _LINEAR_ROLES:
        return False
    dims = 3 if tensor.role is Role.EXPERT else 2
    if len(tensor.shape) != dims:
        return False
    return not _NOT_LINEAR.search(tensor.module)


def module_names(tensor: Tensor, model_type: str = "") -> tuple[str, ...]:
    """The module names a checkpoint gives the layer ``tensor`` belongs to.

    A stack of expert matrices (``experts.gate_up_proj``) is named as the checkpoint names
    one expert's projections (``experts.0.gate_proj``, ``experts.0.up_proj``) and as the
    ``experts`` module itself; every name also appears without its leading containers.
    """
    path = tensor.name.removesuffix(".weight")
    names = [path]
    if tensor.role is Role.EXPERT and len(tensor.shape) == 3:
        parent, _, proj = path.rpartition(".")
        names.append(parent)
        if model_type not in FUSED_EXPERT_CHECKPOINTS and proj == "gate_up_proj":
            names += [f"{parent}.0.gate_proj", f"{parent}.0.up_proj"]
        else:
            names.append(f"{parent}.0.{proj}")
    return tuple(dict.fromkeys([*names, *(_bare(n) for n in names)]))


def _bare(path: str) -> str:
    """``path`` without the containers checkpoints disagree on (``model.language_model.``)."""
    changed = True
    while changed:
        changed = False
        for prefix in _CONTAINERS:
            if path.startswith(prefix):
                path, changed = path[len(prefix) :], True
    return path


def _ignored(names: tuple[str, ...], patterns: tuple[str, ...], matching: str) -> bool:
    if matching == "hf-quantizer":
        return _transformers_matcher(patterns)(names)
    if matching == "modelopt":
        return _modelopt_matcher(patterns)(names)
    return _targeted(names, patterns, matching)


def _targeted(names: tuple[str, ...], targets: tuple[str, ...], matching: str) -> bool:
    if matching == "modelopt":
        return _modelopt_matcher(targets)(names)
    return _compressed_tensors_matcher(targets)(names)


# A checkpoint's lists run to thousands of names (one per layer and module) and are asked about
# every tensor: each list is compiled once into a matcher.
_Matcher = Callable[[tuple[str, ...]], bool]


@functools.lru_cache(maxsize=64)
def _transformers_matcher(patterns: tuple[str, ...]) -> _Matcher:
    """transformers' ``should_convert_module``: a regex from the start up to a module boundary,
    or a suffix."""
    candidates = tuple(dict.fromkeys([*patterns, *(_bare(p) for p in patterns)]))
    valid = []
    for p in candidates:
        try:
            re.compile(p)
        except re.error:
            continue
        valid.append(p)
    regex = re.compile(rf"(?:{'|'.join(f'(?:{p})' for p in valid)}){_BOUNDARY}") if valid else None

    def match(names: tuple[str, ...]) -> bool:
        return any(n.endswith(candidates) or (regex and regex.match(n)) for n in names)

    return match


@functools.lru_cache(maxsize=64)
def _modelopt_matcher(patterns: tuple[str, ...]) -> _Matcher:
    """vLLM's reading of ModelOpt's lists: the name itself, a part of it, or a wildcard."""
    candidates = tuple(dict.fromkeys([*patterns, *(_bare(p) for p in patterns)]))
    parts = tuple(p.rstrip("*") for p in candidates if p.rstrip("*"))
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in candidates))

    def match(names: tuple[str, ...]) -> bool:
        return any(any(p in n for p in parts) or regex.match(n) for n in names)

    return match


@functools.lru_cache(maxsize=64)
def _compressed_tensors_matcher(targets: tuple[str, ...]) -> _Matcher:
    """compressed-tensors' ``_match_name``: ``Linear``, a ``re:`` regex (``re.match``), or the
    exact name."""
    if "Linear" in targets:
        return lambda names: True
    exact = frozenset(t for t in targets if not t.startswith("re:"))
    exact |= {_bare(t) for t in exact}
    regexes = []
    for t in targets:
        if t.startswith("re:"):
            try:
                regexes.append(re.compile(t[3:]))
            except re.error:
                continue

    def match(names: tuple[str, ...]) -> bool:
        return any(n in exact or any(r.match(n) for r in regexes) for n in names)

    return match


# ------------------------------------------------------------------------------------- reading


def quantization_config(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``quantization_config`` of a config.json, at its top level or in its text config."""
    qc = config.get("quantization_config")
    if isinstance(qc, Mapping):
        return qc
    text = config.get("text_config")
    if isinstance(text, Mapping):
        qc = text.get("quantization_config")
        if isinstance(qc, Mapping):
            return qc
    return None


def checkpoint_dtype(config: Mapping[str, Any]) -> str:
    """The 16-bit dtype a config says its checkpoint is stored in ("bf16" when it says none)."""
    for scope in (config, config.get("text_config")):
        if isinstance(scope, Mapping):
            for key in ("torch_dtype", "dtype"):
                value = scope.get(key)
                if isinstance(value, str) and value.removeprefix("torch.") in _DTYPE_NAMES:
                    return _DTYPE_NAMES[value.removeprefix("torch.")]
    return "bf16"


def read_format(
    config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None = None
) -> StoredFormat | None:
    """How a checkpoint stores its weights, from its config.json and ModelOpt's
    ``hf_quant_config.json`` (when the repo has one); None for a checkpoint stored unquantized.
    """
    qc = quantization_config(config)
    if qc is None and isinstance(hf_quant_config, Mapping):
        qc = {"quant_method": "modelopt", **hf_quant_config}
    if qc is None:
        return None
    dtype = checkpoint_dtype(config)
    scale_bytes = dtypes.DTYPE_BYTES.get(dtype, 2)
    method = str(qc.get("quant_method", "")).lower()
    reader = _READERS.get(method)
    if reader is None:
        return StoredFormat(method=method or "unknown", known=False, dtype=dtype)
    found = reader(qc, config, scale_bytes)
    if found is None:
        return StoredFormat(method=method, known=False, dtype=dtype)
    return StoredFormat(
        method=found.method,
        rules=found.rules,
        ignore=found.ignore,
        matching=found.matching,
        decoder_only=found.decoder_only,
        known=found.known,
        dtype=dtype,
        kv_cache_fp8=found.kv_cache_fp8,
    )


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if isinstance(v, str))
    return ()


# What a quantization config may say: bits per value, values per scale (a group, a block side).
MAX_BITS = 16
MAX_GROUP = 1 << 20


def _whole(
    qc: Mapping[str, Any], key: str, default: int, *, low: int, high: int, also: int | None = None
) -> int:
    """``qc[key]`` as a whole number from ``low`` to ``high`` (or ``also``); ``default`` when
    absent or null.

    Raises:
        ConfigError: any other value (a string, NaN, infinity, a fraction, out of range), which
            would otherwise size weights in negative or astronomic bytes.
    """
    value = qc.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    whole = isinstance(value, int) and not isinstance(value, bool)
    if whole and (low <= value <= high or value == also):
        return value
    allowed = f"from {low} to {high:,}" + (f" or {also}" if also is not None else "")
    raise ConfigError(
        f"quantization_config's '{key}' must be a whole number {allowed}, not {shown(value)}"
    )


def _block(qc: Mapping[str, Any], key: str) -> tuple[int, int] | None:
    """A ``[rows, cols]`` scale block (None when absent or null), each side checked."""
    value = qc.get(key)
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ConfigError(
            f"quantization_config's '{key}' must be two whole numbers, not {shown(value)}"
        )
    sides = {f"{key}[0]": value[0], f"{key}[1]": value[1]}
    rows, cols = (_whole(sides, side, 0, low=1, high=MAX_GROUP) for side in sides)
    return rows, cols


def _mxfp4(qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int) -> StoredFormat:
    return StoredFormat(
        method="mxfp4",
        rules=(FormatRule(dtypes.SCHEMES["mxfp4"], experts_only=True),),
        ignore=_strings(qc.get("modules_to_not_convert")),
    )


def _fine_grained_fp8(
    qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int
) -> StoredFormat | None:
    if "quantized_layers" in qc or "moe_quant_algo" in qc:
        return _modelopt(qc, config, scale_bytes)
    ue8m0 = str(qc.get("scale_fmt", "float")).lower() == "ue8m0"
    static = str(qc.get("activation_scheme", "dynamic")).lower() == "static"
    # FineGrainedFP8Config's default is 128 x 128; an explicit null means one scale per tensor
    block = _block(qc, "weight_block_size") if "weight_block_size" in qc else (128, 128)
    if block is not None:
        scheme = dtypes.fp8_block_scheme(*block, scale_bytes=1 if ue8m0 else 4)
        if static:  # FP8Linear's activation_scale, one fp32 per layer
            scheme = _with(scheme, extra_bytes=4)
    else:
        # weight_block_size null: one fp32 weight_scale_inv per tensor, and a static input
        # scale (Devstral 2, Mistral's FP8 releases)
        scheme = _with(dtypes.SCHEMES["fp8-tensor"], extra_bytes=4 if static else 0)
    rules = [FormatRule(scheme)]
    expert_dtype = qc.get("expert_dtype", config.get("expert_dtype"))
    if isinstance(expert_dtype, str) and expert_dtype.lower() == "fp4":
        # DeepSeek-V4: int8-packed FP4 experts, a scale per row and 32 columns (FP8Experts)
        fp4 = _with(
            dtypes.SCHEMES["mxfp4"],
            label="FP4",
            scale_bytes=1 if ue8m0 else 4,
            description="FP4 (E2M1) expert weights, 2 per byte, a scale per 32 columns "
            "(DeepSeek-V4's expert_dtype fp4)",
        )
        rules.insert(0, FormatRule(fp4, experts_only=True))
    ignore = _strings(qc.get("modules_to_not_convert")) or _strings(qc.get("ignored_layers"))
    return StoredFormat(method="fp8", rules=tuple(rules), ignore=ignore)


def _fbgemm_fp8(qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int) -> StoredFormat:
    # FbgemmFp8Linear: fp32 weight_scale (out, 1) and input_scale_ub (1,)
    scheme = _with(dtypes.SCHEMES["fp8"], extra_bytes=4)
    return StoredFormat(
        method="fbgemm_fp8",
        rules=(FormatRule(scheme),),
        ignore=_strings(qc.get("modules_to_not_convert")),
    )


def _gptq_awq(qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int) -> StoredFormat:
    method = str(qc.get("quant_method", "")).lower()
    bits = _whole(qc, "bits" if "bits" in qc else "w_bit", 4, low=1, high=MAX_BITS)
    group_key = "group_size" if "group_size" in qc else "q_group_size"
    group = _whole(qc, group_key, 128, low=0, high=MAX_GROUP, also=-1)
    base = "awq-int4" if method == "awq" else f"gptq-int{8 if bits == 8 else 4}"
    if group > 0:
        scheme = dtypes.get_scheme(base if group == 128 else f"{base}-g{group}")
    else:  # group_size -1: one group spanning each row
        scheme = _with(dtypes.get_scheme(base), group_size=0, scale="channel")
    if method == "awq" and qc.get("zero_point") is False:
        scheme = _with(scheme, zero_points=False)
    return StoredFormat(
        method=method,
        rules=(FormatRule(scheme),),
        ignore=_strings(qc.get("modules_to_not_convert")),
        decoder_only=True,
    )


def _bitsandbytes(
    qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int
) -> StoredFormat:
    if qc.get("load_in_8bit"):
        name = "int8"
    else:
        kind = str(qc.get("bnb_4bit_quant_type", "fp4")).lower()
        kind = kind if kind in ("nf4", "fp4") else "fp4"
        name = kind if qc.get("bnb_4bit_use_double_quant") else f"{kind}-nodq"
    return StoredFormat(
        method="bitsandbytes",
        rules=(FormatRule(dtypes.SCHEMES[name]),),
        ignore=_strings(qc.get("llm_int8_skip_modules")),
    )


def _compressed_tensors(
    qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int
) -> StoredFormat | None:
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        return None
    default_format = str(qc.get("format", "") or "")
    rules = []
    for group in groups.values():
        if not isinstance(group, Mapping):
            continue
        scheme = _ct_scheme(group, default_format, scale_bytes)
        if scheme is None:
            return None
        targets = _strings(group.get("targets")) or ("Linear",)
        rules.append(FormatRule(scheme, targets=targets))
    kv = qc.get("kv_cache_scheme")
    return StoredFormat(
        method="compressed-tensors",
        rules=tuple(rules),
        ignore=_strings(qc.get("ignore")),
        matching="compressed-tensors",
        kv_cache_fp8=isinstance(kv, Mapping)
        and kv.get("num_bits") == 8
        and kv.get("type", "float") == "float",
    )


def _ct_scheme(group: Mapping[str, Any], default_format: str, scale_bytes: int) -> Scheme | None:
    """A compressed-tensors config group's weights as ``dtypes.Scheme`` (as its compressor
    writes them: ``pack-quantized``, ``int-quantized``, ``float-quantized``,
    ``nvfp4-pack-quantized``)."""
    weights = group.get("weights")
    if not isinstance(weights, Mapping):
        return None
    bits = _whole(weights, "num_bits", 8, low=1, high=MAX_BITS)
    kind = str(weights.get("type", "int")).lower()
    strategy = str(weights.get("strategy") or "").lower()
    if not strategy:  # QuantizationArgs' inference from the group size
        size = weights.get("group_size")
        strategy = "tensor" if size is None else "channel" if size == -1 else "group"
    grouped = strategy in ("group", "tensor_group")
    group_size = _whole(weights, "group_size", 0, low=1, high=MAX_GROUP) if grouped else 0
    symmetric = weights.get("symmetric", True) is not False
    actorder = str(weights.get("actorder") or "").lower() == "group"
    acts = group.get("input_activations")
    static_input = isinstance(acts, Mapping) and acts.get("dynamic") is False
    fmt = str(group.get("format") or default_format or "").lower()
    if kind == "float" and bits == 4:
        if group_size == 32:  # MXFP4: E8M0 scales per 32
            return dtypes.SCHEMES["mxfp4"]
        # weight_global_scale, and input_global_scale where activations are quantized too
        return dtypes.nvfp4_scheme(extra_bytes=8 if isinstance(acts, Mapping) else 4)
    if kind == "float" and bits == 8:
        block = _block(weights, "block_structure") if strategy == "block" else None
        if block is not None:
            scheme = dtypes.fp8_block_scheme(*block, scale_bytes=scale_bytes)
        elif strategy == "tensor":
            scheme = _with(dtypes.SCHEMES["fp8-tensor"], scale_bytes=scale_bytes, extra_bytes=0)
        else:
            scheme = _with(dtypes.SCHEMES["fp8"], scale_bytes=scale_bytes)
        return _with(scheme, extra_bytes=scale_bytes if static_input else 0)
    if kind != "int":
        return None
    weight_only = acts is None and fmt not in ("int-quantized", "naive-quantized")
    if fmt == "pack-quantized":
        weight_only = True
    if weight_only:
        name = "w4a16" if bits == 4 else "w8a16" if bits == 8 else f"w{bits}a16"
        scheme = dtypes.int_scheme(
            name,
            bits=bits,
            group=group_size,
            symmetric=symmetric,
            actorder=actorder,
            scale_bytes=scale_bytes,
        )
        if not symmetric:
            # pack-quantized packs the zero points too (eight 4-bit ones per int32)
            scheme = _with(scheme, zero_points=True)
        return scheme
    scheme = dtypes.int_scheme(
        "w8a8" if bits == 8 else f"w{bits}a8",
        bits=bits,
        group=group_size,
        activations=True,
        symmetric=symmetric,
        actorder=actorder,
        scale_bytes=scale_bytes,
    )
    return _with(scheme, extra_bytes=scale_bytes if static_input else 0)


# ModelOpt's quant_algo -> the scheme it writes.
def _modelopt_scheme(algo: str, group: int) -> Scheme | None:
    algo = algo.upper()
    if algo == "FP8":
        return dtypes.SCHEMES["fp8-tensor"]  # weight_scale and input_scale, fp32 scalars
    if algo == "FP8_PER_CHANNEL_PER_TOKEN":
        return dtypes.SCHEMES["fp8"]
    if algo == "FP8_PB_WO":
        return dtypes.fp8_block_scheme(128, 128, scale_bytes=4)
    if algo in ("NVFP4", "W4A16_NVFP4"):
        scheme = dtypes.nvfp4_scheme(extra_bytes=8 if algo == "NVFP4" else 4)
        return scheme if group in (0, 16) else _with(scheme, group_size=group)
    return None


def _modelopt(
    qc: Mapping[str, Any], config: Mapping[str, Any], scale_bytes: int
) -> StoredFormat | None:
    inner = qc.get("quantization")
    if isinstance(inner, Mapping):  # hf_quant_config.json: {"quantization": {...}}
        qc = {**qc, **inner}
    algo = str(qc.get("quant_algo", "")).upper()
    group = _whole(qc, "group_size", 0, low=0, high=MAX_GROUP)
    ignore = _strings(qc.get("exclude_modules")) or _strings(qc.get("ignore"))
    kv = qc.get("kv_cache_quant_algo") or qc.get("kv_cache_scheme")
    kv_fp8 = (isinstance(kv, str) and kv.upper() == "FP8") or (
        isinstance(kv, Mapping) and kv.get("num_bits") == 8
    )
    rules: list[FormatRule] = []
    moe_algo = qc.get("moe_quant_algo")
    if isinstance(moe_algo, str):
        experts = _modelopt_scheme(moe_algo, group)
        if experts is not None:
            rules.append(FormatRule(experts, experts_only=True))
    if algo == "MIXED_PRECISION":
        layers = qc.get("quantized_layers")
        if not isinstance(layers, Mapping):
            return None
        by_scheme: dict[tuple[str, int], list[str]] = {}
        for name, spec in layers.items():
            if isinstance(spec, Mapping):
                size = _whole(spec, "group_size", 0, low=0, high=MAX_GROUP)
                key = (str(spec.get("quant_algo", "")), size)
                by_scheme.setdefault(key, []).append(str(name))
        for (layer_algo, layer_group), names in by_scheme.items():
            scheme = _modelopt_scheme(layer_algo, layer_group)
            if scheme is None:
                return None
            rules.append(FormatRule(scheme, targets=tuple(names)))
    else:
        scheme = _modelopt_scheme(algo, group)
        if scheme is None:
            return None
        rules.append(FormatRule(scheme))
    return StoredFormat(
        method="modelopt" if str(qc.get("quant_method", "modelopt")) != "fp8" else "fp8",
        rules=tuple(rules),
        ignore=ignore,
        matching="modelopt",
        kv_cache_fp8=kv_fp8,
    )


def _with(scheme: Scheme, **changes: Any) -> Scheme:
    return replace(scheme, **changes)


_READERS = {
    "mxfp4": _mxfp4,
    "fp8": _fine_grained_fp8,
    "fbgemm_fp8": _fbgemm_fp8,
    "gptq": _gptq_awq,
    "awq": _gptq_awq,
    "bitsandbytes": _bitsandbytes,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
}
