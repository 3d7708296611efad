"""estimate(spec, workload) -> Estimate: GPU memory per GPU at the peak moment, by component."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramgui.core import dtypes, inference, rope, sglang_startup, storage, training
from vramgui.core.engines import engine
from vramgui.core.errors import Message, Setting, VramguiError
from vramgui.core.model import ModelSpec, Role
from vramgui.core.units import format_bytes
from vramgui.core.vllm import profile as vllm_profile
from vramgui.core.vllm.startup import VllmEngine
from vramgui.core.workload import Workload

WEIGHTS = "weights"
KV_CACHE = "kv_cache"
ACTIVATIONS = "activations"
GRADIENTS = "gradients"
OPTIMIZER_STATES = "optimizer_states"
RUNTIME_OVERHEAD = "runtime_overhead"
COMPONENTS = (WEIGHTS, KV_CACHE, ACTIVATIONS, GRADIENTS, OPTIMIZER_STATES, RUNTIME_OVERHEAD)

# CUDA context of PyTorch 2.10 + CUDA 13.0 with lazy module loading, measured at 426 MiB
# (unslothai/unsloth-zoo pull request 1053); llama.cpp loads fewer kernels: PyTorch 1.13's lazy
# loading figure of 274 MiB (pytorch/pytorch pull request 86509) stands in for it.
CUDA_CONTEXT_BYTES = 446_693_376
LLAMACPP_CONTEXT_BYTES = 287_047_680
# The caching allocator's cached-but-free blocks and fragmentation, as a share of peak live tensors.
# Training: measured reserved-over-allocated of 11 % (full fine-tune) to 22 % (QLoRA) in
# fms-acceleration's A100 runs (device_used - peak_allocated - context); 15 % is their middle.
# Inference keeps fewer short-lived blocks of varying size: 5 %.
TRAINING_ALLOCATOR_SLACK = 0.15
INFERENCE_ALLOCATOR_SLACK = 0.05


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
        host_bytes: host RAM the setup needs beside the GPU (offloaded states, host embeddings).
        notes: explanations and warnings for the user.
        details: engine-specific figures (e.g. vLLM pool tokens) and sub-components.
        vllm: vLLM's start-up on any GPU, for fits against GPUs other than the one the
            estimate was sized for (the vLLM engine only).
        sglang: SGLang's start-up on any GPU, likewise (the SGLang engine only).
    """

    model_name: str
    architecture: str
    parameters: int
    trainable_parameters: int
    layers: int
    workload: Workload
    phase: str
    components: dict[str, int]
    host_bytes: int = 0
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    vllm: VllmEngine | None = field(default=None, compare=False, repr=False)
    sglang: sglang_startup.SglangEngine | None = field(default=None, compare=False, repr=False)

    @property
    def total_bytes(self) -> int:
        return sum(self.components.values())

    @property
    def tensor_bytes(self) -> int:
        """Peak live tensor bytes: what torch.cuda.max_memory_allocated reports."""
        return self.total_bytes - self.components.get(RUNTIME_OVERHEAD, 0)


def estimate(
    spec: ModelSpec,
    workload: Workload,
    capacity_bytes: int | None = None,
    gpu_name: str = "",
    draft: ModelSpec | None = None,
) -> Estimate:
    """Memory per GPU for running ``workload`` on ``spec``.

    Args:
        spec: the model.
        workload: the settings.
        capacity_bytes: the GPU's memory where the engine sizes itself to it (vLLM's KV pool).
        gpu_name: the GPU's name, where the engine's defaults depend on it (vLLM).
        draft: the draft model of vLLM's speculative decoding (``speculative="draft"``).

    Raises:
        WorkloadError: the settings do not apply to this model.
    """
    return Estimator(spec, workload, capacity_bytes, gpu_name, draft)._sized(workload)


class Estimator:
    """Estimates of one model and setup at any batch size and sequence length.

    Sweeps and solvers estimate one setup at many sizes: what does not depend on ``batch`` and
    ``seq`` (the checks, weights, optimizer states, per-token widths, notes) is worked out once,
    here, and :meth:`at` adds what does. ``Estimator(spec, w, c).at(field, value)`` is
    ``estimate(spec, w.with_size(field, value), c)``, the same bytes and the same errors.

    Args:
        spec: the model.
        workload: the settings; ``batch`` and ``seq`` are the ones :meth:`at` changes.
        capacity_bytes, gpu_name, draft: as for :func:`estimate`.
    """

    __slots__ = ("_error", "_notes", "_plan", "_spec", "_workload")

    def __init__(
        self,
        spec: ModelSpec,
        workload: Workload,
        capacity_bytes: int | None = None,
        gpu_name: str = "",
        draft: ModelSpec | None = None,
    ) -> None:
        self._spec = spec
        self._workload = workload
        self._notes = spec.warnings
        self._error: VramguiError | None = None
        self._plan: inference.InferencePlan | training.TrainingPlan | None = None
        try:
            self._notes = (
                *spec.warnings,
                *override_notes(spec, workload),
                *rope.notes(spec.facts, workload),
            )
            workload.check_checkpoint(spec.quantization)
            if workload.mode == "inference":
                self._plan = inference.InferencePlan(
                    spec, workload, capacity_bytes, gpu_name, draft
                )
            else:
                self._plan = training.TrainingPlan(spec, workload)
        except VramguiError as exc:
            # Raised by at(), where estimate() would raise it.
            self._error = exc

    def at(self, field: str, value: int) -> Estimate:
        """The estimate with ``batch`` or ``seq`` set to ``value``.

        Raises:
            WorkloadError: the value is out of range or the settings do not apply to this model.
            ValueError: ``field`` is neither ``batch`` nor ``seq``.
        """
        return self._sized(self._workload.with_size(field, value))

    def _sized(self, workload: Workload) -> Estimate:
        # ``workload`` differs from the estimator's in batch and seq only.
        plan = self._plan
        if plan is None:
            raise self._error.with_traceback(None)  # type: ignore[union-attr]
        spec = self._spec
        notes: list[str] = list(self._notes)
        details: dict[str, Any] = {}
        vllm = None
        sglang = None
        engine_overhead = None
        if isinstance(plan, inference.InferencePlan):
            inf = plan.breakdown(workload.batch, workload.seq, layer_split=True)
            components = {
                WEIGHTS: inf.weights_bytes,
                KV_CACHE: inf.kv_cache_bytes,
                ACTIVATIONS: inf.activations_bytes,
                GRADIENTS: 0,
                OPTIMIZER_STATES: 0,
            }
            phase, host, trainable = inf.phase, inf.host_bytes, 0
            notes.extend(inf.notes)
            details.update(inf.details)
            vllm, engine_overhead = inf.vllm, inf.overhead_bytes
            sglang = inf.sglang
        else:
            tr = plan.breakdown(workload.batch, workload.seq)
            components = {
                WEIGHTS: 0,
                KV_CACHE: 0,
                ACTIVATIONS: 0,
                GRADIENTS: 0,
                OPTIMIZER_STATES: 0,
            }
            for name, value in tr.components.items():
                components[name] = components.get(name, 0) + value
            phase, host, trainable = tr.phase, tr.host_bytes, tr.trainable_parameters
            notes.extend(tr.notes)
            details["phase_totals"] = dict(tr.phase_totals)
        if engine_overhead is not None and workload.overhead_bytes is None:
            components[RUNTIME_OVERHEAD] = engine_overhead
        else:
            components[RUNTIME_OVERHEAD] = runtime_overhead_bytes(
                workload, sum(components.values())
            )
        return Estimate(
            model_name=spec.name,
            architecture=spec.architecture or spec.facts.model_type,
            parameters=spec.parameters,
            trainable_parameters=trainable,
            layers=spec.facts.num_layers,
            workload=workload,
            phase=phase,
            components=components,
            host_bytes=host,
            notes=tuple(notes),
            details=details,
            vllm=vllm,
            sglang=sglang,
        )


def override_notes(spec: ModelSpec, workload: Workload) -> tuple[str, ...]:
    """What the user should know when ``--quant`` replaces the checkpoint's own format, or puts
    a model without routed experts in MXFP4_MOE (every matrix Q8_0 then)."""
    if workload.quant.upper() == "MXFP4_MOE" and not spec.facts.num_experts:
        return (
            "MXFP4_MOE puts routed experts in MXFP4 and every other matrix in Q8_0: this model "
            "has no experts, so it is all Q8_0.",
        )
    if not storage.overridden(spec, workload.quant):
        return ()
    own = storage.format_label(spec, workload.dtype) or spec.quantization
    if storage.keeps_stored(workload.quant, spec.quantization):
        scheme = dtypes.get_scheme(workload.quant)
        tensors = storage.weight_bytes(spec, workload.dtype, workload.quant)
        return (
            f"Estimated as llama.cpp's GGUF of this checkpoint, {scheme.name}: "
            f"{scheme.description}, {format_bytes(tensors)} ({format_bytes(tensors, 'GB')}) of "
            f"tensors; the checkpoint ({own}) converts to it with its {scheme.gguf_type} "
            "weights as they are (convert_hf_to_gguf.py).",
        )
    return (
        Message(
            "Estimated as {quant}, not as the checkpoint is stored ({own}): running it so means "
            "quantizing the original weights to {value}.",
            quant=Setting("quant", workload.quant),
            own=own,
            value=workload.quant,
        ),
    )


def runtime_overhead_bytes(workload: Workload, tensor_bytes: int) -> int:
    """CUDA context plus the caching allocator's slack, unless the user set the overhead."""
    if workload.overhead_bytes is not None:
        return workload.overhead_bytes
    if workload.mode == "training":
        return CUDA_CONTEXT_BYTES + round(TRAINING_ALLOCATOR_SLACK * tensor_bytes)
    eng = engine(workload.engine)
    if eng.pre_allocates:
        # The context and NCCL's set-up, outside vLLM's share; its own non-torch memory is
        # counted in its activations.
        return vllm_profile.CUDA_CONTEXT_BYTES
    if eng.ggml:
        return LLAMACPP_CONTEXT_BYTES
    return CUDA_CONTEXT_BYTES + round(INFERENCE_ALLOCATOR_SLACK * tensor_bytes)


def parameters_without_embeddings(spec: ModelSpec) -> int:
    """Parameters outside embeddings and the LM head: what the one-layer floor divides."""
    return spec.parameters - spec.count((Role.EMBEDDING, Role.POSITION, Role.HEAD))
