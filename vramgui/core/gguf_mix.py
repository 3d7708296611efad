"""llama.cpp's quantization mixes: the ggml type ``llama-quantize`` gives each tensor of a
model for a GGUF file type (``Q4_K_M`` keeps attn_v and half the ffn_down at Q6_K, ...),
ported from ``llama_tensor_get_type`` (``src/llama-quant.cpp``) rule by rule, with the
fallback for rows that are not a whole number of blocks.

A multimodal checkpoint's vision / audio towers and projectors are not in that file:
convert_hf_to_gguf.py writes the language model to the main GGUF and the towers to a separate
mmproj GGUF (``--mmproj``), 16-bit unless asked otherwise, which llama-quantize never sees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.errors import WorkloadError
from vramgui.core.model import ModelSpec, Role, Tensor

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
# The short convolutions of Mamba, Gated DeltaNet and LFM2 mixers (2-D once convert_hf_to_gguf
# squeezes them): llama.cpp never quantizes its ssm_conv1d and shortconv.conv tensors.
_MIXER_CONVOLUTIONS = frozenset({"conv1d", "conv"})
# What convert_hf_to_gguf.py gives an mmproj file's matrices by default: 16 bits (--outtype
# auto: BF16 from a bf16 checkpoint, else F16; f16 in older releases), two bytes either way.
MMPROJ_TYPE = "F16"
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
    if t.role in (Role.NORM, Role.POSITION, Role.ROUTER) or t.module in dtypes.ROUTER_MODULES:
        return False
    if t.role is Role.OTHER and t.module in _MIXER_CONVOLUTIONS:
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
        if ftype == "MXFP4_MOE" or m.is_falcon or site.ncols % dtypes.GGML_TYPE_SIZES[new_type][0]:
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
    block = dtypes.GGML_TYPE_SIZES[type_name][0]
    if ncols % block == 0:
        return type_name
    if type_name not in _FALLBACK:
        raise WorkloadError(
            f"llama.cpp cannot quantize {name} to {type_name}: rows of {ncols} values are not "
            f"a multiple of {block}"
        )
    fallback = _FALLBACK[type_name]
    return fallback if ncols % dtypes.GGML_TYPE_SIZES[fallback][0] == 0 else "F16"


def gguf_types(
    spec: ModelSpec, scheme: dtypes.Scheme, shapes: Sequence[tuple[int, ...]], *, imatrix: bool
) -> tuple[str, ...]:
    """The ggml type of each tensor of ``spec`` as llama-quantize gives it, from a 16-bit GGUF
    that convert_hf_to_gguf wrote (norms, biases, routers and 1-D tensors are F32 there and are
    never quantized).

    Args:
        spec: the model.
        scheme: a GGUF file type (``Q4_K_M``...).
        shapes: each tensor's shape with the input features innermost (ggml's ne0 last).
        imatrix: the file was made with an importance matrix (the mixes llama.cpp cannot make
            without one always assume one).

    Returns:
        One type per tensor; the towers' (``Role.ENCODER``) are their mmproj file's (F16, F32
        for vectors and norms), outside the mix.

    Raises:
        WorkloadError: a tensor llama.cpp cannot quantize to the chosen type.
    """
    imatrix = imatrix or scheme.name in _IMATRIX_MIXES
    ftype, default = scheme.name, scheme.gguf_type
    is_quantized = dtypes.GGML_TYPE_SIZES[default][0] > 1
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
    out: list[str] = []
    for i, (t, shape) in enumerate(zip(spec.tensors, shapes, strict=True)):
        if not _gguf_quantizable(t):
            out.append("F32")
            continue
        if t.role is Role.ENCODER:
            out.append(MMPROJ_TYPE)
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
        out.append(type_name)
    return tuple(out)


def _block(t: Tensor) -> int:
    return -1 if t.layer is None else t.layer
