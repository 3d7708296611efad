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
from vramgui.core.offload.defaults import (
    DEFAULT_CPU_FLOPS,
    DEFAULT_CPU_RAM_PEAK_BYTES_PER_S,
    GPU_MEMORY_EFFICIENCY,
    HOST_MEMORY_EFFICIENCY,
)
from vramgui.core.offload.devices import CPU, DISK, gpu_device, gpu_index, is_gpu
from vramgui.core.offload.placement import ModelUnit, Piece, Placement

# llama.cpp hands matrix products of host-resident weights to the GPU when a batch has at least this
# many tokens (ggml-cuda's offload_op threshold), copying the weights over PCIe.
LLAMACPP_OP_OFFLOAD_MIN_BATCH = activations.LLAMACPP_OP_OFFLOAD_MIN_BATCH

# Resources a step spends time on, as reported in Throughput.bound.
GPU_MEMORY = "gpu_memory"
GPU_COMPUTE = "gpu_compute"
CPU_MEMORY = "cpu_memory"
CPU_COMPUTE = "cpu_compute"
PCIE = "pcie"
DISK_READ = "disk"
SYNC = "sync"

# Each hand-over between a GPU and the CPU (or between GPUs) within a llama.cpp forward: the
# scheduler copies the activations across, waits for them and wakes the CPU's threads. Set from
# llmfit pull request 755 (RTX 2080 + i9-10900X, Qwen3-30B-A3B Q4_K_M, --n-cpu-moe 36: 36.7
# tokens/s measured, 60 from bytes alone; 72 hand-overs a token) and checked on Ollama issue
# 11772 (docs/offload.md).
LLAMACPP_SPLIT_SECONDS = 150e-6
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
        other_gpus: memory bandwidth and FLOP rate of GPU 1, 2... when a placement spans GPUs
            that differ from GPU 0 (a 4090 with a 3060); GPU 0's speeds where none is given.

    These are the speeds the roofline uses: for what decoding reaches rather than datasheet peaks,
    build them with ``expected_bandwidths``.
    """

    gpu_bytes_per_s: float
    pcie_bytes_per_s: float
    cpu_ram_bytes_per_s: float
    disk_bytes_per_s: float
    gpu_flops: float
    cpu_flops: float
    other_gpus: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "other_gpus":
                if any(not (bw > 0 and flops > 0) for bw, flops in value):
                    raise WorkloadError(f"GPU speeds must be positive, got {value!r}")
            elif not value > 0:
                raise WorkloadError(f"{name.replace('_', ' ')} must be positive, got {value!r}")

    def gpu(self, index: int) -> tuple[float, float]:
        """Memory bandwidth and FLOP rate of GPU ``index``: GPU 0 is ``gpu_bytes_per_s`` and
        ``gpu_flops``, GPU i > 0 is ``other_gpus[i - 1]`` (GPU 0's when not given)."""
        if 0 < index <= len(self.other_gpus):
            return self.other_gpus[index - 1]
        return self.gpu_bytes_per_s, self.gpu_flops


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
            ``cpu_memory``, ``cpu_compute``, ``pcie``, ``disk``, ``sync``: llama.cpp's hand-overs
            between devices) is busy in the step. Where the
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


def _weight_work(piece: Piece, unit: ModelUnit, tokens: int) -> tuple[float, float, float]:
    """Bytes read, bytes a copy to the GPU moves, and matrix FLOPs of a unit's weights on one
    device in one forward of ``tokens`` tokens."""
    read = float(piece.read_bytes)
    params = float(piece.parameters - piece.expert_parameters)
    if unit.index == 0 and not piece.read_bytes:
        params = 0.0  # a lookup, no matrix product
    if unit.experts and piece.expert_bytes:
        # Uniform routing: the share of experts at least one of the tokens goes to.
        share = 1.0 - (1.0 - unit.experts_per_token / unit.experts) ** tokens
        read += piece.expert_bytes * share
        params += piece.expert_parameters * unit.experts_per_token / unit.experts
    return read, float(piece.bytes), 2.0 * tokens * params


class _Lanes:
    """Memory and compute seconds per device within one unit, charged to the resources."""

    def __init__(self) -> None:
        self.memory: dict[str, float] = {}
        self.compute: dict[str, float] = {}

    def add(self, device: str, memory_s: float, compute_s: float) -> None:
        self.memory[device] = self.memory.get(device, 0.0) + memory_s
        self.compute[device] = self.compute.get(device, 0.0) + compute_s

    def charge(self, busy: dict[str, float], parallel_gpus: bool) -> None:
        """Each device waits for its memory or its compute; GPUs sharing a row-split layer work
        at once (the slowest counts), the rest one after the other."""
        gpu_lanes = []
        for device, memory_s in self.memory.items():
            compute_s = self.compute[device]
            if is_gpu(device):
                gpu_lanes.append((memory_s, compute_s))
                continue
            memory = DISK_READ if device == DISK else CPU_MEMORY
            _roof(busy, memory, memory_s, CPU_COMPUTE, compute_s)
        if parallel_gpus and gpu_lanes:
            memory_s, compute_s = max(gpu_lanes, key=max)
            _roof(busy, GPU_MEMORY, memory_s, GPU_COMPUTE, compute_s)
        else:
            for memory_s, compute_s in gpu_lanes:
                _roof(busy, GPU_MEMORY, memory_s, GPU_COMPUTE, compute_s)


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
    busy = dict.fromkeys(
        (GPU_MEMORY, GPU_COMPUTE, CPU_MEMORY, CPU_COMPUTE, PCIE, DISK_READ, SYNC), 0.0
    )
    w = placement.workload
    kv_scale = batch / w.batch if kv_read else 0.0
    llamacpp = placement.planner == "llamacpp"
    row_split = placement.layout is not None and placement.layout.split_mode == "row"
    # llama.cpp cuts a prompt into micro-batches and reads every weight once per micro-batch.
    passes = 1
    if llamacpp and new_tokens > 1:
        passes = math.ceil(batch * new_tokens / activations.llamacpp_ubatch(w))
    tokens = batch * new_tokens
    tokens_per_pass = tokens / passes
    # llama.cpp computes small batches where the weights are; from 32 tokens it copies host
    # weights to the GPU, unless --no-op-offload. accelerate and streaming always copy them.
    no_op_offload = placement.layout is not None and not placement.layout.op_offload
    host_computes = llamacpp and (tokens_per_pass < LLAMACPP_OP_OFFLOAD_MIN_BATCH or no_op_offload)
    main_gpu = gpu_device(placement.layout.main_gpu if placement.layout is not None else 0)

    def speeds(device: str) -> tuple[str, float, float]:
        """The device that computes what lives on ``device``, its bytes/s and FLOP/s."""
        if is_gpu(device):
            memory, flops = bw.gpu(gpu_index(device))
            return device, memory, flops
        if host_computes:
            return (
                device,
                bw.disk_bytes_per_s if device == DISK else bw.cpu_ram_bytes_per_s,
                bw.cpu_flops,
            )
        memory, flops = bw.gpu(gpu_index(main_gpu))
        return main_gpu, memory, flops

    # Where the forward computes, in order: the input layer on the host, each unit's layer and
    # then its parts elsewhere (experts in host RAM run after the layer's attention), the
    # logits read back on the host.
    where_runs = ["host"]
    for p in placement.units:
        u = p.unit
        lanes = _Lanes()
        for piece in p.parts:
            read, copy, flops = _weight_work(piece, u, tokens)
            where, memory_speed, flop_rate = speeds(piece.device)
            if not is_gpu(piece.device) and is_gpu(where):
                # Copied to the GPU for every pass (accelerate, streaming, llama.cpp's big batches).
                copies = passes * copy
                if piece.device == DISK:
                    busy[DISK_READ] += copies / bw.disk_bytes_per_s
                busy[PCIE] += copies / bw.pcie_bytes_per_s
            lanes.add(where, passes * read / memory_speed, flops / flop_rate)
            place = where if is_gpu(where) else "host"
            if place != where_runs[-1]:
                where_runs.append(place)
        kv_bytes = u.kv_cache_bytes * kv_scale
        if kv_bytes:
            attention = 4.0 * tokens * context * u.attention_width
            # The attention runs where the cache lives: on its GPU, or on the CPU for a cache in
            # host RAM (FlexGen, --no-kv-offload), at that device's speeds.
            if is_gpu(p.kv_device):
                memory, flop_rate = bw.gpu(gpu_index(p.kv_device))
                lanes.add(p.kv_device, kv_bytes / memory, attention / flop_rate)
            else:
                lanes.add(CPU, kv_bytes / bw.cpu_ram_bytes_per_s, attention / bw.cpu_flops)
        lanes.charge(busy, row_split)
    if llamacpp:
        hand_overs = len(where_runs) - 1 + (where_runs[-1] != "host")
        busy[SYNC] += passes * hand_overs * LLAMACPP_SPLIT_SECONDS
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
