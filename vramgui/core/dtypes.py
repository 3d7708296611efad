"""Number formats and quantization schemes with their real storage.

Two vocabularies meet here. *Storage types* say how one tensor's numbers are laid out: the
workload dtypes (``fp32``, ``fp16``, ``bf16``), the safetensors dtype names (``BF16``, ``I32``,
``F8_E4M3``...) and every ggml type (``Q4_K`` = 144 bytes per block of 256 values, ...).
*Schemes* are what ``--quant`` chooses: a rule that gives every tensor of a model its storage,
metadata included (row scales, group scales and zeros, absmax, ``g_idx``), and decides which
tensors stay unquantized. The GGUF mixes follow llama.cpp's ``llama_tensor_get_type``
(``src/llama-quant.cpp``) rule by rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vramgui.core.errors import ConfigError, WorkloadError
from vramgui.core.model import ModelSpec, Role, Tensor

# --------------------------------------------------------------------------------------------
# Storage types
# --------------------------------------------------------------------------------------------

# ggml types as (values per block, bytes per block), named as ggml names them. Kept in step with
# ggml.h / the gguf package's GGML_QUANT_SIZES (a test compares the two).
GGML_TYPE_SIZES: dict[str, tuple[int, int]] = {
    "F32": (1, 4),
    "F16": (1, 2),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q8_0": (32, 34),
    "Q8_1": (32, 40),
    "Q2_K": (256, 84),
    "Q3_K": (256, 110),
    "Q4_K": (256, 144),
    "Q5_K": (256, 176),
    "Q6_K": (256, 210),
    "Q8_K": (256, 292),
    "IQ2_XXS": (256, 66),
    "IQ2_XS": (256, 74),
    "IQ3_XXS": (256, 98),
    "IQ1_S": (256, 50),
    "IQ4_NL": (32, 18),
    "IQ3_S": (256, 110),
    "IQ2_S": (256, 82),
    "IQ4_XS": (256, 136),
    "I8": (1, 1),
    "I16": (1, 2),
    "I32": (1, 4),
    "I64": (1, 8),
    "F64": (1, 8),
    "IQ1_M": (256, 56),
    "BF16": (1, 2),
    "TQ1_0": (256, 54),
    "TQ2_0": (256, 66),
    "MXFP4": (32, 17),
    "NVFP4": (64, 36),
    "Q1_0": (128, 18),
}

# safetensors dtypes beyond the ggml names; sub-byte floats pack several values per byte group.
SAFETENSORS_TYPE_SIZES: dict[str, tuple[int, int]] = {
    "BOOL": (1, 1),
    "U8": (1, 1),
    "U16": (1, 2),
    "U32": (1, 4),
    "U64": (1, 8),
    "F8_E4M3": (1, 1),
    "F8_E5M2": (1, 1),
    "F8_E8M0": (1, 1),
    "F4": (2, 1),
    "F6_E2M3": (4, 3),
    "F6_E3M2": (4, 3),
}

_TYPE_SIZES = GGML_TYPE_SIZES | SAFETENSORS_TYPE_SIZES

# The workload's lower-case names and common spellings, mapped to the canonical upper-case names.
_TYPE_ALIASES = {
    "FP64": "F64",
    "FP32": "F32",
    "FLOAT32": "F32",
    "FP16": "F16",
    "FLOAT16": "F16",
    "BFLOAT16": "BF16",
    "FP8": "F8_E4M3",
    "FP8_E4M3": "F8_E4M3",
    "FP8_E5M2": "F8_E5M2",
    "INT8": "I8",
    "UINT8": "U8",
    "INT16": "I16",
    "INT32": "I32",
    "INT64": "I64",
}

_FLOAT_TYPES = frozenset({"F64", "F32", "F16", "BF16"})

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2}
"""Bytes per value of the workload's 16/32-bit dtypes."""

_WORKLOAD_TYPE = {"fp32": "F32", "fp16": "F16", "bf16": "BF16"}


def canonical_type(dtype_name: str) -> str:
    """The canonical storage-type name (``bf16`` -> ``BF16``, ``fp8`` -> ``F8_E4M3``, ``q4_k`` -> ``Q4_K``).

    Raises:
        ConfigError: the name is no storage type known here.
    """
    name = dtype_name.strip().upper()
    name = _TYPE_ALIASES.get(name, name)
    if name not in _TYPE_SIZES:
        raise ConfigError(f"unknown tensor dtype {dtype_name!r}")
    return name


def storage_bytes(numel_or_shape: int | Sequence[int], dtype_name: str) -> int:
    """Exact bytes of a tensor stored as ``dtype_name``.

    Block types quantize each row along the innermost dimension (ggml's ``ne0``, the input
    features of a PyTorch ``(out, in)`` weight): a row of ``n`` values takes
    ``n / block * bytes_per_block`` bytes. A bare element count is taken as one row.

    Raises:
        ConfigError: unknown dtype, or a row that is not a whole number of blocks.
    """
    name = canonical_type(dtype_name)
    block, block_bytes = _TYPE_SIZES[name]
    if isinstance(numel_or_shape, int):
        rows, row = 1, numel_or_shape
    else:
        shape = tuple(numel_or_shape)
        rows, row = math.prod(shape[:-1]), shape[-1] if shape else 1
    if row % block:
        raise ConfigError(f"rows of {row} values cannot be stored as {name} (blocks of {block})")
    return rows * (row // block) * block_bytes


def dtype_bytes(dtype: str) -> int:
    """Bytes per value of a workload dtype (``fp32``, ``fp16``, ``bf16``).

    Raises:
        WorkloadError: another name.
    """
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise WorkloadError(
            f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPE_BYTES)}"
        ) from None


# --------------------------------------------------------------------------------------------
# KV cache dtypes
# --------------------------------------------------------------------------------------------

KV_DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "q8_0": 34 / 32,  # llama.cpp's -ctk/-ctv q8_0: ggml Q8_0 blocks
    "q4_0": 18 / 32,
}
"""Bytes per cached K or V element for each ``--kv-dtype`` other than ``auto``."""


def kv_bytes_per_element(kv_dtype: str, dtype: str) -> float:
    """Bytes per K / V element; ``auto`` follows the workload dtype.

    Raises:
        WorkloadError: an unknown KV dtype or dtype.
    """
    if kv_dtype == "auto":
        return float(dtype_bytes(dtype))
    try:
        return KV_DTYPE_BYTES[kv_dtype]
    except KeyError:
        raise WorkloadError(
            f"unknown kv-dtype {kv_dtype!r}; choose one of auto, {', '.join(KV_DTYPE_BYTES)}"
        ) from None


# --------------------------------------------------------------------------------------------
# Schemes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scheme:
    """A ``--quant`` choice.

    Attributes:
        name: the ``--quant`` value.
        family: "none", "bitsandbytes", "gptq-awq", "fp8" or "gguf".
        label: short text for the UI.
        nominal_bits_per_weight: bits per quantized weight, metadata included, for display; the
            real figure for a model is ``bits_per_weight``.
        description: one line on what it stores.
        bits: bits of a quantized weight (0 where not applicable).
        group_size: values sharing one scale (bitsandbytes block, GPTQ / AWQ group), 0 if none.
        double_quant: bitsandbytes 4-bit with quantized absmax (QLoRA's default).
        gguf_type: for GGUF, the ggml type most tensors get (llama.cpp's default type).
    """

    name: str
    family: str
    label: str
    nominal_bits_per_weight: float
    description: str
    bits: int = 0
    group_size: int = 0
    double_quant: bool = False
    gguf_type: str = ""


def _type_bits(ggml_type: str) -> float:
    block, block_bytes = GGML_TYPE_SIZES[ggml_type]
    return block_bytes * 8 / block


def _gptq(name: str, family: str, *, bits: int, group: int, label: str, what: str) -> Scheme:
    return Scheme(
        name=name,
        family=family,
        label=label,
        # fp16 scale + packed zero per group; GPTQ's g_idx (32 bits per input row) is left out
        nominal_bits_per_weight=round(bits + (16 + bits) / group, 3),
        description=what,
        bits=bits,
        group_size=group,
    )


# What transformers' ``BitsAndBytesConfig(load_in_4bit=True)`` stores when nothing else is set
# (bnb_4bit_quant_type="fp4", bnb_4bit_use_double_quant=False); it also computes in float32
# (bnb_4bit_compute_dtype=None reads as torch.float32).
BNB_LOAD_IN_4BIT_DEFAULT = "fp4-nodq"


def _bnb4(name: str, code: str, double_quant: bool) -> Scheme:
    absmax_bits = 8 / 64 + 32 / (64 * 256) if double_quant else 32 / 64
    dq = "double-quantized absmax (uint8, fp32 per 256 blocks)" if double_quant else "fp32 absmax"
    default = (
        "; what load_in_4bit=True gives when BitsAndBytesConfig sets nothing else"
        if name == BNB_LOAD_IN_4BIT_DEFAULT
        else ""
    )
    return Scheme(
        name=name,
        family="bitsandbytes",
        label=f"bitsandbytes {code.upper()}" + ("" if double_quant else " (no double quant)"),
        nominal_bits_per_weight=round(4 + absmax_bits, 3),
        description=f"4-bit {code.upper()} codes, 2 per byte, {dq} per block of 64{default}",
        bits=4,
        group_size=64,
        double_quant=double_quant,
    )


# GGUF file types (llama.cpp's LLAMA_FTYPE_MOSTLY_*), with the type most tensors get (from
# llama_ftype_get_default_type) and what the mix changes.
_GGUF_FILE_TYPES: tuple[tuple[str, str, str], ...] = (
    ("F16", "F16", "all matrices F16"),
    ("BF16", "BF16", "all matrices BF16"),
    ("Q8_0", "Q8_0", "8-bit blocks of 32 with an fp16 scale"),
    ("Q6_K", "Q6_K", "6-bit k-quant"),
    ("Q5_K_M", "Q5_K", "Q5_K; Q6_K for half of attn_v and ffn_down, Q6_K output"),
    ("Q5_K_S", "Q5_K", "Q5_K; Q6_K output"),
    ("Q5_1", "Q5_1", "5-bit blocks of 32 with scale and minimum"),
    ("Q5_0", "Q5_0", "5-bit blocks of 32 with a scale"),
    ("Q4_K_M", "Q4_K", "Q4_K; Q6_K for half of attn_v and ffn_down, Q6_K output"),
    ("Q4_K_S", "Q4_K", "Q4_K; Q5_K for the first attn_v and ffn_down, Q6_K output"),
    ("Q4_1", "Q4_1", "4-bit blocks of 32 with scale and minimum"),
    ("Q4_0", "Q4_0", "4-bit blocks of 32 with a scale; Q6_K output"),
    ("IQ4_XS", "IQ4_XS", "4.25-bit non-linear i-quant"),
    ("IQ4_NL", "IQ4_NL", "4.5-bit non-linear blocks of 32"),
    ("Q3_K_L", "Q3_K", "Q3_K; Q5_K for attn_v, attn_output and ffn_down"),
    ("Q3_K_M", "Q3_K", "Q3_K; Q4_K / Q5_K for attn_v, attn_output and ffn_down"),
    ("Q3_K_S", "Q3_K", "Q3_K throughout; Q6_K output"),
    ("IQ3_M", "IQ3_S", "IQ3_S; Q4_K for attn_v, attn_output and the first ffn_down"),
    ("IQ3_S", "IQ3_S", "3.44-bit i-quant"),
    ("IQ3_XS", "IQ3_S", "IQ3_S with IQ3_XXS for the middle ffn_gate / ffn_up"),
    ("IQ3_XXS", "IQ3_XXS", "3.06-bit i-quant (needs an importance matrix)"),
    ("Q2_K", "Q2_K", "Q2_K; Q3_K for attn_output and ffn_down, Q3_K / Q4_K attn_v"),
    ("Q2_K_S", "Q2_K", "Q2_K; Q4_K for the first ffn_down (needs an importance matrix)"),
    ("IQ2_M", "IQ2_S", "IQ2_S; IQ3_S for the first ffn_down and attn_output"),
    ("IQ2_S", "IQ2_XS", "IQ2_XS; IQ3_S for the first ffn_down and attn_output"),
    ("IQ2_XS", "IQ2_XS", "2.31-bit i-quant (needs an importance matrix)"),
    ("IQ2_XXS", "IQ2_XXS", "2.06-bit i-quant (needs an importance matrix)"),
    ("IQ1_M", "IQ1_M", "1.75-bit i-quant (needs an importance matrix)"),
    ("IQ1_S", "IQ1_S", "1.56-bit i-quant (needs an importance matrix)"),
    ("TQ2_0", "TQ2_0", "ternary weights, 2.06 bits (for ternary-trained models)"),
    ("TQ1_0", "TQ1_0", "ternary weights, 1.69 bits (for ternary-trained models)"),
    ("MXFP4_MOE", "MXFP4", "MXFP4 experts, Q8_0 elsewhere (gpt-oss style MoE)"),
)

SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("none", "none", "None (16/32-bit)", 16.0, "weights in the workload dtype"),
        Scheme(
            "int8",
            "bitsandbytes",
            "bitsandbytes LLM.int8",
            8.0,
            "int8 weights with an fp32 scale per output row (SCB)",
            bits=8,
        ),
        _bnb4("nf4", "nf4", double_quant=True),
        _bnb4("nf4-nodq", "nf4", double_quant=False),
        _bnb4("fp4", "fp4", double_quant=True),
        _bnb4("fp4-nodq", "fp4", double_quant=False),
        _gptq(
            "gptq-int8",
            "gptq-awq",
            bits=8,
            group=128,
            label="GPTQ int8 (g128)",
            what="int32-packed 8-bit weights, fp16 scales and packed zeros per group of 128, g_idx",
        ),
        _gptq(
            "gptq-int4",
            "gptq-awq",
            bits=4,
            group=128,
            label="GPTQ int4 (g128)",
            what="int32-packed 4-bit weights, fp16 scales and packed zeros per group of 128, g_idx",
        ),
        _gptq(
            "awq-int4",
            "gptq-awq",
            bits=4,
            group=128,
            label="AWQ int4 (g128)",
            what="int32-packed 4-bit weights, fp16 scales and packed zeros per group of 128",
        ),
        Scheme(
            "fp8",
            "fp8",
            "FP8 (E4M3)",
            8.0,
            "FP8 E4M3 weights with an fp32 scale per output channel (compressed-tensors FP8_DYNAMIC)",
            bits=8,
        ),
        *(
            Scheme(
                name,
                "gguf",
                f"GGUF {name}",
                round(_type_bits(default), 4),
                what,
                group_size=GGML_TYPE_SIZES[default][0],
                gguf_type=default,
            )
            for name, default, what in _GGUF_FILE_TYPES
        ),
    )
}
"""Every scheme in display order, grouped by family; GGUF file types from large to small."""

_GROUP_SUFFIX = re.compile(r"^(gptq-int4|gptq-int8|awq-int4)-g(\d+)$")


def get_scheme(name: str) -> Scheme:
    """The scheme for a ``--quant`` value; GGUF names in any case (``q4_k_m``), and GPTQ / AWQ with
    a group size suffix (``gptq-int4-g32``).

    Raises:
        WorkloadError: an unknown name; the message lists the known ones.
    """
    key = name.strip()
    for candidate in (key, key.lower(), key.upper()):
        if candidate in SCHEMES:
            return SCHEMES[candidate]
    match = _GROUP_SUFFIX.match(key.lower())
    if match and int(match.group(2)) > 0:
        base, group = SCHEMES[match.group(1)], int(match.group(2))
        return _gptq(
            key.lower(),
            base.family,
            bits=base.bits,
            group=group,
            label=base.label.replace("g128", f"g{group}"),
            what=base.description.replace("128", str(group)),
        )
    raise WorkloadError(
        f"unknown quantization {name!r}; known: {', '.join(SCHEMES)} "
        "(GPTQ / AWQ also take a group size, e.g. gptq-int4-g32)"
    )


# --------------------------------------------------------------------------------------------
# Per-tensor storage under a scheme
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredTensor:
    """One weight tensor as stored under a scheme.

    Attributes:
        tensor: the tensor of the model's inventory.
        storage: its storage: a type name (``BF16``, ``Q4_K``...) or a scheme name (``nf4``).
        bytes: exact bytes, the scheme's metadata (scales, zeros, absmax, g_idx) included.
    """

    tensor: Tensor
    storage: str
    bytes: int


# Roles whose linear layers the bitsandbytes / GPTQ / AWQ / FP8 schemes quantize; embeddings,
# norms, biases, heads (lm_head) and MoE routers stay in the workload dtype, as transformers'
# quantizers and the published GPTQ / AWQ / FP8 checkpoints leave them.
_QUANTIZED_ROLES = frozenset({Role.ATTENTION, Role.MLP, Role.EXPERT, Role.SHARED_EXPERT})
# Qwen-MoE's gate of the shared expert is a router too (GGUF's ffn_gate_inp_shexp).
_ROUTER_MODULES = frozenset({"shared_expert_gate"})

# transformers' GPT-2 uses Conv1D, whose weight is stored (in, out), not (out, in).
_CONV1D_MODULES = {"gpt2": frozenset({"c_attn", "c_proj", "c_fc"})}


def _in_out_shape(spec: ModelSpec, t: Tensor) -> tuple[int, ...]:
    """The tensor's shape with the input features innermost (ggml's ne0 last)."""
    if len(t.shape) == 2 and t.module in _CONV1D_MODULES.get(spec.facts.model_type, ()):
        return (t.shape[1], t.shape[0])
    return t.shape


def _quantized_layout(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(matrices, out, in) of a 2-D weight or a stack of expert matrices."""
    return math.prod(shape[:-2]), shape[-2], shape[-1]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _bnb_int8_bytes(shape: tuple[int, ...]) -> int:
    # Int8Params: the int8 matrix (CB) plus one fp32 absmax per output row (SCB).
    rows = math.prod(shape[:-1])
    return math.prod(shape) + 4 * rows


def _bnb_4bit_bytes(shape: tuple[int, ...], double_quant: bool) -> int:
    matrices, out, inp = _quantized_layout(shape)
    numel = out * inp
    blocks = _ceil_div(numel, 64)
    packed = _ceil_div(numel, 2)  # Params4bit: two 4-bit codes per byte of quant storage
    code = 16 * 4  # QuantState.code: the 16 NF4 / FP4 values in fp32
    # Double quant: absmax as uint8 + its fp32 offset, and state2's fp32 absmax per 256 blocks.
    # state2's 256-entry code is one tensor shared by every weight on a GPU (1 KiB), left out.
    absmax = blocks + 4 + 4 * _ceil_div(blocks, 256) if double_quant else 4 * blocks
    return matrices * (packed + absmax + code)


def bnb_4bit_packed_bytes(shape: tuple[int, ...]) -> int:
    """The packed 4-bit codes of a bitsandbytes weight (Params4bit's data), without its quant state.

    FSDP and ZeRO-3 shard the codes, a parameter stored as ``bnb_4bit_quant_storage``; the quant
    state (absmax, the nested absmax and offset, the code table) is an attribute of the
    parameter that every rank keeps whole.
    """
    matrices, out, inp = _quantized_layout(shape)
    return matrices * _ceil_div(out * inp, 2)


def _gptq_bytes(shape: tuple[int, ...], bits: int, group: int, awq: bool) -> int:
    matrices, out, inp = _quantized_layout(shape)
    groups = _ceil_div(inp, group)
    per_int32 = 32 // bits
    if awq:
        # AutoAWQ GEMM: qweight int32 (in, out / 8), qzeros int32 (in / g, out / 8), scales fp16.
        qweight = inp * _ceil_div(out, per_int32) * 4
        g_idx = 0
    else:
        # GPTQ: qweight int32 (in / 8, out), qzeros int32 (in / g, out / 8), scales fp16
        # (in / g, out), g_idx int32 (in,).
        qweight = _ceil_div(inp, per_int32) * out * 4
        g_idx = 4 * inp
    qzeros = groups * _ceil_div(out, per_int32) * 4
    scales = groups * out * 2
    return matrices * (qweight + qzeros + scales + g_idx)


def _fp8_bytes(shape: tuple[int, ...]) -> int:
    # E4M3 weight plus weight_scale, fp32 per output channel (shape (out, 1)).
    return math.prod(shape) + 4 * math.prod(shape[:-1])


def _scheme_matrix_bytes(scheme: Scheme) -> Callable[[tuple[int, ...]], int]:
    if scheme.name == "int8":
        return _bnb_int8_bytes
    if scheme.family == "bitsandbytes":
        return lambda shape: _bnb_4bit_bytes(shape, scheme.double_quant)
    if scheme.family == "gptq-awq":
        awq = scheme.name.startswith("awq")
        return lambda shape: _gptq_bytes(shape, scheme.bits, scheme.group_size, awq)
    return _fp8_bytes


def _plain(t: Tensor, type_name: str, shape: tuple[int, ...] | None = None) -> StoredTensor:
    return StoredTensor(t, type_name, storage_bytes(t.shape if shape is None else shape, type_name))


def _unquantized(t: Tensor, base: str) -> StoredTensor:
    """A tensor in the workload dtype; integer buffers keep their own type."""
    if t.dtype is not None and canonical_type(t.dtype) not in _FLOAT_TYPES:
        return _plain(t, canonical_type(t.dtype))
    return _plain(t, base)


def _known_scheme(name: str) -> Scheme | None:
    try:
        return get_scheme(name)
    except WorkloadError:
        return None


def _same_scheme(a: str, b: str) -> bool:
    known_a, known_b = _known_scheme(a), _known_scheme(b)
    if known_a is None or known_b is None:
        return a.lower() == b.lower()
    return known_a.name == known_b.name


def _scheme_for_checkpoint(spec: ModelSpec, chosen: Scheme) -> Scheme | None:
    """The scheme to apply to a quantized checkpoint's logical shapes, or None to keep the
    storage its source states.

    Raises:
        WorkloadError: the chosen scheme cannot apply to this checkpoint.
    """
    stated = spec.quantization or ""
    own = _known_scheme(stated)
    if chosen.family == "none" or _same_scheme(chosen.name, stated):
        synthesized = not any(t.dtype for t in spec.tensors)
        return own if own is not None and own.family != "none" and synthesized else None
    # a GGUF source names its file type, or (without one) its most common ggml type
    from_gguf = stated.upper() in GGML_TYPE_SIZES or (own is not None and own.family == "gguf")
    if from_gguf and chosen.family == "gguf":
        return chosen
    raise WorkloadError(
        f"{spec.name or 'this model'} is already quantized as {stated}; "
        f"use --quant none (or {stated})"
    )


def assign_storage(
    spec: ModelSpec, dtype: str, quant: str, *, imatrix: bool = False
) -> tuple[StoredTensor, ...]:
    """The storage of every tensor of ``spec`` under the workload's dtype and ``--quant``.

    A pre-quantized checkpoint (``spec.quantization`` set) keeps the storage its source states
    under ``none`` or its own scheme; when its tensors were synthesized from config.json (no
    stored dtypes), its own scheme is applied to them. A GGUF model can be re-typed to another
    GGUF file type from its logical shapes; other schemes on a quantized checkpoint are refused.
    ``imatrix`` says a GGUF file was made with an importance matrix (some mixes then differ);
    the types llama.cpp cannot make without one always assume one.

    Raises:
        WorkloadError: unknown dtype or scheme, a scheme that cannot apply to this checkpoint, or a
            tensor llama.cpp cannot quantize to the chosen type.
    """
    return spec.cached(
        ("assign_storage", dtype, quant, imatrix),
        lambda: _assign_storage(spec, dtype, quant, imatrix),
    )


def _assign_storage(
    spec: ModelSpec, dtype: str, quant: str, imatrix: bool
) -> tuple[StoredTensor, ...]:
    if dtype not in _WORKLOAD_TYPE:
        raise WorkloadError(f"unknown dtype {dtype!r}; choose one of {', '.join(_WORKLOAD_TYPE)}")
    base = _WORKLOAD_TYPE[dtype]
    scheme = get_scheme(quant)
    if spec.quantization is not None:
        applied = _scheme_for_checkpoint(spec, scheme)
        if applied is None:
            return tuple(
                _plain(t, canonical_type(t.dtype)) if t.dtype else _plain(t, base)
                for t in spec.tensors
            )
        scheme = applied
    if scheme.family == "none":
        return tuple(_unquantized(t, base) for t in spec.tensors)
    if scheme.family == "gguf":
        return _assign_gguf(spec, scheme, imatrix or scheme.name in _IMATRIX_MIXES)
    matrix_bytes = _scheme_matrix_bytes(scheme)
    out: list[StoredTensor] = []
    for t in spec.tensors:
        if t.is_matrix and t.role in _QUANTIZED_ROLES and t.module not in _ROUTER_MODULES:
            out.append(StoredTensor(t, scheme.name, matrix_bytes(_in_out_shape(spec, t))))
        else:
            out.append(_unquantized(t, base))
    return tuple(out)


def weight_bytes(spec: ModelSpec, dtype: str, quant: str) -> int:
    """Bytes of all weights of ``spec`` under the dtype and scheme (see ``assign_storage``)."""
    return sum(s.bytes for s in assign_storage(spec, dtype, quant))


def bits_per_weight(spec: ModelSpec, dtype: str, quant: str) -> float:
    """Stored bits per parameter over the whole model, metadata included (for display)."""
    params = spec.parameters
    return weight_bytes(spec, dtype, quant) * 8 / params if params else 0.0


# --------------------------------------------------------------------------------------------
# GGUF: llama.cpp's llama_tensor_get_type
# --------------------------------------------------------------------------------------------


# llama.cpp's tensor categories (tensor_get_category), for GGUF names and transformers modules.
TOKEN_EMBD, OUTPUT = "token_embd", "output"
ATTN_Q, ATTN_K, ATTN_V, ATTN_QKV, ATTN_KV_B, ATTN_OUTPUT = (
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_qkv",
    "attn_kv_b",
    "attn_output",
)
FFN_UP, FFN_GATE, FFN_DOWN, OTHER = "ffn_up", "ffn_gate", "ffn_down", "other"
_ATTN_V_LIKE = frozenset({ATTN_V, ATTN_QKV, ATTN_KV_B})

_ATTENTION_MODULES = {
    "q_proj": ATTN_Q,
    "query": ATTN_Q,
    "k_proj": ATTN_K,
    "key": ATTN_K,
    "v_proj": ATTN_V,
    "value": ATTN_V,
    "qkv_proj": ATTN_QKV,
    "c_attn": ATTN_QKV,
    "query_key_value": ATTN_QKV,
    "Wqkv": ATTN_QKV,
    "W_pack": ATTN_QKV,
    "kv_b_proj": ATTN_KV_B,
    "o_proj": ATTN_OUTPUT,
    "out_proj": ATTN_OUTPUT,
    "c_proj": ATTN_OUTPUT,
    "dense": ATTN_OUTPUT,
}
# A fused gate_up becomes ffn_up (dense Phi-3) or ffn_gate_exps + ffn_up_exps (MoE) in GGUF;
# both categories get the same type in every mix.
_MLP_MODULES = {
    "gate_proj": FFN_GATE,
    "w1": FFN_GATE,
    "up_proj": FFN_UP,
    "w3": FFN_UP,
    "gate_up_proj": FFN_UP,
    "c_fc": FFN_UP,
    "fc1": FFN_UP,
    "dense_h_to_4h": FFN_UP,
    "down_proj": FFN_DOWN,
    "w2": FFN_DOWN,
    "c_proj": FFN_DOWN,
    "fc2": FFN_DOWN,
    "dense_4h_to_h": FFN_DOWN,
}
_HEAD_MODULES = frozenset({"lm_head", "output", "embed_out"})
_MLP_ROLES = frozenset({Role.MLP, Role.EXPERT, Role.SHARED_EXPERT})


def _gguf_category(t: Tensor) -> str:
    name = t.name
    if name == "output.weight":
        return OUTPUT
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return TOKEN_EMBD
    if name.startswith("blk."):
        # a GGUF file's own names: llama.cpp's substring tests, in its order
        for needle, category in (
            ("attn_qkv.weight", ATTN_QKV),
            ("attn_kv_b.weight", ATTN_KV_B),
            ("attn_v.weight", ATTN_V),
            ("attn_k.weight", ATTN_K),
            ("attn_q.weight", ATTN_Q),
            ("attn_output.weight", ATTN_OUTPUT),
            ("ffn_up", FFN_UP),
            ("ffn_gate", FFN_GATE),
            ("ffn_down", FFN_DOWN),
        ):
            if needle in name:
                return category
        return OTHER
    if t.role == Role.EMBEDDING:
        return TOKEN_EMBD
    if t.role == Role.HEAD and t.module in _HEAD_MODULES:
        return OUTPUT
    if t.role == Role.ATTENTION:
        return _ATTENTION_MODULES.get(t.module, OTHER)
    if t.role in _MLP_ROLES:
        if t.module == "dense":  # BERT: intermediate.dense is the up, output.dense the down
            return FFN_UP if ".intermediate." in t.name else FFN_DOWN
        return _MLP_MODULES.get(t.module, OTHER)
    return OTHER


def _gguf_quantizable(t: Tensor) -> bool:
    """llama.cpp's tensor_allows_quantization for the tensors a model inventory holds."""
    # convert_hf_to_gguf squeezes tensors, so (1, n) is 1-D there. llama.cpp also requires a name
    # ending in "weight": biases (and fused experts, whose transformers names end in the
    # projection) are told apart by is_bias here.
    if sum(d != 1 for d in t.shape) < 2 or t.is_bias:
        return False
    if t.role in (Role.NORM, Role.POSITION, Role.ROUTER) or t.module in _ROUTER_MODULES:
        return False
    return "_norm.weight" not in t.name and "ffn_gate_inp" not in t.name


# llama.cpp's fallback for rows that are not a whole number of blocks (tensor_type_fallback).
_FALLBACK = {
    "IQ1_S": "IQ4_NL",
    "IQ1_M": "IQ4_NL",
    "IQ2_XXS": "IQ4_NL",
    "IQ2_XS": "IQ4_NL",
    "IQ2_S": "IQ4_NL",
    "IQ3_XXS": "IQ4_NL",
    "IQ3_S": "IQ4_NL",
    "IQ4_XS": "IQ4_NL",
    "Q2_K": "Q4_0",
    "Q3_K": "Q4_0",
    "TQ1_0": "Q4_0",
    "TQ2_0": "Q4_0",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}

# Mixes that use the IQ2-family rules.
_IQ2_MIXES = frozenset({"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"})
# llama.cpp refuses to write these without an importance matrix (tensor_requires_imatrix). The
# others default to none, as in llama.cpp's published size table (its Llama-3-8B IQ4_XS figure
# has the no-imatrix ffn_down rule).
_IMATRIX_MIXES = _IQ2_MIXES | {"IQ3_XXS", "Q2_K_S"}


@dataclass(frozen=True, slots=True)
class _GgufModel:
    """The model facts llama_tensor_get_type reads, and whether an importance matrix was used."""

    n_gqa: int
    n_expert: int
    n_layer: int
    is_falcon: bool
    is_70b: bool
    tied: bool
    imatrix: bool


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    return (
        i_layer < n_layers // 8
        or i_layer >= 7 * n_layers // 8
        or (i_layer - n_layers // 8) % 3 == 2
    )


def _gguf_model(spec: ModelSpec, categories: Sequence[str], imatrix: bool) -> _GgufModel:
    f = spec.facts
    # llama.cpp labels 80-layer dense GQA models of its llama arch (Llama, Mistral) and 80-layer
    # Qwen2 "70B" (load_arch_hparams); attn_v gets more bits there.
    llama_arch = f.model_type in ("llama", "mistral") and not f.num_experts
    is_70b = f.num_layers == 80 and (
        (llama_arch and f.num_kv_heads != f.num_heads) or f.model_type == "qwen2"
    )
    return _GgufModel(
        n_gqa=f.num_heads // f.num_kv_heads if f.num_kv_heads else 1,
        n_expert=f.num_experts,
        n_layer=f.num_layers,
        is_falcon=f.model_type == "falcon",
        is_70b=is_70b,
        tied=OUTPUT not in categories,
        imatrix=imatrix,
    )


@dataclass(frozen=True, slots=True)
class _Site:
    """Where a tensor sits, as llama_tensor_get_type sees it.

    Attributes:
        category: llama.cpp's tensor category.
        ncols: values per row (ggml ne0).
        i_layer: the block, for the ffn rules.
        i_attn_v: rank among attn_v-like tensors, for the attn_v rules.
        expert: a routed-expert weight (llama.cpp's 3-D ``*_exps`` tensors).
    """

    category: str
    ncols: int
    i_layer: int
    i_attn_v: int
    expert: bool


def _gguf_type_for(ftype: str, new_type: str, site: _Site, m: _GgufModel) -> str:
    """llama_tensor_get_type_impl: the mix's type for one tensor (before the shape fallback)."""
    n_layer, category, i_layer = m.n_layer, site.category, site.i_layer
    if category == OUTPUT or (m.tied and category == TOKEN_EMBD):
        if ftype == "MXFP4_MOE" or m.is_falcon or site.ncols % GGML_TYPE_SIZES[new_type][0]:
            return "Q8_0"
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"):
            return "Q5_K"
        return new_type if new_type == "Q8_0" else "Q6_K"
    if ftype == "MXFP4_MOE":
        return "MXFP4" if site.expert else "Q8_0"
    if category == TOKEN_EMBD:
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "Q2_K"
        if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "IQ3_S"
        if ftype in ("TQ1_0", "TQ2_0"):
            return "Q4_K"
        return new_type
    if ftype in _IQ2_MIXES:
        iq3 = ftype in ("IQ2_S", "IQ2_M")
        if category in _ATTN_V_LIKE:
            if m.n_gqa >= 4 or m.n_expert >= 4:
                return "Q4_K"
            return "IQ3_S" if iq3 else "Q2_K"
        if m.n_expert == 8 and category == ATTN_K:
            return "Q4_K"
        if category == FFN_DOWN:
            return ("IQ3_S" if iq3 else "Q2_K") if i_layer < n_layer // 8 else new_type
        if category == ATTN_OUTPUT:
            if m.n_expert == 8:
                return "Q5_K"
            if ftype in ("IQ1_S", "IQ1_M"):
                return "IQ2_XXS"
            return "IQ3_S" if iq3 else new_type
        return new_type
    if category in _ATTN_V_LIKE:
        return _attn_v_type(ftype, new_type, site.i_attn_v, m)
    if category == ATTN_K:
        if m.n_expert == 8:
            return "Q8_0"
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new_type)
    if category == ATTN_Q:
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, new_type)
    if category == FFN_DOWN:
        return _ffn_down_type(ftype, new_type, i_layer, m)
    if category == ATTN_OUTPUT:
        return _attn_output_type(ftype, new_type, m)
    if category in (FFN_GATE, FFN_UP) and ftype == "IQ3_XS":
        return "IQ3_XXS" if n_layer // 8 <= i_layer < 7 * n_layer // 8 else new_type
    return new_type


def _attn_v_type(ftype: str, new_type: str, i_attn_v: int, m: _GgufModel) -> str:
    gqa4 = m.n_gqa >= 4
    if ftype == "Q2_K":
        new_type = "Q4_K" if gqa4 else "Q3_K"
    elif ftype == "Q2_K_S" and gqa4:
        new_type = "Q4_K"
    elif ftype == "IQ3_XXS":
        # llama.cpp's no-imatrix IQ3_S choice never applies: IQ3_XXS needs an imatrix
        new_type = "Q4_K" if gqa4 else "IQ3_XXS"
    elif (ftype in ("IQ3_XS", "IQ3_S") and gqa4) or ftype == "IQ3_M":
        new_type = "Q4_K"
    elif ftype == "Q3_K_M":
        new_type = "Q5_K" if i_attn_v < 2 else "Q4_K"
    elif ftype == "Q3_K_L" or (ftype in ("IQ4_NL", "IQ4_XS") and gqa4):
        new_type = "Q5_K"
    elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i_attn_v, m.n_layer):
        new_type = "Q6_K"
    elif ftype == "Q4_K_S" and i_attn_v < 4:
        new_type = "Q5_K"
    if m.is_70b and new_type in ("Q3_K", "Q4_K"):
        # 8 query heads share each attn_v there: more bits cost little
        new_type = "Q5_K"
    if m.n_expert == 8:
        new_type = "Q8_0"
    return new_type


def _ffn_down_type(ftype: str, new_type: str, i_layer: int, m: _GgufModel) -> str:
    n_layer, falcon = m.n_layer, m.is_falcon
    first_eighth = i_layer < n_layer // 8
    more = _use_more_bits(i_layer, n_layer)
    if ftype == "Q2_K":
        return "Q3_K"
    if ftype == "Q2_K_S":
        return "Q4_K" if first_eighth else new_type
    if ftype == "Q3_K_M":
        if i_layer < n_layer // 16:
            return "Q5_K"
        return "Q4_K" if not falcon or more else "Q3_K"
    if ftype == "IQ3_M" and (first_eighth or (m.n_expert == 8 and more)):
        return "Q4_K"
    if ftype == "Q3_K_L":
        return "Q4_K" if falcon else "Q5_K"
    if ftype == "Q4_K_M":
        if falcon:
            return "Q6_K" if i_layer < n_layer // 16 else "Q5_K" if more else "Q4_K"
        return "Q6_K" if more else new_type
    if first_eighth and ftype in ("IQ4_NL", "IQ4_XS") and not m.imatrix:
        return "Q5_K"
    if ftype == "Q5_K_M" and more:
        return "Q6_K"
    if ftype == "Q4_K_S" and not falcon and first_eighth:
        return "Q5_K"
    if ftype in ("Q4_0", "Q5_0") and m.imatrix and first_eighth:
        # llama.cpp guards the first ffn_down layers of imatrix Q4_0 / Q5_0 files
        return "Q4_1" if ftype == "Q4_0" else "Q5_1"
    return new_type


_ATTN_OUTPUT_Q5K_FOR_8_EXPERTS = frozenset(
    [
        "Q2_K",
        "IQ3_XS",
        "IQ3_XXS",
        "Q3_K_S",
        "Q3_K_M",
        "IQ4_NL",
        "Q4_K_S",
        "Q4_K_M",
        "IQ3_S",
        "IQ3_M",
        "IQ4_XS",
    ]
)


def _attn_output_type(ftype: str, new_type: str, m: _GgufModel) -> str:
    if m.is_falcon:
        return "Q4_K" if ftype == "Q3_K_L" else new_type
    if m.n_expert == 8:
        return "Q5_K" if ftype in _ATTN_OUTPUT_Q5K_FOR_8_EXPERTS else new_type
    return {
        "Q2_K": "Q3_K",
        "IQ3_XXS": "IQ3_S",
        "Q3_K_M": "Q4_K",
        "Q3_K_L": "Q5_K",
        "IQ3_M": "Q4_K",
    }.get(ftype, new_type)


def _fallback(name: str, type_name: str, ncols: int) -> str:
    """tensor_type_fallback: a type whose blocks divide the row, as llama.cpp chooses it."""
    block = GGML_TYPE_SIZES[type_name][0]
    if ncols % block == 0:
        return type_name
    if type_name not in _FALLBACK:
        raise WorkloadError(
            f"llama.cpp cannot quantize {name} to {type_name}: rows of {ncols} values are not "
            f"a multiple of {block}"
        )
    fallback = _FALLBACK[type_name]
    return fallback if ncols % GGML_TYPE_SIZES[fallback][0] == 0 else "F16"


def _assign_gguf(spec: ModelSpec, scheme: Scheme, imatrix: bool) -> tuple[StoredTensor, ...]:
    """Types as llama-quantize gives them, from a 16-bit GGUF that convert_hf_to_gguf wrote
    (norms, biases, routers and 1-D tensors are F32 there and are never quantized)."""
    ftype, default = scheme.name, scheme.gguf_type
    is_quantized = GGML_TYPE_SIZES[default][0] > 1
    categories = [_gguf_category(t) for t in spec.tensors]
    model = _gguf_model(spec, categories, imatrix)
    # llama.cpp visits tensors sorted by block, then name, and counts attn_v-like tensors as it
    # goes; dense models count ffn tensors the same way, MoE models read the block from the name
    # (so do the IQ2 mixes' ffn_down rule here, where llama.cpp counts one ffn_down per block).
    order = sorted(range(len(spec.tensors)), key=lambda i: (_block(spec.tensors[i]), i))
    attn_v_rank: dict[int, int] = {}
    ffn_rank: dict[int, int] = {}
    ffn_seen: dict[str, int] = {}
    for i in order:
        category = categories[i]
        if category in _ATTN_V_LIKE:
            attn_v_rank[i] = len(attn_v_rank)
        elif category in (FFN_UP, FFN_GATE, FFN_DOWN):
            ffn_rank[i] = ffn_seen.get(category, 0)
            ffn_seen[category] = ffn_rank[i] + 1
    out: list[StoredTensor] = []
    for i, t in enumerate(spec.tensors):
        shape = _in_out_shape(spec, t)
        if not _gguf_quantizable(t):
            out.append(_plain(t, "F32", shape))
            continue
        type_name = default
        if is_quantized:
            i_layer = t.layer if model.n_expert > 1 and t.layer is not None else ffn_rank.get(i, 0)
            site = _Site(
                category=categories[i],
                ncols=shape[-1],
                i_layer=i_layer,
                i_attn_v=attn_v_rank.get(i, 0),
                expert=t.role == Role.EXPERT,
            )
            type_name = _gguf_type_for(ftype, default, site, model)
            type_name = _fallback(t.name, type_name, shape[-1])
        out.append(_plain(t, type_name, shape))
    return tuple(out)


def _block(t: Tensor) -> int:
    return -1 if t.layer is None else t.layer
