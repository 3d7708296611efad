"""One entry for the three planners, by name (what the window and ``vramgui plan`` choose)."""

from __future__ import annotations

from collections.abc import Sequence

from vramgui.core.engines import planner_engine
from vramgui.core.errors import WorkloadError
from vramgui.core.model import ModelSpec
from vramgui.core.offload.accelerate import plan_accelerate
from vramgui.core.offload.defaults import PLANNERS
from vramgui.core.offload.llamacpp import plan_llamacpp
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.offload.placement import Placement
from vramgui.core.offload.streaming import plan_streaming
from vramgui.core.workload import Workload


def plan(
    planner: str,
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int | Sequence[int],
    *,
    host_ram_bytes: int | None = None,
    n_gpu_layers: int | None = None,
    margin_bytes: int = 0,
    layout: LlamaCppLayout | None = None,
) -> Placement:
    """Place with the named planner: ``llamacpp``, ``accelerate`` or ``streaming``.

    ``n_gpu_layers`` and ``layout`` (tensor overrides, the split across GPUs) apply to llama.cpp
    only (None: the most that fit). ``margin_bytes`` of each budget are kept free where the
    planner chooses how much goes to the GPU. ``vram_budget_bytes`` is one figure per GPU (or one
    for a single GPU).

    Raises:
        WorkloadError: an unknown planner or settings the engine does not support.
    """
    if planner_engine(planner).ggml:
        return plan_llamacpp(
            spec,
            workload,
            vram_budget_bytes,
            host_ram_bytes=host_ram_bytes,
            n_gpu_layers=n_gpu_layers,
            margin_bytes=margin_bytes,
            layout=layout,
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
        # Streaming runs on one GPU: the first.
        first = vram_budget_bytes if isinstance(vram_budget_bytes, int) else vram_budget_bytes[0]
        return plan_streaming(
            spec,
            workload,
            first,
            host_ram_bytes=host_ram_bytes,
            margin_bytes=margin_bytes,
        )
    raise WorkloadError(f"planner must be one of {', '.join(PLANNERS)}; got {planner!r}")
