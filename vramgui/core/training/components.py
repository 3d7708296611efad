"""The vocabulary of a training estimate: the moments of a step, the components held at them,
and the breakdown one GPU reports (the phase walk and the plan both speak it)."""

from __future__ import annotations

from dataclasses import dataclass, field

PHASE_FORWARD = "forward end"
PHASE_BACKWARD = "backward"
PHASE_STEP = "optimizer step"

WEIGHTS = "weights"
ACTIVATIONS = "activations"
GRADIENTS = "gradients"
OPTIMIZER_STATES = "optimizer_states"
OPTIMIZER_TEMPORARIES = "optimizer_temporaries"
LOGITS = "logits"
LORA_ADAPTERS = "lora_adapters"
WEIGHT_COPIES = "autocast_weight_copies"
BACKWARD_TEMPORARIES = "backward_temporaries"
GATHERED_PARAMETERS = "gathered_parameters"
GRADIENT_BUCKETS = "gradient_buckets"
DEQUANTIZED_WEIGHT = "dequantized_weight"
REQUIRED_COMPONENTS = (WEIGHTS, ACTIVATIONS, GRADIENTS, OPTIMIZER_STATES)


@dataclass(frozen=True, slots=True)
class TrainingBreakdown:
    """Memory one GPU holds at the peak moment of a training step.

    Attributes:
        components: bytes per component at the peak; ``weights``, ``activations``, ``gradients``,
            ``optimizer_states`` always, plus optional ones (``optimizer_temporaries``,
            ``logits``, ``lora_adapters``, ``autocast_weight_copies``, ``backward_temporaries``).
        phase: the moment of the peak: "forward end", "backward" or "optimizer step".
        trainable_parameters: parameters that get gradients.
        host_bytes: host RAM the setup needs for what is offloaded to the CPU.
        notes: how the figures were counted, for the user.
        phase_totals: the total at each phase's worst moment, for comparison.
    """

    components: dict[str, int]
    phase: str
    trainable_parameters: int
    host_bytes: int = 0
    notes: tuple[str, ...] = ()
    phase_totals: dict[str, int] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.components.values())
