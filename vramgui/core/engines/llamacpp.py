"""llama.cpp (llama-server, and Ollama and LM Studio, which run it): GGUF files on ggml.

It runs GGUF files only ("none" is then an F16 / BF16 / F32 GGUF), and MXFP4 natively as its
MXFP4_MOE file type (convert_hf_to_gguf.py repacks MXFP4 experts as they are,
GptOssModel.repack_mxfp4; llama-quantize's MXFP4_MOE puts the rest in Q8_0). It caches K and V in
f16 unless told otherwise (``--cache-type-k`` / ``-v``: f32, f16, bf16, q8_0, q4_0...), whatever
the weights are stored or computed in. Its layers, not its tensors, are split across GPUs
(``--split-mode layer``) and host RAM (``-ngl``, ``core/offload/``). A multimodal checkpoint's
vision / audio towers and projectors are a separate mmproj GGUF (convert_hf_to_gguf.py
``--mmproj``), loaded by libmtmd (clip.cpp) into buffers of its own only under ``--mmproj``.
"""

from __future__ import annotations

from vramgui.core.engines.base import Engine, Planner

# Ollama's OLLAMA_KV_CACHE_TYPE for the quantized caches (f16 is its default).
OLLAMA_KV_CACHE_TYPES = {"q8_0": "q8_0", "q4_0": "q4_0"}

ENGINE = Engine(
    key="llamacpp",
    name="llama.cpp",
    label="llama.cpp",
    order=2,
    quant_families=frozenset({"none", "gguf"}),
    kv_cache={
        "auto": "f16",
        "fp32": "f32",
        "fp16": "f16",
        "bf16": "bf16",
        "q8_0": "q8_0",
        "q4_0": "q4_0",
    },
    auto_kv_dtype="fp16",
    gguf_of_family={"mxfp4": "MXFP4_MOE"},
    ggml=True,
    splits_tensors=False,
    towers_apart=True,
    products_dtype="fp16",
    narrower_quants=("Q8_0", "Q6_K", "Q4_K_M", "Q3_K_M", "IQ2_M"),
    # MXFP4 experts, Q8_0 elsewhere: the gpt-oss GGUFs' mix, for any mixture of experts.
    moe_quants=("MXFP4_MOE",),
    planners=(Planner(key="llamacpp", label="llama.cpp (-ngl)", engine="llamacpp", order=0),),
)
