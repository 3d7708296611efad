"""Colours of the window, chosen to read on light and dark themes alike."""

from __future__ import annotations

FIT = "#2e7d32"
NO_FIT = "#c62828"
WARNING_STYLE = (
    "QLabel { background: #fff3cd; color: #5c4400; border: 1px solid #e0c068;"
    " border-radius: 4px; padding: 4px 6px; }"
)
ERROR_STYLE = (
    "QLabel { background: #fdecea; color: #7a1c1c; border: 1px solid #e8a3a3;"
    " border-radius: 4px; padding: 4px 6px; }"
)
OK_STYLE = (
    "QLabel { background: #e8f5e9; color: #1b4d1f; border: 1px solid #9ccc9f;"
    " border-radius: 4px; padding: 4px 6px; }"
)
INFO_STYLE = (
    "QLabel { background: #edf2f8; color: #1f2d3d; border: 1px solid #b8c6d6;"
    " border-radius: 4px; padding: 4px 6px; }"
)

# The badge of how an estimate was built: quiet when exact, loud when approximate.
_BADGE = "QLabel {{ {colours} border-radius: 4px; padding: 2px 8px; font-weight: bold; }}"
BADGE_STYLES = {
    "exact": _BADGE.format(colours=f"color: {FIT}; border: 1px solid {FIT};"),
    "headers": _BADGE.format(colours="color: #0b5394; border: 1px solid #0b5394;"),
    "approximate": _BADGE.format(colours="background: #e65100; color: white; border: none;"),
}

# One colour per estimate component, stable across redraws (colour-blind safe Okabe-Ito order).
COMPONENT_COLOURS = {
    "weights": "#0072B2",
    "kv_cache": "#E69F00",
    "activations": "#009E73",
    "gradients": "#CC79A7",
    "optimizer_states": "#D55E00",
    "runtime_overhead": "#999999",
}
EXTRA_COLOURS = ("#56B4E9", "#F0E442", "#882255", "#44AA99", "#117733", "#AA4499")

COMPONENT_LABELS = {
    "weights": "Weights",
    "kv_cache": "KV cache",
    "activations": "Activations",
    "gradients": "Gradients",
    "optimizer_states": "Optimizer states",
    "runtime_overhead": "Runtime overhead",
    "lora_adapters": "LoRA adapters",
    "backward_temporaries": "Backward temporaries",
    "dequantized_weight": "Dequantized weight",
    "optimizer_temporaries": "Optimizer-step temporaries",
    "autocast_weight_copies": "Autocast weight copies",
    "gathered_parameters": "Gathered parameters",
    "gradient_buckets": "Gradient buckets",
    "logits": "Logits",
}


def component_label(name: str) -> str:
    """A component's display name ("kv_cache" -> "KV cache"); unknown ones are made readable."""
    return COMPONENT_LABELS.get(name, name.replace("_", " ").capitalize())


RULE_LABELS = {
    "params_x_bytes_x_1.2": "params × bytes × 1.2",
    "one_layer_floor": "one-layer floor",
    "hamel_lora": "LoRA rule",
    "accelerate_8_bytes": "8 bytes/param",
    "hf_docs_18_bytes": "18 bytes/param",
}


def rule_label(name: str) -> str:
    """A rule of thumb's display name; unknown ones are made readable."""
    return RULE_LABELS.get(name, name.replace("_", " "))
