"""Put the jobs of ``benchmarks/calculators.py --regenerate genz-llm PYTHON`` to GenZ (PyPI
``genz-llm``, GenZ-LLM-Analyzer by Abhimanyu Bambhaniya et al.:
https://github.com/abhibambhaniya/GenZ-LLM-Analyzer) and write what it answers.

Run by an interpreter that has genz-llm installed (its dependencies, pandas, plotly, numba...,
are none of vramgui's); imports nothing of vramgui and leaves every setting of
``prefill_moddeling`` / ``decode_moddeling`` at its default (system_eff 1, no tensor or expert
parallelism) but those a row sets: batch, input and output tokens, the pipeline over several
GPUs, the precision, and a beam of 1 (its decode defaults to a beam of 4; no row searches beams).

    PYTHON benchmarks/genz_answers.py JOBS.json ANSWERS.json

A job is ``{"model": ModelConfig fields, "system": a shipped system name or its dict of Flops,
Memory_size, Memory_BW, ICN, "bits", "phase": "prefill" or "decode", "batch", "input_tokens",
"output_tokens", "pipeline_parallel"}``; its answer is ``prefill_tps`` (the prompt's tokens over
its prefill latency) or ``decode_tps`` (its decode Throughput), or ``{"refused": message}`` where
its own check rejects the setup (weights and KV cache beyond the GPUs' memory).
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import version
from typing import Any

from GenZ.LLM_inference import decode_moddeling, prefill_moddeling
from GenZ.Models.default_models import ModelConfig


def answer(job: dict[str, Any]) -> dict[str, Any]:
    common = {
        "model": ModelConfig(**job["model"]),
        "batch_size": job["batch"],
        "input_tokens": job["input_tokens"],
        "system_name": job["system"],
        "bits": job["bits"],
        "pipeline_parallel": job["pipeline_parallel"],
    }
    try:
        if job["phase"] == "prefill":
            out = prefill_moddeling(**common)
            # Its Throughput is prompts per second: 1000 x batch / latency in ms.
            return {"prefill_tps": out["Throughput"] * job["input_tokens"]}
        out = decode_moddeling(**common, output_tokens=job["output_tokens"], Bb=1)
    except ValueError as exc:
        return {"refused": str(exc).split("\n")[0].strip()}
    return {"decode_tps": out["Throughput"]}


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore")
    jobs_path, answers_path = argv
    with open(jobs_path) as f:
        jobs = json.load(f)
    answers = {"version": version("genz-llm"), "answers": [answer(job) for job in jobs]}
    with open(answers_path, "w") as f:
        json.dump(answers, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
