"""vLLM's KV cache layout: the KVCacheSpec of each layer on one GPU (``kv_cache_interface``)
and the groups vLLM's allocator makes of them (``kv_cache_utils``).

The pool is cut into blocks of ``block_size`` tokens per layer: layers of one kind share a
block table, sliding-window layers need only the window plus one batch of tokens, Mamba and
linear-attention layers one state block per request, and the hybrid allocator gives every group
the same page size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramgui.core import dtypes
from vramgui.core.errors import WorkloadError
from vramgui.core.model import LayerType, ModelSpec
from vramgui.core.vllm.rules import RULES, Rules
from vramgui.core.workload import Workload

# Tokens per KV block on CUDA (CacheConfig's default).
BLOCK_SIZE = 16


class Kind:
    """The KV cache spec kinds vLLM allocates (kv_cache_interface.py)."""

    FULL = "full"  # FullAttentionSpec (MLA's latent too)
    SLIDING = "sliding"  # SlidingWindowSpec
    CHUNKED = "chunked"  # ChunkedLocalAttentionSpec
    STATE = "state"  # MambaSpec: Mamba, linear attention, short convolutions


@dataclass(frozen=True, slots=True)
class LayerKv:
    """One layer's KV cache on one GPU, as vLLM specifies it.

    Attributes:
        kind: a :class:`Kind`.
        token_bytes: bytes one token keeps (attention kinds); 0 for state layers.
        state_bytes: bytes one request's state takes (state layers).
        window: the sliding window or attention chunk, in tokens.
        block_size: tokens per block.
        padded_page: the page the allocator pads this layer's page to (0: none).
        state_blocks: blocks one request's state takes (state layers): 1 and one per
            speculative token; under prefix caching one more ("align"), or one per block of
            the request's tokens when ``state_per_block`` ("all").
        state_per_block: the state is kept for every block of tokens (mamba_cache_mode "all").
    """

    kind: str
    token_bytes: int = 0
    state_bytes: int = 0
    window: int = 0
    block_size: int = BLOCK_SIZE
    padded_page: int = 0
    state_blocks: int = 1
    state_per_block: bool = False

    @property
    def page_bytes(self) -> int:
        """Bytes of one block of this layer (page_size_bytes)."""
        natural = (
            self.state_bytes if self.kind == Kind.STATE else self.block_size * self.token_bytes
        )
        return max(natural, self.padded_page)

    def blocks_per_request(self, max_model_len: int, batched_tokens: int) -> int:
        """Blocks one request of ``max_model_len`` tokens takes (max_memory_usage_bytes / page)."""
        if self.kind == Kind.STATE:
            if self.state_per_block:
                return -(-max_model_len // self.block_size)
            return self.state_blocks
        if self.kind == Kind.SLIDING:
            tokens = min(self.window - 1 + batched_tokens, max_model_len)
            return -(-tokens // self.block_size) + 1
        if self.kind == Kind.CHUNKED:
            tokens = min(self.window + batched_tokens, max_model_len)
            return -(-tokens // self.block_size)
        return -(-max_model_len // self.block_size)


@dataclass(frozen=True, slots=True)
class KvGroup:
    """Layers that share one block table (KVCacheGroupSpec)."""

    spec: LayerKv
    layers: int


@dataclass(frozen=True, slots=True)
class KvLayout:
    """How vLLM cuts one GPU's pool into blocks.

    Attributes:
        groups: the KV cache groups.
        block_bytes: bytes one block id takes across the layers that share it (a page of each
            layer of the widest group; padded groups waste the difference).
        specs: every layer's spec, as vLLM's start-up check sums them.
        uniform_type: one kind of layer with pages of different sizes, all in one group
            (UniformTypeKVCacheSpecs): a block id takes a page of every layer.
    """

    groups: tuple[KvGroup, ...]
    block_bytes: int
    specs: tuple[LayerKv, ...]
    uniform_type: bool = False

    @property
    def block_size(self) -> int:
        """The smallest block of the groups: the tokens one block id stands for in the log."""
        return min((g.spec.block_size for g in self.groups), default=BLOCK_SIZE)

    @property
    def token_bytes(self) -> int:
        """Bytes one token keeps across the attention layers (a request's full-length cost)."""
        return sum(s.token_bytes for s in self.specs)

    def blocks(self, available_bytes: int) -> int:
        """Block ids the pool holds (get_num_blocks)."""
        if not self.block_bytes or available_bytes <= 0:
            return 0
        return available_bytes // self.block_bytes

    def blocks_per_request(self, max_model_len: int, batched_tokens: int) -> int:
        """Block ids one request of ``max_model_len`` tokens takes across the groups."""
        if self.uniform_type:
            return max(s.blocks_per_request(max_model_len, batched_tokens) for s in self.specs)
        return sum(g.spec.blocks_per_request(max_model_len, batched_tokens) for g in self.groups)

    def needed_bytes(self, max_model_len: int, batched_tokens: int) -> int:
        """What vLLM's start-up check asks for: every layer's memory for one request."""
        return sum(
            s.blocks_per_request(max_model_len, batched_tokens) * s.page_bytes for s in self.specs
        )

    def concurrency(self, blocks: int, max_model_len: int, batched_tokens: int) -> float:
        """Requests of ``max_model_len`` tokens the pool holds at once."""
        if not self.groups:
            return 0.0
        return blocks / self.blocks_per_request(max_model_len, batched_tokens)

    def reported_tokens(
        self, blocks: int, max_model_len: int, batched_tokens: int, rules: Rules
    ) -> int:
        """The "GPU KV cache size: N tokens" of vLLM's log."""
        if not self.groups:
            return 0
        if rules.tokens_from_concurrency:
            return int(self.concurrency(blocks, max_model_len, batched_tokens) * max_model_len)
        return blocks // len(self.groups) * self.block_size

    def largest_model_len(self, available_bytes: int, upper: int, batched_tokens: int) -> int:
        """vLLM's estimate_max_model_len: the longest length one request fits in (0: none)."""
        if not self.specs or self.needed_bytes(1, batched_tokens) > available_bytes:
            return 0
        low, high = 1, upper
        while low < high:
            mid = (low + high + 1) // 2
            if self.needed_bytes(mid, batched_tokens) <= available_bytes:
                low = mid
            else:
                high = mid - 1
        return low


def layer_specs(
    spec: ModelSpec, workload: Workload, layers: Sequence[int], rules: Rules | None = None
) -> list[LayerKv]:
    """vLLM's KV cache spec of each of ``layers`` on one tensor-parallel rank.

    Attention layers keep ``max(1, kv_heads // tp)`` heads per rank (vLLM replicates heads when
    there are fewer than ranks); MLA keeps its latent and rotary key whole on every rank; state
    layers split their state over the ranks. Layers that keep nothing have no spec.

    Raises:
        WorkloadError: a KV dtype vLLM does not offer.
    """
    facts = spec.facts
    tp = workload.tp
    element = dtypes.kv_bytes_per_element(workload.kv_dtype, workload.dtype)
    rules = rules or RULES[workload.vllm_version]
    kinds = facts.layer_types or (LayerType.FULL,) * facts.num_layers
    widths, heads, states = facts.layer_kv_widths, facts.layer_kv_heads, facts.layer_state_elements
    out = []
    for i in layers:
        kind = kinds[i]
        if kind.has_kv:
            if facts.is_mla:
                per_token = (facts.kv_lora_rank or 0) + (facts.qk_rope_head_dim or 0)
            elif widths:
                n = heads[i] or 1
                per_token = widths[i] // n * max(1, n // tp)
            else:
                v_dim = facts.v_head_dim or facts.head_dim
                per_token = max(1, facts.num_kv_heads // tp) * (facts.head_dim + v_dim)
            token_bytes = math.ceil(per_token * element)
            if kind is LayerType.SLIDING and facts.sliding_window:
                out.append(LayerKv(Kind.SLIDING, token_bytes, window=facts.sliding_window))
            elif kind is LayerType.CHUNKED and facts.attention_chunk_size:
                out.append(LayerKv(Kind.CHUNKED, token_bytes, window=facts.attention_chunk_size))
            else:
                out.append(LayerKv(Kind.FULL, token_bytes))
        elif states and states[i]:
            out.append(_state_spec(spec, workload, i, states[i], rules))
    return out


# Architectures whose recurrent (SSM) state vLLM keeps in float32 while the convolution state
# stays in the model dtype: Qwen3.5's config asks for it (mamba_ssm_dtype, applied by
# Qwen3_5ForConditionalGenerationConfig); Nemotron-H's default (NemotronHForCausalLMConfig).
SSM_FP32_TYPES = frozenset(
    {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "nemotron_h"}
)
# Architectures that keep a state per block of tokens under prefix caching (0.20's
# SupportsMambaPrefixCaching: mamba_cache_mode "all"); others keep two per request ("align").
STATE_PER_BLOCK_TYPES = frozenset(
    {"mamba", "mamba2", "jamba", "bamba", "zamba2", "nemotron_h", "granitemoehybrid", "falcon_h1"}
)


def prefix_caching(workload: Workload, rules: Rules) -> bool:
    """Prefix caching is on for a model with state layers: as set, else the version's
    default."""
    if workload.enable_prefix_caching is not None:
        return workload.enable_prefix_caching
    return rules.hybrid_prefix_caching


def _state_spec(
    spec: ModelSpec, workload: Workload, layer: int, elements: int, rules: Rules
) -> LayerKv:
    """One state layer's spec as vLLM sizes it (MambaStateShapeCalculator): the convolution
    keeps ``kernel - 1`` inputs per channel, and one more per speculative token, in the model
    dtype; the recurrent state is split over the tensor-parallel ranks, in float32 where the
    architecture asks for it."""
    tp = workload.tp
    conv = next(
        (
            t
            for t in spec.layer_tensors(layer)
            if len(t.shape) == 3
            and (t.name.endswith("conv1d.weight") or t.name.endswith("conv.weight"))
        ),
        None,
    )
    channels, kernel = (conv.shape[0], conv.shape[-1]) if conv is not None else (0, 0)
    speculative = workload.speculative_tokens
    recurrent = max(0, elements - channels * kernel)  # the facts count kernel inputs per channel
    e = dtypes.DTYPE_BYTES[workload.dtype]
    e_state = 4 if spec.facts.model_type in SSM_FP32_TYPES else e
    state = -(-channels // tp) * max(0, kernel - 1 + speculative) * e
    state += -(-recurrent // tp) * e_state
    cached = prefix_caching(workload, rules)
    per_block = cached and spec.facts.model_type in STATE_PER_BLOCK_TYPES
    return LayerKv(
        Kind.STATE,
        state_bytes=state,
        state_blocks=1 + speculative + (1 if cached and not per_block else 0),
        state_per_block=per_block,
    )


def kv_layout(specs: Sequence[LayerKv], rules: Rules, hybrid: bool = True) -> KvLayout:
    """Group layer specs as vLLM's KV cache manager does (get_kv_cache_groups).

    Args:
        specs: every layer of one GPU.
        rules: the version's rules.
        hybrid: the hybrid KV cache manager is on. vLLM turns it off for chunked local
            attention (and KV transfer or events): sliding and chunked layers then keep every
            token, as full attention does.

    Raises:
        WorkloadError: layers of different page sizes under rules that cannot group them.
    """
    specs = list(specs)
    if not specs:
        return KvLayout((), 0, ())
    if not hybrid or any(s.kind == Kind.CHUNKED for s in specs):
        specs = [replace(s, kind=Kind.FULL, window=0) if s.kind != Kind.STATE else s for s in specs]
    specs = _align_state_pages(specs)
    distinct = list(dict.fromkeys(specs))
    if len(distinct) == 1:
        one = (KvGroup(distinct[0], len(specs)),)
        return KvLayout(one, specs[0].page_bytes * len(specs), tuple(specs))
    if len({(s.kind, s.window) for s in specs}) == 1 and specs[0].kind != Kind.STATE:
        one = (KvGroup(distinct[0], len(specs)),)
        return KvLayout(one, sum(s.page_bytes for s in specs), tuple(specs), uniform_type=True)
    if len({s.page_bytes for s in specs}) > 1:
        if not rules.unify_page_sizes:
            raise WorkloadError(
                f"vLLM {rules.version} cannot allocate a KV cache for layers of different page "
                "sizes (NotImplementedError in get_kv_cache_groups); 0.20 and later can"
            )
        specs = _unify_page_sizes(specs)
        distinct = list(dict.fromkeys(specs))
    counts = {s: specs.count(s) for s in distinct}
    # Every group has as many layers as the rarest kind (or, where the kinds are near equal,
    # the commonest); the last group of a kind is padded.
    group_size = min(counts.values())
    if rules.near_equal_groups and max(counts.values()) < group_size * 1.5:
        group_size = max(counts.values())
    groups = tuple(
        KvGroup(s, group_size)
        for s, count in counts.items()
        for _ in range(-(-count // group_size))
    )
    return KvLayout(groups, distinct[0].page_bytes * group_size, tuple(specs))


def _align_state_pages(specs: list[LayerKv]) -> list[LayerKv]:
    """Attention blocks grow in steps of 16 tokens until an attention page holds the largest
    state page, then state pages are padded to it (HybridAttentionMambaModelConfig)."""
    state = max((s.state_bytes for s in specs if s.kind == Kind.STATE), default=0)
    per_token = max((s.token_bytes for s in specs if s.kind != Kind.STATE), default=0)
    if not state or not per_token:
        return specs
    block = max(BLOCK_SIZE, BLOCK_SIZE * -(-state // (BLOCK_SIZE * per_token)))
    page = block * per_token
    return [
        replace(s, padded_page=page, block_size=block)
        if s.kind == Kind.STATE
        else replace(s, block_size=block)
        for s in specs
    ]


def _unify_page_sizes(specs: list[LayerKv]) -> list[LayerKv]:
    """Larger blocks for layers of smaller pages until every page is the largest
    (unify_kv_cache_spec_page_size); a page that does not divide it is padded."""
    largest = max(s.page_bytes for s in specs)
    out = []
    for s in specs:
        if s.page_bytes == largest:
            out.append(s)
        elif s.kind != Kind.STATE and largest % s.page_bytes == 0:
            out.append(replace(s, block_size=s.block_size * (largest // s.page_bytes)))
        else:
            out.append(replace(s, padded_page=largest))
    return out


# --------------------------------------------------------------------------------------------
# What vLLM holds besides the pool
# --------------------------------------------------------------------------------------------
