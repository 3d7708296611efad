"""What a front end asks of a model and its settings around the estimate: the longest context
the model takes, what the checkpoint itself stores (its format, dtype, KV-cache scheme) and
what it leaves to choose, the bits per weight under each scheme, Ollama's default context."""

from __future__ import annotations

from vramgui.core import launch, rope, serving, storage
from vramgui.core.model import ModelSpec
from vramgui.core.training import FOUR_BIT_SCHEMES
from vramgui.core.vllm.profile import LORA_RANKS
from vramgui.core.workload import Workload, quant_family

# What a front end shows for the context limit before a model is read.
NO_MODEL_CONTEXT = 131072
__all__ = [
    "FOUR_BIT_SCHEMES",
    "LORA_RANKS",
    "NO_MODEL_CONTEXT",
    "bits_by_scheme",
    "check_context",
    "checkpoint_kv",
    "context_limit",
    "converts_stored",
    "default_original",
    "from_gguf",
    "has_rotary",
    "ollama_context",
    "quantizable",
    "stored_dtype",
    "stored_format",
]


def context_limit(spec: ModelSpec | None, workload: Workload) -> int:
    """The model's longest context with the RoPE scaling in effect (``core.rope``)."""
    return rope.context_limit(spec.facts, workload) if spec else NO_MODEL_CONTEXT


def default_original(spec: ModelSpec | None) -> int:
    """The context a RoPE scaling stretches unless set: the config's (0: no model)."""
    return rope.default_original(spec.facts) if spec else 0


def check_context(spec: ModelSpec, workload: Workload) -> None:
    """Refuse a context past the model's, naming the RoPE scaling that would run it.

    Raises:
        WorkloadError: the context is past the model's limit, or RoPE scaling is set for a
            model without rotary embeddings.
    """
    rope.check_context(spec.name, spec.facts, workload)


def has_rotary(spec: ModelSpec) -> bool:
    """Whether the model has rotary position embeddings (RoPE scaling applies)."""
    return spec.facts.model_type not in rope.NO_ROTARY


def quantizable(spec: ModelSpec) -> bool:
    """Whether another quantization can be estimated from the checkpoint: its unquantized
    tensors are known (a pre-quantized checkpoint whose originals are not is estimated as
    stored)."""
    return storage.logical_tensors(spec) is not None


def from_gguf(spec: ModelSpec) -> bool:
    """Whether the model was read from a GGUF file (it takes GGUF types only)."""
    return storage.from_gguf(spec)


def stored_format(spec: ModelSpec | None, dtype: str) -> str:
    """The checkpoint's own format in words ("MXFP4 experts, bf16 elsewhere"), "" if unquantized."""
    if spec is None or spec.quantization is None:
        return ""
    return storage.format_label(spec, dtype) or spec.quantization


def converts_stored(spec: ModelSpec | None, quant: str) -> bool:
    """Whether ``quant`` is the GGUF llama.cpp runs the checkpoint as, its quantized weights as
    they are (``core.storage.keeps_stored``)."""
    return spec is not None and storage.keeps_stored(quant, spec.quantization)


def checkpoint_kv(spec: ModelSpec | None, workload: Workload) -> str:
    """The KV cache dtype the engine takes from the checkpoint's own KV-cache scheme
    (``serving.checkpoint_kv_dtype``), "" where it takes the one asked for."""
    if spec is None or workload.mode != "inference":
        return ""
    return serving.checkpoint_kv_dtype(spec, workload) or ""


def stored_dtype(spec: ModelSpec) -> str | None:
    """The Weights choice the checkpoint itself is stored in ("bf16", "fp16", "fp32"), or None.

    From the stored tensors' dtypes (most weights win), else the config's ``torch_dtype``. None
    for a GGUF file: its quantized types are its weights, and the F32 it keeps its norms in is
    no dtype to compute in.
    """
    if spec.quantization is not None and quant_family(spec.quantization) == "gguf":
        return None
    return storage.header_dtype(spec) or storage.config_dtype(spec)


def bits_by_scheme(spec: ModelSpec, dtype: str) -> dict[str, float]:
    """Bits per weight of ``spec`` under every scheme that can store it
    (``storage.bits_by_scheme``; 0.1-0.2 s the first time for a large model)."""
    return storage.bits_by_scheme(spec, dtype)


def ollama_context(memory_bytes: int) -> int:
    """The context Ollama runs a model at when nothing sets ``num_ctx``, for a GPU of
    ``memory_bytes`` (``launch.ollama_context``)."""
    return launch.ollama_context(memory_bytes)
