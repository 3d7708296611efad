"""Pre-quantized checkpoints as the libraries write them, built without vramgui's code.

The model's modules come from transformers itself (the model built on the meta device from its
config.json); each library's rule says which of them it quantizes, and each library's layout says
which tensors it writes for one quantized (out, in) linear layer, named and typed as in its own
code:

- transformers MXFP4 (``Mxfp4GptOssExperts``, the checkpoint's fused ``*_blocks`` / ``*_scales``),
- transformers fine-grained FP8 (``FP8Linear``: ``weight_scale_inv`` per block, or one per tensor
  with ``activation_scale``), fbgemm FP8 (``weight_scale`` per row, ``input_scale_ub``),
- compressed-tensors' compressors (``pack-quantized``: ``weight_packed`` int32, ``weight_scale``
  in the model dtype, ``weight_shape``, ``weight_zero_point``, ``weight_g_idx``;
  ``float-quantized`` / ``int-quantized``; ``nvfp4-pack-quantized`` with its global scales),
- NVIDIA ModelOpt as vLLM loads it (``weight_scale_2``, ``input_scale``),
- AutoAWQ's GEMM packing, GPTQ's (``qweight``, ``qzeros``, ``scales``, ``g_idx``),
- bitsandbytes' serialized quant state (``absmax``, ``nested_absmax``, ``quant_map``,
  ``nested_quant_map``, the JSON ``quant_state``) and LLM.int8's ``SCB``.

Only the byte count of each tensor matters here, so none is ever allocated. Needs transformers
(the measure extra); benchmarks/stored_formats.py and tests/core/test_formats.py use it.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable

ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "U8": 1, "I8": 1}
ITEMSIZE |= {"F8_E4M3": 1, "F8_E8M0": 1}

Tensors = dict[str, tuple[str, tuple[int, ...]]]
# One quantized linear layer: (module path, out features, in features) -> its stored tensors.
Layout = Callable[[str, int, int], Tensors]


def total_bytes(tensors: Tensors) -> int:
    return sum(math.prod(shape) * ITEMSIZE[dtype] for dtype, shape in tensors.values())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------ layouts


def fine_grained_fp8(block: tuple[int, int] | None, scale: str = "F32", static: bool = False):
    def layout(m: str, out: int, inp: int) -> Tensors:
        t: Tensors = {f"{m}.weight": ("F8_E4M3", (out, inp))}
        if block is None:
            t[f"{m}.weight_scale_inv"] = ("F32", ())
        else:
            t[f"{m}.weight_scale_inv"] = (scale, (cdiv(out, block[0]), cdiv(inp, block[1])))
        if static:
            t[f"{m}.activation_scale"] = ("F32", ())
        return t

    return layout


def fbgemm_fp8(m: str, out: int, inp: int) -> Tensors:
    return {
        f"{m}.weight": ("F8_E4M3", (out, inp)),
        f"{m}.weight_scale": ("F32", (out, 1)),
        f"{m}.input_scale_ub": ("F32", (1,)),
    }


def ct_fp8(strategy: str, static_input: bool = False):
    def layout(m: str, out: int, inp: int) -> Tensors:
        t: Tensors = {f"{m}.weight": ("F8_E4M3", (out, inp))}
        t[f"{m}.weight_scale"] = ("BF16", (out, 1) if strategy == "channel" else (1,))
        if static_input:
            t[f"{m}.input_scale"] = ("BF16", (1,))
        return t

    return layout


def ct_packed(bits: int, group: int, symmetric: bool = True, actorder: bool = False):
    """compressed-tensors ``pack-quantized`` (W4A16 / W8A16)."""
    pack = 32 // bits

    def layout(m: str, out: int, inp: int) -> Tensors:
        groups = cdiv(inp, group) if group else 1
        t: Tensors = {
            f"{m}.weight_packed": ("I32", (out, cdiv(inp, pack))),
            f"{m}.weight_shape": ("I64", (2,)),
            f"{m}.weight_scale": ("BF16", (out, groups)),
        }
        if not symmetric:
            t[f"{m}.weight_zero_point"] = ("I32", (cdiv(out, pack), groups))
        if actorder:
            t[f"{m}.weight_g_idx"] = ("I32", (inp,))
        return t

    return layout


def ct_int8(m: str, out: int, inp: int) -> Tensors:
    """compressed-tensors ``int-quantized`` W8A8: int8 weights, a scale per output channel."""
    return {f"{m}.weight": ("I8", (out, inp)), f"{m}.weight_scale": ("BF16", (out, 1))}


def ct_nvfp4(m: str, out: int, inp: int) -> Tensors:
    return {
        f"{m}.weight_packed": ("U8", (out, inp // 2)),
        f"{m}.weight_scale": ("F8_E4M3", (out, inp // 16)),
        f"{m}.weight_global_scale": ("F32", (1,)),
        f"{m}.input_global_scale": ("F32", (1,)),
    }


def modelopt_nvfp4(m: str, out: int, inp: int) -> Tensors:
    return {
        f"{m}.weight": ("U8", (out, inp // 2)),
        f"{m}.weight_scale": ("F8_E4M3", (out, inp // 16)),
        f"{m}.weight_scale_2": ("F32", ()),
        f"{m}.input_scale": ("F32", ()),
    }


def modelopt_fp8(m: str, out: int, inp: int) -> Tensors:
    return {
        f"{m}.weight": ("F8_E4M3", (out, inp)),
        f"{m}.weight_scale": ("F32", ()),
        f"{m}.input_scale": ("F32", ()),
    }


def awq(group: int):
    def layout(m: str, out: int, inp: int) -> Tensors:
        return {
            f"{m}.qweight": ("I32", (inp, out // 8)),
            f"{m}.qzeros": ("I32", (inp // group, out // 8)),
            f"{m}.scales": ("F16", (inp // group, out)),
        }

    return layout


def gptq(bits: int, group: int):
    pack = 32 // bits

    def layout(m: str, out: int, inp: int) -> Tensors:
        return {
            f"{m}.qweight": ("I32", (inp // pack, out)),
            f"{m}.qzeros": ("I32", (cdiv(inp, group), out // pack)),
            f"{m}.scales": ("F16", (cdiv(inp, group), out)),
            f"{m}.g_idx": ("I32", (inp,)),
        }

    return layout


# The JSON quant state bitsandbytes serializes beside each 4-bit weight (its length varies with
# the values; this is the length of a typical one).
BNB_QUANT_STATE_JSON = 180


def bnb_4bit(kind: str, double_quant: bool):
    def layout(m: str, out: int, inp: int) -> Tensors:
        n = out * inp
        blocks = cdiv(n, 64)
        t: Tensors = {
            f"{m}.weight": ("U8", (cdiv(n, 2), 1)),
            f"{m}.weight.quant_map": ("F32", (16,)),
            f"{m}.weight.quant_state.bitsandbytes__{kind}": ("U8", (BNB_QUANT_STATE_JSON,)),
        }
        if double_quant:
            t[f"{m}.weight.absmax"] = ("U8", (blocks,))
            t[f"{m}.weight.nested_absmax"] = ("F32", (cdiv(blocks, 256),))
            t[f"{m}.weight.nested_quant_map"] = ("F32", (256,))
        else:
            t[f"{m}.weight.absmax"] = ("F32", (blocks,))
        return t

    return layout


def bnb_int8(m: str, out: int, inp: int) -> Tensors:
    return {
        f"{m}.weight": ("I8", (out, inp)),
        f"{m}.SCB": ("F32", (out,)),
        f"{m}.weight_format": ("U8", (1,)),
    }


# ------------------------------------------------------------------------------ which modules


def transformers_rule(modules_to_not_convert: list[str]):
    """transformers' quantizers: every linear layer but the head and the listed modules."""
    from transformers.quantizers.quantizers_utils import should_convert_module

    def quantized(module: str) -> bool:
        return module != "lm_head" and should_convert_module(module, modules_to_not_convert)

    return quantized


def compressed_tensors_rule(targets: list[str], ignore: list[str]):
    """compressed-tensors' ``_match_name``: ``re:`` regexes (``re.match``) or exact names."""

    def match(name: str, patterns: list[str]) -> bool:
        return any(
            re.match(p[3:], name) if p.startswith("re:") else p == name or p == "Linear"
            for p in patterns
        )

    return lambda module: match(module, targets) and not match(module, ignore)


def modelopt_rule(exclude: list[str]):
    """vLLM's reading of ModelOpt's ``exclude_modules``: the name, a part of it, a wildcard."""

    def excluded(module: str) -> bool:
        return any(p in module or fnmatch.fnmatchcase(module, p) for p in exclude)

    return lambda module: not excluded(module)


def decoder_only(module: str) -> bool:
    """GPTQ and AWQ quantize the linear layers of the decoder blocks."""
    return ".layers." in module


# ------------------------------------------------------------------------------ checkpoints


def meta_model(config: dict):
    """The transformers model of ``config`` on the meta device (no memory)."""
    import torch
    import transformers

    values = dict(config)
    values.pop("quantization_config", None)
    model_type = values.pop("model_type")
    cfg = transformers.AutoConfig.for_model(model_type, **values)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.tie_weights()
    return model


def checkpoint(
    config: dict,
    layout: Layout,
    quantized: Callable[[str], bool],
    *,
    experts_only: bool = False,
    fused_experts: bool = False,
    dtype: str = "BF16",
) -> Tensors:
    """name -> (dtype, shape) of the checkpoint a library writes for ``config``.

    Linear layers ``quantized`` names are stored by ``layout``; the stacked experts transformers
    holds (``experts.gate_up_proj``, ``experts.down_proj``) are stored one projection per expert,
    as their checkpoints store them, or fused where ``fused_experts`` (gpt-oss). The rest is
    stored in ``dtype``.
    """
    import torch

    model = meta_model(config)
    out: Tensors = {}
    for name, param in model.named_parameters():
        path, _, attr = name.rpartition(".")
        module = model.get_submodule(path)
        shape = tuple(param.shape)
        if isinstance(module, torch.nn.Linear) and attr == "weight":
            if not experts_only and quantized(path):
                out |= layout(path, *shape)
                continue
        elif (
            attr in ("gate_up_proj", "down_proj", "up_proj")
            and len(shape) == 3
            and quantized(f"{path}.0.{attr}")
            and quantized(path)
        ):
            out |= _experts(path, attr, shape, layout, fused_experts)
            continue
        out[name] = (dtype, shape)
    return out


def _experts(path: str, attr: str, shape: tuple[int, ...], layout: Layout, fused: bool) -> Tensors:
    experts, rows, cols = shape
    if fused:  # gpt-oss: one MXFP4 tensor per projection, experts stacked, (E, in, out) held
        inp, outp = rows, cols
        return {
            f"{path}.{attr}_blocks": ("U8", (experts, outp, inp // 32, 16)),
            f"{path}.{attr}_scales": ("U8", (experts, outp, inp // 32)),
        }
    found: Tensors = {}
    for e in range(experts):
        if attr == "gate_up_proj":
            found |= layout(f"{path}.{e}.gate_proj", rows // 2, cols)
            found |= layout(f"{path}.{e}.up_proj", rows // 2, cols)
        else:
            found |= layout(f"{path}.{e}.{attr}", rows, cols)
    return found
