"""What each tensor of a model stores under a workload dtype and a ``--quant`` scheme, exactly:
the scheme's metadata (row, group and block scales, zeros, absmax, ``g_idx``, global scales)
included, the tensors it leaves unquantized in the workload dtype, and a pre-quantized
checkpoint's own storage: its stored tensors when headers were read, else its format
(``formats.StoredFormat``) applied to the tensors synthesized from config.json, tensor by tensor.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

from vramgui.core import dtypes, formats, gguf_mix
from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.model import ModelSpec, Role, Tensor
from vramgui.core.workload import GGUF_OF_FAMILY, TRANSFORMERS_VERSIONS, quant_family


@dataclass(frozen=True, slots=True)
class TensorStorage:
    """One weight tensor as stored under a scheme.

    Attributes:
        tensor: the tensor of the model's inventory.
        storage: its storage: a type name (``BF16``, ``Q4_K``...) or a scheme name (``nf4``).
        bytes: exact bytes, the scheme's metadata (scales, zeros, absmax, g_idx) included.
    """

    tensor: Tensor
    storage: str
    bytes: int


# transformers' GPT-2 uses Conv1D, whose weight is stored (in, out), not (out, in).
_CONV1D_MODULES = {"gpt2": frozenset({"c_attn", "c_proj", "c_fc"})}
# MoE classes that hold their stacked experts (experts, in, out): transformers' experts
# implementations with ``is_transposed=True`` and Llama 4's.
_TRANSPOSED_EXPERTS = frozenset({"gpt_oss", "llama4", "llama4_text", "aria", "aria_text"})


def _in_out_shape(spec: ModelSpec, t: Tensor) -> tuple[int, ...]:
    """The tensor's shape with the input features innermost (ggml's ne0 last)."""
    if len(t.shape) == 2 and t.module in _CONV1D_MODULES.get(spec.facts.model_type, ()):
        return (t.shape[1], t.shape[0])
    if (
        len(t.shape) == 3
        and t.role is Role.EXPERT
        and not t.is_bias
        and spec.facts.model_type in _TRANSPOSED_EXPERTS
    ):
        return (t.shape[0], t.shape[2], t.shape[1])
    return t.shape


def _stored_halves(spec: ModelSpec, t: Tensor) -> int:
    """How many matrices a checkpoint stores per expert for a stacked expert projection: the
    fused gate and up projections are two (each quantized with its own scales), except where
    the checkpoint stores them fused."""
    if (
        t.role is Role.EXPERT
        and len(t.shape) == 3
        and t.module == "gate_up_proj"
        and spec.facts.model_type not in formats.FUSED_EXPERT_CHECKPOINTS
    ):
        return 2
    return 1


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
    groups = _ceil_div(inp, group) if group else 1
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


def matrix_bytes(scheme: dtypes.Scheme, shape: tuple[int, ...], halves: int = 1) -> int:
    """Exact bytes of a weight of ``shape`` (input features innermost; a leading dimension stacks
    matrices) stored under ``scheme``, every side tensor its library writes included.

    ``halves`` splits each matrix's rows into that many matrices stored apart (a checkpoint's
    separate gate and up projections of a fused expert stack).
    """
    if scheme.layout == "bnb8":
        return _bnb_int8_bytes(shape)
    if scheme.layout == "bnb4":
        return _bnb_4bit_bytes(shape, scheme.double_quant)
    matrices, out, inp = _quantized_layout(shape)
    if halves > 1 and out % halves == 0:
        matrices, out = matrices * halves, out // halves
    if scheme.layout in ("gptq", "awq"):
        return matrices * _gptq_bytes(
            (out, inp), scheme.bits, scheme.group_size, scheme.layout == "awq"
        )
    return matrices * _one_matrix(scheme, out, inp)


def _one_matrix(scheme: dtypes.Scheme, out: int, inp: int) -> int:
    """One (out, in) matrix: its values, scales, zero points, group index and per-tensor extras."""
    per_int32 = 32 // scheme.bits if scheme.bits else 1
    if scheme.layout == "packed-int":
        # compressed-tensors' pack_to_int32 along the input: int32 (out, in / pack factor)
        values = out * _ceil_div(inp, per_int32) * 4
    elif scheme.layout in ("mxfp4", "nvfp4"):
        values = out * _ceil_div(inp, 2)  # two FP4 values per byte
    else:  # float8, int8: a byte per value
        values = out * inp
    groups = _ceil_div(inp, scheme.group_size) if scheme.group_size else 1
    if scheme.scale == "tensor":
        scales = 1
    elif scheme.scale == "block":
        rows, cols = scheme.block
        scales = _ceil_div(out, rows) * _ceil_div(inp, cols)
    elif scheme.scale == "group":
        scales = out * groups
    else:  # channel
        scales = out
    zeros = 0
    if scheme.zero_points:
        # packed along the output (pack_to_int32(packed_dim=0)), or one int8 per scale
        zeros = _ceil_div(out, per_int32) * groups * 4 if scheme.layout == "packed-int" else scales
    g_idx = 4 * inp if scheme.g_idx else 0
    return values + scales * scheme.scale_bytes + zeros + g_idx + scheme.extra_bytes


def _plain(t: Tensor, type_name: str, shape: tuple[int, ...] | None = None) -> TensorStorage:
    return TensorStorage(
        t, type_name, dtypes.storage_bytes(t.shape if shape is None else shape, type_name)
    )


def _unquantized(t: Tensor, base: str) -> TensorStorage:
    """A tensor in the workload dtype; integer buffers keep their own type."""
    if t.dtype is not None and dtypes.canonical_type(t.dtype) not in dtypes.FLOAT_TYPES:
        return _plain(t, dtypes.canonical_type(t.dtype))
    return _plain(t, base)


def _known_scheme(name: str) -> dtypes.Scheme | None:
    try:
        return dtypes.get_scheme(name)
    except WorkloadError:
        return None


def _same_scheme(a: str, b: str) -> bool:
    known_a, known_b = _known_scheme(a), _known_scheme(b)
    if known_a is None or known_b is None:
        return a.lower() == b.lower()
    return known_a.name == known_b.name


def logical_tensors(spec: ModelSpec) -> tuple[Tensor, ...] | None:
    """The model's tensors as it holds them unquantized, or None where they are not known (a
    quantized safetensors checkpoint whose config could not be read)."""
    if spec.logical_tensors:
        return spec.logical_tensors
    if _synthesized(spec) or from_gguf(spec):
        return spec.tensors  # synthesized from config.json, or GGUF's own logical shapes
    return None


def _synthesized(spec: ModelSpec) -> bool:
    """Whether the tensors were built from config.json (where only a few buffers, fp32 routers,
    state their dtype), not read from a checkpoint's headers (where every tensor does)."""
    return any(t.dtype is None for t in spec.tensors)


def from_gguf(spec: ModelSpec) -> bool:
    """Whether the spec is a GGUF file's: it names its file type, or (without one) its most
    common ggml type."""
    stated = spec.quantization or ""
    own = _known_scheme(stated)
    return dtypes.names_ggml_type(stated) or (own is not None and own.family == "gguf")


def overridden(spec: ModelSpec, quant: str) -> bool:
    """Whether ``quant`` replaces the format a pre-quantized checkpoint is stored in."""
    if spec.quantization is None:
        return False
    chosen = dtypes.get_scheme(quant)
    return chosen.family != "none" and not _same_scheme(chosen.name, spec.quantization)


def keeps_stored(quant: str, stored: str | None) -> bool:
    """Whether ``quant`` is the GGUF type llama.cpp runs a checkpoint stored as ``stored`` as,
    its quantized weights kept as they are (``MXFP4_MOE`` for an MXFP4 checkpoint)."""
    family = quant_family(stored) if stored is not None else None
    return family is not None and GGUF_OF_FAMILY.get(family) == quant.upper()


def _checkpoint_plan(spec: ModelSpec, chosen: dtypes.Scheme) -> str:
    """How a quantized checkpoint's tensors are stored under the chosen scheme: "stored" (its
    stored tensors as they are), "format" (its own format applied to tensors synthesized from
    config.json), "own" (a checkpoint named by a scheme alone), or "override" (the chosen
    scheme applied to its unquantized tensors).

    Raises:
        WorkloadError: the chosen scheme cannot apply to this checkpoint.
    """
    stated = spec.quantization or ""
    synthesized = _synthesized(spec)
    if not overridden(spec, chosen.name):
        if not synthesized:
            return "stored"
        if spec.stored_format is not None:
            return "format"
        own = _known_scheme(stated)
        return "own" if own is not None and own.family != "none" else "stored"
    if from_gguf(spec) and chosen.family != "gguf":
        raise WorkloadError(
            Message(
                "{name} is a GGUF file ({stated}); only another GGUF type can be estimated from "
                "it: use {none} (or {stated}), or a GGUF type",
                name=spec.name or "this model",
                stated=stated,
                none=Setting("quant", "none"),
            )
        )
    if logical_tensors(spec) is None:
        raise WorkloadError(
            Message(
                "{name} is already quantized as {stated} and its unquantized tensors are not "
                "known; use {none} (or {stated})",
                name=spec.name or "this model",
                stated=stated,
                none=Setting("quant", "none"),
            )
        )
    return "override"


def assign_storage(
    spec: ModelSpec, dtype: str, quant: str, *, imatrix: bool = False
) -> tuple[TensorStorage, ...]:
    """The storage of every tensor of ``spec`` under the workload's dtype and ``--quant``.

    A pre-quantized checkpoint (``spec.quantization`` set) keeps its own storage under ``none``
    or its own scheme: its stored tensors when headers were read, else its format
    (``spec.stored_format``) applied to the tensors synthesized from config.json. Another
    scheme replaces its format: it is applied to the model's unquantized tensors (for a GGUF
    file, another GGUF type only). ``imatrix`` says a GGUF file was made with an importance
    matrix (some mixes then differ); the types llama.cpp cannot make without one always assume
    one.

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
) -> tuple[TensorStorage, ...]:
    if dtype not in dtypes.WORKLOAD_TYPES:
        raise WorkloadError(
            f"unknown dtype {dtype!r}; choose one of {', '.join(dtypes.WORKLOAD_TYPES)}"
        )
    base = dtypes.WORKLOAD_TYPES[dtype]
    scheme = dtypes.get_scheme(quant)
    tensors = spec.tensors
    if spec.quantization is not None:
        plan = _checkpoint_plan(spec, scheme)
        if plan == "stored":
            return tuple(
                _plain(t, dtypes.canonical_type(t.dtype)) if t.dtype else _plain(t, base)
                for t in tensors
            )
        if plan == "format":
            return tuple(_formatted(spec, t, base) for t in tensors)
        if plan == "own":
            scheme = dtypes.get_scheme(spec.quantization)
        else:
            tensors = logical_tensors(spec) or tensors
            spec = dataclasses.replace(spec, tensors=tensors)
    if scheme.family == "none":
        return tuple(_unquantized(t, base) for t in tensors)
    if scheme.family == "gguf":
        shapes = [_in_out_shape(spec, t) for t in tensors]
        types = gguf_mix.gguf_types(spec, scheme, shapes, imatrix=imatrix)
        return tuple(
            _plain(t, type_name, shape)
            for t, type_name, shape in zip(tensors, types, shapes, strict=True)
        )
    out: list[TensorStorage] = []
    for t in tensors:
        if quantized_by(scheme, t):
            shape = _in_out_shape(spec, t)
            out.append(
                TensorStorage(t, scheme.name, matrix_bytes(scheme, shape, _stored_halves(spec, t)))
            )
        else:
            out.append(_unquantized(t, base))
    return tuple(out)


def quantized_by(scheme: dtypes.Scheme, t: Tensor) -> bool:
    """Whether the library that applies ``scheme`` (at load, or writing a checkpoint) quantizes
    ``t``: the linear layers of the quantized roles but routers and the indexer's weights_proj;
    the weight-only integer schemes also keep Gated DeltaNet's per-head gates."""
    if t.role not in dtypes.QUANTIZED_ROLES or not formats.is_linear(t):
        return False
    if t.module in dtypes.UNQUANTIZED_MODULES:
        return False
    return not (
        scheme.layout in dtypes.WEIGHT_ONLY_INT_LAYOUTS and t.module in dtypes.GATE_PROJECTIONS
    )


# The MoE types whose transformers 4 modelling code already held the routed experts as stacked
# parameters or custom modules rather than one nn.Linear per expert projection (4.57:
# GptOssExperts, Llama4TextExperts, DbrxExperts, GraniteMoeParallelExperts,
# JetMoeParallelExperts, Qwen3VLMoeTextExperts).
STACKED_EXPERTS_V4 = frozenset(
    {
        "dbrx",
        "gpt_oss",
        "granitemoe",
        "granitemoehybrid",
        "granitemoeshared",
        "jetmoe",
        "llama4",
        "llama4_text",
        "qwen3_vl_moe",
        "qwen3_vl_moe_text",
    }
)


def experts_stacked(model_type: str, transformers_version: str) -> bool:
    """Whether the transformers release holds ``model_type``'s routed experts as stacked
    parameters: every MoE type from 5.0 (its MoE refactor fused them into
    ``experts.gate_up_proj`` / ``experts.down_proj``), a few before it
    (``STACKED_EXPERTS_V4``)."""
    return not transformers_version.startswith("4.") or model_type in STACKED_EXPERTS_V4


def bitsandbytes_quantizes(scheme: dtypes.Scheme, t: Tensor, stacked: bool = True) -> bool:
    """Whether transformers' bitsandbytes holds ``t`` in ``scheme``: it replaces nn.Linear
    layers only, so routed experts held as stacked parameters (``stacked``, see
    :func:`experts_stacked`) stay in the model dtype; experts held as nn.Linear per expert
    (transformers 4) are quantized like any linear layer."""
    return (not stacked or t.role is not Role.EXPERT) and quantized_by(scheme, t)


def bitsandbytes_storage(
    spec: ModelSpec, dtype: str, quant: str, transformers_version: str = TRANSFORMERS_VERSIONS[-1]
) -> tuple[TensorStorage, ...]:
    """``assign_storage`` as transformers' bitsandbytes loads the model: routed experts held as
    stacked parameters by the release (:func:`experts_stacked`) in ``dtype``."""
    stored = assign_storage(spec, dtype, quant)
    if not experts_stacked(spec.facts.model_type, transformers_version):
        return stored
    base = dtypes.WORKLOAD_TYPES[dtype]
    scheme = dtypes.get_scheme(quant)
    return tuple(
        _unquantized(st.tensor, base)
        if st.storage == scheme.name and st.tensor.role is Role.EXPERT
        else st
        for st in stored
    )


def _formatted(spec: ModelSpec, t: Tensor, base: str) -> TensorStorage:
    """One synthesized tensor as the checkpoint's format stores it."""
    fmt = spec.stored_format
    assert fmt is not None
    scheme = fmt.scheme_for(t, spec.facts.model_type)
    if scheme is None:
        if fmt.known and t.dtype is None:
            # what the checkpoint keeps unquantized is stored in its own dtype
            return _plain(t, dtypes.WORKLOAD_TYPES.get(fmt.dtype, base))
        return _unquantized(t, base)
    shape = _in_out_shape(spec, t)
    return TensorStorage(t, scheme.name, matrix_bytes(scheme, shape, _stored_halves(spec, t)))


def format_label(spec: ModelSpec, dtype: str) -> str:
    """The checkpoint's own format in words: "MXFP4 experts, bf16 elsewhere", "FP8 blocks
    128x128, bf16 elsewhere"; "" for a checkpoint stored unquantized."""
    fmt = spec.stored_format
    if fmt is None or spec.quantization is None:
        return ""
    rest = fmt.dtype if fmt.known else dtype
    if not fmt.known:
        return f"{fmt.method} (not modelled: counted in {rest})"
    logical = logical_tensors(spec)
    if logical is None:
        return fmt.scheme.label if fmt.scheme else fmt.method
    covered: dict[str, Counter[str]] = {}
    quantizable: Counter[str] = Counter()
    for t in logical:
        if not formats.is_linear(t):
            continue
        part = _PART_NAMES.get(t.role, "other layers")
        quantizable[part] += t.numel
        scheme = fmt.scheme_for(t, spec.facts.model_type)
        if scheme is not None:
            covered.setdefault(scheme.label, Counter())[part] += t.numel
    if not covered:
        return f"{fmt.method}, nothing quantized"
    parts = []
    ranked = sorted(covered.items(), key=lambda kv: -sum(kv[1].values()))
    for label, by_part in ranked:
        whole = len(covered) == 1 and all(
            by_part[p] == n for p, n in quantizable.items() if p not in ("head", "vision")
        )
        if whole:
            parts.append(label)
        else:
            main = [p for p, _ in by_part.most_common(3)]
            parts.append(f"{label} {' and '.join(main)}")
    return f"{', '.join(parts)}, {rest} elsewhere"


_PART_NAMES = {
    Role.ATTENTION: "attention",
    Role.MLP: "MLP",
    Role.EXPERT: "experts",
    Role.SHARED_EXPERT: "shared experts",
    Role.HEAD: "head",
    Role.ENCODER: "vision",
    Role.MIXER: "mixers",
    Role.OTHER: "other layers",
}


# The Weights choices, as safetensors headers and config.json's torch_dtype name them.
HEADER_DTYPES = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}
CONFIG_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def header_dtype(spec: ModelSpec) -> str | None:
    """The Weights choice most of the stored tensors' weights are in, as their headers say
    ("bf16", "fp16", "fp32"), or None where no tensor states one of them, or where the tensors
    come from config.json (most state no dtype; the few that do, a router's float32 bias, say
    nothing of the rest)."""
    counts: Counter[str] = Counter()
    stated = total = 0
    for t in spec.tensors:
        total += t.numel
        stated += t.numel if t.dtype else 0
        name = HEADER_DTYPES.get(t.dtype or "")
        if name is not None:
            counts[name] += t.numel
    if not counts or 2 * stated < total:
        return None
    return counts.most_common(1)[0][0]


def config_dtype(spec: ModelSpec) -> str | None:
    """The Weights choice config.json's ``torch_dtype`` names, or None."""
    return CONFIG_DTYPES.get(spec.facts.torch_dtype or "")


def weight_bytes(spec: ModelSpec, dtype: str, quant: str) -> int:
    """Bytes of all weights of ``spec`` under the dtype and scheme (see ``assign_storage``)."""
    return sum(s.bytes for s in assign_storage(spec, dtype, quant))


def bits_per_weight(spec: ModelSpec, dtype: str, quant: str) -> float:
    """Stored bits per parameter over the whole model, metadata included (for display)."""
    params = spec.parameters
    return weight_bytes(spec, dtype, quant) * 8 / params if params else 0.0


def bits_by_scheme(spec: ModelSpec, dtype: str) -> dict[str, float]:
    """``bits_per_weight`` of ``spec`` under every ``--quant`` scheme that can store it (the
    quantization choices' labels: Q4_K_M and Q4_K_S differ on every model, though their
    default type is the same Q4_K), computed once per spec and dtype."""

    def compute() -> dict[str, float]:
        bits: dict[str, float] = {}
        for name in dtypes.SCHEMES:
            try:
                bits[name] = bits_per_weight(spec, dtype, name)
            except WorkloadError:
                continue  # a scheme this checkpoint or its shapes refuse
        return bits

    return spec.cached(("bits_by_scheme", dtype), compute)
