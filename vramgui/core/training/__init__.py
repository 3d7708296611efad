"""Training memory per GPU at the peak of a steady-state step: full, LoRA and QLoRA fine-tunes.

The activations are not a formula per family but a replay of what autograd keeps: each family's
layer is written as the sequence of operations transformers' implementation runs (norms, q/k/v,
rotary, attention, MLP, residuals, LoRA branches), and every operation saves for backward what
PyTorch's derivative of it needs (a linear keeps its input when its weight is trainable, a SiLU its
input, a product the other factor, a softmax its output...), with the dtype each tensor really has
under autocast or in pure 16-bit. The same replay gives the order in which backward frees those
tensors and creates gradients, so the peak moment (forward end, backward, optimizer step) follows.

Conditions that the figures follow: ``zero_grad(set_to_none=True)`` after each step, one
parameter group, checkpointing with ``use_reentrant=False`` (transformers' default), peft's
defaults (fp32 adapters on a 16-bit base, ``lora_dropout`` 0, no adapter on the LM head), and the
loop the workload names. transformers' Trainer (``loop="trainer"``) drops the model's outputs as
soon as ``compute_loss`` has the loss; its gradient clipping (``max_grad_norm=1.0``) and fp16
GradScaler allocate a scalar per gradient tensor and work in place, which changes no figure here.
The loop of tutorials and accelerate's examples (``loop="custom"``: ``outputs = model(**batch);
loss = outputs.loss; loss.backward()``) keeps ``outputs`` alive until the next forward has
returned: the logits through backward, the optimizer step and the next forward, in fp32 under
mixed precision (accelerate's ``convert_outputs_to_fp32`` wraps the forward).

The package: replay.py (the replay's tensors and operations), layers.py (each family's
block, embeddings and head as a program of those operations), weights.py (stored, trainable and
gathered bytes per tensor; LoRA targets), optimizers.py (states and step temporaries), phases.py
(the forward replayed block by block, and the totals at each moment of the step), plan.py (the
checks and :class:`TrainingPlan`), components.py (the names of phases and components, and the
breakdown a GPU reports)."""

from vramgui.core.training.components import (
    ACTIVATIONS,
    BACKWARD_TEMPORARIES,
    DEQUANTIZED_WEIGHT,
    GATHERED_PARAMETERS,
    GRADIENT_BUCKETS,
    GRADIENTS,
    LOGITS,
    LORA_ADAPTERS,
    OPTIMIZER_STATES,
    OPTIMIZER_TEMPORARIES,
    PHASE_BACKWARD,
    PHASE_FORWARD,
    PHASE_STEP,
    REQUIRED_COMPONENTS,
    WEIGHT_COPIES,
    WEIGHTS,
    TrainingBreakdown,
)
from vramgui.core.training.plan import DEVICES, FOUR_BIT_SCHEMES, TrainingPlan, training_estimate
from vramgui.core.training.weights import ALL_LINEAR, resolve_lora_targets

__all__ = [
    "ACTIVATIONS",
    "ALL_LINEAR",
    "BACKWARD_TEMPORARIES",
    "DEQUANTIZED_WEIGHT",
    "DEVICES",
    "FOUR_BIT_SCHEMES",
    "GATHERED_PARAMETERS",
    "GRADIENTS",
    "GRADIENT_BUCKETS",
    "LOGITS",
    "LORA_ADAPTERS",
    "OPTIMIZER_STATES",
    "OPTIMIZER_TEMPORARIES",
    "PHASE_BACKWARD",
    "PHASE_FORWARD",
    "PHASE_STEP",
    "REQUIRED_COMPONENTS",
    "WEIGHTS",
    "WEIGHT_COPIES",
    "TrainingBreakdown",
    "TrainingPlan",
    "resolve_lora_targets",
    "training_estimate",
]
