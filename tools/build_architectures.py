"""Describe every transformers architecture as data: vramgui/core/families/architectures.json.

For each model type this builds the model transformers builds (on the meta device, so a 600B
model costs nothing) from its default config and from many variations of it, and learns:

- the parameter tensors, named as transformers names them with every block index as ``{}``;
- for each dimension of each tensor, an integer expression over the config's attributes
  (``2 * num_attention_heads * head_dim``, ``intermediate_size[i]``...), found by fitting a
  multilinear polynomial to the observed sizes and checked against every build;
- for each index, the range it runs over (``num_hidden_layers``, ``len(layers_block_type)``...)
  and which blocks hold the tensor (``layer_types[i] == 'linear_attention'``, ``i >=
  first_k_dense_replace``...), chosen from a small library of predicates and checked likewise;
- which boolean or nullable attributes make a tensor appear (``attention_bias``,
  ``q_lora_rank is None``);
- how the config class fills attributes a config.json leaves out (``head_dim`` from
  ``hidden_size // num_attention_heads``, ``layer_types`` from a pattern) and its defaults;
  how the modelling code fills a size its config class lacks (``getattr(config, "head_dim",
  None) or config.hidden_size // config.num_attention_heads``).

No number is learned from the default alone: every attribute is varied off the default and off
the first build holding each tensor family, sizes that only build together are varied together,
unset sizes are given values, per-layer lists take every block kind the code names; a fitted
size that still holds a bare number equal to an attribute no build varied is refused, and so is
a derivation rule that fails where every size it reads changes at once.

The estimator (vramgui.core.families) evaluates those expressions for a user's config.json, with
no torch. ``tests/core/test_architectures.py`` checks the result against parameter counts that
transformers itself gave for default, varied and published configs (tests/data/architectures).

Needs the ``validate`` extra (torch, transformers). Run from the repository root:

    python tools/build_architectures.py -j 3            # every causal-LM type, 3 at once
    python tools/build_architectures.py --only qwen3_next gpt_oss -v
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import inspect
import io
import itertools
import json
import math
import multiprocessing
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.configuration_utils import ALLOWED_LAYER_TYPES
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vramgui.core.families import configs, table
from vramgui.core.families.expressions import compile_expression, names_in

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "vramgui" / "core" / "families" / "architectures.json"
EXPECTED = ROOT / "tests" / "data" / "architectures" / "expected.json"

FORMAT = "vramgui.architectures"
FORMAT_VERSION = 1

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

# Attributes that never size a tensor (token ids, sampling and training knobs).
_NOT_SIZES = re.compile(
    r"(^|\.)(\w*_token_id|\w*_token_index|\w*_id|transformers_version|num_labels|"
    r"max_length|min_length|num_beams|num_return_sequences|top_k|no_repeat_ngram_size|"
    r"chunk_size_feed_forward|num_beam_groups|encoder_no_repeat_ngram_size|"
    r"forced_\w+|begin_suppress_tokens|suppress_tokens|seed|num_logits_to_keep|"
    r"output_\w+|use_cache|return_dict|torchscript|tie_encoder_decoder|is_encoder_decoder|"
    r"is_decoder|add_cross_attention|pruned_heads|tf_legacy_loss|use_bfloat16|"
    r"cross_attention_hidden_size|problem_type|architectures|finetuning_task|"
    r"tokenizer_class|prefix|task_specific_params|_name_or_path|_attn_implementation\w*|"
    r"model_type|dtype|torch_dtype|initializer_range|\w+_eps|\w*epsilon)$"
)


# Sizes no polynomial fits, written from the modelling code (each is still checked against every
# build and the held-out configs): model type -> tensor family -> dimension -> expression.
_LFM2_FF = (
    "(block_multiple_of * ((int(block_ffn_dim_multiplier * int(2 * intermediate_size / 3))"
    " + block_multiple_of - 1) // block_multiple_of) if block_ffn_dim_multiplier is not None"
    " else int(2 * intermediate_size / 3)) if block_auto_adjust_ff_dim else intermediate_size"
)
# modeling_falcon_h1.FalconH1Mixer: mamba_d_ssm, or mamba_expand * hidden_size where it is None
# (the learner, varying mamba_d_ssm alone, met the config class's divisibility checks and kept
# the default's 1024 and 128 as bare numbers).
_FALCON_H1_SSM = "(mamba_d_ssm if mamba_d_ssm is not None else int(mamba_expand * hidden_size))"
_FALCON_H1_CONV = f"{_FALCON_H1_SSM} + 2 * mamba_d_state * mamba_n_groups"
_FALCON_H1_PROJ = f"2 * {_FALCON_H1_SSM} + 2 * mamba_d_state * mamba_n_groups + mamba_n_heads"
# The MLA attention of DeepSeek-V3.2, GLM-5 (glm_moe_dsa), Sarvam, MiniCPM3 and A.X K2: the rope
# slice of each query head and of the shared key is qk_rope_head_dim wide (their config classes
# point head_dim at it too). The learner fitted the default's 64 (32) as a bare number, so a
# config naming another rope width was counted wrong while called exact
# (benchmarks/perturbed_counts.py found them).
_MLA_ROPE = "kv_lora_rank + qk_rope_head_dim"
_MLA_QUERY = "num_attention_heads * qk_nope_head_dim + num_attention_heads * qk_rope_head_dim"


def _mla(query: str, width: str = _MLA_QUERY) -> dict[str, dict[int, str]]:
    """The rope-sized dimensions of an MLA attention whose query projection is ``query``."""
    return {
        f"model.layers.{{}}.self_attn.{query}.weight": {0: width},
        "model.layers.{}.self_attn.kv_a_proj_with_mqa.weight": {0: _MLA_ROPE},
        "model.layers.{}.self_attn.kv_a_proj_with_mqa.bias": {0: _MLA_ROPE},
    }


_GPT_NEO_FF = "intermediate_size if intermediate_size is not None else 4 * hidden_size"
_TROCR_KV = "cross_attention_hidden_size if cross_attention_hidden_size is not None else d_model"
OVERRIDES: dict[str, dict[str, dict[int, str]]] = {
    "deepseek_v32": _mla("q_b_proj"),
    "glm_moe_dsa": _mla("q_b_proj"),
    "minicpm3": _mla("q_b_proj"),
    "sarvam_mla": _mla("q_proj"),
    # modeling_axk2.AXK2Attention: queries and their gate in one projection.
    "axk2": _mla("q_gate_proj", f"{_MLA_QUERY} + num_attention_heads * v_head_dim"),
    # modeling_bailing_hybrid: MLA in the full-attention blocks, linear attention in the others.
    "bailing_hybrid": {
        **_mla(
            "q_proj",
            f"({_MLA_QUERY}) if layer_types[i] == 'full_attention' "
            "else (linear_head_dim * linear_num_heads)",
        ),
    },
    # modeling_hy_v4.HYV4Attention: the head count and rope width were held at the default's.
    "hy_v4": {
        **_mla("q_b_proj"),
        "model.layers.{}.self_attn.kv_b_proj.weight": {
            0: "num_attention_heads * qk_nope_head_dim + num_attention_heads * v_head_dim"
        },
        "model.layers.{}.self_attn.o_proj.weight": {1: "num_attention_heads * v_head_dim"},
        "model.layers.{}.self_attn.gate_proj.weight": {0: "num_attention_heads * v_head_dim"},
        "model.layers.{}.self_attn.sinks": {0: "num_attention_heads"},
    },
    # transformers 5.25's LongcatFlashExperts holds weights for the routed experts only, not the
    # zero (identity) experts, as the published LongCat-Flash checkpoints do (560B).
    "longcat_flash": {"model.layers.{}.mlp.experts.gate_up_proj": {0: "n_routed_experts"}},
    # MarianForCausalLM: lm_head is vocab_size wide (the decoder's embedding decoder_vocab_size).
    "marian": {"lm_head.weight": {0: "vocab_size"}},
    # modeling_moshi.MoshiForCausalLM: the learner held the width and vocabulary at the default's.
    "moshi": {
        "model.embed_tokens.weight": {0: "vocab_size + 1", 1: "hidden_size"},
        **{
            f"model.layers.{{}}.self_attn.{p}_proj.linear.weight": {1: "hidden_size"} for p in "qkv"
        },
        "model.layers.{}.self_attn.o_proj.linear.weight": {0: "hidden_size"},
        "model.layers.{}.mlp.fc1.weight": {1: "hidden_size"},
        "model.layers.{}.mlp.fc2.weight": {0: "hidden_size"},
        "model.layers.{}.input_layernorm.weight": {0: "hidden_size"},
        "model.layers.{}.post_attention_layernorm.weight": {0: "hidden_size"},
        "model.norm.weight": {0: "hidden_size"},
        "lm_head.weight": {0: "vocab_size", 1: "hidden_size"},
    },
    # modeling_gpt_neo.GPTNeoBlock: intermediate_size, or four times the width where unset.
    "gpt_neo": {
        f"transformer.h.{{}}.mlp.{name}": {d: _GPT_NEO_FF}
        for name, d in (("c_fc.weight", 0), ("c_fc.bias", 0), ("c_proj.weight", 1))
    },
    # modeling_trocr.TrOCRAttention: the cross-attention's keys and values read
    # cross_attention_hidden_size where set (an encoder of another width).
    "trocr": {
        f"model.decoder.layers.{{}}.encoder_attn.{p}_proj.weight": {1: _TROCR_KV} for p in "kv"
    },
    # modeling_xlnet.XLNetRelativeAttention: d_model wide, n_head heads of d_head.
    "xlnet": {
        "transformer.mask_emb": {2: "d_model"},
        "transformer.word_embedding.weight": {1: "d_model"},
        **{
            f"transformer.layer.{{}}.rel_attn.{p}": {0: "d_model", 1: "n_head", 2: "d_head"}
            for p in "qkvor"
        },
        **{
            f"transformer.layer.{{}}.rel_attn.{p}": {0: "n_head", 1: "d_head"}
            for p in ("r_r_bias", "r_s_bias", "r_w_bias")
        },
        "transformer.layer.{}.rel_attn.seg_embed": {1: "n_head", 2: "d_head"},
        **{
            f"transformer.layer.{{}}.{p}_norm.{w}": {0: "d_model"}
            for p in ("rel_attn.layer", "ff.layer")
            for w in ("weight", "bias")
        },
        "transformer.layer.{}.ff.layer_1.weight": {1: "d_model"},
        "transformer.layer.{}.ff.layer_2.weight": {0: "d_model"},
        "transformer.layer.{}.ff.layer_2.bias": {0: "d_model"},
        "lm_loss.weight": {1: "d_model"},
    },
    "falcon_h1": {
        "model.layers.{}.mamba.dt_bias": {0: "mamba_n_heads"},
        "model.layers.{}.mamba.A_log": {0: "mamba_n_heads"},
        "model.layers.{}.mamba.D": {0: "mamba_n_heads"},
        "model.layers.{}.mamba.conv1d.weight": {0: _FALCON_H1_CONV},
        "model.layers.{}.mamba.conv1d.bias": {0: _FALCON_H1_CONV},
        "model.layers.{}.mamba.in_proj.weight": {0: _FALCON_H1_PROJ},
        "model.layers.{}.mamba.in_proj.bias": {0: _FALCON_H1_PROJ},
        "model.layers.{}.mamba.out_proj.weight": {1: _FALCON_H1_SSM},
        "model.layers.{}.mamba.norm.weight": {0: _FALCON_H1_SSM},
    },
    # modeling_lfm2.Lfm2MLP: two thirds of intermediate_size, scaled, rounded up to multiple_of.
    "lfm2": {
        "model.layers.{}.feed_forward.w1.weight": {0: _LFM2_FF},
        "model.layers.{}.feed_forward.w3.weight": {0: _LFM2_FF},
        "model.layers.{}.feed_forward.w2.weight": {1: _LFM2_FF},
    },
}

# Attributes a config class derives from others where a config.json leaves them out, written
# from the class (the learner fitted the default's factor as a bare number, or found no rule):
# model type -> attribute -> expression.
_MAMBA = {
    "intermediate_size": "int(expand * hidden_size)",
    "time_step_rank": "(hidden_size + 15) // 16",
}
DERIVED: dict[str, dict[str, str]] = {
    # MambaConfig / FalconMambaConfig: int(expand * hidden_size), ceil(hidden_size / 16).
    "mamba": _MAMBA,
    "falcon_mamba": _MAMBA,
    # The MLA config classes above point head_dim at the rope slice (the rotary embedding reads
    # it): a config.json naming only qk_rope_head_dim has that head_dim.
    **{
        t: {"head_dim": "qk_rope_head_dim"}
        for t in ("deepseek_v32", "glm_moe_dsa", "sarvam_mla", "minicpm3", "axk2")
    },
    # LongcatFlashConfig: qk_head_dim or qk_nope_head_dim + qk_rope_head_dim.
    "longcat_flash": {"qk_head_dim": "qk_nope_head_dim + qk_rope_head_dim"},
    # MarianConfig: decoder_vocab_size or vocab_size.
    "marian": {"decoder_vocab_size": "vocab_size"},
    # BailingHybridConfig: the linear attention's convolution is short_conv_kernel_size wide.
    "bailing_hybrid": {"linear_conv_kernel_dim": "short_conv_kernel_size"},
    # MoshiConfig: head_dim or hidden_size // num_attention_heads.
    "moshi": {"head_dim": "hidden_size // num_attention_heads"},
    # XLNetConfig: d_model // n_head.
    "xlnet": {"d_head": "d_model // n_head"},
}

# Sizes a default leaves unset that the learner did not reach, whose tensors the entry lacks: a
# config that sets one is said to be approximate. q_lora_rank: the low-rank query (q_a_proj,
# q_a_layernorm, q_b_proj) in place of q_proj.
UNLEARNED: dict[str, list[str]] = {
    "bailing_hybrid": ["q_lora_rank"],
    "kimi_linear": ["q_lora_rank"],
    "sarvam_mla": ["q_lora_rank"],
}

# Presence the default config cannot show (every one of its layers is alike): model type ->
# tensor family -> condition, checked against published checkpoints (tests/sources/test_catalog).
PRESENCE: dict[str, dict[str, str]] = {
    # modeling_glm_moe_dsa: only "full" layers run an indexer; "shared" ones reuse its top-k.
    "glm_moe_dsa": {
        f"model.layers.{{}}.self_attn.indexer.{name}": "indexer_types[i] == 'full'"
        for name in (
            "wq_b.weight",
            "wk.weight",
            "k_norm.weight",
            "k_norm.bias",
            "weights_proj.weight",
        )
    },
}

# Where the default config has every layer alike, a base that shows each kind of block, so that
# the tensors of the other kind are learned too.
SEEDS: dict[str, dict[str, Any]] = {
    # Lfm2Config defaults to all attention; LFM2 checkpoints are mostly short convolutions.
    # Gemma4TextConfig leaves num_global_key_value_heads unset; Gemma 4 checkpoints give their
    # full-attention layers fewer K/V heads, shared between K and V (attention_k_eq_v).
    "gemma4": {"text_config": {"num_global_key_value_heads": 2, "attention_k_eq_v": True}},
    "gemma4_text": {"num_global_key_value_heads": 2, "attention_k_eq_v": True},
    "lfm2": {"layer_types": ["conv", "conv", "full_attention"] * 10 + ["conv", "full_attention"]},
}

# The modelling code's fallback for a size its config class may lack:
# ``getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads`` and
# ``getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)``.
_GETATTR_RULE = re.compile(
    r'getattr\(\s*(?:self\.)?config\s*,\s*"(\w+)"\s*,\s*(?:None\s*\)\s*or\s*)?'
    r"(?:self\.)?config\.(\w+)\s*//\s*(?:self\.)?config\.(\w+)"
)

# Attributes the estimator reads for KV cache and activations, whichever tensors they size.
FACT_ATTRIBUTES = frozenset(
    {
        "layer_types",
        "sliding_window",
        "attention_chunk_size",
        "num_key_value_heads",
        "num_attention_heads",
        "head_dim",
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
        "num_hidden_layers",
        "num_experts_per_tok",
        "num_experts",
        "n_routed_experts",
        "num_local_experts",
        "moe_intermediate_size",
        "kv_lora_rank",
        "q_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "tie_word_embeddings",
        "hidden_act",
        "hidden_activation",
        "attention_dropout",
        "hidden_dropout",
        "layers_block_type",
        "mamba_d_state",
        "ssm_state_size",
        "mamba_d_conv",
        "conv_kernel",
        "mamba_expand",
        "expand",
        "linear_conv_kernel_dim",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "index_head_dim",
        "index_n_heads",
        "index_topk",
        "mamba_n_heads",
        "mamba_num_heads",
        "mamba_head_dim",
        "n_groups",
        "mamba_n_groups",
        "conv_L_cache",
        "num_global_key_value_heads",
        "global_head_dim",
    }
)

# --------------------------------------------------------------------------------------------
# configs as flat dicts
# --------------------------------------------------------------------------------------------


# Attributes that heterogeneous configs vary per layer through ``per_layer_config``; flat configs
# hold them as per-layer lists (as the estimator does), built configs get them back as overrides.
_PER_LAYER: set[str] = set()


# Attributes a config class saves in another form than it holds, and reads back: DoryConfig
# saves each block as an attention and an "mlp" entry (twice the layer counts) and halves them on
# loading. The table holds the class's own form; vramgui.core.families.configs reads the saved
# form back as the class does.
_SAVED_OTHERWISE = {
    "dory": (
        "num_hidden_layers",
        "n_input_layers",
        "n_recurrent_layers",
        "n_output_layers",
        "layer_types",
    ),
}


def flatten(config: PretrainedConfig) -> dict[str, Any]:
    """Every attribute of a config; sub-configs' attributes as ``sub.attr``; per-layer overrides
    (``per_layer_config``) as per-layer lists."""
    out: dict[str, Any] = {}
    data = config.to_dict()
    for key in _SAVED_OTHERWISE.get(config.model_type, ()):
        data[key] = getattr(config, key)
    overrides = data.pop("per_layer_config", None)
    if isinstance(overrides, dict) and overrides:
        layers = data["num_hidden_layers"]
        for values in overrides.values():
            _PER_LAYER.update(values)
        for attr in {a for v in overrides.values() for a in v}:
            per = [data.get(attr)] * layers
            for index, values in overrides.items():
                if attr in values:
                    per[int(index)] = values[attr]
            data[attr] = per
    for key, value in data.items():
        if key.startswith("_"):
            continue  # private bookkeeping (``_name_or_path``), never in a config.json
        sub = sub_config(config, key)
        if sub is not None:
            for k, v in flatten(sub).items():
                out[f"{key}.{k}"] = v
        elif _size_table(value):
            # A table of sizes by kind (DeepSeek V4's compress_rates): each one a size.
            for k, v in value.items():
                out[f"{key}.{k}"] = v
        else:
            out[key] = value
    return out


def _size_table(value: Any) -> bool:
    """A dict of whole numbers by name, as some configs keep a size per kind of block."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and k.isidentifier() for k in value)
        and all(is_int(v) for v in value.values())
    )


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = copy.deepcopy(value)
    return out


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_int_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(is_int(x) for x in v)


def is_str_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v)


def sizes(flat: dict[str, Any]) -> list[str]:
    """Attributes that may size a tensor: positive ints and lists of them."""
    return sorted(
        k
        for k, v in flat.items()
        if not _NOT_SIZES.search(k) and ((is_int(v) and v >= 1) or is_int_list(v))
    )


def switches(flat: dict[str, Any]) -> list[str]:
    return sorted(k for k, v in flat.items() if isinstance(v, bool) and not _NOT_SIZES.search(k))


# --------------------------------------------------------------------------------------------
# building
# --------------------------------------------------------------------------------------------


@dataclass
class Build:
    """The parameters (name -> shape, dtype) of the model built from one flat config."""

    given: dict[str, Any]
    flat: dict[str, Any]
    params: dict[str, tuple[tuple[int, ...], str]]


def _fold_per_layer(data: dict[str, Any]) -> None:
    """Per-layer lists back into the most common value and ``per_layer_config`` overrides."""
    per_layer: dict[str, dict[str, Any]] = {}
    for attr in _PER_LAYER & set(data):
        values = data[attr]
        if isinstance(values, list):
            common = max(set(map(json.dumps, values)), key=lambda v: values.count(json.loads(v)))
            data[attr] = json.loads(common)
            for i, v in enumerate(values):
                if v != data[attr]:
                    per_layer.setdefault(str(i), {})[attr] = v
    if per_layer:
        data["per_layer_config"] = per_layer


class Builder:
    """Builds a model type from flat configs, caching every build."""

    def __init__(self, model_type: str, model_class: type | None = None) -> None:
        self.model_type = model_type
        self.model_class = model_class
        self.cache: dict[str, Build | None] = {}
        self.builds = 0
        # The flat config variations start from (Learner sets it): an attribute given at its
        # value there was not asked to change, and the config class may derive it anew (DeepSeek
        # V3.2's head_dim follows qk_rope_head_dim whatever is given).
        self.base: dict[str, Any] | None = None

    def config(self, flat: dict[str, Any]) -> PretrainedConfig:
        data = unflatten(flat)
        data.pop("model_type", None)
        _fold_per_layer(data)
        for value in data.values():
            if isinstance(value, dict):
                _fold_per_layer(value)  # a nested text config's own per-layer attributes
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return AutoConfig.for_model(self.model_type, **data)

    def __call__(self, flat: dict[str, Any]) -> Build | None:
        key = json.dumps(flat, sort_keys=True, default=str)
        if key in self.cache:
            return self.cache[key]
        self.builds += 1
        try:
            cfg = self.config(flat)
            # A config that silently rewrote a size asked for (clamped, recomputed) is not the
            # variation asked for: keep only builds whose config holds what was changed. What
            # the class derives from the changed sizes it may rewrite: the build's flat config
            # is the class's own, so expressions are fitted to what the model was built from.
            resolved = flatten(cfg)
            for k, v in flat.items():
                sized = is_int(v) or is_int_list(v) or isinstance(v, bool)
                asked = self.base is None or k not in self.base or self.base[k] != v
                if sized and asked and k in resolved and resolved[k] != v:
                    raise ValueError(f"{k} rewritten")
            with (
                torch.device("meta"),
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                if self.model_class is not None:
                    model = self.model_class._from_config(cfg, dtype=torch.bfloat16)
                else:
                    model = AutoModelForCausalLM.from_config(
                        cfg, dtype=torch.bfloat16, trust_remote_code=False
                    )
            model.tie_weights()
            params = {
                n: (tuple(int(s) for s in p.shape), _dtype_name(p.dtype))
                for n, p in model.named_parameters()
            }
            build: Build | None = Build(flat, resolved, params)
        except Exception:
            build = None
        self.cache[key] = build
        return build


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "", torch.float32: "F32", torch.float16: "F16"}.get(dtype, str(dtype))


# --------------------------------------------------------------------------------------------
# tensor families: a name with its block indices taken out
# --------------------------------------------------------------------------------------------

_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")


# Numbered children that are not a list of like blocks: an nn.Sequential whose parameter-free
# members (activations, dropout) leave gaps in the numbering, e.g. ``ffn.0`` and ``ffn.2``.
_LITERAL: set[str] = set()


def family_of(name: str) -> tuple[str, tuple[int, ...]]:
    """``model.layers.3.mlp.w`` -> (``model.layers.{}.mlp.w``, (3,))."""
    parts = name.split(".")
    indices: list[int] = []
    out: list[str] = []
    for part in parts:
        if part.isdigit() and ".".join(out) not in _LITERAL:
            indices.append(int(part))
            out.append("{}")
        else:
            out.append(part)
    return ".".join(out), tuple(indices)


def find_literal_numbering(params: dict[str, tuple[tuple[int, ...], str]]) -> None:
    """Mark the numbered containers that are not lists of like blocks, from one build: numbers
    that skip (a Sequential's parameter-free members) or a short list whose members' shapes differ
    (``adapter.0`` down, ``adapter.1`` up). Adds to what earlier builds of the type found."""
    for _ in range(4):  # nested containers settle one level per pass
        seen: dict[str, set[int]] = {}
        shapes: dict[tuple[str, str], set[tuple[int, ...]]] = {}
        for name, (shape, _) in params.items():
            out: list[str] = []
            parts = name.split(".")
            for n, part in enumerate(parts):
                key = ".".join(out)
                if part.isdigit() and key not in _LITERAL:
                    seen.setdefault(key, set()).add(int(part))
                    rest = ".".join(p if not p.isdigit() else "{}" for p in parts[n + 1 :])
                    shapes.setdefault((key, rest), set()).add(shape)
                    out.append("{}")
                else:
                    out.append(part)
        gaps = {k for k, v in seen.items() if v != set(range(max(v) + 1))}
        mixed = {k for (k, _), v in shapes.items() if len(v) > 1 and len(seen[k]) <= 4}
        new = (gaps | mixed) - _LITERAL
        if not new:
            return
        _LITERAL.update(new)


def containers(fam: str) -> list[str]:
    """The ModuleList paths of a family: ``model.layers`` for ``model.layers.{}.x``."""
    parts = fam.split(".{}")
    return [".{}".join(parts[: k + 1]) for k in range(len(parts) - 1)]


# --------------------------------------------------------------------------------------------
# expressions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    """A quantity an expression may use: an attribute, an attribute of block i, or a ratio."""

    text: str
    value: Callable[[dict[str, Any], tuple[int, ...]], int | None]


def attr_var(key: str) -> Var:
    def value(flat: dict[str, Any], idx: tuple[int, ...]) -> int | None:
        v = flat.get(key)
        return v if is_int(v) else None

    return Var(key, value)


def indexed_var(key: str, position: int) -> Var:
    name = "ij"[position]

    def value(flat: dict[str, Any], idx: tuple[int, ...]) -> int | None:
        v = flat.get(key)
        if not is_int_list(v) or position >= len(idx) or idx[position] >= len(v):
            return None
        return v[idx[position]]

    return Var(f"{key}[{name}]", value)


def element_var(key: str, position: int) -> Var:
    def value(flat: dict[str, Any], idx: tuple[int, ...]) -> int | None:
        v = flat.get(key)
        return v[position] if is_int_list(v) and position < len(v) else None

    return Var(f"{key}[{position}]", value)


def product_ratio_var(a: Var, b: Var, c: Var) -> Var:
    def value(flat: dict[str, Any], idx: tuple[int, ...]) -> int | None:
        x, y, z = a.value(flat, idx), b.value(flat, idx), c.value(flat, idx)
        return x * y // z if x is not None and y is not None and z else None

    return Var(f"{_paren(a.text)} * {_paren(b.text)} // {_paren(c.text)}", value)


def ratio_var(a: Var, b: Var) -> Var:
    def value(flat: dict[str, Any], idx: tuple[int, ...]) -> int | None:
        x, y = a.value(flat, idx), b.value(flat, idx)
        return x // y if x is not None and y else None

    return Var(f"{_paren(a.text)} // {_paren(b.text)}", value)


def len_var(key: str) -> Var:
    def value(flat: dict[str, Any], idx: tuple[int, ...]) -> int | None:
        v = flat.get(key)
        return len(v) if isinstance(v, list | str) else None

    return Var(f"len({key})", value)


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.\[\]]+", text) else f"({text})"


def solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """The exact solution of the (possibly overdetermined) system, or None if it is inconsistent
    or the samples leave some unknown free."""
    n = len(rows[0]) if rows else 0
    m = [[*r, b] for r, b in zip(rows, rhs, strict=True)]
    pivots: list[int] = []
    r = 0
    for c in range(n):
        p = next((i for i in range(r, len(m)) if m[i][c] != 0), None)
        if p is None:
            continue
        m[r], m[p] = m[p], m[r]
        inv = 1 / m[r][c]
        m[r] = [x * inv for x in m[r]]
        for i in range(len(m)):
            if i != r and m[i][c] != 0:
                f = m[i][c]
                m[i] = [x - f * y for x, y in zip(m[i], m[r], strict=True)]
        pivots.append(c)
        r += 1
        if r == len(m):
            break
    for i in range(r, len(m)):
        if m[i][n] != 0:
            return None
    if len(pivots) < n:
        return None  # some coefficient is not pinned down by the samples: no fit, not a guess
    x = [Fraction(0)] * n
    for i, c in enumerate(pivots):
        x[c] = m[i][n]
    return x


def monomials(vars_: list[Var], degree: int) -> list[tuple[Var, ...]]:
    out: list[tuple[Var, ...]] = [()]
    for d in range(1, degree + 1):
        out.extend(itertools.combinations(vars_, d))
    return out


def render(terms: list[tuple[Fraction, tuple[Var, ...]]]) -> str:
    """``2 * a * b + c - 1`` from (coefficient, monomial) pairs; a common denominator divides."""
    den = math.lcm(*(c.denominator for c, _ in terms)) if terms else 1
    parts: list[str] = []
    for coef, mono in terms:
        c = coef * den
        names = [_paren(v.text) if len(mono) > 1 else v.text for v in mono]
        body = " * ".join(names)
        mag = abs(int(c))
        text = str(mag) if not body else (body if mag == 1 else f"{mag} * {body}")
        if not parts:
            parts.append(("-" if c < 0 else "") + text)
        else:
            parts.append(("- " if c < 0 else "+ ") + text)
    expr = " ".join(parts) or "0"
    if den != 1:
        expr = f"({expr}) // {den}" if len(terms) > 1 else f"{_paren(expr)} // {den}"
    return expr


def fit(
    samples: list[tuple[dict[str, Any], tuple[int, ...], int]],
    candidates: list[Var],
    max_vars: int = 4,
) -> str | None:
    """The simplest multilinear expression over ``candidates`` that gives every sample's value."""
    values = {s[2] for s in samples}
    if len(values) == 1:
        # Constant over every variation: a literal, unless it equals one attribute everywhere.
        pass
    for k in range(0, min(max_vars, len(candidates)) + 1):
        for chosen in itertools.combinations(candidates, k):
            result = _fit_with(samples, list(chosen))
            if result is not None:
                return result
    # Squares and cubes of one or two quantities (``hc_mult * hc_mult + 2 * hc_mult``).
    for degree in (2, 3):
        for k in (1, 2):
            for chosen in itertools.combinations(candidates, k):
                result = _fit_with(samples, list(chosen), degree=degree)
                if result is not None:
                    return result
    # One product with a square (a projector's ``hidden_size * merge_size * merge_size``): too
    # many unknowns for the full cubic over the points that varying one size at a time gives.
    for chosen in itertools.combinations(candidates, 2):
        for mono in itertools.combinations_with_replacement(chosen, 3):
            if len(set(mono)) < 2:
                continue
            result = _fit_with(samples, list(chosen), monos=[mono])
            if result is not None:
                return result
    # One product of three quantities, scaled (Kimi K2.5's projector: the vision width times
    # both sides of the merge kernel), where too few points pin the full multilinear form.
    for chosen in itertools.combinations(candidates, 3):
        result = _fit_with(samples, list(chosen), monos=[chosen])
        if result is not None:
            return result
    return None


def _fit_with(
    samples: list[tuple[dict[str, Any], tuple[int, ...], int]],
    chosen: list[Var],
    degree: int = 0,
    monos: list[tuple[Var, ...]] | None = None,
) -> str | None:
    """The multilinear (or, given ``degree``, polynomial; or given ``monos``, those terms') fit
    over exactly ``chosen``."""
    if monos is not None:
        degree = 3
    elif degree:
        monos = [()]
        for d in range(1, degree + 1):
            monos.extend(itertools.combinations_with_replacement(chosen, d))
    else:
        monos = monomials(chosen, len(chosen))
    # Many samples repeat (every block of every build): one equation per distinct point.
    points: dict[tuple[int, ...], int] = {}
    for flat, idx, value in samples:
        vals = tuple(v.value(flat, idx) for v in chosen)
        if any(x is None for x in vals):
            return None
        if points.setdefault(vals, value) != value:  # type: ignore[arg-type]
            return None  # the same variables, two sizes: something else matters
    # An interpolation through as many points as unknowns proves nothing: keep one to check.
    if len(points) < len(monos) + (1 if degree else 0):
        return None
    rows: list[list[Fraction]] = []
    rhs: list[Fraction] = []
    for vals, value in points.items():
        row = []
        for mono in monos:
            prod = 1
            for v in mono:
                prod *= vals[chosen.index(v)]
            row.append(Fraction(prod))
        rows.append(row)
        rhs.append(Fraction(value))
    sol = solve(rows, rhs)
    if sol is None:
        return None
    terms = [(c, m) for c, m in zip(sol, monos, strict=True) if c != 0]
    # Every chosen variable must matter; otherwise a smaller set fits and was tried first.
    used = {v.text for _, m in terms for v in m}
    if used != {v.text for v in chosen}:
        return None
    # Sort: highest degree first, then by name, constants last.
    terms.sort(key=lambda t: (-len(t[1]), [v.text for v in t[1]]))
    text = render(terms)
    # The rendered form floors once; check it reproduces every sample exactly.
    for flat, idx, value in samples:
        if evaluate(text, flat, idx) != value:
            return None
    return text


def _literals(text: str) -> set[int]:
    """The whole numbers an expression holds as bare constants (not a list's positions)."""
    tree = ast.parse(text, mode="eval")
    positions = {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}
    return {
        abs(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and is_int(n.value) and id(n) not in positions
    }


def evaluate(text: str, flat: dict[str, Any], idx: tuple[int, ...]) -> Any:
    """An expression's value, read exactly as the estimator reads the table."""
    return compile_expression(text)(flat, idx)


# --------------------------------------------------------------------------------------------
# variations
# --------------------------------------------------------------------------------------------


def variants_of(value: Any, nullable: bool) -> list[Any]:
    """Other values of an attribute to try, the likeliest to keep a config valid first."""
    if isinstance(value, bool):
        return [not value]
    if is_int(value):
        out = [value * 2]
        if value % 2 == 0 and value >= 2:
            out.append(value // 2)
        out += [value * 3, value + 1]
        if value > 2:
            out.append(value - 1)
        if value <= 2:
            out.append(0)
        if nullable:
            out.append(None)
        return out
    if is_int_list(value):
        out = [[v * 2 for v in value]]
        if len(set(value)) == 1 and len(value) > 1:
            out.append([value[0] * 2 if i % 3 == 1 else value[0] for i in range(len(value))])
        if all(v % 2 == 0 for v in value):
            out.append([v // 2 for v in value])
        return out
    if is_str_list(value) and len(set(value)) > 1:
        # Rotated (each kind moves to other blocks), longer and shorter (a list that sets the
        # number of blocks).
        return [value[1:] + value[:1], [value[-1], *value[:-1]], [*value, *value], value[:-1]]
    if isinstance(value, list) and not value:
        return [[0], [1]]
    return []


def sub_config(config: PretrainedConfig, key: str) -> PretrainedConfig | None:
    """The sub-config under ``key``, or None (per-layer attributes refuse a plain getattr)."""
    try:
        sub = getattr(config, key, None)
    except Exception:
        return None
    return sub if isinstance(sub, PretrainedConfig) else None


def nullable_attrs(config: PretrainedConfig, sizes: bool = False) -> set[str]:
    """Attributes whose annotation admits None (a None turns some tensors off); with ``sizes``,
    only those that may also be a whole number (Nemotron 3's ``moe_latent_size``)."""
    out: set[str] = set()
    for klass in type(config).__mro__:
        for name, ann in getattr(klass, "__annotations__", {}).items():
            text = str(ann)
            if "None" in text and (not sizes or re.search(r"\bint\b", text)):
                out.add(name)
    return out


class Learner:
    """Everything learned about one model type."""

    def __init__(self, model_type: str, model_class: type | None = None, verbose: bool = False):
        self.model_type = model_type
        _LITERAL.clear()
        _PER_LAYER.clear()
        self.builder = Builder(model_type, model_class)
        self.verbose = verbose
        config = AutoConfig.for_model(model_type, **SEEDS.get(model_type, {}))
        self.base_flat = flatten(config)
        self.nullable = nullable_attrs(config)
        self.nullable_int = nullable_attrs(config, sizes=True)
        for key in config.to_dict():
            sub = sub_config(config, key)
            if sub is not None:
                self.nullable |= {f"{key}.{n}" for n in nullable_attrs(sub)}
                self.nullable_int |= {f"{key}.{n}" for n in nullable_attrs(sub, sizes=True)}
        self.builder.base = self.base_flat
        self.observations: list[Build] = []
        self.single: dict[str, list[Build]] = {}
        # Builds that change two sizes at once, because neither builds alone (Bamba's width and
        # its Mamba heads must agree): build -> the two attributes.
        self.coupled: dict[int, tuple[str, str]] = {}
        # Sizes the modelling code reads where the config class has no attribute, with the rule
        # the code applies when the config leaves them out (``head_dim``).
        self.code_derived: dict[str, str] = {}
        # Such sizes that, given at another value, changed no tensor: the code ignores them.
        self.code_ignored: set[str] = set()
        # Attributes the class derives by a rule the learner did not find: a config that leaves
        # one out is counted at the default's value, which is said as uncertain.
        self.underived: set[str] = set()
        self.outliers: set[int] = set()
        self.solved: dict[tuple[str, ...], dict[str, int]] = {}

    @staticmethod
    def vary(given: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        """``given`` with ``changes``; per-layer lists follow a changed layer count."""
        out = {**given, **changes}
        for attr, new in changes.items():
            old = given.get(attr)
            if not (is_int(old) and is_int(new)) or old == new or old < 2:
                continue
            if not re.search(r"layer|depth", attr.rsplit(".", 1)[-1]):
                continue  # a head count equal to the layer count says nothing of the lists
            for k, v in given.items():
                if _NOT_SIZES.search(k):
                    continue
                if k not in changes and isinstance(v, list) and len(v) == old:
                    out[k] = [v[i % old] for i in range(new)]
                elif k not in changes and _is_pattern(v) and len(v) == old:
                    out[k] = "".join(v[i % old] for i in range(new))
        return out

    def log(self, *args: Any) -> None:
        if self.verbose:
            print(*args, flush=True)

    def observe(self, build: Build | None) -> None:
        if build is not None and all(build is not o for o in self.observations):
            find_literal_numbering(build.params)
            self.observations.append(build)

    def run(self) -> dict[str, Any]:
        base = self.builder(self.base_flat)
        if base is None:
            raise RuntimeError("the default config does not build")
        base = self._code_sizes(base)
        self.base = base
        self.observe(base)
        self.attrs = sorted(
            k
            for k, v in self.base_flat.items()
            if not _NOT_SIZES.search(k)
            and (
                is_int(v)
                or is_int_list(v)
                or isinstance(v, bool)
                or is_str_list(v)
                or v == []
                or (v is None and k in self.nullable_int)
            )
        )
        unbuilt = []
        for attr in self.attrs:
            found = self._variations(base, attr)
            if found:
                self.single[attr] = found
                for b in found:
                    self.observe(b)
            elif self._built_none(base, attr):
                unbuilt.append(attr)
        # A size no value of which builds alone must move with another (a width and the heads
        # that divide it): varied in pairs, so that no expression keeps it as a constant. A
        # switch that builds only with the sizes it needs set (Gemma 4's enable_moe_block with
        # num_experts and moe_intermediate_size) is turned with them.
        for attr in unbuilt:
            if isinstance(self.base_flat[attr], bool):
                found = self._switched_on(base, attr)
            else:
                found = self._coupled(base, attr)
            if found:
                self.single[attr] = found
                for b in found:
                    self.observe(b)
        # Unset sizes that no build could give a value: the entry does not know what they do.
        self.unlearned = sorted(
            {a for a in self.attrs if self.base_flat.get(a) is None and a not in self.single}
            | set(UNLEARNED.get(self.model_type, ()))
        )
        self.log(f"  {len(self.single)} attributes size tensors: {sorted(self.single)}")
        self.fams = self._families()
        # Probing one family's sizes can build configs where new families appear (the biases of a
        # dense MLP that only some layer counts have): go on until every family has its shape.
        shapes: dict[str, list[str]] = {}
        while missing := [f for f in self.fams if f not in shapes]:
            for fam in sorted(missing, key=self._order):
                shapes[fam] = self._shape(fam)
        shapes = {fam: shapes[fam] for fam in sorted(shapes, key=self._order)}
        self._lengths = [self.lengths(k) for k in range(len(self.observations))]
        self._truths: dict[
            tuple[str, ...], tuple[list[tuple[int, tuple[int, ...]]], dict[str, int]]
        ] = {}
        self.container_len = self._containers()
        tensors = []
        for fam, shape in shapes.items():
            entry: dict[str, Any] = {"name": fam, "shape": shape}
            when = self._presence(fam)
            if when is not None:
                entry["when"] = when
            dtype = self._dtype(fam)
            if dtype:
                entry["dtype"] = dtype
            tensors.append(entry)
        entry = {
            "aliases": aliases_of(self.model_type),
            "architecture": self.architecture_name(),
            # transformers refuses SDPA for some classes (attention sinks, soft-capping): eager.
            "sdpa": bool(getattr(self.model_class(), "_supports_sdpa", False)),
            "containers": self.container_len,
            "tensors": tensors,
        }
        used = set()
        for text in [*self.container_len.values()] + [
            e for t in tensors for e in [*t["shape"], t.get("when") or "0"]
        ]:
            used |= names_in(text)
        sized = set(used)
        # What the estimator reads beside the tensors: the facts behind KV cache and activations.
        used |= {
            k
            for k in self.base_flat
            if k.rsplit(".", 1)[-1] in FACT_ATTRIBUTES and not _NOT_SIZES.search(k)
        }
        # The language model's own type, where a multimodal config nests it.
        used |= {k for k in self.base_flat if k.endswith(".model_type")}
        self._sub_configs()
        entry["derived"] = self.derivations(used)
        if self.sub_defaults:
            entry["sub_defaults"] = self.sub_defaults
        for text in entry["derived"].values():
            used |= names_in(text)
        if self.underived:
            entry["underived"] = sorted(self.underived)
        if self.unlearned:
            entry["unlearned"] = self.unlearned
        # A head_dim the tensors do not follow, whether the class holds it or only the code
        # reads it: the estimator need not doubt a config that gives one.
        ignored = self.code_ignored | {
            a for a in self.attrs if a.rsplit(".", 1)[-1] == "head_dim" and a not in self.single
        }
        if ignored - sized:
            entry["ignored"] = sorted(ignored - sized)
        defaults = {**getattr(self, "hidden", {}), **self.base_flat}
        # Every attribute the config class sets, not only the ones the tensors read: the facts
        # behind the cache read them under their family's names (``n_head``, ``d_model``...).
        keep = (
            used
            | set(getattr(self, "hidden", {}))
            | {k for k, v in defaults.items() if _plain(k, v)}
        )
        entry["defaults"] = {k: defaults[k] for k in sorted(keep) if k in defaults}
        self.verify(entry)
        if self.model_type in SEEDS:
            entry["defaults"] = self._class_defaults(entry["defaults"])
        return entry

    def _variations(self, start: Build, attr: str, limit: int = 3) -> list[Build]:
        """Builds off ``start`` with other values of one attribute that change its tensors.

        Where none changes them, one build that changed the attribute and nothing else is
        observed all the same: it shows the tensors do not follow the attribute there, so that
        a bare number of its value is not it (``_unvaried``)."""
        found: list[Build] = []
        unchanged: Build | None = None
        value = start.given.get(attr)
        values = variants_of(value, attr in self.nullable)
        if value is None and attr in self.nullable_int:
            values = self._sizes_for_unset(attr, start)
        if is_str_list(value) and set(value) <= set(self.kinds):
            # Each kind of block the code knows that the list does not hold, at its first and
            # its middle block.
            middle = len(value) // 2
            for kind in self.kinds:
                if kind not in value:
                    values += [[kind, *value[1:]], [*value[:middle], kind, *value[middle + 1 :]]]
        for v in values:
            b = self.builder(self.vary(start.given, {attr: v}))
            if b is None:
                continue
            if b.params == start.params and not isinstance(v, bool):
                unchanged = unchanged or b
                continue  # no change at this value (a bound past every layer); try the next
            found.append(b)
            if len(found) == limit and not is_str_list(value):
                break
        if not found and unchanged is not None and is_int(start.given.get(attr)):
            self.observe(unchanged)
        return found

    def _sizes_for_unset(self, attr: str, start: Build) -> list[int]:
        """Values to give a size the default leaves unset: fractions of its scope's width."""
        prefix = attr.rpartition(".")[0]
        width = start.given.get(f"{prefix}.hidden_size" if prefix else "hidden_size")
        width = width if is_int(width) and width >= 64 else 1024
        return [width // 4, width // 2, width // 8]

    def _switched_on(self, start: Build, attr: str) -> list[Build]:
        """A switch turned with every unset size of its scope given a value."""
        prefix = attr.rpartition(".")[0]
        unset = {
            a: self._sizes_for_unset(a, start)[0]
            for a in self.attrs
            if start.given.get(a) is None and a.rpartition(".")[0] == prefix
        }
        b = self.builder(self.vary(start.given, {attr: not start.given[attr], **unset}))
        if b is None or b.params == start.params:
            return []
        self.log(f"  {attr} turned with {sorted(unset)} set")
        return [b]

    def _built_none(self, start: Build, attr: str) -> bool:
        """No other value of this size built at all (every one was refused)."""
        value = start.given.get(attr)
        if isinstance(value, bool):
            return self.builder(self.vary(start.given, {attr: not value})) is None
        if not (is_int(value) or is_int_list(value)):
            return False
        tried = variants_of(value, attr in self.nullable)
        return bool(tried) and all(
            self.builder(self.vary(start.given, {attr: v})) is None for v in tried
        )

    def _coupled(self, start: Build, attr: str) -> list[Build]:
        """Builds changing ``attr`` together with one other size, each to a variant of its own,
        for a size that builds with no other value alone."""
        others = [
            a
            for a in self.attrs
            if a != attr and (is_int(start.given.get(a)) or is_int_list(start.given.get(a)))
        ]
        found: list[Build] = []
        partners: set[str] = set()
        for v in variants_of(start.given[attr], False)[:3]:
            for other in others:
                if other in partners:
                    continue
                for w in variants_of(start.given[other], False)[:3]:
                    b = self.builder(self.vary(start.given, {attr: v, other: w}))
                    if b is None or b.params == start.params:
                        continue
                    self.coupled[id(b)] = (attr, other)
                    found.append(b)
                    partners.add(other)
                    break
                if len(found) >= 3:
                    return found
        if found:
            self.log(f"  {attr} varied with {sorted(partners)}")
        return found

    def _code_sizes(self, base: Build) -> Build:
        """Sizes the modelling code reads through ``getattr(config, "head_dim", None) or
        config.hidden_size // config.num_attention_heads`` where the config class has no such
        attribute (GLM-4.5's head_dim, 128, not 5120 // 96): each one that changes the tensors
        when given becomes a size of the entry, derived by the code's own rule when left out.
        Returns the base build, rebuilt with those sizes given."""
        cfg = self.builder.config(self.base_flat)
        with torch.device("meta"), contextlib.redirect_stdout(io.StringIO()):
            model = (
                self.builder.model_class._from_config(cfg)
                if self.builder.model_class is not None
                else AutoModelForCausalLM.from_config(cfg, trust_remote_code=False)
            )
        rules: set[tuple[str, str, str]] = set()
        modules = {inspect.getmodule(type(m)) for m in model.modules()}
        modules |= {inspect.getmodule(type(cfg))}
        sources = []
        for module in modules:
            if module is None or not module.__name__.startswith("transformers.models"):
                continue
            try:
                sources.append(inspect.getsource(module))
            except (OSError, TypeError):
                continue
            rules |= set(_GETATTR_RULE.findall(sources[-1]))
        self._block_kinds(sources)
        scopes = {""} | {k.rsplit(".", 1)[0] + "." for k in self.base_flat if "." in k}
        for name, a, b in sorted(rules):
            for scope in sorted(scopes):
                key, x, y = f"{scope}{name}", f"{scope}{a}", f"{scope}{b}"
                if key in self.base_flat or not (
                    is_int(self.base_flat.get(x)) and is_int(self.base_flat.get(y))
                ):
                    continue
                if not self.base_flat[y]:
                    continue
                value = self.base_flat[x] // self.base_flat[y]
                other = self.builder(self.vary(self.base_flat, {key: value * 2}))
                same = self.builder(self.vary(self.base_flat, {key: value}))
                if other is not None and other.params == base.params:
                    self.code_ignored.add(key)
                if other is None or same is None or other.params == base.params:
                    continue
                if same.params != base.params:
                    continue  # given its derived value it builds something else: not that rule
                self.code_derived[key] = f"{x} // {y}"
                self.base_flat[key] = value
                self.log(f"  the code reads {key}, else {x} // {y}")
        if not self.code_derived:
            return base
        rebuilt = self.builder(self.base_flat)
        if rebuilt is None:
            raise RuntimeError("the default config does not build with its code's sizes")
        return rebuilt

    def _block_kinds(self, sources: list[str]) -> None:
        """The kinds of block the type's code knows (transformers' layer type names, and its own
        ``*_LAYER_TYPES``) that its modules or config name: a per-layer list is also varied to
        each kind its default does not use (DeepSeek V4's sliding-window blocks, which have no
        compressor; the default config has none)."""
        known = set(ALLOWED_LAYER_TYPES)
        for source in sources:
            for body in re.findall(r"\w*LAYER_TYPES\w*\s*=\s*\(([^)]*)\)", source):
                known |= set(re.findall(r'"(\w+)"', body))
        text = "\n".join(sources)
        self.kinds = sorted(k for k in known if f'"{k}"' in text or f"'{k}'" in text)

    def _class_defaults(self, seeded: dict[str, Any]) -> dict[str, Any]:
        """Learned from a seeded base, defaulted as the class defaults: the seed's values give
        way to the class's, kept per layer where the seed made an attribute per-layer."""
        plain = flatten(AutoConfig.for_model(self.model_type))
        out = dict(seeded)
        for key, value in seeded.items():
            if key not in plain:
                continue
            default = plain[key]
            if isinstance(value, list) and is_int(default):
                default = [default] * len(value)
            out[key] = default
        return out

    def architecture_name(self) -> str:
        return self.model_class().__name__

    def model_class(self) -> type:
        if self.builder.model_class is not None:
            return self.builder.model_class
        cfg = self.builder.config(self.base_flat)
        with torch.device("meta"):
            return type(AutoModelForCausalLM.from_config(cfg, trust_remote_code=False))

    # -- what the config class fills in --------------------------------------------------------

    def resolved(self, given: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return flatten(self.builder.config(given))
        except Exception:
            return None

    def derivations(self, used: set[str]) -> dict[str, str]:
        """For each used attribute the config class computes when absent, its expression."""
        default = self.resolved({})
        if default is None:
            return {}
        samples: list[tuple[dict[str, Any], dict[str, Any]]] = [({}, default)]
        # Every size the class holds, not only those that size tensors: a per-layer pattern
        # follows an interval that sizes nothing itself (Llama 4's no_rope_layer_interval).
        varied = {b: [build.given[b] for build in builds] for b, builds in self.single.items()}
        for b, v in default.items():
            if b not in varied and is_int(v) and not _NOT_SIZES.search(b):
                varied[b] = variants_of(v, False)[:3]
            elif isinstance(v, float) and 0 < v < 1e6 and not _NOT_SIZES.search(b):
                # A fraction a size is derived from (DeepSeek V4's partial_rotary_factor).
                varied[b] = [v / 2, v * 2]
        for b, values in varied.items():
            # Layer counts that end a period early.
            extra = [7, 13, 15, 17] if "layers" in b and is_int(default.get(b)) else []
            for value in [*values, *extra]:
                given = {b: value}
                r = self.resolved(given)
                if r is not None:
                    samples.append((given, r))
        self.hidden = self.hidden_kwargs()
        for name, value in self.hidden.items():
            for v in (value * 2, value + 1):
                r = self.resolved({name: v})
                if r is not None:
                    samples.append(({name: v}, {**r, name: v}))
        # A sub-config a config.json gives takes its own class's defaults, not the ones the
        # outer class gives it when absent (Mistral 3's text_config): each such sub-config
        # given empty is a sample of its own, and its attributes' rules are learned from the
        # samples that give it.
        for sub in self.sub_defaults:
            r = self.sub_given[sub]
            samples.append(({f"{sub}.": True}, r))
        default = {**self.hidden, **default}
        samples = [(g, {**self.hidden, **r}) for g, r in samples]
        self._derivation_samples = samples
        # What the modelling code derives where the class has no attribute, as the code does.
        out: dict[str, str] = dict(self.code_derived)
        written = DERIVED.get(self.model_type, {})
        for a in sorted(used):
            if a not in default or a in written:
                continue
            sub = self._sub_of(a)
            reference = {**default, **self.hidden, **self.sub_given[sub]} if sub else default
            scoped = [
                (g, r) for g, r in samples if not sub or any(k.startswith(f"{sub}.") for k in g)
            ]
            varies = [(g, r) for g, r in scoped if a not in g and r.get(a) != reference[a]]
            if not varies:
                continue
            rows = [(r, (), r[a]) for g, r in scoped if a not in g and a in r]
            expr = self._derive(a, rows, reference)
            if expr is None:
                self.log(f"  no rule for the derived {a}")
                self.underived.add(a)
                continue
            stale = self._rule_fails(a, expr, reference)
            if stale:
                self.log(f"  the rule for the derived {a} ({expr}) {stale}: left out")
                self.underived.add(a)
                continue
            out[a] = expr
        out.update(written)
        self.underived -= set(written)
        ordered: dict[str, str] = {}
        while len(ordered) < len(out):
            for a, expr in out.items():
                if a not in ordered and not (names_in(expr) & (set(out) - set(ordered) - {a})):
                    ordered[a] = expr
                    break
            else:
                raise RuntimeError(f"derived attributes depend on each other: {sorted(out)}")
        return ordered

    def _sub_of(self, a: str) -> str:
        """The sub-config an attribute belongs to, where a config.json that gives it gets its
        own class's defaults; else ''."""
        sub = a.split(".", 1)[0] if "." in a else ""
        return sub if sub in self.sub_defaults else ""

    def _sub_configs(self) -> None:
        """Sub-configs whose defaults, given as a dict, differ from the outer class's: their
        own class's defaults where they differ (``sub_defaults``), and each one's flat config."""
        self.sub_defaults: dict[str, dict[str, Any]] = {}
        self.sub_given: dict[str, dict[str, Any]] = {}
        config = self.builder.config({})
        for key in config.to_dict():
            if sub_config(config, key) is None:
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    given = flatten(AutoConfig.for_model(self.model_type, **{key: {}}))
            except Exception:
                continue
            differ = {
                k[len(key) + 1 :]: v
                for k, v in given.items()
                if k.startswith(f"{key}.") and self.base_flat.get(k) != v and _plain(k, v)
            }
            if differ:
                self.sub_defaults[key] = differ
                self.sub_given[key] = given

    def _rule_fails(self, a: str, expr: str, default: dict[str, Any]) -> str:
        """Why a derivation rule holds only where it was fitted, or '' where it holds: a bare
        number an attribute of the same value may stand for, where a config with that attribute
        changed derives ``a`` otherwise; or a config changing every size the rule reads at once
        (to values no sample had) that the class derives otherwise."""
        given = {
            x: _held_out_value(x, default[x], Fraction(3, 2))
            for x in names_in(expr)
            if is_int(default.get(x)) and x not in self.hidden
        }
        r = self.resolved(given) if given else None
        if r is not None and a in r:
            try:
                held = evaluate(expr, {**self.hidden, **r}, ())
            except Exception:
                held = None
            if held != r[a]:
                return f"gives {held} where the class derives {r[a]} from {given}"
        sub = self._sub_of(a)
        for c in _literals(expr):
            for attr, v in default.items():
                if attr == a or v != c or not is_int(v) or _NOT_SIZES.search(attr):
                    continue
                if sub and not attr.startswith(f"{sub}."):
                    continue  # outside the sub-config, the rule does not apply
                for w in variants_of(v, False)[:2]:
                    r = self.resolved({attr: w})
                    if r is None or a not in r:
                        continue
                    try:
                        if evaluate(expr, {**self.hidden, **r}, ()) != r[a]:
                            return f"holds {c}, which is {attr}"
                    except Exception:
                        return f"holds {c}, which is {attr}"
        return ""

    def _derive(
        self,
        a: str,
        rows: list[tuple[dict[str, Any], tuple[int, ...], Any]],
        default: dict[str, Any],
    ) -> str | None:
        value = default[a]
        sizes_ = [
            k for k, v in default.items() if k != a and is_int(v) and not _NOT_SIZES.search(k)
        ]
        if is_int(value):
            # The forms config classes write, simplest first: another size, a ratio, a product
            # over a size (Granite 4's mamba_d_head = mamba_expand * hidden_size // mamba_n_heads).
            simple = [*sizes_, *(f"{x} // {y}" for x, y in itertools.permutations(sizes_, 2))]
            fractions = [
                k for k, v in default.items() if isinstance(v, float) and not _NOT_SIZES.search(k)
            ]
            simple += [f"int({x} * {f})" for x in sizes_ for f in fractions]
            simple += [
                f"{x} * {y} // {z}"
                for x, y in itertools.combinations(sizes_, 2)
                for z in sizes_
                if z not in (x, y)
            ]
            for text in simple:
                try:
                    if all(evaluate(text, r, ()) == r[a] for r, _, _ in rows):
                        return text
                except Exception:
                    continue
            candidates = [attr_var(k) for k in sizes_]
            candidates += [
                ratio_var(attr_var(x), attr_var(y)) for x, y in itertools.permutations(sizes_, 2)
            ]
            return fit(rows, candidates, max_vars=2)
        if isinstance(value, list) and all(
            isinstance(r.get(a), list) and all(is_int(x) for x in r[a]) for r, _, _ in rows
        ):
            found = self._derive_indices(a, rows, default, sizes_)
            if found is not None:
                return found
        if isinstance(value, list):
            n_rows = [(r, (), len(r[a])) for r, _, _ in rows if isinstance(r.get(a), list)]
            n = fit(
                n_rows,
                [attr_var(k) for k in sizes_]
                + [len_var(k) for k, v in default.items() if isinstance(v, list) and k != a],
                max_vars=1,
            )
            if n is None or not all(isinstance(r.get(a), list) for r, _, _ in rows):
                return None  # a list only in some builds: the class does not derive it alone
            kinds = sorted({json.dumps(x) for r, _, _ in rows for x in r[a]})
            if len(kinds) == 1:
                text = f"[{json.loads(kinds[0])!r}] * {_paren(n)}"
                return text if all(evaluate(text, r, ()) == r[a] for r, _, _ in rows) else None
            for scalar in sizes_:
                text = f"[{scalar}] * {_paren(n)}"
                if all(evaluate(text, r, ()) == r[a] for r, _, _ in rows):
                    return text
            if len(kinds) != 2:
                return None
            x, y = (json.loads(k) for k in kinds)
            atoms = [
                x
                for x in self.atoms(1) + self.interval_atoms(default) + self.hidden_atoms()
                if "[i" not in x and a not in names_in(x)
            ]
            # Some classes force the last layer to full attention whatever the pattern says.
            atoms += [f"{_paren_bool(a)} and i < {_paren(n)} - 1" for a in atoms]
            # Two rules at once, over the class's own numbers (AXK2's sparse MLP blocks: from
            # the first_k_dense_replace-th, every moe_layer_freq-th).
            own = self.interval_atoms(default) + [
                x for x in self.hidden_atoms() if not re.search(r"% \d", x)
            ]
            atoms += [f"{p} and {q}" for p, q in itertools.permutations(own, 2)]
            for atom in atoms:
                for yes, no in ((x, y), (y, x)):
                    text = f"[{yes!r} if {atom} else {no!r} for i in range({n})]"
                    try:
                        if all(evaluate(text, r, ()) == r[a] for r, _, _ in rows):
                            return text
                    except Exception:
                        break
        return None

    def hidden_kwargs(self) -> dict[str, int]:
        """Keyword arguments the config class takes without keeping them as attributes
        (``full_attention_interval``), with their literal int defaults, read from its source."""
        found: dict[str, int] = {}
        config = self.builder.config({})
        # The class's own, and its sub-configs' (Gemma 4's text config takes global_head_dim).
        scopes = [("", type(config))] + [
            (f"{key}.", type(sub))
            for key in config.to_dict()
            if (sub := sub_config(config, key)) is not None
        ]
        for prefix, klass in scopes:
            for k in klass.__mro__:
                if not k.__module__.startswith("transformers.models"):
                    continue
                try:
                    src = inspect.getsource(k)
                except (OSError, TypeError):
                    continue
                for name, default in re.findall(
                    r'kwargs\.(?:pop|get)\(\s*"(\w+)"\s*,\s*(\d+)\s*\)', src
                ):
                    if f"{prefix}{name}" not in self.base_flat:
                        found[f"{prefix}{name}"] = int(default)
        return found

    def _derive_indices(
        self,
        a: str,
        rows: list[tuple[dict[str, Any], tuple[int, ...], Any]],
        default: dict[str, Any],
        sizes_: list[str],
    ) -> str | None:
        """A list of block numbers the class derives (Llama 4's ``moe_layers``: every
        ``interleave_moe_layer_step``-th block), as the blocks of a count that satisfy a rule."""
        counts = [k for k in sizes_ if re.search(r"layers?$", k.rsplit(".", 1)[-1])]
        # Atoms may read another per-layer list (LFM2's full_attn_idxs: the blocks whose
        # layer_types entry is full attention), not this one.
        atoms = [
            x
            for x in self.atoms(1) + self.interval_atoms(default) + self.hidden_atoms()
            if a not in names_in(x)
        ]
        for n in counts:
            for atom in atoms:
                text = f"[i for i in range({n}) if {atom}]"
                try:
                    if all(evaluate(text, r, ()) == r[a] for r, _, _ in rows):
                        return text
                except Exception:
                    continue
        return None

    def interval_atoms(self, default: dict[str, Any]) -> list[str]:
        """Periodic block patterns over any int attribute of the class (an interval that sizes
        no tensor), tried before bare periods."""
        out = []
        for name, v in default.items():
            if is_int(v) and v >= 1 and not _NOT_SIZES.search(name) and name not in self.single:
                out += [f"(i + 1) % {name}", f"(i + 1) % {name} == 0", f"i % {name} == 0"]
                out += [f"i >= {name}", f"i < {name}"]
        return out

    def hidden_atoms(self) -> list[str]:
        out = []
        for name in self.hidden_kwargs():
            out += [f"(i + 1) % {name}", f"(i + 1) % {name} == 0", f"i % {name} == 0"]
            out += [f"i >= {name}", f"i < {name}"]
        for c in range(2, 9):
            out += [f"(i + 1) % {c}", f"(i + 1) % {c} == 0", f"i % {c} == 0"]
        return out

    # -- checking ------------------------------------------------------------------------------

    def verify(self, entry: dict[str, Any]) -> None:
        """The entry must give every observed build's tensors exactly."""
        for k, obs in enumerate(self.observations):
            if k in self.outliers:
                continue
            got = instantiate(entry, obs.flat)
            want = {n: s for n, (s, _) in obs.params.items()}
            if got != want:
                missing = sorted(set(want) - set(got))[:3]
                extra = sorted(set(got) - set(want))[:3]
                wrong = sorted(n for n in set(got) & set(want) if got[n] != want[n])[:3]
                raise RuntimeError(
                    f"the entry does not give a build's tensors: missing {missing}, "
                    f"extra {extra}, wrong {wrong}"
                )

    # -- families and containers -------------------------------------------------------------

    def _families(self) -> dict[str, list[dict[tuple[int, ...], tuple[int, ...]]]]:
        """Per family, per observation, index tuple -> shape."""
        out: dict[str, list[dict[tuple[int, ...], tuple[int, ...]]]] = {}
        for k, obs in enumerate(self.observations):
            for name, (shape, _) in obs.params.items():
                fam, idx = family_of(name)
                out.setdefault(fam, [{} for _ in self.observations])[k][idx] = shape
        for fam in out:
            while len(out[fam]) < len(self.observations):
                out[fam].append({})
        return out

    def _order(self, fam: str) -> int:
        names = list(self.base.params)
        for i, n in enumerate(names):
            if family_of(n)[0] == fam:
                return i
        return len(names)

    def lengths(self, obs_index: int) -> dict[tuple[str, tuple[int, ...]], int]:
        """Length of every container in one observation, keyed by (path, outer indices)."""
        out: dict[tuple[str, tuple[int, ...]], int] = {}
        for fam, per_obs in self.fams.items():
            paths = containers(fam)
            for idx in per_obs[obs_index]:
                for pos, path in enumerate(paths):
                    key = (path, idx[:pos])
                    out[key] = max(out.get(key, 0), idx[pos] + 1)
        return out

    def _containers(self) -> dict[str, str]:
        result: dict[str, str] = {}
        paths = sorted({p for fam in self.fams for p in containers(fam)})
        for path in paths:
            samples = []
            for k, obs in enumerate(self.observations):
                for (p, outer), n in self._lengths[k].items():
                    if p == path:
                        samples.append((obs.flat, outer, n))
            expr = fit(samples, self.length_candidates(), max_vars=2)
            if expr is None:
                raise RuntimeError(f"no expression for the length of {path}")
            result[path] = expr
        return result

    def length_candidates(self) -> list[Var]:
        """Quantities a block list's length may be: layer counts and list lengths first, so
        that a size equal by chance (``conv_kernel`` = 4 = four blocks) is tried last."""
        ints = [k for k, v in self.base_flat.items() if k in self.single and is_int(v)]
        out = [attr_var(k) for k in ints if "layer" in k]
        out += [len_var(k) for k, v in self.base_flat.items() if isinstance(v, list) and v]
        out += [attr_var(k) for k in ints if "layer" not in k]
        return out

    # -- one tensor family -------------------------------------------------------------------

    def _shape(self, fam: str) -> list[str]:
        ndim = {len(s) for m in self.fams[fam] for s in m.values()}
        if len(ndim) != 1:
            raise RuntimeError(f"{fam} changes rank across configs")
        return [self._dim(fam, d) for d in range(ndim.pop())]

    def _dtype(self, fam: str) -> str:
        """The storage dtype transformers keeps whatever the model's (fp32 routers), or ''."""
        found = {
            self.observations[k].params[_name(fam, idx)][1]
            for k, m in enumerate(self.fams[fam])
            for idx in m
        }
        return sorted(found)[0] if len(found) == 1 else ""

    def _written(self, fam: str, d: int) -> str | None:
        """A size written from the modelling code (OVERRIDES): of this type, or of the language
        model a multimodal type nests (LFM2-VL's text_config is an LFM2), its names prefixed."""
        written = OVERRIDES.get(self.model_type, {}).get(fam, {}).get(d)
        if written is not None:
            return written
        for key, value in self.base_flat.items():
            if not key.endswith(".model_type") or value not in OVERRIDES:
                continue
            prefix = key[: -len("model_type")]
            for name, dims in OVERRIDES[value].items():
                inner = name.removeprefix("model.")
                if d in dims and fam != name and fam.endswith(f".{inner}"):
                    text = dims[d]
                    for attr in sorted(names_in(text), key=len, reverse=True):
                        text = re.sub(rf"(?<![\w.]){attr}\b", f"{prefix}{attr}", text)
                    return text
        return None

    def _dim(self, fam: str, d: int, retry: bool = False) -> str:
        written = self._written(fam, d)
        if written is not None:
            return written
        k0 = next(k for k, m in enumerate(self.fams[fam]) if m)
        fbase = self.observations[k0]
        if fbase is not self.base:
            self._probe_from(fbase)
        dep = self._dependencies(fam, d, fbase)
        if len(dep) >= 2:
            self._grid(fbase, dep)
        samples = [
            (self.observations[k].flat, idx, shape[d])
            for k, m in enumerate(self.fams[fam])
            for idx, shape in m.items()
        ]
        candidates = self.dim_candidates(dep)
        expr = fit(samples, candidates, max_vars=min(5, len(candidates)))
        if expr is None:
            expr = self._fit_by_kind(samples, dep)
        if expr is None:
            # A product over a size (DeepSeek V4's grouped output projection takes
            # num_attention_heads * head_dim // o_groups inputs per group).
            scalars = [attr_var(a) for a in dep if is_int(self.base_flat.get(a))]
            products = [
                product_ratio_var(x, y, z)
                for x, y in itertools.combinations(scalars, 2)
                for z in scalars
                if z not in (x, y)
            ]
            expr = fit(samples, products, max_vars=1)
        if expr is None:
            # A size that only some variations reveal (``heads * (hidden // heads)``): every
            # size attribute, and ratios of the dependencies to them, three at most.
            others = [attr_var(a) for a in self.single if is_int(self.base_flat[a])]
            ratios = [
                r
                for a in dep
                if is_int(self.base_flat[a])
                for b in others
                if b.text != a
                for r in (ratio_var(attr_var(a), b), ratio_var(b, attr_var(a)))
            ]
            expr = fit(samples, [*candidates, *others, *ratios], max_vars=3)
        if expr is None:
            raise RuntimeError(f"no expression for dim {d} of {fam} (depends on {dep})")
        stale = self._unvaried(fam, expr)
        if stale:
            if not retry:
                # Vary the attributes the constant may stand for off every build of the family,
                # then fit again.
                for k, m in enumerate(self.fams[fam]):
                    if m and not getattr(self.observations[k], "_probed", False):
                        self._probe_from(self.observations[k])
                        break
                return self._dim(fam, d, retry=True)
            raise RuntimeError(
                f"dim {d} of {fam} is {expr}: its {stale} was never varied where the tensor is"
            )
        return expr

    def _unvaried(self, fam: str, expr: str) -> str:
        """A bare number of a fitted size that a config attribute may stand for: an attribute of
        that value in every build that has the family (never varied there), so nothing shows
        the number is not that attribute. Returns a description, or '' where none is."""
        builds = [self.observations[k] for k, m in enumerate(self.fams[fam]) if m]
        for c in sorted(_literals(expr)):
            if c < 1:
                continue
            for attr, v in builds[0].flat.items():
                if v != c or not is_int(v) or _NOT_SIZES.search(attr):
                    continue
                if all(b.flat.get(attr) == c for b in builds):
                    return f"{c} ({attr})"
        return ""

    def _fit_by_kind(
        self, samples: list[tuple[dict[str, Any], tuple[int, ...], int]], dep: list[str]
    ) -> str | None:
        """One expression per kind of block, where a per-block list names kinds of different sizes,
        or per value of a switch (``multi_query``)."""
        for switch in (a for a in dep if isinstance(self.base_flat[a], bool) or a in self.nullable):
            split: dict[bool, list[tuple[dict[str, Any], tuple[int, ...], int]]] = {}
            for sample in samples:
                value = sample[0].get(switch)
                on = bool(value) if isinstance(value, bool) else value is not None
                split.setdefault(on, []).append(sample)
            if len(split) != 2:
                continue
            others = self.dim_candidates([a for a in dep if a != switch])
            # Where set, a nullable size may size the tensor itself.
            with_switch = others + ([attr_var(switch)] if switch in self.nullable_int else [])
            yes = fit(split[True], with_switch, max_vars=min(5, len(with_switch)))
            no = fit(split[False], others, max_vars=min(5, len(others)))
            if yes is not None and no is not None:
                test = (
                    switch if isinstance(self.base_flat[switch], bool) else f"{switch} is not None"
                )
                return f"{_paren(yes)} if {test} else {_paren(no)}"
        for kinds in (a for a, v in self.base_flat.items() if is_str_list(v) and len(set(v)) > 1):
            groups: dict[str, list[tuple[dict[str, Any], tuple[int, ...], int]]] = {}
            for flat, idx, value in samples:
                listed = flat.get(kinds)
                if not isinstance(listed, list) or not idx or idx[0] >= len(listed):
                    break
                groups.setdefault(listed[idx[0]], []).append((flat, idx, value))
            else:
                others = self.dim_candidates([a for a in dep if a != kinds])
                exprs = {}
                for kind, group in sorted(groups.items()):
                    e = fit(group, others, max_vars=min(5, len(others)))
                    if e is None:
                        break
                    exprs[kind] = e
                else:
                    if len(set(exprs.values())) == 1:
                        return next(iter(exprs.values()))
                    items = list(exprs.items())
                    text = items[-1][1]
                    for kind, e in reversed(items[:-1]):
                        text = f"{_paren(e)} if {kinds}[i] == {kind!r} else {_paren(text)}"
                    return text
        return None

    def _dependencies(self, fam: str, d: int, fbase: Build) -> list[str]:
        """Attributes whose variation alone, off the family's first build, changed dimension d."""
        per_obs = self.fams[fam]
        k0 = self.observations.index(fbase)
        dep: list[str] = []
        for k, obs in enumerate(self.observations):
            changed = [
                a
                for a in set(obs.given) | set(fbase.given)
                if obs.given.get(a) != fbase.given.get(a)
            ]
            if len(changed) > 1:
                # A layer count carries its per-layer lists along (Learner.vary): the count is
                # the one change.
                changed = [a for a in changed if not isinstance(obs.given.get(a), list | str)]
            pair = self.coupled.get(id(obs))
            if pair is not None and set(changed) == set(pair):
                # Two sizes that only build together: both are candidates where the size moved.
                common = set(per_obs[k0]) & set(per_obs[k])
                if any(per_obs[k0][i][d] != per_obs[k][i][d] for i in common):
                    dep += [a for a in pair if a not in dep]
                continue
            if len(changed) != 1 or changed[0] in dep:
                continue
            common = set(per_obs[k0]) & set(per_obs[k])
            if any(per_obs[k0][i][d] != per_obs[k][i][d] for i in common):
                dep.append(changed[0])
        return sorted(dep)

    def _probe_from(self, fbase: Build) -> None:
        """Single-attribute variations off another build (a family that only it has): of every
        attribute, not only those that changed the default's tensors (Llama 4's
        ``intermediate_size_mlp`` sizes only the dense layers the default has none of)."""
        if getattr(fbase, "_probed", False):
            return
        fbase._probed = True  # type: ignore[attr-defined]
        for attr in self.attrs:
            builds = self.single.get(attr, [])
            values = [b.given[attr] for b in builds[:2] if b.given[attr] != fbase.given.get(attr)]
            if builds and id(builds[0]) in self.coupled:
                for b in builds[:2]:
                    pair = self.coupled[id(b)]
                    changes = {a: b.given[a] for a in pair}
                    new = self.builder(self.vary(fbase.given, changes))
                    if new is not None:
                        self.coupled[id(new)] = pair
                        self.observe(new)
                continue
            if values:
                for value in values:
                    self.observe(self.builder(self.vary(fbase.given, {attr: value})))
            else:
                for b in self._variations(fbase, attr, limit=2):
                    self.observe(b)
        self.fams = self._families()

    def dim_candidates(self, dep: list[str]) -> list[Var]:
        out: list[Var] = []
        for a in dep:
            v = self.base_flat[a]
            if is_int(v) or (v is None and a in self.nullable_int):
                out.append(attr_var(a))
            elif is_int_list(v):
                out.append(indexed_var(a, 0))
                out.append(indexed_var(a, 1))
                if len(v) <= 4:
                    # A short list of sizes, not one per block (Kimi K2.5's merge_kernel_size).
                    out += [element_var(a, n) for n in range(len(v))]
        scalars = [
            attr_var(a)
            for a in dep
            if is_int(self.base_flat[a]) or (self.base_flat[a] is None and a in self.nullable_int)
        ]
        for x, y in itertools.permutations(scalars, 2):
            out.append(ratio_var(x, y))
        return out

    def _grid(self, fbase: Build, dep: list[str]) -> None:
        """Builds with every combination of the dependencies' first variations."""
        if len(dep) > 6:
            return
        choices = [[fbase.given[a], self.single[a][0].given[a]] for a in dep if a in self.single]
        names = [a for a in dep if a in self.single]
        for combo in itertools.product(*choices):
            self.observe(self.builder(self.vary(fbase.given, dict(zip(names, combo, strict=True)))))
        # A second variation of each, off the far corner, separates degrees.
        far = {a: self.single[a][0].given[a] for a in names}
        for a in names:
            if len(self.single[a]) > 1:
                self.observe(
                    self.builder(self.vary(fbase.given, {**far, a: self.single[a][1].given[a]}))
                )
        self.fams = self._families()

    # -- presence ----------------------------------------------------------------------------

    def _presence(self, fam: str) -> str | None:
        written = PRESENCE.get(self.model_type, {}).get(fam)
        if written is not None:
            return written
        found = self._presence_of(fam)
        if found is not None:
            paths = tuple(containers(fam))
            points, _ = self._truth(paths)
            bits = 0
            for n, (k, idx) in enumerate(points):
                if idx in self.fams[fam][k]:
                    bits |= 1 << n
            self.solved.setdefault(paths, {})[found] = bits
        return found

    def _presence_of(self, fam: str) -> str | None:
        try:
            return self._condition(fam, ignore=self.outliers)
        except RuntimeError:
            pass
        # A variation past what the model can mean (more KV-shared layers than layers) builds
        # something no config describes; the builds with one such value may be set aside.
        if not self.outliers:
            tried: set[tuple[str, str]] = set()
            for obs in self.observations:
                changed = [a for a in obs.given if obs.given.get(a) != self.base.given.get(a)]
                if len(changed) != 1:
                    continue
                attr, value = changed[0], obs.given[changed[0]]
                if not is_int(value):
                    continue  # a switch is a real configuration, never set aside
                key = (attr, json.dumps(value))
                if key in tried:
                    continue
                tried.add(key)
                ignore = {k for k, o in enumerate(self.observations) if o.given.get(attr) == value}
                try:
                    found = self._condition(fam, ignore=ignore)
                except RuntimeError:
                    continue
                self.outliers = ignore
                self.log(f"  set aside the builds with {attr} = {value}")
                return found
        raise RuntimeError(f"no condition for {fam}")

    def _condition(self, fam: str, ignore: set[int]) -> str | None:
        paths = tuple(containers(fam))
        points, truth = self._truth(paths)
        per_obs = self.fams[fam]
        target = 0
        mask = 0
        for n, (k, idx) in enumerate(points):
            if k in ignore:
                continue
            mask |= 1 << n
            if idx in per_obs[k]:
                target |= 1 << n
        truth = {a: x & mask for a, x in truth.items()}
        full = mask
        if target == full:
            return None
        for text, bits in truth.items():
            if bits == target:
                return text
        # Conjunctions of atoms true wherever the family is; disjunctions of atoms true only there.
        wider = [(a, x) for a, x in truth.items() if x & target == target and x != full]
        narrower = [(a, x) for a, x in truth.items() if x & ~target == 0 and x]
        # A condition already found for another tensor (the weight beside this bias), narrowed by
        # one atom (``use_bias``).
        for text, solved_bits in self.solved.get(paths, {}).items():
            bits = solved_bits & mask
            if bits & target != target:
                continue
            for a, x in wider:
                if bits & x == target:
                    return f"{_paren_bool(text)} and {_paren_bool(a)}"
            # ... or by a disjunction of two atoms (``not k_eq_v or not a full-attention layer``)
            inside = [(a, x & bits) for a, x in truth.items() if x & bits & ~target == 0]
            for (a, x), (b, y) in itertools.combinations(inside, 2):
                if x | y == target:
                    return f"{_paren_bool(text)} and ({a} or {b})"
        for size in (2, 3):
            for combo in itertools.combinations(wider, size):
                bits = full
                for _, x in combo:
                    bits &= x
                if bits == target:
                    return " and ".join(_paren_bool(a) for a, _ in combo)
            for combo in itertools.combinations(narrower, size):
                bits = 0
                for _, x in combo:
                    bits |= x
                if bits == target:
                    return " or ".join(_paren_bool(a) for a, _ in combo)
        raise RuntimeError(f"no condition for {fam}")

    def _truth(
        self, paths: tuple[str, ...]
    ) -> tuple[list[tuple[int, tuple[int, ...]]], dict[str, int]]:
        """Every (observation, index) point of a container nesting, and each atom's truth there."""
        if paths in self._truths:
            return self._truths[paths]
        points: list[tuple[int, tuple[int, ...]]] = []
        for k in range(len(self.observations)):
            universe = self._universe(list(paths), self._lengths[k], self.observations[k].flat)
            points.extend((k, idx) for idx in universe or ())
        truth: dict[str, int] = {}
        for text in self.atoms(len(paths)):
            bits = 0
            try:
                for n, (k, idx) in enumerate(points):
                    if evaluate(text, self.observations[k].flat, idx):
                        bits |= 1 << n
            except Exception:
                continue
            truth.setdefault(text, bits)
        self._truths[paths] = (points, truth)
        return points, truth

    def _universe(
        self,
        paths: list[str],
        lengths: dict[tuple[str, tuple[int, ...]], int],
        flat: dict[str, Any],
    ) -> list[tuple[int, ...]] | None:
        """Every index a family could have in one build: the outer list as built, inner lists as
        long as their fitted length says (a block without the inner list still counts, so that
        what turns it off is learned)."""
        out: list[tuple[int, ...]] = [()]
        for path in paths:
            nxt = []
            for outer in out:
                n = lengths.get((path, outer))
                if n is None:
                    if path == paths[0]:
                        return None  # the container itself is absent
                    try:
                        n = evaluate(self.container_len[path], flat, outer)
                    except Exception:
                        continue
                nxt.extend((*outer, i) for i in range(n))
            out = nxt
        return out

    def atoms(self, depth: int) -> list[str]:
        flat = self.base_flat
        seen_values: dict[str, set[Any]] = {}
        for obs in self.observations:
            for k, v in obs.flat.items():
                seen_values.setdefault(k, set()).add(json.dumps(v))
        out: list[str] = ["i == 0", "i > 0"] if depth else []
        for k, v in flat.items():
            if _NOT_SIZES.search(k):
                continue
            values = [json.loads(x) for x in seen_values.get(k, ())]
            if isinstance(v, bool):
                out += [k, f"not {k}"]
            if any(x is None for x in values) and any(x is not None for x in values):
                out += [f"{k} is None", f"{k} is not None"]
            if is_int(v) or any(is_int(x) for x in values):
                out += [f"{k} > 0", f"{k} == 0", f"{k} > 1"]
                for k2, v2 in flat.items():
                    if k2 > k and is_int(v2) and k in self.single and k2 in self.single:
                        out += [f"{k} != {k2}", f"{k} == {k2}"]
            if depth >= 1:
                if is_int(v) and k in self.single:
                    out += [
                        f"i >= {k}",
                        f"i < {k}",
                        f"i <= {k}",
                        f"i > {k}",
                        f"(i + 1) % {k} == 0",
                        f"(i + 1) % {k} != 0",
                        f"i % {k} == 0",
                        f"i == {k} - 1",
                    ]
                    for k2, v2 in flat.items():
                        if k2 != k and is_int(v2) and k2 in self.single:
                            out += [f"i % {k} == {k2}", f"i % {k} != {k2}"]
                            out += [f"i < {k} - {k2}", f"i >= {k} - {k2}"]
                if is_str_list(v) or any(is_str_list(x) for x in values):
                    kinds = {s for x in values if isinstance(x, list) for s in x}
                    for s in sorted(kinds):
                        out += [f"{k}[i] == {s!r}", f"{k}[i] != {s!r}"]
                        # A pattern shorter than the blocks repeats (recurrent_gemma's block_types).
                        out += [f"{k}[i % len({k})] == {s!r}", f"{k}[i % len({k})] != {s!r}"]
                if isinstance(v, list) and all(isinstance(x, bool) for x in v) and v:
                    out += [f"{k}[i]", f"not {k}[i]"]
                if isinstance(v, list) and (not v or is_int_list(v)):
                    out += [f"i in {k}", f"i not in {k}"]
                if isinstance(v, str) and len(v) > 1:
                    for c in sorted(set(v)):
                        out += [f"{k}[i] == {c!r}", f"{k}[i] != {c!r}"]
        return out


def instantiate(entry: dict[str, Any], flat: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The tool's own reading of an entry (the core's reading is tested against transformers)."""
    out: dict[str, tuple[int, ...]] = {}
    for t in entry["tensors"]:
        paths = containers(t["name"])
        idxs: list[tuple[int, ...]] = [()]
        for path in paths:
            idxs = [
                (*o, i) for o in idxs for i in range(evaluate(entry["containers"][path], flat, o))
            ]
        for idx in idxs:
            if t.get("when") and not evaluate(t["when"], flat, idx):
                continue
            out[t["name"].format(*idx)] = tuple(evaluate(d, flat, idx) for d in t["shape"])
    return out


_JUNK = re.compile(
    r"(^|\.)(id2label|label2id|task_specific_params|transformers_version|architectures)$"
)


def _plain(key: str, value: Any) -> bool:
    """A default worth storing: a number, flag, name or per-layer list, not bookkeeping."""
    if _JUNK.search(key) or key.endswith("_token_id") or key.endswith("_token_ids"):
        return False
    if isinstance(value, bool | int | float | str) or value is None:
        return True
    return (
        isinstance(value, list)
        and len(value) <= 4096
        and all(isinstance(x, bool | int | float | str) for x in value)
    )


def _paren_bool(text: str) -> str:
    return f"({text})" if " and " in text or " or " in text else text


def _is_pattern(v: Any) -> bool:
    """A per-layer pattern string such as ``M-M*-M-E``, not a word such as ``silu``."""
    return isinstance(v, str) and len(v) >= 4 and not v.replace("_", "").isalnum()


def _name(fam: str, idx: tuple[int, ...]) -> str:
    return fam.format(*idx)


def expectations(
    model_type: str, table_entry: dict[str, Any], model_class: type | None = None
) -> list[dict[str, Any]]:
    """Configs of a type with the parameter count transformers gives them, for the tests.

    The first is the bare ``{"model_type": ...}`` (everything from defaults and derivations); the
    others change the sizes the entry reads at once, to values the learner never built (it
    doubles, halves, triples and steps by one; these scale by 3/2 and 3/4 and step by two), with
    ``head_dim`` given explicitly where the entry reads it, as a published config would.
    """
    builder = Builder(model_type, model_class)
    named = {} if model_class is None else {"architectures": [model_class.__name__]}
    out = []
    # The entry's defaults hold the sizes only the modelling code reads (head_dim).
    base_flat = {**table_entry.get("defaults", {}), **flatten(builder.config({}))}
    for changes in _held_out_configs(table_entry, base_flat, builder):
        build = builder(changes)
        if build is None:
            continue
        out.append(
            {
                "config": {"model_type": model_type, **named, **unflatten(changes)},
                "parameters": sum(math.prod(s) for s, _ in build.params.values()),
            }
        )
    return out


def _held_out_value(key: str, value: int, factor: Fraction) -> int:
    """A size at a value no learning build had: widths scaled (even where they were), counts
    and layer numbers moved by two."""
    leaf = key.rsplit(".", 1)[-1]
    if value < 8 or re.search(r"layer|step|interval|first_k|dense|experts_per_tok|group", leaf):
        return value + 2 if factor > 1 else max(1, value - 2) if value > 3 else value + 3
    scaled = int(value * factor)
    return scaled + (scaled % 2) if value % 2 == 0 else scaled


def _held_out_configs(
    entry: dict[str, Any], base: dict[str, Any], builder: Builder
) -> list[dict[str, Any]]:
    """{} and up to two configs that change every size the entry reads that still builds."""
    used: set[str] = set()
    for t in entry["tensors"]:
        for text in [*t["shape"], t.get("when") or "0"]:
            used |= names_in(text)
    for text in entry.get("derived", {}).values():
        used |= names_in(text)
    used |= {k for k in entry.get("derived", {}) if k.rsplit(".", 1)[-1] == "head_dim"}
    sizes_ = [k for k in sorted(used) if is_int(base.get(k)) and base[k] >= 1]
    picks: list[dict[str, Any]] = [{}]
    for factor in (Fraction(3, 2), Fraction(3, 4)):
        changes: dict[str, Any] = {}
        for k in sizes_:
            trial = {**changes, k: _held_out_value(k, base[k], factor)}
            if builder(trial) is not None:
                changes = trial
        # head_dim given, and not the width over the heads (GLM-4.5: 128, not 5120 // 96).
        for k in [k for k in sizes_ if k.rsplit(".", 1)[-1] == "head_dim"]:
            prefix = k[: -len("head_dim")]
            hidden = changes.get(f"{prefix}hidden_size", base.get(f"{prefix}hidden_size"))
            heads = changes.get(
                f"{prefix}num_attention_heads", base.get(f"{prefix}num_attention_heads")
            )
            if is_int(hidden) and is_int(heads) and heads and changes.get(k) == hidden // heads:
                trial = {**changes, k: changes[k] + 16}
                if builder(trial) is not None:
                    changes = trial
        if changes:
            picks.append(changes)
    return picks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument(
        "-j", "--jobs", type=int, default=1, help="types learned at once, each in its own process"
    )
    parser.add_argument(
        "--expected",
        action="store_true",
        help="only (re)write the tests' expected counts from the table already written",
    )
    parser.add_argument(
        "--annotate",
        action="store_true",
        help="only refresh the class facts (SDPA support) of the entries already written",
    )
    args = parser.parse_args()
    if args.expected:
        return write_expected(args.only)
    if args.annotate:
        doc = json.loads(TARGET.read_text())
        for t, entry in doc["architectures"].items():
            if args.only and t not in args.only:
                continue
            model_type, _, class_name = t.partition(":")
            name = class_name or entry["architecture"]
            learner = Learner(model_type, getattr(transformers, name, None))
            entry["aliases"] = aliases_of(model_type)
            entry["sdpa"] = bool(getattr(learner.model_class(), "_supports_sdpa", False))
        TARGET.write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    types = args.only or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    # A multimodal checkpoint names a class of its own (Qwen3_5ForConditionalGeneration): its
    # whole tensors, vision tower included, are an entry "model_type:Class" where the causal-LM
    # class differs, and the model type's own entry where there is none.
    types += [
        f"{t}:{name}" if t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES else t
        for t, name in sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.items())
        if MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(t) != name
        and hasattr(transformers, name)
        and (not args.only or t in args.only)
    ]
    types = list(dict.fromkeys(types))
    out: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    if args.only and TARGET.exists():
        out = json.loads(TARGET.read_text())["architectures"]
        expected = json.loads(EXPECTED.read_text())["types"]
    jobs = [(t, args.verbose) for t in types]
    if args.jobs > 1:
        # Each type in a process of its own: the learner keeps module state per type.
        with multiprocessing.get_context("spawn").Pool(args.jobs, maxtasksperchild=4) as pool:
            done = pool.imap_unordered(learn_type, jobs)
            _collect(done, out, expected, args.verbose)
    else:
        _collect(map(learn_type, jobs), out, expected, args.verbose)
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "about": "Written by tools/build_architectures.py from transformers; do not edit by hand.",
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "architectures": dict(sorted(out.items())),
    }
    TARGET.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    write_expected_doc(expected)
    return 0


def learn_type(job: tuple[str, bool]) -> tuple[str, dict[str, Any] | None, Any, str]:
    """One table key learned and checked: (key, entry or None, its cases or the failure, the
    line to print)."""
    t, verbose = job
    t0 = time.time()
    model_type, _, class_name = t.partition(":")
    if not class_name and t not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        class_name = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(t, "")
    model_class = getattr(transformers, class_name) if class_name else None
    try:
        learner = Learner(model_type, model_class, verbose=verbose)
        result = learner.run()
        cases = expectations(model_type, result, model_class)
        check_held_out(model_type, result, cases)
    except Exception as exc:
        line = f"{t}: FAILED {type(exc).__name__}: {str(exc)[:300]}  ({time.time() - t0:.1f}s)"
        return t, None, None, line
    line = (
        f"{t}: {len(result['tensors'])} tensors ({learner.builder.builds} builds, "
        f"{time.time() - t0:.1f}s)"
    )
    return t, result, cases, line


def _collect(done: Any, out: dict[str, Any], expected: dict[str, Any], verbose: bool) -> None:
    for t, result, cases, line in done:
        print(line, flush=True)
        if result is None:
            continue
        out[t] = result
        expected[t] = cases
        if verbose:
            print(json.dumps(result, indent=1))


def aliases_of(model_type: str) -> dict[str, str]:
    """The config class's ``attribute_map`` (and its sub-configs', prefixed): the names a
    published config.json may use for an attribute."""
    config = AutoConfig.for_model(model_type)
    out = dict(type(config).attribute_map)
    for key in config.to_dict():
        sub = sub_config(config, key)
        if sub is not None:
            out |= {f"{key}.{a}": f"{key}.{b}" for a, b in type(sub).attribute_map.items()}
    return dict(sorted(out.items()))


def check_held_out(model_type: str, entry: dict[str, Any], cases: list[dict[str, Any]]) -> None:
    """The estimator's reading of the entry must give transformers' count for configs it was not
    learned from (a bare config, configs changing several sizes at once), or the entry is dropped.
    A config the estimator reads with a stated uncertainty (a per-layer pattern it had to guess)
    may miss: it is said to be approximate, and is not kept as a case the tests hold exact."""
    arch = table.Architecture.from_entry(model_type, entry)
    for case in list(cases):
        flat, uncertain = configs.resolve(arch, case["config"])
        got = sum(math.prod(t.shape) for t in table.tensors(arch, flat))
        if got == case["parameters"]:
            continue
        if uncertain:
            cases.remove(case)
            continue
        raise RuntimeError(
            f"held-out config {case['config']} gives {got:,}, transformers {case['parameters']:,}"
        )


def write_expected(only: list[str] | None) -> int:
    entries = json.loads(TARGET.read_text())["architectures"]
    out: dict[str, Any] = {}
    if only and EXPECTED.exists():
        out = json.loads(EXPECTED.read_text())["types"]
    for t in only or sorted(entries):
        t0 = time.time()
        model_type, _, class_name = t.partition(":")
        name = class_name or entries[t]["architecture"]
        model_class = None if name == MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(t) else name
        out[t] = expectations(
            model_type, entries[t], getattr(transformers, model_class) if model_class else None
        )
        print(f"{t}: {len(out[t])} configs ({time.time() - t0:.1f}s)", flush=True)
    write_expected_doc(out)
    return 0


def write_expected_doc(out: dict[str, Any]) -> None:
    EXPECTED.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "about": "Parameter counts transformers gives these configs (tools/build_architectures.py --expected).",
        "transformers": transformers.__version__,
        "types": dict(sorted(out.items())),
    }
    EXPECTED.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
