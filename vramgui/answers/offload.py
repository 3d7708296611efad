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
)
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.hardware.gpus import CatalogGpu
from vramgui.hardware.host import pcie_bytes_per_s

if TYPE_CHECKING:
    from vramgui.core.model import ModelSpec
    from vramgui.core.offload import Bandwidths, LlamaCppModel, Placement, Throughput
    from vramgui.core.offload.fit import FitResult
    from vramgui.core.workload import Workload

# How the placement was chosen (``OffloadAnswer.chosen``).
FASTEST = "fastest"
AS_SET = "as set"
FITTED = "fitted"


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
    if flops is None:
        flops = listed * 1e12 if listed else 1.0  # no tensor rate (Apple): no prompt costed
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

    Raises:
        WorkloadError: settings the planner does not support.
    """
    layers: tuple[CurvePoint, ...] = ()
    experts: tuple[CurvePoint, ...] = ()
    fastest: dict[str, CurvePoint | None] = {}
    chosen = AS_SET
    if not planner_engine(planner).ggml:
        placement = offload.plan(
            planner,
            spec,
            workload,
            list(budgets),
            host_ram_bytes=host.ram_bytes,
            margin_bytes=margin_bytes,
        )
    else:
        if model is None or model.workload != engine_workload(spec, workload, "llamacpp"):
            model = offload.llamacpp_model(spec, workload)
        base = layout or LlamaCppLayout()
        if fit is not None:
            placement, chosen = (
                dataclasses.replace(fit.placement, margin_bytes=margin_bytes),
                FITTED,
            )
        else:
            placement = model.place(
                list(budgets),
                host_ram_bytes=host.ram_bytes,
                n_gpu_layers=n_gpu_layers,
                margin_bytes=margin_bytes,
                layout=base,
            )
        kwargs: dict[str, Any] = {
            "layout": base,
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
                placement = _place_point(
                    model, top, budgets, host=host, margin_bytes=margin_bytes, base=base
                )
    throughput = offload.decode_throughput(placement, bandwidths)
    return OffloadAnswer(
        placement=placement,
        bandwidths=bandwidths,
        host=host,
        throughput=throughput,
        prompt_tokens=prompt_tokens,
        min_vram_bytes=offload.min_vram_bytes(spec, workload),
        chosen=chosen,
        layers=layers,
        experts=experts,
        best=fastest,
    )


def _place_point(
    model: LlamaCppModel,
    point: CurvePoint,
    budgets: Sequence[int],
    *,
    host: HostSettings,
    margin_bytes: int,
    base: LlamaCppLayout,
) -> Placement:
    """The placement a curve point stands for."""
    if point.kind == LAYERS:
        layout = dataclasses.replace(base, cpu_moe=False, n_cpu_moe=0, overrides=())
        ngl = point.value
    else:
        layout = dataclasses.replace(base, cpu_moe=False, n_cpu_moe=point.value, overrides=())
        ngl = model.blocks + 1
    return model.place(
        list(budgets),
        host_ram_bytes=host.ram_bytes,
        n_gpu_layers=ngl,
        margin_bytes=margin_bytes,
        layout=layout,
    )
