"""Other calculators on the published rows: what llm-analysis gives for the llama-bench rows
(benchmarks/data/llama_bench.json) and the vLLM serving rows (benchmarks/data/serving_published.json)
it can express, beside the measurement and vramgui's estimate of each.

llm-analysis (PyPI ``llm-analysis`` 0.2.2, https://github.com/cli99/llm-analysis) pins
huggingface-hub < 0.15 and transformers < 5, so it cannot share vramgui's environment. Its answers
are kept as data, benchmarks/data/calculators.json, which this script reads by default. To
regenerate them, install it into an environment of its own and name that interpreter:

    python3 -m venv /tmp/lla && /tmp/lla/bin/pip install llm-analysis==0.2.2
    .venv/bin/python -m benchmarks.calculators --regenerate /tmp/lla/bin/python

    .venv/bin/python -m benchmarks.calculators  # the summary and every row (docs/performance.md)

How the rows are put to it (``MAPPING``): its defaults throughout (flops_efficiency and
hbm_memory_efficiency 1, the KV cache in 16 bits); the GPU configs it ships where it has the card,
else ours (memory, peak bandwidth, dense FP16 tensor rate of resources/gpus.json); the models from
the catalog's config.json shapes; llama.cpp's quantizations as its 16-, 8- and 4-bit weights.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks import llama_bench, serving_published
from vramgui.core.model import ArchFacts
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

DATA = Path(__file__).resolve().parent / "data" / "calculators.json"
ANSWERS_SCRIPT = Path(__file__).resolve().parent / "llm_analysis_answers.py"
LLAMA_BENCH, SERVING = "llama_bench", "serving_published"
# The fields that name one published row (each set is unique in its table).
KEYS = {
    LLAMA_BENCH: ("source", "gpu", "gpus", "model", "quant", "test", "depth", "ubatch", "fa"),
    SERVING: ("source", "engine", "version", "gpu", "gpus", "model", "dtype", "concurrency",
              "input_tokens", "output_tokens", "output_tps"),
}  # fmt: skip
# llm-analysis' dtype configs: weights of 16, 8 or 4 bits, 16-bit activations and embeddings.
# Each GGUF type goes to the shipped config nearest its bits per weight, rounding up.
QUANT_DTYPE = {
    "F16": "w16a16e16",
    "Q8_0": "w8a16e16",
    "Q6_K": "w8a16e16",
    "Q4_K_M": "w4a16e16",
    "Q4_K_S": "w4a16e16",
    "Q4_0": "w4a16e16",
    "MXFP4_MOE": "w4a16e16",
}
SERVING_DTYPE = "w16a16e16"  # bf16 / fp16 checkpoints
# Our GPUs llm-analysis 0.2.2 ships a config of (gpu_configs/*.json): its own figures are used.
SHIPPED_GPUS = {
    "A100 PCIe 80GB": "a100-pcie-80gb",
    "A100 SXM 80GB": "a100-sxm-80gb",
    "A100 SXM 40GB": "a100-sxm-40gb",
    "H100 PCIe": "h100-pcie-80gb",
    "H100 SXM": "h100-sxm-80gb",
    "RTX A6000": "a6000-48gb",
}
MAPPING = {
    "settings": "LLMAnalysis(model, gpu, dtype, ParallelismConfig()).inference(batch_size_per_gpu, "
    "seq_len, num_tokens_to_generate), every other argument at its default: flops_efficiency 1 "
    "and hbm_memory_efficiency 1 (its constants FLOPS_EFFICIENCY, HBM_MEMORY_EFFICIENCY), "
    "tp/pp/dp 1, use_kv_cache true, KV cache and layernorm in 16 bits",
    "llama_bench": "tgN at depth d: batch 1, seq_len max(d, 1) (llama-bench's first generated "
    "token follows one token), num_tokens_to_generate N; its decode_tokens_per_sec. ppN at depth "
    "0: batch 1, seq_len N, num_tokens_to_generate 1; its prefill_tokens_per_sec. -ub and -fa "
    "have no counterpart: rows that differ only in them get one answer",
    "serving_published": "batch_size_per_gpu = concurrency, seq_len = input tokens, "
    "num_tokens_to_generate = output tokens (1,024 / 128 where the source states none, as "
    "benchmarks/serving_published.py takes); its decode_tokens_per_sec against the decode rate "
    "the row's TPOT gives, its total_tokens_per_sec (prefill included) beside the output rate",
    "quantization": "F16 -> w16a16e16; Q8_0, Q6_K -> w8a16e16; Q4_0, Q4_K_S, Q4_K_M, MXFP4_MOE "
    "-> w4a16e16 (its 16-, 8- and 4-bit weights, 16-bit activations and embeddings: the "
    "nearest bits per weight rounding up; a K-quant's scales are not counted)",
    "gpus": "its own gpu_configs for A100 PCIe 80GB, A100 SXM 80GB / 40GB, H100 PCIe, H100 SXM "
    "and RTX A6000; for the other cards a GPUConfig from resources/gpus.json: memory, peak "
    "memory bandwidth, dense FP16 tensor rate with FP32 accumulate (FP8 and INT4 left at its "
    "default 2x and 4x)",
    "models": "ModelConfig from the catalog's config.json: num_hidden_layers, "
    "num_attention_heads, num_key_value_heads, hidden_size, vocab_size, "
    "max_position_embeddings; its MLP has two matrices, so a gated MLP (three) is given "
    "ffn_embed_dim 1.5 x intermediate_size (the same weights; its Hugging Face reader would "
    "leave 4 x hidden_size); mixture of experts as moe_num_experts / moe_top_k with the "
    "expert's size. It takes head_dim as hidden_size / heads, one embedding table and full "
    "attention in every layer",
}


@cache
def _facts(model: str) -> ArchFacts:
    entry = catalog.find(model)
    if entry is None:
        raise SystemExit(f"{model!r} is not in the catalog")
    return entry.spec().facts


def key(table: str, row: dict[str, Any]) -> dict[str, Any]:
    return {field: row[field] for field in KEYS[table]}


def _key_id(table: str, fields: dict[str, Any]) -> str:
    return json.dumps([table, [fields[f] for f in KEYS[table]]])


def left_out(table: str, row: dict[str, Any]) -> str | None:
    """Why llm-analysis cannot be put the row, or None where it can."""
    if row["gpus"] > 1:
        return ("split over several GPUs: its pipeline parallelism (pp_size) counts one stage's "
                "time per token, a pipeline kept full, where llama.cpp's layer split at batch 1 "
                "runs the stages one after the other")  # fmt: skip
    gpu = find_gpu(row["gpu"])
    if gpu is None or not gpu.fp16_tflops:
        return "no tensor rate in our GPU catalog (Apple), which a GPUConfig needs"
    if _facts(row["model"]).kv_lora_rank:
        return "multi-head latent attention (DeepSeek-V2-Lite): no counterpart in its ModelConfig"
    if table == LLAMA_BENCH:
        if row["test"].startswith("pp") and row["depth"]:
            return "a prompt on a filled context (ppN @ dM): its prefill starts from an empty one"
        if row["quant"] not in QUANT_DTYPE:
            return f"quantization {row['quant']} not mapped"
    return None


def model_config(model: str) -> dict[str, Any]:
    """llm-analysis' ModelConfig fields for a catalog model (see MAPPING["models"])."""
    f = _facts(model)
    ffn = (f.moe_intermediate_size or f.intermediate_size) if f.num_experts else f.intermediate_size
    if f.gated_mlp:
        ffn = ffn * 3 // 2
    return {
        "name": model,
        "num_layers": f.num_layers,
        "n_head": f.num_heads,
        "hidden_dim": f.hidden_size,
        "vocab_size": f.vocab_size,
        "max_seq_len": f.max_position_embeddings,
        "num_key_value_heads": f.num_kv_heads,
        "ffn_embed_dim": ffn,
        "expansion_ratio": ffn / f.hidden_size,
        "model_type": f.model_type,
        "moe_num_experts": max(f.num_experts, 1),
        "moe_top_k": max(f.experts_per_token, 1),
    }


def gpu_config(name: str) -> dict[str, Any]:
    """llm-analysis' own config of the GPU where it ships one, else a GPUConfig from ours."""
    if name in SHIPPED_GPUS:
        return {"shipped": SHIPPED_GPUS[name]}
    gpu = find_gpu(name)
    if gpu is None:
        raise SystemExit(f"{name!r} is not in the GPU catalog")
    hw = speed_hardware(gpu, "fp16")
    return {
        "name": gpu.name,
        "mem_per_GPU_in_GB": gpu.capacity_bytes() / 2**30,  # it multiplies by 1024**3
        "hbm_bandwidth_in_GB_per_sec": hw.memory_bytes_per_s / 1e9,
        "intra_node_bandwidth_in_GB_per_sec": hw.link_bytes_per_s / 1e9,
        "intra_node_min_message_latency": 8e-06,  # as its own configs; unused at one GPU
        "peak_fp16_TFLOPS": hw.flops / 1e12,
    }


def job(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """The inference analysis that answers the row (see MAPPING)."""
    if table == LLAMA_BENCH:
        kind, tokens = llama_bench.parse_test(row["test"])
        batch, dtype = 1, QUANT_DTYPE[row["quant"]]
        seq_len, generate = (max(row["depth"], 1), tokens) if kind == "tg" else (tokens, 1)
    else:
        batch, dtype = row["concurrency"], SERVING_DTYPE
        seq_len, generate = serving_published.lengths(row)
    return {"model": model_config(row["model"]), "gpu": gpu_config(row["gpu"]), "dtype": dtype,
            "batch": batch, "seq_len": seq_len, "tokens": generate}  # fmt: skip


def published() -> Iterator[tuple[str, dict[str, Any]]]:
    for row in llama_bench.load_rows():
        yield LLAMA_BENCH, row
    for row in serving_published.load_rows():
        yield SERVING, row


def stored_row(table: str, row: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """What is kept of one answer: the figure the row measured (decode or prefill), both
    decode and output rate for a serving row, or why the tool refused it."""
    out: dict[str, Any] = {"table": table, "key": key(table, row)}
    if "refused" in answer:
        return out | {"refused": answer["refused"]}
    if table == SERVING:
        names = ("decode_tps", "output_tps")
    else:
        names = ("decode_tps",) if row["test"].startswith("tg") else ("prefill_tps",)
    return out | {name: round(answer[name], 1) for name in names}


def regenerate(python: str, path: Path = DATA) -> None:
    """Put every row llm-analysis can express to it (run by ``python``) and store the answers."""
    rows: list[tuple[str, dict[str, Any]]] = []
    reasons: Counter[str] = Counter()
    for table, row in published():
        why = left_out(table, row)
        if why is None:
            rows.append((table, row))
        else:
            reasons[f"{table}: {why}"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        jobs, answers = Path(tmp) / "jobs.json", Path(tmp) / "answers.json"
        jobs.write_text(json.dumps([job(t, r) for t, r in rows]))
        subprocess.run([python, str(ANSWERS_SCRIPT), str(jobs), str(answers)], check=True,
                       capture_output=True)  # fmt: skip
        result = json.loads(answers.read_text())
    efficiencies = {(a["flops_efficiency"], a["hbm_memory_efficiency"])
                    for a in result["answers"] if "refused" not in a}  # fmt: skip
    if efficiencies != {(1, 1)}:
        raise SystemExit(f"llm-analysis' default efficiencies are not 1: {efficiencies}")
    data = {
        "format_version": 1,
        "about": {
            "tool": "llm-analysis (https://github.com/cli99/llm-analysis, PyPI llm-analysis)",
            "version": result["version"],
            "run_on": datetime.date.today().isoformat(),
            "regenerate": "python -m benchmarks.calculators --regenerate PYTHON (an interpreter "
            "with llm-analysis installed)",
            **MAPPING,
            "left_out": dict(sorted(reasons.items())),
        },
        "rows": [stored_row(t, r, a) for (t, r), a in zip(rows, result["answers"], strict=True)],
    }
    head = json.dumps({k: v for k, v in data.items() if k != "rows"}, indent=1)[:-2]
    lines = ",\n".join("  " + json.dumps(r) for r in data["rows"])
    path.write_text(f'{head},\n "rows": [\n{lines}\n ]\n}}\n')


def load(path: Path = DATA) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


@dataclass(frozen=True)
class Compared:
    """One published row answered by llm-analysis: its figure and vramgui's, against the
    measurement the row is checked on (a serving row without TPOT is for reference only)."""

    table: str
    row: dict[str, Any]
    kind: str  # "tg", "pp" or "serving"
    measured: float | None
    tool: float
    vramgui: float | None
    stored: dict[str, Any]

    @property
    def tool_error(self) -> float | None:
        return None if self.measured is None else self.tool / self.measured - 1

    @property
    def vramgui_error(self) -> float | None:
        if self.measured is None or self.vramgui is None:
            return None
        return self.vramgui / self.measured - 1


def compare(data: dict[str, Any]) -> list[Compared]:
    """Every stored answer beside its published row and vramgui's estimate of it."""
    rows = {_key_id(t, key(t, r)): (t, r) for t, r in published()}
    out = []
    for stored in data["rows"]:
        if "refused" in stored:
            continue
        table, row = rows[_key_id(stored["table"], stored["key"])]
        if table == LLAMA_BENCH:
            result = llama_bench.evaluate(row, with_before=False)
            figure = stored["decode_tps" if result.kind == "tg" else "prefill_tps"]
            out.append(Compared(table, row, result.kind, row["measured_tps"], figure,
                                result.estimate, stored))  # fmt: skip
        else:
            out.append(Compared(table, row, "serving", serving_published.measured_decode(row),
                                stored["decode_tps"], serving_published.estimate(row), stored))  # fmt: skip
    return out


def not_put(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Published rows the tool could be put that the stored answers lack (added since)."""
    stored = {_key_id(s["table"], s["key"]) for s in data["rows"]}
    return [
        (t, r) for t, r in published()
        if left_out(t, r) is None and _key_id(t, key(t, r)) not in stored
    ]  # fmt: skip


GROUPS: tuple[tuple[str, str], ...] = (
    ("tg", "llama-bench generation (one GPU)"),
    ("pp", "llama-bench prompt processing (one GPU, depth 0)"),
    ("serving", "vLLM serving decode (rows with TPOT)"),
)


def _counted(c: Compared) -> bool:
    return c.measured is not None and c.vramgui is not None and "anomalous" not in c.row


def _figures(errors: Sequence[float]) -> str:
    magnitudes = [abs(e) for e in errors]
    share = {b: sum(m <= b for m in magnitudes) / len(magnitudes) for b in (0.20, 0.25)}
    return (f"within 20 %: {share[0.20]:.0%}, within 25 %: {share[0.25]:.0%}, median error "
            f"{statistics.median(magnitudes):.0%} (signed {statistics.median(errors):+.0%}), "
            f"worst {max(errors, key=abs):+.0%}")  # fmt: skip


def summary_lines(compared: Sequence[Compared]) -> list[str]:
    """Per kind of row: vramgui and llm-analysis on the same counted rows (anomalous rows and
    serving rows without a measured decode rate left out)."""
    lines = []
    for kind, name in GROUPS:
        group = [c for c in compared if c.kind == kind and _counted(c)]
        if not group:
            continue
        lines.append(f"{name}, {len(group)} rows:")
        lines.append(f"  vramgui       {_figures([c.vramgui_error or 0.0 for c in group])}")
        lines.append(f"  llm-analysis  {_figures([c.tool_error or 0.0 for c in group])}")
    return lines


def _tps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _err(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def llama_markdown_cells(c: Compared) -> tuple[str, str]:
    """A llama-bench row of the table, split where vramgui's columns begin: the first part
    comes from the stored answers and the published row alone."""
    note = " (anomalous, not counted)" if "anomalous" in c.row else ""
    tool = (f"| {llama_bench._label(c.row)} | {_tps(c.measured)} | {_tps(c.tool)} | "
            f"{_err(c.tool_error)}{note} |")  # fmt: skip
    return tool, f" {_tps(c.vramgui)} | {_err(c.vramgui_error)} |"


def serving_markdown_cells(c: Compared) -> tuple[str, str]:
    """A serving row of the table, split as ``llama_markdown_cells``."""
    row, output_tps = c.row, c.stored["output_tps"]
    prompt, output = serving_published.lengths(row)
    tool = (f"| {row['gpu']} | {row['model']} {row['dtype']} | {row['concurrency']} | "
            f"{prompt} / {output} | {_tps(c.measured)} | {_tps(c.tool)} | {_err(c.tool_error)} | "
            f"{row['output_tps']:,.1f} | {_tps(output_tps)} | "
            f"{output_tps / row['output_tps'] - 1:+.0%} |")  # fmt: skip
    return tool, f" {_tps(c.vramgui)} | {_err(c.vramgui_error)} |"


def markdown_lines(compared: Sequence[Compared]) -> list[str]:
    lines = [
        "| llama-bench row | measured tok/s | llm-analysis | error | vramgui | error |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += ["".join(llama_markdown_cells(c)) for c in compared if c.table == LLAMA_BENCH]
    lines += [
        "",
        "| GPU | model | concurrency | in / out | measured decode tok/s (TPOT) | llm-analysis "
        "decode | error | measured output tok/s | llm-analysis output (prefill included) | "
        "error | vramgui decode | error |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += ["".join(serving_markdown_cells(c)) for c in compared if c.table == SERVING]
    return lines


def refused_lines(data: dict[str, Any]) -> list[str]:
    refused = Counter(
        f"{s['table']}: {s['key']['model']} on {s['key']['gpu']}: {s['refused'].split(' (')[0]}"
        for s in data["rows"] if "refused" in s
    )  # fmt: skip
    return [f"  {n} x {why}" for why, n in sorted(refused.items())] or ["  none"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regenerate", metavar="PYTHON",
                        help="an interpreter with llm-analysis installed: re-run it on the rows")  # fmt: skip
    args = parser.parse_args(argv)
    if args.regenerate:
        regenerate(args.regenerate)
    data = load()
    compared = compare(data)
    about = data["about"]
    print(f"{about['tool']} {about['version']}, run on {about['run_on']}")
    print("\n".join(summary_lines(compared)))
    print("refused by its own checks:")
    print("\n".join(refused_lines(data)))
    print("left out:")
    for why, n in about["left_out"].items():
        print(f"  {n} x {why}")
    missing = not_put(data)
    if missing:
        print(f"{len(missing)} published rows added since have no answer: re-run --regenerate")
    print()
    print("\n".join(markdown_lines(compared)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
