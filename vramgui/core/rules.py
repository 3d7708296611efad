"""The rules of thumb the field starts from, reproduced as published, for comparison.

Each returns bytes. "GB" in the sources is often 1024**3 bytes; the functions return exact bytes and
leave units to the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

OVERHEAD_FACTOR = 1.2


@dataclass(frozen=True, slots=True)
class RuleEstimate:
    """One rule's figure and how it was computed."""

    name: str
    bytes: int
    formula: str


def weights_rule(parameters: int | float, bits: float) -> int:
    """Parameters x bytes per parameter: the weights alone (Llama-2-7B fp32: 7e9 x 4 B)."""
    return round(parameters * bits / 8)


def serving_rule(parameters: int | float, bits: float, factor: float = OVERHEAD_FACTOR) -> int:
    """Parameters x bytes per parameter x ~1.2, the classic serving estimate."""
    return round(weights_rule(parameters, bits) * factor)


def lora_rule(
    base_bytes: int | float,
    trainable_parameters: int | float,
    bits: float,
    factor: float = OVERHEAD_FACTOR,
) -> int:
    """Hamel Husain's LoRA rule: (estimate + trainable params x bits/8 x 4) x 1.2.

    The 4 counts the adapter weights, their gradients and Adam's two states, all at ``bits``.
    Example: (14 GB + 0.5e9 x 16/8 x 4) x 1.2 = 21.6 GB.
    """
    return round((base_bytes + trainable_parameters * bits / 8 * 4) * factor)


def one_layer_floor(parameters_without_embeddings: int | float, layers: int, bits: float) -> int:
    """Layer-by-layer offloading needs at least one layer on the GPU: params / layers x bytes.

    OPT-175B fp16: 2 x 175e9 / 96 = 3.65 GB.
    """
    return round(parameters_without_embeddings / layers * bits / 8)


def training_bytes_per_parameter(parameters: int | float, bytes_per_parameter: float) -> int:
    """The per-parameter training rules for mixed-precision AdamW: accelerate's estimator (8 bytes),
    the transformers docs (18), DeepSpeed (16 to 20)."""
    return round(parameters * bytes_per_parameter)
