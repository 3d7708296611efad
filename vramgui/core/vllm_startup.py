"""vLLM's serving arithmetic: whether ``vllm serve`` starts on a GPU, the KV pool it allocates,
and how many requests of ``--max-model-len`` tokens it holds at once.

vLLM sizes itself at start-up (``gpu_worker.determine_available_memory``): it loads the weights,
runs one profiling forward of ``max_num_batched_tokens`` tokens and a sampler warm-up of
``max_num_seqs`` sequences, and measures the peak of PyTorch's allocator and the memory that
grew outside it. The KV pool is then ``gpu_memory_utilization x total`` minus weights, peak
activations and non-torch memory, and, from v0.20.2, minus the CUDA graphs it is about to
capture (before, they are captured after the pool, in the margin the utilization leaves). The
pool is cut into blocks of ``block_size`` tokens per layer (``kv_cache_utils``): layers of one
kind share a block table, sliding-window layers need only the window plus one batch of tokens,
Mamba and linear-attention layers one state block per request, and the hybrid allocator gives
every group the same page size. Start-up fails (``check_enough_kv_cache_memory``) when the pool
cannot hold one request of ``max_model_len`` tokens; vLLM's message names the longest length
that would fit.

:class:`Rules` holds what changed between the versions read (0.11, 0.20.2, 0.34); the estimate
follows :data:`LATEST` unless the workload names another (``--vllm-version``). Everything here
is per GPU: tensor-parallel ranks are alike, a pipeline stage is one GPU.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vramgui.core import dtypes
from vramgui.core.activations import vllm_profile_peak
from vramgui.core.errors import WorkloadError
from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.rope import NO_ROTARY, context_limit
from vramgui.core.units import GiB, MiB
from vramgui.core.workload import VLLM_VERSIONS, Workload

# Tokens per KV block on CUDA (CacheConfig's default).
BLOCK_SIZE = 16
# vLLM's scheduler defaults (EngineArgs._set_default_args): for `vllm serve`, GPUs of 70 GiB or
# more other than the A100 take 8192 batched tokens and 1024 sequences, the others 2048 and 256.
LARGE_GPU_BYTES = 70 * GiB
SERVE_BATCHED_TOKENS = (2048, 8192)
SERVE_MAX_SEQS = (256, 1024)
# The LoRA ranks vLLM accepts (LoRAConfig.max_lora_rank).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# CUDA's total (cudaMemGetInfo, the total vLLM multiplies by --gpu-memory-utilization) is what
# nvidia-smi reports less about 0.43 GiB: 23.58 GiB of an RTX 3090's 24,576 MiB (vllm issue
# 10517), 22.06-22.07 GiB of an L4's or A10G's 23,034 MiB, 79.22 GiB of an H100's 81,559 MiB
# (vllm pull request 10511).
CUDA_RESERVED_BYTES = round(0.43 * GiB)
# The CUDA context (PyTorch 2.x, lazy module loading) and NCCL's set-up exist before vLLM takes
# its snapshot of free memory; they stay outside the share --gpu-memory-utilization gives it.
CUDA_CONTEXT_BYTES = round(0.45 * GiB)
# Memory that grows outside PyTorch's allocator from the snapshot to the profile's end (kernel
# modules loaded by the profile, cuBLAS and attention workspaces), and with tensor parallelism
# the communication buffers created at the first collective (custom all-reduce, NCCL).
# 0.13-0.14 GiB at TP 1 and 0.54-0.55 GiB at TP 2 in vLLM 0.11's logs on H100s (llm-d/llm-d-benchmark).
NON_TORCH_BYTES = round(0.13 * GiB)
NON_TORCH_TP_BYTES = round(0.55 * GiB)
# CUDA graphs: each captured graph keeps its kernel nodes; vLLM captures one graph per batch size
# and piece (the pieces between attention calls), and FULL decode graphs of whole steps.
GRAPH_PIECE_BYTES = round(0.28 * MiB)


@dataclass(frozen=True, slots=True)
class Rules:
    """What one vLLM version does where the versions read differ.

    Attributes:
        version: the version these rules follow.
        cuda_graphs_in_pool: CUDA graph memory is profiled and taken from the pool before it is
            allocated (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default: read in 0.20.2);
            before, the graphs are captured after the pool, in the margin.
        tokens_from_concurrency: "GPU KV cache size: N tokens" is the concurrency times
            max_model_len (0.20.2); before, blocks per KV cache group times the block size.
        unify_page_sizes: layers of different page sizes get larger blocks until their pages
            match (0.20.2); 0.11 refuses such models.
        capture_step16: CUDA graph sizes past 256 go in steps of 16 and stop at twice
            max_num_seqs (0.11); before, steps of 8 up to 512.
        full_decode_graphs: FULL graphs of whole decode steps besides the piecewise ones (0.11).
        state_blocks_check: models with state layers refuse to start when --max-num-seqs
            exceeds the pool's blocks and FULL decode graphs are captured (0.20.2: each decoding
            sequence needs one state block).
        hybrid_prefix_caching: prefix caching is on by default for models with state layers
            (off in 0.10 to 0.24; on in 0.34).
        sampler: the top-k / top-p sampler vLLM finds: "flashinfer" where the FlashInfer
            package is installed (a dependency of vLLM from 0.20; in the Docker images
            before), else "pytorch".
        mxfp4_hopper_swizzle: on Hopper, the Triton MXFP4 MoE backend swizzles the expert
            weights and scales into triton_kernels' Hopper layouts (torch 2.8.1 and later:
            vLLM 0.11.1 on; 0.10 and 0.11.0 pin torch 2.8.0 or older and keep the strided
            layout, a view of the loaded tensors).
        encoder_profile: multimodal models profile their vision encoder first, on dummy images
            of the largest size, and keep the dummy inputs and the encoder's outputs through
            the text forward (``gpu_model_runner.profile_run``, read in 0.24.0): see
            :func:`encoder_profile`.
    """

    version: str
    cuda_graphs_in_pool: bool
    tokens_from_concurrency: bool
    unify_page_sizes: bool
    capture_step16: bool
    full_decode_graphs: bool
    state_blocks_check: bool
    hybrid_prefix_caching: bool
    sampler: str
    mxfp4_hopper_swizzle: bool
    encoder_profile: bool = False


RULES = {
    "0.10": Rules("0.10", False, False, False, False, False, False, False, "pytorch", False),
    "0.11": Rules("0.11", False, False, False, True, True, False, False, "pytorch", True),
    "0.20": Rules(
        "0.20", True, True, True, True, True, True, False, "flashinfer", True, encoder_profile=True
    ),
}
LATEST = "0.20"
if set(RULES) != set(VLLM_VERSIONS):  # pragma: no cover - a table kept in step with workload.py
    raise AssertionError("serving.RULES and workload.VLLM_VERSIONS must name the same versions")


def rules_for(version: str) -> Rules:
    """The rules of the newest version in :data:`RULES` not newer than ``version``
    (``0.10.1.1`` -> 0.10, ``0.20.2rc1`` -> 0.20)."""
    wanted = _version_key(version)
    chosen = min(RULES, key=_version_key)
    for name in RULES:
        if _version_key(chosen) < _version_key(name) <= wanted:
            chosen = name
    return RULES[chosen]


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# --------------------------------------------------------------------------------------------
# The KV cache layout: vLLM's KVCacheSpec per layer, and the groups its allocator makes
# --------------------------------------------------------------------------------------------


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
    # Every group has as many layers as the rarest kind; the last group of a kind is padded.
    group_size = min(counts.values())
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

# Linear layers whose input features tensor parallelism splits (row parallel).
_ROW_PARALLEL = frozenset({"o_proj", "down_proj", "dense", "out_proj", "c_proj", "fc2", "wo"})


def lora_slot_bytes(spec: ModelSpec, workload: Workload, layers: Sequence[int]) -> int:
    """The adapter slots ``--enable-lora`` allocates on one GPU.

    vLLM gives every linear module of the decoder layers stacked A and B tensors for
    ``max_loras`` adapters of rank ``max_lora_rank``, in the model dtype, at load time.
    Column-parallel layers split B over the ranks, row-parallel ones A.
    """
    if not workload.enable_lora:
        return 0
    wanted = set(layers)
    tp = workload.tp
    elements = 0
    for t in spec.tensors:
        if t.layer not in wanted or t.is_bias or len(t.shape) != 2:
            continue
        if t.role not in (Role.ATTENTION, Role.MLP, Role.SHARED_EXPERT):
            continue
        out_features, in_features = t.shape
        if t.module in _ROW_PARALLEL:
            elements += in_features // tp + out_features
        else:
            elements += in_features + out_features // tp
    rank = workload.max_lora_rank
    return elements * rank * workload.max_loras * dtypes.DTYPE_BYTES[workload.dtype]


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The scheduler settings in effect: the command line's, or vLLM's defaults for the GPU."""

    max_num_seqs: int
    max_num_batched_tokens: int


def scheduler_settings(
    workload: Workload, total_bytes: int | None, gpu_name: str = ""
) -> Scheduler:
    """``--max-num-seqs`` and ``--max-num-batched-tokens`` as ``vllm serve`` sets them.

    Raises:
        WorkloadError: fewer batched tokens than sequences (vLLM refuses).
    """
    large = (
        total_bytes is not None
        and total_bytes >= LARGE_GPU_BYTES
        and "a100" not in gpu_name.lower()
    )
    tokens = workload.max_num_batched_tokens or SERVE_BATCHED_TOKENS[large]
    seqs = workload.max_num_seqs or min(SERVE_MAX_SEQS[large], tokens)
    if tokens < seqs:
        raise WorkloadError(
            f"vLLM needs --max-num-batched-tokens ({tokens}) at least --max-num-seqs ({seqs})"
        )
    return Scheduler(seqs, tokens)


def capture_sizes(scheduler: Scheduler, rules: Rules) -> tuple[int, ...]:
    """The batch sizes vLLM captures CUDA graphs for (VllmConfig._set_cudagraph_sizes)."""
    if rules.capture_step16:
        largest = min(2 * scheduler.max_num_seqs, 512, scheduler.max_num_batched_tokens)
        sizes = [n for n in (1, 2, 4) if n <= largest]
        sizes += range(8, min(largest + 1, 256), 8)
        sizes += range(256, largest + 1, 16)
    else:
        largest = min(512, scheduler.max_num_batched_tokens)
        sizes = [n for n in (1, 2, 4) if n <= largest] + list(range(8, largest + 1, 8))
    return tuple(sizes)


def cuda_graph_bytes(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler, rules: Rules, layers: int
) -> int:
    """Memory of the CUDA graphs vLLM captures on one GPU (0 with --enforce-eager).

    Piecewise graphs cut each step at every attention call (``layers + 1`` pieces per batch
    size); from 0.11 whole-step decode graphs are captured too, for batch sizes up to
    max_num_seqs. Each piece keeps its kernel nodes (:data:`GRAPH_PIECE_BYTES`, from the
    captures vLLM logs); the largest batch's activations are the graphs' shared pool.
    """
    if workload.enforce_eager:
        return 0
    sizes = capture_sizes(scheduler, rules)
    graphs = len(sizes) * (layers + 1)
    if rules.full_decode_graphs:
        graphs += sum(1 for n in sizes if n <= scheduler.max_num_seqs)
    pool = vllm_profile_peak(spec, workload, max(sizes), 0, rules.sampler)
    return graphs * GRAPH_PIECE_BYTES + pool


def non_torch_bytes(workload: Workload) -> int:
    """Memory outside PyTorch's allocator that grows during vLLM's profile."""
    return NON_TORCH_TP_BYTES if workload.tp > 1 else NON_TORCH_BYTES


def cuda_total_bytes(capacity_bytes: int) -> int:
    """What cudaMemGetInfo reports as the total of a GPU of ``capacity_bytes``."""
    return max(0, capacity_bytes - CUDA_RESERVED_BYTES)


# --------------------------------------------------------------------------------------------
# The vision encoder's profile (multimodal checkpoints)
# --------------------------------------------------------------------------------------------

# The models whose vision tower is vLLM's Qwen3_VisionTransformer and whose processor sizes go by
# Qwen3VLProcessingInfo (model_executor/models/qwen3_vl.py, qwen3_vl_moe.py, qwen3_5.py).
QWEN3_VL_MODEL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"})
# The pixel limits (``size.longest_edge``) in the preprocessor_config.json and
# video_preprocessor_config.json Qwen publishes with its Qwen3-VL, Qwen3.5 and Qwen3.6
# checkpoints: 4096 x 4096 pixels per image, 2 x 3072 x 4096 per pair of video frames. The
# inventory does not carry the checkpoint's own files: a checkpoint that lowers them profiles
# smaller images.
QWEN3_VL_IMAGE_MAX_PIXELS = 16_777_216
QWEN3_VL_IMAGE_MIN_PIXELS = 65_536
QWEN3_VL_VIDEO_MAX_PIXELS = 25_165_824
QWEN3_VL_VIDEO_MIN_PIXELS = 4_096
# Items of one modality a prompt may hold when --limit-mm-per-prompt leaves it out
# (config/multimodal.py).
MM_LIMIT_PER_PROMPT = 999
# Aspect ratios the processor refuses past (smart_resize); vLLM's largest image stays under it.
MAX_ASPECT_RATIO = 200


def _numbered(shapes: Mapping[str, object], prefix: str) -> int:
    """How many numbered modules ``<prefix><i>.`` a tower's tensor names hold (its blocks)."""
    return len({n[len(prefix) :].split(".", 1)[0] for n in shapes if n.startswith(prefix)})


@dataclass(frozen=True, slots=True)
class VisionTower:
    """The shapes of a Qwen3-VL-style vision tower, read from its weights.

    Attributes:
        depth: transformer blocks.
        hidden: the tower's width.
        intermediate: its MLP's width.
        patch: pixels per patch side.
        temporal_patch: frames per patch.
        channels: colour channels.
        merge: patches per merged token side (spatial_merge_size).
        out_hidden: the merged tokens' width (the language model's hidden size).
        deepstack: mergers whose outputs go to the language model beside the last one's.
    """

    depth: int
    hidden: int
    intermediate: int
    patch: int
    temporal_patch: int
    channels: int
    merge: int
    out_hidden: int
    deepstack: int

    @classmethod
    def of(cls, spec: ModelSpec) -> VisionTower | None:
        """The tower of a Qwen3-VL-family checkpoint from its inventory (None: not one, or its
        tower is not in the inventory)."""
        if spec.facts.model_type not in QWEN3_VL_MODEL_TYPES:
            return None
        # Read once per spec: a sweep estimates hundreds of points.
        return spec.cached("vision_tower", lambda: cls._read(spec))

    @classmethod
    def _read(cls, spec: ModelSpec) -> VisionTower | None:
        shapes = {
            t.name.split("visual.", 1)[1]: t.shape
            for t in spec.tensors
            if t.role is Role.ENCODER and "visual." in t.name
        }
        needed = (
            "patch_embed.proj.weight",
            "blocks.0.mlp.linear_fc1.weight",
            "merger.linear_fc1.weight",
            "merger.linear_fc2.weight",
        )
        if not all(name in shapes for name in needed):
            return None
        hidden, channels, temporal, patch, _ = shapes["patch_embed.proj.weight"]
        merged = shapes["merger.linear_fc1.weight"][1]
        return cls(
            depth=_numbered(shapes, "blocks."),
            hidden=hidden,
            intermediate=shapes["blocks.0.mlp.linear_fc1.weight"][0],
            patch=patch,
            temporal_patch=temporal,
            channels=channels,
            merge=math.isqrt(merged // hidden),
            out_hidden=shapes["merger.linear_fc2.weight"][0],
            deepstack=_numbered(shapes, "deepstack_merger_list."),
        )


def smart_resize(
    height: int, width: int, factor: int, limits: tuple[int, int], frames: int = 1
) -> tuple[int, int]:
    """The size the Qwen2-VL image processor (``frames`` 1) or the Qwen3-VL video processor
    (``frames`` read as ``temporal_factor`` frames at a time) resizes to: both sides multiples
    of ``factor``, the pixels (of a frame group) within ``limits`` (min_pixels, max_pixels)."""
    min_pixels, max_pixels = limits
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if frames * h_bar * w_bar > max_pixels:
        beta = math.sqrt(frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif frames * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def largest_image(tower: VisionTower, max_pixels: int) -> tuple[int, int]:
    """vLLM's image of the most tokens under ``max_pixels`` (height, width):
    ``get_image_size_with_most_features`` factors the most merged tokens into the squarest
    grid, and takes fewer tokens where the only grids are past the aspect-ratio limit."""
    unit = tower.patch * tower.merge
    most = max_pixels // (unit * unit)
    rows, columns = 1, most
    for tokens in range(most, 0, -1):
        rows = next(d for d in range(math.isqrt(tokens), 0, -1) if tokens % d == 0)
        columns = tokens // rows
        if columns / rows <= MAX_ASPECT_RATIO:
            break
    return unit * rows, unit * columns


def image_patches(tower: VisionTower, video: bool = False) -> int:
    """Patches of vLLM's largest image, or of its largest pair of video frames (the frames
    ``get_max_video_tokens`` counts), under the pixel limits of Qwen's published processor
    configs (``Qwen3VLProcessingInfo._get_vision_info``)."""
    unit = tower.patch * tower.merge
    frames = tower.temporal_patch if video else 1
    padded = -(-frames // tower.temporal_patch) * tower.temporal_patch
    if video:
        # The video limit counts a group of temporal_patch_size frames: the largest frame is
        # sized under its share, then the group is resized as one.
        height, width = largest_image(tower, QWEN3_VL_VIDEO_MAX_PIXELS // tower.temporal_patch)
        height, width = smart_resize(
            height, width, unit, (QWEN3_VL_VIDEO_MIN_PIXELS, QWEN3_VL_VIDEO_MAX_PIXELS), padded
        )
    else:
        height, width = largest_image(tower, QWEN3_VL_IMAGE_MAX_PIXELS)
        height, width = smart_resize(
            height, width, unit, (QWEN3_VL_IMAGE_MIN_PIXELS, QWEN3_VL_IMAGE_MAX_PIXELS)
        )
    grid_t = max(padded // tower.temporal_patch, 1)
    return grid_t * (height // tower.patch) * (width // tower.patch)


@dataclass(frozen=True, slots=True)
class EncoderProfile:
    """What vLLM's profile run spends on the vision encoder (``gpu_model_runner.profile_run``).

    Attributes:
        items: dummy images encoded at once.
        tokens_per_item: merged tokens of one image (what the language model reads).
        patches: patches through the tower, all items together.
        peak_bytes: the tower's peak on one rank, its inputs included.
        kept_bytes: what stays allocated through the text forward and the sampler warm-up: the
            dummy pixel values (a local of ``profile_run``) and the encoder's outputs (the
            encoder cache).
        note: how the figure was found, and what it assumed.
    """

    items: int
    tokens_per_item: int
    patches: int
    peak_bytes: int
    kept_bytes: int
    note: str


def encoder_items(tokens: int, workload: Workload, scheduler: Scheduler) -> int:
    """Dummy items of ``tokens`` tokens each that vLLM's profile encodes at once
    (``MultiModalBudget._get_max_items``, chunked prefill on): as many as the encoder budget
    (``max(max_num_batched_tokens, tokens)``) holds, at least one, at most ``max_num_seqs`` x
    the items one prompt of max_model_len may hold (``--limit-mm-per-prompt``: vLLM's default)."""
    budget = max(scheduler.max_num_batched_tokens, tokens)
    per_prompt = max(1, min(MM_LIMIT_PER_PROMPT, workload.seq // tokens))
    return max(1, min(budget // tokens, scheduler.max_num_seqs * per_prompt))


def encoder_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler, rules: Rules
) -> EncoderProfile | None:
    """vLLM's profile of the vision encoder, before the text forward (None: none modelled).

    ``profile_run`` (read in 0.24.0) picks the modality with the most tokens per item, encodes
    as many dummy items of the largest size as the encoder budget holds (:func:`encoder_items`)
    and keeps their outputs in the encoder cache, with the dummy inputs, until the text forward
    and the sampler warm-up are done. The tower runs eagerly (``compile_mm_encoder`` off), so
    its peak is the sum of the tensors alive at its busiest moment. Modelled: the Qwen3-VL
    family's tower (:func:`qwen3_vl_profile`), Gemma 3's SigLIP (:func:`gemma3_profile`) and
    Mistral 3's Pixtral (:func:`pixtral_profile`).
    """
    if not rules.encoder_profile:
        return None
    if spec.facts.model_type in QWEN3_VL_MODEL_TYPES:
        return qwen3_vl_profile(spec, workload, scheduler)
    if spec.architecture == "Gemma3ForConditionalGeneration":
        return gemma3_profile(spec, workload, scheduler)
    if spec.architecture == "Mistral3ForConditionalGeneration":
        return pixtral_profile(spec, workload, scheduler)
    return None


def qwen3_vl_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """The profile of a Qwen3-VL-family tower (``Qwen3_VisionTransformer``; None: the tower is
    not in the inventory, or vLLM would profile a video).

    The peak is one block beside its inputs: in the attention, the residual stream, the
    normed input (held by the call), the fused qkv output, the contiguous copy of q and k and
    its rotated output, the attention output and the projection's; in the MLP, the residual,
    the normed input, the first projection and its activation. Beside them the pixel values
    (cast to the model's dtype by the processor) and the interpolated position embeddings stay
    alive; the rotary cos / sin tables (under 1 % of it) are left out.
    """
    tower = VisionTower.of(spec)
    if tower is None:
        return None
    merge2 = tower.merge * tower.merge
    image = image_patches(tower)
    video = image_patches(tower, video=True)
    tokens = image // merge2
    if video // merge2 > tokens:  # vLLM would profile a video: its frames are not modelled
        return None
    items = encoder_items(tokens, workload, scheduler)
    n = items * image
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    h = n * tower.hidden * e
    pixels = n * tower.channels * tower.temporal_patch * tower.patch * tower.patch * e
    attention = 3 * h + 8 * h // tp
    mlp = 2 * h + 2 * n * tower.intermediate * e // tp
    deepstack = tower.deepstack * (n // merge2) * tower.out_hidden * e
    peak = pixels + h + max(attention, mlp) + deepstack
    outputs = items * tokens * tower.out_hidden * (1 + tower.deepstack) * e
    height, width = largest_image(tower, QWEN3_VL_IMAGE_MAX_PIXELS)
    note = (
        f"vLLM's profile run first encodes {items} dummy image{'s' if items > 1 else ''} of "
        f"{tokens:,} tokens ({image:,} patches, {width} x {height} pixels) with the vision "
        f"encoder: a peak of {peak / GiB:.2f} GiB, and {(pixels + outputs) / GiB:.2f} GiB kept "
        "through the text forward. The image size is the limit in Qwen's published "
        f"preprocessor_config.json ({QWEN3_VL_IMAGE_MAX_PIXELS:,} pixels); this checkpoint's "
        "own is not read, so the figure is uncertain: a lower max_pixels profiles smaller images."
    )
    return EncoderProfile(items, tokens, n, peak, pixels + outputs, note)


# Gemma 3's image tokens: Gemma3Config.mm_tokens_per_image, 256 in every Gemma 3 checkpoint
# published (config.json; not in the weights). The projector average-pools the tower's grid to it.
GEMMA3_TOKENS_PER_IMAGE = 256


@dataclass(frozen=True, slots=True)
class SiglipTower:
    """The shapes of Gemma 3's SigLIP vision tower, read from its weights.

    Attributes:
        depth: encoder layers.
        hidden: the tower's width.
        intermediate: its MLP's width.
        patch: pixels per patch side.
        channels: colour channels.
        patches: patches of one image (its position embeddings: (image_size / patch)^2).
        out_hidden: the projector's output width (the language model's hidden size).
    """

    depth: int
    hidden: int
    intermediate: int
    patch: int
    channels: int
    patches: int
    out_hidden: int

    @property
    def image_size(self) -> int:
        """Pixels per side of the square image the tower reads (Gemma 3: 896)."""
        return math.isqrt(self.patches) * self.patch

    @classmethod
    def of(cls, spec: ModelSpec) -> SiglipTower | None:
        """Gemma 3's tower from its inventory (None: not in the inventory)."""
        return spec.cached("siglip_tower", lambda: cls._read(spec))

    @classmethod
    def _read(cls, spec: ModelSpec) -> SiglipTower | None:
        shapes = {
            t.name.split("vision_tower.", 1)[1].removeprefix("vision_model."): t.shape
            for t in spec.tensors
            if t.role is Role.ENCODER and "vision_tower." in t.name
        }
        projector = next(
            (t.shape for t in spec.tensors if t.name.endswith("mm_input_projection_weight")),
            None,
        )
        needed = (
            "embeddings.patch_embedding.weight",
            "embeddings.position_embedding.weight",
            "encoder.layers.0.mlp.fc1.weight",
        )
        if projector is None or not all(name in shapes for name in needed):
            return None
        hidden, channels, patch, _ = shapes["embeddings.patch_embedding.weight"]
        return cls(
            depth=_numbered(shapes, "encoder.layers."),
            hidden=hidden,
            intermediate=shapes["encoder.layers.0.mlp.fc1.weight"][0],
            patch=patch,
            channels=channels,
            patches=shapes["embeddings.position_embedding.weight"][0],
            out_hidden=projector[1],
        )


def gemma3_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """The profile of Gemma 3's SigLIP tower (``gemma3_mm.py``, ``siglip.py``, read in 0.24.0;
    None: the tower is not in the inventory).

    The largest image (``get_image_size_with_most_features``) is resized by the processor to
    the tower's square (896 x 896) with pan-and-scan off (the processor's default), so each
    dummy image is one crop of ``GEMMA3_TOKENS_PER_IMAGE`` tokens and
    ``(image_size / patch)^2`` patches; every image runs through the tower in one batch. Its
    attention (``MMEncoderAttention``) runs FlashAttention's varlen kernel on GPUs of compute
    capability 8.0 and later (head size 72, a multiple of 8): no score matrix, and q, k, v
    pass as views of the fused projection. The busiest moment is in a layer past the first:
    the embeddings (kept by the encoder's list of hidden states), the layer's input (kept by
    the encoder's loop), the attention block's output and its normed copy, then the MLP's
    first projection and its GELU; the attention block (normed input, qkv, attention and
    projection outputs) and the MLP's second projection hold less, unless tensor parallelism
    splits the MLP (each row-parallel output is all-reduced out of place, one more copy).
    Beside them the pixel values stay alive.
    """
    tower = SiglipTower.of(spec)
    if tower is None:
        return None
    tokens = GEMMA3_TOKENS_PER_IMAGE
    items = encoder_items(tokens, workload, scheduler)
    n = items * tower.patches
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    reduced = 1 if tp > 1 else 0  # the all-reduce's output beside the partial sum
    h = n * tower.hidden * e
    inner = n * tower.intermediate * e // tp
    pixels = items * tower.channels * tower.image_size**2 * e
    # Embeddings and the layer's input, then what each stage adds.
    attention = 2 * h + h + 4 * h // tp + h + reduced * h
    mlp = 2 * h + 2 * h + 2 * inner
    down = 2 * h + 2 * h + inner + h + reduced * h
    peak = pixels + max(attention, mlp, down)
    outputs = items * tokens * tower.out_hidden * e
    note = (
        f"vLLM's profile run first encodes {items} dummy image{'s' if items > 1 else ''} of "
        f"{tokens} tokens ({tower.patches:,} patches each, {tower.image_size} x "
        f"{tower.image_size} pixels) with the SigLIP vision tower in one batch: a peak of "
        f"{peak / GiB:.2f} GiB, and {(pixels + outputs) / GiB:.2f} GiB kept through the text "
        "forward. Assumed: pan-and-scan off (the processor's default: with it on, vLLM profiles "
        "up to 5 crops per image), FlashAttention for the tower (GPUs of compute capability "
        "8.0 and later; an older GPU runs PyTorch's SDPA), and --limit-mm-per-prompt left at "
        "its default."
    )
    return EncoderProfile(items, tokens, n, peak, pixels + outputs, note)


# The image side Mistral 3's Pixtral tower reads (vision_config.image_size: 1540 in Mistral Small
# 3.1 / 3.2's and Devstral Small 2's config.json; not in the weights).
PIXTRAL_IMAGE_SIZE = 1540
# PyTorch's memory-efficient SDPA pads an attention mask whose rows are not a multiple of this
# many elements (aten/src/ATen/native/transformers/attention.cpp, preprocess_mask).
SDPA_MASK_ALIGNMENT = 8


@dataclass(frozen=True, slots=True)
class PixtralTower:
    """The shapes of Mistral 3's Pixtral vision tower and projector, read from its weights.

    Attributes:
        depth: transformer blocks.
        hidden: the tower's width.
        intermediate: its gated MLP's width (gate and up each).
        patch: pixels per patch side.
        channels: colour channels.
        merge: patches per merged token side (the projector's patch merger).
        out_hidden: the projector's output width (the language model's hidden size).
    """

    depth: int
    hidden: int
    intermediate: int
    patch: int
    channels: int
    merge: int
    out_hidden: int

    @classmethod
    def of(cls, spec: ModelSpec) -> PixtralTower | None:
        """Mistral 3's tower from its inventory (None: not in the inventory)."""
        return spec.cached("pixtral_tower", lambda: cls._read(spec))

    @classmethod
    def _read(cls, spec: ModelSpec) -> PixtralTower | None:
        shapes = {
            t.name.split("model.", 1)[-1]: t.shape for t in spec.tensors if t.role is Role.ENCODER
        }
        needed = (
            "vision_tower.patch_conv.weight",
            "vision_tower.transformer.layers.0.feed_forward.gate_proj.weight",
            "multi_modal_projector.patch_merger.merging_layer.weight",
            "multi_modal_projector.linear_1.weight",
        )
        if not all(name in shapes for name in needed):
            return None
        hidden, channels, patch, _ = shapes["vision_tower.patch_conv.weight"]
        merged = shapes["multi_modal_projector.patch_merger.merging_layer.weight"][1]
        return cls(
            depth=_numbered(shapes, "vision_tower.transformer.layers."),
            hidden=hidden,
            intermediate=shapes["vision_tower.transformer.layers.0.feed_forward.gate_proj.weight"][
                0
            ],
            patch=patch,
            channels=channels,
            merge=math.isqrt(merged // hidden),
            out_hidden=shapes["multi_modal_projector.linear_1.weight"][0],
        )


def pixtral_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """The profile of Mistral 3's Pixtral tower (``mistral3.py``, ``pixtral.py``'s
    ``PixtralHFVisionModel``, read in 0.24.0; None: the tower is not in the inventory).

    The largest image is the tower's square (1540 x 1540 pixels: 110 x 110 patches, merged
    2 x 2 into 55 x 55 = 3,025 image tokens; the row breaks are not embeddings), and the budget
    holds ``max(batched tokens, 3,025) // 3,025`` of them. The tower runs every image as one
    sequence. Without xformers (not a dependency of vLLM since it dropped its xformers
    backend) the images are kept apart by a dense additive mask of (patches x patches) in the
    model's dtype (transformers' ``generate_block_attention_mask``), alive through every
    block, and attention is PyTorch's SDPA with that mask (the memory-efficient kernel: no
    score matrix; it pads a mask whose rows are not a multiple of 8 elements, a second copy
    during the call). q and k are rotated the Hugging Face way (``q * cos + rotate_half(q) *
    sin``: three temporaries of their size at once). The busiest moment of a block past the first is the MLP's second
    projection: the transformer's list keeps the first block's input, beside the block's
    input, the attention output, their sum and its normed copy, the fused gate / up output
    (kept by the MLP's call), its activation and the projection's output (at TP, its
    all-reduced copy); the attention (normed input, qkv, rotated q and k, attention and
    projection outputs) holds less unless the mask is padded. Beside them the pixel values
    and the convolution's outputs (kept for the position ids) stay alive.
    """
    tower = PixtralTower.of(spec)
    if tower is None:
        return None
    side = PIXTRAL_IMAGE_SIZE // tower.patch
    patches = side * side
    tokens = (side // tower.merge) ** 2
    items = encoder_items(tokens, workload, scheduler)
    n = items * patches
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    reduced = 1 if tp > 1 else 0  # the all-reduce's output beside the partial sum
    h = n * tower.hidden * e
    inner = n * tower.intermediate * e // tp
    pixels = items * tower.channels * PIXTRAL_IMAGE_SIZE**2 * e
    mask = n * n * e
    row = -(-n // SDPA_MASK_ALIGNMENT) * SDPA_MASK_ALIGNMENT
    padded = 0 if row == n else n * row * e
    # The first block's input (kept by the list), the block's input and its normed copy, then
    # each stage: rotating k (qkv, rotated q, three temporaries of k: q * cos, rotate_half's
    # cat, its product with sin); SDPA (qkv, rotated q and k, output, padded mask); the output
    # projection; the MLP's second projection (attention output, sum, normed sum, gate / up,
    # activation, output).
    rotary = 3 * h + 3 * h // tp + h // tp + 3 * h // tp
    attention = 3 * h + 3 * h // tp + 2 * h // tp + h // tp + padded
    projection = 3 * h + 6 * h // tp + h + reduced * h
    mlp = 2 * h + 3 * h + 3 * inner + h + reduced * h
    peak = pixels + h + mask + max(rotary, attention, projection, mlp)
    outputs = items * tokens * tower.out_hidden * e
    note = (
        f"vLLM's profile run first encodes {items} dummy image{'s' if items > 1 else ''} of "
        f"{tokens:,} tokens ({patches:,} patches each, {PIXTRAL_IMAGE_SIZE} x "
        f"{PIXTRAL_IMAGE_SIZE} pixels) with the Pixtral vision tower as one sequence: a peak of "
        f"{peak / GiB:.2f} GiB, of which {mask / GiB:.2f} GiB is the dense mask that keeps the "
        f"images apart, and {(pixels + outputs) / GiB:.2f} GiB kept through the text forward. "
        f"Assumed: images of {PIXTRAL_IMAGE_SIZE} pixels a side (Mistral Small 3.1 / 3.2's and "
        "Devstral Small 2's config; this checkpoint's own is not read), no xformers installed "
        "(with it the mask is a block-diagonal bias of no size), the Hugging Face config "
        "(with --config-format mistral vLLM runs Pixtral's own VisionTransformer, not "
        "modelled), and --limit-mm-per-prompt left at its default."
    )
    return EncoderProfile(items, tokens, n, peak, pixels + outputs, note)


# Encoder tensors of audio towers (Gemma 3n / Gemma 4's audio encoder, MiniCPM-o's ``apm``...);
# every other encoder tensor belongs to a vision tower or its projector.
_AUDIO_NAME = re.compile(r"(^|\.)(\w*audio\w*|apm)\.")


def encoder_towers(spec: ModelSpec) -> tuple[str, ...]:
    """The kinds of tower ("vision", "audio") a multimodal checkpoint carries, from its weights
    (empty for a text-only model, or one whose towers are not in the inventory)."""

    def read() -> tuple[str, ...]:
        kinds = {
            "audio" if _AUDIO_NAME.search(t.name) else "vision"
            for t in spec.tensors
            if t.role is Role.ENCODER
        }
        return tuple(k for k in ("vision", "audio") if k in kinds)

    return spec.cached("encoder_towers", read)


def unmodelled_towers(spec: ModelSpec, encoder: EncoderProfile | None) -> tuple[str, ...]:
    """The towers whose share of vLLM's profile run the estimate leaves out.

    Every vLLM V1 read (0.9.2, 0.11.0, 0.22.0, 0.24.0) encodes dummy items with a multimodal
    model's tower before the text forward (``profile_run``), unless --skip-mm-profiling; only
    the towers :func:`encoder_profile` models are counted.
    """
    modelled = ("vision",) if encoder is not None else ()
    return tuple(t for t in encoder_towers(spec) if t not in modelled)


def towers_named(towers: Sequence[str]) -> str:
    """``("vision",)`` -> "vision tower", ``("vision", "audio")`` -> "vision and audio towers"."""
    return f"{' and '.join(towers)} tower{'s' if len(towers) > 1 else ''}"


def unmodelled_note(spec: ModelSpec, towers: Sequence[str], rules: Rules) -> str:
    """What the estimate leaves out of vLLM's profile run, and what that does to the pool."""
    items = " and ".join("images" if t == "vision" else "audio clips" for t in towers)
    scope = (
        f"for {spec.architecture or spec.facts.model_type}"
        if rules.encoder_profile
        else f"under the vLLM {rules.version} rules"
    )
    return (
        f"This model has a {towers_named(towers)}. vLLM's profile run first encodes dummy {items} "
        "of the largest size its processor accepts, as many as its encoder budget holds, and "
        "keeps their outputs through the text forward (gpu_model_runner.profile_run); the "
        f"estimate does not model that {scope}. vLLM's KV pool may be smaller than shown, by "
        "how much is not known here (the tower's peak on those inputs, from a few hundred MiB "
        "to several GiB), and a setup shown starting with little to spare may not start."
    )


# --------------------------------------------------------------------------------------------
# The start-up
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stage:
    """What one GPU (one pipeline stage) holds besides its KV pool, and its KV layout.

    Attributes:
        weights_bytes: model weights (draft or MTP layers included) left on the GPU.
        lora_bytes: LoRA adapter slots.
        activation_bytes: the profile's activation peak.
        non_torch_bytes: memory outside PyTorch's allocator grown during the profile.
        cuda_graph_bytes: the CUDA graphs captured after the profile.
        layout: the KV cache layout of the stage's layers.
    """

    weights_bytes: int
    lora_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    layout: KvLayout

    def available_bytes(self, requested_bytes: int, rules: Rules) -> int:
        """The KV pool out of ``requested_bytes`` ("Available KV cache memory")."""
        held = self.weights_bytes + self.lora_bytes + self.activation_bytes + self.non_torch_bytes
        if rules.cuda_graphs_in_pool:
            held += self.cuda_graph_bytes
        return requested_bytes - held


@dataclass(frozen=True, slots=True)
class Startup:
    """vLLM's start-up on one GPU size.

    Attributes:
        starts: vLLM starts (its memory checks pass).
        message: vLLM's own error when it does not start, else "".
        total_bytes: the GPU's total as CUDA reports it.
        requested_bytes: utilization x total: what vLLM sizes itself to.
        available_bytes: the KV pool of the GPU with the least ("Available KV cache memory").
        blocks: KV block ids of the pool (the same on every GPU).
        pool_tokens: "GPU KV cache size: N tokens".
        max_concurrency: requests of max_model_len tokens the pool holds at once.
        needed_bytes: what one request of max_model_len tokens needs (the start-up check).
        largest_model_len: the longest --max-model-len that starts (0: none).
        used_bytes: what vLLM occupies on the busiest GPU once started: the context, its share
            and CUDA graphs captured outside it.
        unmodelled: the towers ("vision", "audio") whose share of vLLM's profile run is left
            out: where any is, the pool, the concurrency and the longest length are upper
            bounds, and a start is not certain (a refusal is).
    """

    starts: bool
    message: str
    total_bytes: int
    requested_bytes: int
    available_bytes: int
    blocks: int
    pool_tokens: int
    max_concurrency: float
    needed_bytes: int
    largest_model_len: int
    used_bytes: int
    unmodelled: tuple[str, ...] = ()

    @property
    def shortfall_bytes(self) -> int:
        """What the pool lacks for one request (negative: room to spare), or the utilization's
        excess over free memory."""
        free = self.total_bytes - CUDA_CONTEXT_BYTES
        if self.requested_bytes > free:
            return self.requested_bytes - free
        return self.needed_bytes - self.available_bytes


# The longest --max-model-len the search for the largest one looks at past the model's context.
MAX_MODEL_LEN_SEARCH = 1 << 22


@dataclass(frozen=True, slots=True)
class VllmPlan:
    """vLLM's start-up of one model and setting for GPUs of one size class.

    Nothing in it depends on ``--max-model-len``: vLLM profiles ``max_num_batched_tokens``
    tokens whatever the length, so one plan answers for every length.

    Attributes:
        stages: one per pipeline stage.
        context_len: the model's own context (the largest-length search looks up to it).
        scheduler: the scheduler settings in effect.
        rules: the version's rules.
        cuda_graphs: CUDA graphs are captured (no --enforce-eager).
        encoder: the vision encoder's share of the first stage's profile (None: none modelled).
        unmodelled: the model's towers whose share of the profile is not modelled.
    """

    stages: tuple[Stage, ...]
    context_len: int
    scheduler: Scheduler
    rules: Rules
    cuda_graphs: bool = True
    encoder: EncoderProfile | None = None
    unmodelled: tuple[str, ...] = ()

    @property
    def weights_bytes(self) -> int:
        """Weights and LoRA slots on the stage that holds the most."""
        return max(s.weights_bytes + s.lora_bytes for s in self.stages)

    @property
    def activation_bytes(self) -> int:
        """Profile peak, non-torch memory and CUDA graphs on the stage that holds the most."""
        return max(s.activation_bytes + s.non_torch_bytes + s.cuda_graph_bytes for s in self.stages)

    def needed_bytes(self, max_model_len: int, requests: int = 1) -> int:
        """The KV cache ``requests`` requests of ``max_model_len`` tokens need on the busiest GPU,
        as vLLM counts it (whole blocks, windows and states)."""
        tokens = self.scheduler.max_num_batched_tokens
        return requests * max(s.layout.needed_bytes(max_model_len, tokens) for s in self.stages)

    def startup(self, capacity_bytes: int, utilization: float, max_model_len: int) -> Startup:
        """vLLM's start-up on GPUs of ``capacity_bytes`` each, taking ``utilization`` of them,
        with ``--max-model-len max_model_len``."""
        total = cuda_total_bytes(capacity_bytes)
        requested = int(total * utilization)
        tokens = self.scheduler.max_num_batched_tokens
        length = max_model_len
        rules = self.rules
        pools = [s.available_bytes(requested, rules) for s in self.stages]
        blocks = min(s.layout.blocks(p) for s, p in zip(self.stages, pools, strict=True))
        # The stage whose check fails first, else the one with the fewest blocks.
        index = min(
            range(len(self.stages)),
            key=lambda i: (
                pools[i] - self.stages[i].layout.needed_bytes(length, tokens),
                self.stages[i].layout.blocks(pools[i]),
            ),
        )
        stage, available = self.stages[index], pools[index]
        layout = stage.layout
        needed = layout.needed_bytes(length, tokens)
        free = total - CUDA_CONTEXT_BYTES
        message = ""
        if requested > free:
            message = (
                f"Free memory on device ({free / GiB:.2f}/{total / GiB:.2f} GiB) on startup is "
                f"less than desired GPU memory utilization ({utilization:g}, "
                f"{requested / GiB:.2f} GiB). Decrease GPU memory utilization or reduce GPU "
                "memory used by other processes."
            )
        elif layout.groups and available <= 0:
            message = (
                "No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine."
            )
        elif layout.groups and needed > available:
            fitting = layout.largest_model_len(available, length, tokens)
            hint = (
                f"Based on the available memory, the estimated maximum model length is {fitting}. "
                if fitting
                else ""
            )
            message = (
                f"To serve at least one request with the models's max seq len ({length}), "
                f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available "
                f"KV cache memory ({available / GiB:.2f} GiB). {hint}Try increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                "engine."
            )
        elif (
            rules.state_blocks_check
            and self.cuda_graphs
            and any(g.spec.kind == Kind.STATE for s in self.stages for g in s.layout.groups)
            and self.scheduler.max_num_seqs > blocks
        ):
            seqs = self.scheduler.max_num_seqs
            message = (
                f"max_num_seqs ({seqs}) exceeds available Mamba cache blocks ({blocks}). Each "
                "decode sequence requires one Mamba cache block, so CUDA graph capture cannot "
                f"proceed. Please lower max_num_seqs to at most {blocks} or increase "
                "gpu_memory_utilization."
            )
        state_refusal = message.startswith("max_num_seqs")
        largest = 0
        if requested <= free and layout.groups and not state_refusal:
            upper = max(length, self.context_len)
            largest = min(
                s.layout.largest_model_len(p, upper, tokens)
                for s, p in zip(self.stages, pools, strict=True)
            )
        graphs = 0 if rules.cuda_graphs_in_pool else max(s.cuda_graph_bytes for s in self.stages)
        return Startup(
            starts=not message,
            message=message,
            total_bytes=total,
            requested_bytes=requested,
            available_bytes=available,
            blocks=blocks,
            pool_tokens=layout.reported_tokens(blocks, length, tokens, rules),
            max_concurrency=layout.concurrency(blocks, length, tokens),
            needed_bytes=needed,
            largest_model_len=largest,
            used_bytes=CUDA_CONTEXT_BYTES + requested + graphs,
            unmodelled=self.unmodelled,
        )


# --------------------------------------------------------------------------------------------
# Building the plan
# --------------------------------------------------------------------------------------------

# Architectures whose checkpoints carry multi-token-prediction layers vLLM runs as drafts
# (--speculative-config '{"method": "mtp"}').
MTP_TYPES = frozenset(
    {
        "deepseek_v3",
        "deepseek_v32",
        "kimi_k2",
        "glm4_moe",
        "glm_moe_dsa",
        "qwen3_next",
        "qwen3_5",
        "qwen3_5_moe",
        "mimo",
        "mimo_v2_flash",
        "ernie4_5_moe",
        "minimax_m2",
    }
)


@dataclass(frozen=True, slots=True)
class Draft:
    """A draft model's share of one GPU (speculative decoding with a separate model).

    Attributes:
        name: what the user called it.
        weights_bytes: its weights on one GPU.
        specs: its layers' KV cache specs on one GPU (they join the target's pool).
        activation_bytes: its profile forward's peak.
    """

    name: str
    weights_bytes: int
    specs: tuple[LayerKv, ...]
    activation_bytes: int


def pipeline_layers(num_layers: int, pp: int) -> tuple[tuple[int, ...], ...]:
    """The layers of each pipeline stage (vLLM's get_pp_indices: the remainder goes to the
    stages before the last)."""
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    out, start = [], 0
    for n in counts:
        out.append(tuple(range(start, start + n)))
        start += n
    return tuple(out)


def build_plan(
    spec: ModelSpec,
    workload: Workload,
    tensor_bytes: Sequence[tuple[int | None, Role, int]],
    total_bytes: int | None = None,
    *,
    gpu_name: str = "",
    draft: Draft | None = None,
    rules: Rules | None = None,
) -> VllmPlan:
    """vLLM's start-up of ``spec`` under ``workload``, for GPUs like ``total_bytes``.

    Args:
        spec: the model.
        workload: the settings (the engine's knobs among them).
        tensor_bytes: each weight tensor's bytes on one tensor-parallel rank, with its layer
            and role.
        total_bytes: the GPU's capacity, which picks vLLM's scheduler defaults (None: the
            defaults of GPUs under 70 GiB).
        gpu_name: the GPU's name (vLLM keeps A100s on the small defaults).
        draft: the draft model, when speculating with one.
        rules: the rules to follow instead of the workload's version's (a log's own setting,
            e.g. the sampler it found).

    Raises:
        WorkloadError: settings vLLM refuses for this model.
    """
    facts = spec.facts
    rules = rules or RULES[workload.vllm_version]
    scheduler = scheduler_settings(workload, total_bytes, gpu_name)
    _check(spec, workload)
    stages_layers = pipeline_layers(facts.num_layers, workload.pp)
    e = dtypes.DTYPE_BYTES[workload.dtype]
    activation = vllm_profile_peak(
        spec, workload, scheduler.max_num_batched_tokens, scheduler.max_num_seqs, rules.sampler
    )
    encoder = encoder_profile(spec, workload, scheduler, rules)
    offload = round(workload.cpu_offload_gb * GiB)
    stages = []
    for index, layers in enumerate(stages_layers):
        first, last = index == 0, index == len(stages_layers) - 1
        wanted = set(layers)
        weights = 0
        for layer, role, size in tensor_bytes:
            if (
                layer in wanted
                or (layer is None and on_stage(role, first, last))
                or (last and layer is not None and layer >= facts.num_layers)  # MTP layers
            ):
                weights += size
        specs = layer_specs(spec, workload, layers, rules)
        weights += rotary_cache_bytes(spec, workload)
        stage_activation = (
            activation if last else activation - _sampler_share(spec, workload, scheduler, rules)
        )
        if last and workload.mtp:
            mtp_layers = {t.layer for t in spec.mtp_tensors if t.layer is not None}
            if not spec.mtp_tensors:
                # The checkpoint's MTP layers are not in the inventory: one block, a copy of the
                # last decoder layer, its projection of the embedded token and hidden state
                # (2h -> h) and norms; embeddings and head are shared.
                last_layer = facts.num_layers - 1
                weights += sum(size for layer, _, size in tensor_bytes if layer == last_layer)
                weights += 2 * facts.hidden_size * facts.hidden_size * e // workload.tp
            # Each MTP block attends with a KV cache of its own, like the last attention layer.
            attention = (_last_attention_layer(spec),) * max(1, len(mtp_layers))
            specs += layer_specs(spec, workload, attention, rules)
        if first and encoder is not None:
            # The tower runs first; its inputs and outputs stay through the text profile.
            stage_activation = max(stage_activation + encoder.kept_bytes, encoder.peak_bytes)
        if last and draft is not None:
            weights += draft.weights_bytes
            specs += draft.specs
            stage_activation = max(stage_activation, draft.activation_bytes)
        stages.append(
            Stage(
                weights_bytes=max(0, weights - offload),
                lora_bytes=lora_slot_bytes(spec, workload, layers),
                activation_bytes=stage_activation,
                non_torch_bytes=non_torch_bytes(workload),
                cuda_graph_bytes=cuda_graph_bytes(
                    spec, workload, scheduler, rules, _graph_pieces(specs)
                ),
                layout=kv_layout(specs, rules),
            )
        )
    return VllmPlan(
        tuple(stages),
        context_limit(facts, workload),
        scheduler,
        rules,
        cuda_graphs=not workload.enforce_eager,
        encoder=encoder,
        unmodelled=unmodelled_towers(spec, encoder),
    )


def rotary_cache_bytes(spec: ModelSpec, workload: Workload) -> int:
    """The cos / sin table vLLM's rotary embedding keeps beside the weights (cos_sin_cache:
    the positions it covers x rotary dimension, in the model dtype), counted in its "Model
    loading took". A scaled rotary embedding covers the scaled length (YaRN: the original
    context times the factor; linear and dynamic: max_position_embeddings times it), as
    ``core.rope.context_limit`` says."""
    facts = spec.facts
    if facts.model_type in NO_ROTARY:
        return 0
    dim = facts.qk_rope_head_dim if facts.is_mla else facts.head_dim
    return context_limit(facts, workload) * (dim or 0) * dtypes.DTYPE_BYTES[workload.dtype]


def on_stage(role: Role, first: bool, last: bool) -> bool:
    """Where a tensor outside the blocks lives under pipeline parallelism: embeddings (and
    vision towers) on the first stage, the final norm and head on the last (vLLM's and
    SGLang's PPMissingLayer elsewhere)."""
    if role in (Role.EMBEDDING, Role.POSITION, Role.ENCODER):
        return first
    return last


def _sampler_share(spec: ModelSpec, workload: Workload, scheduler: Scheduler, rules: Rules) -> int:
    """What only the last stage's profile adds (the sampler warm-up): earlier stages peak at
    their forward alone."""
    full = vllm_profile_peak(
        spec, workload, scheduler.max_num_batched_tokens, scheduler.max_num_seqs, rules.sampler
    )
    forward = vllm_profile_peak(spec, workload, scheduler.max_num_batched_tokens, 0, rules.sampler)
    return full - forward


def _graph_pieces(specs: Sequence[LayerKv]) -> int:
    """Layers that cut piecewise graphs (attention and state mixers)."""
    return len(specs)


def _last_attention_layer(spec: ModelSpec) -> int:
    kinds = spec.facts.layer_types or (LayerType.FULL,) * spec.facts.num_layers
    return max((i for i, k in enumerate(kinds) if k.has_kv), default=spec.facts.num_layers - 1)


def _check(spec: ModelSpec, workload: Workload) -> None:
    """What vLLM refuses before it starts."""
    facts = spec.facts
    if workload.enable_lora and workload.max_lora_rank not in LORA_RANKS:
        ranks = ", ".join(str(r) for r in LORA_RANKS)
        raise WorkloadError(f"vLLM's --max-lora-rank must be one of {ranks}")
    if workload.mtp and not spec.mtp_tensors and facts.model_type not in MTP_TYPES:
        raise WorkloadError(
            f"{facts.model_type} has no multi-token-prediction layers vLLM runs; speculate "
            "with a draft model (--speculative-model) instead"
        )
    if facts.num_layers < workload.pp:
        raise WorkloadError(
            f"--pp {workload.pp} is more pipeline stages than the model's {facts.num_layers} layers"
        )
    if facts.num_kv_heads % workload.tp and workload.tp % facts.num_kv_heads:
        raise WorkloadError(
            f"vLLM needs --tp {workload.tp} to divide the model's {facts.num_kv_heads} KV heads "
            "or be a multiple of them"
        )


@dataclass(frozen=True, slots=True)
class VllmEngine:
    """vLLM serving one model and setting, on whichever GPU: plans per GPU size class.

    Attributes:
        spec: the model.
        workload: the settings.
        tensor_bytes: each weight tensor's bytes on one tensor-parallel rank (layer, role, bytes).
        draft: the draft model, when speculating with one.
    """

    spec: ModelSpec
    workload: Workload
    tensor_bytes: tuple[tuple[int | None, Role, int], ...]
    draft: Draft | None = None
    _plans: dict[tuple[int, int], VllmPlan] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def plan(self, capacity_bytes: int | None = None, gpu_name: str = "") -> VllmPlan:
        """The start-up plan on GPUs of ``capacity_bytes`` (None: vLLM's small-GPU defaults).

        Raises:
            WorkloadError: settings vLLM refuses for this model.
        """
        total = cuda_total_bytes(capacity_bytes) if capacity_bytes is not None else None
        large = scheduler_settings(self.workload, total, gpu_name)
        key = (large.max_num_seqs, large.max_num_batched_tokens)
        try:
            return self._plans[key]
        except KeyError:
            plan = build_plan(
                self.spec,
                self.workload,
                self.tensor_bytes,
                total,
                gpu_name=gpu_name,
                draft=self.draft,
            )
            self._plans[key] = plan
            return plan

    def startup(
        self, capacity_bytes: int, gpu_name: str = "", max_model_len: int | None = None
    ) -> Startup:
        """vLLM's start-up on GPUs of ``capacity_bytes`` (``--max-model-len``: the workload's
        ``seq`` unless given)."""
        w = self.workload
        plan = self.plan(capacity_bytes, gpu_name)
        return plan.startup(capacity_bytes, w.gpu_memory_utilization, max_model_len or w.seq)
