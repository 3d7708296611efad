"""Where each layer goes and how fast it runs: the offload plan of ``vramgui plan``, the
Offloading tab and the timing of a llama.cpp setup, one computation for all three.

Under llama.cpp, when neither ``-ngl`` nor experts in host RAM are given, the plan is the
fastest placement that fits: the most whole layers on the GPUs (``-ngl``), or every layer there
with the routed experts of the first layers in host RAM (``--n-cpu-moe``), whichever decodes
faster by the roofline; the other is kept as the alternative with its speed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vramgui.answers.host import HostSettings
from vramgui.core import offload
from vramgui.core.engines import planner_engine
from vramgui.core.llamacpp_speed import GpuKernels, kernels_for
from vramgui.core.offload.budget import engine_workload
from vramgui.core.offload.curves import (
    EXPERTS,
    LAYERS,
    CurvePoint,
    best,
    best_points,
    expert_curve,
    layer_curve,
    place_point,
)
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.hardware.gpus import CUSTOM_VENDOR, CatalogGpu, custom_gpu
from vramgui.hardware.host import pcie_bytes_per_s

if TYPE_CHECKING:
    from vramgui.core.launch import LaunchSettings
    from vramgui.core.model import ModelSpec
    from vramgui.core.offload import Bandwidths, LlamaCppModel, Placement, Throughput
    from vramgui.core.offload.fit import FitResult
    from vramgui.core.workload import Workload

# How the placement was chosen (``OffloadAnswer.chosen``).
FASTEST = "fastest"
AS_SET = "as set"
FITTED = "fitted"


# The figures a GPU is timed by (``CardSpeeds.assumed`` names those assumed): its peak memory
# bandwidth, its dense 16-bit tensor rate, its PCIe generation.
BANDWIDTH, TFLOPS, PCIE = "bandwidth", "tflops", "pcie"


@dataclass(frozen=True, slots=True)
class CardSpeeds:
    """The catalog entry a GPU is timed with, and which of its speeds are assumed.

    Attributes:
        gpu: the entry the roofline reads: the catalog's own, or for a card the catalog lacks (one
            described by hand, a local GPU it does not know) the card's own figures and, where it
            has none, those of ``stand_in``.
        assumed: each figure taken from the stand-in (``BANDWIDTH``, ``TFLOPS``, ``PCIE``) with
            its value as people read it ("165.2 TFLOPS"); empty when none is.
        stand_in: the catalog GPU the assumed figures are, or "".
    """

    gpu: CatalogGpu
    assumed: tuple[tuple[str, str], ...] = ()
    stand_in: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.name,
            "assumed": {figure: value for figure, value in self.assumed},
            "stand_in": self.stand_in or None,
        }


def card_speeds(
    name: str, entry: CatalogGpu | None, stand_in: CatalogGpu, given: Sequence[str] = ()
) -> CardSpeeds:
    """The speeds GPU ``name`` is timed with: its catalog entry's where the catalog knows it;
    for a card described by hand (``entry`` of ``CUSTOM_VENDOR``) or a GPU the catalog lacks
    (``entry`` None), its own figures and each one it lacks assumed from ``stand_in``, said in
    ``assumed``. The card keeps its own name, so llama.cpp's kernels are costed as on a card of
    its own kind (a name that says no GeForce, no fp16-accumulate doubling), never the
    stand-in's.

    Args:
        name: the GPU as the user or the driver names it.
        entry: its catalog entry, or None.
        stand_in: the catalog GPU whose figures stand in for those unknown.
        given: the figures set beside it by hand (``BANDWIDTH``, ``TFLOPS``, ``PCIE``), which
            are not assumed.
    """
    if entry is not None and entry.vendor != CUSTOM_VENDOR:
        return CardSpeeds(entry)
    base = entry or custom_gpu(stand_in.memory_bytes / (1 << 30), name=name)
    assumed: list[tuple[str, str]] = []
    bandwidth = base.memory_bandwidth_gbps
    if not bandwidth and BANDWIDTH not in given:
        bandwidth = stand_in.memory_bandwidth_gbps
        assumed.append((BANDWIDTH, f"{bandwidth:,.0f} GB/s"))
    tflops = base.bf16_tflops or base.fp16_tflops
    if tflops is None and TFLOPS not in given:
        tflops = stand_in.bf16_tflops or stand_in.fp16_tflops
        if tflops is not None:
            assumed.append((TFLOPS, f"{tflops:g} TFLOPS"))
    pcie = base.pcie_gen
    if pcie is None and PCIE not in given and stand_in.pcie_gen is not None:
        pcie = stand_in.pcie_gen
        assumed.append((PCIE, f"{pcie}.0"))
    gpu = dataclasses.replace(
        base,
        memory_bandwidth_gbps=bandwidth,
        fp16_tflops=tflops,
        bf16_tflops=tflops,
        pcie_gen=pcie,
    )
    return CardSpeeds(gpu, tuple(assumed), stand_in.name if assumed else "")


def bandwidths_for(
    gpu: CatalogGpu,
    host: HostSettings,
    *,
    gpu_peak_bytes_per_s: float | None = None,
    gpu_flops: float | None = None,
    pcie: float | None = None,
    cpu_ram_peak_bytes_per_s: float = offload.DEFAULT_CPU_RAM_PEAK_BYTES_PER_S,
    cpu_flops: float = offload.DEFAULT_CPU_FLOPS,
    gpu_efficiency: float = offload.GPU_MEMORY_EFFICIENCY,
    host_efficiency: float = offload.HOST_MEMORY_EFFICIENCY,
    others: Sequence[CatalogGpu | None] = (),
) -> Bandwidths:
    """The speeds decoding reaches with catalog GPU ``gpu`` on a PCIe link of its generation,
    the host's disk as ``host`` says, each figure given overriding the catalog's.

    Memory bandwidths are the measured shares of the peaks (``offload.expected_bandwidths``).
    Where the catalog has no 16-bit TFLOPS and none is given the rate is unknown (infinite:
    decode is never called compute-bound). ``others`` are GPU 1, 2... when the model spans
    several (their catalog peaks at the same share, GPU 0's where unknown).

    llama.cpp's layers on each GPU are costed by its kernels as measured on that GPU's kind
    (``core.llamacpp_speed``, the peaks as given), unless ``gpu_efficiency`` is set to another
    share than the default: then the roofline at that share, as asked.

    Raises:
        WorkloadError: an efficiency outside (0, 1] or a speed that is not positive.
    """
    listed = gpu.bf16_tflops or gpu.fp16_tflops
    default_flops = math.inf if listed is None else listed * 1e12
    flops_given = gpu_flops is not None and gpu_flops != default_flops
    if gpu_flops is None:
        gpu_flops = default_flops
    peak = gpu_peak_bytes_per_s or gpu.memory_bandwidth_bytes_per_s
    kernels: list[GpuKernels] = []
    if gpu_efficiency == offload.GPU_MEMORY_EFFICIENCY:
        kernels.append(_kernels(gpu, peak, gpu_flops if flops_given else None))
        kernels += [_kernels(other or gpu, None, None) for other in others]
    bandwidths = offload.expected_bandwidths(
        gpu_peak_bytes_per_s=peak,
        pcie_bytes_per_s=pcie or pcie_bytes_per_s(gpu.pcie_gen or 4),
        cpu_ram_peak_bytes_per_s=cpu_ram_peak_bytes_per_s,
        disk_bytes_per_s=host.disk_bytes_per_s,
        gpu_flops=gpu_flops,
        cpu_flops=cpu_flops,
        gpu_efficiency=gpu_efficiency,
        host_efficiency=host_efficiency,
    )
    bandwidths = dataclasses.replace(bandwidths, kernels=tuple(kernels))
    if not others:
        return bandwidths
    speeds = []
    for other in others:
        entry = other if other is not None else gpu
        tflops = entry.bf16_tflops or entry.fp16_tflops
        flops = tflops * 1e12 if tflops else gpu_flops
        speeds.append((entry.memory_bandwidth_bytes_per_s * gpu_efficiency, flops))
    return dataclasses.replace(bandwidths, other_gpus=tuple(speeds))


def _kernels(gpu: CatalogGpu, peak: float | None, flops: float | None) -> GpuKernels:
    """llama.cpp's kernels on ``gpu``: its catalog peaks (the 16-bit rate llama.cpp's products
    run at), each given figure overriding the catalog's."""
    listed = gpu.fp16_tflops or gpu.bf16_tflops
    if flops is None and listed:
        flops = listed * 1e12
    return kernels_for(gpu, peak or gpu.memory_bandwidth_bytes_per_s, flops)


@dataclass(frozen=True, slots=True)
class OffloadAnswer:
    """An offload plan and its speed.

    Attributes:
        placement: where each unit lives.
        bandwidths: the speeds it was timed with.
        host: the host RAM and disk it was placed with.
        throughput: decode at the workload's batch and context.
        prompt_tokens: the prompt ``prefill_seconds`` reads (None: the context).
        min_vram_bytes: the one-layer floor (the least GPU memory llama.cpp can start with).
        chosen: ``fastest`` (llama.cpp, nothing given: the faster of whole layers and experts in
            host RAM), ``fitted`` (llama.cpp's ``--fit``) or ``as set``.
        layers: llama.cpp's curve of whole layers on the GPUs (empty unless asked for).
        experts: llama.cpp's curve of experts in host RAM (empty likewise, or no experts).
        best: llama.cpp's fastest placement that fits of each kind (``layers``, ``experts``;
            None where none fits); empty for other planners, and where every layer fits the
            GPUs as placed and no curve was asked for.
    """

    placement: Placement
    bandwidths: Bandwidths
    host: HostSettings
    throughput: Throughput
    prompt_tokens: int | None
    min_vram_bytes: int
    chosen: str
    layers: tuple[CurvePoint, ...] = ()
    experts: tuple[CurvePoint, ...] = ()
    best: dict[str, CurvePoint | None] = dataclasses.field(default_factory=dict)

    # The plan's speed in detail, computed when asked (timing a setup needs none of it).

    @property
    def curve(self) -> tuple[Throughput, ...]:
        """Decode against the batch (``offload.DEFAULT_BATCHES``)."""
        return offload.throughput_curve(self.placement, self.bandwidths)

    @property
    def compute_bound_batch(self) -> int | None:
        """The smallest batch whose decode is bound by compute, or None."""
        return offload.compute_bound_batch(self.placement, self.bandwidths)

    @property
    def prefill_seconds(self) -> float:
        """The time to read the prompt."""
        return offload.prefill_seconds(self.placement, self.bandwidths, self.prompt_tokens)

    @property
    def alternatives(self) -> dict[str, CurvePoint | None]:
        """The fastest placement that fits of each kind (``layers``, ``experts``)."""
        return self.best

    @property
    def flags(self) -> str:
        """llama.cpp's placement flags of the plan (``-ngl 49 --n-cpu-moe 29``), else ""."""
        return placement_flags(self.placement)

    @property
    def gpu_memory(self) -> GpuMemoryRate:
        """The GPU memory speed the plan was timed at (GPU 0's)."""
        return gpu_memory_rate(self.placement, self.bandwidths)


@dataclass(frozen=True, slots=True)
class GpuMemoryRate:
    """The GPU memory speed a plan is timed at, as a front end shows it beside the others.

    Attributes:
        weights_bytes_per_s: reading the weights of the GPU's layers.
        cache_bytes_per_s: reading their KV cache (the same as the weights' under the roofline).
        peak_bytes_per_s: the peak these are shares of, None where the speed was given as is.
        basis: where the figures come from, in words.
    """

    weights_bytes_per_s: float
    cache_bytes_per_s: float
    peak_bytes_per_s: float | None
    basis: str


def gpu_memory_rate(placement: Placement, bandwidths: Bandwidths) -> GpuMemoryRate:
    """GPU 0's memory speed as the plan's timing takes it: under llama.cpp, its kernels' shares
    of the peak as measured on that kind of GPU (``core.llamacpp_speed``); otherwise, and where
    a speed was typed in, the roofline at ``bandwidths.gpu_bytes_per_s``."""
    kernels = bandwidths.kernels_of(0) if planner_engine(placement.planner).ggml else None
    if kernels is None:
        speed = bandwidths.gpu_bytes_per_s
        return GpuMemoryRate(
            speed,
            speed,
            None,
            "the offload roofline at this speed (docs/offload.md: "
            f"{offload.GPU_MEMORY_EFFICIENCY:.0%} of the peak unless typed in)",
        )
    peak, shares = kernels.memory_bytes_per_s, kernels.shares
    return GpuMemoryRate(
        peak * shares.weight_share,
        peak * shares.attention_share,
        peak,
        f"llama.cpp's kernels as measured on {shares.kind} GPUs "
        f"({', '.join(shares.measured_gpus)}): weights at {shares.weight_share:.0%} of the "
        f"peak, the KV cache at {shares.attention_share:.0%}",
    )


def one_layer_floor(spec: ModelSpec, workload: Workload) -> int:
    """The least GPU memory a model can be offloaded with (``offload.min_vram_bytes``)."""
    return offload.min_vram_bytes(spec, workload)


def llamacpp_model(spec: ModelSpec, workload: Workload) -> LlamaCppModel:
    """``spec`` sized for llama.cpp under ``workload``: what its plans place."""
    return offload.llamacpp_model(spec, workload)


def place_untimed(
    spec: ModelSpec,
    workload: Workload,
    planner: str,
    budgets: Sequence[int],
    *,
    host: HostSettings,
    margin_bytes: int,
    n_gpu_layers: int | None = None,
    layout: LlamaCppLayout | None = None,
    fit: FitResult | None = None,
    model: LlamaCppModel | None = None,
) -> Placement:
    """Where each layer goes on a GPU whose speeds are unknown: placed as ``plan_offload``
    places it (a llama.cpp fit, the slider's layers), not timed."""
    if not planner_engine(planner).ggml:
        return offload.plan(
            planner,
            spec,
            workload,
            budgets,
            host_ram_bytes=host.ram_bytes,
            margin_bytes=margin_bytes,
        )
    if fit is not None:
        return dataclasses.replace(fit.placement, margin_bytes=margin_bytes)
    return (model or offload.llamacpp_model(spec, workload)).place(
        budgets,
        host_ram_bytes=host.ram_bytes,
        n_gpu_layers=n_gpu_layers,
        margin_bytes=margin_bytes,
        layout=layout,
    )


def fit_like_llamacpp(
    spec: ModelSpec,
    workload: Workload,
    budgets: Sequence[int],
    *,
    margin_bytes: int,
    host: HostSettings,
    layout: LlamaCppLayout,
) -> FitResult:
    """llama.cpp's own fitting (``--fit``) of ``workload`` served by llama.cpp."""
    from vramgui.core.offload.fit import fit_llamacpp

    served = workload.with_(mode="inference", engine="llamacpp")
    return fit_llamacpp(
        spec,
        served,
        budgets,
        margin_bytes=margin_bytes,
        host_ram_bytes=host.ram_bytes,
        layout=layout,
    )


def llamacpp_curves(
    model: LlamaCppModel,
    budgets: Sequence[int],
    bandwidths: Bandwidths,
    *,
    layout: LlamaCppLayout,
    host: HostSettings,
    margin_bytes: int,
) -> tuple[tuple[CurvePoint, ...], tuple[CurvePoint, ...]]:
    """Tokens/s against GPU memory: whole layers on the GPUs, and experts in host RAM."""
    kwargs: dict[str, Any] = {
        "layout": layout,
        "host_ram_bytes": host.ram_bytes,
        "margin_bytes": margin_bytes,
    }
    return (
        tuple(layer_curve(model, budgets, bandwidths, **kwargs)),
        tuple(expert_curve(model, budgets, bandwidths, **kwargs)),
    )


def launch_lines(spec: ModelSpec, placement: Placement) -> tuple[LaunchSettings, ...]:
    """Each engine's settings for the plan; an Ollama model's own first, under its name."""
    from vramgui.core.launch import launch_settings

    ollama = spec.name if spec.source.startswith("Ollama") else None
    return launch_settings(spec, placement.workload, placement, ollama=ollama)


def placement_flags(placement: Placement) -> str:
    """llama.cpp's ``-ngl``, experts-in-RAM and op-offload flags of ``placement``; "" for other
    planners."""
    if not planner_engine(placement.planner).ggml:
        return ""
    flags = f"-ngl {placement.gpu_layers}"
    layout = placement.layout
    if layout is not None and layout.cpu_moe:
        flags += " --cpu-moe"
    elif layout is not None and layout.n_cpu_moe:
        flags += f" --n-cpu-moe {layout.n_cpu_moe}"
    if layout is not None and not layout.op_offload:
        flags += " --no-op-offload"
    return flags


def _chooses_itself(n_gpu_layers: int | None, layout: LlamaCppLayout | None) -> bool:
    """Nothing given that places tensors: the plan may pick the fastest placement."""
    if n_gpu_layers is not None:
        return False
    return layout is None or not (layout.cpu_moe or layout.n_cpu_moe or layout.overrides)


def everything_on_gpus(placement: Placement) -> bool:
    """Every layer and expert on the GPUs, within their budgets (llama.cpp keeps the token
    embeddings in host RAM whatever the placement)."""
    layout = placement.layout
    moved = layout is not None and bool(layout.cpu_moe or layout.n_cpu_moe or layout.overrides)
    return (
        placement.fits
        and placement.gpu_layers == placement.blocks + 1
        and not moved
        and not placement.disk_bytes
    )


def plan_offload(
    spec: ModelSpec,
    workload: Workload,
    planner: str,
    budgets: Sequence[int],
    *,
    bandwidths: Bandwidths,
    host: HostSettings,
    n_gpu_layers: int | None = None,
    layout: LlamaCppLayout | None = None,
    margin_bytes: int = offload.DEFAULT_MARGIN_BYTES,
    prompt_tokens: int | None = None,
    fit: FitResult | None = None,
    model: LlamaCppModel | None = None,
    curves: bool = False,
) -> OffloadAnswer:
    """Place ``spec`` on GPUs of ``budgets`` with ``planner`` and time it.

    Under llama.cpp with no ``-ngl`` and no tensors placed by ``layout``, the placement is the
    fastest that fits (module docstring); ``fit`` (llama.cpp's ``--fit``) is taken as it is.
    ``curves`` walks llama.cpp's two curves too (a hundred placements: for a chart).
    ``model`` is ``offload.llamacpp_model(spec, workload)`` when the caller keeps one.
    ``prompt_tokens``: the prompt the first token is timed for (default: the workload's
    ``prompt``, else its context, as the curves' points and the estimate take it).

    Raises:
        WorkloadError: settings the planner does not support.
    """
    layers: tuple[CurvePoint, ...] = ()
    experts: tuple[CurvePoint, ...] = ()
    fastest: dict[str, CurvePoint | None] = {}
    ggml = planner_engine(planner).ggml
    if ggml and (model is None or model.workload != engine_workload(spec, workload, "llamacpp")):
        model = offload.llamacpp_model(spec, workload)
    placement = place_untimed(
        spec, workload, planner, list(budgets), host=host, margin_bytes=margin_bytes,
        n_gpu_layers=n_gpu_layers, layout=layout, fit=fit, model=model,
    )  # fmt: skip
    chosen = FITTED if ggml and fit is not None else AS_SET
    if ggml and model is not None:
        kwargs: dict[str, Any] = {
            "layout": layout,
            "host_ram_bytes": host.ram_bytes,
            "margin_bytes": margin_bytes,
        }
        if curves:
            layers = layer_curve(model, list(budgets), bandwidths, **kwargs)
            experts = expert_curve(model, list(budgets), bandwidths, **kwargs)
            fastest = {LAYERS: best(layers), EXPERTS: best(experts)}
        elif not everything_on_gpus(placement):
            # Every layer on the GPUs is the fastest there is: no search needed.
            fastest = best_points(model, list(budgets), bandwidths, **kwargs)
        if fit is None and _chooses_itself(n_gpu_layers, layout):
            chosen = FASTEST
            top = best([p for p in fastest.values() if p is not None])
            if top is not None:
                placement = place_point(model, top.kind, top.value, list(budgets), **kwargs)
    throughput = offload.decode_throughput(placement, bandwidths)
    return OffloadAnswer(
        placement=placement,
        bandwidths=bandwidths,
        host=host,
        throughput=throughput,
        prompt_tokens=prompt_tokens if prompt_tokens is not None else workload.prompt,
        min_vram_bytes=offload.min_vram_bytes(spec, workload),
        chosen=chosen,
        layers=layers,
        experts=experts,
        best=fastest,
    )
