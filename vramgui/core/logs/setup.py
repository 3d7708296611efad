"""What an engine's log says: the typed record every reader returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Engine = Literal["llamacpp", "ollama", "vllm", "sglang", "pytorch"]

ENGINE_NAMES: dict[str, str] = {
    "llamacpp": "llama.cpp",
    "ollama": "Ollama",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "pytorch": "PyTorch",
}

# The components a log can print, in the order an explanation lists them.
COMPONENTS = (
    "weights",
    "kv_cache",
    "recurrent_state",
    "compute_buffer",
    "projector",
    "cuda_graphs",
    "activations",
    "torch_allocated",
    "torch_reserved_free",
    "non_torch",
    "kv_pool",
    "output_buffer",
    "other_processes",
)
# Each component as a person reads it (the CLI's text and the window; the JSON keeps the names).
COMPONENT_LABELS: dict[str, str] = {
    "weights": "Weights",
    "kv_cache": "KV cache",
    "recurrent_state": "Recurrent state",
    "compute_buffer": "Compute buffer",
    "projector": "Multimodal projector",
    "cuda_graphs": "CUDA graphs",
    "activations": "Activation peak",
    "torch_allocated": "Allocated by PyTorch",
    "torch_reserved_free": "Reserved by PyTorch, unallocated",
    "non_torch": "CUDA context and libraries",
    "kv_pool": "KV cache pool",
    "output_buffer": "Output buffer",
    "other_processes": "Other processes",
}


def component_label(name: str) -> str:
    """The label of a component (``COMPONENTS``); an unknown name as it is."""
    return COMPONENT_LABELS.get(name, name)


@dataclass(frozen=True, slots=True)
class LoggedModel:
    """The model as the log describes it; None where it says nothing.

    Attributes:
        name: the name printed (``general.name``, vLLM's ``model=``, a file name).
        architecture: GGUF ``arch`` or the transformers class.
        metadata: llama.cpp's printed facts under their GGUF keys (``llama.block_count``...),
            enough for a spec when the model is not in the catalog.
    """

    name: str | None = None
    architecture: str | None = None
    layers: int | None = None
    file_type: str | None = None
    size_bytes: int | None = None
    parameters: int | None = None
    context_train: int | None = None
    metadata: dict[str, int | float | str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LoggedDevice:
    """A device the log names: ``CUDA0``, ``CPU``, ``GPU 0``."""

    name: str
    is_gpu: bool
    description: str = ""
    total_bytes: int | None = None
    free_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class LoggedComponent:
    """One figure the engine printed: ``name`` (one of ``COMPONENTS``) on ``device``."""

    name: str
    device: str
    bytes: int
    line: str = ""


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    """A decision the engine made and printed: a layer count, a refusal, an out-of-memory.

    Attributes:
        kind: ``offload`` (Ollama's layers), ``refusal`` (vLLM, SGLang), ``oom`` (an allocation
            that failed).
        summary: the engine's own words, shortened.
        figures: the numbers behind it, named as the engine names them.
    """

    kind: Literal["offload", "refusal", "oom"]
    summary: str
    figures: dict[str, float | int | str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LoggedSetup:
    """Everything one log says about a run.

    Attributes:
        engine: which engine printed it.
        engine_version: its version or build, when printed.
        model: the model's printed facts.
        settings: the run's settings, named as vramgui's workload names them (``seq``,
            ``batch``, ``kv_dtype``, ``n_gpu_layers``, ``gpu_memory_utilization``, ``tp``...).
        assumed: the settings the log did not print, taken at the engine's default.
        devices: the devices it names.
        components: the figures it printed.
        facts: other figures (pool tokens, concurrency, layers offloaded).
        decision: the decision it printed, if any.
        notes: what the reader noticed (a truncated log, a line it could not read).
    """

    engine: Engine
    engine_version: str | None = None
    model: LoggedModel = field(default_factory=LoggedModel)
    settings: dict[str, int | float | str | bool] = field(default_factory=dict)
    assumed: tuple[str, ...] = ()
    devices: tuple[LoggedDevice, ...] = ()
    components: tuple[LoggedComponent, ...] = ()
    facts: dict[str, int | float | str] = field(default_factory=dict)
    decision: LoggedDecision | None = None
    notes: tuple[str, ...] = ()

    @property
    def engine_name(self) -> str:
        return ENGINE_NAMES[self.engine]
