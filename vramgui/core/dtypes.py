"""Number formats and quantization schemes with their real storage.

Two vocabularies meet here. *Storage types* say how one tensor's numbers are laid out: the
workload dtypes (``fp32``, ``fp16``, ``bf16``), the safetensors dtype names (``BF16``, ``I32``,
``F8_E4M3``...) and every ggml type (``Q4_K`` = 144 bytes per block of 256 values, ...).
*Schemes* are what ``--quant`` chooses, named as the libraries name them: a rule that gives
every tensor of a model its storage, metadata included (row, group and block scales, zeros,
absmax, ``g_idx``, global scales), and decides which tensors stay unquantized. The same schemes
describe how a pre-quantized checkpoint stores its weights (formats.py reads them from its
``quantization_config``). What each tensor of a model stores under a scheme is worked out in
storage.py, the GGUF mixes in gguf_mix.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.core.errors import ConfigError, WorkloadError
from vramgui.core.model import Role

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

FLOAT_TYPES = frozenset({"F64", "F32", "F16", "BF16"})
"""The float types a workload dtype replaces; integer buffers keep their own type."""

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2}
"""Bytes per value of the workload's 16/32-bit dtypes."""

WORKLOAD_TYPES = {"fp32": "F32", "fp16": "F16", "bf16": "BF16"}
"""The storage type of each workload dtype."""


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
    """A ``--quant`` choice, or how one checkpoint format stores a weight matrix.

    Attributes:
        name: the ``--quant`` value.
        family: what the engines see: "none", "bitsandbytes", "gptq-awq", "fp8", "mxfp4",
            "nvfp4", "int" (compressed-tensors integer weights) or "gguf".
        label: short text for the UI.
        nominal_bits_per_weight: bits per quantized weight, metadata included, for display; the
            real figure for a model is ``bits_per_weight``.
        description: one line on what it stores.
        bits: bits of a quantized weight (0 where not applicable).
        group_size: values sharing one scale (bitsandbytes block, GPTQ / AWQ / compressed-tensors
            group, MXFP4's 32, NVFP4's 16), 0 if none.
        double_quant: bitsandbytes 4-bit with quantized absmax (QLoRA's default).
        gguf_type: for GGUF, the ggml type most tensors get (llama.cpp's default type).
        layout: how a matrix is laid out in storage (``storage.matrix_bytes``): "bnb4", "bnb8",
            "gptq", "awq", "float8", "mxfp4", "nvfp4", "packed-int", "int8", "fp4-experts" or
            "" (GGUF and none).
        scale: what one scale covers: "tensor", "channel", "group" or "block".
        block: for block scales, the (rows, columns) each scale covers.
        scale_bytes: bytes of one scale.
        zero_points: zero points stored beside the scales (asymmetric integer weights).
        g_idx: a group index per input column (activation ordering).
        extra_bytes: bytes stored once per matrix beside it (per-tensor input and global scales,
            compressed-tensors' ``weight_shape``).
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
    layout: str = ""
    scale: str = ""
    block: tuple[int, int] = (0, 0)
    scale_bytes: int = 0
    zero_points: bool = False
    g_idx: bool = False
    extra_bytes: int = 0


def _type_bits(ggml_type: str) -> float:
    block, block_bytes = GGML_TYPE_SIZES[ggml_type]
    return block_bytes * 8 / block


def _gptq(name: str, family: str, *, bits: int, group: int, label: str, what: str) -> Scheme:
    awq = name.startswith("awq")
    return Scheme(
        name=name,
        family=family,
        label=label,
        # fp16 scale + packed zero per group; GPTQ's g_idx (32 bits per input row) is left out
        nominal_bits_per_weight=round(bits + (16 + bits) / group, 3),
        description=what,
        bits=bits,
        group_size=group,
        layout="awq" if awq else "gptq",
        scale="group",
        scale_bytes=2,
        zero_points=True,
        g_idx=not awq,
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
        layout="bnb4",
    )


def int_scheme(
    name: str,
    *,
    bits: int,
    group: int,
    activations: bool = False,
    symmetric: bool = True,
    actorder: bool = False,
    scale_bytes: int = 2,
) -> Scheme:
    """compressed-tensors integer weights (llm-compressor's W4A16 / W8A16 / W8A8 presets).

    Weight-only schemes pack their values into int32 (``pack-quantized``: eight 4-bit or four
    8-bit values each) and store each weight's original shape; W8A8 stores one int8 per value
    (``int-quantized``). Scales take the model's dtype (``scale_bytes``), one per output channel
    (``group`` 0) or per group of input columns. ``name`` gains the group (``w4a16-g32``) where
    it is not the preset's.
    """
    if group and name == "w4a16" and group != 128:
        name = f"w4a16-g{group}"
    per = f"per group of {group}" if group else "per output channel"
    packed = "" if activations else "int32-packed "
    weights = f"{packed}{bits}-bit integer weights"
    acts = ", int8 activations quantized per token at run time" if activations else ""
    return Scheme(
        name=name,
        family="int",
        label=f"{name.split('-')[0].upper()}{f' g{group}' if group else ''} (compressed-tensors)",
        nominal_bits_per_weight=round(bits + (8 * scale_bytes / group if group else 0), 3),
        description=f"{weights}, a {8 * scale_bytes}-bit scale {per}{acts}",
        bits=bits,
        group_size=group,
        layout="int8" if activations else "packed-int",
        scale="group" if group else "channel",
        scale_bytes=scale_bytes,
        zero_points=not symmetric,
        g_idx=actorder,
        # pack-quantized stores each weight's original shape (two int64)
        extra_bytes=0 if activations else 16,
    )


def fp8_block_scheme(rows: int, cols: int, *, scale_bytes: int) -> Scheme:
    """Fine-grained FP8 (DeepSeek-V3 style): a scale per ``rows`` x ``cols`` block.

    ``scale_bytes`` is 4 for fp32 scales (``weight_scale_inv``), 1 for E8M0 (``ue8m0``).
    """
    kind = "E8M0" if scale_bytes == 1 else f"fp{8 * scale_bytes}"
    return Scheme(
        name="fp8-block",
        family="fp8",
        label=f"FP8 blocks {rows}x{cols}",
        nominal_bits_per_weight=round(8 + 8 * scale_bytes / (rows * cols), 4),
        description=f"FP8 E4M3 weights with an {kind} scale per {rows}x{cols} block "
        "(DeepSeek-V3, Qwen3-FP8; transformers' FineGrainedFP8Config)",
        bits=8,
        layout="float8",
        scale="block",
        block=(rows, cols),
        scale_bytes=scale_bytes,
    )


def nvfp4_scheme(*, extra_bytes: int) -> Scheme:
    """NVFP4: FP4 values, an FP8 (E4M3) scale per 16 and fp32 per-tensor scales.

    ``extra_bytes`` counts those per-tensor scales: 8 in ModelOpt's W4A4 checkpoints
    (``weight_scale_2``, ``input_scale``), 4 in its W4A16 ones.
    """
    return Scheme(
        name="nvfp4",
        family="nvfp4",
        label="NVFP4",
        nominal_bits_per_weight=4.5,
        description="NVIDIA FP4 (E2M1) values, 2 per byte, an FP8 scale per block of 16 and "
        "fp32 per-tensor scales (ModelOpt, compressed-tensors NVFP4)",
        bits=4,
        group_size=16,
        layout="nvfp4",
        scale="group",
        scale_bytes=1,
        extra_bytes=extra_bytes,
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
    ("MXFP4_MOE", "MXFP4", "MXFP4 routed experts, Q8_0 elsewhere (the gpt-oss GGUFs)"),
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
            layout="bnb8",
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
        int_scheme("w4a16", bits=4, group=128),
        int_scheme("w8a16", bits=8, group=0),
        int_scheme("w8a8", bits=8, group=0, activations=True),
        Scheme(
            "fp8",
            "fp8",
            "FP8 (E4M3)",
            8.0,
            "FP8 E4M3 weights with an fp32 scale per output channel (fbgemm FP8, "
            "compressed-tensors FP8_DYNAMIC)",
            bits=8,
            layout="float8",
            scale="channel",
            scale_bytes=4,
        ),
        fp8_block_scheme(128, 128, scale_bytes=4),
        Scheme(
            "fp8-tensor",
            "fp8",
            "FP8 per tensor",
            8.0,
            "FP8 E4M3 weights with one fp32 scale per tensor and a static input scale "
            "(ModelOpt FP8, vLLM's --quantization fp8)",
            bits=8,
            layout="float8",
            scale="tensor",
            scale_bytes=4,
            extra_bytes=4,
        ),
        Scheme(
            "mxfp4",
            "mxfp4",
            "MXFP4",
            4.25,
            "OCP MX FP4 (E2M1) values, 2 per byte, and an E8M0 scale per block of 32 "
            "(gpt-oss's experts, transformers' Mxfp4Config; compressed-tensors MXFP4)",
            bits=4,
            group_size=32,
            layout="mxfp4",
            scale="group",
            scale_bytes=1,
        ),
        nvfp4_scheme(extra_bytes=8),
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

_GROUP_SUFFIX = re.compile(r"^(gptq-int4|gptq-int8|awq-int4|w4a16)-g(\d+)$")


def names_ggml_type(name: str) -> bool:
    """Whether a checkpoint's stated quantization is a ggml type as GGUF writes it (upper case:
    a GGUF file without a file type names its most common one). ``MXFP4`` is then GGUF's block
    type, where ``mxfp4`` is the safetensors format."""
    return name in GGML_TYPE_SIZES


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
        if base.family == "int":
            return int_scheme(base.name, bits=base.bits, group=group)
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
        "(GPTQ, AWQ and w4a16 also take a group size, e.g. gptq-int4-g32)"
    )


# Roles whose linear layers the bitsandbytes / GPTQ / AWQ / FP8 schemes quantize; embeddings,
# norms, biases, heads (lm_head) and MoE routers stay in the workload dtype, as transformers'
# quantizers and the published GPTQ / AWQ / FP8 checkpoints leave them. The projections of
# linear-attention, Mamba and short-convolution mixers are nn.Linear layers like attention's:
# transformers' bitsandbytes and FP8 replace every nn.Linear but the head, vLLM builds them with
# the model's quant_config (GatedDeltaNetAttention, MambaMixer2; ShortConv since vLLM PR 48917),
# GPTQModel's and ModelOpt's default recipes quantize them.
QUANTIZED_ROLES = frozenset({Role.ATTENTION, Role.MLP, Role.EXPERT, Role.SHARED_EXPERT, Role.MIXER})
# Qwen-MoE's gate of the shared expert is a router too (GGUF's ffn_gate_inp_shexp).
ROUTER_MODULES = frozenset({"shared_expert_gate"})
# Linear layers no scheme quantizes: the routers above, and the indexer's weights_proj of
# DeepSeek-V3.2-style sparse attention (transformers' _keep_in_fp32_modules; vLLM builds its
# wk_weights_proj with quant_config=None).
UNQUANTIZED_MODULES = ROUTER_MODULES | {"weights_proj"}
# Gated DeltaNet's per-head gate projections (one output row per value head): the weight-only
# integer schemes keep them 16-bit. GPTQModel's module trees mark them unquantized (qwen3_next:
# in_proj_ba, qwen3_5: in_proj_a / in_proj_b, commit f4c327a), llm-compressor's W4A16 GPTQ / AWQ
# recipes for Qwen 3.5+ ignore them, and AutoRound keeps every layer whose sides are not
# multiples of 32 (48 heads) in 16 bits.
GATE_PROJECTIONS = frozenset({"in_proj_a", "in_proj_b", "in_proj_ba"})
WEIGHT_ONLY_INT_LAYOUTS = frozenset({"gptq", "awq", "packed-int"})
