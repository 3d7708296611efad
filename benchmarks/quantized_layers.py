"""Which layers ``--quant nf4`` quantizes, against transformers' own bitsandbytes rule.

transformers' bitsandbytes integration (``replace_with_bnb_linear``) replaces every module whose
type is exactly ``nn.Linear`` (or GPT-2's ``Conv1D``) outside ``modules_to_not_convert``: the
output embeddings, the tied and last parameters (``get_keys_to_not_convert``) and the class's
``_keep_in_fp32_modules``. Here each architecture of vramgui's table is built by transformers
on the meta device from its default config (and a second, shrunk config for the hybrid ones),
that rule is run with transformers' own functions, and the weights it would quantize are set
beside the ones vramgui's estimate quantizes for ``--quant nf4`` in the transformers engine
(``serving.served_storage``: stacked experts, which bitsandbytes leaves alone, included).

    .venv/bin/python -m benchmarks.quantized_layers            # every architecture (minutes)
    .venv/bin/python -m benchmarks.quantized_layers qwen3_next mamba

Needs transformers (the measure extra). tests/core/test_quantized_layers.py runs the hybrid
mixers through it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parents[1] / "vramgui" / "core" / "families" / "architectures.json"

# Architectures with linear-attention, Mamba, short-convolution or recurrent mixers, and the
# smaller config each is checked at besides its default.
HYBRIDS: dict[str, dict[str, Any]] = {
    "qwen3_next": {"hidden_size": 1024, "num_hidden_layers": 8, "num_experts": 16},
    "qwen3_5_text": {"hidden_size": 1024, "num_hidden_layers": 8},
    "qwen3_5_moe_text": {"hidden_size": 1024, "num_hidden_layers": 8, "num_experts": 16},
    "mamba": {"hidden_size": 512, "num_hidden_layers": 4},
    "mamba2": {"hidden_size": 512, "num_hidden_layers": 4, "num_heads": 16},
    "falcon_mamba": {"hidden_size": 512, "num_hidden_layers": 4},
    "jamba": {"hidden_size": 512, "num_hidden_layers": 8, "num_experts": 4},
    "nemotron_h": {"hidden_size": 1024, "num_hidden_layers": 6, "hybrid_override_pattern": "M-M*-"},
    "granitemoehybrid": {"hidden_size": 512, "num_hidden_layers": 4},
    "falcon_h1": {"hidden_size": 512, "num_hidden_layers": 4},
    "bamba": {"hidden_size": 512, "num_hidden_layers": 4},
    "lfm2": {"hidden_size": 512, "num_hidden_layers": 6},
    "recurrent_gemma": {"hidden_size": 512, "num_hidden_layers": 6},
    "olmo_hybrid": {"hidden_size": 512, "num_hidden_layers": 8},
    "kimi_linear": {"hidden_size": 512, "num_hidden_layers": 4},
    "minimax": {"hidden_size": 512, "num_hidden_layers": 8},
}


def architectures() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))["architectures"]


def bnb_quantized(model: Any) -> set[str]:
    """The weights transformers' bitsandbytes replaces in ``model``, by its own functions."""
    from torch import nn
    from transformers.pytorch_utils import Conv1D
    from transformers.quantizers.base import get_keys_to_not_convert
    from transformers.quantizers.quantizers_utils import should_convert_module

    skip = set(get_keys_to_not_convert(model)) | set(model._keep_in_fp32_modules or ())
    return {
        f"{name}.weight"
        for name, module in model.named_modules()
        if should_convert_module(name, list(skip))
        and (isinstance(module, Conv1D) or type(module) is nn.Linear)
    }


def compare(model_type: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """transformers' quantized weights against vramgui's for one architecture and config."""
    import torch
    import transformers

    from vramgui.core import serving
    from vramgui.core.families import spec_from_config
    from vramgui.core.workload import Workload

    entry = architectures()[model_type]
    config = transformers.AutoConfig.for_model(model_type, **(overrides or {}))
    with torch.device("meta"):
        model = getattr(transformers, entry["architecture"])(config)
    library = bnb_quantized(model)
    spec = spec_from_config(config.to_dict(), model_type)
    workload = Workload.from_dict({"engine": "transformers", "dtype": "bf16", "quant": "nf4"})
    served = serving.served_storage(spec, workload).storage
    ours = {st.tensor.name for st in served if st.storage == "nf4"}
    numel = {st.tensor.name: math.prod(st.tensor.shape) for st in served}
    numel |= {n: math.prod(p.shape) for n, p in model.named_parameters()}
    return {
        "model_type": model_type,
        "config": "default" if not overrides else "small",
        "library": len(library),
        "ours": len(ours),
        "missed": sorted(library - ours),
        "extra": sorted(ours - library),
        "missed_share": sum(numel.get(n, 0) for n in library - ours) / max(1, spec.parameters),
        "extra_share": sum(numel.get(n, 0) for n in ours - library) / max(1, spec.parameters),
    }


def _grouped(names: list[str]) -> str:
    counts = Counter(re.sub(r"\.\d+\.", ".N.", n) for n in names)
    return ", ".join(f"{n} x{c}" for n, c in sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    wanted = (argv if argv is not None else sys.argv[1:]) or list(architectures())
    same = 0
    for model_type in wanted:
        sizes = [None, HYBRIDS[model_type]] if model_type in HYBRIDS else [None]
        for overrides in sizes:
            try:
                row = compare(model_type, overrides)
            except Exception as e:  # an architecture transformers cannot build from its defaults
                print(f"{model_type}: not built ({type(e).__name__}: {str(e)[:80]})")
                break
            if not row["missed"] and not row["extra"]:
                same += 1
                print(f"{model_type} ({row['config']}): same {row['library']} layers")
                continue
            print(f"{model_type} ({row['config']}): {row['library']} vs {row['ours']}")
            if row["missed"]:
                print(
                    f"  quantized by transformers only ({row['missed_share']:.3%} of the "
                    f"parameters): {_grouped(row['missed'])}"
                )
            if row["extra"]:
                print(
                    f"  quantized by vramgui only ({row['extra_share']:.3%}): "
                    f"{_grouped(row['extra'])}"
                )
    print(f"{same} configs with the same quantized layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
