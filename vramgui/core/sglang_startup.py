"""SGLang's serving arithmetic: whether ``python -m sglang.launch_server`` starts on a GPU, the KV
pool it allocates and how many requests of ``--context-length`` tokens it holds at once.

SGLang sizes itself without a profiling forward (read in the PyPI wheels of 0.4.4.post1,
0.4.9.post2 and 0.5.6; the same in each):

1. ``ModelRunner.init_torch_distributed`` measures the free memory of the GPU after the CUDA
   context and the distributed set-up (``get_available_gpu_memory``: ``torch.cuda.mem_get_info``'s
   free bytes, the smallest of the ranks). This is the ``total_gpu_memory`` of step 3, logged as
   "Load weight begin. avail mem=".
2. It loads the weights ("Load weight end. ... mem usage=").
3. ``ModelRunner.profile_max_num_token`` measures the free memory again and keeps
   ``rest = available_after_load - total_gpu_memory x (1 - mem_fraction_static)``: weights and
   KV pool together take ``mem_fraction_static`` of the free memory of step 1, and what it
   leaves is for activations and CUDA graphs, which SGLang does not profile. The pool holds
   ``rest // cell_size`` tokens, cut to whole pages (``--page-size``, 1 by default), where
   ``cell_size`` is one token's K and V over the layers of the rank: ``max(1, kv_heads // tp) x
   head_dim x 2`` elements per layer, or MLA's compressed ``kv_lora_rank + qk_rope_head_dim``.
   Sliding-window layers keep a full-length cache: 0.5.6 turns its hybrid SWA pool off for the
   models that have one (Gemma 2 / 3, GPT-OSS, OLMo 2: ``server_args.
   _handle_model_specific_adjustments``) and Llama 4's needs ``--hybrid-kvcache-ratio``. Models
   with Mamba or linear-attention layers count only their attention layers and first give the
   states ``mamba_full_memory_ratio / (1 + ratio)`` of ``rest`` (``handle_max_mamba_cache``, 0.5.6).
4. ``init_memory_pool`` refuses a pool of no tokens: "Not enough memory. Please try to increase
   --mem-fraction-static." A pool shorter than ``--context-length`` does not stop the server:
   ``TpModelWorker`` caps a request at ``min(context_len, max_total_num_tokens) - 1`` tokens and
   rejects longer inputs ("Input length (N tokens) exceeds the maximum allowed length").

The default ``--mem-fraction-static`` is the part that changed between versions
(``ServerArgs.__post_init__``, from 0.5 ``_handle_gpu_memory_settings``): :func:`default_mem_fraction`
follows the version named (``--sglang-version``; :data:`SGLANG_RULES`). Everything here is
per GPU: tensor-parallel ranks are alike, a pipeline stage is one GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from vramgui.core.activations import vllm_profile_peak
from vramgui.core.errors import Setting, WorkloadError, phrase
from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.parallel import more_stages_than_layers
from vramgui.core.rope import context_limit
from vramgui.core.units import GiB, MiB
from vramgui.core.vllm.kv_layout import Kind, layer_specs
from vramgui.core.vllm.profile import CUDA_CONTEXT_BYTES, NON_TORCH_TP_BYTES, cuda_total_bytes
from vramgui.core.vllm.startup import on_stage, pipeline_layers, rotary_cache_bytes
from vramgui.core.workload import SGLANG_VERSIONS, Workload

# server_args.py's default when the GPU's memory is not known (0.4.9, 0.5.6), and 0.4.4's for one
# GPU.
FALLBACK_MEM_FRACTION = 0.88
# ServerArgs.mamba_full_memory_ratio (0.5.6): the states' share of the pool against the KV cache.
MAMBA_FULL_MEMORY_RATIO = 0.9
# The memory used before the weights load, beside CUDA's own reservation: the CUDA context (the
# figure vLLM's estimate uses, measured on vLLM's logs) and, with tensor parallelism, the
# communication buffers set up by init_distributed_environment (vLLM's figure for the same
# buffers). SGLang logs the free memory after them as "Load weight begin. avail mem=".
PRELOAD_BYTES = CUDA_CONTEXT_BYTES
PRELOAD_TP_BYTES = NON_TORCH_TP_BYTES
# The largest GPU the search for the one a setup needs looks at (64 TiB).
LARGEST_GPU_MIB = 1 << 26

_T = TypeVar("_T")

# How a version sets its default --mem-fraction-static (SglangRules.mem_fraction_rule).
BY_TP = "tp"  # by tensor-parallel size alone
RESERVE_BY_GPU = "gpu"  # a reserve by GPU size
RESERVE_BY_SETTINGS = "settings"  # a reserve from the chunked prefill and CUDA graph sizes


@dataclass(frozen=True, slots=True, kw_only=True)
class SglangRules:
    """What one SGLang version's ``server_args.py`` defaults to, where the versions read differ.

    GPU sizes are nvidia-smi's totals in MiB. A tier ``(below_mib, value)`` holds for GPUs under
    ``below_mib`` (None: any GPU); the first tier that holds is the one taken.

    Attributes:
        version: the version these rules follow.
        chunk_unknown_gpu: ``--chunked-prefill-size`` when the GPU's memory is not known.
        chunk_by_gpu: ``--chunked-prefill-size`` tiers.
        mem_fraction_rule: how ``--mem-fraction-static`` is set: :data:`BY_TP`,
            :data:`RESERVE_BY_GPU` or :data:`RESERVE_BY_SETTINGS`.
        fraction_by_tp: (at least this --tp, fraction), largest first; smaller --tp takes
            :data:`FALLBACK_MEM_FRACTION` (:data:`BY_TP`).
        reserve_by_gpu: tiers of (GiB, GPUs of tp x pp per further GiB; 0: none) kept out of the
            fraction (:data:`RESERVE_BY_GPU`).
        graph_bs_by_gpu: ``--cuda-graph-max-bs`` tiers, (under --tp 4, from --tp 4), which the
            reserve of :data:`RESERVE_BY_SETTINGS` counts.
        reserve_floor_above_mib: GPUs over this size keep at least 10 GiB out of the fraction
            (:data:`RESERVE_BY_SETTINGS`; 0: no floor).
        multimodal_factor: what the fraction is multiplied by for a multimodal model.
    """

    version: str
    chunk_unknown_gpu: int
    chunk_by_gpu: tuple[tuple[int | None, int], ...]
    mem_fraction_rule: str
    fraction_by_tp: tuple[tuple[int, float], ...] = ()
    reserve_by_gpu: tuple[tuple[int | None, tuple[float, int]], ...] = ()
    graph_bs_by_gpu: tuple[tuple[int | None, tuple[int, int]], ...] = ()
    reserve_floor_above_mib: int = 0
    multimodal_factor: float


SGLANG_RULES = {
    rules.version: rules
    for rules in (
        # 0.4.0 to 0.4.8 (read in 0.4.4.post1).
        SglangRules(
            version="0.4.4",
            chunk_unknown_gpu=8192,
            chunk_by_gpu=((25_000, 2048), (None, 8192)),
            mem_fraction_rule=BY_TP,
            fraction_by_tp=((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)),
            multimodal_factor=1.0,
        ),
        # 0.4.9 and 0.4.10 (read in 0.4.9.post2).
        SglangRules(
            version="0.4.9",
            chunk_unknown_gpu=4096,
            chunk_by_gpu=((35 * 1024, 2048), (160 * 1024, 8192), (None, 16384)),
            mem_fraction_rule=RESERVE_BY_GPU,
            reserve_by_gpu=(
                (35 * 1024, (2.8, 10)),
                (90 * 1024, (9.5, 2)),
                (160 * 1024, (12, 2)),
                (None, (32, 0)),
            ),
            multimodal_factor=0.90,
        ),
        # 0.5 (read in 0.5.6: _handle_gpu_memory_settings).
        SglangRules(
            version="0.5.6",
            chunk_unknown_gpu=4096,
            chunk_by_gpu=(
                (35 * 1024, 2048),  # T4, 4080; A10, 4090, 5090
                (60 * 1024, 4096),  # A100 40GB, L40
                (160 * 1024, 8192),  # H100, A100 80GB, H20, H200
                (None, 16384),  # B200, MI300
            ),
            mem_fraction_rule=RESERVE_BY_SETTINGS,
            graph_bs_by_gpu=(
                (20 * 1024, (8, 8)),
                (35 * 1024, (24, 80)),
                (60 * 1024, (32, 160)),
                (160 * 1024, (256, 512)),
                (None, (512, 512)),
            ),
            reserve_floor_above_mib=60 * 1024,
            multimodal_factor=0.95,
        ),
    )
}
if set(SGLANG_RULES) != set(SGLANG_VERSIONS):  # pragma: no cover - kept in step with workload.py
    raise AssertionError("SGLANG_RULES and workload.SGLANG_VERSIONS must name the same versions")
# The GPU sizes where a version's defaults change: between two of them a larger GPU only gains.
SIZE_EDGES_MIB = tuple(
    sorted(
        {
            below
            for r in SGLANG_RULES.values()
            for tiers in (r.chunk_by_gpu, r.reserve_by_gpu, r.graph_bs_by_gpu)
            for below, _ in tiers
            if below is not None
        }
        | {r.reserve_floor_above_mib for r in SGLANG_RULES.values() if r.reserve_floor_above_mib}
    )
)
# The chunked prefill sizes SGLang defaults to, on some GPU or other.
CHUNK_SIZES = tuple(
    sorted(
        {r.chunk_unknown_gpu for r in SGLANG_RULES.values()}
        | {size for r in SGLANG_RULES.values() for _, size in r.chunk_by_gpu}
    )
)


def _tier(tiers: Sequence[tuple[int | None, _T]], gpu_mem_mib: int) -> _T:
    """The value of the first tier whose bound ``gpu_mem_mib`` is under."""
    return next(value for below, value in tiers if below is None or gpu_mem_mib < below)


def chunked_prefill_size(version: str, gpu_mem_mib: int | None) -> int:
    """SGLang's default ``--chunked-prefill-size``: the most tokens one forward runs."""
    rules = SGLANG_RULES[version]
    if gpu_mem_mib is None:
        return rules.chunk_unknown_gpu
    return _tier(rules.chunk_by_gpu, gpu_mem_mib)


def default_mem_fraction(
    version: str, gpu_mem_mib: int | None, tp: int, pp: int, multimodal: bool
) -> float:
    """SGLang's default ``--mem-fraction-static`` for a GPU of ``gpu_mem_mib`` MiB.

    - 0.4.4 (0.4.0 to 0.4.8): by tensor-parallel size alone, 0.88 for one GPU down to 0.79 for 16.
    - 0.4.9 (0.4.9, 0.4.10): ``(gpu_mem - reserved) / gpu_mem`` with ``reserved`` by GPU size,
      ``(2.8 + tp x pp / 10)`` GiB under 35 GiB, ``9.5 + tp x pp / 2`` under 90, 12 + tp x pp / 2
      under 160, 32 above; multimodal models x 0.9.
    - 0.5.6: ``reserved = 512 MiB + 1.5 MiB x max(chunked prefill, 2048) + 2 MiB x CUDA graph
      max batch + tp x pp / 8 GiB``, at least 10 GiB on GPUs over 60 GiB; multimodal models x
      0.95 and a factor of the vision tower's size (0.8 to 1.05, not read here: 1).
    """
    rules = SGLANG_RULES[version]
    parallel = tp * pp
    if rules.mem_fraction_rule == BY_TP:
        for size, fraction in rules.fraction_by_tp:
            if tp >= size:
                return fraction
        return FALLBACK_MEM_FRACTION
    if gpu_mem_mib is None:
        fraction = FALLBACK_MEM_FRACTION
    elif gpu_mem_mib <= 0:
        return 0.0
    elif rules.mem_fraction_rule == RESERVE_BY_GPU:
        gib, per_gib = _tier(rules.reserve_by_gpu, gpu_mem_mib)
        reserved = (gib + (parallel / per_gib if per_gib else 0)) * 1024
        fraction = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
    else:
        chunked = _tier(rules.chunk_by_gpu, gpu_mem_mib)
        graph_bs = _tier(rules.graph_bs_by_gpu, gpu_mem_mib)[tp >= 4]
        reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + parallel / 8 * 1024
        if gpu_mem_mib > rules.reserve_floor_above_mib:
            reserved = max(reserved, 10 * 1024)
        fraction = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
    if multimodal:
        fraction *= rules.multimodal_factor
    return fraction


@dataclass(frozen=True, slots=True)
class SglangStage:
    """What one pipeline stage's GPU holds besides the pool.

    Attributes:
        weights_bytes: the weights loaded ("Load weight end. ... mem usage="), the rotary table
            included.
        cell_bytes: one token's K and V over the stage's attention layers (``cell_size``).
        state_bytes: one request's Mamba / linear-attention states over the stage's layers.
    """

    weights_bytes: int
    cell_bytes: int
    state_bytes: int


@dataclass(frozen=True, slots=True)
class SglangStartup:
    """SGLang's start-up on one GPU size.

    Attributes:
        starts: SGLang starts (its pool holds at least one token).
        serves: it also holds a request of ``--context-length`` tokens whole (else it starts but
            rejects the longer requests).
        message: SGLang's own error when it does not start, or what it refuses once started.
        total_bytes: the GPU's total as CUDA reports it.
        free_bytes: the free memory before the weights load ("Load weight begin. avail mem=").
        mem_fraction_static: the fraction SGLang takes (the user's or its default).
        requested_bytes: ``mem_fraction_static`` x ``free_bytes``: weights and pool together.
        available_bytes: the pool ("KV Cache is allocated": K size + V size); negative when the
            weights leave none.
        pool_tokens: ``max_total_num_tokens`` (the smallest of the stages).
        max_concurrency: requests of ``--context-length`` tokens the pool holds at once.
        needed_bytes: the pool one request of ``--context-length`` tokens takes.
        largest_context: the longest ``--context-length`` whose requests the pool holds whole
            (0: SGLang does not start).
        max_running_requests: SGLang's default ``max_running_requests``: half the pool's tokens,
            at most its request table (2048 to 4096 slots).
        state_requests: requests whose Mamba / linear-attention states the pool keeps
            (``max_mamba_cache_size``; 0 without such layers).
        chunked_prefill_size: the most tokens one forward runs (the default for the GPU).
        activation_bytes: the activation peak of a forward of ``chunked_prefill_size`` tokens
            (approximate: the profile vLLM's estimate uses); it must fit the reserve
            ``mem_fraction_static`` leaves, which SGLang never checks at start-up.
        used_bytes: what SGLang holds on the busiest GPU once the pool is allocated: CUDA's
            reservation and context, the distributed set-up, weights and pool. Activations and
            CUDA graphs come out of the rest.
    """

    starts: bool
    serves: bool
    message: str
    total_bytes: int
    free_bytes: int
    mem_fraction_static: float
    requested_bytes: int
    available_bytes: int
    pool_tokens: int
    max_concurrency: float
    needed_bytes: int
    largest_context: int
    max_running_requests: int
    state_requests: int
    chunked_prefill_size: int
    activation_bytes: int
    used_bytes: int

    @property
    def reserve_bytes(self) -> int:
        """What ``mem_fraction_static`` leaves of the free memory for activations and CUDA
        graphs."""
        return self.free_bytes - self.requested_bytes

    @property
    def shortfall_bytes(self) -> int:
        """What the pool lacks for one request of ``--context-length`` (negative: room left)."""
        return self.needed_bytes - self.available_bytes


@dataclass(frozen=True, slots=True)
class SglangPlan:
    """SGLang's start-up for one model and setting, before the GPU is known.

    Attributes:
        stages: each pipeline stage's weights and cells.
        context_len: the model's own context (the longest ``--context-length`` SGLang takes
            without ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN``).
        multimodal: the checkpoint has a vision or audio tower (a lower default fraction).
        activations: the activation peak of one forward, by its tokens (each chunked prefill
            size SGLang defaults to).
    """

    stages: tuple[SglangStage, ...]
    context_len: int
    multimodal: bool
    activations: tuple[tuple[int, int], ...]

    def activation_bytes(self, tokens: int) -> int:
        """The activation peak of a forward of ``tokens`` tokens."""
        return dict(self.activations)[tokens]

    @property
    def weights_bytes(self) -> int:
        """The weights of the busiest stage."""
        return max(s.weights_bytes for s in self.stages)

    def mem_fraction(self, workload: Workload, capacity_bytes: int | None) -> float:
        """The user's ``--mem-fraction-static``, else the version's default for the GPU."""
        if workload.mem_fraction_static is not None:
            return workload.mem_fraction_static
        mib = capacity_bytes // MiB if capacity_bytes is not None else None
        return default_mem_fraction(
            workload.sglang_version, mib, workload.tp, workload.pp, self.multimodal
        )

    def startup(
        self, workload: Workload, capacity_bytes: int, context_length: int
    ) -> SglangStartup:
        """SGLang's start-up on GPUs of ``capacity_bytes`` (as nvidia-smi counts them) with
        ``--context-length context_length``."""
        total = cuda_total_bytes(capacity_bytes)
        free = max(0, total - preload_bytes(workload))
        fraction = self.mem_fraction(workload, capacity_bytes)
        reserve = free * (1 - fraction)
        pools = []
        for stage in self.stages:
            rest = (free - stage.weights_bytes) - reserve
            states = 0
            if stage.state_bytes and rest > 0:
                share = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
                states = int(share // stage.state_bytes)
                rest -= states * stage.state_bytes
            tokens = int(rest // stage.cell_bytes) if rest > 0 and stage.cell_bytes else 0
            pools.append((tokens, rest, stage, states))
        tokens, rest, stage, states = min(pools, key=lambda p: (p[0], p[1]))
        pool_bytes = tokens * stage.cell_bytes if tokens > 0 else math.floor(rest)
        needed = context_length * stage.cell_bytes
        loads = all(s.weights_bytes <= free for s in self.stages)
        starts = tokens > 0 and loads
        serves = starts and tokens >= context_length
        if not loads:
            message = (
                f"CUDA out of memory while loading the weights: {self.weights_bytes / GiB:.2f} GiB "
                f"do not fit the {free / GiB:.2f} GiB free."
            )
        elif tokens <= 0:
            message = (
                "Not enough memory. Please try to increase --mem-fraction-static. Current "
                f"value: mem_fraction_static={fraction:g}"
            )
        elif not serves:
            message = (
                f"SGLang starts, but its KV pool holds {tokens:,} tokens, fewer than "
                f"--context-length {context_length:,}: it rejects requests longer than "
                f'{max(tokens - 6, 0):,} input tokens ("Input length (N tokens) exceeds the '
                'maximum allowed length").'
            )
        else:
            message = ""
        largest = min(tokens, self.context_len) if starts else 0
        table = min(max(int(tokens / max(context_length, 1) * 512), 2048), 4096)
        mib = capacity_bytes // MiB
        chunk = chunked_prefill_size(workload.sglang_version, mib)
        return SglangStartup(
            starts=starts,
            serves=serves,
            message=message,
            total_bytes=total,
            free_bytes=free,
            mem_fraction_static=fraction,
            requested_bytes=int(free * fraction),
            available_bytes=pool_bytes,
            pool_tokens=max(tokens, 0),
            max_concurrency=max(tokens, 0) / max(context_length, 1),
            needed_bytes=needed,
            largest_context=largest,
            max_running_requests=max(0, min(tokens // 2, table)),
            state_requests=states,
            chunked_prefill_size=chunk,
            activation_bytes=self.activation_bytes(chunk),
            used_bytes=capacity_bytes
            - total
            + preload_bytes(workload)
            + stage.weights_bytes
            + max(pool_bytes, 0)
            + states * stage.state_bytes,
        )

    def needed_gpu_bytes(self, workload: Workload, pool_bytes: int, states: int = 0) -> int:
        """The smallest GPU (as nvidia-smi counts it, in whole MiB) on which SGLang holds the
        busiest stage's weights and ``pool_bytes`` of pool (and the states of ``states``
        requests) within its fraction of the free memory, and the activations of a chunked
        prefill in the rest.

        SGLang's defaults change at a few GPU sizes (:data:`SIZE_EDGES_MIB`); between two of
        them a larger GPU only gains, so each span is bisected, smallest span first.
        """
        held = max(s.weights_bytes + pool_bytes + states * s.state_bytes for s in self.stages)

        def enough(mib: int) -> bool:
            size = mib * MiB
            fraction = self.mem_fraction(workload, size)
            free = cuda_total_bytes(size) - preload_bytes(workload)
            if fraction <= 0 or free <= 0 or free * fraction < held:
                return False
            if fraction >= 1:  # nothing is left for activations whatever the GPU
                return True
            chunk = chunked_prefill_size(workload.sglang_version, mib)
            return free * (1 - fraction) >= self.activation_bytes(chunk)

        lows = (1, *SIZE_EDGES_MIB)
        highs = (*SIZE_EDGES_MIB, LARGEST_GPU_MIB)
        for start, stop in zip(lows, highs, strict=True):
            if not enough(stop - 1):
                continue
            low, high = start, stop - 1  # the smallest that is enough lies in [low, high]
            while low < high:
                mid = (low + high) // 2
                if enough(mid):
                    high = mid
                else:
                    low = mid + 1
            return low * MiB
        return LARGEST_GPU_MIB * MiB


def preload_bytes(workload: Workload) -> int:
    """What the GPU holds before the weights load, beyond CUDA's reservation."""
    return PRELOAD_BYTES + (PRELOAD_TP_BYTES if workload.tp > 1 else 0)


def build_plan(
    spec: ModelSpec,
    workload: Workload,
    tensor_bytes: Sequence[tuple[int | None, Role, int]],
) -> SglangPlan:
    """SGLang's start-up arithmetic for ``spec`` under ``workload``, on any GPU.

    Raises:
        WorkloadError: settings SGLang refuses for this model.
    """
    facts = spec.facts
    _check(spec, workload)
    stages = []
    rotary = rotary_cache_bytes(spec, workload)
    layers_of = pipeline_layers(facts.num_layers, workload.pp)
    plain = workload.with_(speculative="none", mtp=False, enable_lora=False)
    for index, layers in enumerate(layers_of):
        first, last = index == 0, index == len(layers_of) - 1
        members = set(layers)
        weights = rotary + sum(
            size
            for layer, role, size in tensor_bytes
            if (layer in members if layer is not None else on_stage(role, first, last))
        )
        specs = layer_specs(spec, plain, layers)
        cell = sum(s.token_bytes for s in specs if s.kind != Kind.STATE)
        state = sum(s.state_bytes for s in specs if s.kind == Kind.STATE)
        stages.append(SglangStage(weights, cell, state))
    multimodal = any(t.role is Role.ENCODER for t in spec.tensors)
    activations = tuple((n, vllm_profile_peak(spec, plain, n, 1)) for n in CHUNK_SIZES)
    return SglangPlan(tuple(stages), context_limit(facts, workload), multimodal, activations)


def _check(spec: ModelSpec, workload: Workload) -> None:
    """What SGLang refuses before it starts."""
    facts = spec.facts
    if facts.num_layers < workload.pp:
        raise WorkloadError(more_stages_than_layers(workload.pp, facts.num_layers))
    kinds = facts.layer_types or (LayerType.FULL,) * facts.num_layers
    if not any(kind.has_kv for kind in kinds):
        raise WorkloadError(
            f"{facts.model_type} keeps no attention KV cache; SGLang's token pool sizes "
            "attention layers"
        )


def notes(spec: ModelSpec, workload: Workload) -> tuple[str, ...]:
    """What the user should know about an SGLang estimate of ``spec``."""
    out = []
    facts = spec.facts
    kinds = facts.layer_types or (LayerType.FULL,) * facts.num_layers
    if any(kind in (LayerType.SLIDING, LayerType.CHUNKED) for kind in kinds):
        out.append(
            "SGLang keeps a full-length K/V cache for sliding-window and chunked layers (its "
            "hybrid SWA pool is off for this model by default), so the window does not shrink "
            "the pool's cost per token."
        )
    if any(not kind.has_kv and kind is not LayerType.NONE for kind in kinds):
        out.append(
            "Approximate: SGLang gives the Mamba / linear-attention states a share of the pool "
            f"(mamba_full_memory_ratio {MAMBA_FULL_MEMORY_RATIO:g}); their sizes per request "
            "follow vLLM's layouts, which SGLang's may not match."
        )
    if facts.model_type == "deepseek_v32":
        out.append(
            "Approximate: DeepSeek V3.2's indexer keys, which SGLang adds to each token's cell, "
            "are not counted."
        )
    if any(t.role is Role.ENCODER for t in spec.tensors) and workload.mem_fraction_static is None:
        out.append(
            "Approximate: SGLang lowers its default --mem-fraction-static for multimodal models "
            "by the vision tower's size, counted here as a tower of ViT-L's."
        )
    ignored: list[str | Setting] = [
        name
        for name, on in (
            (Setting("enable_lora"), workload.enable_lora),
            ("speculative decoding", workload.speculative != "none" or workload.mtp),
            (Setting("cpu_offload_gb"), workload.cpu_offload_gb > 0),
        )
        if on
    ]
    if ignored:
        listed: list[str | Setting] = [ignored[0]]
        for name in ignored[1:]:
            listed += [", ", name]
        out.append(phrase("Not modelled for SGLang and left out: ", *listed, "."))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SglangEngine:
    """SGLang serving one model and setting, on whichever GPU.

    Attributes:
        spec: the model.
        workload: the settings.
        tensor_bytes: each weight tensor's bytes on one tensor-parallel rank (layer, role, bytes).
    """

    spec: ModelSpec
    workload: Workload
    tensor_bytes: tuple[tuple[int | None, Role, int], ...]
    _plan: list[SglangPlan] = field(default_factory=list, init=False, repr=False, compare=False)

    def plan(self) -> SglangPlan:
        """The start-up arithmetic (built once).

        Raises:
            WorkloadError: settings SGLang refuses for this model.
        """
        if not self._plan:
            self._plan.append(build_plan(self.spec, self.workload, self.tensor_bytes))
        return self._plan[0]

    def startup(
        self, capacity_bytes: int, gpu_name: str = "", context_length: int | None = None
    ) -> SglangStartup:
        """SGLang's start-up on GPUs of ``capacity_bytes`` (``--context-length``: the workload's
        ``seq`` unless given). ``gpu_name`` is unused: SGLang's defaults go by memory alone."""
        del gpu_name
        return self.plan().startup(
            self.workload, capacity_bytes, context_length or self.workload.seq
        )

    def needed_gpu_bytes(self, context_length: int | None = None) -> int:
        """The smallest GPU on which SGLang starts and holds one request of
        ``--context-length`` tokens (the workload's ``seq`` unless given)."""
        plan = self.plan()
        tokens = context_length or self.workload.seq
        cell = max(s.cell_bytes for s in plan.stages)
        state = max(s.state_bytes for s in plan.stages)
        return plan.needed_gpu_bytes(self.workload, tokens * cell + state)
