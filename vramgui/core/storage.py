"""What each tensor of a model stores under a workload dtype and a ``--quant`` scheme, exactly:
the scheme's metadata (row scales, group scales and zeros, absmax, ``g_idx``) included, the
tensors it leaves unquantized in the workload dtype, and a pre-quantized checkpoint's own
storage kept."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from vramgui.core import dtypes, gguf_mix
from vramgui.core.errors import WorkloadError
from vramgui.core.model import ModelSpec, Tensor


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


def _scheme_matrix_bytes(scheme: dtypes.Scheme) -> Callable[[tuple[int, ...]], int]:
    if scheme.name == "int8":
        return _bnb_int8_bytes
    if scheme.family == "bitsandbytes":
        return lambda shape: _bnb_4bit_bytes(shape, scheme.double_quant)
    if scheme.family == "gptq-awq":
        awq = scheme.name.startswith("awq")
        return lambda shape: _gptq_bytes(shape, scheme.bits, scheme.group_size, awq)
    return _fp8_bytes


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


def _scheme_for_checkpoint(spec: ModelSpec, chosen: dtypes.Scheme) -> dtypes.Scheme | None:
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
    from_gguf = stated.upper() in dtypes.GGML_TYPE_SIZES or (
        own is not None and own.family == "gguf"
    )
    if from_gguf and chosen.family == "gguf":
        return chosen
    raise WorkloadError(
        f"{spec.name or 'this model'} is already quantized as {stated}; "
        f"use --quant none (or {stated})"
    )


def assign_storage(
    spec: ModelSpec, dtype: str, quant: str, *, imatrix: bool = False
) -> tuple[TensorStorage, ...]:
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
) -> tuple[TensorStorage, ...]:
    if dtype not in dtypes.WORKLOAD_TYPES:
        raise WorkloadError(
            f"unknown dtype {dtype!r}; choose one of {', '.join(dtypes.WORKLOAD_TYPES)}"
        )
    base = dtypes.WORKLOAD_TYPES[dtype]
    scheme = dtypes.get_scheme(quant)
    if spec.quantization is not None:
        applied = _scheme_for_checkpoint(spec, scheme)
        if applied is None:
            return tuple(
                _plain(t, dtypes.canonical_type(t.dtype)) if t.dtype else _plain(t, base)
                for t in spec.tensors
            )
        scheme = applied
    if scheme.family == "none":
        return tuple(_unquantized(t, base) for t in spec.tensors)
    if scheme.family == "gguf":
        shapes = [_in_out_shape(spec, t) for t in spec.tensors]
        types = gguf_mix.gguf_types(spec, scheme, shapes, imatrix=imatrix)
        return tuple(
            _plain(t, type_name, shape)
            for t, type_name, shape in zip(spec.tensors, types, shapes, strict=True)
        )
    matrix_bytes = _scheme_matrix_bytes(scheme)
    out: list[TensorStorage] = []
    for t in spec.tensors:
        if (
            t.is_matrix
            and t.role in dtypes.QUANTIZED_ROLES
            and t.module not in dtypes.ROUTER_MODULES
        ):
            out.append(TensorStorage(t, scheme.name, matrix_bytes(_in_out_shape(spec, t))))
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
