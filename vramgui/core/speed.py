"""How long and how much: training throughput from the work a step does, and time and cost.

A training step is costed on one GPU as three kinds of work, each at the share of the GPU's peak
it reaches in practice (``Utilization``, defaults set from published measurements:
docs/performance.md, "Training time"):

- **Matrix products**: 2 FLOPs per weight per token for the forward; the backward needs the
  input gradients (another 2) and, for weights that train, the weight gradients (another 2):
  6N per token for a full fine-tune, 4N for LoRA's frozen base plus the adapters' own products.
  Gradient checkpointing runs the blocks' forward again (another 2N). Attention's score and
  value products grow with the context (half of it under a causal mask that the kernel skips),
  and its backward is 2.5 forwards (flash attention recomputes the scores). Each pass is held
  against a roofline: a pass can be no faster than reading its weights once (small batches).
- **Memory-bound work**: the elementwise operations around the products (norms, residual adds,
  rotary embeddings, the MLP's gate, the loss over the vocabulary, LoRA's extra reads and adds),
  QLoRA's dequantization of every 4-bit weight on every pass (and, on one GPU, the fp32 hidden
  states prepare_model_for_kbit_training leaves between its 4-bit linears), mixed precision's
  cast of the weights, and the optimizer step over the trainable parameters: bytes over the
  memory bandwidth.
- **Communication**: DDP's gradient all-reduce, ZeRO's and FSDP's gathers and reduce-scatters
  (hidden behind the passes they overlap with, only the excess counts), tensor parallelism's
  per-layer all-reduces, the pipeline's bubble, CPU offload's copies and host optimizer step.

The host launches each kernel in turn: a micro-batch takes at least its kernels' launch time
(small models and batches in eager PyTorch are bound by it).

Everything here is arithmetic on the model's tensors and the GPU's datasheet figures, which the
caller passes in (``Hardware``): no catalog, no disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from vramgui.core import dtypes, parallel
from vramgui.core.errors import Command, Message, Setting, WorkloadError
from vramgui.core.model import LayerType, ModelSpec
from vramgui.core.training.weights import kbit_upcast
from vramgui.core.training.work import (
    ATTENTION_BACKWARD,
    TokenWork,
    attention_flops,
    model_flops_per_token,
    token_work,
)
from vramgui.core.workload import Workload

# --- defaults ------------------------------------------------------------------------------------

# The share of the GPU's dense 16-bit tensor peak that a training step's matrix products reach,
# per GPU architecture, set from the tuning cases of benchmarks/data/training_throughput.json:
# Hopper from llm-foundry's H100 table, NeMo AutoModel's LoRA run and Answer.AI's 4 x H100 QLoRA
# run; Ampere from llm-foundry's A100 tables, fms-acceleration's A100 runs (full, LoRA, QLoRA, one
# and two GPUs) and Qwen's LoRA profile; Ada Lovelace from Answer.AI's two RTX 4090s (LoRA and
# QLoRA). A datasheet peak is reached less closely on the larger chips (H100's 989 TFLOPS) than
# on a GeForce card whose clocks run above their rated boost. docs/performance.md, "Training
# time", lists every case with the held-out ones.
MATMUL_UTILIZATION_BY_ARCHITECTURE = {"Hopper": 0.55, "Ampere": 0.65, "Ada Lovelace": 0.85}
# The GPUs those measurements ran on: another GPU of the architecture takes its default unchecked
# (power-limited parts such as the L4 and L40S may reach less of their datasheet peak).
MEASURED_GPUS = {
    "Hopper": ("H100 SXM",),
    "Ampere": ("A100 SXM 80GB", "A100 SXM 40GB", "RTX 3090"),
    "Ada Lovelace": ("RTX 4090",),
}
# Architectures no published measurement was checked on take this share, and the estimate says so.
UNMEASURED_MATMUL_UTILIZATION = 0.6
# Flash attention reaches three quarters of the matrix products' share (set with them, on the
# same cases; llm-foundry's long-sequence rows are held out).
ATTENTION_SHARE = 0.75
# The share of peak memory bandwidth streaming kernels reach (as for decoding, core/offload).
MEMORY_UTILIZATION = 0.8
# The share of a link's bandwidth NCCL's collectives reach (nccl-tests' bus bandwidth on DGX
# A100: ~230 of 300 GB/s per direction).
LINK_UTILIZATION = 0.75
# Host time to launch one kernel in eager PyTorch (the dispatcher, autograd and the CUDA launch;
# set on Qwen's LoRA profile at 256 tokens, where the launches bound the step).
LAUNCH_SECONDS = 16e-6
# One all-reduce of a few hundred kilobytes (tensor parallelism's per-layer reduce while decoding)
# takes about this long whatever its size: NCCL's small-message latency, tens of microseconds.
COLLECTIVE_LATENCY_SECONDS = 20e-6
# Between machines: 400 Gb/s per GPU (InfiniBand / RoCE, as in the clusters of torchtitan's and
# llm-foundry's published runs); one machine holds this many GPUs.
NETWORK_BYTES_PER_S = 50e9
GPUS_PER_MACHINE = 8
# DeepSpeed's CPU Adam over host RAM: bytes it moves per parameter (fp32 master, m, v read and
# written, gradient read), and the host memory bandwidth it streams at.
CPU_ADAM_BYTES_PER_PARAMETER = 28
HOST_BYTES_PER_S = 76.8e9 * 0.7

# The backward moves about twice the elementwise bytes of the forward.
BACKWARD_PASSES = 2.0
# Passes over the trainable parameters' state-sized tensors an optimizer step makes (reads and
# writes of parameter, gradient, states and the foreach implementation's temporaries).
OPTIMIZER_PASSES = {
    "adamw": 12.0,
    "adamw-fused": 7.0,
    "adamw-8bit": 4.0,
    "sgd": 5.0,
    "adafactor": 6.0,
    "lion": 6.0,
}
# Gradient clipping (transformers' Trainer): the norm reads every gradient, the scaling reads and
# writes it.
CLIPPING_PASSES = 3.0


@dataclass(frozen=True, slots=True)
class Hardware:
    """One GPU of the setup, as the speed model sees it.

    Attributes:
        name: the GPU's name.
        flops: dense tensor FLOP/s in the workload's 16-bit dtype (datasheet peak).
        memory_bytes_per_s: peak memory bandwidth.
        link_bytes_per_s: GPU-to-GPU bandwidth inside one machine, per direction (NVLink, or
            PCIe).
        pcie_bytes_per_s: host-to-GPU copies (CPU offload).
        network_bytes_per_s: per GPU between machines.
        gpus_per_machine: GPUs one machine holds; more go over the network.
        architecture: the GPU's architecture generation ("Hopper", "Ampere"...), which sets
            the default utilization.
        memory_type: its memory ("HBM3", "GDDR6X", "LPDDR5"...; "" where unknown), which sets
            the share of the bandwidth llama.cpp's kernels reach (core/llamacpp_speed).
    """

    name: str
    flops: float
    memory_bytes_per_s: float
    link_bytes_per_s: float
    pcie_bytes_per_s: float
    network_bytes_per_s: float = NETWORK_BYTES_PER_S
    gpus_per_machine: int = GPUS_PER_MACHINE
    architecture: str = ""
    memory_type: str = ""

    def __post_init__(self) -> None:
        for name in ("flops", "memory_bytes_per_s", "link_bytes_per_s", "pcie_bytes_per_s"):
            if not getattr(self, name) > 0:
                raise WorkloadError(f"{self.name}: {name.replace('_', ' ')} must be positive")


@dataclass(frozen=True, slots=True)
class Utilization:
    """The shares of peak the step's kinds of work reach, and where they came from.

    Attributes:
        matmul: share of the 16-bit tensor peak matrix products reach.
        attention: share of the peak flash attention reaches.
        memory: share of peak memory bandwidth streaming kernels reach.
        link: share of link bandwidth collectives reach.
        launch_seconds: host time per kernel launch.
        source: "default" (set from published measurements on this GPU's architecture),
            "unmeasured" (no measurement on this architecture: a guess), "measured"
            (calibrated on this GPU model) or "set" (by the user).
        detail: where a measured or set figure comes from, for the notes.
    """

    matmul: float = UNMEASURED_MATMUL_UTILIZATION
    attention: float = UNMEASURED_MATMUL_UTILIZATION * ATTENTION_SHARE
    memory: float = MEMORY_UTILIZATION
    link: float = LINK_UTILIZATION
    launch_seconds: float = LAUNCH_SECONDS
    source: str = "default"
    detail: str = ""

    def __post_init__(self) -> None:
        for name in ("matmul", "attention", "memory", "link"):
            share = getattr(self, name)
            if not 0 < share <= 1:
                raise WorkloadError(f"{name} utilization must be in (0, 1], got {share}")
        if self.launch_seconds < 0:
            raise WorkloadError("launch time must not be negative")

    @classmethod
    def default_for(cls, architecture: str) -> Utilization:
        """The default shares for a GPU of ``architecture``; "unmeasured" where no published
        measurement on that architecture set them."""
        matmul = MATMUL_UTILIZATION_BY_ARCHITECTURE.get(architecture)
        if matmul is None:
            return cls(source="unmeasured", detail=architecture or "unknown architecture")
        return cls(matmul=matmul, attention=matmul * ATTENTION_SHARE, detail=architecture)

    def scaled(self, factor: float, source: str, detail: str) -> Utilization:
        """The compute shares scaled by ``factor`` (a measured speed over this model's), capped
        at the peak."""
        return replace(
            self,
            matmul=min(1.0, self.matmul * factor),
            attention=min(1.0, self.attention * factor),
            source=source,
            detail=detail,
        )


@dataclass(frozen=True, slots=True)
class TrainingSpeed:
    """Throughput of one training setup.

    Attributes:
        tokens_per_second: tokens trained per second over all GPUs.
        tokens_per_second_per_gpu: the same per GPU.
        step_seconds: one optimizer step (every micro-batch of ``grad_accum``).
        tokens_per_step: tokens of one optimizer step over all GPUs.
        model_flops_per_token: FLOPs the training of one token needs (no recomputation).
        mfu: model FLOPs utilization: model FLOPs per second over the GPUs' peak.
        seconds_by_part: seconds of one step per kind of work, per GPU (they add to the step).
        bound: the part that takes longest.
        utilization: the shares used.
        notes: what the figure assumes.
    """

    tokens_per_second: float
    tokens_per_second_per_gpu: float
    step_seconds: float
    tokens_per_step: int
    model_flops_per_token: float
    mfu: float
    seconds_by_part: dict[str, float]
    bound: str
    utilization: Utilization
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's ``speed`` block (docs/cli.md)."""
        u = self.utilization
        return {
            "tokens_per_second": round(self.tokens_per_second, 1),
            "tokens_per_second_per_gpu": round(self.tokens_per_second_per_gpu, 1),
            "step_seconds": round(self.step_seconds, 4),
            "tokens_per_step": self.tokens_per_step,
            "model_flops_per_token": round(self.model_flops_per_token),
            "mfu": round(self.mfu, 4),
            "seconds_by_part": {k: round(v, 5) for k, v in self.seconds_by_part.items()},
            "bound": self.bound,
            "utilization": {
                "matmul": round(u.matmul, 4),
                "attention": round(u.attention, 4),
                "memory": u.memory,
                "link": u.link,
                "source": u.source,
                **({"detail": u.detail} if u.detail else {}),
            },
            "notes": list(self.notes),
        }


# Parts of a step, as reported in TrainingSpeed.seconds_by_part.
MATMUL = "matmul"
ATTENTION = "attention"
MEMORY = "memory"
OPTIMIZER = "optimizer"
COMMUNICATION = "communication"
LAUNCH = "launch"
PIPELINE_BUBBLE = "pipeline_bubble"
OFFLOAD = "offload"


def training_speed(
    spec: ModelSpec,
    workload: Workload,
    hardware: Hardware,
    utilization: Utilization | None = None,
) -> TrainingSpeed:
    """Tokens per second and step time of ``workload`` (training) on GPUs like ``hardware``.

    Raises:
        WorkloadError: not a training workload, or settings the model cannot take.
    """
    w = workload
    if w.mode != "training":
        raise WorkloadError(
            Message("a training speed needs {mode}", mode=Setting("mode", "training"))
        )
    u = utilization or Utilization.default_for(hardware.architecture)
    m = token_work(spec, w)
    plan = parallel.plan(spec, w)
    notes: list[str] = []
    tokens = float(w.batch * w.seq)  # one micro-batch on one data-parallel rank
    flops_rate = hardware.flops
    mem_rate = hardware.memory_bytes_per_s * u.memory
    gc = 1.0 if w.grad_checkpointing else 0.0
    backward_attention = ATTENTION_BACKWARD[w.attention]

    # Matrix-product FLOPs of one micro-batch, forward / recomputed forward / backward.
    fwd_block = 2.0 * tokens * (m.block_matmul + m.adapter_matmul)
    fwd_head = 2.0 * tokens * m.head_matmul
    trained_head = m.head_matmul if w.method == "full" else 0.0
    bwd = (
        2.0
        * tokens
        * (
            m.block_matmul
            + m.head_matmul
            + m.trainable_block
            + trained_head
            + 2.0 * m.adapter_matmul
        )
    )
    attn_fwd = tokens * attention_flops(spec, w)
    matmul_rate = flops_rate * u.matmul
    attention_rate = flops_rate * u.attention

    def pass_seconds(flops: float, attention: float, read_bytes: float) -> tuple[float, float]:
        """(matmul, attention) seconds of one pass, the products no faster than their reads."""
        return max(flops / matmul_rate, read_bytes / mem_rate), attention / attention_rate

    passes = [
        pass_seconds(fwd_block + fwd_head, attn_fwd, m.weight_read_bytes),
        pass_seconds(bwd, backward_attention * attn_fwd, m.weight_read_bytes),
    ]
    if gc:
        passes.append(pass_seconds(fwd_block, attn_fwd, m.weight_read_bytes))
    matmul_s = sum(p[0] for p in passes)
    attention_s = sum(p[1] for p in passes)
    forward_passes = 1.0 + gc
    memory_bytes = (
        tokens * (m.elementwise_bytes + m.lora_bytes) * (forward_passes + BACKWARD_PASSES)
        + tokens * m.loss_bytes
        + tokens * m.upcast_bytes * (forward_passes + 1.0)
        + m.dequant_bytes * (forward_passes + 1.0)
        + m.cast_bytes * forward_passes
    )
    memory_s = memory_bytes / mem_rate
    gpu_s = matmul_s + attention_s + memory_s
    launch_s = u.launch_seconds * m.kernels * (forward_passes + BACKWARD_PASSES)
    micro_s = max(gpu_s, launch_s)
    fwd_share = passes[0][0] + passes[0][1]
    bwd_share = micro_s - fwd_share

    # The optimizer step, once per step, over this GPU's share of the trainable parameters.
    trainable = _trainable_on_gpu(spec, w, plan)
    state_bytes = 4 if w.precision in ("mixed", "fp32") or w.dtype == "fp32" else 2
    opt_passes = OPTIMIZER_PASSES[w.optimizer] + (CLIPPING_PASSES if w.loop == "trainer" else 0.0)
    optimizer_s = trainable * state_bytes * opt_passes / mem_rate

    comm_s, comm_notes = _communication(
        spec, w, plan, hw=hardware, u=u, m=m, tokens=tokens, fwd_s=fwd_share, bwd_s=bwd_share
    )
    notes += comm_notes
    offload_s = 0.0
    if plan.offload_states:
        moved = trainable * (state_bytes + dtypes.dtype_bytes(w.dtype))
        offload_s = moved / hardware.pcie_bytes_per_s + trainable * (
            CPU_ADAM_BYTES_PER_PARAMETER / HOST_BYTES_PER_S
        )
        optimizer_s = 0.0
        if plan.offload_params:
            offload_s += w.grad_accum * 2 * m.weight_read_bytes / hardware.pcie_bytes_per_s
        notes.append(
            "CPU offload: the optimizer step runs on the host (DeepSpeed's CPU Adam at host "
            "memory speed) and the states and gradients cross PCIe; a rough figure"
        )

    accum = float(w.grad_accum)
    parts = {
        MATMUL: accum * matmul_s,
        ATTENTION: accum * attention_s,
        MEMORY: accum * memory_s,
        LAUNCH: accum * max(0.0, launch_s - gpu_s),
        OPTIMIZER: optimizer_s,
        COMMUNICATION: comm_s,
        OFFLOAD: offload_s,
    }
    step = sum(parts.values())
    if plan.pp > 1:
        # 1F1B: (stages - 1) micro-batches' time of filling and draining.
        parts[PIPELINE_BUBBLE] = (plan.pp - 1) / accum * (step - optimizer_s)
        step += parts[PIPELINE_BUBBLE]
        notes.append(
            Message(
                "pipeline bubble of {bubble} micro-batches over {accum} (raise {setting} to "
                "shrink it)",
                bubble=plan.pp - 1,
                accum=w.grad_accum,
                setting=Setting("grad_accum"),
            )
        )
    tokens_per_step = w.batch * w.seq * w.grad_accum * plan.dp
    per_second = tokens_per_step / step
    model_flops = model_flops_per_token(spec, w)
    mfu = model_flops * per_second / (flops_rate * w.gpus)
    if spec.facts.layer_types and any(
        t in (LayerType.LINEAR, LayerType.MAMBA, LayerType.CONV) for t in spec.facts.layer_types
    ):
        notes.append("linear-attention / state-space layers: their token mixing is not costed")
    if kbit_upcast(w):
        notes.append(
            "QLoRA without sharding: prepare_model_for_kbit_training keeps the norms in fp32, so "
            "the hidden states are fp32 (the elementwise work moves twice the bytes and each "
            "4-bit linear casts its input to the compute dtype and its output back)"
        )
    if w.attention == "eager":
        notes.append("eager attention computes the whole score matrix and then masks it")
    if u.source == "default" and hardware.name not in MEASURED_GPUS.get(u.detail, ()):
        measured_on = ", ".join(MEASURED_GPUS.get(u.detail, ()))
        notes.append(
            f"no published training throughput on {hardware.name} was checked: it takes the "
            f"{u.detail} default ({u.matmul:.0%} of the tensor peak, set on {measured_on})"
        )
    if u.source == "unmeasured":
        notes.append(
            Message(
                "no published training throughput on {detail} was checked: the utilization "
                "({share:.0%} of the tensor peak) is a guess; {measure} measures it on this GPU",
                detail=u.detail,
                share=u.matmul,
                measure=Command("measure", "--device cuda"),
            )
        )
    return TrainingSpeed(
        tokens_per_second=per_second,
        tokens_per_second_per_gpu=per_second / w.gpus,
        step_seconds=step,
        tokens_per_step=tokens_per_step,
        model_flops_per_token=model_flops,
        mfu=mfu,
        seconds_by_part={k: v for k, v in parts.items() if v},
        bound=max(parts, key=lambda k: parts[k]),
        utilization=u,
        notes=tuple(notes),
    )


def _trainable_on_gpu(spec: ModelSpec, w: Workload, plan: parallel.ParallelPlan) -> float:
    """Trainable parameters one GPU steps: its tensor / pipeline share, over the ranks ZeRO or
    FSDP divide the states over."""
    return token_work(spec, w).trainable / (plan.tp * plan.pp) / plan.state_shards


def _communication(
    spec: ModelSpec,
    w: Workload,
    plan: parallel.ParallelPlan,
    *,
    hw: Hardware,
    u: Utilization,
    m: TokenWork,
    tokens: float,
    fwd_s: float,
    bwd_s: float,
) -> tuple[float, list[str]]:
    """Seconds of one step's communication that the passes do not hide, and notes."""
    notes: list[str] = []
    seconds = 0.0
    across_machines = w.gpus > hw.gpus_per_machine
    link = (hw.network_bytes_per_s if across_machines else hw.link_bytes_per_s) * u.link
    dp = plan.dp
    accum = float(w.grad_accum)
    if dp > 1:
        ring = (dp - 1) / dp
        grad_item = 4 if w.precision in ("mixed", "fp32") or w.dtype == "fp32" else 2
        if w.method == "full" and w.precision == "mixed" and (w.zero or w.fsdp):
            grad_item = dtypes.dtype_bytes(w.dtype)  # sharded mixed precision reduces 16-bit
        trainable = _trainable_on_gpu(spec, w, plan) * plan.state_shards
        grads = trainable * grad_item
        weights = m.weight_read_bytes
        if w.zero == 3 or w.fsdp:
            # Every micro-batch gathers the weights for its forward and again for its backward
            # and reduce-scatters the gradients; prefetching hides them behind the passes.
            gather = ring * weights / link
            scatter = ring * grads / link
            per_micro = max(0.0, gather - fwd_s) + max(0.0, gather + scatter - bwd_s)
            seconds += accum * per_micro
        elif w.zero in (1, 2):
            reduce = ring * grads / link
            seconds += accum * max(0.0, reduce - bwd_s) + ring * weights / link
        else:
            # DDP all-reduces once per step, in buckets during the last backward.
            seconds += max(0.0, 2.0 * ring * grads / link - bwd_s)
        if across_machines:
            notes.append(
                f"{w.gpus} GPUs span machines: collectives at {hw.network_bytes_per_s / 1e9:.0f} "
                "GB/s per GPU between them"
            )
    if plan.tp > 1:
        # Two all-reduces of the hidden states per block in the forward and two in the backward
        # (two more when checkpointing recomputes the forward), not overlapped.
        per_reduce = 2.0 * (plan.tp - 1) / plan.tp * tokens * spec.facts.hidden_size * 2
        reduces = (4.0 + (2.0 if w.grad_checkpointing else 0.0)) * m.layers
        tp_link = hw.link_bytes_per_s * u.link
        seconds += accum * reduces * per_reduce / tp_link
    return seconds, notes


# --- time and cost ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Price:
    """What one GPU costs an hour, and where the figure comes from.

    Attributes:
        per_gpu_hour: the price of one GPU for one hour.
        currency: ISO code, e.g. "USD".
        source: who quoted it (a URL or "set by the user").
        date: when it was taken (ISO date), or "".
    """

    per_gpu_hour: float
    currency: str = "USD"
    source: str = ""
    date: str = ""

    def __post_init__(self) -> None:
        if not (self.per_gpu_hour >= 0 and math.isfinite(self.per_gpu_hour)):
            raise WorkloadError(f"a price per GPU-hour must be 0 or more, got {self.per_gpu_hour}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_gpu_hour": self.per_gpu_hour,
            "currency": self.currency,
            "source": self.source,
            "date": self.date,
        }


@dataclass(frozen=True, slots=True)
class RunCost:
    """A whole training run: its tokens, wall time, GPU-hours and cost.

    Attributes:
        tokens: tokens trained (every epoch).
        time_seconds: wall time.
        gpu_hours: GPUs times hours.
        cost: GPU-hours times the price, or None without a price.
        price: the price used.
    """

    tokens: int
    time_seconds: float
    gpu_hours: float
    cost: float | None
    price: Price | None = None


def run_cost(speed: TrainingSpeed, gpus: int, tokens: int, price: Price | None) -> RunCost:
    """Time, GPU-hours and cost of training ``tokens`` tokens at ``speed`` on ``gpus`` GPUs."""
    if tokens < 1:
        raise WorkloadError(f"the tokens to train must be at least 1, got {tokens}")
    seconds = tokens / speed.tokens_per_second
    gpu_hours = gpus * seconds / 3600.0
    cost = None if price is None else gpu_hours * price.per_gpu_hour
    return RunCost(tokens, seconds, gpu_hours, cost, price)


def cost_per_million_tokens(tokens_per_second: float, gpus: int, price: Price) -> float:
    """The price of one million tokens at ``tokens_per_second`` over ``gpus`` GPUs."""
    if tokens_per_second <= 0:
        raise WorkloadError("a cost per token needs a positive throughput")
    return gpus * price.per_gpu_hour / 3600.0 / tokens_per_second * 1e6
