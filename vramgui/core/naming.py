"""What a checkpoint tensor is, from its name alone: role, decoder block and module attribute.

Both transformers checkpoint names (``model.layers.3.self_attn.q_proj.weight``,
``transformer.h.0.mlp.c_fc.bias``, ``bert.encoder.layer.2.attention.self.query.weight``...) and
GGUF names (``blk.3.attn_q.weight``, ``blk.0.ffn_up_exps.weight``, ``token_embd.weight``) are
understood. GGUF modules are reported under the transformers attribute name they correspond to
(``attn_q`` -> ``q_proj``), so LoRA targets and quantization rules apply to both alike.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from vramgui.core.model import Role


class TensorName(NamedTuple):
    """What a tensor name says.

    Attributes:
        role: what the tensor does; Role.OTHER when the name is not recognised.
        layer: the decoder block index, or None outside the blocks.
        module: the module attribute name as transformers spells it (``q_proj``, ``lm_head``...).
        is_bias: the name ends in a bias rather than a weight.
    """

    role: Role
    layer: int | None
    module: str
    is_bias: bool


# Container names under which transformers (and GGUF's ``blk``) number the decoder blocks.
_LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block|blk)\.(\d+)(?:\.|$)")
_EXPERT = re.compile(r"(?:^|\.)experts\.\d+(?:\.|$)")

# Trailing parts that name a parameter or a quantization side tensor rather than a module.
_PARAM_PARTS = frozenset(
    {
        "weight",
        "bias",
        "qweight",
        "qzeros",
        "scales",
        "g_idx",
        "weight_scale",
        "weight_scale_inv",
        "weight_zero_point",
        "weight_shape",
        "weight_packed",
        "weight_g_idx",
        "input_scale",
        "SCB",
        "weight_format",
        "absmax",
        "quant_map",
        "nested_absmax",
        "nested_quant_map",
        "quant_state",
        "bitsandbytes__nf4",
        "bitsandbytes__fp4",
        "inv_freq",
    }
)

_EMBEDDING = frozenset({"embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embed_in"})
# The token embedding as the model's own child (Mamba's and Nemotron-H's ``backbone.embeddings``,
# ``model.embeddings``); deeper down, "embeddings" is a container (BERT's, a vision tower's).
_TOP_EMBEDDING = frozenset({"embeddings", "embedding"})
_POSITION = frozenset(
    {"wpe", "position_embeddings", "embed_positions", "token_type_embeddings", "rel_pos_bias"}
)
_HEAD = frozenset({"lm_head", "embed_out", "score", "classifier", "pooler", "cls", "qa_outputs"})
_ATTENTION_SCOPES = frozenset(
    {"self_attn", "attn", "attention", "self_attention", "cross_attn", "encoder_attn"}
)
_ATTENTION_MODULES = frozenset(
    {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "qkv_proj",
        "query_key_value",
        "q_a_proj",
        "q_b_proj",
        "kv_a_proj_with_mqa",
        "kv_b_proj",
        "wq",
        "wk",
        "wv",
        "wo",
    }
)
# Granite 4's hybrids run a dense ``shared_mlp`` in every block beside (or instead of) the experts.
_MLP_SCOPES = frozenset({"mlp", "feed_forward", "ffn", "intermediate", "output", "shared_mlp"})
_MLP_MODULES = frozenset(
    {
        "gate_proj",
        "up_proj",
        "down_proj",
        "gate_up_proj",
        "fc1",
        "fc2",
        "c_fc",
        "dense_h_to_4h",
        "dense_4h_to_h",
    }
)
# Names that are the MLP inside a block once attention scopes are ruled out (Mistral's w1/w2/w3).
_BLOCK_MLP_MODULES = frozenset({"w1", "w2", "w3", "c_proj", "dense"})
_ROUTER_MODULES = frozenset({"gate", "router", "e_score_correction_bias"})
# Token mixers other than softmax attention, by the attribute transformers gives them in a block:
# Gated DeltaNet (``linear_attn``), Mamba / Mamba 2 (``mixer``, Jamba's / Granite's / Falcon-H1's
# ``mamba``), LFM2's short convolution (``conv``), RecurrentGemma's RG-LRU (``temporal_block``).
# Their linear projections are MIXER; their convolutions and state parameters (conv1d, A_log, D,
# dt_bias, norms) are not linear layers and stay OTHER (or NORM).
_MIXER_SCOPES = frozenset({"linear_attn", "mixer", "mamba", "conv", "temporal_block"})
_MIXER_PROJECTION = re.compile(r"\w+_proj|in_proj\w*|linear_\w+")
# Scopes of multimodal checkpoints that sit outside the language model: vision and audio towers and
# the projectors that map their outputs into it.
_ENCODER_SCOPES = frozenset(
    {
        "vision_tower",
        "vision_model",
        "vision_encoder",
        "visual",
        "vision",
        "image_encoder",
        "image_newline",
        "audio_tower",
        "audio_model",
        "audio_encoder",
        "audio",
        "multi_modal_projector",
        "mm_projector",
        "vision_embed_tokens",
        "embed_vision",
        "embed_audio",
        "image_embed",
        "audio_embed",
        "vpm",
        "apm",
        "resampler",
        "vqmodel",
        "image_projection",
        "visual_projection",
        "vision_projection",
        "audio_projection",
        "embed_tokens_extend",
        "patch_embed",
        "connector",
    }
)
_SHARED_EXPERT_SCOPES = frozenset({"shared_expert", "shared_experts", "shared_expert_gate"})

# GGUF module suffix -> (role, transformers attribute name). Expert and shared-expert variants are
# derived from the dense entries by their ``_exps`` / ``_shexp`` suffix.
_GGUF_MODULES: dict[str, tuple[Role, str]] = {
    "attn_q": (Role.ATTENTION, "q_proj"),
    "attn_k": (Role.ATTENTION, "k_proj"),
    "attn_v": (Role.ATTENTION, "v_proj"),
    "attn_output": (Role.ATTENTION, "o_proj"),
    "attn_qkv": (Role.ATTENTION, "qkv_proj"),
    "attn_q_a": (Role.ATTENTION, "q_a_proj"),
    "attn_q_b": (Role.ATTENTION, "q_b_proj"),
    "attn_kv_a_mqa": (Role.ATTENTION, "kv_a_proj_with_mqa"),
    "attn_kv_b": (Role.ATTENTION, "kv_b_proj"),
    "attn_k_b": (Role.ATTENTION, "k_b_proj"),
    "attn_v_b": (Role.ATTENTION, "v_b_proj"),
    "attn_sinks": (Role.ATTENTION, "sinks"),
    "attn_norm": (Role.NORM, "input_layernorm"),
    "attn_norm_2": (Role.NORM, "input_layernorm_2"),
    "attn_q_norm": (Role.NORM, "q_norm"),
    "attn_k_norm": (Role.NORM, "k_norm"),
    "attn_q_a_norm": (Role.NORM, "q_a_layernorm"),
    "attn_kv_a_norm": (Role.NORM, "kv_a_layernorm"),
    "attn_post_norm": (Role.NORM, "post_attention_layernorm"),
    "ffn_norm": (Role.NORM, "post_attention_layernorm"),
    "ffn_post_norm": (Role.NORM, "post_feedforward_layernorm"),
    "layer_output_norm": (Role.NORM, "layer_output_norm"),
    "ffn_gate": (Role.MLP, "gate_proj"),
    "ffn_up": (Role.MLP, "up_proj"),
    "ffn_down": (Role.MLP, "down_proj"),
    "ffn_gate_up": (Role.MLP, "gate_up_proj"),
    "ffn_gate_inp": (Role.ROUTER, "gate"),
    "exp_probs_b": (Role.ROUTER, "e_score_correction_bias"),
}
_GGUF_TOP: dict[str, tuple[Role, str]] = {
    "token_embd": (Role.EMBEDDING, "embed_tokens"),
    "token_embd_norm": (Role.NORM, "embed_layernorm"),
    "position_embd": (Role.POSITION, "embed_positions"),
    "token_types": (Role.POSITION, "token_type_embeddings"),
    "output": (Role.HEAD, "lm_head"),
    "output_norm": (Role.NORM, "norm"),
    "rope_freqs": (Role.OTHER, "rotary_emb"),
}


def classify(name: str) -> TensorName:
    """Role, block index and module attribute of a checkpoint tensor name (transformers or GGUF)."""
    if name.startswith("blk.") or name.split(".", 1)[0] in _GGUF_TOP:
        return _classify_gguf(name)
    return _classify_transformers(name)


def _split_param(parts: list[str]) -> tuple[list[str], bool]:
    """Module path without trailing parameter parts, and whether the parameter is a bias."""
    is_bias = parts[-1] == "bias" or (
        parts[-1].endswith("_bias") and parts[-1] not in _ROUTER_MODULES
    )
    while len(parts) > 1 and parts[-1] in _PARAM_PARTS:
        parts = parts[:-1]
    if is_bias and parts[-1].endswith("_bias"):
        # Fused expert biases (``gate_up_proj_bias``) belong to the projection they follow.
        parts = [*parts[:-1], parts[-1].removesuffix("_bias")]
    return parts, is_bias


def _classify_transformers(name: str) -> TensorName:
    parts, is_bias = _split_param(name.split("."))
    if _ENCODER_SCOPES.intersection(parts[:-1]) and "language_model" not in parts:
        module = next((p for p in reversed(parts) if not p.isdigit()), "")
        return TensorName(Role.ENCODER, None, module, is_bias)
    match = _LAYER.search(name)
    layer = int(match.group(1)) if match else None
    module = next((p for p in reversed(parts) if not p.isdigit()), "")
    scopes = set(parts[:-1])
    lowered = module.lower()

    if "norm" in lowered or lowered.startswith("ln") or lowered == "layernorm":
        role = Role.NORM
    elif module in _EMBEDDING or (module in _TOP_EMBEDDING and len(parts) == 2):
        role = Role.EMBEDDING
    elif module in _POSITION:
        role = Role.POSITION
    elif scopes & _SHARED_EXPERT_SCOPES or module in _SHARED_EXPERT_SCOPES:
        role = Role.SHARED_EXPERT
    elif _EXPERT.search(name) or "experts" in scopes or module == "experts":
        role = Role.EXPERT
    elif module in _ROUTER_MODULES and layer is not None:
        role = Role.ROUTER
    elif layer is None and (module in _HEAD or scopes & _HEAD):
        role = Role.HEAD
    elif module in _ATTENTION_MODULES or scopes & _ATTENTION_SCOPES:
        role = Role.ATTENTION
    elif module in _MLP_MODULES or (
        layer is not None and (scopes & _MLP_SCOPES or module in _BLOCK_MLP_MODULES)
    ):
        role = Role.MLP
    elif layer is not None and scopes & _MIXER_SCOPES and _MIXER_PROJECTION.fullmatch(module):
        role = Role.MIXER
    else:
        role = Role.OTHER
    return TensorName(role, layer, module, is_bias)


def _classify_gguf(name: str) -> TensorName:
    parts = name.split(".")
    is_bias = parts[-1] == "bias"
    if parts[-1] in ("weight", "bias"):
        parts = parts[:-1]
    if parts[0] != "blk":
        role, module = _GGUF_TOP.get(parts[0], (Role.OTHER, parts[0]))
        return TensorName(role, None, module, is_bias)
    if len(parts) < 3 or not parts[1].isdigit():
        return TensorName(Role.OTHER, None, parts[-1], is_bias)
    layer, kind = int(parts[1]), parts[2]
    if kind in _GGUF_MODULES:
        role, module = _GGUF_MODULES[kind]
        return TensorName(role, layer, module, is_bias)
    for suffix, group_role in (("_exps", Role.EXPERT), ("_shexp", Role.SHARED_EXPERT)):
        base = kind.removesuffix(suffix)
        if base != kind and base in _GGUF_MODULES:
            module = _GGUF_MODULES[base][1]
            if base == "ffn_gate_inp":
                module = "shared_expert_gate"
            return TensorName(group_role, layer, module, is_bias)
    return TensorName(Role.OTHER, layer, kind, is_bias)


# transformers attribute name -> GGUF module, for tensors a config.json inventory names the
# transformers way; the first GGUF module of each attribute wins (``post_attention_layernorm`` is
# Llama's ``ffn_norm``). Mistral's and Mixtral's w1 / w2 / w3 and GPT-2's fused names are added.
_GGUF_OF_MODULE: dict[str, str] = {
    **{
        module: kind
        for kind, (_role, module) in reversed(list(_GGUF_MODULES.items()))
        if kind != "attn_post_norm"
    },
    "w1": "ffn_gate",
    "w3": "ffn_up",
    "w2": "ffn_down",
    "c_fc": "ffn_up",
    "fc1": "ffn_up",
    "fc2": "ffn_down",
    "dense_h_to_4h": "ffn_up",
    "dense_4h_to_h": "ffn_down",
    "c_attn": "attn_qkv",
    "query_key_value": "attn_qkv",
    "W_pack": "attn_qkv",
    "pre_feedforward_layernorm": "ffn_norm",
    # A dense fused gate_up is ffn_up in GGUF (Phi-3); routed experts' is split by the caller.
    "gate_up_proj": "ffn_up",
}
_GGUF_OF_TOP = {role: kind for kind, (role, _module) in reversed(list(_GGUF_TOP.items()))}


def gguf_name(name: str) -> str:
    """The name llama.cpp gives a tensor in a GGUF file (``blk.3.ffn_up_exps.weight``).

    A GGUF name is returned as it is. A transformers name is translated by its role and module:
    routed experts, stored one tensor per expert by transformers, share their stacked GGUF name
    (``blk.L.ffn_up_exps``), shared experts end in ``_shexp``. What a ``--override-tensor`` pattern
    matches depends on this name; modules without a GGUF counterpart keep their attribute name
    (``blk.L.<module>``).
    """
    info = classify(name)
    if name.startswith("blk.") or name.split(".", 1)[0] in _GGUF_TOP:
        return name
    suffix = ".bias" if info.is_bias else ".weight"
    if info.layer is None:
        if info.role is Role.NORM:
            return "output_norm" + suffix
        return _GGUF_OF_TOP.get(info.role, info.module) + suffix
    if info.role is Role.ROUTER:
        kind = "exp_probs_b" if info.module == "e_score_correction_bias" else "ffn_gate_inp"
    elif info.module == "shared_expert_gate":
        kind = "ffn_gate_inp_shexp"
    else:
        kind = _GGUF_OF_MODULE.get(info.module, info.module)
        if info.role is Role.EXPERT and info.module == "gate_up_proj":
            kind = "ffn_gate_up"
        if info.role is Role.EXPERT:
            kind = f"{kind}_exps" if kind.startswith("ffn_") else f"ffn_{kind}_exps"
        elif info.role is Role.SHARED_EXPERT:
            kind = f"{kind}_shexp" if kind.startswith("ffn_") else f"ffn_{kind}_shexp"
        elif info.role is Role.ATTENTION and info.module == "dense":
            kind = "attn_output"
    return f"blk.{info.layer}.{kind}{suffix}"
