"""Multi-token-prediction layers: stored in some checkpoints, loaded only for speculative decoding.

DeepSeek-V3 / V3.2, GLM-4.5 and later, MiMo, MiniMax M2, Qwen3-Next / Qwen3.5 and Nemotron 3
ship one or more extra decoder blocks that predict tokens further ahead. transformers never
builds them; vLLM loads them when serving with MTP speculative decoding (``--speculative-config
'{"method": "mtp", ...}'``). Each is counted as the checkpoint's last decoder block, plus the
projection that joins the embedding and the hidden state (``eh_proj``, 2 x hidden to hidden) and
its norms; the embedding and output head they name are the model's own (vLLM shares them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from vramgui.core.model import ModelSpec, Role, Tensor

# The config keys that count a checkpoint's MTP modules, in the families that use each.
_COUNT_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
_MTP_NAME = re.compile(r"(?:^|\.)mtp(?:_layers|_block)?(?:\.|$)")


def mtp_layer_count(config: Mapping[str, Any]) -> int:
    """How many MTP modules the checkpoint of ``config`` stores (0 when it says none)."""
    scopes = [config]
    text = config.get("text_config")
    if isinstance(text, Mapping):
        scopes.append(text)
    for scope in scopes:
        for key in _COUNT_KEYS:
            value = scope.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return min(value, 16)
    return 0


def is_mtp_tensor(name: str, layer: int | None, num_layers: int) -> bool:
    """Whether a stored tensor belongs to an MTP module: a block past the model's last one
    (``model.layers.61`` of a 61-layer DeepSeek-V3) or a name under ``mtp``."""
    return bool(_MTP_NAME.search(name)) or (layer is not None and layer >= num_layers)


def synthesized_mtp(spec: ModelSpec, count: int) -> tuple[Tensor, ...]:
    """``count`` MTP modules for a spec built from config.json: each a copy of the last decoder
    block, its ``eh_proj`` and three norms."""
    last = spec.facts.num_layers - 1
    block = spec.layer_tensors(last)
    if count <= 0 or not block:
        return ()
    hidden = spec.facts.hidden_size
    out: list[Tensor] = []
    for k in range(count):
        layer = spec.facts.num_layers + k
        prefix = f"model.layers.{layer}."
        for t in block:
            name = re.sub(rf"(^|\.)layers\.{last}\.", rf"\g<1>layers.{layer}.", t.name)
            out.append(replace(t, name=name, layer=layer))
        out.append(
            Tensor(f"{prefix}eh_proj.weight", (hidden, 2 * hidden), Role.OTHER, layer, "eh_proj")
        )
        for norm in ("enorm", "hnorm", "shared_head.norm"):
            out.append(Tensor(f"{prefix}{norm}.weight", (hidden,), Role.NORM, layer, norm))
    return tuple(out)
