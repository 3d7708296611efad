"""vLLM: pre-allocates a share of each GPU (``--gpu-memory-utilization``) for its KV pool, sized
by a profile run (``core/vllm/``, which models its start-up).

It loads every quantization family vramgui knows (fp8, AWQ / GPTQ and their Marlin kernels,
ModelOpt FP8 / NVFP4, compressed-tensors, MXFP4, GGUF, bitsandbytes); its ``--kv-cache-dtype``
takes fp8 beside the model's own dtypes.
"""

from __future__ import annotations

from vramgui.core.engines.base import Engine, StartUp

# What the servers load, by quantization family (SGLang's QUANTIZATION_METHODS in
# srt/layers/quantization/__init__.py lists the same: fp8, awq / gptq and their Marlin kernels,
# modelopt_fp8 / modelopt_fp4, compressed-tensors, w8a8_int8, gguf, mxfp4; bitsandbytes as a
# --load-format).
SERVER_QUANT_FAMILIES = frozenset(
    {"none", "bitsandbytes", "gptq-awq", "fp8", "mxfp4", "nvfp4", "int", "modelopt", "gguf"}
)

ENGINE = Engine(
    key="vllm",
    name="vLLM",
    label="vLLM",
    order=1,
    quant_families=SERVER_QUANT_FAMILIES,
    kv_cache={"auto": None, "fp32": None, "fp16": None, "bf16": None, "fp8": "fp8"},
    startup=StartUp.VLLM,
    loads_mtp=True,
    tensor_parallel_flag="--tensor-parallel-size",
    step_model="vLLM",
    serving_runs_on=frozenset(
        {
            "A100 PCIe 80GB",
            "A100 SXM 40GB",
            "A100 SXM 80GB",
            "H100 SXM",
            "L4",
            "RTX 4090",
            "RTX 5090",
            "RTX A6000",
        }
    ),
    narrower_quants=("fp8", "awq-int4"),
)
