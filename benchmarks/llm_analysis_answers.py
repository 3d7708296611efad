"""Put the jobs of ``benchmarks/calculators.py --regenerate`` to llm-analysis (PyPI
``llm-analysis``, by Cheng Li: https://github.com/cli99/llm-analysis) and write what it answers.

llm-analysis pins huggingface-hub < 0.15 and transformers < 5, so it cannot share vramgui's
environment: this file is run by an interpreter that has it, imports nothing of vramgui, and
leaves every setting of ``LLMAnalysis`` at its default (flops_efficiency and
hbm_memory_efficiency 1, no parallelism, the KV cache in the activations' 16 bits).

    PYTHON benchmarks/llm_analysis_answers.py JOBS.json ANSWERS.json

A job is ``{"model": ModelConfig fields, "gpu": {"shipped": name} or GPUConfig fields,
"dtype": a shipped dtype config name, "batch", "seq_len", "tokens"}``; its answer is the
inference analysis' prefill, decode and total tokens/s, or ``{"refused": message}`` where the
tool's own checks reject the setup (weights or KV cache beyond the GPU's memory, a prompt beyond
the model's context).
"""

from __future__ import annotations

import json
import logging
import sys
from importlib.metadata import version
from typing import Any

from llm_analysis.analysis import LLMAnalysis, logger
from llm_analysis.config import (
    GPUConfig,
    ModelConfig,
    ParallelismConfig,
    get_dtype_config_by_name,
    get_gpu_config_by_name,
)


def answer(job: dict[str, Any]) -> dict[str, Any]:
    gpu = job["gpu"]
    gpu_config = get_gpu_config_by_name(gpu["shipped"]) if "shipped" in gpu else GPUConfig(**gpu)
    analysis = LLMAnalysis(
        ModelConfig(**job["model"]),
        gpu_config,
        get_dtype_config_by_name(job["dtype"]),
        ParallelismConfig(),
    )
    try:
        out = analysis.inference(
            batch_size_per_gpu=job["batch"],
            seq_len=job["seq_len"],
            num_tokens_to_generate=job["tokens"],
        )
    except AssertionError as exc:
        return {"refused": str(exc)}
    if (out["flops_efficiency"], out["hbm_memory_efficiency"]) != (1, 1):
        raise SystemExit("llm-analysis' default efficiencies are no longer 1: say what they are")
    return {
        "prefill_tps": out["prefill_tokens_per_sec"],
        "decode_tps": out["decode_tokens_per_sec"],
        "output_tps": out["total_tokens_per_sec"],
    }


def main(argv: list[str]) -> int:
    logger.setLevel(logging.ERROR)
    jobs_path, answers_path = argv
    with open(jobs_path) as f:
        jobs = json.load(f)
    answers = {"version": version("llm-analysis"), "answers": [answer(job) for job in jobs]}
    with open(answers_path, "w") as f:
        json.dump(answers, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
