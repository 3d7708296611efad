"""Put the jobs of ``benchmarks/calculators.py --regenerate llmcalculator PYTHON`` to
llmcalculator (PyPI ``llmcalculator``: https://github.com/llmcalculator/llmcalculator) and write
what it answers.

Run by an interpreter that has llmcalculator installed; imports nothing of vramgui and leaves
``estimate`` at its defaults (the inference workload, an fp16 KV cache; its speed takes 80 % of
the GPU's bandwidth and 35 % of its FP16 rate) but what a row sets: the quantization, the context
and, over several GPUs, ``device="all-gpus"``.

    PYTHON benchmarks/llmcalculator_answers.py JOBS.json ANSWERS.json

A job is ``{"hub_ids": the model's Hub ids, "config": its config.json, "gpu": {"name",
"memory_bytes", "vendor", "unified_memory", "bandwidth_gbs", "fp16_tflops"} (ours), "gpus", "quant", "context"}``.
The model is its catalog's entry of one of the Hub ids where it has one, else what its own
config.json reader (``catalog._spec_from_config``, behind ``from_hf``) makes of ours; the GPU's
bandwidth and FP16 rate are its table's (``gpu_db.lookup``, which ``hardware.manual`` uses) where
it knows the name, else ours. The answer is ``decode_tps`` and ``prefill_tps`` with where the
model and the GPU figures came from, or ``{"refused": its verdict}`` where the setup does not fit.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

from llmcalculator import CPU, Accelerator, HardwareProfile
from llmcalculator.estimate import estimate
from llmcalculator.hardware import gpu_db
from llmcalculator.models import catalog

GB = 1024**3


def model(job: dict[str, Any]) -> tuple[Any, str]:
    by_hub_id = {spec.hf_id.lower(): spec for spec in catalog.all_models()}
    for hub_id in job["hub_ids"]:
        spec = by_hub_id.get(hub_id.lower())
        if spec is not None:
            return spec, f"its catalog: {spec.name}"
    return catalog._spec_from_config(job["hub_ids"][0], job["config"]), "its config.json reader"


def hardware(job: dict[str, Any]) -> tuple[HardwareProfile, str]:
    gpu = job["gpu"]
    bandwidth, tflops = gpu_db.lookup(gpu["name"])
    source = "its table"
    if not bandwidth:
        bandwidth, tflops, source = gpu["bandwidth_gbs"], gpu["fp16_tflops"], "ours"
    accelerators = [
        Accelerator(name=gpu["name"], vendor=gpu["vendor"], memory_bytes=gpu["memory_bytes"],
                    bandwidth_gbs=bandwidth, fp16_tflops=tflops,
                    unified_memory=gpu["unified_memory"], index=i)
        for i in range(job["gpus"])
    ]  # fmt: skip
    cpu = CPU(name="Specified CPU", cores=16, threads=32, bandwidth_gbs=50.0)
    return HardwareProfile(cpu=cpu, ram_bytes=128 * GB, accelerators=accelerators), source


def answer(job: dict[str, Any]) -> dict[str, Any]:
    spec, model_from = model(job)
    profile, gpu_from = hardware(job)
    device = "all-gpus" if job["gpus"] > 1 else "auto"
    est = estimate(spec, profile, quant_name=job["quant"], context=job["context"], device=device)
    if not est.fits:
        return {"refused": f"{est.verdict}: {est.total_gb:.1f} GB for {est.budget_gb:.1f} GB"}
    if not est.tokens_per_sec or not est.prefill_tokens_per_sec:
        return {"refused": "no speed: the GPU has no bandwidth or FP16 rate"}
    return {"decode_tps": est.tokens_per_sec, "prefill_tps": est.prefill_tokens_per_sec,
            "model_from": model_from, "gpu_from": gpu_from}  # fmt: skip


def main(argv: list[str]) -> int:
    jobs_path, answers_path = argv
    with open(jobs_path) as f:
        jobs = json.load(f)
    answers = {"version": version("llmcalculator"), "answers": [answer(job) for job in jobs]}
    with open(answers_path, "w") as f:
        json.dump(answers, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
