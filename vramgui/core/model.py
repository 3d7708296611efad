"""ModelSpec: the architecture facts of a model and the inventory of every weight tensor.

Everything the estimator says about weights (bytes per dtype, quantized sizes, LoRA adapters,
tensor-parallel shards, the offload view) derives from the one tensor list; the architecture facts
drive the KV cache and activation terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from vramgui.core.formats import StoredFormat

_T = TypeVar("_T")


class Role(StrEnum):
    """What a weight tensor does; decides quantization, offload and sharding treatment."""

    EMBEDDING = "embedding"  # token embeddings
    POSITION = "position"  # learned position / token-type embeddings
    ATTENTION = "attention"  # q, k, v, o and MLA low-rank projections
    MLP = "mlp"  # dense feed-forward
    EXPERT = "expert"  # routed MoE experts (only top-k run per token)
    SHARED_EXPERT = "shared_expert"  # MoE experts every token runs through
    # projections of the token mixers that are not softmax attention: Gated DeltaNet's
    # linear_attn.in_proj_* / out_proj, Mamba's in_proj / x_proj / dt_proj / out_proj, LFM2's
    # short-convolution in / out projections, RecurrentGemma's RG-LRU linears
    MIXER = "mixer"
    ROUTER = "router"  # MoE gate
    NORM = "norm"  # layer / RMS norms
    HEAD = "head"  # LM head, pooler, task heads
    ENCODER = "encoder"  # vision / audio towers and multimodal projectors, outside the decoder
    OTHER = "other"  # anything else (SSM state params, convolutions, ...)


class Inventory(StrEnum):
    """How the tensor inventory and architecture facts of a spec were obtained.

    EXACT: a modelled family built every tensor from config.json exactly as transformers does.
    FROM_HEADERS: the tensors come from checkpoint headers (safetensors, GGUF), the architecture
        facts from a modelled family.
    APPROXIMATE: some of the inventory or of the facts that drive KV cache and activations are
        guessed; ``ModelSpec.warnings`` say which.
    """

    EXACT = "exact"
    FROM_HEADERS = "from-headers"
    APPROXIMATE = "approximate"


class LayerType(StrEnum):
    """How a decoder layer mixes tokens, which decides what it keeps in the cache."""

    FULL = "full_attention"
    SLIDING = "sliding_attention"  # keeps the last ``sliding_window`` tokens
    CHUNKED = "chunked_attention"  # attends within chunks of ``attention_chunk_size`` tokens
    LINEAR = "linear_attention"  # fixed-size recurrent state (gated delta rule, lightning...)
    MAMBA = "mamba"  # selective state space: SSM and convolution states
    CONV = "conv"  # short convolution: the last few tokens
    NONE = "none"  # no token mixing (an MLP-only block)

    @property
    def has_kv(self) -> bool:
        """Whether the layer keeps keys and values per token."""
        return self in (LayerType.FULL, LayerType.SLIDING, LayerType.CHUNKED)


@dataclass(frozen=True, slots=True)
class Tensor:
    """One weight tensor.

    Attributes:
        name: the checkpoint name, e.g. ``model.layers.0.self_attn.q_proj.weight``.
        shape: dimensions in PyTorch order (out, in) for linear weights.
        role: what the tensor does.
        layer: the decoder block index, or None for tensors outside the blocks.
        module: the module's attribute name as transformers names it (``q_proj``, ``down_proj``,
            ``embed_tokens``, ``lm_head``, ``c_attn``, ``query_key_value``...); LoRA targets match it.
        dtype: the storage dtype when the source states it (safetensors ``BF16``, GGUF ``Q4_K``),
            or None when the tensor takes the dtype chosen in the workload.
        is_bias: a bias vector rather than a weight.
    """

    name: str
    shape: tuple[int, ...]
    role: Role
    layer: int | None = None
    module: str = ""
    dtype: str | None = None
    is_bias: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_matrix(self) -> bool:
        """A 2-D (or stacked 3-D expert) weight of a linear layer: what quantization schemes touch."""
        return (
            not self.is_bias
            and len(self.shape) >= 2
            and self.role not in (Role.EMBEDDING, Role.POSITION, Role.NORM)
        )


@dataclass(frozen=True, slots=True)
class RopeScaling:
    """A RoPE scaling, as a config's ``rope_scaling`` states it or the user sets it.

    Attributes:
        kind: the ``rope_type`` ("yarn", "linear", "dynamic", "llama3", "longrope"...).
        factor: how many times the trained context it stretches to.
        original_context: the context the model was trained at before the scaling
            (``original_max_position_embeddings``), or None where the scaling names none.
    """

    kind: str
    factor: float
    original_context: int | None = None


@dataclass(frozen=True, slots=True)
class ArchFacts:
    """Architecture facts that drive KV cache and activations (defaults as transformers uses them).

    Attributes:
        model_type: config.json ``model_type`` (``llama``, ``qwen2_moe``, ...).
        num_layers: number of transformer blocks.
        hidden_size: residual stream width.
        num_heads: query heads.
        num_kv_heads: key / value heads (GQA / MQA); equals num_heads for MHA.
        head_dim: per-head dimension of q / k (v_head_dim may differ under MLA).
        intermediate_size: dense MLP width.
        vocab_size: embedding rows.
        max_position_embeddings: the longest context the model was trained for.
        tie_word_embeddings: the LM head shares the embedding matrix.
        layer_types: per-layer attention kind; len == num_layers.
        sliding_window: window of sliding-attention layers, or None.
        gated_mlp: SwiGLU / GeGLU style MLP (gate, up, down) rather than up, down.
        hidden_act: activation name as in the config.
        norm: "rms" or "layer".
        is_decoder: causal LM (False for encoders such as BERT).
        kv_lora_rank: MLA compressed KV latent width (DeepSeek V2/V3), else None.
        q_lora_rank: MLA query low rank, else None.
        qk_rope_head_dim: MLA decoupled rotary key width.
        qk_nope_head_dim: MLA non-rotary q/k head width.
        v_head_dim: value head width when it differs from head_dim.
        num_experts: routed experts per MoE layer (0 for dense).
        experts_per_token: top-k routed experts per token.
        num_shared_experts: always-on shared experts per MoE layer.
        moe_intermediate_size: width of one routed expert's MLP.
        moe_layers: per layer, True where the MLP is a MoE block; len == num_layers.
        attention_dropout: dropout on attention probabilities (training activations).
        hidden_dropout: dropout on residual branches (training activations).
        torch_dtype: the dtype the checkpoint was published in, as the config says, or None.
        attention_chunk_size: tokens per chunk of chunked-attention layers, or None.
        layer_kv_widths: per layer, the key and value elements one token keeps (0 where the layer
            keeps none); empty when every attention layer keeps ``num_kv_heads * (head_dim +
            v_head_dim)``.
        layer_kv_heads: per layer, the key / value heads (with ``layer_kv_widths``).
        layer_state_elements: per layer, the fixed state one sequence keeps (recurrent and
            convolution states of linear-attention, Mamba and short-convolution layers).
        sdpa: transformers runs the model with SDPA when asked (False: eager only, e.g.
            attention sinks).
        index_topk: keys each query attends to under a sparse-attention indexer (DeepSeek
            V3.2's DSA), or None.
        ssm_chunk_size: tokens per chunk of Mamba 2's chunked scan, or None.
        rope_scaling: the RoPE scaling the config carries, or None.
        rope_theta: the rotary base the config states (``rope_theta``), or None.
    """

    model_type: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    layer_types: tuple[LayerType, ...] = ()
    sliding_window: int | None = None
    gated_mlp: bool = True
    hidden_act: str = "silu"
    norm: str = "rms"
    is_decoder: bool = True
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    moe_layers: tuple[bool, ...] = ()
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    torch_dtype: str | None = None
    attention_chunk_size: int | None = None
    layer_kv_widths: tuple[int, ...] = ()
    layer_kv_heads: tuple[int, ...] = ()
    layer_state_elements: tuple[int, ...] = ()
    sdpa: bool = True
    index_topk: int | None = None
    ssm_chunk_size: int | None = None
    rope_scaling: RopeScaling | None = None
    rope_theta: float | None = None

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model: its name, architecture facts and weight inventory.

    Attributes:
        name: what the user calls it (repo id, catalog name, file name).
        facts: architecture facts.
        tensors: every weight tensor, tied tensors listed once.
        architecture: the transformers class name, e.g. ``LlamaForCausalLM``.
        quantization: the checkpoint's own quantization scheme when it is stored quantized
            (``gptq-int4``, ``awq-int4``, ``fp8-block``, ``mxfp4``, ``nvfp4``, ``nf4``, a GGUF
            file type...), else None.
        warnings: things the user should know about how this spec was obtained.
        source: a short description of where the facts came from.
        inventory: how exact the tensors and facts are (see Inventory).
        stored_format: how a pre-quantized checkpoint stores each weight, read from its
            ``quantization_config`` (None for GGUF files and unquantized checkpoints).
        logical_tensors: for a checkpoint whose ``tensors`` are its stored (quantized) ones, the
            tensors the model holds unquantized, synthesized from config.json; empty when
            ``tensors`` are those already, or when they could not be built.
        mtp_tensors: multi-token-prediction layers the checkpoint stores beside the model
            (DeepSeek, GLM, MiMo, Qwen3-Next...): loaded for speculative decoding only, so not
            part of ``tensors``.
    """

    name: str
    facts: ArchFacts
    tensors: tuple[Tensor, ...]
    architecture: str = ""
    quantization: str | None = None
    warnings: tuple[str, ...] = ()
    source: str = ""
    inventory: Inventory = Inventory.EXACT
    stored_format: StoredFormat | None = None
    logical_tensors: tuple[Tensor, ...] = ()
    mtp_tensors: tuple[Tensor, ...] = ()
    _by_layer: dict[int | None, tuple[Tensor, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _memo: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        groups: dict[int | None, list[Tensor]] = {}
        for t in self.tensors:
            groups.setdefault(t.layer, []).append(t)
        object.__setattr__(self, "_by_layer", {k: tuple(v) for k, v in groups.items()})
        object.__setattr__(self, "_memo", {})

    def cached(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, once per ``key``: facts derived from this spec never go stale.

        The estimate runs on every input change and over sweeps of hundreds of points; the
        per-tensor work (storage per scheme, sums over the inventory) is done once per spec.
        """
        try:
            return cast(_T, self._memo[key])
        except KeyError:
            value = self._memo[key] = compute()
            return value

    @property
    def parameters(self) -> int:
        """Parameters of the model, counted unquantized (a packed checkpoint's logical ones)."""
        tensors = self.logical_tensors or self.tensors
        return self.cached("parameters", lambda: sum(t.numel for t in tensors))

    def layer_tensors(self, layer: int | None) -> tuple[Tensor, ...]:
        """Tensors of one block (or, for None, those outside every block)."""
        return self._by_layer.get(layer, ())

    def count(self, roles: Iterable[Role]) -> int:
        wanted = set(roles)
        return sum(t.numel for t in self.tensors if t.role in wanted)


@dataclass(frozen=True, slots=True)
class ModelRef:
    """Where a ModelSpec came from, enough to find it again (stored in profiles).

    Attributes:
        kind: "hub", "catalog", "local", "config" or "ollama".
        id: Hub repo id, catalog name, absolute path, or Ollama model name (``llama3.1:8b``).
        revision: Hub commit the facts were read at, if known.
        file: for a Hub GGUF repo, the chosen file inside it.
        size_bytes: local file or folder size when read, to notice a changed file.
        mtime: local modification time when read.
    """

    kind: str
    id: str
    revision: str | None = None
    file: str | None = None
    size_bytes: int | None = None
    mtime: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ModelRef:
        kind, ident = data.get("kind"), data.get("id")
        if not isinstance(kind, str) or not isinstance(ident, str):
            raise ValueError("a model reference needs string 'kind' and 'id'")
        revision, file = data.get("revision"), data.get("file")
        size, mtime = data.get("size_bytes"), data.get("mtime")
        return cls(
            kind=kind,
            id=ident,
            revision=revision if isinstance(revision, str) else None,
            file=file if isinstance(file, str) else None,
            size_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
            mtime=float(mtime)
            if isinstance(mtime, int | float) and not isinstance(mtime, bool)
            else None,
        )
