"""The measured figures beside the estimate's: the ``measured`` block of the estimate document.

Torch-free: it reads a run's record (``harness.measure``, plus ``cuda`` on a GPU). The estimate
splits its peak more finely than a run can tell tensors apart, so components are compared in the
groups both can name: weights (with LoRA adapters), KV cache, gradients, optimizer states and
activations (everything else alive at the peak: activations, logits, temporaries, autocast's
weight copies). Errors are ``estimate / measured - 1``: positive where the estimate is higher.
"""

from __future__ import annotations

import re
from typing import Any

from vramgui.core.estimate import (
    ACTIVATIONS,
    GRADIENTS,
    KV_CACHE,
    OPTIMIZER_STATES,
    RUNTIME_OVERHEAD,
    WEIGHTS,
)
from vramgui.measure.request import CUDA

GROUPS = (WEIGHTS, KV_CACHE, ACTIVATIONS, GRADIENTS, OPTIMIZER_STATES)
# Estimate components that a run counts with another group; the rest are activations.
_ESTIMATE_GROUP = {
    WEIGHTS: WEIGHTS,
    "lora_adapters": WEIGHTS,
    "gathered_parameters": WEIGHTS,
    KV_CACHE: KV_CACHE,
    GRADIENTS: GRADIENTS,
    "gradient_buckets": GRADIENTS,
    OPTIMIZER_STATES: OPTIMIZER_STATES,
}
# The harness's categories (vramgui.measure.live_bytes.CATEGORIES) in the same groups.
_MEASURED_GROUP = {
    "parameters": WEIGHTS,
    KV_CACHE: KV_CACHE,
    GRADIENTS: GRADIENTS,
    OPTIMIZER_STATES: OPTIMIZER_STATES,
    "weight_copies": ACTIVATIONS,
    "other": ACTIVATIONS,
}
_REFERENCE_KERNEL_KEYS = re.compile(r"mamba|ssm|conv|linear_att|linear_conv|linear_key|state_size")
WHAT = {
    "fake": (
        "peak live tensor bytes (what torch.cuda.max_memory_allocated reports) of the transformers "
        "model built from config.json and run under PyTorch's FakeTensorMode on the CPU: no "
        "memory allocated, no weights downloaded; the runtime overhead (CUDA context, the "
        "allocator's cache) is not seen"
    ),
    CUDA: (
        "the transformers model built on this GPU from config.json (no weights downloaded) and "
        "run: torch.cuda.max_memory_allocated for the tensors, max_memory_reserved plus the CUDA "
        "context (NVML's figure less reserved) for the total"
    ),
}


def relative_error(estimate: int, measured: int | None) -> float | None:
    """``estimate / measured - 1``, or None where nothing was measured to compare with."""
    if not measured:
        return None
    return estimate / measured - 1


def figure(estimate: int, measured: int | None) -> dict[str, Any]:
    """One figure of the estimate beside its measurement."""
    return {
        "estimate": estimate,
        "measured": measured,
        "difference_bytes": None if measured is None else estimate - measured,
        "error": relative_error(estimate, measured),
    }


def count_figure(estimate: int, measured: int) -> dict[str, Any]:
    """A count of the estimate (parameters) beside the model the run built."""
    return {
        "estimate": estimate,
        "measured": measured,
        "difference": estimate - measured,
        "error": relative_error(estimate, measured),
    }


def estimate_groups(components: dict[str, int]) -> dict[str, int]:
    """The estimate's components (without the runtime overhead) in the compared groups."""
    out = dict.fromkeys(GROUPS, 0)
    for name, size in components.items():
        if name != RUNTIME_OVERHEAD:
            out[_ESTIMATE_GROUP.get(name, ACTIVATIONS)] += size
    return out


def measured_groups(breakdown: dict[str, int]) -> dict[str, int]:
    """A run's breakdown at its peak in the compared groups."""
    out = dict.fromkeys(GROUPS, 0)
    for category, size in breakdown.items():
        out[_MEASURED_GROUP.get(category, ACTIVATIONS)] += size
    return out


def runs_reference_kernels(config: dict[str, Any]) -> bool:
    """Whether the model has Mamba / SSM, short-convolution or linear-attention layers.

    transformers runs those through CUDA kernels where they are installed (mamba-ssm,
    causal-conv1d, flash-linear-attention) and through PyTorch reference code elsewhere, which can
    hold far more memory; a fake run on the CPU always takes the reference code.
    """
    for part in (config, config.get("text_config")):
        if not isinstance(part, dict):
            continue
        if any(_REFERENCE_KERNEL_KEYS.search(str(key)) for key in part):
            return True
        layer_types = part.get("layer_types")
        if isinstance(layer_types, list) and any(
            _REFERENCE_KERNEL_KEYS.search(str(kind)) for kind in layer_types
        ):
            return True
    return False


def measured_block(
    doc: dict[str, Any],
    result: dict[str, Any],
    device: str,
    *,
    config: dict[str, Any] | None = None,
    cpu_kernels_bytes: int | None = None,
) -> dict[str, Any]:
    """The ``measured`` block for an estimate document ``doc`` and a run's record ``result``.

    Args:
        doc: the estimate document (``core.report.estimate_document``).
        result: the run's record.
        device: "fake" or "cuda".
        config: the config.json the run built the model from (for what the notes say of it).
        cpu_kernels_bytes: on "fake", the estimate's peak tensor bytes for PyTorch's CPU kernels
            where they differ from CUDA's (the fake run executes the CPU ones); None otherwise.
    """
    per_gpu = doc["per_gpu"]
    cuda = result.get("cuda")
    estimated = estimate_groups(per_gpu["components"])
    measured = measured_groups(result["breakdown_at_peak"])
    components = {name: figure(estimated[name], measured[name]) for name in GROUPS}
    trainable = result["trainable_parameters"]
    adapters = trainable if doc["settings"].get("method") == "lora" else 0
    calls, fused = result.get("attention_calls", 0), result.get("fused_attention_calls", 0)
    block: dict[str, Any] = {
        "device": device,
        "what": WHAT[device],
        "phase": result["phase"],
        "estimate_phase": per_gpu["phase"],
        "parameters": count_figure(doc["model"]["parameters"], result["parameters"] - adapters),
        "tensor_bytes": figure(per_gpu["tensor_bytes"], result["peak_bytes"]),
        "components": components,
        "phases": {name: peak["peak_bytes"] for name, peak in result["phase_peaks"].items()},
        "attention": {"sdpa_calls": calls, "math_kernel_calls": max(0, calls - fused)},
        "seconds": result["seconds"],
        "versions": result["versions"],
        "notes": [],
    }
    if doc["settings"]["mode"] == "training":
        # Serving trains nothing: the built model's requires_grad flags say nothing there.
        block["trainable_parameters"] = count_figure(
            doc["model"]["trainable_parameters"], trainable
        )
    if cuda is not None:
        _add_cuda(block, per_gpu, result, cuda)
    else:
        block["host_peak_rss_bytes"] = result.get("host_peak_rss_bytes")
        block["notes"].append(
            "The runtime overhead (CUDA context, the allocator's cache) is estimated, not "
            "measured: a fake run has no GPU. `vramgui measure --device cuda` measures it."
        )
        _add_cpu_kernel_notes(block, result, config or {})
        if cpu_kernels_bytes is not None and cpu_kernels_bytes != per_gpu["tensor_bytes"]:
            block["cpu_kernels"] = figure(cpu_kernels_bytes, result["peak_bytes"])
            block["notes"].append(
                "The fake run executes PyTorch's CPU kernels, which keep other tensors than "
                "CUDA's here (dropout keeps a noise tensor instead of a bool mask; SDPA falls "
                "back to its math kernel): `cpu_kernels` compares the estimate for the CPU "
                "kernels with the run."
            )
    return block


def _add_cpu_kernel_notes(
    block: dict[str, Any], result: dict[str, Any], config: dict[str, Any]
) -> None:
    """Say where the fake run's CPU kernels hold what CUDA's would not."""
    math_calls = block["attention"]["math_kernel_calls"]
    if math_calls:
        block["notes"].append(
            f"{math_calls} of {block['attention']['sdpa_calls']} attention calls took SDPA's math "
            "kernel on the CPU (fp32 scores of batch x heads x seq x seq), which CUDA's fused "
            "kernels do not hold: the measured activations are the CPU's and can be far above a "
            "GPU's. `vramgui measure --device cuda` measures the GPU's."
        )
    if runs_reference_kernels(config):
        block["notes"].append(
            "This model has Mamba / SSM, convolution or linear-attention layers: on the CPU "
            "transformers runs them with PyTorch reference code, which can hold far more than "
            "the CUDA kernels (mamba-ssm, causal-conv1d, flash-linear-attention) a GPU runs."
        )


def _add_cuda(
    block: dict[str, Any], per_gpu: dict[str, Any], result: dict[str, Any], cuda: dict[str, Any]
) -> None:
    """The allocator's figures replace the counter's; the overhead and the total are measured."""
    allocated, reserved = cuda["max_memory_allocated"], cuda["max_memory_reserved"]
    context = cuda.get("context_bytes")
    overhead = None if context is None else reserved - allocated + context
    estimated_overhead = per_gpu["components"].get(RUNTIME_OVERHEAD, 0)
    block["live_tensor_bytes"] = result["peak_bytes"]
    block["tensor_bytes"] = figure(per_gpu["tensor_bytes"], allocated)
    block["components"][RUNTIME_OVERHEAD] = figure(estimated_overhead, overhead)
    block["total_bytes"] = figure(
        per_gpu["total_bytes"], None if context is None else reserved + context
    )
    block["cuda"] = cuda
    if context is None:
        block["notes"].append(
            "NVML could not tell this process's memory on the GPU: the CUDA context, and so the "
            "runtime overhead and the total, are not measured."
        )
