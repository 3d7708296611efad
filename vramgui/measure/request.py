"""Which estimates a run can check, and the harness settings that reproduce them.

Torch-free, so that the window can say why Verify is unavailable before it starts anything. The
harness runs transformers itself (prefill and decode as ``generate`` runs them, or a training
step) on one device, from config.json: engines, quantized weights and several GPUs are estimated
but not run here.
"""

from __future__ import annotations

from typing import Any

from vramgui.core.engines import engine
from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
from vramgui.core.prefill import attention_used
from vramgui.core.workload import Workload

FAKE = "fake"
CUDA = "cuda"
DEVICES = (FAKE, CUDA)
# The harness's settings, named as `vramgui estimate` names its options.
_SHARED = ("mode", "batch", "seq", "dtype", "attention")
_TRAINING = (
    "method",
    "precision",
    "optimizer",
    "grad-checkpointing",
    "lora-rank",
    "lora-targets",
    "grad-accum",
    "loop",
)
_RUNNABLE_OPTIMIZERS = ("adamw", "adamw-fused", "sgd", "adafactor")
# A fake run steps through every layer's operations in Python on the CPU: a toy model of 1,024
# layers took 53 s for its prefill and decode here (2,048 layer passes), 4,096 layers 165 s. Runs
# are held to this many layer passes (a model's layers times its forward passes), about a minute
# on a CPU; the deepest published models (126 layers) train with up to 4 micro-batches a step.
MAX_FAKE_LAYER_PASSES = 1024


class MeasureError(VramguiError):
    """A setup a run cannot reproduce, or a run that failed; the message says which and why."""


def forward_passes(workload: Workload) -> int:
    """The forward passes a run makes: prefill and decode, or two optimizer steps of
    ``grad_accum`` micro-batches each."""
    return 2 if workload.mode == "inference" else 2 * workload.grad_accum


def unmeasurable_reason(
    spec: ModelSpec, workload: Workload, device: str | None = None
) -> str | None:
    """Why a run on ``device`` cannot reproduce this estimate, or None when it can (``device``
    None: the checks that depend on it wait until it is chosen)."""
    w = workload
    layer_passes = spec.facts.num_layers * forward_passes(w)
    if device == FAKE and layer_passes > MAX_FAKE_LAYER_PASSES:
        return (
            f"a fake run steps through every layer in Python, tens of milliseconds a layer and "
            f"pass: {spec.facts.num_layers:,} layers x {forward_passes(w)} forward passes would "
            f"take minutes (runs are held to {MAX_FAKE_LAYER_PASSES:,} layer passes, about a "
            "minute)"
        )
    if spec.quantization:
        return (
            f"the checkpoint is stored as {spec.quantization}; a run builds the model from "
            "config.json in 16 or 32 bits"
        )
    checks: tuple[tuple[bool, str], ...] = (
        (w.quant != "none", f"--quant {w.quant}: quantized weights are not run, only estimated"),
        (w.gpus > 1, "a run uses one GPU; several GPUs are estimated, not run"),
        (w.cpu_offload, "CPU offload is estimated, not run"),
        (w.attention == "flash", "the run uses eager or sdpa attention, not flash"),
    )
    if w.mode == "inference":
        checks += (
            (
                not engine(w.engine).eager_pytorch,
                f"{w.engine} is estimated, not run; choose transformers",
            ),
            (w.kv_dtype not in ("auto", w.dtype), "a run keeps its KV cache in the weights' dtype"),
        )
    else:
        checks += (
            (w.method == "qlora", "QLoRA (4-bit weights) is estimated, not run"),
            (
                w.optimizer not in _RUNNABLE_OPTIMIZERS,
                f"the {w.optimizer} optimizer is not run; choose {', '.join(_RUNNABLE_OPTIMIZERS)}",
            ),
        )
    return next((reason for failed, reason in checks if failed), None)


def harness_settings(spec: ModelSpec, workload: Workload, device: str | None) -> dict[str, Any]:
    """The harness's settings for this estimate on ``device`` ("fake" or "cuda"; None: not
    chosen yet, the checks that depend on it wait).

    Raises:
        MeasureError: the estimate is one a run cannot reproduce (see ``unmeasurable_reason``).
    """
    if device is not None and device not in DEVICES:
        raise MeasureError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    reason = unmeasurable_reason(spec, workload, device)
    if reason:
        raise MeasureError(f"cannot measure this setup: {reason}")
    values = workload.to_dict()
    names = _SHARED + (_TRAINING if workload.mode == "training" else ())
    settings: dict[str, Any] = {name: values[name] for name in names}
    # What the estimate ran: a model transformers runs with eager attention only is built so.
    settings["attention"] = attention_used(spec, workload)
    settings["fake"] = device != CUDA
    return settings


def steps(settings: dict[str, Any], is_decoder: bool) -> tuple[str, ...]:
    """The phases a run goes through, in order, for progress: building the model first."""
    if settings["mode"] == "inference":
        return ("load", "prefill", "decode") if is_decoder else ("load", "forward")
    accum = int(settings.get("grad-accum", 1))
    step = ("forward", "backward") * accum + ("optimizer step", "zero_grad")
    return ("load", *step, *step)
