"""Per-layer offloading: which unit of the model lives on a GPU, in host RAM or on disk, and its speed.

A model is cut into *units*, the pieces engines place as a whole: the embeddings, each decoder
block, and the output (final norm and LM head). Three placement rules follow real engines:

- llama.cpp (``-ngl N``): the last N repeating blocks go to the GPU, the output unit joins them only
  when every block fits (``N > n_layer``), token embeddings always stay in host memory, and each
  block's KV cache lives with its block unless ``--no-kv-offload``.
- accelerate ``infer_auto_device_map``: units fill the GPUs in order, then ``"cpu"``, then
  ``"disk"``; the main devices (first GPU, CPU) keep room for the largest unit, which offloaded
  units are copied into when they run.
- Streaming one unit at a time (FlexGen, ZeRO-Inference, accelerate's sequential offload): every
  unit stays in host RAM or on disk and visits the GPU when it runs. The GPU needs only the largest
  unit (two with prefetching) plus buffers: the one-layer floor.

The speed model is a roofline: per decode step, each unit costs the bytes it must read from where it
lives over that link's bandwidth, against its FLOPs at the device's rate. llama.cpp computes host
layers on the CPU; accelerate and streaming copy them over PCIe to the GPU (accelerate's hooks wait
for each copy, streaming overlaps copies with compute).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramgui.core import dtypes, estimate, inference
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import LayerBytes
from vramgui.core.model import ModelSpec, Role
from vramgui.core.units import GiB, format_bytes
from vramgui.core.workload import Workload, served_family

CPU = "cpu"
DISK = "disk"
PLANNERS = ("llamacpp", "accelerate", "streaming")

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
# GPU memory "most that fit" leaves free: llama.cpp's own fitting (``--fit``) keeps 1024 MiB free
# per device by default (``--fit-target``), for the driver, the desktop and allocations it does not
# foresee.
DEFAULT_MARGIN_BYTES = GiB

# llama.cpp hands matrix products of host-resident weights to the GPU when a batch has at least this
# many tokens (ggml-cuda's offload_op threshold), copying the weights over PCIe.
LLAMACPP_OP_OFFLOAD_MIN_BATCH = 32

EMBEDDINGS = "embeddings"
OUTPUT = "output"

# Resources a step spends time on, as reported in Throughput.bound.
GPU_MEMORY = "gpu_memory"
GPU_COMPUTE = "gpu_compute"
CPU_MEMORY = "cpu_memory"
CPU_COMPUTE = "cpu_compute"
PCIE = "pcie"
DISK_READ = "disk"
COMPUTE_RESOURCES = (GPU_COMPUTE, CPU_COMPUTE)


def gpu_device(index: int = 0) -> str:
    """The device name of GPU ``index`` (``gpu:0``)."""
    return f"gpu:{index}"


def is_gpu(device: str) -> bool:
    return device.startswith("gpu:")


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
class Unit:
    """One placement unit with what the roofline needs to cost it.

    Attributes:
        index: 0 for the embeddings, 1..n for the blocks, n + 1 for the output.
        name: "embeddings", "block 0"..., "output".
        bytes: stored weight bytes (tied embeddings counted once, in the embeddings).
        kv_cache_bytes: KV cache of this unit for the workload's batch and context.
        parameters: weights in the unit.
        expert_bytes: bytes of routed MoE experts inside ``bytes`` (a token reads only its top-k).
        expert_parameters: parameters of routed experts inside ``parameters``.
        read_bytes: bytes a decode step reads at batch 1 outside the experts (embeddings: a few rows,
            unless the LM head is tied to them and reads them whole).
        modules: the transformers module paths this unit holds (for a ``device_map``).
        attention_width: query heads x head dim of an attention block (its attention FLOPs per
            query per cached token are 4 x this), else 0.
        experts: routed experts in the unit (0 if none).
        experts_per_token: routed experts each token runs through.
    """

    index: int
    name: str
    bytes: int
    kv_cache_bytes: int
    parameters: int
    expert_bytes: int = 0
    expert_parameters: int = 0
    read_bytes: int = 0
    modules: tuple[str, ...] = ()
    attention_width: int = 0
    experts: int = 0
    experts_per_token: int = 0


@dataclass(frozen=True, slots=True)
class PlacedUnit:
    """A unit and where it lives.

    Attributes:
        unit: the unit.
        device: ``gpu:i``, ``cpu`` or ``disk`` (where its weights live between uses).
        kv_device: where its KV cache lives (``gpu:i`` or ``cpu``).
        gpu_bytes: weight bytes it keeps on a GPU (a tied LM head copy included for llama.cpp).
    """

    unit: Unit
    device: str
    kv_device: str
    gpu_bytes: int


@dataclass(frozen=True, slots=True)
class Placement:
    """A whole model placed by one planner.

    Attributes:
        planner: "llamacpp", "accelerate" or "streaming".
        workload: the settings the placement was made for.
        units: every unit in model order.
        gpu_layers: units on the GPUs as the engine counts them (llama.cpp's ``-ngl`` value: blocks
            plus the output unit when it is on the GPU).
        vram_budget_bytes: the memory allowed on each GPU.
        gpu_bytes: memory each GPU needs: resident weights, KV cache, the streaming slot, buffers
            and runtime overhead.
        host_bytes: host RAM the weights (and host KV cache) take.
        disk_bytes: weights read from disk.
        stream_bytes: the GPU slot offloaded units are copied into (accelerate, streaming).
        buffers_bytes: activations / compute buffers on the first GPU.
        overhead_bytes: runtime overhead per GPU (CUDA context, allocator slack).
        fits: every GPU stays within its budget and the host within its RAM.
        notes: what the user should know.
        margin_bytes: memory per GPU the placement keeps free when it chooses how much to put there.
    """

    planner: str
    workload: Workload
    units: tuple[PlacedUnit, ...]
    gpu_layers: int
    vram_budget_bytes: tuple[int, ...]
    gpu_bytes: tuple[int, ...]
    host_bytes: int
    disk_bytes: int
    stream_bytes: int
    buffers_bytes: int
    overhead_bytes: int
    fits: bool
    notes: tuple[str, ...] = ()
    margin_bytes: int = 0

    @property
    def blocks(self) -> int:
        return len(self.units) - 2


# --- units ---------------------------------------------------------------------------------------


def model_units(spec: ModelSpec, workload: Workload) -> tuple[Unit, ...]:
    """The placement units of ``spec`` with stored bytes under the workload's dtype and quant.

    Raises:
        WorkloadError: a quantization or KV dtype that does not apply.
    """
    stored = dtypes.assign_storage(spec, workload.dtype, workload.quant)
    n = spec.facts.num_layers
    groups: list[list[dtypes.StoredTensor]] = [[] for _ in range(n + 2)]
    for st in stored:
        t = st.tensor
        if t.layer is not None and 0 <= t.layer < n:
            groups[t.layer + 1].append(st)
        elif t.role in (Role.EMBEDDING, Role.POSITION) or "embed" in t.name:
            groups[0].append(st)
        else:
            groups[n + 1].append(st)
    kv = _kv_per_layer(spec, workload)
    tied_head = spec.facts.tie_word_embeddings and spec.facts.is_decoder
    attention = spec.facts.num_heads * spec.facts.head_dim
    units = []
    for index, members in enumerate(groups):
        name = EMBEDDINGS if index == 0 else OUTPUT if index == n + 1 else f"block {index - 1}"
        size = sum(st.bytes for st in members)
        experts = [st for st in members if st.tensor.role is Role.EXPERT]
        expert_bytes = sum(st.bytes for st in experts)
        if index == 0:
            # A lookup reads a row per token; a tied LM head multiplies by the whole matrix.
            token_embedding = sum(st.bytes for st in members if st.tensor.role is Role.EMBEDDING)
            read = token_embedding if tied_head else 0
        else:
            read = size - expert_bytes
        units.append(
            Unit(
                index=index,
                name=name,
                bytes=size,
                kv_cache_bytes=kv[index - 1] if 0 < index <= n else 0,
                parameters=sum(st.tensor.numel for st in members),
                expert_bytes=expert_bytes,
                expert_parameters=sum(st.tensor.numel for st in experts),
                read_bytes=read,
                modules=_modules(members, index - 1 if 0 < index <= n else None),
                attention_width=attention if 0 < index <= n and kv[index - 1] else 0,
                experts=spec.facts.num_experts if expert_bytes else 0,
                experts_per_token=spec.facts.experts_per_token if expert_bytes else 0,
            )
        )
    return tuple(units)


def layer_weights(spec: ModelSpec, workload: Workload) -> tuple[LayerBytes, ...]:
    """Weight and KV cache bytes per unit (embeddings, each block, output), for ``Estimate``.

    Raises:
        WorkloadError: a quantization or KV dtype that does not apply.
    """
    return tuple(
        LayerBytes(index=u.index, name=u.name, bytes=u.bytes, kv_cache_bytes=u.kv_cache_bytes)
        for u in model_units(spec, workload)
    )


def _kv_per_layer(spec: ModelSpec, workload: Workload) -> tuple[int, ...]:
    """KV cache bytes of each block while serving (none in training), from a one-block model."""
    facts = spec.facts
    n = facts.num_layers
    types = facts.layer_types or (None,) * n
    if workload.mode != "inference" or not facts.is_decoder:
        return (0,) * len(types)

    def one(values: tuple[int, ...], i: int) -> tuple[int, ...]:
        return values[i : i + 1] if values else ()

    by_kind: dict[object, int] = {}
    out = []
    for i, layer_type in enumerate(types):
        widths = one(facts.layer_kv_widths, i)
        heads = one(facts.layer_kv_heads, i)
        states = one(facts.layer_state_elements, i)
        key = (layer_type, widths, heads, states)
        if key not in by_kind:
            single = replace(
                facts,
                num_layers=1,
                layer_types=() if layer_type is None else (layer_type,),
                moe_layers=facts.moe_layers[:1],
                layer_kv_widths=widths,
                layer_kv_heads=heads,
                layer_state_elements=states,
            )
            probe = ModelSpec(name=spec.name, facts=single, tensors=())
            by_kind[key] = inference.kv_cache_bytes(probe, workload)
        out.append(by_kind[key])
    return tuple(out)


def _modules(members: Sequence[dtypes.StoredTensor], layer: int | None) -> tuple[str, ...]:
    """Module paths a device_map names: the block itself, or each module outside the blocks.

    First-seen order, kept in a dict: a list's ``in`` made this quadratic in the tensors of a
    group (over 300 s for a checkpoint of 1M tensors).
    """
    paths: dict[str, None] = {}
    for st in members:
        parts = st.tensor.name.split(".")
        if layer is not None and str(layer) in parts:
            path = ".".join(parts[: parts.index(str(layer)) + 1])
        else:
            path = ".".join(parts[:-1]) or st.tensor.name
        paths[path] = None
    return tuple(paths)


# --- what the GPU keeps beside the weights -------------------------------------------------------


def _engine_workload(spec: ModelSpec, workload: Workload, engine: str) -> Workload:
    """The workload served by ``engine``.

    Raises:
        WorkloadError: the engine does not run the settings or the checkpoint as stored (a GGUF
            quantization under transformers, which dequantizes it on load).
    """
    if workload.mode != "inference":
        workload = workload.with_(mode="inference")
    if workload.engine != engine:
        workload = workload.with_(engine=engine)
    workload.check_checkpoint(spec.quantization)
    return workload


def _buffers(spec: ModelSpec, workload: Workload) -> int:
    """Activations / compute buffers of one forward with the workload's engine."""
    return inference.inference_breakdown(spec, workload).activations_bytes


def _overhead(workload: Workload, gpu_tensor_bytes: int) -> int:
    return estimate.runtime_overhead_bytes(workload, gpu_tensor_bytes)


def _tensor_room(workload: Workload, budget: int) -> int:
    """The most tensor bytes a GPU of ``budget`` bytes holds once its runtime overhead is paid."""
    base = _overhead(workload, 0)
    # The overhead grows linearly with the tensors it serves (allocator slack); undo that share.
    slope = (_overhead(workload, 1 << 40) - base) / (1 << 40)
    return math.floor((budget - base) / (1 + slope))


def _finish(
    planner: str,
    workload: Workload,
    placed: Sequence[PlacedUnit],
    *,
    gpu_layers: int,
    budgets: tuple[int, ...],
    tensors: Sequence[int],
    stream: int,
    buffers: int,
    host_ram_bytes: int | None,
    notes: list[str],
    margin_bytes: int,
) -> Placement:
    used = tuple(t + _overhead(workload, t) for t in tensors)
    host = sum(p.unit.bytes for p in placed if p.device == CPU)
    host += sum(p.unit.kv_cache_bytes for p in placed if p.kv_device == CPU)
    disk = sum(p.unit.bytes for p in placed if p.device == DISK)
    fits = True
    for i, (need, budget) in enumerate(zip(used, budgets, strict=True)):
        if need > budget:
            fits = False
            notes.append(
                f"GPU {i} needs {format_bytes(need)}, over its budget of {format_bytes(budget)}."
            )
        elif need > budget - margin_bytes:
            notes.append(
                f"GPU {i} keeps {format_bytes(budget - need)} free, less than the "
                f"{format_bytes(margin_bytes)} safety margin."
            )
    if host_ram_bytes is not None and host > host_ram_bytes:
        fits = False
        notes.append(
            f"Host RAM needs {format_bytes(host)}, over the {format_bytes(host_ram_bytes)} allowed."
        )
    return Placement(
        planner=planner,
        workload=workload,
        units=tuple(placed),
        gpu_layers=gpu_layers,
        vram_budget_bytes=budgets,
        gpu_bytes=used,
        host_bytes=host,
        disk_bytes=disk,
        stream_bytes=stream,
        buffers_bytes=buffers,
        overhead_bytes=used[0] - tensors[0],
        fits=fits,
        notes=tuple(notes),
        margin_bytes=margin_bytes,
    )


class _HostRam:
    """Host RAM handed out to units in order; what does not fit is read from disk."""

    def __init__(self, capacity_bytes: int | None) -> None:
        self.left = capacity_bytes  # None: unlimited

    def place(self, unit: Unit) -> str:
        """``cpu`` while the RAM lasts, then ``disk``."""
        if self.left is None:
            return CPU
        if unit.bytes <= self.left:
            self.left -= unit.bytes
            return CPU
        return DISK


# --- llama.cpp -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LlamaCppModel:
    """A model as llama.cpp places it, sized once: re-placing at another ``-ngl`` is cheap.

    Attributes:
        units: the placement units under the workload's quantization.
        workload: the settings (engine llama.cpp).
        buffers_bytes: llama.cpp's compute buffer on the GPU.
        tied_copy_bytes: the GPU copy of tied embeddings the output layer holds (0 if untied).
    """

    units: tuple[Unit, ...]
    workload: Workload
    buffers_bytes: int
    tied_copy_bytes: int

    @property
    def blocks(self) -> int:
        return len(self.units) - 2

    def on_gpu(self, unit: Unit, n_gpu_layers: int) -> bool:
        """llama.cpp's rule: blocks from index n_layer - ngl up, the output only when ngl > n_layer."""
        n = self.blocks
        if unit.index == n + 1:
            return n_gpu_layers > n
        return unit.index > 0 and unit.index - 1 >= n - n_gpu_layers

    def gpu_weight_bytes(self, unit: Unit) -> int:
        return unit.bytes + (self.tied_copy_bytes if unit.index == self.blocks + 1 else 0)

    def gpu_tensor_bytes(self, n_gpu_layers: int, kv_offload: bool = True) -> int:
        """Weights and KV cache of the GPU units at ``-ngl n_gpu_layers``, plus the compute buffer."""
        total = self.buffers_bytes
        for u in self.units:
            if self.on_gpu(u, n_gpu_layers):
                total += self.gpu_weight_bytes(u) + (u.kv_cache_bytes if kv_offload else 0)
        return total

    def gpu_bytes(self, n_gpu_layers: int, kv_offload: bool = True) -> int:
        """VRAM at ``-ngl n_gpu_layers``: weights, KV cache, compute buffer and runtime overhead."""
        tensors = self.gpu_tensor_bytes(n_gpu_layers, kv_offload)
        return tensors + _overhead(self.workload, tensors)

    def max_gpu_layers(self, vram_budget_bytes: int, kv_offload: bool = True) -> int:
        """The largest ``-ngl`` whose VRAM fits the budget (0 to n_layer + 1)."""
        best = 0
        # VRAM grows with every layer added, so the first that overflows ends the search.
        for ngl in range(1, self.blocks + 2):
            if self.gpu_bytes(ngl, kv_offload) > vram_budget_bytes:
                break
            best = ngl
        return best

    def place(
        self,
        vram_budget_bytes: int,
        *,
        host_ram_bytes: int | None = None,
        n_gpu_layers: int | None = None,
        kv_offload: bool = True,
        margin_bytes: int = 0,
    ) -> Placement:
        """The placement at ``-ngl n_gpu_layers`` (None: the most that fit); see ``plan_llamacpp``."""
        n = self.blocks
        if n_gpu_layers is None:
            ngl = self.max_gpu_layers(vram_budget_bytes - margin_bytes, kv_offload)
        else:
            ngl = max(0, min(n_gpu_layers, n + 1))
        host = _HostRam(host_ram_bytes)
        if host.left is not None:
            # The KV cache of host layers (of all layers with --no-kv-offload) is allocated up front.
            host.left -= sum(
                u.kv_cache_bytes for u in self.units if not (kv_offload and self.on_gpu(u, ngl))
            )
        units = list(self.units)
        if self.tied_copy_bytes and ngl > n:
            # The LM head multiplies by the GPU copy of the tied embeddings, not the host original.
            head_params = units[0].parameters
            units[0] = replace(units[0], read_bytes=0)
            units[-1] = replace(
                units[-1],
                read_bytes=units[-1].read_bytes + self.tied_copy_bytes,
                parameters=units[-1].parameters + head_params,
            )
        placed: list[PlacedUnit] = []
        for u in units:
            if self.on_gpu(u, ngl):
                device, gpu_weights = gpu_device(0), self.gpu_weight_bytes(u)
            else:
                device, gpu_weights = host.place(u), 0
            kv_device = device if kv_offload and is_gpu(device) else CPU
            placed.append(PlacedUnit(u, device, kv_device, gpu_weights))
        notes = []
        if ngl <= n:
            notes.append(
                f"-ngl {ngl}: the last {min(ngl, n)} of {n} blocks on the GPU; the output layer "
                f"joins them only at -ngl {n + 1}."
            )
        if any(p.device == DISK for p in placed):
            notes.append(
                "Host RAM is short: llama.cpp maps the file and the OS pages the rest from disk "
                "on every token."
            )
        return _finish(
            "llamacpp",
            self.workload,
            placed,
            gpu_layers=ngl,
            budgets=(vram_budget_bytes,),
            tensors=(self.gpu_tensor_bytes(ngl, kv_offload),),
            stream=0,
            buffers=self.buffers_bytes,
            host_ram_bytes=host_ram_bytes,
            notes=notes,
            margin_bytes=margin_bytes,
        )


def llamacpp_model(spec: ModelSpec, workload: Workload) -> LlamaCppModel:
    """``spec`` sized for llama.cpp under the workload (the engine is taken as llama.cpp).

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    workload = _engine_workload(spec, workload, "llamacpp")
    units = model_units(spec, workload)
    # With tied embeddings llama.cpp duplicates token_embd as the output tensor on the GPU.
    return LlamaCppModel(units, workload, _buffers(spec, workload), units[0].read_bytes)


def max_gpu_layers(
    spec: ModelSpec, workload: Workload, vram_budget_bytes: int, *, kv_offload: bool = True
) -> int:
    """The largest llama.cpp ``-ngl`` whose VRAM fits the budget (0 to n_layer + 1).

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    return llamacpp_model(spec, workload).max_gpu_layers(vram_budget_bytes, kv_offload)


def llamacpp_gpu_bytes(
    spec: ModelSpec, workload: Workload, n_gpu_layers: int, *, kv_offload: bool = True
) -> int:
    """VRAM llama.cpp takes at ``-ngl n_gpu_layers``: weights, KV, compute buffer and overhead.

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    return llamacpp_model(spec, workload).gpu_bytes(n_gpu_layers, kv_offload)


def plan_llamacpp(
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int,
    *,
    host_ram_bytes: int | None = None,
    n_gpu_layers: int | None = None,
    kv_offload: bool = True,
    margin_bytes: int = 0,
) -> Placement:
    """llama.cpp's placement at ``-ngl n_gpu_layers`` (default: the most that fit the budget).

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as llama.cpp).
        vram_budget_bytes: GPU memory allowed.
        host_ram_bytes: host RAM allowed; weights beyond it are paged from disk (mmap). None: no
            limit.
        n_gpu_layers: ``-ngl``; None picks the largest that fits.
        kv_offload: False keeps the KV cache in host memory (``--no-kv-offload``).
        margin_bytes: GPU memory the most that fit leave free.

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    return llamacpp_model(spec, workload).place(
        vram_budget_bytes,
        host_ram_bytes=host_ram_bytes,
        n_gpu_layers=n_gpu_layers,
        kv_offload=kv_offload,
        margin_bytes=margin_bytes,
    )


# --- accelerate ----------------------------------------------------------------------------------


# Rounds of re-placing until the main GPU's KV reservation matches the blocks it serves.
_ACCELERATE_ROUNDS = 8


def _accelerate_fill(
    units: Sequence[Unit], rooms: Sequence[int], cpu_room: int | None
) -> list[int]:
    """infer_auto_device_map's walk: per unit, a GPU index, len(rooms) for CPU or one more for disk.

    ``rooms`` are the bytes each GPU gives to units; units on the first GPU count their weights only
    (its KV cache is reserved by the caller), on the others their weights and KV cache.
    """
    used = [0] * len(rooms)
    current, cpu_used, cpu_full = 0, 0, False
    out = []
    for u in units:
        need = u.bytes
        while current < len(rooms):
            need = u.bytes + (u.kv_cache_bytes if current > 0 else 0)
            if used[current] + need <= rooms[current]:
                break
            current += 1
        if current < len(rooms):
            used[current] += need
            out.append(current)
        elif not cpu_full and (cpu_room is None or cpu_used + u.bytes <= cpu_room):
            cpu_used += u.bytes
            out.append(len(rooms))
        else:
            # Like the GPUs, a device once passed is never returned to.
            cpu_full = True
            out.append(len(rooms) + 1)
    return out


def plan_accelerate(
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int | Sequence[int],
    *,
    host_ram_bytes: int | None = None,
    margin_bytes: int = 0,
) -> Placement:
    """accelerate's ``infer_auto_device_map`` with the decoder block as the unit it never splits.

    Units fill each GPU in order, then ``"cpu"`` up to ``host_ram_bytes``, then ``"disk"``. The
    first GPU and the CPU keep room for the largest unit. Offloaded units execute on the first
    GPU, so it also holds their KV cache and the activations; the budget given to accelerate's
    ``max_memory`` is what is left after them.

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as transformers).
        vram_budget_bytes: GPU memory allowed, one figure per GPU (or one for a single GPU).
        host_ram_bytes: host RAM allowed; None means no limit.
        margin_bytes: memory each GPU keeps free of what ``max_memory`` gives accelerate.

    Raises:
        WorkloadError: settings transformers does not support, or no GPU budget.
    """
    budgets = (
        (vram_budget_bytes,) if isinstance(vram_budget_bytes, int) else tuple(vram_budget_bytes)
    )
    if not budgets:
        raise WorkloadError("accelerate needs at least one GPU budget")
    workload = _engine_workload(spec, workload, "transformers")
    units = model_units(spec, workload)
    buffers = _buffers(spec, workload)
    largest = max(u.bytes for u in units)
    devices = [gpu_device(i) for i in range(len(budgets))]
    room = [_tensor_room(workload, b - margin_bytes) for b in budgets]
    cpu_room = None if host_ram_bytes is None else host_ram_bytes - largest
    # The main GPU keeps the activations, the slot for the largest unit and the KV cache of every
    # block that does not sit on another GPU (offloaded blocks run on the main GPU). Which blocks
    # those are depends on the placement, so place until the reservation settles.
    kv_main = sum(u.kv_cache_bytes for u in units)
    gpus = len(budgets)
    for _ in range(_ACCELERATE_ROUNDS):
        room_main = room[0] - kv_main - buffers - largest
        devices_of = _accelerate_fill(units, [room_main, *room[1:]], cpu_room)
        settled = sum(
            u.kv_cache_bytes for u, d in zip(units, devices_of, strict=True) if not 0 < d < gpus
        )
        if settled == kv_main:
            break
        kv_main = settled
    placed: list[PlacedUnit] = []
    for u, d in zip(units, devices_of, strict=True):
        device = devices[d] if d < gpus else (CPU if d == gpus else DISK)
        kv_device = device if is_gpu(device) else devices[0]
        placed.append(PlacedUnit(u, device, kv_device, u.bytes if is_gpu(device) else 0))
    stream = max((p.unit.bytes for p in placed if not is_gpu(p.device)), default=0)
    tensors = []
    for i, dev in enumerate(devices):
        weights = sum(p.unit.bytes for p in placed if p.device == dev)
        kv = sum(p.unit.kv_cache_bytes for p in placed if p.kv_device == dev)
        tensors.append(weights + kv + (buffers + stream if i == 0 else 0))
    notes = []
    if stream:
        notes.append(
            "Offloaded units are copied to the first GPU on every forward; accelerate waits for "
            "each copy."
        )
    return _finish(
        "accelerate",
        workload,
        placed,
        gpu_layers=sum(
            1 for p in placed if is_gpu(p.device) and 0 < p.unit.index <= len(units) - 2
        ),
        budgets=budgets,
        tensors=tensors,
        stream=stream,
        buffers=buffers,
        host_ram_bytes=host_ram_bytes,
        notes=notes,
        margin_bytes=margin_bytes,
    )


# --- streaming -----------------------------------------------------------------------------------


def _slot_bytes(units: Sequence[Unit], prefetch: bool) -> int:
    largest = sorted((u.bytes for u in units), reverse=True)
    return sum(largest[: 2 if prefetch else 1])


def min_vram_bytes(spec: ModelSpec, workload: Workload, *, prefetch: bool = False) -> int:
    """The one-layer floor: the largest unit (two with prefetching) plus buffers and overhead.

    The KV cache is left in host memory, as FlexGen does when the GPU is this small, so its dtype
    (even one only llama.cpp or vLLM offers) does not matter here. GGUF weights are streamed by
    llama.cpp (with its compute buffer), others by transformers.

    Raises:
        WorkloadError: a quantization that does not apply to the model.
    """
    engine = (
        "llamacpp" if served_family(workload.quant, spec.quantization) == "gguf" else "transformers"
    )
    workload = _engine_workload(spec, workload.with_(kv_dtype="auto"), engine)
    tensors = _slot_bytes(model_units(spec, workload), prefetch) + _buffers(spec, workload)
    return tensors + _overhead(workload, tensors)


def plan_streaming(
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int,
    *,
    host_ram_bytes: int | None = None,
    prefetch: bool = False,
    margin_bytes: int = 0,
) -> Placement:
    """Every unit in host RAM (then on disk), copied through a GPU slot when it runs.

    The KV cache stays on the GPU when it fits beside the slot, else in host memory, where the
    attention over it runs on the CPU (FlexGen's choice for small GPUs).

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as transformers).
        vram_budget_bytes: GPU memory allowed.
        host_ram_bytes: host RAM allowed; units beyond it are read from disk. None: no limit.
        prefetch: copy the next unit while the current one computes (two slots).
        margin_bytes: GPU memory kept free when deciding where the KV cache goes.

    Raises:
        WorkloadError: settings transformers does not support.
    """
    workload = _engine_workload(spec, workload, "transformers")
    units = model_units(spec, workload)
    buffers = _buffers(spec, workload)
    stream = _slot_bytes(units, prefetch)
    kv_total = sum(u.kv_cache_bytes for u in units)
    room = _tensor_room(workload, vram_budget_bytes - margin_bytes)
    kv_on_gpu = stream + buffers + kv_total <= room
    host = _HostRam(host_ram_bytes)
    if host.left is not None and not kv_on_gpu:
        host.left -= kv_total
    kv_device = gpu_device(0) if kv_on_gpu else CPU
    placed = [PlacedUnit(u, host.place(u), kv_device, 0) for u in units]
    notes = [
        "Each unit is copied to the GPU when it runs"
        + (", the next one while the current computes." if prefetch else ".")
    ]
    if not kv_on_gpu:
        notes.append("The KV cache does not fit beside the slot: it stays in host RAM.")
    return _finish(
        "streaming",
        workload,
        placed,
        gpu_layers=0,
        budgets=(vram_budget_bytes,),
        tensors=(stream + buffers + (kv_total if kv_on_gpu else 0),),
        stream=stream,
        buffers=buffers,
        host_ram_bytes=host_ram_bytes,
        notes=notes,
        margin_bytes=margin_bytes,
    )


def plan(
    planner: str,
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int,
    *,
    host_ram_bytes: int | None = None,
    n_gpu_layers: int | None = None,
    margin_bytes: int = 0,
) -> Placement:
    """Place with the named planner: ``llamacpp``, ``accelerate`` or ``streaming``.

    ``n_gpu_layers`` applies to llama.cpp only (None: the most that fit). ``margin_bytes`` of the
    budget are kept free where the planner chooses how much goes to the GPU.

    Raises:
        WorkloadError: an unknown planner or settings the engine does not support.
    """
    if planner == "llamacpp":
        return plan_llamacpp(
            spec,
            workload,
            vram_budget_bytes,
            host_ram_bytes=host_ram_bytes,
            n_gpu_layers=n_gpu_layers,
            margin_bytes=margin_bytes,
        )
    if planner == "accelerate":
        return plan_accelerate(
            spec,
            workload,
            vram_budget_bytes,
            host_ram_bytes=host_ram_bytes,
            margin_bytes=margin_bytes,
        )
    if planner == "streaming":
        return plan_streaming(
            spec,
            workload,
            vram_budget_bytes,
            host_ram_bytes=host_ram_bytes,
            margin_bytes=margin_bytes,
        )
    raise WorkloadError(f"planner must be one of {', '.join(PLANNERS)}; got {planner!r}")


# --- throughput ----------------------------------------------------------------------------------


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


def _work(unit: Unit, batch: int, new_tokens: int, context: float, kv_scale: float) -> _Work:
    tokens = batch * new_tokens
    read = float(unit.read_bytes)
    params = unit.parameters - unit.expert_parameters
    if unit.index == 0 and not unit.read_bytes:
        params = 0  # a lookup, no matrix product
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
        passes = math.ceil(batch * new_tokens / inference.LLAMACPP_UBATCH)
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
