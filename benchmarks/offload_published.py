"""The offload speed model against published llama.cpp and Ollama measurements: decode tokens/s
of partial layer offload and of expert offload, each case with the ``vramgui plan`` options that
reproduce it (docs/offload.md, "Checked against published measurements").

    .venv/bin/python -m benchmarks.offload_published
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass

from vramgui.cli import main

# RTX 2080 8 GB, i9-10900X with quad-channel DDR4-2933 (93.9 GB/s peak), PCIe 3.0.
RTX2080 = ("--vram-gib", "8", "--gpu-gbps", "448", "--gpu-tflops", "40.3", "--pcie-gbps", "12",
           "--cpu-ram-gbps", "93.9", "--ram-gib", "60")  # fmt: skip
# RTX 5080 16 GB (960 GB/s, PCIe 5.0); the host's RAM was not published: the default DDR5.
RTX5080 = ("--vram-gib", "16", "--gpu-gbps", "960", "--gpu-tflops", "56", "--pcie-gbps", "25",
           "--ram-gib", "60")  # fmt: skip


@dataclass(frozen=True)
class Case:
    source: str  # where the measurement was published
    model: str
    flags: str
    measured: float
    argv: tuple[str, ...]


LLMFIT = "llmfit pull request {} (llama.cpp, Q4_K_M, -c 4096, llmfit bench --runs 3)"
_PARTIAL = (
    ("llama-3.1-8b", 99, 71.9, 773),
    ("qwen3-8b", 99, 69.3, 773),
    ("mistral-7b-v0.3", 99, 77.8, 773),
    ("qwen2.5-7b", 99, 77.0, 773),
    ("gemma-2-9b", 36, 23.7, 778),
    ("qwen2.5-14b", 42, 20.8, 778),
    ("qwen3-14b", 32, 16.9, 774),
    ("phi-4", 32, 16.7, 774),
    ("gemma-3-12b", 44, 26.1, 774),
    ("llama-3.2-1b", 99, 304.3, 773),
)
CASES = (
    *(
        Case(LLMFIT.format(pr), model, f"-ngl {ngl}", measured,
             (model, "--ngl", str(ngl), *RTX2080))
        for model, ngl, measured, pr in _PARTIAL
    ),
    Case("llmfit pull request 755 (llama-server's own figure; context not stated, 4096 taken)",
         "qwen3-30b-a3b", "-ngl 99 --n-cpu-moe 36", 36.7,
         ("qwen3-30b-a3b", "--ngl", "99", "--n-cpu-moe", "36", *RTX2080)),
    Case("Ollama issue 11772, comment of 2026-06-05 (Ollama 0.30, Q4_K_M assumed, its 4k "
         "default context)", "qwen3.5-35b-a3b", "num_gpu 99 + LLAMA_ARG_CPU_MOE=1", 36.5,
         ("qwen3.5-35b-a3b", "--ngl", "99", "--cpu-moe", *RTX5080)),
    Case("Ollama issue 11772, the same comment", "qwen3.5-35b-a3b", "num_gpu 0", 14.6,
         ("qwen3.5-35b-a3b", "--ngl", "0", *RTX5080)),
)  # fmt: skip


def estimate(case: Case, *extra: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", *case.argv, *extra, "--quant", "Q4_K_M", "--seq", "4096", "--json"])
    if code:
        raise RuntimeError(f"vramgui plan {' '.join(case.argv)} failed")
    return json.loads(out.getvalue())


def main_table() -> None:
    print("| model | flags | measured tok/s | estimate at peak bandwidths | error | estimate "
          "(defaults: 80 % GPU, 70 % RAM) | error | bound | source |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for case in CASES:
        doc = estimate(case)
        peak = estimate(case, "--gpu-efficiency", "1", "--ram-efficiency", "1")
        tps, top = doc["tokens_per_second"], peak["tokens_per_second"]
        print(
            f"| {case.model} | `{case.flags}` | {case.measured} | {top:.1f} | "
            f"{top / case.measured - 1:+.0%} | {tps:.1f} | {tps / case.measured - 1:+.0%} | "
            f"{doc['bound'].replace('_', ' ')} | {case.source} |"
        )


if __name__ == "__main__":
    main_table()
