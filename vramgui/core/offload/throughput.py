"""The speed of a placement, a roofline: per decode step each unit costs the bytes it reads
from where it lives over that link's bandwidth, against its FLOPs at the device's rate.
llama.cpp computes host layers on the CPU; accelerate and streaming copy them over PCIe to the
GPU (accelerate's hooks wait for each copy, streaming overlaps copies with compute)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.core import activations
from vramgui.core.errors import WorkloadError
from vramgui.core.offload.placement import DISK, ModelUnit, Placement, is_gpu

# The share of peak memory bandwidth decoding reaches: with 80 % of the GPU's and 70 % of host
# RAM's, the roofline lands within 8 % of nine llama.cpp measurements that peak figures overrate by
# 19-46 % (docs/offload.md, "llama.cpp partial offload"). Speeds built from datasheet peaks
# (``expected_bandwidths``) take these shares by default.
GPU_MEMORY_EFFICIENCY = 0.8
HOST_MEMORY_EFFICIENCY = 0.7
# Host-side defaults the user may edit: dual-channel DDR5-4800, the base DDR5 speed, peaks at
# 76.8 GB/s (DDR4-3200: 51.2). A desktop CPU sustains well under 1 TFLOPS in llama.cpp's matrix
# kernels (8-16 cores with AVX2 / AVX-512).
DEFAULT_CPU_RAM_PEAK_BYTES_PER_S = 76_800_000_000
DEFAULT_CPU_RAM_BYTES_PER_S = round(DEFAULT_CPU_RAM_PEAK_BYTES_PER_S * HOST_MEMORY_EFFICIENCY)
DEFAULT_CPU_FLOPS = 500_000_000_000

# llama.cpp hands matrix products of host-resident weights to the GPU when a batch has at least this
# many tokens (ggml-cuda's offload_op threshold), copying the weights over PCIe.
LLAMACPP_OP_OFFLOAD_MIN_BATCH = 32

# Resources a step spends time on, as reported in Throughput.bound.
GPU_MEMORY = "gpu_memory"
GPU_COMPUTE = "gpu_compute"
CPU_MEMORY = "cpu_memory"
CPU_COMPUTE = "cpu_compute"
PCIE = "pcie"
DISK_READ = "disk"
COMPUTE_RESOURCES = (GPU_COMPUTE, CPU_COMPUTE)


@dataclass(frozen=True, slots=True)
class Bandwidths:
    """Speeds the roofline uses, all editable; bytes per second and FLOP/s.

    Attributes:
        gpu_bytes_per_s: GPU memory (HBM / GDDR) bandwidth.
        pcie_bytes_per_s: host-to-GPU copies in practice.
        cpu_ram_bytes_per_s: host memory bandwidth, for layers computed on the CPU.
        disk_bytes_per_s: sequential read speed of the disk holding offloaded weights.
        gpu_flops: dense 16-bit tensor throughput of the GPU.
        cpu_flops: what the CPU sustains in matrix products.

    These are the speeds the roofline uses: for what decoding reaches rather than datasheet peaks,
    build them with ``expected_bandwidths``.
    """

    gpu_bytes_per_s: float
    pcie_bytes_per_s: float
    cpu_ram_bytes_per_s: float
    disk_bytes_per_s: float
    gpu_flops: float
    cpu_flops: float

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if not value > 0:
                raise WorkloadError(f"{name.replace('_', ' ')} must be positive, got {value!r}")


def expected_bandwidths(
    *,
    gpu_peak_bytes_per_s: float,
    pcie_bytes_per_s: float,
    gpu_flops: float,
    cpu_ram_peak_bytes_per_s: float = DEFAULT_CPU_RAM_PEAK_BYTES_PER_S,
    disk_bytes_per_s: float,
    cpu_flops: float = DEFAULT_CPU_FLOPS,
    gpu_efficiency: float = GPU_MEMORY_EFFICIENCY,
    host_efficiency: float = HOST_MEMORY_EFFICIENCY,
) -> Bandwidths:
    """Speeds from datasheet peaks, the memory bandwidths at the share decoding reaches.

    PCIe and disk speeds are practical figures already (``hardware.host``); FLOP rates stay peaks.

    Raises:
        WorkloadError: an efficiency outside (0, 1] or a speed that is not positive.
    """
    for name, share in (("GPU efficiency", gpu_efficiency), ("RAM efficiency", host_efficiency)):
        if not 0 < share <= 1:
            raise WorkloadError(f"{name} must be in (0, 1], got {share}")
    return Bandwidths(
        gpu_bytes_per_s=gpu_peak_bytes_per_s * gpu_efficiency,
        pcie_bytes_per_s=pcie_bytes_per_s,
        cpu_ram_bytes_per_s=cpu_ram_peak_bytes_per_s * host_efficiency,
        disk_bytes_per_s=disk_bytes_per_s,
        gpu_flops=gpu_flops,
        cpu_flops=cpu_flops,
    )


@dataclass(frozen=True, slots=True)
class Throughput:
    """The roofline of one decode step: one new token for each of ``batch`` sequences.

    Attributes:
        batch: sequences decoded together.
        step_seconds: time of one step.
        tokens_per_second: tokens generated per second over the whole batch.
        seconds_by_resource: seconds each resource (``gpu_memory``, ``gpu_compute``,
            ``cpu_memory``, ``cpu_compute``, ``pcie``, ``disk``) is busy in the step. Where the
            engine waits for each in turn (llama.cpp, accelerate) they add up to the step; where
            it overlaps them (streaming) the step is the largest.
        bound: the resource that limits the step.
    """

    batch: int
    step_seconds: float
    tokens_per_second: float
    seconds_by_resource: dict[str, float]
    bound: str

    @property
    def compute_bound(self) -> bool:
        return self.bound in COMPUTE_RESOURCES


@dataclass(frozen=True, slots=True)
class _Work:
    """Bytes and FLOPs of one unit in one forward."""

    read_bytes: float  # weights the matrix products read
    copy_bytes: float  # the whole unit, as a copy to the GPU moves it
    kv_bytes: float  # cache the attention reads
    flops: float  # matrix products with the weights
    attention_flops: float  # scores and weighted sums over the cache


def _work(unit: ModelUnit, batch: int, new_tokens: int, context: float, kv_scale: float) -> _Work:
    tokens = batch * new_tokens
    read = float(unit.read_bytes)
    params = float(unit.parameters - unit.expert_parameters)
    if unit.index == 0 and not unit.read_bytes:
        params = 0.0  # a lookup, no matrix product
    if unit.experts:
        # Uniform routing: the share of experts at least one of the tokens goes to.
        share = 1.0 - (1.0 - unit.experts_per_token / unit.experts) ** tokens
        read += unit.expert_bytes * share
        params += unit.expert_parameters * unit.experts_per_token / unit.experts
    attention = 4.0 * tokens * context * unit.attention_width
    return _Work(
        read, float(unit.bytes), unit.kv_cache_bytes * kv_scale, 2.0 * tokens * params, attention
    )


def _forward_seconds(
    placement: Placement,
    bw: Bandwidths,
    batch: int,
    new_tokens: int,
    *,
    context: float,
    kv_read: bool,
) -> dict[str, float]:
    """Seconds per resource of one forward of ``new_tokens`` tokens for each of ``batch`` sequences."""
    busy = dict.fromkeys((GPU_MEMORY, GPU_COMPUTE, CPU_MEMORY, CPU_COMPUTE, PCIE, DISK_READ), 0.0)
    w = placement.workload
    kv_scale = batch / w.batch if kv_read else 0.0
    llamacpp = placement.planner == "llamacpp"
    # llama.cpp cuts a prompt into micro-batches and reads every weight once per micro-batch.
    passes = 1
    if llamacpp and new_tokens > 1:
        passes = math.ceil(batch * new_tokens / activations.LLAMACPP_UBATCH)
    tokens_per_pass = batch * new_tokens / passes
    for p in placement.units:
        work = _work(p.unit, batch, new_tokens, context, kv_scale)
        on_cpu = (
            llamacpp and not is_gpu(p.device) and tokens_per_pass < LLAMACPP_OP_OFFLOAD_MIN_BATCH
        )
        if on_cpu:
            # Small batches run on the CPU, reading host RAM (or the disk, once RAM is short).
            memory, speed = (
                (DISK_READ, bw.disk_bytes_per_s)
                if p.device == DISK
                else (CPU_MEMORY, bw.cpu_ram_bytes_per_s)
            )
            compute, flops = CPU_COMPUTE, bw.cpu_flops
        else:
            memory, speed, compute, flops = (
                GPU_MEMORY,
                bw.gpu_bytes_per_s,
                GPU_COMPUTE,
                bw.gpu_flops,
            )
            if not is_gpu(p.device):
                # Copied to the GPU for every pass (accelerate, streaming, llama.cpp's big batches).
                copies = passes * work.copy_bytes
                if p.device == DISK:
                    busy[DISK_READ] += copies / bw.disk_bytes_per_s
                busy[PCIE] += copies / bw.pcie_bytes_per_s
        memory_s = passes * work.read_bytes / speed
        compute_s = work.flops / flops
        if is_gpu(p.kv_device) != on_cpu or not work.kv_bytes:
            memory_s += work.kv_bytes / speed
            compute_s += work.attention_flops / flops
        elif is_gpu(p.kv_device):
            # The attention runs where the cache lives (llama.cpp's GPU layers' KV, rare).
            _roof(
                busy,
                GPU_MEMORY,
                work.kv_bytes / bw.gpu_bytes_per_s,
                GPU_COMPUTE,
                work.attention_flops / bw.gpu_flops,
            )
        else:
            # A cache in host RAM: the CPU computes the attention over it (FlexGen, --no-kv-offload).
            _roof(
                busy,
                CPU_MEMORY,
                work.kv_bytes / bw.cpu_ram_bytes_per_s,
                CPU_COMPUTE,
                work.attention_flops / bw.cpu_flops,
            )
        _roof(busy, memory, memory_s, compute, compute_s)
    return busy


def _roof(
    busy: dict[str, float], memory: str, memory_s: float, compute: str, compute_s: float
) -> None:
    """Charge a unit's time to its memory or its compute, whichever it waits for."""
    if compute_s > memory_s:
        busy[compute] += compute_s
    else:
        busy[memory] += memory_s


def _step_seconds(placement: Placement, busy: dict[str, float]) -> tuple[float, str]:
    if placement.planner == "streaming":
        # Copies from disk, over PCIe, the GPU's work and the CPU's attention all overlap.
        lanes = {
            DISK_READ: busy[DISK_READ],
            PCIE: busy[PCIE],
            CPU_MEMORY: busy[CPU_MEMORY] + busy[CPU_COMPUTE],
            GPU_MEMORY: busy[GPU_MEMORY] + busy[GPU_COMPUTE],
        }
        lane = max(lanes, key=lambda k: lanes[k])
        if lane == GPU_MEMORY and busy[GPU_COMPUTE] > busy[GPU_MEMORY]:
            lane = GPU_COMPUTE
        if lane == CPU_MEMORY and busy[CPU_COMPUTE] > busy[CPU_MEMORY]:
            lane = CPU_COMPUTE
        return max(lanes.values()), lane
    return sum(busy.values()), max(busy, key=lambda k: busy[k])


def decode_throughput(
    placement: Placement, bandwidths: Bandwidths, batch: int | None = None
) -> Throughput:
    """Decode speed at full context (``workload.seq`` tokens cached) for ``batch`` sequences.

    The placement stays as it is; the KV cache scales with the batch where it lives.
    """
    batch = placement.workload.batch if batch is None else batch
    if batch < 1:
        raise WorkloadError(f"batch must be at least 1, got {batch}")
    busy = _forward_seconds(
        placement, bandwidths, batch, 1, context=float(placement.workload.seq), kv_read=True
    )
    step, bound = _step_seconds(placement, busy)
    return Throughput(batch, step, batch / step if step else math.inf, busy, bound)


DEFAULT_BATCHES = tuple(2**i for i in range(11))


def throughput_curve(
    placement: Placement, bandwidths: Bandwidths, batches: Sequence[int] = DEFAULT_BATCHES
) -> tuple[Throughput, ...]:
    """Decode throughput for each batch size (tokens/s vs batch)."""
    return tuple(decode_throughput(placement, bandwidths, b) for b in batches)


def compute_bound_batch(
    placement: Placement, bandwidths: Bandwidths, max_batch: int = 1 << 16
) -> int | None:
    """The smallest batch whose decode step is limited by compute, or None up to ``max_batch``."""
    if decode_throughput(placement, bandwidths, 1).compute_bound:
        return 1
    low, high = 1, 2
    while not decode_throughput(placement, bandwidths, high).compute_bound:
        if high >= max_batch:
            return None
        low, high = high, min(high * 2, max_batch)
    while high - low > 1:
        middle = (low + high) // 2
        if decode_throughput(placement, bandwidths, middle).compute_bound:
            high = middle
        else:
            low = middle
    return high


def prefill_seconds(
    placement: Placement,
    bandwidths: Bandwidths,
    prompt_tokens: int | None = None,
    batch: int | None = None,
) -> float:
    """Time to process a prompt of ``prompt_tokens`` (default: ``seq``) for ``batch`` sequences."""
    w = placement.workload
    prompt = w.seq if prompt_tokens is None else prompt_tokens
    batch = w.batch if batch is None else batch
    if prompt < 1 or batch < 1:
        raise WorkloadError("a prompt needs at least one token and one sequence")
    # Causal attention: each query sees on average half the prompt.
    busy = _forward_seconds(placement, bandwidths, batch, prompt, context=prompt / 2, kv_read=False)
    return _step_seconds(placement, busy)[0]
