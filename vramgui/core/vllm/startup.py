"""vLLM's serving arithmetic: whether ``vllm serve`` starts on a GPU, the KV pool it allocates,
and how many requests of ``--max-model-len`` tokens it holds at once.

vLLM sizes itself at start-up (``gpu_worker.determine_available_memory``): it loads the weights,
runs one profiling forward (:mod:`vramgui.core.vllm.profile`, with the vision encoder first for
multimodal models: :mod:`vramgui.core.vllm.encoders`), and keeps for the KV pool
``gpu_memory_utilization x total`` minus weights, peak activations and non-torch memory, and,
from v0.20.2, minus the CUDA graphs it is about to capture (before, they are captured after the
pool, in the margin the utilization leaves). The pool is cut into blocks as
:mod:`vramgui.core.vllm.kv_layout` describes. Start-up fails (``check_enough_kv_cache_memory``)
when the pool cannot hold one request of ``max_model_len`` tokens; vLLM's message names the
longest length that would fit.

What changed between the versions read is :mod:`vramgui.core.vllm.rules`. Everything here is per
GPU: tensor-parallel ranks are alike, a pipeline stage is one GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vramgui.core import dtypes
from vramgui.core.activations import vllm_profile_peak
from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.model import LayerType, ModelSpec, Role
from vramgui.core.parallel import more_stages_than_layers
from vramgui.core.rope import NO_ROTARY, context_limit
from vramgui.core.units import GiB
from vramgui.core.vllm.encoders import EncoderProfile, encoder_profile, unmodelled_towers
from vramgui.core.vllm.kv_layout import Kind, KvLayout, LayerKv, kv_layout, layer_specs
from vramgui.core.vllm.profile import (
    CUDA_CONTEXT_BYTES,
    LORA_RANKS,
    Scheduler,
    cuda_graph_bytes,
    cuda_total_bytes,
    lora_slot_bytes,
    non_torch_bytes,
    sampler_share,
    scheduler_settings,
)
from vramgui.core.vllm.rules import RULES, Rules
from vramgui.core.workload import Workload


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
            activation if last else activation - sampler_share(spec, workload, scheduler, rules)
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
        raise WorkloadError(
            Message(
                "vLLM's {rank} must be one of {ranks}", rank=Setting("max_lora_rank"), ranks=ranks
            )
        )
    if workload.mtp and not spec.mtp_tensors and facts.model_type not in MTP_TYPES:
        raise WorkloadError(
            Message(
                "{kind} has no multi-token-prediction layers vLLM runs; speculate with a draft "
                "model ({draft}) instead",
                kind=facts.model_type,
                draft=Setting("draft_model"),
            )
        )
    if facts.num_layers < workload.pp:
        raise WorkloadError(more_stages_than_layers(workload.pp, facts.num_layers))
    if facts.num_kv_heads % workload.tp and workload.tp % facts.num_kv_heads:
        raise WorkloadError(
            Message(
                "vLLM needs {tp} to divide the model's {kv_heads} KV heads or be a multiple of them",
                tp=Setting("tp", workload.tp),
                kv_heads=facts.num_kv_heads,
            )
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
