"""The speed of a placement, a roofline: per decode step each unit costs the bytes it reads
from where it lives over that link's bandwidth, against its FLOPs at the device's rate.
llama.cpp computes host layers on the CPU; accelerate and streaming copy them over PCIe to the
GPU (accelerate's hooks wait for each copy, streaming overlaps copies with compute)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vramgui.core import activations
from vramgui.core.engines import planner_engine
from vramgui.core.errors import WorkloadError
from vramgui.core.llamacpp_speed import MMQ, expert_tile_flops, prompt_attention, quantized
from vramgui.core.offload.defaults import (
    DEFAULT_CPU_FLOPS,
    DEFAULT_CPU_RAM_PEAK_BYTES_PER_S,
    GPU_MEMORY_EFFICIENCY,
    HOST_MEMORY_EFFICIENCY,
    LLAMACPP_SPLIT_SECONDS,
)
from vramgui.core.offload.devices import CPU, DISK, gpu_device, gpu_index, is_gpu
from vramgui.core.offload.placement import ModelUnit, Piece, Placement

if TYPE_CHECKING:
    from vramgui.core.llamacpp_speed import GpuKernels

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
        kernels: llama.cpp's kernels on GPU 0, 1... (``core.llamacpp_speed.GpuKernels``, set
            from published llama-bench rows): where given, llama.cpp's layers on a GPU cost what
            ``llamacpp_speed`` costs them instead of the roofline at ``gpu_bytes_per_s``, and
            the two hand-overs every forward makes (host to GPU and back, inside the measured
            rows) are not charged again. GPU 0's where a GPU has none; none: the roofline.

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
    kernels: tuple[GpuKernels, ...] = ()

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "kernels":
                continue
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

    def kernels_of(self, index: int) -> GpuKernels | None:
        """llama.cpp's kernels on GPU ``index`` (GPU 0's when not given), or None."""
        if not self.kernels:
            return None
        return self.kernels[index] if 0 < index < len(self.kernels) else self.kernels[0]


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
        # Seconds a GPU spends in llama.cpp's measured terms, which add up rather than overlap.
        self.fixed_memory: dict[str, float] = {}
        self.fixed_compute: dict[str, float] = {}

    def add(self, device: str, memory_s: float, compute_s: float) -> None:
        self.memory[device] = self.memory.get(device, 0.0) + memory_s
        self.compute[device] = self.compute.get(device, 0.0) + compute_s

    def add_fixed(self, device: str, memory_s: float, compute_s: float) -> None:
        self.add(device, 0.0, 0.0)
        self.fixed_memory[device] = self.fixed_memory.get(device, 0.0) + memory_s
        self.fixed_compute[device] = self.fixed_compute.get(device, 0.0) + compute_s

    def charge(self, busy: dict[str, float], parallel_gpus: bool) -> None:
        """Each device waits for its memory or its compute; GPUs sharing a row-split layer work
        at once (the slowest counts), the rest one after the other."""
        gpu_lanes = []
        for device, memory_s in self.memory.items():
            compute_s = self.compute[device]
            if is_gpu(device):
                fixed = (self.fixed_memory.get(device, 0.0), self.fixed_compute.get(device, 0.0))
                gpu_lanes.append((memory_s, compute_s, *fixed))
                continue
            memory = DISK_READ if device == DISK else CPU_MEMORY
            _roof(busy, memory, memory_s, CPU_COMPUTE, compute_s)
        if parallel_gpus and gpu_lanes:
            gpu_lanes = [max(gpu_lanes, key=lambda lane: max(lane[:2]) + lane[2] + lane[3])]
        for memory_s, compute_s, fixed_memory_s, fixed_compute_s in gpu_lanes:
            _roof(busy, GPU_MEMORY, memory_s, GPU_COMPUTE, compute_s)
            busy[GPU_MEMORY] += fixed_memory_s
            busy[GPU_COMPUTE] += fixed_compute_s


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
    llamacpp = planner_engine(placement.planner).ggml
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
    prompt = new_tokens > 1

    def kernels(device: str) -> GpuKernels | None:
        """llama.cpp's measured kernels on ``device`` for this forward, or None (the roofline)."""
        if not (llamacpp and is_gpu(device)):
            return None
        k = bw.kernels_of(gpu_index(device))
        return None if k is None or (prompt and not k.prompts) else k

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
        block = kernels(p.device) if 0 < u.index <= placement.blocks else None
        if block is not None:
            lanes.add_fixed(
                p.device,
                0.0,
                block.ubatch_blocks_seconds(passes) if prompt else block.blocks_seconds(1),
            )
        for piece in p.parts:
            if llamacpp and u.index == 0 and not piece.read_bytes and not is_gpu(piece.device):
                # The token lookup (GET_ROWS) stays where its rows are: llama.cpp never hands
                # it to the GPU (ggml-cuda's offload_op), so nothing is copied.
                continue
            read, copy, flops = _weight_work(piece, u, tokens)
            where, memory_speed, flop_rate = speeds(piece.device)
            k = kernels(piece.device)
            if k is not None and prompt:
                if piece.expert_parameters and k.prompt_path == MMQ and quantized(w):
                    flops += expert_tile_flops(
                        piece.expert_parameters, u.experts, u.experts_per_token, tokens,
                        w.ubatch_size,
                    )  # fmt: skip
                dequant = passes * _dense_bytes(piece, u) if quantized(w) else 0.0
                memory_s = k.prompt_memory_seconds(0.0, dequant)
                products = k.weight_products_seconds(flops, quantized=quantized(w))
                if piece.expert_parameters:
                    share = piece.expert_parameters / u.expert_parameters
                    products += k.moe_tokens_seconds(tokens * share, quantized=quantized(w))
                lanes.add_fixed(where, memory_s, products)
            elif k is not None:
                lanes.add(where, k.weights_seconds(read), _matmul(k, flops, bw, where))
            else:
                if not is_gpu(piece.device) and is_gpu(where):
                    # Copied to the GPU for every pass (accelerate, streaming, llama.cpp's big
                    # batches).
                    copies = passes * copy
                    if piece.device == DISK:
                        busy[DISK_READ] += copies / bw.disk_bytes_per_s
                    busy[PCIE] += copies / bw.pcie_bytes_per_s
                lanes.add(where, passes * read / memory_speed, flops / flop_rate)
            place = where if is_gpu(where) else "host"
            if place != where_runs[-1]:
                where_runs.append(place)
        kv_bytes = u.kv_cache_bytes * kv_scale
        k = kernels(p.kv_device)
        if k is not None and prompt and u.attention_width:
            flops, scores = prompt_attention(w, new_tokens, 0, u.attention_width, u.attention_heads)
            lanes.add_fixed(
                p.kv_device,
                k.prompt_memory_seconds(batch * scores, 0.0),
                k.attention_products_seconds(
                    batch * flops, flash=activations.llamacpp_flash_attention(w)
                ),
            )
        elif k is not None and kv_bytes:
            attention = 4.0 * tokens * context * u.attention_width
            flash = activations.llamacpp_flash_attention(w)
            lanes.add(
                p.kv_device,
                k.cache_seconds(kv_bytes, flash=flash),
                _matmul(k, attention, bw, p.kv_device),
            )
        elif kv_bytes:
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
        if bw.kernels:
            hand_overs = max(0, hand_overs - 2)  # inside the measured rows' per-block time
        busy[SYNC] += passes * hand_overs * LLAMACPP_SPLIT_SECONDS
    return busy


def _dense_bytes(piece: Piece, unit: ModelUnit) -> float:
    """Bytes of the 16-bit copy cuBLAS multiplies a piece's quantized weights as (none for an
    embedding lookup)."""
    if unit.index == 0 and not piece.read_bytes:
        return 2.0 * piece.expert_parameters
    return 2.0 * piece.parameters


def _matmul(k: GpuKernels, flops: float, bw: Bandwidths, device: str) -> float:
    """Seconds of a decode step's products on a GPU with llama.cpp's kernels: at the measured
    share of its tensor rate where its kind has one, else at the roofline's rate."""
    if k.prompts:
        return k.matmul_seconds(flops)
    return flops / bw.gpu(gpu_index(device))[1]


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
