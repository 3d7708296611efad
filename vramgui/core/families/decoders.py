"""Llama-style decoders, by hand: Llama, Mistral, Mixtral, Qwen 2 / 3 (MoE too), Gemma 1-3,
Phi-3 and DeepSeek V2 / V3 (MLA, shared experts, dense first layers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vramgui.core.families.reader import (
    MAX_DIM,
    MAX_EXPERTS,
    MAX_LAYERS,
    MAX_VOCAB,
    ConfigReader,
    CoreSizes,
    InventoryBuilder,
    MissingFieldError,
    check_heads,
    layer_types_from,
)
from vramgui.core.model import ArchFacts, LayerType, Role, Tensor

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
    qkv_bias: Callable[[ConfigReader], bool] = lambda cfg: False
    o_bias: Callable[[ConfigReader], bool] = lambda cfg: False
    mlp_bias: Callable[[ConfigReader], bool] = lambda cfg: False
    qk_norm: bool = False
    sandwich_norm: bool = False  # gemma2/3: norms before and after the MLP too
    fused_qkv: bool = False  # phi3: qkv_proj and gate_up_proj
    hidden_dropout_key: str = ""
    mla: bool = False  # DeepSeek multi-head latent attention


def _attn_bias(cfg: ConfigReader) -> bool:
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


def _kv_heads(cfg: ConfigReader, plan: _DecoderPlan, heads: int) -> int:
    """Key/value heads: the config class's default when absent, all heads when null."""
    if "num_key_value_heads" not in cfg.data:
        return cfg.int("num_key_value_heads", default=plan.kv_heads_default or heads)
    return cfg.int("num_key_value_heads", default=heads)


def _decoder_core(cfg: ConfigReader, plan: _DecoderPlan) -> CoreSizes:
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers", maximum=MAX_LAYERS)
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
    if plan.mla:
        # Multi-head latent attention caches one latent per token, shared by every head: the
        # key/value head count sizes nothing, and configs write any value there.
        kv_heads = heads
    check_heads(cfg, hidden, heads, kv_heads, derived=derived)
    return CoreSizes(
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=cfg.int("intermediate_size", maximum=MAX_DIM * 16),
        vocab=cfg.int("vocab_size", maximum=MAX_VOCAB),
    )


def _decoder_layer_types(
    cfg: ConfigReader, model_type: str, layers: int
) -> tuple[tuple[LayerType, ...], int | None]:
    """Per-layer attention kind and the sliding window, as each family's config derives them."""
    full, sliding = LayerType.FULL, LayerType.SLIDING
    explicit = layer_types_from(cfg, layers)
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
        first = cfg.int("max_window_layers", default=28, minimum=0, maximum=MAX_LAYERS)
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
            else cfg.int("sliding_window_pattern", default=6, maximum=MAX_LAYERS)
        )
        return tuple(sliding if (i + 1) % pattern else full for i in range(layers)), window
    return (full,) * layers, None


def _moe_layers(cfg: ConfigReader, model_type: str, layers: int) -> tuple[bool, ...]:
    if model_type == "mixtral":
        return (True,) * layers
    if model_type in ("qwen2_moe", "qwen3_moe"):
        step = cfg.int("decoder_sparse_step", default=1, maximum=MAX_LAYERS)
        dense = set(cfg.int_list("mlp_only_layers", layers))
        return tuple(i not in dense and (i + 1) % step == 0 for i in range(layers))
    if model_type in ("deepseek_v2", "deepseek_v3"):
        first = cfg.int(
            "first_k_dense_replace",
            default=3 if model_type == "deepseek_v3" else 0,
            minimum=0,
            maximum=MAX_LAYERS,
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


def _moe(cfg: ConfigReader, model_type: str) -> _Moe:
    if model_type == "mixtral":
        experts = cfg.int("num_local_experts", "num_experts", default=8, maximum=MAX_EXPERTS)
        top_k = cfg.int("num_experts_per_tok", default=2, maximum=experts)
        return _Moe(experts, top_k, cfg.int("intermediate_size", maximum=MAX_DIM * 16))
    if model_type == "qwen2_moe":
        experts = cfg.int("num_experts", default=60, maximum=MAX_EXPERTS)
        width = cfg.int("moe_intermediate_size", default=1408)
        shared = cfg.int("shared_expert_intermediate_size", default=5632)
        return _Moe(
            experts, cfg.int("num_experts_per_tok", default=4, maximum=experts), width, 1, shared
        )
    if model_type == "qwen3_moe":
        experts = cfg.int("num_experts", "num_local_experts", default=128, maximum=MAX_EXPERTS)
        width = cfg.int("moe_intermediate_size", default=768)
        return _Moe(experts, cfg.int("num_experts_per_tok", default=8, maximum=experts), width)
    if model_type in ("deepseek_v2", "deepseek_v3"):
        v3 = model_type == "deepseek_v3"
        experts = cfg.int(
            "n_routed_experts",
            "num_local_experts" if v3 else "num_experts",
            default=256 if v3 else 64,
            maximum=MAX_EXPERTS,
        )
        width = cfg.int("moe_intermediate_size", default=2048 if v3 else 1407)
        shared = cfg.int("n_shared_experts", default=1 if v3 else 2, minimum=0, maximum=MAX_EXPERTS)
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


def _mla(cfg: ConfigReader) -> _Mla:
    return _Mla(
        q_lora_rank=cfg.opt_int("q_lora_rank", default=1536),
        kv_lora_rank=cfg.int("kv_lora_rank", default=512),
        rope=cfg.int("qk_rope_head_dim", default=64),
        nope=cfg.int("qk_nope_head_dim", default=128),
        v=cfg.int("v_head_dim", default=128),
    )


def llama_style_decoder(cfg: ConfigReader, model_type: str) -> tuple[ArchFacts, list[Tensor], str]:
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

    inv = InventoryBuilder()
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
