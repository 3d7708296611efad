"""Weights, trainable parameters and LoRA targets: what each tensor of a model stores, trains
and gathers on one GPU under a training setup, summed once per spec and setting."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from vramgui.core import dtypes, parallel, storage
from vramgui.core.errors import WorkloadError
from vramgui.core.model import ModelSpec, Role, Tensor
from vramgui.core.training.optimizers import OptimizerBytes, optimizer_bytes
from vramgui.core.training.replay import ReplayContext
from vramgui.core.workload import TRANSFORMERS_VERSIONS, Workload

ALL_LINEAR = "all-linear"

# The MoE types whose stacked experts and router peft adapts (peft 0.21,
# utils/transformers_weight_conversion.py, after transformers 5's conversion_mapping.py), by the
# group of names their LoRA configs use: the transformers 4 names of the experts' projections and
# of the router (``_MOE_TARGET_MODULE_MAPPING``). peft takes those names out of
# ``target_modules`` and adapts the stacked parameters they became (``target_parameters``), the
# fused gate_up_proj with twice the rank, and only when both its halves are named. A linear
# module of the same name (a dense block's or a shared expert's down_proj) is then no longer
# matched. Every other MoE type keeps its experts and router as parameters or custom modules that
# ``target_modules`` (all-linear included) never matches.
PEFT_MOE_GROUPS: dict[str, str] = {
    **dict.fromkeys(("minimax", "minimax_m2", "mixtral"), "mixtral"),
    **dict.fromkeys(
        (
            "afmoe", "beam", "cohere2_moe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "dots1",
            "ernie4_5_moe", "exaone_moe", "flex_olmo", "glm4_moe", "glm4_moe_lite", "glm4v_moe",
            "glm_moe_dsa", "hunyuan_v1_moe", "longcat_flash", "mellum", "olmoe", "qwen3_moe",
            "qwen3_next", "qwen3_omni_moe", "qwen3_omni_moe_text", "qwen3_omni_moe_thinker",
            "sarvam_mla", "solar_open",
        ),
        "qwen2_moe",
    ),
}  # fmt: skip
PEFT_CONVERTED_MOE = frozenset(PEFT_MOE_GROUPS)
# Per group: the transformers 4 name -> the parameter peft adapts for it, and the two names fused
# into gate_up_proj.
_V4_NAMES = {
    "mixtral": {"gate": "gate", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {
        "gate": "gate",
        "gate_proj": "gate_up_proj",
        "up_proj": "gate_up_proj",
        "down_proj": "down_proj",
    },
}
_FUSED = {"mixtral": frozenset({"w1", "w3"}), "qwen2_moe": frozenset({"gate_proj", "up_proj"})}
# How a resolved target names a stacked expert parameter or a router peft adapts (never a
# module name, so that a linear module of the same name is not taken for it).
EXPERTS_TARGET = "experts:"
ROUTER_TARGET = "router:"
# Under transformers 4 each expert's projection is an nn.Linear that peft adapts by its own name:
# this prefix + the stacked parameter + "/" + the transformers 4 name (one per linear of the
# stack: gate_up_proj stands for two).
EXPERT_LINEARS_TARGET = "expert-linears:"


def kbit_upcast(workload: Workload) -> bool:
    """Whether peft's prepare_model_for_kbit_training upcasts what QLoRA leaves unquantized.

    It casts every 16-bit parameter that is not a bitsandbytes 4-bit weight (embeddings, norms,
    head, weights bitsandbytes does not replace) to fp32, so the hidden states between the 4-bit
    linears are fp32. Single-GPU QLoRA recipes call it (TRL's SFTTrainer does so itself): QLoRA's
    "mixed" precision. Sharded QLoRA (FSDP, ZeRO-3) skips it and keeps the model 16-bit, as do
    scripts that never call it ("pure"). An fp32 setup has nothing to upcast.
    """
    return (
        workload.method == "qlora"
        and workload.precision == "mixed"
        and workload.dtype != "fp32"
        and not (workload.fsdp or workload.zero == 3)
    )


def _stacked_expert(t: Tensor) -> bool:
    return t.role is Role.EXPERT and len(t.shape) == 3


def _linear_modules(spec: ModelSpec) -> frozenset[str]:
    """The names of the linear modules in the blocks (experts stacked as parameters and routers
    are not linear modules in transformers 5)."""

    def linear(t: Tensor) -> bool:
        return (
            t.layer is not None
            and t.is_matrix
            and not _stacked_expert(t)
            and t.role is not Role.ROUTER
        )

    return spec.cached(
        "training_linear_modules",
        lambda: frozenset(t.module for t in spec.tensors if linear(t)),
    )


def lora_rank_of(spec: ModelSpec, t: Tensor, targets: frozenset[str], rank: int) -> int:
    """The rank of the LoRA adapter peft puts on ``t`` (0: none), for targets resolved by
    :func:`resolve_lora_targets`.

    A linear module named in ``targets`` gets ``rank``. A stacked expert parameter or a router
    gets an adapter only where the resolved targets name it (``PEFT_MOE_GROUPS``): the fused
    gate_up_proj with twice the rank; the experts' linears of transformers 4 with ``rank`` each
    (:func:`adapter_shapes`).
    """
    if t.layer is None or not t.is_matrix:
        return 0
    if _stacked_expert(t):
        if _expert_linears(t, targets):
            return rank
        if f"{EXPERTS_TARGET}{t.module}" not in targets:
            return 0
        return 2 * rank if t.module == "gate_up_proj" else rank
    if t.role is Role.ROUTER:
        return rank if f"{ROUTER_TARGET}{t.module}" in targets else 0
    return rank if t.module in targets else 0


def adapter_shapes(
    spec: ModelSpec, t: Tensor, targets: frozenset[str], rank: int
) -> tuple[tuple[int, int], ...]:
    """The LoRA A and B matrices peft gives ``t`` (none when it is not adapted): a stack of
    experts gets one pair for all of them, A (rank x experts, in) and B (out, rank x experts);
    the expert linears of transformers 4 one pair per expert and linear (here summed over the
    experts, per linear of the stack)."""
    r = lora_rank_of(spec, t, targets, rank)
    if not r:
        return ()
    stacked = math.prod(t.shape[:-2])
    linears = _expert_linears(t, targets)
    if linears:
        out = t.shape[-2] // len(_fused_names(spec, t.module))
        return ((r * stacked, t.shape[-1]), (out, r * stacked)) * linears
    return ((r * stacked, t.shape[-1]), (t.shape[-2], r * stacked))


def _expert_linears(t: Tensor, targets: frozenset[str]) -> int:
    """How many transformers 4 expert linears of the stack ``t`` the resolved targets adapt."""
    prefix = f"{EXPERT_LINEARS_TARGET}{t.module}/"
    return sum(1 for target in targets if target.startswith(prefix))


def _fused_names(spec: ModelSpec, module: str) -> tuple[str, ...]:
    """The transformers 4 names of the linears a stacked expert parameter holds (two for
    gate_up_proj)."""
    group = PEFT_MOE_GROUPS.get(spec.facts.model_type)
    names = _V4_NAMES[group] if group is not None else {}
    return tuple(n for n, param in names.items() if param == module) or (module,)


def adapter_numels(spec: ModelSpec, t: Tensor, targets: frozenset[str], rank: int, tp: int) -> int:
    """The LoRA parameters of ``t`` (:func:`adapter_shapes`) on one tensor-parallel rank."""
    shapes = adapter_shapes(spec, t, targets, rank)
    return math.ceil(sum(a * b for a, b in shapes) / tp)


def adapter_parameters(spec: ModelSpec, targets: frozenset[str], rank: int) -> int:
    """Every LoRA parameter peft adds to ``spec`` (one GPU, no tensor parallelism)."""
    return spec.cached(
        ("training_adapter_parameters", rank, targets),
        lambda: sum(adapter_numels(spec, t, targets, rank, 1) for t in spec.tensors),
    )


def folded_expert_bytes(spec: ModelSpec, layer: int, ctx: ReplayContext) -> int:
    """The copies of a block's adapted expert stacks that its forward keeps for backward: peft's
    ParamWrapper folds each LoRA delta into a copy of the whole stack (``_LoraFactorsProxy``:
    baddbmm in the parameter's dtype, autocast off), which the experts' matmuls then save."""
    if ctx.full:
        return 0
    return spec.cached(
        (
            "training_folded_experts",
            layer,
            ctx.tp,
            ctx.lora_rank,
            ctx.lora_targets,
            ctx.param_bytes,
        ),
        lambda: sum(
            math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) * ctx.param_bytes
            for t in spec.layer_tensors(layer)
            if _stacked_expert(t) and f"{EXPERTS_TARGET}{t.module}" in ctx.lora_targets
        ),
    )


def resolve_lora_targets(
    spec: ModelSpec, targets: tuple[str, ...], transformers_version: str = TRANSFORMERS_VERSIONS[-1]
) -> frozenset[str]:
    """What LoRA adapts, as peft resolves the names: the linear modules it matches by name, and
    for the MoE types peft converts, the stacked expert parameters and routers their
    transformers 4 names stand for (``EXPERTS_TARGET`` / ``ROUTER_TARGET`` + the parameter).
    ``all-linear`` = every linear in the blocks (not lm_head), and for those types the experts and
    the router too. Under transformers 4 those experts are nn.Linear layers peft matches by
    name, each on its own (``EXPERT_LINEARS_TARGET``), beside every other linear of that name.

    Raises:
        WorkloadError: a target names nothing peft would adapt, or one half of a fused pair.
    """
    modules = _linear_modules(spec)
    group = PEFT_MOE_GROUPS.get(spec.facts.model_type)
    renamed = _V4_NAMES[group] if group is not None else {}
    if ALL_LINEAR in targets:
        named = set(modules) | set(renamed)
    else:
        missing = [t for t in targets if t not in modules and t not in renamed]
        if missing:
            raise WorkloadError(_unknown_targets(spec, missing, modules, group))
        named = set(targets)
    if group is None:
        return frozenset(named)
    mapped = named & set(renamed)
    if not storage.experts_stacked(spec.facts.model_type, transformers_version):
        out = named & set(modules)
        for name in mapped:
            param = renamed[name]
            if param == "gate":
                out.add(ROUTER_TARGET + param)
            else:
                out.add(f"{EXPERT_LINEARS_TARGET}{param}/{name}")
        return frozenset(out)
    fused = _FUSED[group]
    if mapped & fused and not fused <= mapped:
        raise WorkloadError(
            f"peft cannot adapt {' or '.join(sorted(mapped & fused))} without "
            f"{' and '.join(sorted(fused - mapped))}: transformers 5 fuses them into the "
            "experts' gate_up_proj"
        )
    out = named - set(renamed)
    for name in mapped:
        prefix = ROUTER_TARGET if renamed[name] == "gate" else EXPERTS_TARGET
        out.add(prefix + renamed[name])
    return frozenset(out)


def _unknown_targets(
    spec: ModelSpec, missing: list[str], modules: frozenset[str], group: str | None
) -> str:
    available = sorted(modules | set(_V4_NAMES[group] if group else ()))
    text = (
        f"LoRA target(s) {', '.join(missing)} not in {spec.name or 'this model'}; "
        f"its linear modules are {', '.join(available)} (or use all-linear)"
    )
    if group is not None and {"gate_up_proj", "down_proj"} & set(missing):
        halves = " and ".join(sorted(_FUSED[group]))
        text += (
            f". Its experts are stacked parameters: peft adapts them when the config names "
            f"their transformers 4 projections ({halves} for gate_up_proj, "
            f"{'w2' if group == 'mixtral' else 'down_proj'} for down_proj)"
        )
    return text


def _trainable_numels(
    spec: ModelSpec, tensors: tuple[Tensor, ...] | list[Tensor], ctx: ReplayContext
) -> list[int]:
    """Elements of each trainable tensor among ``tensors`` on this rank."""
    if ctx.full:
        return [math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) for t in tensors]
    numels = (adapter_numels(spec, t, ctx.lora_targets, ctx.lora_rank, ctx.tp) for t in tensors)
    return [n for n in numels if n]


def _copy_bytes(tensors: tuple[Tensor, ...], ctx: ReplayContext) -> int:
    """Autocast's 16-bit copies of the fp32 weights that matmuls use.

    Autocast caches the cast of every trainable fp32 leaf weight until the forward leaves the
    autocast region, and each copy is also saved for the backward of its linear; frozen weights
    (LoRA) are cast at each use and likewise kept by their linear.
    """
    if not ctx.autocast:
        return 0
    return sum(
        math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) * ctx.compute_bytes
        for t in tensors
        if t.role not in (Role.EMBEDDING, Role.POSITION, Role.NORM)
    )


def group_sums(
    spec: ModelSpec,
    ctx: ReplayContext,
    group: Hashable,
    tensors: Callable[[], tuple[Tensor, ...]],
) -> tuple[int, int]:
    """Trainable elements and autocast copy bytes of a group of tensors that ``group`` names
    within ``spec`` (the same tensors under one name), once per spec and the settings they
    depend on."""
    key = (
        "training_group",
        group,
        ctx.full,
        ctx.tp,
        ctx.lora_rank,
        ctx.lora_targets,
        ctx.autocast,
        ctx.compute_bytes,
    )

    def compute() -> tuple[int, int]:
        chosen = tensors()
        return sum(_trainable_numels(spec, chosen, ctx)), _copy_bytes(chosen, ctx)

    return spec.cached(key, compute)


def largest_four_bit(spec: ModelSpec, tp: int, quant: str, transformers_version: str) -> int:
    """Elements of the largest weight bitsandbytes holds in 4 bits, on one rank (what it
    dequantizes for one matmul): one expert's projection where the release holds experts as
    nn.Linear layers."""
    scheme = dtypes.get_scheme(quant)
    stacked = storage.experts_stacked(spec.facts.model_type, transformers_version)

    def elements(t: Tensor) -> int:
        experts = 1 if stacked or t.role is not Role.EXPERT else math.prod(t.shape[:-2])
        return math.ceil(t.numel // experts * parallel.tp_share(t, tp))

    return spec.cached(
        ("training_largest_four_bit", tp, quant, stacked),
        lambda: max(
            (
                elements(t)
                for t in spec.tensors
                if t.layer is not None and storage.bitsandbytes_quantizes(scheme, t, stacked)
            ),
            default=0,
        ),
    )


@dataclass(frozen=True, slots=True)
class StageFacts:
    """What one pipeline stage's tensors give, whatever the batch and sequence length."""

    trainable: int  # trainable elements on this rank
    weights: int  # weight bytes before sharding over data-parallel ranks
    quant_state: int  # of those, the 4-bit weights' quant state (never sharded)
    optimizer: OptimizerBytes  # before sharding
    layer_bytes: tuple[int, ...]  # each block's parameters, gathered in the compute dtype
    outside_bytes: int  # the tensors outside the blocks, gathered
    largest_outside: int


def stage_facts(
    spec: ModelSpec,
    workload: Workload,
    ctx: ReplayContext,
    stage: range,
    *,
    first: bool,
    last: bool,
    state_item: int,
) -> StageFacts:
    """The per-tensor sums of one stage, once per spec and the settings they depend on."""
    sixteen = dtypes.dtype_bytes(workload.dtype)

    def compute() -> StageFacts:
        tensors = [t for t in spec.tensors if t.layer is None or t.layer in stage]
        if not first:
            tensors = [
                t for t in tensors if not (t.layer is None and t.role not in (Role.HEAD, Role.NORM))
            ]
        if not last:
            tensors = [
                t for t in tensors if not (t.layer is None and t.role in (Role.HEAD, Role.NORM))
            ]
        numels = _trainable_numels(spec, tensors, ctx)
        shapes: list[tuple[int, ...]] = (
            [t.shape for t in tensors]
            if ctx.full
            else [
                shape
                for t in tensors
                for shape in adapter_shapes(spec, t, ctx.lora_targets, ctx.lora_rank)
            ]
        )
        outside = [t.numel * ctx.compute_bytes for t in tensors if t.layer is None]
        weights, quant_state = _weight_bytes(spec, tensors, workload, ctx)
        return StageFacts(
            trainable=sum(numels),
            weights=weights,
            quant_state=quant_state,
            optimizer=optimizer_bytes(workload.optimizer, numels, shapes, state_item),
            layer_bytes=tuple(
                _gathered_layer_bytes(spec, i, workload, ctx, sixteen) for i in stage
            ),
            outside_bytes=sum(outside),
            largest_outside=max(outside, default=0),
        )

    key = (
        "training_stage",
        stage.start,
        stage.stop,
        first,
        last,
        workload.method,
        workload.dtype,
        workload.quant,
        workload.optimizer,
        workload.transformers_version,
        state_item,
        ctx.param_bytes,
        ctx.storage_bytes,
        ctx.compute_bytes,
        ctx.tp,
        ctx.lora_rank,
        ctx.lora_targets,
    )
    return spec.cached(key, compute)


def _weight_bytes(
    spec: ModelSpec, tensors: list[Tensor], workload: Workload, ctx: ReplayContext
) -> tuple[int, int]:
    """Bytes of ``tensors`` on one tensor-parallel rank, as the method stores them, and of
    those the 4-bit weights' quant state."""
    if workload.method == "qlora":
        sub = ModelSpec(spec.name, spec.facts, tuple(tensors), spec.architecture)
        stored = storage.bitsandbytes_storage(
            sub, workload.dtype, workload.quant, workload.transformers_version
        )
        quantized = [s for s in stored if s.storage == workload.quant]
        codes = sum(storage.bnb_4bit_packed_bytes(s.tensor.shape) for s in quantized)
        quantized_bytes = sum(s.bytes for s in quantized)
        upcast = sum(s.tensor.numel for s in stored if s.storage != workload.quant)
        return (
            math.ceil(quantized_bytes / ctx.tp) + upcast * ctx.param_bytes,
            math.ceil((quantized_bytes - codes) / ctx.tp),
        )
    weights = sum(math.ceil(t.numel * parallel.tp_share(t, ctx.tp)) for t in tensors)
    return weights * ctx.storage_bytes, 0


def _gathered_layer_bytes(
    spec: ModelSpec, layer: int, workload: Workload, ctx: ReplayContext, sixteen: int
) -> int:
    """One block's parameters as FSDP / ZeRO-3 gather them: in the compute dtype, or for QLoRA
    the 4-bit codes (their quant state is never sharded) and the 16-bit rest."""
    tensors = spec.layer_tensors(layer)
    if workload.method != "qlora":
        return sum(t.numel for t in tensors) * (sixteen if ctx.compute_bytes == 2 else 4)
    sub = ModelSpec(spec.name, spec.facts, tensors, spec.architecture)
    return sum(
        storage.bnb_4bit_packed_bytes(s.tensor.shape)
        if s.storage == workload.quant
        else s.tensor.numel * ctx.param_bytes
        for s in storage.bitsandbytes_storage(
            sub, workload.dtype, workload.quant, workload.transformers_version
        )
    )
