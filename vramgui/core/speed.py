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

from vramgui.core import dtypes, llamacpp_speed, parallel, serving_steps
from vramgui.core.engines import engine
from vramgui.core.errors import Command, Message, Setting, WorkloadError
from vramgui.core.model import LayerType, ModelSpec
from vramgui.core.offload.placement import model_units
from vramgui.core.training.weights import kbit_upcast
from vramgui.core.training.work import (
    ATTENTION_BACKWARD,
    TokenWork,
    attention_flops,
    model_flops_per_token,
    token_work,
)
from vramgui.core.vllm.profile import SERVE_BATCHED_TOKENS
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


@dataclass(frozen=True, slots=True)
class ServingSpeed:
    """Decoding throughput of an inference setup at a concurrency.

    Attributes:
        concurrency: sequences decoded together (the workload's batch).
        tokens_per_second: tokens generated per second over the setup's GPUs.
        step_seconds: one decode step (one token for each sequence).
        bound: "memory" (weights and KV cache reads), "matmul" (their products) or, for vLLM's
            and SGLang's step, "host" (the engine's own time per step outweighs the GPU's).
        basis: "measured" or "extrapolated" where llama.cpp's published llama-bench rows set the
            figure (``core.llamacpp_speed``: one sequence on one GPU) or where vLLM's step fitted
            on published serving runs does (``core.serving_steps``: vLLM and SGLang, measured
            where runs of the engine on that GPU are among them), "roofline" where it is the
            datasheet roofline at the training model's shares, checked against no measurement
            (transformers, llama.cpp's batches, or shares the user set).
        notes: what the figure assumes (the builds measured, why it is extrapolated).
        prefill_seconds: the time to first token: processing the prompt (``workload.prompt``,
            else the whole context) from an empty cache: llama.cpp's on one GPU, vLLM's and
            SGLang's step for one request alone, the roofline's for the others (None for
            llama.cpp split over GPUs, which pipelines a long prompt).
        host_range: where the host's class moves the speed by more than ``HOST_RANGE_SHARE``
            (every step bound by the engine's fixed time, ``bound`` "host", and others where
            that time is a large part): the tokens per second on the default, slow host class
            (``tokens_per_second``) and on the fast one (``serving_steps.VLLM_HOSTS``); else
            None.
    """

    concurrency: int
    tokens_per_second: float
    step_seconds: float
    bound: str
    basis: str = "roofline"
    notes: tuple[str, ...] = ()
    prefill_seconds: float | None = None
    host_range: tuple[float, float] | None = None


# Every other engine's decode (transformers' generate, llama.cpp's batches): no published run
# checks it.
ROOFLINE_SERVING_NOTE = (
    "approximate: the datasheet roofline at default shares, checked against no published run of "
    "this engine (docs/performance.md, 'vLLM and SGLang serving', checks vLLM's and SGLang's)"
)
# The engines timed by a step fitted on published serving runs (``Engine.step_model``): what the
# figure rests on, measured where runs of the engine on the GPU are among the rows
# (``Engine.serving_runs_on``), extrapolated elsewhere.
MEASURED_SERVING_NOTE = (
    "approximate: {model}'s step fitted on published serving runs, {engine} runs on {gpu} among "
    "them (docs/performance.md, 'vLLM and SGLang serving')"
)
EXTRAPOLATED_SERVING_NOTE = (
    "approximate: {model}'s step fitted on published serving runs, none of {engine} on {gpu}: "
    "extrapolated from its datasheet bandwidth and tensor peak (docs/performance.md, 'vLLM and "
    "SGLang serving')"
)
BORROWED_STEP_NOTE = (
    "{engine} takes {model}'s step figures, checked on its own published runs "
    "(docs/performance.md, 'vLLM and SGLang serving')"
)
HOST_RANGE_NOTE = (
    "{share} the engine's fixed time ({fixed:.1f} ms: scheduler, sampler, launch), which follows "
    "the host's CPU: the figure takes {slow_host}, the slower of the published runs' hosts, as a "
    "rented GPU's host may be; on {fast_host} ({fast_fixed:.1f} ms a step) it is {high:,.0f} "
    "tokens/s, so {low:,.0f} to {high:,.0f} tokens/s by the host (docs/performance.md, 'vLLM and "
    "SGLang serving')"
)
# The host's class moves a step's speed by more than this share: the estimate gives the range.
HOST_RANGE_SHARE = 0.10


# What the first token of a vLLM or SGLang setup rests on (``serving_steps.first_token_seconds``)
# and how far published single-request runs put it (docs/performance.md, "vLLM and SGLang
# serving").
FIRST_TOKEN_NOTE = (
    "first token approximate: the prompt's prefill at the step's rates (within 15 % on 8 of the "
    "11 published prompts of 1k to 29k tokens) plus the engine's own time per request, "
    "{request:.0f} ms (0 to 40 ms in published one-GPU runs, with the host; 40 to 190 ms on 8 "
    "GPUs), which sets it for short prompts"
)


def serving_rates(
    hardware: Hardware,
    utilization: Utilization | None = None,
    figures: serving_steps.StepFigures = serving_steps.VLLM,
) -> serving_steps.StepRates:
    """What a vLLM or SGLang step reaches on ``hardware``: the weights and the paged KV cache at
    ``figures``' shares of the bandwidth, the products at the training model's shares of the
    tensor peak for the GPU's architecture, the link at NCCL's share (``serving_steps``)."""
    u = utilization or Utilization.default_for(hardware.architecture)
    bandwidth = hardware.memory_bytes_per_s
    return serving_steps.StepRates(
        weight_bytes_per_s=bandwidth * figures.weight_share,
        kv_bytes_per_s=bandwidth * figures.kv_share,
        matmul_flops_per_s=hardware.flops * u.matmul,
        attention_flops_per_s=hardware.flops * u.attention,
        link_bytes_per_s=hardware.link_bytes_per_s * u.link,
        collective_seconds=COLLECTIVE_LATENCY_SECONDS,
        step_seconds=figures.step_seconds,
        sequence_seconds=figures.sequence_seconds,
    )


def serving_speed(
    spec: ModelSpec,
    workload: Workload,
    hardware: Hardware,
    utilization: Utilization | None = None,
) -> ServingSpeed:
    """Decode speed of ``workload`` (inference, every weight on the GPUs) at full context.

    vLLM and SGLang take vLLM's step (``core.serving_steps``: fitted on published serving runs)
    at ``batch`` sequences of ``seq`` tokens, unless the utilization was set or calibrated by
    the user. Other engines take the roofline: a step reads each GPU's share of the weights (the
    routed experts some token of the batch runs through) and of every sequence's KV cache, and
    computes 2 FLOPs per active weight and the attention over the cache per sequence, at the
    memory and matrix-product shares of the training model; tensor parallelism adds two
    all-reduces of the hidden states per block over the link, each at least NCCL's
    small-message latency.

    One sequence with llama.cpp (on one GPU, or split by layers) takes llama.cpp's own speed at
    the full context instead (``core.llamacpp_speed``, set from published llama-bench rows), and
    on one GPU the time to first token for the prompt, unless the utilization was set or
    calibrated by the user.

    Raises:
        WorkloadError: not an inference workload, or settings the model cannot take.
    """
    w = workload
    if w.mode != "inference":
        raise WorkloadError(
            Message("a serving speed needs {mode}", mode=Setting("mode", "inference"))
        )
    concurrency = w.batch
    own_shares = utilization is None or utilization.source in ("default", "unmeasured")
    if own_shares and engine(w.engine).ggml and concurrency == 1 and w.tp == 1:
        own = llamacpp_speed.decode(spec, w, hardware, depth=w.seq, gpus=w.gpus)
        # Several GPUs pipeline a long prompt's micro-batches: not modelled, no figure.
        prompt = (
            None if w.gpus > 1 else llamacpp_speed.prefill(spec, w, hardware, w.prompt or w.seq)
        )
        return ServingSpeed(
            1,
            own.tokens_per_second,
            own.seconds,
            MEMORY,
            own.basis,
            own.notes,
            None if prompt is None else prompt.seconds,
        )
    if own_shares and engine(w.engine).step_model:
        return _engine_step(spec, w, hardware, utilization)
    u = utilization or Utilization.default_for(hardware.architecture)
    read = cache = flops = 0.0
    # One sequence's prompt from an empty cache: every weight read once (each expert is some
    # token's), the products of every prompt token, causal attention over the prompt.
    prompt_tokens = w.prompt or w.seq
    prompt_read = prompt_products = prompt_attention = 0.0
    for unit in model_units(spec, w):
        params = float(unit.parameters - unit.expert_parameters)
        if unit.index == 0 and not unit.read_bytes:
            params = 0.0  # an embedding lookup
        read += unit.read_bytes
        prompt_read += unit.read_bytes + unit.expert_bytes
        cache += unit.kv_cache_bytes  # one GPU's already (a latent cache is replicated)
        if unit.experts:
            share = 1.0 - (1.0 - unit.experts_per_token / unit.experts) ** concurrency
            read += unit.expert_bytes * share
            params += unit.expert_parameters * unit.experts_per_token / unit.experts
        flops += 2.0 * concurrency * params + 4.0 * concurrency * w.seq * unit.attention_width
        prompt_products += 2.0 * prompt_tokens * params
        prompt_attention += 4.0 * prompt_tokens * (prompt_tokens + 1) / 2 * unit.attention_width
    memory_s = (read / w.tp + cache) / (hardware.memory_bytes_per_s * u.memory)
    compute_s = flops / w.tp / (hardware.flops * u.matmul)
    step = max(memory_s, compute_s)
    first_token = max(
        prompt_read / w.tp / (hardware.memory_bytes_per_s * u.memory),
        prompt_products / w.tp / (hardware.flops * u.matmul),
    ) + prompt_attention / w.tp / (hardware.flops * u.attention)
    if w.tp > 1:
        reduces = 2.0 * spec.facts.num_layers
        volume = 2.0 * (w.tp - 1) / w.tp * concurrency * spec.facts.hidden_size * 2
        link = hardware.link_bytes_per_s * u.link
        step += reduces * (COLLECTIVE_LATENCY_SECONDS + volume / link)
    return ServingSpeed(
        concurrency=concurrency,
        tokens_per_second=concurrency / step,
        step_seconds=step,
        bound=MEMORY if memory_s >= compute_s else MATMUL,
        notes=(ROOFLINE_SERVING_NOTE,) if own_shares else (),
        prefill_seconds=first_token,
    )


def _engine_step(
    spec: ModelSpec, w: Workload, hardware: Hardware, utilization: Utilization | None
) -> ServingSpeed:
    """The engine's decode step (``core.serving_steps``, the figures fitted on the published runs
    of ``Engine.step_model``) at ``w.batch`` sequences of ``w.seq`` tokens, with what it rests
    on."""
    work = serving_steps.step_work(spec, w)

    def step_on(host: str) -> tuple[serving_steps.StepTime, serving_steps.StepRates]:
        rates = serving_rates(hardware, utilization, serving_steps.VLLM_HOSTS[host])
        step = serving_steps.step_time(
            work, rates, sequences=w.batch, context_tokens=float(w.batch * w.seq)
        )
        return step, rates

    step, rates = step_on(serving_steps.DEFAULT_HOST)
    # The GPU's memory is not known here: a prompt is chunked at the smaller GPUs' default, a
    # few steps' fixed time more than the larger ones' on a long prompt.
    first = serving_steps.first_token_seconds(
        work,
        rates,
        prompt_tokens=w.prompt or w.seq,
        batched_tokens=w.max_num_batched_tokens or SERVE_BATCHED_TOKENS[0],
    )
    e = engine(w.engine)
    measured = hardware.name in e.serving_runs_on
    template = MEASURED_SERVING_NOTE if measured else EXTRAPOLATED_SERVING_NOTE
    notes = [template.format(model=e.step_model, engine=e.name, gpu=hardware.name)]
    if e.step_model != e.name:
        notes.append(BORROWED_STEP_NOTE.format(engine=e.name, model=e.step_model))
    fast, fast_rates = step_on(serving_steps.FAST_HOST)
    host_range = None
    if step.seconds > fast.seconds * (1 + HOST_RANGE_SHARE):
        host_range = (w.batch / step.seconds, w.batch / fast.seconds)
        bound_by_host = step.bound == serving_steps.HOST
        share = f"{rates.step_seconds / step.seconds:.0%} of this step is"
        notes.append(
            HOST_RANGE_NOTE.format(
                share="most of this step is" if bound_by_host else share,
                fixed=rates.step_seconds * 1e3,
                slow_host=serving_steps.HOST_LABELS[serving_steps.DEFAULT_HOST],
                fast_host=serving_steps.HOST_LABELS[serving_steps.FAST_HOST],
                fast_fixed=fast_rates.step_seconds * 1e3,
                low=host_range[0],
                high=host_range[1],
            )
        )
    notes.append(FIRST_TOKEN_NOTE.format(request=serving_steps.FIRST_TOKEN.request_seconds * 1e3))
    return ServingSpeed(
        concurrency=w.batch,
        tokens_per_second=w.batch / step.seconds,
        step_seconds=step.seconds,
        bound=step.bound,
        basis=llamacpp_speed.MEASURED if measured else llamacpp_speed.EXTRAPOLATED,
        notes=tuple(notes),
        prefill_seconds=first,
        host_range=host_range,
    )
