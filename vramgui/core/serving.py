"""What each inference engine does with a checkpoint's format, on the GPU it runs on.

The weights an engine holds are not always the weights a checkpoint stores:

- vLLM keeps every format as stored. Where the GPU lacks the tensor cores for it (FP8 before
  Ada, FP4 before Blackwell) it runs weight-only Marlin kernels on the same bytes; it pads
  gpt-oss's MXFP4 experts to the tile its MoE kernels need (Marlin: rows to 128, columns to 256
  on Ampere and Ada; FlashInfer: both to 256 on Blackwell; Triton: rows to 64 on Hopper, where
  it also keeps the experts' biases in float32 and, from 0.11.1, every scale twice: as loaded
  and swizzled), and it needs compute capability 8.0 for FP8, FP4 and MXFP4 weights. A scheme
  it applies at load leaves Mamba (1)'s mixers in 16 bits: its MambaMixer takes no
  quant_config.
- transformers' bitsandbytes quantizes ``nn.Linear`` layers only, so the experts a MoE class
  holds as stacked parameters stay 16-bit. transformers keeps MXFP4 only for gpt-oss's experts, on compute capability 7.5 and later, with
  its Triton kernels installed (``triton`` >= 3.4 and ``kernels``); otherwise it dequantizes them
  to bf16 (``Mxfp4HfQuantizer.validate_environment``). It keeps fine-grained FP8 on compute
  capability 8.9 and later and dequantizes it below (``FineGrainedFP8HfQuantizer``); fbgemm FP8
  loads on 9.0 and later only. compressed-tensors checkpoints are decompressed to the model dtype
  at each layer's first forward pass (``CompressedTensorsHfQuantizer``). bitsandbytes, GPTQ and
  AWQ weights stay as stored.
- llama.cpp runs GGUF files only (``workload.engine_conflicts``); an MXFP4 checkpoint is its
  MXFP4_MOE GGUF there (``workload.engine_quant``). A multimodal checkpoint's towers and
  projectors are not in that file but in an mmproj GGUF beside it, loaded only with
  ``--mmproj`` (``Engine.towers_apart``): the estimate serves the language model alone, text
  only, and says what the mmproj would add.

Multi-token-prediction layers a checkpoint stores are loaded by vLLM for MTP speculative decoding
only (``Workload.mtp``); otherwise they are left out and said so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from vramgui.core import dtypes, storage, units
from vramgui.core.engines import StartUp, engine
from vramgui.core.errors import Message, Setting, WorkloadError, phrase
from vramgui.core.model import ModelSpec, Role
from vramgui.core.storage import TensorStorage
from vramgui.core.vllm.rules import RULES
from vramgui.core.workload import GPU_ARCHS, TRANSFORMERS_VERSIONS, Workload

# Compute capabilities from which the formats run natively (FP8, FP4 tensor cores).
_FP8_NATIVE = (8, 9)
_FP4_NATIVE = (10, 0)
# The least compute capability each engine needs for a format's weights.
_VLLM_MIN = (8, 0)  # Fp8Config, ModelOpt, Mxfp4Config: get_min_capability() == 80
_MXFP4_TRANSFORMERS_MIN = (7, 5)
_FBGEMM_MIN = (9, 0)


@dataclass(frozen=True, slots=True)
class Served:
    """The weights as an engine holds them.

    Attributes:
        storage: every weight tensor as the engine holds it (MTP layers included when loaded).
        notes: what the engine does with the format and why, for the user.
    """

    storage: tuple[TensorStorage, ...]
    notes: tuple[str, ...]


def checkpoint_kv_dtype(spec: ModelSpec, w: Workload) -> str | None:
    """The KV cache dtype the engine takes from the checkpoint (under ``--kv-dtype auto``, and for
    vLLM's compressed-tensors path under any), or None where it keeps the dtype asked for.

    - vLLM (0.20 rules): a ModelOpt checkpoint's ``kv_cache_quant_algo: FP8`` (in config.json or
      ``hf_quant_config.json``, which vLLM reads into the same config) sets ``auto`` to fp8
      (``resolve_kv_cache_dtype_string`` in engine/arg_utils.py, FP8 the only algorithm mapped);
      a compressed-tensors ``kv_cache_scheme`` makes every attention layer cache in fp8,
      overriding ``--kv-cache-dtype`` (attention/layer.py, pull request 30141). 0.10 and 0.11
      keep ``auto`` at the model dtype.
    - SGLang (0.5 line): ``configure_kv_cache_dtype`` takes fp8 where the quantization config's
      ``kv_cache_quant_algo`` is FP8 (ModelOpt; compressed-tensors has no such attribute).
    - transformers caches in the compute dtype and llama.cpp runs GGUF files: neither.
    """
    fmt = spec.stored_format
    if w.kv_dtype == "fp8" or fmt is None or not fmt.kv_cache_fp8:
        return None
    if spec.quantization is None or storage.overridden(spec, w.quant):
        return None  # another scheme in place of the checkpoint's
    startup = engine(w.engine).startup
    if startup is StartUp.VLLM and w.vllm_version not in ("0.10", "0.11"):
        if fmt.method == "compressed-tensors":
            return "fp8"  # whatever --kv-cache-dtype says
        return "fp8" if fmt.method == "modelopt" and w.kv_dtype == "auto" else None
    if startup is StartUp.SGLANG and w.sglang_version == "0.5.6" and w.kv_dtype == "auto":
        return "fp8" if fmt.method == "modelopt" else None
    return None


def checkpoint_kv_note(spec: ModelSpec, w: Workload) -> str:
    """What the engine does with the checkpoint's KV-cache scheme under ``auto`` (the setting
    :func:`checkpoint_kv_dtype` found one for)."""
    fmt = spec.stored_format
    assert fmt is not None
    key = (
        "compressed-tensors kv_cache_scheme"
        if fmt.method == "compressed-tensors"
        else "ModelOpt KV-cache scheme (kv_cache_quant_algo / kv_cache_scheme)"
    )
    # Under another --kv-dtype, vLLM's own flag is what it ignores.
    asked = "under {kv}" if w.kv_dtype == "auto" else "whatever --kv-cache-dtype says (not {kv})"
    return Message(
        "The checkpoint's {key} is FP8: {engine} caches K and V in fp8 "
        + asked
        + " (one byte per element).",
        key=key,
        engine=engine(w.engine).name,
        kv=Setting("kv_dtype", "auto") if w.kv_dtype == "auto" else w.kv_dtype,
    )


def _kind(spec: ModelSpec, w: Workload) -> str:
    """The library format the engine loads: the checkpoint's method, or the chosen scheme's."""
    if spec.quantization is not None and not storage.overridden(spec, w.quant):
        if spec.stored_format is not None:
            return spec.stored_format.method
        family = dtypes.get_scheme(w.quant).family if w.quant != "none" else None
        return family or _family(spec.quantization)
    family = dtypes.get_scheme(w.quant).family
    return {"int": "compressed-tensors", "gptq-awq": "gptq"}.get(family, family)


def _family(name: str) -> str:
    if dtypes.names_ggml_type(name):
        return "gguf"
    try:
        return dtypes.get_scheme(name).family
    except WorkloadError:
        return "gguf" if name.upper() in dtypes.GGML_TYPE_SIZES else "none"


def _gpu(w: Workload) -> tuple[str, tuple[int, int] | None]:
    cc = GPU_ARCHS.get(w.gpu_arch)
    if cc is None:
        return "", None
    return f"{w.gpu_arch.capitalize()} (compute capability {cc[0]}.{cc[1]})", cc


def served_storage(spec: ModelSpec, w: Workload) -> Served:
    """The weights ``w.engine`` holds for ``spec`` under ``w``, with what it did to them.

    Raises:
        WorkloadError: the engine cannot load the checkpoint on the GPU given.
    """
    return spec.cached(
        (
            "served_storage",
            w.dtype,
            w.quant,
            w.engine,
            w.gpu_arch,
            w.mtp,
            w.tp,
            w.vllm_version,
            w.transformers_version,
        ),
        lambda: _served(spec, w),
    )


def loaded(stored: tuple[TensorStorage, ...], w: Workload) -> tuple[TensorStorage, ...]:
    """The tensors of ``stored`` that ``w.engine`` loads as the model: all of them, but the
    towers and projectors where the engine keeps them in a file of their own (llama.cpp's
    mmproj GGUF, loaded only with ``--mmproj``)."""
    if not engine(w.engine).towers_apart:
        return stored
    return tuple(st for st in stored if st.tensor.role is not Role.ENCODER)


def _towers_apart(
    stored: tuple[TensorStorage, ...], w: Workload
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    """The model without the towers an engine loads from a file of their own, and what that
    file would add."""
    kept = loaded(stored, w)
    apart = [st for st in stored if st.tensor.role is Role.ENCODER]
    if len(kept) == len(stored) or not apart:
        return stored, []
    size = sum(st.bytes for st in apart)
    params = sum(st.tensor.numel for st in apart)
    return kept, [
        f"{engine(w.engine).name} loads the language model alone: the checkpoint's vision / "
        f"audio towers and projectors ({params / 1e6:,.0f}M parameters) are a separate mmproj "
        f"GGUF ({_gib(size)} at 16 bits, as convert_hf_to_gguf.py --mmproj writes it), loaded "
        "only with --mmproj; not counted, nor its compute buffer for an image (clip.cpp)."
    ]


def _served(spec: ModelSpec, w: Workload) -> Served:
    stored = storage.assign_storage(spec, w.dtype, w.quant)
    kind = _kind(spec, w)
    notes: list[str] = []
    eng = engine(w.engine)
    stored, said = _towers_apart(stored, w)
    notes += said
    if eng.eager_pytorch:
        dequantize, said = _transformers(spec, w, kind, stored)
        notes += said
        if dequantize:
            stored = _dequantized(spec, w, stored, notes)
        elif kind == "bitsandbytes":
            stored, said = _bnb_experts(spec, w, stored)
            notes += said
    elif eng.startup is StartUp.VLLM:
        stored, said = _vllm(spec, w, kind, stored)
        notes += said
    elif eng.startup is StartUp.SGLANG and kind not in ("none", "gguf"):
        notes.append(
            f"SGLang's {kind} weights are counted as the checkpoint stores them; what its "
            "kernels repack or pad on loading (Marlin, MXFP4 layouts) is not modelled for SGLang."
        )
    stored, said = _mtp(spec, w, stored)
    return Served(stored, (*notes, *said))


def _gib(n: int) -> str:
    return f"{n / units.GiB:,.1f} GiB"


def _dequantized_bytes(spec: ModelSpec, w: Workload) -> int | None:
    logical = storage.logical_tensors(spec)
    if logical is None:
        return None
    plain = dataclasses.replace(
        spec, tensors=logical, quantization=None, stored_format=None, logical_tensors=()
    )
    return storage.weight_bytes(plain, w.dtype, "none")


def _dequantized(
    spec: ModelSpec, w: Workload, stored: tuple[TensorStorage, ...], notes: list[str]
) -> tuple[TensorStorage, ...]:
    logical = storage.logical_tensors(spec)
    if logical is None:
        notes.append(
            "The model's unquantized tensors are not known, so the weights are counted as "
            "stored; dequantized they take more."
        )
        return stored
    plain = dataclasses.replace(
        spec, tensors=logical, quantization=None, stored_format=None, logical_tensors=()
    )
    return storage.assign_storage(plain, w.dtype, "none")


def _bnb_experts(
    spec: ModelSpec, w: Workload, stored: tuple[TensorStorage, ...]
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    """transformers' bitsandbytes replaces ``nn.Linear`` layers only (``replace_with_bnb_linear``,
    ``param_needs_quantization``): the experts a MoE class holds as stacked parameters stay in the
    model dtype (``storage.bitsandbytes_storage``)."""
    if spec.quantization is not None and not storage.overridden(spec, w.quant):
        return stored, []  # a bitsandbytes checkpoint: stored as it is
    held = storage.bitsandbytes_storage(spec, w.dtype, w.quant, w.transformers_version)
    added = sum(h.bytes for h in held) - sum(s.bytes for s in stored)
    if not added:
        return stored, []
    older = not storage.experts_stacked(spec.facts.model_type, TRANSFORMERS_VERSIONS[0])
    return held, [
        phrase(
            "transformers' bitsandbytes quantizes nn.Linear layers only: "
            f"{spec.facts.model_type}'s experts are stacked parameters in transformers "
            f"{w.transformers_version} and stay in {w.dtype} ({_gib(added)} more than quantized",
            *(
                (
                    "; transformers 4 held them as nn.Linear layers, which it quantizes: ",
                    Setting("transformers_version"),
                    ").",
                )
                if older
                else (").",)
            ),
        )
    ]


def _transformers(
    spec: ModelSpec, w: Workload, kind: str, stored: tuple[TensorStorage, ...]
) -> tuple[bool, list[str]]:
    """Whether transformers dequantizes the weights, and why."""
    gpu, cc = _gpu(w)
    dtype = w.dtype
    if kind == "mxfp4":
        if spec.facts.model_type != "gpt_oss":
            return True, [
                f"transformers keeps MXFP4 for gpt-oss's experts only; it holds "
                f"{spec.facts.model_type}'s weights in {dtype}."
            ]
        if cc is not None and cc < _MXFP4_TRANSFORMERS_MIN:
            return True, [
                f"transformers runs MXFP4 on compute capability 7.5 and later; on {gpu} it "
                f"dequantizes the experts to {dtype}."
            ]
        full = _dequantized_bytes(spec, w)
        fallback = f" ({_gib(full)} of weights)" if full else ""
        return False, [
            "transformers keeps the MXFP4 experts with its Triton kernels (triton >= 3.4 and "
            f"the kernels package); without them it dequantizes them to bf16{fallback}."
        ]
    if kind == "fbgemm_fp8" and cc is not None and cc < _FBGEMM_MIN:
        raise WorkloadError(
            Message(
                "transformers loads fbgemm FP8 checkpoints on compute capability 9.0 and later "
                "only (H100, B200); {gpu} is older: use {vllm}",
                gpu=gpu,
                vllm=Setting("engine", "vllm"),
            )
        )
    if kind in ("fp8", "fbgemm_fp8"):
        if cc is not None and cc < _FP8_NATIVE:
            return True, [
                f"transformers runs FP8 weights on compute capability 8.9 and later (RTX 40, "
                f"L40S, H100); on {gpu} it dequantizes them to {dtype}."
            ]
        if cc is None:
            full = _dequantized_bytes(spec, w)
            tail = f" ({_gib(full)})" if full else ""
            return False, [
                "transformers keeps FP8 weights on compute capability 8.9 and later (RTX 40, "
                f"L40S, H100); before that (A100, RTX 30) it dequantizes them to {dtype}{tail}."
            ]
        return False, []
    if kind == "compressed-tensors":
        return True, [
            f"transformers decompresses compressed-tensors weights to {dtype} at each layer's "
            "first forward pass; counted decompressed (vLLM keeps them as stored)."
        ]
    return False, []


def _vllm(
    spec: ModelSpec, w: Workload, kind: str, stored: tuple[TensorStorage, ...]
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    gpu, cc = _gpu(w)
    families = {s.storage for s in stored}
    fp8 = kind in ("fp8", "fbgemm_fp8") or any(_family(f) == "fp8" for f in families)
    fp4 = kind == "nvfp4" or any(_family(f) == "nvfp4" for f in families)
    mxfp4 = any(_family(f) == "mxfp4" for f in families)
    notes: list[str] = []
    if (fp8 or fp4 or mxfp4) and cc is not None and cc < _VLLM_MIN:
        what = "FP8" if fp8 else "FP4"
        raise WorkloadError(
            f"vLLM runs {what} weights on compute capability 8.0 and later; {gpu} is older"
        )
    if fp8 and cc is not None and cc < _FP8_NATIVE:
        notes.append(
            f"{gpu} has no FP8 tensor cores: vLLM runs the FP8 weights through Marlin's "
            "weight-only kernels, and they stay FP8."
        )
    if (fp4 or mxfp4) and cc is not None and cc < _FP4_NATIVE and not (mxfp4 and cc >= (9, 0)):
        notes.append(
            f"{gpu} has no FP4 tensor cores: vLLM runs the 4-bit weights through Marlin's "
            "weight-only kernels, and they stay 4-bit."
        )
    if kind == "mxfp4":  # Mxfp4MoEMethod's layers (not DeepSeek-V4's FP4 experts in FP8 blocks)
        stored, said = _mxfp4_padding(spec, w, stored, cc)
        notes += said
        if cc is not None and (9, 0) <= cc < (10, 0):
            stored, said = _mxfp4_triton_hopper(spec, w, stored)
            notes += said
    stored, said = _mamba1_mixers(spec, w, stored)
    return stored, notes + said


# Mamba (1)'s projections: x_proj and dt_proj exist in its mixer only (Mamba 2 fuses them into
# in_proj).
_MAMBA1_PROJECTIONS = frozenset({"x_proj", "dt_proj"})


def _mamba1_mixers(
    spec: ModelSpec, w: Workload, stored: tuple[TensorStorage, ...]
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    """vLLM builds Mamba (1)'s mixer (``MambaMixer``: Mamba, Falcon-Mamba, Jamba) without the
    model's quant_config, so a scheme applied at load leaves its projections in the model dtype
    (vLLM 0.8.5 to 0.34; Mamba 2's and Gated DeltaNet's projections are quantized)."""
    if w.quant == "none" or (
        spec.quantization is not None and not storage.overridden(spec, w.quant)
    ):
        return stored, []
    if not any(
        st.tensor.role is Role.MIXER and st.tensor.module in _MAMBA1_PROJECTIONS for st in stored
    ):
        return stored, []
    base = dtypes.WORKLOAD_TYPES[w.dtype]
    out = list(stored)
    changed = [
        i
        for i, st in enumerate(stored)
        if st.tensor.role is Role.MIXER and not st.tensor.is_bias and st.storage != base
    ]
    for i in changed:
        t = out[i].tensor
        out[i] = TensorStorage(t, base, dtypes.storage_bytes(t.shape, base))
    if not changed:
        return stored, []
    added = sum(out[i].bytes - stored[i].bytes for i in changed)
    return tuple(out), [
        f"vLLM builds Mamba's mixer layers without quantization: their projections stay in "
        f"{w.dtype} ({_gib(added)} more than quantized)."
    ]


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


_TRITON_ROWS = 64  # Mxfp4MoEMethod pads the intermediate size to 64 for the Triton backend


def _mxfp4_padding(
    spec: ModelSpec, w: Workload, stored: tuple[TensorStorage, ...], cc: tuple[int, int] | None
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    """vLLM's Mxfp4MoEMethod pads each expert's intermediate (rows) and hidden (columns) sizes
    to its kernels' tile: Triton on Hopper 64 / none, FlashInfer on Blackwell 256 / 256, Marlin
    on Ampere and Ada 128 / 256."""
    facts = spec.facts
    inter = facts.moe_intermediate_size or facts.intermediate_size
    hidden = facts.hidden_size
    if not inter or not hidden:
        return stored, []
    part = max(1, inter // w.tp)
    if cc is None or cc >= (11, 0) or (9, 0) <= cc < (10, 0):
        backend, rows, cols = "Triton", _TRITON_ROWS, 1
    elif cc >= (10, 0):
        backend, rows, cols = "FlashInfer", 256, 256
    else:
        backend, rows, cols = "Marlin", 128, 256
    inter_pad, hidden_pad = _round_up(part, rows), _round_up(hidden, cols)
    if (inter_pad, hidden_pad) == (part, hidden):
        return stored, []
    grow = inter_pad * hidden_pad / (part * hidden)
    out = []
    for st in stored:
        t = st.tensor
        factor = 1.0
        if t.role is Role.EXPERT and st.storage == "mxfp4":
            factor = grow
        elif t.role is Role.EXPERT and t.is_bias:
            factor = hidden_pad / hidden if t.module == "down_proj" else inter_pad / part
        out.append(dataclasses.replace(st, bytes=round(st.bytes * factor)) if factor != 1 else st)
    added = sum(s.bytes for s in out) - sum(s.bytes for s in stored)
    return tuple(out), [
        f"vLLM's {backend} MXFP4 kernels pad each expert to {inter_pad} x {hidden_pad} (from "
        f"{part} x {hidden}): {_gib(added)} more than stored."
    ]


# triton_kernels' HopperMXScaleLayout pads a scale tensor's rows to 2 x num_warps x 2 x 8 and its
# columns to 2; vLLM swizzles with num_warps 8 (_swizzle_mxfp4).
_HOPPER_SCALE_ROWS = 2 * 8 * 2 * 8
_HOPPER_SCALE_COLS = 2
_MXFP4_BLOCK = 32


def _mxfp4_triton_hopper(
    spec: ModelSpec, w: Workload, stored: tuple[TensorStorage, ...]
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    """What vLLM's Triton MXFP4 MoE backend holds on Hopper besides the experts as stored.

    ``process_weights_after_loading`` turns the expert biases to float32, and hands the weights
    and scales to triton_kernels' ``convert_layout``. Where the version swizzles them
    (:attr:`vllm.rules.Rules.mxfp4_hopper_swizzle`) both are copied into the Hopper layouts;
    vLLM deletes the loaded weights but not the loaded scales (``w13_weight_scale``,
    ``w2_weight_scale`` stay registered), so every scale is held twice, the copy padded to the
    layout's tile. Read in vLLM 0.11.0, 0.11.1 (mxfp4.py) and 0.24.0
    (fused_moe/oracle/mxfp4.py).
    """
    facts = spec.facts
    inter = facts.moe_intermediate_size or facts.intermediate_size
    hidden = facts.hidden_size
    if not inter or not hidden:
        return stored, []
    part = _round_up(max(1, inter // w.tp), _TRITON_ROWS)
    swizzle = RULES[w.vllm_version].mxfp4_hopper_swizzle
    out = []
    for st in stored:
        t = st.tensor
        if t.role is not Role.EXPERT:
            out.append(st)
        elif t.is_bias and st.storage != "F32":
            out.append(TensorStorage(t, "F32", t.numel * 4))
        elif swizzle and st.storage == "mxfp4" and t.shape:
            experts = t.shape[0]
            if t.module == "down_proj":  # w2: hidden rows of intermediate / 32 scales
                rows, cols = hidden, part // _MXFP4_BLOCK
            else:  # w13: 2 x intermediate rows of hidden / 32 scales
                rows, cols = 2 * part, hidden // _MXFP4_BLOCK
            copy = (
                experts * _round_up(rows, _HOPPER_SCALE_ROWS) * _round_up(cols, _HOPPER_SCALE_COLS)
            )
            # One rank's copy, counted whole as the stored bytes are (split over the ranks).
            out.append(dataclasses.replace(st, bytes=st.bytes + copy * w.tp))
        else:
            out.append(st)
    added = sum(s.bytes for s in out) - sum(s.bytes for s in stored)
    if not added:
        return stored, []
    said = "turns the expert biases to float32"
    if swizzle:
        said = (
            "keeps each expert scale twice (as loaded, and swizzled into triton_kernels' "
            f"Hopper layout, padded to {_HOPPER_SCALE_ROWS}-row tiles) and " + said
        )
    return tuple(out), [f"vLLM's Triton MXFP4 backend on Hopper {said}: {_gib(added)} more."]


def _mtp(
    spec: ModelSpec, w: Workload, stored: tuple[TensorStorage, ...]
) -> tuple[tuple[TensorStorage, ...], list[str]]:
    """The MTP layers, added where they are loaded; said where they are not."""
    layers = sorted({t.layer for t in spec.mtp_tensors if t.layer is not None})
    own = tuple(t for t in spec.mtp_tensors if t.role not in (Role.EMBEDDING, Role.HEAD))
    if not own:
        return stored, []
    sub = dataclasses.replace(spec, tensors=own, logical_tensors=(), mtp_tensors=())
    try:
        extra = storage.assign_storage(sub, w.dtype, w.quant)
    except WorkloadError:
        extra = storage.assign_storage(sub, w.dtype, "none")
    size = _gib(sum(s.bytes for s in extra))
    count = max(len(layers), 1)
    what = f"{count} multi-token-prediction layer{'s' if count > 1 else ''}"
    eng = engine(w.engine)
    if w.mtp and eng.loads_mtp:
        return (*stored, *extra), [
            f"The checkpoint's {what} ({size}) are loaded for MTP speculative decoding and "
            "counted; they share the model's embedding and head."
        ]
    if w.mtp:
        return stored, [
            f"{eng.name} does not load the checkpoint's {what} ({size}); only "
            "vLLM's MTP speculative decoding does."
        ]
    return stored, [
        f"The checkpoint also stores {what} ({size}), loaded only for speculative decoding "
        "(vLLM's --speculative-config method mtp); not counted."
    ]
