"""Hand-written builders of the families whose memory is modelled in most detail.

Each family builder lists every parameter tensor with the names and shapes that transformers'
model class for it has (``named_parameters()``, tied tensors once), and fills the architecture
facts. Fields a config leaves out take the defaults of transformers' configuration class for the
family; the core sizes (hidden size, layers, heads, vocabulary, MLP width) must be present, since a
config without them describes no model in particular.

The model class is the one a user loads to serve or fine-tune the model: ``*ForCausalLM`` for
decoders (``Gemma3ForCausalLM`` on the text config of a multimodal Gemma 3 config, whose vision
tower is left out with a warning) and ``BertForMaskedLM`` for BERT (no pooler).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vramgui.core.errors import ConfigError
from vramgui.core.model import ArchFacts, Inventory, LayerType, ModelSpec, Role, Tensor

# Sizes beyond these are typing mistakes, not models (the largest published ones are far below).
_MAX_DIM = 1 << 20
_MAX_LAYERS = 4096
_MAX_VOCAB = 1 << 24
_MAX_EXPERTS = 65536

_MISSING = object()


class MissingFieldError(ConfigError):
    """The config leaves out a field the family's builder needs (its class has a default)."""


class _Config:
    """Typed, validated access to a config.json dict; every problem becomes one ConfigError."""

    def __init__(self, data: Mapping[builtins.str, Any], family: builtins.str) -> None:
        self.data = data
        self.family = family

    def has(self, *keys: builtins.str) -> bool:
        return any(self.data.get(k) is not None for k in keys)

    def _raw(self, keys: tuple[builtins.str, ...], default: Any) -> tuple[builtins.str, Any]:
        for key in keys:
            if key in self.data and self.data[key] is not None:
                return key, self.data[key]
        if default is _MISSING:
            raise MissingFieldError(f"the {self.family} config has no '{keys[0]}'")
        return keys[0], default

    def int(
        self,
        *keys: builtins.str,
        default: Any = _MISSING,
        minimum: builtins.int = 1,
        maximum: builtins.int = _MAX_DIM,
    ) -> builtins.int:
        key, value = self._raw(keys, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"'{key}' must be a whole number, not {value!r}")
        if value < minimum:
            raise ConfigError(f"'{key}' must be at least {minimum}, not {value}")
        if value > maximum:
            raise ConfigError(f"'{key}' = {value} is implausibly large (at most {maximum})")
        return value

    def opt_int(
        self,
        key: builtins.str,
        default: builtins.int | None = None,
        minimum: builtins.int = 1,
        maximum: builtins.int = _MAX_DIM,
    ) -> builtins.int | None:
        """An optional size: the default when the key is absent, None when it is null."""
        if key not in self.data:
            return default
        if self.data[key] is None:
            return None
        return self.int(key, minimum=minimum, maximum=maximum)

    def float(self, *keys: builtins.str, default: float = 0.0) -> float:
        key, value = self._raw(keys, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"'{key}' must be a number, not {value!r}")
        return float(value)

    def bool(self, *keys: builtins.str, default: bool = False) -> bool:
        key, value = self._raw(keys, default)
        if not isinstance(value, bool):
            raise ConfigError(f"'{key}' must be true or false, not {value!r}")
        return value

    def str(self, *keys: builtins.str, default: builtins.str = "") -> builtins.str:
        key, value = self._raw(keys, default)
        if not isinstance(value, str):
            raise ConfigError(f"'{key}' must be a string, not {value!r}")
        return value

    def int_list(self, key: builtins.str) -> tuple[builtins.int, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"'{key}' must be a list of whole numbers, not {value!r}")
        return tuple(value)

    def str_list(self, key: builtins.str) -> tuple[builtins.str, ...] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"'{key}' must be a list of strings, not {value!r}")
        return tuple(value)

    def torch_dtype(self) -> builtins.str | None:
        for key in ("torch_dtype", "dtype"):
            value = self.data.get(key)
            if isinstance(value, str):
                return value.removeprefix("torch.")
        return None


@dataclass
class _Inventory:
    """Collects tensors in the order a model class creates them."""

    tensors: list[Tensor] = field(default_factory=list)

    def add(
        self,
        name: str,
        shape: tuple[int, ...],
        role: Role,
        layer: int | None = None,
        module: str = "",
        *,
        is_bias: bool = False,
        dtype: str | None = None,
    ) -> None:
        self.tensors.append(Tensor(name, shape, role, layer, module, dtype, is_bias))

    def linear(
        self,
        prefix: str,
        module: str,
        out_features: int,
        in_features: int,
        role: Role,
        *,
        layer: int | None = None,
        bias: bool = False,
        dtype: str | None = None,
    ) -> None:
        """An nn.Linear: weight (out, in) and optionally bias (out,)."""
        name = f"{prefix}.{module}" if prefix else module
        self.add(f"{name}.weight", (out_features, in_features), role, layer, module, dtype=dtype)
        if bias:
            self.add(f"{name}.bias", (out_features,), role, layer, module, is_bias=True)

    def conv1d(
        self,
        prefix: str,
        module: str,
        in_features: int,
        out_features: int,
        role: Role,
        *,
        layer: int,
    ) -> None:
        """GPT-2's Conv1D: weight stored (in, out), always with a bias."""
        name = f"{prefix}.{module}"
        self.add(f"{name}.weight", (in_features, out_features), role, layer, module)
        self.add(f"{name}.bias", (out_features,), role, layer, module, is_bias=True)

    def norm(
        self, prefix: str, module: str, width: int, layer: int | None = None, *, bias: bool = False
    ) -> None:
        name = f"{prefix}.{module}" if prefix else module
        self.add(f"{name}.weight", (width,), Role.NORM, layer, module)
        if bias:
            self.add(f"{name}.bias", (width,), Role.NORM, layer, module, is_bias=True)

    def embedding(self, name: str, rows: int, width: int, role: Role = Role.EMBEDDING) -> None:
        module = name.rsplit(".", 1)[-1]
        self.add(f"{name}.weight", (rows, width), role, None, module)


@dataclass(frozen=True)
class _Core:
    """The sizes every family has."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int


def _check_heads(cfg: _Config, hidden: int, heads: int, kv_heads: int, *, derived: bool) -> None:
    if heads > hidden:
        raise ConfigError(f"{heads} attention heads cannot split a hidden size of {hidden}")
    if derived and hidden % heads:
        raise ConfigError(
            f"hidden size {hidden} is not divisible by the {heads} attention heads "
            f"of this {cfg.family} config"
        )
    if kv_heads > heads or heads % kv_heads:
        raise ConfigError(
            f"{heads} attention heads cannot be shared among {kv_heads} key/value heads"
        )


def _layer_types_from(cfg: _Config, layers: int) -> tuple[LayerType, ...] | None:
    """Explicit ``layer_types`` from the config, validated, or None when absent."""
    names = cfg.str_list("layer_types")
    if names is None:
        return None
    if len(names) != layers:
        raise ConfigError(f"'layer_types' lists {len(names)} layers but the model has {layers}")
    known = {t.value: t for t in LayerType}
    unknown = sorted({n for n in names if n not in known})
    if unknown:
        raise ConfigError(f"'layer_types' holds unknown attention kinds: {', '.join(unknown)}")
    return tuple(known[n] for n in names)


# --- Llama-style decoders (llama, mistral, mixtral, qwen, gemma, phi3, deepseek) ---------------


@dataclass(frozen=True)
class _DecoderPlan:
    """What a Llama-style decoder family varies."""

    architecture: str
    tie_default: bool = False
    max_positions_default: int = 2048
    head_dim_default: int | None = None  # None: hidden / heads
    kv_heads_default: int | None = None  # when the key is absent; None: same as heads
    act_key: str = "hidden_act"
    act_default: str = "silu"
    qkv_bias: Callable[[_Config], bool] = lambda cfg: False
    o_bias: Callable[[_Config], bool] = lambda cfg: False
    mlp_bias: Callable[[_Config], bool] = lambda cfg: False
    qk_norm: bool = False
    sandwich_norm: bool = False  # gemma2/3: norms before and after the MLP too
    fused_qkv: bool = False  # phi3: qkv_proj and gate_up_proj
    hidden_dropout_key: str = ""
    mla: bool = False  # DeepSeek multi-head latent attention


def _attn_bias(cfg: _Config) -> bool:
    return cfg.bool("attention_bias")


_PLANS: dict[str, _DecoderPlan] = {
    "llama": _DecoderPlan(
        "LlamaForCausalLM",
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        mlp_bias=lambda cfg: cfg.bool("mlp_bias"),
    ),
    "mistral": _DecoderPlan(
        "MistralForCausalLM", max_positions_default=4096 * 32, kv_heads_default=8
    ),
    "mixtral": _DecoderPlan(
        "MixtralForCausalLM", max_positions_default=4096 * 32, kv_heads_default=8
    ),
    "qwen2": _DecoderPlan(
        "Qwen2ForCausalLM",
        max_positions_default=32768,
        kv_heads_default=32,
        qkv_bias=lambda cfg: True,
    ),
    "qwen2_moe": _DecoderPlan(
        "Qwen2MoeForCausalLM",
        max_positions_default=32768,
        kv_heads_default=16,
        qkv_bias=lambda cfg: cfg.bool("qkv_bias", default=True),
    ),
    "qwen3": _DecoderPlan(
        "Qwen3ForCausalLM",
        max_positions_default=32768,
        kv_heads_default=32,
        head_dim_default=128,
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        qk_norm=True,
    ),
    "qwen3_moe": _DecoderPlan(
        "Qwen3MoeForCausalLM",
        max_positions_default=32768,
        kv_heads_default=4,
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        qk_norm=True,
    ),
    "gemma": _DecoderPlan(
        "GemmaForCausalLM",
        tie_default=True,
        kv_heads_default=16,
        max_positions_default=8192,
        head_dim_default=256,
        act_default="gelu_pytorch_tanh",
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
    ),
    "gemma2": _DecoderPlan(
        "Gemma2ForCausalLM",
        tie_default=True,
        kv_heads_default=4,
        max_positions_default=8192,
        head_dim_default=256,
        act_key="hidden_activation",
        act_default="gelu_pytorch_tanh",
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        sandwich_norm=True,
    ),
    "gemma3_text": _DecoderPlan(
        "Gemma3ForCausalLM",
        tie_default=True,
        kv_heads_default=4,
        max_positions_default=131_072,
        head_dim_default=256,
        act_key="hidden_activation",
        act_default="gelu_pytorch_tanh",
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        qk_norm=True,
        sandwich_norm=True,
    ),
    "phi3": _DecoderPlan(
        "Phi3ForCausalLM",
        max_positions_default=4096,
        fused_qkv=True,
        hidden_dropout_key="resid_pdrop",
    ),
    "deepseek_v2": _DecoderPlan(
        "DeepseekV2ForCausalLM",
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        mlp_bias=lambda cfg: cfg.bool("mlp_bias"),
        mla=True,
    ),
    "deepseek_v3": _DecoderPlan(
        "DeepseekV3ForCausalLM",
        max_positions_default=4096,
        kv_heads_default=128,
        qkv_bias=_attn_bias,
        o_bias=_attn_bias,
        mla=True,
    ),
}


def _kv_heads(cfg: _Config, plan: _DecoderPlan, heads: int) -> int:
    """Key/value heads: the config class's default when absent, all heads when null."""
    if "num_key_value_heads" not in cfg.data:
        return cfg.int("num_key_value_heads", default=plan.kv_heads_default or heads)
    return cfg.int("num_key_value_heads", default=heads)


def _decoder_core(cfg: _Config, plan: _DecoderPlan) -> _Core:
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers", maximum=_MAX_LAYERS)
    heads = cfg.int("num_attention_heads")
    kv_heads = _kv_heads(cfg, plan, heads)
    derived = False
    if plan.mla:
        mla = _mla(cfg)
        head_dim = mla.nope + mla.rope
    elif cfg.has("head_dim"):
        head_dim = cfg.int("head_dim")
    elif plan.head_dim_default is not None:
        head_dim = plan.head_dim_default
    else:
        head_dim, derived = hidden // max(heads, 1), True
    _check_heads(cfg, hidden, heads, kv_heads, derived=derived)
    return _Core(
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=cfg.int("intermediate_size", maximum=_MAX_DIM * 16),
        vocab=cfg.int("vocab_size", maximum=_MAX_VOCAB),
    )


def _decoder_layer_types(
    cfg: _Config, model_type: str, layers: int
) -> tuple[tuple[LayerType, ...], int | None]:
    """Per-layer attention kind and the sliding window, as each family's config derives them."""
    full, sliding = LayerType.FULL, LayerType.SLIDING
    explicit = _layer_types_from(cfg, layers)
    if model_type in ("mistral", "mixtral", "phi3"):
        # These apply the window to every layer whenever one is set.
        window = cfg.opt_int("sliding_window", default=4096 if model_type == "mistral" else None)
        return (sliding if window else full,) * layers, window
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        use = cfg.bool("use_sliding_window")
        window = cfg.opt_int("sliding_window", default=4096) if use else None
        if explicit is not None:
            return explicit, window
        if model_type == "qwen3_moe":
            return (sliding if window else full,) * layers, window
        first = cfg.int("max_window_layers", default=28, minimum=0, maximum=_MAX_LAYERS)
        if model_type == "qwen2_moe":
            kinds = tuple(
                sliding if use and (i + 1) % 2 and i < first else full for i in range(layers)
            )
        else:
            kinds = tuple(sliding if window and i >= first else full for i in range(layers))
        return kinds, window
    if model_type in ("gemma2", "gemma3_text"):
        window = cfg.int("sliding_window", default=4096)
        if model_type == "gemma3_text" and cfg.bool("use_bidirectional_attention"):
            window = window // 2 + 1
        if explicit is not None:
            return explicit, window
        pattern = (
            2
            if model_type == "gemma2"
            else cfg.int("sliding_window_pattern", default=6, maximum=_MAX_LAYERS)
        )
        return tuple(sliding if (i + 1) % pattern else full for i in range(layers)), window
    return (full,) * layers, None


def _moe_layers(cfg: _Config, model_type: str, layers: int) -> tuple[bool, ...]:
    if model_type == "mixtral":
        return (True,) * layers
    if model_type in ("qwen2_moe", "qwen3_moe"):
        step = cfg.int("decoder_sparse_step", default=1, maximum=_MAX_LAYERS)
        dense = set(cfg.int_list("mlp_only_layers"))
        return tuple(i not in dense and (i + 1) % step == 0 for i in range(layers))
    if model_type in ("deepseek_v2", "deepseek_v3"):
        first = cfg.int(
            "first_k_dense_replace",
            default=3 if model_type == "deepseek_v3" else 0,
            minimum=0,
            maximum=_MAX_LAYERS,
        )
        return tuple(i >= first for i in range(layers))
    return (False,) * layers


@dataclass(frozen=True)
class _Moe:
    experts: int = 0
    top_k: int = 0
    width: int = 0
    shared: int = 0  # number of shared experts
    shared_width: int = 0  # total width of the shared-expert MLP


def _moe(cfg: _Config, model_type: str) -> _Moe:
    if model_type == "mixtral":
        experts = cfg.int("num_local_experts", "num_experts", default=8, maximum=_MAX_EXPERTS)
        top_k = cfg.int("num_experts_per_tok", default=2, maximum=experts)
        return _Moe(experts, top_k, cfg.int("intermediate_size", maximum=_MAX_DIM * 16))
    if model_type == "qwen2_moe":
        experts = cfg.int("num_experts", default=60, maximum=_MAX_EXPERTS)
        width = cfg.int("moe_intermediate_size", default=1408)
        shared = cfg.int("shared_expert_intermediate_size", default=5632)
        return _Moe(
            experts, cfg.int("num_experts_per_tok", default=4, maximum=experts), width, 1, shared
        )
    if model_type == "qwen3_moe":
        experts = cfg.int("num_experts", "num_local_experts", default=128, maximum=_MAX_EXPERTS)
        width = cfg.int("moe_intermediate_size", default=768)
        return _Moe(experts, cfg.int("num_experts_per_tok", default=8, maximum=experts), width)
    if model_type in ("deepseek_v2", "deepseek_v3"):
        v3 = model_type == "deepseek_v3"
        experts = cfg.int(
            "n_routed_experts",
            "num_local_experts" if v3 else "num_experts",
            default=256 if v3 else 64,
            maximum=_MAX_EXPERTS,
        )
        width = cfg.int("moe_intermediate_size", default=2048 if v3 else 1407)
        shared = cfg.int(
            "n_shared_experts", default=1 if v3 else 2, minimum=0, maximum=_MAX_EXPERTS
        )
        chosen = cfg.opt_int("num_experts_per_tok", default=8 if v3 else None, maximum=experts)
        if chosen is None:
            raise MissingFieldError("the deepseek_v2 config has no 'num_experts_per_tok'")
        return _Moe(experts, chosen, width, shared, width * shared)
    return _Moe()


@dataclass(frozen=True)
class _Mla:
    q_lora_rank: int | None
    kv_lora_rank: int
    rope: int
    nope: int
    v: int


def _mla(cfg: _Config) -> _Mla:
    return _Mla(
        q_lora_rank=cfg.opt_int("q_lora_rank", default=1536),
        kv_lora_rank=cfg.int("kv_lora_rank", default=512),
        rope=cfg.int("qk_rope_head_dim", default=64),
        nope=cfg.int("qk_nope_head_dim", default=128),
        v=cfg.int("v_head_dim", default=128),
    )


def _decoder(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """Llama-style decoders: model.embed_tokens, model.layers.N.{self_attn,mlp}, model.norm."""
    plan = _PLANS[model_type]
    is_mla = plan.mla
    core = _decoder_core(cfg, plan)
    tie = cfg.bool("tie_word_embeddings", default=plan.tie_default)
    layer_types, window = _decoder_layer_types(cfg, model_type, core.layers)
    moe = _moe(cfg, model_type)
    moe_layers = _moe_layers(cfg, model_type, core.layers)
    mla = _mla(cfg) if is_mla else None
    qkv_bias, o_bias, mlp_bias = plan.qkv_bias(cfg), plan.o_bias(cfg), plan.mlp_bias(cfg)
    h, hd = core.hidden, core.head_dim
    # DeepSeek keeps its router in fp32 whatever the model's dtype (_keep_in_fp32_modules_strict).
    router_dtype = "F32" if is_mla else None

    inv = _Inventory()
    inv.embedding("model.embed_tokens", core.vocab, h)
    for i in range(core.layers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        if mla is not None:
            qk = mla.nope + mla.rope
            if mla.q_lora_rank is None:
                inv.linear(a, "q_proj", core.heads * qk, h, Role.ATTENTION, layer=i)
            else:
                inv.linear(
                    a, "q_a_proj", mla.q_lora_rank, h, Role.ATTENTION, layer=i, bias=qkv_bias
                )
                inv.norm(a, "q_a_layernorm", mla.q_lora_rank, i)
                inv.linear(a, "q_b_proj", core.heads * qk, mla.q_lora_rank, Role.ATTENTION, layer=i)
            inv.linear(
                a,
                "kv_a_proj_with_mqa",
                mla.kv_lora_rank + mla.rope,
                h,
                Role.ATTENTION,
                layer=i,
                bias=qkv_bias,
            )
            inv.norm(a, "kv_a_layernorm", mla.kv_lora_rank, i)
            inv.linear(
                a,
                "kv_b_proj",
                core.heads * (mla.nope + mla.v),
                mla.kv_lora_rank,
                Role.ATTENTION,
                layer=i,
            )
            inv.linear(a, "o_proj", h, core.heads * mla.v, Role.ATTENTION, layer=i, bias=o_bias)
        elif plan.fused_qkv:
            inv.linear(a, "o_proj", h, core.heads * hd, Role.ATTENTION, layer=i)
            inv.linear(
                a, "qkv_proj", (core.heads + 2 * core.kv_heads) * hd, h, Role.ATTENTION, layer=i
            )
        else:
            inv.linear(a, "q_proj", core.heads * hd, h, Role.ATTENTION, layer=i, bias=qkv_bias)
            inv.linear(a, "k_proj", core.kv_heads * hd, h, Role.ATTENTION, layer=i, bias=qkv_bias)
            inv.linear(a, "v_proj", core.kv_heads * hd, h, Role.ATTENTION, layer=i, bias=qkv_bias)
            inv.linear(a, "o_proj", h, core.heads * hd, Role.ATTENTION, layer=i, bias=o_bias)
            if plan.qk_norm:
                inv.norm(a, "q_norm", hd, i)
                inv.norm(a, "k_norm", hd, i)
        m = f"{p}.mlp"
        if moe_layers[i]:
            inv.linear(m, "gate", moe.experts, h, Role.ROUTER, layer=i, dtype=router_dtype)
            inv.add(
                f"{m}.experts.gate_up_proj",
                (moe.experts, 2 * moe.width, h),
                Role.EXPERT,
                i,
                "gate_up_proj",
            )
            inv.add(
                f"{m}.experts.down_proj", (moe.experts, h, moe.width), Role.EXPERT, i, "down_proj"
            )
            if moe.shared_width:
                s = f"{m}.shared_expert" if model_type == "qwen2_moe" else f"{m}.shared_experts"
                inv.linear(
                    s, "gate_proj", moe.shared_width, h, Role.SHARED_EXPERT, layer=i, bias=mlp_bias
                )
                inv.linear(
                    s, "up_proj", moe.shared_width, h, Role.SHARED_EXPERT, layer=i, bias=mlp_bias
                )
                inv.linear(
                    s, "down_proj", h, moe.shared_width, Role.SHARED_EXPERT, layer=i, bias=mlp_bias
                )
                if model_type == "qwen2_moe":
                    # A sigmoid that scales the shared expert's output, so it belongs to it.
                    inv.linear(m, "shared_expert_gate", 1, h, Role.SHARED_EXPERT, layer=i)
        elif plan.fused_qkv:
            inv.linear(m, "gate_up_proj", 2 * core.intermediate, h, Role.MLP, layer=i)
            inv.linear(m, "down_proj", h, core.intermediate, Role.MLP, layer=i)
        else:
            inv.linear(m, "gate_proj", core.intermediate, h, Role.MLP, layer=i, bias=mlp_bias)
            inv.linear(m, "up_proj", core.intermediate, h, Role.MLP, layer=i, bias=mlp_bias)
            inv.linear(m, "down_proj", h, core.intermediate, Role.MLP, layer=i, bias=mlp_bias)
        inv.norm(p, "input_layernorm", h, i)
        inv.norm(p, "post_attention_layernorm", h, i)
        if plan.sandwich_norm:
            inv.norm(p, "pre_feedforward_layernorm", h, i)
            inv.norm(p, "post_feedforward_layernorm", h, i)
    inv.norm("model", "norm", h)
    if not tie:
        inv.linear("", "lm_head", core.vocab, h, Role.HEAD)

    act = cfg.str(plan.act_key, default=plan.act_default)
    if model_type == "gemma" and act == "gelu":
        act = "gelu_pytorch_tanh"  # GemmaConfig reads the legacy "gelu" as the tanh approximation
    facts = ArchFacts(
        model_type=model_type,
        num_layers=core.layers,
        hidden_size=h,
        num_heads=core.heads,
        num_kv_heads=core.kv_heads,
        head_dim=(mla.nope + mla.rope) if mla else hd,
        intermediate_size=core.intermediate,
        vocab_size=core.vocab,
        max_position_embeddings=cfg.int(
            "max_position_embeddings", default=plan.max_positions_default, maximum=1 << 30
        ),
        tie_word_embeddings=tie,
        layer_types=layer_types,
        sliding_window=window,
        gated_mlp=True,
        hidden_act=act,
        norm="rms",
        is_decoder=True,
        kv_lora_rank=mla.kv_lora_rank if mla else None,
        q_lora_rank=mla.q_lora_rank if mla else None,
        qk_rope_head_dim=mla.rope if mla else None,
        qk_nope_head_dim=mla.nope if mla else None,
        v_head_dim=mla.v if mla else None,
        num_experts=moe.experts,
        experts_per_token=moe.top_k,
        num_shared_experts=moe.shared,
        moe_intermediate_size=moe.width if moe.experts else 0,
        moe_layers=moe_layers,
        attention_dropout=cfg.float("attention_dropout"),
        hidden_dropout=cfg.float(plan.hidden_dropout_key) if plan.hidden_dropout_key else 0.0,
        torch_dtype=cfg.torch_dtype(),
    )
    return facts, inv.tensors, plan.architecture


# --- GPT-2 style and other classic decoders, and BERT -------------------------------------------


def _mha_core(
    cfg: _Config,
    hidden_keys: tuple[str, ...],
    layer_keys: tuple[str, ...],
    head_keys: tuple[str, ...],
) -> tuple[int, int, int, int]:
    """Hidden size, layers, heads and vocabulary of a multi-head model whose heads split hidden."""
    hidden = cfg.int(*hidden_keys)
    layers = cfg.int(*layer_keys, maximum=_MAX_LAYERS)
    heads = cfg.int(*head_keys)
    _check_heads(cfg, hidden, heads, heads, derived=True)
    return hidden, layers, heads, cfg.int("vocab_size", maximum=_MAX_VOCAB)


def _classic_facts(
    cfg: _Config,
    model_type: str,
    *,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    vocab: int,
    max_positions: int,
    tie: bool,
    act: str,
    attention_dropout: float,
    hidden_dropout: float,
    is_decoder: bool = True,
) -> ArchFacts:
    """Facts of a full-attention, dense, LayerNorm model with ungated MLP."""
    return ArchFacts(
        model_type=model_type,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=hidden // heads,
        intermediate_size=intermediate,
        vocab_size=vocab,
        max_position_embeddings=max_positions,
        tie_word_embeddings=tie,
        layer_types=(LayerType.FULL,) * layers,
        gated_mlp=False,
        hidden_act=act,
        norm="layer",
        is_decoder=is_decoder,
        moe_layers=(False,) * layers,
        attention_dropout=attention_dropout,
        hidden_dropout=hidden_dropout,
        torch_dtype=cfg.torch_dtype(),
    )


_GPT_KEYS = (
    ("n_embd", "hidden_size"),
    ("n_layer", "num_hidden_layers"),
    ("n_head", "num_attention_heads"),
)


def _gpt2(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """GPT-2 (Conv1D weights stored in, out) and GPTBigCode (nn.Linear, optional multi-query)."""
    if cfg.bool("add_cross_attention"):
        raise ConfigError(
            f"{model_type} with cross-attention (encoder-decoder use) is not supported"
        )
    hidden, layers, heads, vocab = _mha_core(cfg, *_GPT_KEYS)
    bigcode = model_type == "gpt_bigcode"
    inner = cfg.int("n_inner", default=4 * hidden, maximum=_MAX_DIM * 16)
    positions = cfg.int("n_positions", "max_position_embeddings", default=1024, maximum=1 << 24)
    tie = cfg.bool("tie_word_embeddings", default=True)
    kv_heads = 1 if bigcode and cfg.bool("multi_query", default=True) else heads
    head_dim = hidden // heads

    inv = _Inventory()
    inv.embedding("transformer.wte", vocab, hidden)
    inv.embedding("transformer.wpe", positions, hidden, Role.POSITION)
    for i in range(layers):
        p = f"transformer.h.{i}"
        inv.norm(p, "ln_1", hidden, i, bias=True)
        qkv = hidden + 2 * kv_heads * head_dim
        if bigcode:
            inv.linear(f"{p}.attn", "c_attn", qkv, hidden, Role.ATTENTION, layer=i, bias=True)
            inv.linear(f"{p}.attn", "c_proj", hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        else:
            inv.conv1d(f"{p}.attn", "c_attn", hidden, qkv, Role.ATTENTION, layer=i)
            inv.conv1d(f"{p}.attn", "c_proj", hidden, hidden, Role.ATTENTION, layer=i)
        inv.norm(p, "ln_2", hidden, i, bias=True)
        if bigcode:
            inv.linear(f"{p}.mlp", "c_fc", inner, hidden, Role.MLP, layer=i, bias=True)
            inv.linear(f"{p}.mlp", "c_proj", hidden, inner, Role.MLP, layer=i, bias=True)
        else:
            inv.conv1d(f"{p}.mlp", "c_fc", hidden, inner, Role.MLP, layer=i)
            inv.conv1d(f"{p}.mlp", "c_proj", inner, hidden, Role.MLP, layer=i)
    inv.norm("transformer", "ln_f", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    facts = _classic_facts(
        cfg,
        model_type,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=inner,
        vocab=vocab,
        max_positions=positions,
        tie=tie,
        act=cfg.str("activation_function", default="gelu_pytorch_tanh" if bigcode else "gelu_new"),
        attention_dropout=cfg.float("attn_pdrop", default=0.1),
        hidden_dropout=cfg.float("resid_pdrop", default=0.1),
    )
    return facts, inv.tensors, "GPTBigCodeForCausalLM" if bigcode else "GPT2LMHeadModel"


def _opt(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """OPT: learned positions offset by 2, optional embedding projection, pre- or post-LN."""
    hidden, layers, heads, vocab = _mha_core(
        cfg, ("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",)
    )
    ffn = cfg.int("ffn_dim", maximum=_MAX_DIM * 16)
    positions = cfg.int("max_position_embeddings", default=2048, maximum=1 << 24)
    embed_dim = cfg.int("word_embed_proj_dim", default=hidden)
    bias = cfg.bool("enable_bias", default=True)
    affine = cfg.bool("layer_norm_elementwise_affine", default=True)
    pre_ln = cfg.bool("do_layer_norm_before", default=True)
    tie = cfg.bool("tie_word_embeddings", default=True)

    def norm(prefix: str, module: str, layer: int | None = None) -> None:
        if affine:
            inv.norm(prefix, module, hidden, layer, bias=True)

    inv = _Inventory()
    d = "model.decoder"
    inv.embedding(f"{d}.embed_tokens", vocab, embed_dim)
    inv.embedding(f"{d}.embed_positions", positions + 2, hidden, Role.POSITION)
    if embed_dim != hidden:
        inv.linear(d, "project_out", embed_dim, hidden, Role.OTHER)
        inv.linear(d, "project_in", hidden, embed_dim, Role.OTHER)
    if pre_ln and not cfg.bool("_remove_final_layer_norm"):
        norm(d, "final_layer_norm")
    for i in range(layers):
        p = f"{d}.layers.{i}"
        for module in ("k_proj", "v_proj", "q_proj", "out_proj"):
            inv.linear(f"{p}.self_attn", module, hidden, hidden, Role.ATTENTION, layer=i, bias=bias)
        norm(p, "self_attn_layer_norm", i)
        inv.linear(p, "fc1", ffn, hidden, Role.MLP, layer=i, bias=bias)
        inv.linear(p, "fc2", hidden, ffn, Role.MLP, layer=i, bias=bias)
        norm(p, "final_layer_norm", i)
    if not tie:
        inv.linear("", "lm_head", vocab, embed_dim, Role.HEAD)
    facts = _classic_facts(
        cfg,
        model_type,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        intermediate=ffn,
        vocab=vocab,
        max_positions=positions,
        tie=tie,
        act=cfg.str("activation_function", default="relu"),
        attention_dropout=cfg.float("attention_dropout"),
        hidden_dropout=cfg.float("dropout", default=0.1),
    )
    return facts, inv.tensors, "OPTForCausalLM"


def _gpt_neox(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """GPT-NeoX / Pythia: fused query_key_value, LayerNorms with bias, untied head by default."""
    hidden, layers, heads, vocab = _mha_core(
        cfg, ("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",)
    )
    inter = cfg.int("intermediate_size", maximum=_MAX_DIM * 16)
    attn_bias = cfg.bool("attention_bias", default=True)
    tie = cfg.bool("tie_word_embeddings", default=False)

    inv = _Inventory()
    inv.embedding("gpt_neox.embed_in", vocab, hidden)
    for i in range(layers):
        p = f"gpt_neox.layers.{i}"
        inv.norm(p, "input_layernorm", hidden, i, bias=True)
        inv.norm(p, "post_attention_layernorm", hidden, i, bias=True)
        a = f"{p}.attention"
        inv.linear(
            a, "query_key_value", 3 * hidden, hidden, Role.ATTENTION, layer=i, bias=attn_bias
        )
        inv.linear(a, "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=attn_bias)
        inv.linear(f"{p}.mlp", "dense_h_to_4h", inter, hidden, Role.MLP, layer=i, bias=True)
        inv.linear(f"{p}.mlp", "dense_4h_to_h", hidden, inter, Role.MLP, layer=i, bias=True)
    inv.norm("gpt_neox", "final_layer_norm", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    facts = _classic_facts(
        cfg,
        model_type,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        intermediate=inter,
        vocab=vocab,
        max_positions=cfg.int("max_position_embeddings", default=2048, maximum=1 << 24),
        tie=tie,
        act=cfg.str("hidden_act", default="gelu"),
        attention_dropout=cfg.float("attention_dropout"),
        hidden_dropout=cfg.float("hidden_dropout"),
    )
    return facts, inv.tensors, "GPTNeoXForCausalLM"


def _falcon(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """Falcon: old (multi-query, one LayerNorm) and new decoder architecture (grouped KV)."""
    hidden = cfg.int("n_embed", "hidden_size")
    layers = cfg.int("num_hidden_layers", maximum=_MAX_LAYERS)
    heads = cfg.int("num_attention_heads")
    vocab = cfg.int("vocab_size", maximum=_MAX_VOCAB)
    new_arch = cfg.bool("new_decoder_architecture")
    if new_arch:
        kv_heads = cfg.int("num_kv_heads", default=heads)
    else:
        kv_heads = 1 if cfg.bool("multi_query", default=True) else heads
    _check_heads(cfg, hidden, heads, kv_heads, derived=True)
    ffn = cfg.int("ffn_hidden_size", default=4 * hidden, maximum=_MAX_DIM * 16)
    bias = cfg.bool("bias")
    parallel = cfg.bool("parallel_attn", default=True)
    norms_in_parallel = cfg.opt_int("num_ln_in_parallel_attn") or (2 if new_arch else None)
    tie = cfg.bool("tie_word_embeddings", default=True)
    head_dim = hidden // heads

    inv = _Inventory()
    inv.embedding("transformer.word_embeddings", vocab, hidden)
    for i in range(layers):
        p = f"transformer.h.{i}"
        a = f"{p}.self_attention"
        qkv = (heads + 2 * kv_heads) * head_dim
        inv.linear(a, "query_key_value", qkv, hidden, Role.ATTENTION, layer=i, bias=bias)
        inv.linear(a, "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=bias)
        inv.linear(f"{p}.mlp", "dense_h_to_4h", ffn, hidden, Role.MLP, layer=i, bias=bias)
        inv.linear(f"{p}.mlp", "dense_4h_to_h", hidden, ffn, Role.MLP, layer=i, bias=bias)
        if not parallel:
            inv.norm(p, "post_attention_layernorm", hidden, i, bias=True)
            inv.norm(p, "input_layernorm", hidden, i, bias=True)
        elif norms_in_parallel == 2:
            inv.norm(p, "ln_attn", hidden, i, bias=True)
            inv.norm(p, "ln_mlp", hidden, i, bias=True)
        else:
            inv.norm(p, "input_layernorm", hidden, i, bias=True)
    inv.norm("transformer", "ln_f", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    facts = _classic_facts(
        cfg,
        model_type,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=ffn,
        vocab=vocab,
        max_positions=cfg.int("max_position_embeddings", default=2048, maximum=1 << 24),
        tie=tie,
        act=cfg.str("activation", default="gelu"),
        attention_dropout=cfg.float("attention_dropout"),
        hidden_dropout=cfg.float("hidden_dropout"),
    )
    return facts, inv.tensors, "FalconForCausalLM"


def _bloom(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """BLOOM: ALiBi (no position table), an extra LayerNorm on the embeddings, biases throughout."""
    hidden, layers, heads, vocab = _mha_core(
        cfg,
        ("n_embed", "hidden_size"),
        ("n_layer", "num_hidden_layers"),
        ("n_head", "num_attention_heads"),
    )
    tie = cfg.bool("tie_word_embeddings", default=True)

    inv = _Inventory()
    inv.embedding("transformer.word_embeddings", vocab, hidden)
    inv.norm("transformer", "word_embeddings_layernorm", hidden, bias=True)
    for i in range(layers):
        p = f"transformer.h.{i}"
        inv.norm(p, "input_layernorm", hidden, i, bias=True)
        a = f"{p}.self_attention"
        inv.linear(a, "query_key_value", 3 * hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        inv.linear(a, "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        inv.norm(p, "post_attention_layernorm", hidden, i, bias=True)
        inv.linear(f"{p}.mlp", "dense_h_to_4h", 4 * hidden, hidden, Role.MLP, layer=i, bias=True)
        inv.linear(f"{p}.mlp", "dense_4h_to_h", hidden, 4 * hidden, Role.MLP, layer=i, bias=True)
    inv.norm("transformer", "ln_f", hidden, bias=True)
    if not tie:
        inv.linear("", "lm_head", vocab, hidden, Role.HEAD)
    facts = _classic_facts(
        cfg,
        model_type,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        intermediate=4 * hidden,
        vocab=vocab,
        # ALiBi has no trained length; BLOOM was trained on 2048-token sequences.
        max_positions=cfg.int(
            "seq_length", "max_position_embeddings", default=2048, maximum=1 << 24
        ),
        tie=tie,
        act="gelu",
        attention_dropout=cfg.float("attention_dropout"),
        hidden_dropout=cfg.float("hidden_dropout"),
    )
    return facts, inv.tensors, "BloomForCausalLM"


def _bert(cfg: _Config, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
    """BERT as BertForMaskedLM: encoder, no pooler, MLM head tied to the word embeddings."""
    if cfg.bool("is_decoder") or cfg.bool("add_cross_attention"):
        raise ConfigError("BERT as a decoder (is_decoder / add_cross_attention) is not supported")
    hidden, layers, heads, vocab = _mha_core(
        cfg, ("hidden_size",), ("num_hidden_layers",), ("num_attention_heads",)
    )
    inter = cfg.int("intermediate_size", maximum=_MAX_DIM * 16)
    positions = cfg.int("max_position_embeddings", default=512, maximum=1 << 24)
    types = cfg.int("type_vocab_size", default=2, maximum=_MAX_VOCAB)
    tie = cfg.bool("tie_word_embeddings", default=True)

    inv = _Inventory()
    e = "bert.embeddings"
    inv.embedding(f"{e}.word_embeddings", vocab, hidden)
    inv.embedding(f"{e}.position_embeddings", positions, hidden, Role.POSITION)
    inv.embedding(f"{e}.token_type_embeddings", types, hidden, Role.POSITION)
    inv.norm(e, "LayerNorm", hidden, bias=True)
    for i in range(layers):
        p = f"bert.encoder.layer.{i}"
        s = f"{p}.attention.self"
        for module in ("query", "key", "value"):
            inv.linear(s, module, hidden, hidden, Role.ATTENTION, layer=i, bias=True)
        inv.linear(
            f"{p}.attention.output", "dense", hidden, hidden, Role.ATTENTION, layer=i, bias=True
        )
        inv.norm(f"{p}.attention.output", "LayerNorm", hidden, i, bias=True)
        inv.linear(f"{p}.intermediate", "dense", inter, hidden, Role.MLP, layer=i, bias=True)
        inv.linear(f"{p}.output", "dense", hidden, inter, Role.MLP, layer=i, bias=True)
        inv.norm(f"{p}.output", "LayerNorm", hidden, i, bias=True)
    c = "cls.predictions"
    inv.add(f"{c}.bias", (vocab,), Role.HEAD, None, "predictions", is_bias=True)
    inv.linear(f"{c}.transform", "dense", hidden, hidden, Role.HEAD, bias=True)
    inv.norm(f"{c}.transform", "LayerNorm", hidden, bias=True)
    if not tie:
        # Untied, the decoder keeps its own bias too; tied, it shares cls.predictions.bias.
        inv.linear(c, "decoder", vocab, hidden, Role.HEAD, bias=True)
    facts = _classic_facts(
        cfg,
        model_type,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        intermediate=inter,
        vocab=vocab,
        max_positions=positions,
        tie=tie,
        act=cfg.str("hidden_act", default="gelu"),
        attention_dropout=cfg.float("attention_probs_dropout_prob", default=0.1),
        hidden_dropout=cfg.float("hidden_dropout_prob", default=0.1),
        is_decoder=False,
    )
    return facts, inv.tensors, "BertForMaskedLM"


# --- unknown model types ---------------------------------------------------------------------

# Names other architectures use for the fields a Llama-style estimate needs, first match wins.
_REQUIRED_ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}
_OPTIONAL_ALIASES: dict[str, tuple[str, ...]] = {
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "seq_length"),
    "tie_word_embeddings": ("tie_word_embeddings",),
    "hidden_act": ("hidden_act", "activation_function"),
    "attention_dropout": ("attention_dropout",),
    "torch_dtype": ("torch_dtype", "dtype"),
}


def llama_style(config: Mapping[str, Any], model_type: str) -> ModelSpec:
    """A config of a type we do not know, estimated as a Llama-style decoder of the same sizes."""
    data: dict[str, Any] = {"model_type": "llama"}
    missing = []
    for canonical, aliases in (_REQUIRED_ALIASES | _OPTIONAL_ALIASES).items():
        found = next((config[k] for k in aliases if config.get(k) is not None), None)
        if found is not None:
            data[canonical] = found
        elif canonical in _REQUIRED_ALIASES:
            missing.append(canonical)
    label = f"model_type '{model_type}'" if model_type else "a config without model_type"
    if missing:
        raise ConfigError(
            f"{label} is not supported, and the config lacks {', '.join(missing)} "
            "needed to estimate it as a Llama-style decoder"
        )
    facts, tensors, _ = _decoder(_Config(data, model_type or "unknown"), "llama")
    architectures = config.get("architectures")
    architecture = (
        architectures[0]
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
        else ""
    )
    return ModelSpec(
        name="",
        facts=replace(facts, model_type=model_type),
        tensors=tuple(tensors),
        architecture=architecture,
        warnings=(f"{label} is not known; estimated as a Llama-style decoder of the same sizes",),
        source="config.json",
        inventory=Inventory.APPROXIMATE,
    )


# --- public API ------------------------------------------------------------------------------

_Builder = Callable[[_Config, str], tuple[ArchFacts, list[Tensor], str]]

_BUILDERS: dict[str, _Builder] = {
    "llama": _decoder,
    "mistral": _decoder,
    "mixtral": _decoder,
    "qwen2": _decoder,
    "qwen2_moe": _decoder,
    "qwen3": _decoder,
    "qwen3_moe": _decoder,
    "gemma": _decoder,
    "gemma2": _decoder,
    "gemma3_text": _decoder,
    "phi3": _decoder,
    "deepseek_v2": _decoder,
    "deepseek_v3": _decoder,
    "gpt2": _gpt2,
    "gpt_bigcode": _gpt2,
    "opt": _opt,
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "bloom": _bloom,
    "bert": _bert,
}

CLASSIC_TYPES: frozenset[str] = frozenset(_BUILDERS)


def classic_spec(config: Mapping[str, Any], model_type: str, label: str) -> ModelSpec:
    """The spec of a family with a hand-written builder (facts modelled in detail).

    Raises:
        ConfigError: the config lacks a needed field or has an impossible value.
    """
    facts, tensors, architecture = _BUILDERS[model_type](_Config(config, model_type), model_type)
    return ModelSpec(
        name=label,
        facts=facts,
        tensors=tuple(tensors),
        architecture=architecture,
        source="config.json",
    )
