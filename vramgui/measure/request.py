"""Which estimates a run can check, and the harness settings that reproduce them.

Torch-free, so that the window can say why Verify is unavailable before it starts anything. The
harness runs transformers itself (prefill and decode as ``generate`` runs them, or a training
step) on one device, from config.json: engines, quantized weights and several GPUs are estimated
but not run here.
"""

from __future__ import annotations

from typing import Any

from vramgui.core.activations import attention_used
from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
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


class MeasureError(VramguiError):
    """A setup a run cannot reproduce, or a run that failed; the message says which and why."""


def unmeasurable_reason(spec: ModelSpec, workload: Workload) -> str | None:
    """Why a run cannot reproduce this estimate, or None when it can."""
    w = workload
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
            (w.engine != "transformers", f"{w.engine} is estimated, not run; choose transformers"),
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


def harness_settings(spec: ModelSpec, workload: Workload, device: str) -> dict[str, Any]:
    """The harness's settings for this estimate on ``device`` ("fake" or "cuda").

    Raises:
        MeasureError: the estimate is one a run cannot reproduce (see ``unmeasurable_reason``).
    """
    if device not in DEVICES:
        raise MeasureError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    reason = unmeasurable_reason(spec, workload)
    if reason:
        raise MeasureError(f"cannot measure this setup: {reason}")
    values = workload.to_dict()
    names = _SHARED + (_TRAINING if workload.mode == "training" else ())
    settings: dict[str, Any] = {name: values[name] for name in names}
    # What the estimate ran: a model transformers runs with eager attention only is built so.
    settings["attention"] = attention_used(spec, workload)
    settings["fake"] = device == FAKE
    return settings


def steps(settings: dict[str, Any], is_decoder: bool) -> tuple[str, ...]:
    """The phases a run goes through, in order, for progress: building the model first."""
    if settings["mode"] == "inference":
        return ("load", "prefill", "decode") if is_decoder else ("load", "forward")
    accum = int(settings.get("grad-accum", 1))
    step = ("forward", "backward") * accum + ("optimizer step", "zero_grad")
    return ("load", *step, *step)
