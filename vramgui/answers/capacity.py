"""vLLM's start-up on each GPU of a setup: whether ``vllm serve`` starts, its KV pool, the
requests of the context it holds at once, the concurrency against ``--max-model-len``, and the
cheapest change that makes it start where it does not (the window's Serving tab)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vramgui.core import fit
from vramgui.core.errors import VramguiError, message_of
from vramgui.core.estimate import estimate
from vramgui.core.model import ModelSpec
from vramgui.core.rope import context_limit
from vramgui.core.vllm.encoders import towers_named
from vramgui.core.vllm.startup import Startup
from vramgui.core.workload import Workload

# The shortest --max-model-len the concurrency curve starts from.
SHORTEST_LEN = 1024


@dataclass(frozen=True, slots=True)
class GpuServing:
    """vLLM on one GPU.

    Attributes:
        name: the GPU.
        capacity_bytes: its memory.
        startup: vLLM's start-up there (None: vLLM refuses the settings for this model).
        error: why there is no start-up, else "".
        curve: ``(max_model_len, requests at once)`` from :data:`SHORTEST_LEN` to the model's
            context, the current length included; below 1 vLLM does not start (0: no pool).
        cheapest: the cheapest change that makes vLLM start there, where it does not.
    """

    name: str
    capacity_bytes: int
    startup: Startup | None
    error: str
    curve: tuple[tuple[int, float], ...]
    cheapest: fit.Suggestion | None

    def to_dict(self) -> dict[str, Any]:
        """The GPU's entry of ``serving_report`` in the estimate document (docs/cli.md); the
        start-up itself is the fit row's ``vllm``."""
        cheapest = self.cheapest
        return {
            "gpu": self.name,
            "capacity_bytes": self.capacity_bytes,
            "error": self.error,
            "curve": [
                {"max_model_len": length, "max_concurrency": round(at_once, 4)}
                for length, at_once in self.curve
            ],
            "cheapest_change": None
            if cheapest is None
            else {"title": cheapest.title, "changes": cheapest.changes, "cost": cheapest.cost},
        }


@dataclass(frozen=True, slots=True)
class ServingReport:
    """vLLM on every chosen GPU, for one model and setting."""

    seq: int
    context: int
    gpus: tuple[GpuServing, ...]

    @property
    def unmodelled(self) -> str:
        """The towers vLLM's profile run counts that the estimate does not, in words ("vision
        tower"), "" where none."""
        towers = next((g.startup.unmodelled for g in self.gpus if g.startup), ())
        return towers_named(towers) if towers else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "context": self.context,
            "gpus": [g.to_dict() for g in self.gpus],
        }


def serving_report(
    spec: ModelSpec,
    workload: Workload,
    capacities: Sequence[tuple[str, int]],
    draft: ModelSpec | None = None,
) -> ServingReport:
    """vLLM's start-up on each of ``capacities`` (pure: runs on a worker thread)."""
    context = max(context_limit(spec.facts, workload), workload.seq)
    lengths = sorted(
        {2**k for k in range(int(math.log2(SHORTEST_LEN)), int(math.log2(context)) + 1)}
        | {workload.seq, context}
    )
    out = []
    for name, capacity in capacities:
        try:
            engine = estimate(spec, workload, capacity, name, draft).vllm
            if engine is None:
                raise VramguiError("not served by vLLM")
            plan = engine.plan(capacity, name)
        except VramguiError as exc:
            out.append(GpuServing(name, capacity, None, message_of(exc), (), None))
            continue
        up = engine.startup(capacity, name)
        curve = []
        for length in lengths:
            at = plan.startup(capacity, workload.gpu_memory_utilization, length)
            # Below one request vLLM refuses: the share of a request its pool holds still shows
            # how far it is from starting.
            curve.append((length, at.max_concurrency if at.largest_model_len else 0.0))
        cheapest = None
        if not up.starts or up.used_bytes > capacity:
            cheapest = next(
                (s for s in fit.advise(spec, workload, capacity, draft) if s.fits), None
            )
        out.append(GpuServing(name, capacity, up, "", tuple(curve), cheapest))
    return ServingReport(workload.seq, context, tuple(out))
