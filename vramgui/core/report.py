"""The estimate as one JSON-ready document (schema vramgui.estimate/1), shared by every front end.

docs/architecture.md describes it (docs/cli.md lists every key); the CLI prints it, profiles
store it, the window copies it.
"""

from __future__ import annotations

from typing import Any

from vramgui.core import rules, storage
from vramgui.core.estimate import Estimate, estimate, parameters_without_embeddings
from vramgui.core.fit import FitRow, fit_rows
from vramgui.core.model import Inventory, ModelSpec
from vramgui.core.offload import layer_weights
from vramgui.core.workload import Workload

SCHEMA = "vramgui.estimate/1"


def model_summary(spec: ModelSpec) -> dict[str, Any]:
    """The "model" object of the documents: name, architecture, parameters, layers, inventory,
    and the format the checkpoint is stored in."""
    return {
        "name": spec.name,
        "architecture": spec.architecture or spec.facts.model_type,
        "parameters": spec.parameters,
        "layers": spec.facts.num_layers,
        "inventory": spec.inventory.value,
        # The checkpoint's own format ("MXFP4 experts, bf16 elsewhere"), "" when unquantized.
        "stored_format": storage.format_label(spec, spec_dtype(spec)),
        "stored_quantization": spec.quantization,
        # What the figures rest on beyond the model's own tensors and config (empty when exact).
        "uncertainties": list(spec.warnings) if spec.inventory is Inventory.APPROXIMATE else [],
    }


def spec_dtype(spec: ModelSpec) -> str:
    """The 16-bit dtype a checkpoint keeps what it does not quantize in ("bf16" by default)."""
    return spec.stored_format.dtype if spec.stored_format is not None else "bf16"


def document_for(
    spec: ModelSpec, workload: Workload, capacities: list[tuple[str, int]]
) -> dict[str, Any]:
    """Estimate ``workload`` on ``spec``, fit it against ``capacities``, as one document.

    The first capacity sizes engines that size themselves to the GPU (vLLM's KV pool).

    Raises:
        VramguiError: the workload does not apply to the model.
    """
    est = estimate(spec, workload, capacities[0][1] if capacities else None)
    return estimate_document(spec, est, fit_rows(est, capacities))


def estimate_document(
    spec: ModelSpec, est: Estimate, rows: list[FitRow], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON document every front end hands out (docs/architecture.md, docs/cli.md)."""
    w = est.workload
    layers = layer_weights(spec, w)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "model": {**model_summary(spec), "trainable_parameters": est.trainable_parameters},
        "settings": w.to_dict(),
        "gpus": w.gpus,
        "per_gpu": {
            "total_bytes": est.total_bytes,
            "tensor_bytes": est.tensor_bytes,
            "phase": est.phase,
            "components": dict(est.components),
        },
        "host_bytes": est.host_bytes,
        "layers": [
            {"index": u.index, "name": u.name, "bytes": u.bytes, "kv_cache_bytes": u.kv_cache_bytes}
            for u in layers
        ],
        "fit": [r.to_dict() for r in rows],
        "rules_of_thumb": rules_of_thumb(spec, est),
        "notes": list(est.notes),
        "details": est.details,
    }
    if extra:
        doc.update(extra)
    return doc


def rules_of_thumb(spec: ModelSpec, est: Estimate) -> dict[str, int]:
    """The classic rules for the same setup, to show beside the detailed estimate."""
    w = est.workload
    bits = storage.bits_per_weight(spec, w.dtype, w.quant)
    out = {
        "params_x_bytes_x_1.2": rules.serving_rule(spec.parameters, bits),
        "one_layer_floor": rules.one_layer_floor(
            parameters_without_embeddings(spec), max(1, spec.facts.num_layers), bits
        ),
    }
    if w.mode == "training" and w.method in ("lora", "qlora"):
        out["hamel_lora"] = rules.lora_rule(
            rules.weights_rule(spec.parameters, bits), est.trainable_parameters, 16
        )
    elif w.mode == "training":
        for name, per_param in (("accelerate_8_bytes", 8), ("hf_docs_18_bytes", 18)):
            out[name] = rules.training_bytes_per_parameter(spec.parameters, per_param)
    return out
