"""estimate(spec, workload) -> Estimate: GPU memory per GPU at the peak moment, by component."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramgui.core.model import ModelSpec
from vramgui.core.workload import Workload

WEIGHTS = "weights"
KV_CACHE = "kv_cache"
ACTIVATIONS = "activations"
GRADIENTS = "gradients"
OPTIMIZER_STATES = "optimizer_states"
RUNTIME_OVERHEAD = "runtime_overhead"
COMPONENTS = (WEIGHTS, KV_CACHE, ACTIVATIONS, GRADIENTS, OPTIMIZER_STATES, RUNTIME_OVERHEAD)


@dataclass(frozen=True, slots=True)
class LayerBytes:
    """Weight bytes of one placement unit: embeddings, a block, the final norm + head."""

    index: int
    name: str
    bytes: int
    kv_cache_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Estimate:
    """Memory one GPU needs at the peak moment of the workload.

    Attributes:
        model_name: the model's display name.
        architecture: transformers class name or model_type.
        parameters: all parameters of the model.
        trainable_parameters: parameters that receive gradients (0 for inference).
        layers: decoder blocks.
        workload: the settings, after defaults.
        phase: when the peak falls ("prefill", "forward end", "backward", "optimizer step"...).
        components: bytes per component per GPU; they sum to ``total_bytes``.
        layer_bytes: per placement unit weight bytes (whole model, not sharded).
        host_bytes: host RAM the setup needs beside the GPU (offloaded states, host embeddings).
        notes: explanations and warnings for the user.
        details: engine-specific figures (e.g. vLLM pool tokens) and sub-components.
    """

    model_name: str
    architecture: str
    parameters: int
    trainable_parameters: int
    layers: int
    workload: Workload
    phase: str
    components: dict[str, int]
    layer_bytes: tuple[LayerBytes, ...] = ()
    host_bytes: int = 0
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.components.values())

    @property
    def tensor_bytes(self) -> int:
        """Peak live tensor bytes: what torch.cuda.max_memory_allocated reports."""
        return self.total_bytes - self.components.get(RUNTIME_OVERHEAD, 0)


def estimate(spec: ModelSpec, workload: Workload) -> Estimate:
    """Memory per GPU for running ``workload`` on ``spec``.

    Raises:
        WorkloadError: the settings do not apply to this model.
    """
    raise NotImplementedError
