"""Other calculators on the published rows: what llm-analysis, GenZ and llmcalculator give for
the llama-bench rows (benchmarks/data/llama_bench.json) and the vLLM serving rows
(benchmarks/data/serving_published.json) they can express, beside the measurement and vramgui's
estimate of each.

None of them is installed beside vramgui (llm-analysis pins huggingface-hub < 0.15 and
transformers < 5; GenZ brings pandas, plotly, numba and more), so their answers are kept as
data, benchmarks/data/calculators.json, which this script reads by default. To regenerate one,
install it into an environment of its own and name that interpreter:

    python3 -m venv /tmp/lla && /tmp/lla/bin/pip install llm-analysis==0.2.2
    .venv/bin/python -m benchmarks.calculators --regenerate llm-analysis /tmp/lla/bin/python
    # the same for genz-llm==0.0.16 (--regenerate genz-llm) and llmcalculator==0.2.3

    .venv/bin/python -m benchmarks.calculators  # the summary and every row (docs/performance.md)

How the rows are put to each is its ``mapping`` below, stored with its answers: its defaults
throughout; its own GPU figures where it has the card, else ours (resources/gpus.json); the
models from the catalog's config.json shapes (llmcalculator: its catalog's entry where it has
the model); llama.cpp's quantizations as the precisions it knows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks import llama_bench, serving_published
from vramgui.core.model import ArchFacts
from vramgui.core.speed import Hardware
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "calculators.json"
LLAMA_BENCH, SERVING = "llama_bench", "serving_published"
# The fields that name one published row (each set is unique in its table).
KEYS = {
    LLAMA_BENCH: ("source", "gpu", "gpus", "model", "quant", "test", "depth", "ubatch", "fa"),
    SERVING: (
        "source",
        "engine",
        "version",
        "gpu",
        "gpus",
        "model",
        "dtype",
        "concurrency",
        "input_tokens",
        "output_tokens",
        "output_tps",
    ),
}
Job = dict[str, Any]


@cache
def _facts(model: str) -> ArchFacts:
    entry = catalog.find(model)
    if entry is None:
        raise SystemExit(f"{model!r} is not in the catalog")
    return entry.spec().facts


def _hardware(name: str) -> Hardware:
    gpu = find_gpu(name)
    if gpu is None:
        raise SystemExit(f"{name!r} is not in the GPU catalog")
    return speed_hardware(gpu, "fp16")


def _memory_gib(name: str) -> float:
    gpu = find_gpu(name)
    assert gpu is not None
    return gpu.capacity_bytes() / 2**30


def _ffn_size(facts: ArchFacts) -> int:
    """One MLP's (one expert's) intermediate size."""
    return (
        (facts.moe_intermediate_size or facts.intermediate_size)
        if facts.num_experts
        else facts.intermediate_size
    )


def key(table: str, row: dict[str, Any]) -> dict[str, Any]:
    return {field: row[field] for field in KEYS[table]}


def _key_id(table: str, fields: dict[str, Any]) -> str:
    return json.dumps([table, [fields[f] for f in KEYS[table]]])


def published() -> Iterator[tuple[str, dict[str, Any]]]:
    for row in llama_bench.load_rows():
        yield LLAMA_BENCH, row
    for row in serving_published.load_rows():
        yield SERVING, row


def _left_out(table: str, row: dict[str, Any], quants: dict[str, str]) -> str | None:
    """Why llm-analysis or GenZ cannot be put the row (the rules they share), or None."""
    gpu = find_gpu(row["gpu"])
    if gpu is None or not gpu.fp16_tflops:
        return "no FP16 rate in our GPU catalog, which its GPU config needs"
    if _facts(row["model"]).kv_lora_rank:
        return "multi-head latent attention (DeepSeek-V2-Lite): no counterpart in its model config"
    if table == LLAMA_BENCH:
        if row["test"].startswith("pp") and row["depth"]:
            return "a prompt on a filled context (ppN @ dM): its prefill starts from an empty one"
        if row["quant"] not in quants:
            return f"quantization {row['quant']} not mapped"
    return None


# llm-analysis ------------------------------------------------------------------------------

# Its dtype configs: weights of 16, 8 or 4 bits, 16-bit activations and embeddings. Each GGUF
# type goes to the shipped config nearest its bits per weight, rounding up.
LLA_QUANTS = {
    "F16": "w16a16e16",
    "Q8_0": "w8a16e16",
    "Q6_K": "w8a16e16",
    "Q4_K_M": "w4a16e16",
    "Q4_K_S": "w4a16e16",
    "Q4_0": "w4a16e16",
    "MXFP4_MOE": "w4a16e16",
}
# Our GPUs llm-analysis 0.2.2 ships a config of (gpu_configs/*.json): its own figures are used.
LLA_GPUS = {
    "A100 PCIe 80GB": "a100-pcie-80gb",
    "A100 SXM 80GB": "a100-sxm-80gb",
    "A100 SXM 40GB": "a100-sxm-40gb",
    "H100 PCIe": "h100-pcie-80gb",
    "H100 SXM": "h100-sxm-80gb",
    "RTX A6000": "a6000-48gb",
}
LLA_MAPPING = {
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
    "memory bandwidth, dense FP16 tensor rate with FP32 accumulate (Apple: the 16-bit ALU peak; "
    "FP8 and INT4 left at its default 2x and 4x)",
    "models": "ModelConfig from the catalog's config.json: num_hidden_layers, "
    "num_attention_heads, num_key_value_heads, hidden_size, vocab_size, "
    "max_position_embeddings; its MLP has two matrices, so a gated MLP (three) is given "
    "ffn_embed_dim 1.5 x intermediate_size (the same weights; its Hugging Face reader would "
    "leave 4 x hidden_size); mixture of experts as moe_num_experts / moe_top_k with the "
    "expert's size. It takes head_dim as hidden_size / heads, one embedding table and full "
    "attention in every layer",
}


def _lla_left_out(table: str, row: dict[str, Any]) -> str | None:
    if row["gpus"] > 1:
        return (
            "split over several GPUs: its pipeline parallelism (pp_size) counts one stage's "
            "time per token, a pipeline kept full, where llama.cpp's layer split at batch 1 "
            "runs the stages one after the other"
        )
    return _left_out(table, row, LLA_QUANTS)


def _lla_model(model: str) -> dict[str, Any]:
    f = _facts(model)
    ffn = _ffn_size(f) * 3 // 2 if f.gated_mlp else _ffn_size(f)
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


def _lla_gpu(name: str) -> dict[str, Any]:
    if name in LLA_GPUS:
        return {"shipped": LLA_GPUS[name]}
    hw = _hardware(name)
    return {
        "name": name,
        "mem_per_GPU_in_GB": _memory_gib(name),  # it multiplies by 1024**3
        "hbm_bandwidth_in_GB_per_sec": hw.memory_bytes_per_s / 1e9,
        "intra_node_bandwidth_in_GB_per_sec": hw.link_bytes_per_s / 1e9,
        "intra_node_min_message_latency": 8e-06,  # as its own configs; unused at one GPU
        "peak_fp16_TFLOPS": hw.flops / 1e12,
    }


def _lla_job(table: str, row: dict[str, Any]) -> Job:
    if table == LLAMA_BENCH:
        kind, tokens = llama_bench.parse_test(row["test"])
        batch, dtype = 1, LLA_QUANTS[row["quant"]]
        seq_len, generate = (max(row["depth"], 1), tokens) if kind == "tg" else (tokens, 1)
    else:
        batch, dtype = row["concurrency"], "w16a16e16"
        seq_len, generate = serving_published.lengths(row)
    return {
        "model": _lla_model(row["model"]),
        "gpu": _lla_gpu(row["gpu"]),
        "dtype": dtype,
        "batch": batch,
        "seq_len": seq_len,
        "tokens": generate,
    }


# GenZ --------------------------------------------------------------------------------------

# Its precisions (system.py's mem_multiplier): bits for weights, activations and KV cache
# alike, and the compute rate's multiplier with them. Each GGUF type to the nearest it knows.
GENZ_QUANTS = {
    "F16": "bf16",
    "Q8_0": "int8",
    "Q6_K": "fp6",
    "Q4_K_M": "int4",
    "Q4_K_S": "int4",
    "Q4_0": "int4",
    "MXFP4_MOE": "fp4",
}
# Our GPUs GenZ 0.0.16 ships a system of (Systems/system_configs.py): its own figures are used.
GENZ_GPUS = {
    "A100 SXM 40GB": "A100_40GB_GPU",
    "A100 SXM 80GB": "A100_80GB_GPU",
    "H100 SXM": "H100_GPU",
}
GENZ_MAPPING = {
    "settings": "prefill_moddeling / decode_moddeling(model, batch_size, input_tokens, "
    "output_tokens, system_name, bits, pipeline_parallel, Bb=1), every other argument at its "
    "default: system_eff 1 (compute and memory efficiency), no tensor or expert parallelism, "
    "collective_strategy GenZ; Bb (beams) 1 where its default is 4, as no row searches beams",
    "llama_bench": "tgN at depth d: decode, batch 1, input_tokens max(d, 1), output_tokens N, "
    "pipeline_parallel = the row's GPUs (its pipeline at batch 1 runs the stages one after "
    "the other, as llama.cpp's layer split does); its Throughput. ppN at depth 0: prefill, "
    "batch 1, input_tokens N; N over its latency. -ub and -fa have no counterpart: rows that "
    "differ only in them get one answer",
    "serving_published": "decode, batch_size = concurrency, input_tokens and output_tokens the "
    "row's (1,024 / 128 where the source states none); its Throughput against the decode rate "
    "the row's TPOT gives (it gives no output rate with the prefill in it)",
    "quantization": "F16 -> bf16; Q8_0 -> int8; Q6_K -> fp6; Q4_0, Q4_K_S, Q4_K_M -> int4; "
    "MXFP4_MOE -> fp4 (its bits hold for the weights, activations and KV cache alike, and "
    "scale the compute rate with them; a block's scales are not counted)",
    "gpus": "its own systems for A100 SXM 40GB (A100_40GB_GPU: 1,600 GB/s), A100 SXM 80GB and "
    "H100 SXM (its A100 and H100 are SXM parts; the PCIe cards take ours); for the other "
    "cards a system dict from resources/gpus.json: Flops = dense FP16 tensor TFLOPS with FP32 "
    "accumulate (Apple: the 16-bit ALU peak), Memory_size in GiB, Memory_BW in GB/s, ICN = the "
    "card's link in GB/s",
    "models": "ModelConfig from the catalog's config.json: num_hidden_layers, "
    "num_attention_heads, num_key_value_heads, head_dim, hidden_size, intermediate_size, "
    "num_ffi 2 for a gated MLP, vocab_size, max_position_embeddings, hidden_act, "
    "sliding_window (which its attention does not use); mixture of experts as num_experts / "
    "expert_top_k with the expert's size as intermediate_size (what its decode reads)",
}


def _genz_model(model: str) -> dict[str, Any]:
    f = _facts(model)
    return {
        "model": model,
        "vocab_size": f.vocab_size,
        "max_model_len": f.max_position_embeddings,
        "hidden_size": f.hidden_size,
        "intermediate_size": _ffn_size(f),
        "num_ffi": 2 if f.gated_mlp else 1,
        "num_decoder_layers": f.num_layers,
        "num_attention_heads": f.num_heads,
        "head_dim": f.head_dim,
        "num_key_value_heads": f.num_kv_heads,
        "hidden_act": f.hidden_act,
        "sliding_window": f.sliding_window,
        "num_experts": max(f.num_experts, 1),
        "expert_top_k": max(f.experts_per_token, 1),
    }


def _genz_system(name: str) -> str | dict[str, Any]:
    if name in GENZ_GPUS:
        return GENZ_GPUS[name]
    hw = _hardware(name)
    return {
        "Flops": hw.flops / 1e12,
        "Memory_size": _memory_gib(name),
        "Memory_BW": hw.memory_bytes_per_s / 1e9,
        "ICN": hw.link_bytes_per_s / 1e9,
        "real_values": True,
    }


def _genz_job(table: str, row: dict[str, Any]) -> Job:
    job: Job = {
        "model": _genz_model(row["model"]),
        "system": _genz_system(row["gpu"]),
        "pipeline_parallel": row["gpus"],
    }
    if table == SERVING:
        prompt, output = serving_published.lengths(row)
        return job | {
            "bits": "bf16",
            "phase": "decode",
            "batch": row["concurrency"],
            "input_tokens": prompt,
            "output_tokens": output,
        }
    kind, tokens = llama_bench.parse_test(row["test"])
    job |= {"bits": GENZ_QUANTS[row["quant"]], "batch": 1}
    if kind == "tg":
        return job | {
            "phase": "decode",
            "input_tokens": max(row["depth"], 1),
            "output_tokens": tokens,
        }
    return job | {"phase": "prefill", "input_tokens": tokens, "output_tokens": 0}


# llmcalculator -----------------------------------------------------------------------------

# Its formats (quant.py) by their GGUF names where it has them; Q4_0 and MXFP4_MOE it has not.
LLMCALC_QUANTS = {
    "F16": "fp16",
    "Q8_0": "Q8_0",
    "Q6_K": "Q6_K",
    "Q4_K_M": "Q4_K_M",
    "Q4_K_S": "Q4_K_S",
}
LLMCALC_MAPPING = {
    "settings": "estimate(model, hardware, quant_name, context, device) for the inference "
    "workload, every other argument at its default (batch 1, kv_quant fp16); its speed takes 80 % "
    "of the GPU's bandwidth (75 % on unified memory) over the active weights and half the KV "
    "cache, and 35 % of its FP16 rate over 2 FLOPs a parameter for the prompt; device all-gpus "
    "for the rows split over several GPUs (its speed then reads all the weights at one GPU's "
    "bandwidth, as a layer split at batch 1 does)",
    "llama_bench": "tgN at depth d: context d + N, its tokens_per_sec; ppN at depth d: context "
    "d + N, its prefill_tokens_per_sec (which no context changes). -ub and -fa have no "
    "counterpart: rows that differ only in them get one answer",
    "serving_published": "concurrency 1 only: context = input + output tokens (1,024 / 128 where "
    "the source states none), its tokens_per_sec against the decode rate the row's TPOT gives; "
    "it gives one sequence's speed, so higher concurrencies are left out",
    "quantization": "F16 -> fp16; Q8_0, Q6_K, Q4_K_M, Q4_K_S -> its formats of those names "
    "(1.09, 0.84, 0.63, 0.58 bytes a weight); the rows in Q4_0 and MXFP4_MOE are left out",
    "gpus": "bandwidth and FP16 rate from its table (gpu_db.lookup, as hardware.manual does) "
    "where it knows the name, else resources/gpus.json's (peak bandwidth, dense FP16 tensor "
    "rate with FP32 accumulate); memory from resources/gpus.json; unified memory for Apple and "
    "NVIDIA's unified-memory systems",
    "models": "its catalog's entry where it has the model (matched by the Hub id, instruct "
    "variant included), else its own config.json reader (catalog._spec_from_config, what its "
    "from_hf does with a Hub config) given the catalog's config.json",
}


def _llmcalc_left_out(table: str, row: dict[str, Any]) -> str | None:
    if table == SERVING and row["concurrency"] > 1:
        return "concurrency above 1: its speed is one sequence's, the batch enters its memory only"
    if table == LLAMA_BENCH and row["quant"] not in LLMCALC_QUANTS:
        return f"quantization {row['quant']}: not among its formats"
    if _facts(row["model"]).kv_lora_rank:
        return "multi-head latent attention (DeepSeek-V2-Lite): no counterpart in its model spec"
    return None


def _llmcalc_job(table: str, row: dict[str, Any]) -> Job:
    entry, gpu = catalog.find(row["model"]), find_gpu(row["gpu"])
    assert entry is not None and gpu is not None
    if table == SERVING:
        quant, context = row["dtype"], sum(serving_published.lengths(row))
    else:
        quant = LLMCALC_QUANTS[row["quant"]]
        context = row["depth"] + llama_bench.parse_test(row["test"])[1]
    unified = gpu.vendor == "Apple" or (gpu.vendor == "NVIDIA" and not gpu.nvml)
    return {
        "hub_ids": [entry.hub_id, *entry.aliases],
        "config": entry.config,
        "gpu": {
            "name": gpu.name,
            "memory_bytes": gpu.capacity_bytes(),
            "vendor": gpu.vendor.lower(),
            "unified_memory": unified,
            "bandwidth_gbs": gpu.memory_bandwidth_gbps,
            "fp16_tflops": gpu.fp16_tflops or 0.0,
        },
        "gpus": row["gpus"],
        "quant": quant,
        "context": context,
    }


# Both --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calculator:
    """One other calculator: how rows are put to it and what it answers."""

    name: str  # its key in the data: the PyPI package
    label: str  # its column in the tables
    tool: str
    package: str  # the pip requirement the data was made with
    script: Path  # run by its interpreter: jobs in, answers out
    mapping: dict[str, str]
    left_out: Callable[[str, dict[str, Any]], str | None]
    job: Callable[[str, dict[str, Any]], Job]
    serving_output: bool  # whether it gives an output rate with the prefill in it


CALCULATORS = (
    Calculator(
        name="llm-analysis",
        label="llm-analysis",
        tool="llm-analysis by Cheng Li (https://github.com/cli99/llm-analysis)",
        package="llm-analysis==0.2.2",
        script=HERE / "llm_analysis_answers.py",
        mapping=LLA_MAPPING,
        left_out=_lla_left_out,
        job=_lla_job,
        serving_output=True,
    ),
    Calculator(
        name="genz-llm",
        label="GenZ",
        tool="GenZ-LLM-Analyzer (https://github.com/abhibambhaniya/GenZ-LLM-Analyzer)",
        package="genz-llm==0.0.16",
        script=HERE / "genz_answers.py",
        mapping=GENZ_MAPPING,
        left_out=lambda table, row: _left_out(table, row, GENZ_QUANTS),
        job=_genz_job,
        serving_output=False,
    ),
    Calculator(
        name="llmcalculator",
        label="llmcalculator",
        tool="llmcalculator (https://github.com/llmcalculator/llmcalculator)",
        package="llmcalculator==0.2.3",
        script=HERE / "llmcalculator_answers.py",
        mapping=LLMCALC_MAPPING,
        left_out=_llmcalc_left_out,
        job=_llmcalc_job,
        serving_output=False,
    ),
)
BY_NAME = {c.name: c for c in CALCULATORS}


def stored_row(
    calc: Calculator, table: str, row: dict[str, Any], answer: dict[str, Any]
) -> dict[str, Any]:
    """What is kept of one answer: the figure the row measured (decode or prefill), with the
    output rate for a serving row where the tool gives one, or why the tool refused it."""
    out: dict[str, Any] = {"table": table, "key": key(table, row)}
    if "refused" in answer:
        return out | {"refused": answer["refused"]}
    if table == SERVING:
        names: tuple[str, ...] = (
            ("decode_tps", "output_tps") if calc.serving_output else ("decode_tps",)
        )
    else:
        names = ("decode_tps",) if row["test"].startswith("tg") else ("prefill_tps",)
    return out | {name: round(answer[name], 1) for name in names}


def _dump(data: dict[str, Any]) -> str:
    """JSON with one stored row a line."""
    rows: list[str] = []

    def mark(calc: dict[str, Any]) -> dict[str, Any]:
        marked = []
        for r in calc["rows"]:
            marked.append(f"@row{len(rows)}@")
            rows.append(json.dumps(r))
        return calc | {"rows": marked}

    text = json.dumps(
        data | {"calculators": {n: mark(c) for n, c in data["calculators"].items()}}, indent=1
    )
    for i, r in enumerate(rows):
        text = text.replace(f'"@row{i}@"', r, 1)
    return text + "\n"


ABOUT = (
    "Other calculators' answers for the published rows of llama_bench.json and "
    "serving_published.json, one entry per calculator (its PyPI package): the tool, its version, "
    "when it was run, how the rows were put to it, the rows left out and why, and for each row "
    "it answers (key: the fields that name the published row) its prefill_tps or decode_tps "
    "(tokens per second), output_tps (prefill included) for serving rows where it gives one, or "
    "refused: the tool's own message. Made by benchmarks/calculators.py --regenerate."
)


def _sources(
    rows: list[tuple[str, dict[str, Any]]], answers: list[dict[str, Any]]
) -> dict[str, Any]:
    """Where a tool that says so took each model and GPU from (its own data or ours)."""
    out: dict[str, dict[str, str]] = {}
    for (_, row), answer in zip(rows, answers, strict=True):
        for what, field in (("model", "model_from"), ("gpu", "gpu_from")):
            if field in answer:
                out.setdefault(field, {})[row[what]] = answer[field]
    return {field: dict(sorted(found.items())) for field, found in out.items()}


def regenerate(calc: Calculator, python: str, path: Path = DATA) -> None:
    """Put every row the calculator can express to it (run by ``python``) and store the answers
    in place of its previous ones."""
    rows: list[tuple[str, dict[str, Any]]] = []
    reasons: Counter[str] = Counter()
    for table, row in published():
        why = calc.left_out(table, row)
        if why is None:
            rows.append((table, row))
        else:
            reasons[f"{table}: {why}"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        jobs, answers = Path(tmp) / "jobs.json", Path(tmp) / "answers.json"
        jobs.write_text(json.dumps([calc.job(t, r) for t, r in rows]))
        run = [python, str(calc.script), str(jobs), str(answers)]
        done = subprocess.run(run, capture_output=True, text=True, cwd=tmp, check=False)
        if done.returncode:
            raise SystemExit(f"{calc.name} failed:\n{done.stderr[-3000:]}")
        result = json.loads(answers.read_text())
    calculators = load(path)["calculators"] if path.exists() else {}
    calculators[calc.name] = {
        "tool": calc.tool,
        "version": result["version"],
        "install": f"pip install {calc.package}",
        "run_on": datetime.date.today().isoformat(),
        "regenerate": f"python -m benchmarks.calculators --regenerate {calc.name} PYTHON (an "
        f"interpreter with {calc.package} installed)",
        **calc.mapping,
        "left_out": dict(sorted(reasons.items())),
        **_sources(rows, result["answers"]),
        "rows": [
            stored_row(calc, t, r, a) for (t, r), a in zip(rows, result["answers"], strict=True)
        ],
    }
    path.write_text(_dump({"format_version": 1, "about": ABOUT, "calculators": calculators}))


def load(path: Path = DATA) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


@dataclass(frozen=True)
class Compared:
    """One published row beside each calculator's stored answer and vramgui's estimate, against
    the measurement the row is checked on (a serving row without TPOT: none, for reference)."""

    table: str
    row: dict[str, Any]
    kind: str  # "tg", "pp" or "serving"
    measured: float | None
    vramgui: float | None
    answers: dict[str, dict[str, Any]]  # calculator name -> its stored row (not refused)

    def figure(self, name: str) -> float | None:
        stored = self.answers.get(name)
        if stored is None:
            return None
        return float(stored["prefill_tps" if self.kind == "pp" else "decode_tps"])

    def error(self, name: str) -> float | None:
        figure = self.vramgui if name == "vramgui" else self.figure(name)
        if figure is None or self.measured is None:
            return None
        return figure / self.measured - 1


def compare(data: dict[str, Any]) -> list[Compared]:
    """Every published row some calculator answers, in the published order."""
    answers: dict[str, dict[str, dict[str, Any]]] = {}
    for name, calc in data["calculators"].items():
        for stored in calc["rows"]:
            if "refused" not in stored:
                answers.setdefault(_key_id(stored["table"], stored["key"]), {})[name] = stored
    out = []
    for table, row in published():
        answered = answers.get(_key_id(table, key(table, row)))
        if not answered:
            continue
        if table == LLAMA_BENCH:
            result = llama_bench.evaluate(row, with_before=False)
            out.append(
                Compared(table, row, result.kind, row["measured_tps"], result.estimate, answered)
            )
        else:
            out.append(
                Compared(
                    table,
                    row,
                    "serving",
                    serving_published.measured_decode(row),
                    serving_published.estimate(row),
                    answered,
                )
            )
    return out


def not_put(data: dict[str, Any], calc: Calculator) -> int:
    """Published rows the calculator could be put that its stored answers lack (added since)."""
    stored = {_key_id(s["table"], s["key"]) for s in data["calculators"][calc.name]["rows"]}
    return sum(
        calc.left_out(t, r) is None and _key_id(t, key(t, r)) not in stored for t, r in published()
    )


GROUPS: tuple[tuple[str, bool | None, str], ...] = (
    ("tg", False, "llama-bench generation, one GPU"),
    ("tg", True, "llama-bench generation, split over several GPUs"),
    ("pp", False, "llama-bench prompt processing, one GPU"),
    ("serving", None, "vLLM serving decode, rows with TPOT"),
)


def _in_group(c: Compared, kind: str, several: bool | None) -> bool:
    return (
        c.kind == kind
        and c.measured is not None
        and c.vramgui is not None
        and "anomalous" not in c.row
        and (several is None or (c.row["gpus"] > 1) == several)
    )


def _figures(errors: Sequence[float]) -> str:
    magnitudes = [abs(e) for e in errors]
    share = {b: sum(m <= b for m in magnitudes) / len(magnitudes) for b in (0.20, 0.25)}
    return (
        f"within 20 %: {share[0.20]:.0%}, within 25 %: {share[0.25]:.0%}, median error "
        f"{statistics.median(magnitudes):.0%} (signed {statistics.median(errors):+.0%}), "
        f"worst {max(errors, key=abs):+.0%}"
    )


def summary_lines(compared: Sequence[Compared]) -> list[str]:
    """Per kind of row and calculator: its figures and vramgui's on the rows it answers
    (anomalous rows and serving rows without a measured decode rate not counted)."""
    lines = []
    for kind, several, title in GROUPS:
        group = [c for c in compared if _in_group(c, kind, several)]
        if not group:
            continue
        lines.append(f"{title}:")
        for calc in CALCULATORS:
            rows = [c for c in group if c.figure(calc.name) is not None]
            if not rows:
                lines.append(f"  {calc.label}: no row")
                continue
            lines.append(
                f"  {calc.label} on {len(rows)} row{'s' * (len(rows) > 1)}: "
                f"{_figures([c.error(calc.name) or 0.0 for c in rows])}"
            )
            lines.append(
                f"    vramgui on the same rows: {_figures([c.error('vramgui') or 0.0 for c in rows])}"
            )
    return lines


def _tps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _err(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def _tools_cells(c: Compared) -> str:
    return "".join(
        f" {_tps(c.figure(calc.name))} | {_err(c.error(calc.name))} |" for calc in CALCULATORS
    )


def llama_markdown_cells(c: Compared) -> tuple[str, str]:
    """A llama-bench row of the table, split where vramgui's columns begin: the first part
    comes from the stored answers and the published row alone."""
    note = " (anomalous, not counted)" if "anomalous" in c.row else ""
    tools = f"| {llama_bench._label(c.row)}{note} | {_tps(c.measured)} |{_tools_cells(c)}"
    return tools, f" {_tps(c.vramgui)} | {_err(c.error('vramgui'))} |"


def serving_markdown_cells(c: Compared) -> tuple[str, str]:
    """A serving row of the table, split as ``llama_markdown_cells``."""
    row = c.row
    prompt, output = serving_published.lengths(row)
    outputs = ""
    for calc in CALCULATORS:
        if calc.serving_output:
            figure = c.answers[calc.name]["output_tps"] if calc.name in c.answers else None
            measured = row["output_tps"]  # None: the source gives TPOT only
            error = None if figure is None or measured is None else figure / measured - 1
            outputs += f" {_tps(figure)} | {_err(error)} |"
    tools = (
        f"| {row['gpu']} | {row['model']} {row['dtype']} | {row['concurrency']} | "
        f"{prompt} / {output} | {_tps(c.measured)} |{_tools_cells(c)} "
        f"{_tps(row['output_tps'])} |{outputs}"
    )
    return tools, f" {_tps(c.vramgui)} | {_err(c.error('vramgui'))} |"


def markdown_lines(compared: Sequence[Compared]) -> list[str]:
    tools = "".join(f" {calc.label} | error |" for calc in CALCULATORS)
    outputs = "".join(
        f" {calc.label} output (prefill included) | error |"
        for calc in CALCULATORS
        if calc.serving_output
    )
    numbers = "---:|" * (2 * len(CALCULATORS))
    lines = [
        f"| llama-bench row | measured tok/s |{tools} vramgui | error |",
        f"|---|---:|{numbers}---:|---:|",
    ]
    lines += ["".join(llama_markdown_cells(c)) for c in compared if c.table == LLAMA_BENCH]
    lines += [
        "",
        f"| GPU | model | concurrency | in / out | measured decode tok/s (TPOT) |{tools} "
        f"measured output tok/s |{outputs} vramgui decode | error |",
        f"|---|---|---:|---|---:|{numbers}---:|{'---:|' * (outputs.count('|'))}---:|---:|",
    ]
    lines += ["".join(serving_markdown_cells(c)) for c in compared if c.table == SERVING]
    return lines


def refused_lines(data: dict[str, Any]) -> list[str]:
    refused = Counter(
        f"{name}: {s['key']['model']} on {s['key']['gpu']}"
        + (f" x {s['key']['gpus']}" if s["key"]["gpus"] > 1 else "")
        + f": {s['refused'].split(' (')[0].split('. ')[0]}"
        for name, calc in data["calculators"].items()
        for s in calc["rows"]
        if "refused" in s
    )
    return [f"  {n} x {why}" for why, n in sorted(refused.items())] or ["  none"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--regenerate",
        nargs=2,
        metavar=("CALCULATOR", "PYTHON"),
        help=f"re-run one calculator ({', '.join(BY_NAME)}) with an interpreter "
        "that has it installed",
    )
    args = parser.parse_args(argv)
    if args.regenerate:
        name, python = args.regenerate
        if name not in BY_NAME:
            parser.error(f"no calculator {name!r}: {', '.join(BY_NAME)}")
        regenerate(BY_NAME[name], python)
    data = load()
    compared = compare(data)
    for calc in CALCULATORS:
        stored = data["calculators"][calc.name]
        print(f"{calc.label}: {stored['tool']}, {stored['version']}, run on {stored['run_on']}")
    print("\n".join(summary_lines(compared)))
    print("refused by their own checks:")
    print("\n".join(refused_lines(data)))
    for calc in CALCULATORS:
        print(f"left out of {calc.label}:")
        for why, n in data["calculators"][calc.name]["left_out"].items():
            print(f"  {n} x {why}")
        missing = not_put(data, calc)
        if missing:
            print(f"  {missing} published rows added since have no answer: re-run --regenerate")
    print()
    print("\n".join(markdown_lines(compared)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
