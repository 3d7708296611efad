"""How multi-GPU training divides each memory component per GPU.

Data parallel (DDP) replicates everything and adds gradient buckets; DeepSpeed ZeRO-1/2/3 and
FSDP full shard divide optimizer states, then gradients, then parameters over the data-parallel
ranks (and hold gathered parameters in flight); tensor parallel divides the weights of attention,
MLP and the (vocabulary-parallel) embedding and head, and the activations inside a block;
pipeline parallel gives each stage its layers and keeps micro-batches in flight (1F1B: as many
as there are stages on the first one). CPU offload moves optimizer states (and with ZeRO-3 the
parameters) to host RAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.model import ModelSpec, Role, Tensor
from vramgui.core.workload import Workload

# PyTorch DDP: gradients are reduced in buckets of this size (bucket_cap_mb=25); with the default
# gradient_as_bucket_view=False the buckets are flat copies of every gradient, kept between steps.
DDP_BUCKET_BYTES = 25 * 1024 * 1024
# DeepSpeed defaults (elements): reduce_bucket_size, stage3_prefetch_bucket_size,
# stage3_max_live_parameters.
ZERO_REDUCE_BUCKET = 500_000_000
ZERO3_PREFETCH = 50_000_000
ZERO3_MAX_LIVE = 1_000_000_000

# Weights tensor parallelism splits (column / row parallel linears, vocabulary-parallel tables).
_TP_SPLIT_ROLES = frozenset(
    {Role.ATTENTION, Role.MLP, Role.EXPERT, Role.SHARED_EXPERT, Role.EMBEDDING, Role.HEAD}
)


def more_stages_than_layers(pp: int, layers: int) -> Message:
    """What every engine says of more pipeline stages than the model has layers."""
    return Message(
        "{pp} is more pipeline stages than the model's {layers} layers",
        pp=Setting("pp", pp),
        layers=layers,
    )


@dataclass(frozen=True, slots=True)
class ParallelPlan:
    """The division of work one GPU sees.

    Attributes:
        dp: data-parallel ranks; tp: tensor-parallel degree; pp: pipeline stages.
        state_shards: ranks the optimizer states (and fp32 master weights) are divided over.
        grad_shards: ranks the gradients are divided over.
        param_shards: ranks the parameters are divided over.
        offload_states: optimizer states (and master weights) live in host RAM.
        offload_params: parameters live in host RAM (ZeRO-3 offload).
        notes: what the plan assumed.
    """

    dp: int
    tp: int
    pp: int
    state_shards: int
    grad_shards: int
    param_shards: int
    offload_states: bool
    offload_params: bool
    notes: tuple[str, ...] = ()

    @property
    def sharded(self) -> bool:
        return self.param_shards > 1 or self.grad_shards > 1 or self.state_shards > 1


def plan(spec: ModelSpec, workload: Workload) -> ParallelPlan:
    """Check the parallel settings against the model and say how each component divides.

    Raises:
        WorkloadError: tp does not divide the heads, more stages than layers, or sharding over
            a single data-parallel rank (which divides nothing).
    """
    f = spec.facts
    tp, pp, dp = workload.tp, workload.pp, workload.data_parallel
    if tp > 1:
        if f.num_heads % tp or f.num_kv_heads % tp:
            raise WorkloadError(
                Message(
                    "{tp} must divide the {heads} attention heads and {kv_heads} key/value heads "
                    "of {name}",
                    tp=Setting("tp", tp),
                    heads=f.num_heads,
                    kv_heads=f.num_kv_heads,
                    name=spec.name or "this model",
                )
            )
        if f.intermediate_size % tp:
            raise WorkloadError(
                Message(
                    "{tp} must divide the MLP width {width}",
                    tp=Setting("tp", tp),
                    width=f.intermediate_size,
                )
            )
    if pp > f.num_layers:
        raise WorkloadError(more_stages_than_layers(pp, f.num_layers))
    sharding = workload.zero > 0 or workload.fsdp
    if sharding and dp == 1 and not workload.cpu_offload:
        what = f"ZeRO-{workload.zero}" if workload.zero else "FSDP"
        raise WorkloadError(
            Message(
                "{what} shards over data-parallel GPUs, and with {gpus} GPU(s) (tp {tp} x pp "
                "{pp}) there is one data-parallel rank: nothing is divided; add {more}, or "
                "{offload} to move states to host RAM",
                what=what,
                gpus=workload.gpus,
                tp=tp,
                pp=pp,
                more=Setting("gpus"),
                offload=Setting("cpu_offload"),
            )
        )
    notes: list[str] = []
    if workload.fsdp:
        states = grads = params = dp
        notes.append("FSDP full shard: one decoder layer gathered in flight plus one prefetched")
    else:
        states = dp if workload.zero >= 1 else 1
        grads = dp if workload.zero >= 2 else 1
        params = dp if workload.zero >= 3 else 1
    if dp > 1 and not sharding:
        notes.append(
            "DDP keeps flat gradient buckets (gradient_as_bucket_view=False, the default): "
            "a second copy of every gradient"
        )
    offload_params = workload.cpu_offload and (workload.zero == 3 or workload.fsdp)
    return ParallelPlan(
        dp=dp,
        tp=tp,
        pp=pp,
        state_shards=states,
        grad_shards=grads,
        param_shards=params,
        offload_states=workload.cpu_offload,
        offload_params=offload_params,
        notes=tuple(notes),
    )


def tp_share(t: Tensor, tp: int) -> float:
    """Fraction of a tensor one tensor-parallel rank holds (norms and row-parallel biases stay whole)."""
    if tp == 1:
        return 1.0
    if t.role in _TP_SPLIT_ROLES and (not t.is_bias or t.module not in ("o_proj", "down_proj")):
        return 1.0 / tp
    return 1.0


def stage_layers(num_layers: int, pp: int) -> tuple[range, ...]:
    """The layers of each pipeline stage (the first stages take one more when pp does not divide)."""
    base, extra = divmod(num_layers, pp)
    out = []
    start = 0
    for stage in range(pp):
        count = base + (1 if stage < extra else 0)
        out.append(range(start, start + count))
        start += count
    return tuple(out)


def in_flight_micro_batches(stage: int, pp: int) -> int:
    """Micro-batches whose activations a 1F1B stage holds at once (pp on the first stage)."""
    return pp - stage


def ddp_bucket_bytes(grad_bytes: int, plan_: ParallelPlan) -> int:
    """DDP's flat gradient buckets: a copy of all gradients (only without sharding)."""
    if plan_.dp == 1 or plan_.sharded:
        return 0
    return grad_bytes


def zero_buffers_bytes(grad_item: int, trainable: int, plan_: ParallelPlan, zero: int) -> int:
    """ZeRO-2/3's contiguous gradient reduce bucket (reduce_bucket_size elements)."""
    if zero < 2 or plan_.dp == 1:
        return 0
    return min(ZERO_REDUCE_BUCKET, trainable) * grad_item


def gathered_in_flight_bytes(
    layer_param_bytes: list[int],
    outside_bytes: int,
    largest_outside_bytes: int,
    plan_: ParallelPlan,
    workload: Workload,
) -> int:
    """Parameters gathered whole on a sharding rank at the busiest moment (16-bit bytes given).

    FSDP: the current layer and the one prefetched (backward_prefetch=BACKWARD_PRE), plus the
    root unit (embeddings, final norm, head), which stays gathered from the forward to its
    backward. ZeRO-3: the current module plus up to stage3_prefetch_bucket_size of the next,
    within stage3_max_live_parameters; the head is gathered alone when it runs.
    """
    if plan_.param_shards == 1 and not plan_.offload_params:
        return 0
    # Sharded over ranks or offloaded to host RAM (even on one GPU), a layer's parameters are
    # brought whole onto the GPU while it computes.
    largest = max(layer_param_bytes, default=0)
    if workload.fsdp:
        return 2 * largest + outside_bytes
    prefetch = min(ZERO3_PREFETCH * 2, largest)
    return max(min(largest + prefetch, ZERO3_MAX_LIVE * 2), largest_outside_bytes)


def shard(nbytes: int, shards: int) -> int:
    """Bytes per rank of something divided over ``shards`` ranks (rounded up, as padding does)."""
    return math.ceil(nbytes / shards)
