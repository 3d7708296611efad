"""SGLang: pre-allocates ``--mem-fraction-static`` of each GPU for its weights and KV pool
(``core/sglang_startup.py`` models its start-up).

Its ``--kv-cache-dtype`` takes auto (the model's dtype), bf16 and fp8_e4m3 / fp8_e5m2
(server_args.py), both one byte: "fp8" here. It loads what vLLM loads.
"""

from __future__ import annotations

from vramgui.core.engines.base import Engine, StartUp
from vramgui.core.engines.vllm import SERVER_QUANT_FAMILIES

ENGINE = Engine(
    key="sglang",
    name="SGLang",
    label="SGLang",
    order=3,
    quant_families=SERVER_QUANT_FAMILIES,
    kv_cache={"auto": None, "bf16": "bf16", "fp8": "fp8_e4m3"},
    startup=StartUp.SGLANG,
    tensor_parallel_flag="--tp-size",
    step_model="vLLM",  # no SGLang run fitted it: its published runs are held out against it
    serving_runs_on=frozenset({"A100 SXM 40GB", "H200 SXM"}),
    narrower_quants=("fp8", "awq-int4"),
)
