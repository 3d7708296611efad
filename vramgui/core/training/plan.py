"""The checks, the replay's settings and the plan: what one GPU holds through a training step
whatever the batch and sequence length (weights, states, buffers, per pipeline stage), and
:class:`TrainingPlan` that walks the phases for the sizes it is given."""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core import dtypes, parallel, storage
from vramgui.core.errors import Message, Setting, WorkloadError, phrase
from vramgui.core.model import ModelSpec, Role
from vramgui.core.training.components import (
    ACTIVATIONS,
    DEQUANTIZED_WEIGHT,
    GATHERED_PARAMETERS,
    GRADIENT_BUCKETS,
    LORA_ADAPTERS,
    OPTIMIZER_STATES,
    OPTIMIZER_TEMPORARIES,
    REQUIRED_COMPONENTS,
    WEIGHTS,
    TrainingBreakdown,
)
from vramgui.core.training.phases import phase_moments, stage_blocks, walk_blocks
from vramgui.core.training.replay import ADAPTER_BYTES, ReplayContext
from vramgui.core.training.weights import (
    EXPERT_LINEARS_TARGET,
    adapter_parameters,
    folded_expert_bytes,
    kbit_upcast,
    largest_four_bit,
    resolve_lora_targets,
    stage_facts,
)
from vramgui.core.units import format_bytes
from vramgui.core.workload import Workload

# Devices whose kernels the estimate follows: "cuda" for users, "cpu" for the measurement harness
# (the CPU build of PyTorch), which differs in dropout masks and autocast's fp32 op list.
DEVICES = ("cuda", "cpu")

# bitsandbytes 4-bit schemes a QLoRA base can be stored in (``load_in_4bit=True`` alone, or
# ``BitsAndBytesConfig()``'s defaults, is fp4-nodq with float32 compute).
FOUR_BIT_SCHEMES = ("nf4", "fp4", "nf4-nodq", "fp4-nodq")


def _check(workload: Workload) -> None:
    if workload.mode != "training":
        raise WorkloadError(
            Message("a training estimate needs {mode}", mode=Setting("mode", "training"))
        )
    if workload.method == "qlora" and workload.quant not in FOUR_BIT_SCHEMES:
        raise WorkloadError(
            Message(
                "QLoRA trains adapters on a bitsandbytes 4-bit base: use {nf4} or fp4 (or "
                "nf4-nodq / fp4-nodq without double quantization), not {quant!r}",
                nf4=Setting("quant", "nf4"),
                quant=workload.quant,
            )
        )
    if workload.method != "qlora" and workload.quant != "none":
        raise WorkloadError(
            Message(
                "{quant} with {method}: a quantized base can only be trained through adapters "
                "(use {qlora})",
                quant=Setting("quant", workload.quant),
                method=Setting("method", workload.method),
                qlora=Setting("method", "qlora"),
            )
        )


def _context(
    spec: ModelSpec, workload: Workload, device: str, autocast_rules: str, deepspeed_mixed: bool
) -> ReplayContext:
    sixteen = dtypes.dtype_bytes(workload.dtype)
    stored = 0
    if workload.precision == "fp32" or workload.dtype == "fp32":
        param_bytes, compute, autocast = 4, 4, False
    elif workload.method == "qlora" and (workload.fsdp or workload.zero == 3):
        # Sharded QLoRA stores the 4-bit codes in the 16-bit dtype (bnb_4bit_quant_storage) so
        # that FSDP / ZeRO-3 can flatten them with the other weights of a unit, which must share
        # one dtype: TRL's SFTTrainer (which peft's FSDP and DeepSpeed QLoRA guides run) skips
        # prepare_model_for_kbit_training, so the unquantized tensors stay 16-bit, and makes the
        # adapters 16-bit too (get_peft_model(autocast_adapter_dtype=False)).
        param_bytes, compute, autocast = sixteen, sixteen, False
    elif kbit_upcast(workload):
        # peft's prepare_model_for_kbit_training (what most single-GPU QLoRA recipes call) upcasts
        # every unquantized tensor (embeddings, norms, head) to fp32, so the hidden states are
        # fp32; bitsandbytes' 4-bit linears compute in the 16-bit dtype and return the input's.
        param_bytes, compute, autocast = 4, sixteen, False
    elif workload.precision == "pure" or deepspeed_mixed:
        # DeepSpeed's bf16 / fp16 modes run a 16-bit model (the fp32 master copy sits with the
        # optimizer).
        param_bytes, compute, autocast = sixteen, sixteen, False
    elif workload.fsdp:
        # FSDP's own mixed precision (MixedPrecision / MixedPrecisionPolicy with a 16-bit
        # param_dtype, what accelerate and transformers' Trainer set for bf16 / fp16): fp32
        # shards, each unit gathered in 16 bits and freed after its forward, so the forward sees
        # 16-bit weights and autocast keeps no copies (benchmarks/fsdp_weight_copies.py).
        param_bytes, compute, autocast = sixteen, sixteen, False
        stored = 4
    else:
        # torch autocast: fp32 weights (frozen ones too for LoRA), 16-bit matmuls.
        param_bytes, compute, autocast = 4, sixteen, True
    targets: frozenset[str] = frozenset()
    if workload.method != "full":
        targets = resolve_lora_targets(spec, workload.lora_targets, workload.transformers_version)
    sharded_4bit = workload.method == "qlora" and (workload.fsdp or workload.zero == 3)
    return ReplayContext(
        batch=workload.batch,
        seq=workload.seq,
        param_bytes=param_bytes,
        compute_bytes=compute,
        autocast=autocast,
        cuda=device == "cuda",
        cuda_autocast=autocast_rules == "cuda",
        full=workload.method == "full",
        lora_targets=targets,
        lora_rank=workload.lora_rank,
        attention=workload.attention,
        checkpointing=workload.grad_checkpointing,
        tp=workload.tp,
        four_bit_base=workload.method == "qlora",
        adapter_bytes=param_bytes if sharded_4bit else ADAPTER_BYTES,
        stored_param_bytes=stored,
    )


def _fsdp_mixed_note(spec: ModelSpec, workload: Workload) -> str:
    """What FSDP's mixed precision is taken to be, and what torch.autocast alone would add."""
    matrices = sum(
        t.numel for t in spec.tensors if t.role not in (Role.EMBEDDING, Role.POSITION, Role.NORM)
    )
    copies = matrices * dtypes.dtype_bytes(workload.dtype) // workload.tp
    return (
        f"FSDP mixed precision as accelerate and the Trainer run it (MixedPrecision, param_dtype "
        f"{workload.dtype}): fp32 shards, each unit gathered in {workload.dtype} and freed after "
        f"its forward. FSDP under torch.autocast alone keeps a {workload.dtype} copy of every "
        f"weight until backward, {format_bytes(copies)} more per GPU."
    )


def training_estimate(
    spec: ModelSpec,
    workload: Workload,
    *,
    device: str = "cuda",
    autocast_rules: str | None = None,
) -> TrainingBreakdown:
    """Per-GPU memory at the peak of a steady-state training step (the second optimizer step).

    Args:
        spec: the model.
        workload: a training workload.
        device: whose kernels run: "cuda" (what users run) or "cpu" (the measurement harness:
            CPU dropout keeps a noise tensor of the input's dtype rather than a bool mask, CPU
            SDPA falls back to its math path under dropout or broadcast k / v, CPU layer norm
            keeps 16-bit statistics for 16-bit weights).
        autocast_rules: whose autocast float32 list applies in mixed precision, "cuda" (norms,
            softmax, pow... in fp32) or "cpu" (left in 16 bit); by default the device's.

    Raises:
        WorkloadError: the settings do not apply to this model.
    """
    plan = TrainingPlan(spec, workload, device=device, autocast_rules=autocast_rules)
    return plan.breakdown(workload.batch, workload.seq)


@dataclass(frozen=True, slots=True)
class _StagePlan:
    """What one pipeline stage holds whatever the batch and sequence length."""

    stage: range
    first: bool
    last: bool
    micro_batches: int  # in flight at once (1F1B)
    resident: dict[str, int]  # weights, states and buffers present through the whole step
    grads_total: int
    step_extra: dict[str, int]  # what only the optimizer step adds
    host: int


class TrainingPlan:
    """Training memory of one model and setup at any batch size and sequence length.

    The checks, the parallel plan, each stage's weights, gradients and optimizer states and the
    notes are worked out once; :meth:`breakdown` replays the forward for the sizes it is given.
    ``TrainingPlan(spec, w).breakdown(w.batch, w.seq)`` is ``training_estimate(spec, w)``.

    Raises:
        WorkloadError: the settings do not apply to this model.
    """

    __slots__ = (
        "_accumulating",
        "_ctx",
        "_custom_loop",
        "_grad_item",
        "_grad_shards",
        "_notes",
        "_spec",
        "_stages",
        "_trainable",
    )

    def __init__(
        self,
        spec: ModelSpec,
        workload: Workload,
        *,
        device: str = "cuda",
        autocast_rules: str | None = None,
    ) -> None:
        if device not in DEVICES or (autocast_rules or device) not in DEVICES:
            raise ValueError(f"device and autocast_rules must be one of {DEVICES}")
        _check(workload)
        plan = parallel.plan(spec, workload)
        deepspeed_mixed = workload.zero > 0 and workload.precision == "mixed"
        ctx = _context(spec, workload, device, autocast_rules or device, deepspeed_mixed)
        notes: list[str] = list(plan.notes)
        if ctx.stored_param_bytes:
            notes.append(_fsdp_mixed_note(spec, workload))

        # Which tensors live on this GPU (the worst pipeline stage is chosen in breakdown).
        stages = parallel.stage_layers(spec.facts.num_layers, plan.pp)

        grad_item = ctx.storage_bytes if workload.method == "full" else ctx.adapter_bytes
        state_item = 4 if deepspeed_mixed else grad_item
        self._stages: list[_StagePlan] = []
        for index, stage in enumerate(stages):
            first, last = index == 0, index == len(stages) - 1
            if 0 < index < len(stages) - 1:
                continue  # middle stages hold no more than the first one
            facts = stage_facts(
                spec, workload, ctx, stage, first=first, last=last, state_item=state_item
            )
            trainable = facts.trainable
            # Sharding divides the parameters; a 4-bit weight's quant state stays whole on each
            # rank.
            replicated = facts.quant_state if plan.param_shards > 1 else 0
            weights = parallel.shard(facts.weights - replicated, plan.param_shards) + replicated
            adapters = trainable * ctx.adapter_bytes if workload.method != "full" else 0
            opt = facts.optimizer
            states = opt.states + (trainable * 4 if deepspeed_mixed else 0)  # fp32 master weights
            states = parallel.shard(states, plan.state_shards)
            temporaries = parallel.shard(opt.temporaries, plan.state_shards)
            host = 0
            if plan.offload_states:
                host += states
                states, temporaries = 0, 0
            grads_total = parallel.shard(trainable * grad_item, plan.grad_shards)
            resident = {WEIGHTS: weights, OPTIMIZER_STATES: states}
            if adapters:
                resident[LORA_ADAPTERS] = adapters
            if plan.offload_params:
                # ZeRO-3 / FSDP parameter offload: only the gathered layers sit on the GPU.
                host += weights
                resident[WEIGHTS] = 0
            in_flight_params = parallel.gathered_in_flight_bytes(
                list(facts.layer_bytes), facts.outside_bytes, facts.largest_outside, plan, workload
            )
            if in_flight_params:
                resident[GATHERED_PARAMETERS] = in_flight_params
            buckets = parallel.ddp_bucket_bytes(trainable * grad_item, plan) + (
                parallel.zero_buffers_bytes(grad_item, trainable, plan, workload.zero)
            )
            if buckets:
                resident[GRADIENT_BUCKETS] = buckets
            if workload.method == "qlora":
                # bitsandbytes dequantizes one 4-bit weight at a time, to the compute dtype, for
                # its matmul.
                resident[DEQUANTIZED_WEIGHT] = (
                    largest_four_bit(spec, ctx.tp, workload.quant, workload.transformers_version)
                    * ctx.compute_bytes
                )
            self._stages.append(
                _StagePlan(
                    stage=stage,
                    first=first,
                    last=last,
                    micro_batches=parallel.in_flight_micro_batches(index, plan.pp),
                    resident=resident,
                    grads_total=grads_total,
                    step_extra={OPTIMIZER_TEMPORARIES: temporaries},
                    host=host,
                )
            )
        if workload.method == "qlora":
            notes.append(_qlora_note(workload, plan.param_shards))
        notes += _expert_notes(spec, workload, ctx)
        if plan.pp > 1:
            notes.append(
                f"pipeline: worst of the first and last of {plan.pp} stages (1F1B schedule)"
            )
        if workload.loop == "custom":
            notes.append(
                "custom loop: outputs keeps the logits (fp32 under accelerate's mixed precision) "
                "through backward and the optimizer step until the next forward returns; "
                "loss = model(**batch).loss, as transformers' Trainer takes it, frees them "
                "before backward"
            )
        self._trainable = (
            spec.parameters
            if workload.method == "full"
            else adapter_parameters(spec, ctx.lora_targets, workload.lora_rank)
        )
        self._spec = spec
        self._ctx = ctx
        self._notes = tuple(notes)
        self._grad_item = grad_item
        self._grad_shards = plan.grad_shards
        self._accumulating = workload.grad_accum > 1
        self._custom_loop = workload.loop == "custom"

    def breakdown(self, batch: int, seq: int) -> TrainingBreakdown:
        """Per-GPU memory at the peak of a step over ``batch`` sequences of ``seq`` tokens."""
        ctx = self._ctx.sized(batch, seq)
        walk = walk_blocks(self._spec, ctx, self._grad_item)
        best: tuple[int, str, dict[str, int], dict[str, int], int] | None = None
        for sp in self._stages:
            blocks = stage_blocks(walk, sp.stage, sp.first, sp.last)
            moments = phase_moments(
                blocks,
                in_flight=sp.micro_batches,
                resident=sp.resident,
                grads_total=sp.grads_total,
                step_extra=sp.step_extra,
                accumulating=self._accumulating,
                forward_transient=walk.forward_transient if sp.last else 0,
                grad_shards=self._grad_shards,
                kept_outputs=walk.output_bytes if sp.last and self._custom_loop else 0,
            )
            phase = max(moments.totals, key=lambda k: moments.totals[k])
            total = moments.totals[phase]
            if best is None or total > best[0]:
                parts = {**sp.resident, **moments.parts[phase]}
                best = (total, phase, parts, moments.totals, sp.host)
        assert best is not None
        _, phase, parts, totals, host = best
        components = {k: max(v, 0) for k, v in parts.items() if v or k in REQUIRED_COMPONENTS}
        shift = totals[phase] - sum(components.values())
        if shift:
            # A negative transient (freed saved tensors) is folded into the activations.
            components[ACTIVATIONS] = max(0, components.get(ACTIVATIONS, 0) + shift)
        return TrainingBreakdown(
            components=components,
            phase=phase,
            trainable_parameters=self._trainable,
            host_bytes=host,
            notes=self._notes,
            phase_totals=totals,
        )


def _expert_notes(spec: ModelSpec, workload: Workload, ctx: ReplayContext) -> list[str]:
    """What the transformers release and peft do with a MoE block's experts under (Q)LoRA."""
    # The expert matrices (a checkpoint's side tensors, a quant state, are no matrices).
    experts = [
        t for t in spec.tensors if t.role is Role.EXPERT and not t.is_bias and len(t.shape) >= 2
    ]
    if workload.method == "full" or not experts:
        return []
    notes: list[str] = []
    version = workload.transformers_version
    if not storage.experts_stacked(spec.facts.model_type, version):
        if workload.method == "qlora":
            notes.append(
                phrase(
                    f"transformers {version} holds each routed expert as nn.Linear layers, which "
                    "bitsandbytes quantizes like the others (transformers 5 stacks them into "
                    "parameters it leaves unquantized: ",
                    Setting("transformers_version", "5.0"),
                    ")",
                )
            )
        notes.append(
            f"The experts' activations follow transformers 5's MoE code, measured; "
            f"transformers {version} runs them expert by expert, so they are approximate"
        )
        if any(t.startswith(EXPERT_LINEARS_TARGET) for t in ctx.lora_targets):
            notes.append(
                f"peft adapts each expert's linear layers of transformers {version} on its own "
                "(rank r each); their LoRA activations are approximate"
            )
        return notes
    if workload.method == "qlora":
        held = sum(t.numel for t in experts) * ctx.param_bytes // workload.tp
        scheme = dtypes.get_scheme(workload.quant)
        four_bit = (
            sum(
                storage.matrix_bytes(scheme, t.shape, 2 if t.module == "gate_up_proj" else 1)
                for t in experts
            )
            // workload.tp
        )
        upcast = (
            ", and prepare_model_for_kbit_training upcasts them to fp32"
            if ctx.param_bytes == 4
            else ""
        )
        notes.append(
            phrase(
                f"transformers {version} holds the routed experts as stacked parameters, which "
                f"bitsandbytes (it replaces nn.Linear layers) leaves unquantized{upcast}: "
                f"{format_bytes(held)} per GPU (transformers 4 held each expert as an nn.Linear, "
                f"which bitsandbytes quantized: {format_bytes(four_bit)}; ",
                Setting("transformers_version", "4.57"),
                ")",
            )
        )
    folded = sum(folded_expert_bytes(spec, layer, ctx) for layer in range(spec.facts.num_layers))
    if folded:
        notes.append(
            f"peft adapts {spec.facts.model_type}'s stacked experts and router "
            "(target_parameters, the fused gate_up_proj at twice the rank) and folds each "
            "LoRA delta into a copy of the expert stack at every forward, kept for backward: "
            f"{format_bytes(folded)} over the model without checkpointing, one block's with it"
        )
    return notes


def _qlora_note(workload: Workload, param_shards: int) -> str:
    """How the QLoRA figures were counted, in the words of the libraries' settings."""
    if param_shards > 1:
        base = (
            f"QLoRA sharded over {param_shards} ranks: the 4-bit codes, stored as "
            f"bnb_4bit_quant_storage={workload.dtype}, are divided with the other weights and one "
            "layer's codes gathered in flight; each weight's quant state (absmax) stays whole on "
            f"every rank; embeddings / norms / head stay {workload.dtype}"
        )
    elif workload.precision == "pure":
        base = (
            "QLoRA: the 4-bit base as bitsandbytes stores it (quant state included), "
            f"embeddings / norms / head kept in {workload.dtype} (no "
            "prepare_model_for_kbit_training)"
        )
    else:
        base = (
            "QLoRA: the 4-bit base as bitsandbytes stores it (quant state included), "
            "embeddings / norms / head upcast to fp32 by prepare_model_for_kbit_training"
        )
    compute = (
        "float32 compute, BitsAndBytesConfig's default bnb_4bit_compute_dtype (what "
        "load_in_4bit=True alone gives, with fp4 and no double quantization)"
        if workload.dtype == "fp32"
        else f"bnb_4bit_compute_dtype={workload.dtype}"
    )
    return (
        f"{base}; {compute}; one linear's weight dequantized in flight, no activation kept by "
        "the 4-bit matmul (bitsandbytes 0.43.2 on); paged optimizer states are counted on the GPU "
        "(bitsandbytes moves them to host RAM only under memory pressure)"
    )
