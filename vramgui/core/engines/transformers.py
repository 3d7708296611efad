"""transformers (``model.generate``): the model's own PyTorch code, run eagerly.

It loads no NVFP4 or ModelOpt checkpoint (its NVFP4 quantizer quantizes on load, on Blackwell
only) and dequantizes a GGUF file to 16 bits when it loads one (``from_pretrained(...,
gguf_file=...)``), so GGUF sizes do not hold for it. Its cache takes the 16/32-bit dtypes.
accelerate's ``device_map`` and layer streaming load the model through it.
"""

from __future__ import annotations

from vramgui.core.engines.base import Engine, Planner

ENGINE = Engine(
    key="transformers",
    name="transformers",
    label="Transformers",
    order=0,
    quant_families=frozenset({"none", "bitsandbytes", "gptq-awq", "fp8", "mxfp4", "int"}),
    kv_cache={"auto": None, "fp32": None, "fp16": None, "bf16": None},
    dequantized_families=frozenset({"gguf"}),
    eager_pytorch=True,
    sizes_for_context=False,
    narrower_quants=("int8", "nf4"),
    planners=(
        Planner(key="accelerate", label="accelerate device_map", engine="transformers", order=1),
        Planner(key="streaming", label="Layer streaming", engine="transformers", order=2),
    ),
)
