"""vLLM start-up logs against the estimate: the KV pool in tokens, the memory behind it.

Each published log (benchmarks/data/vllm_logs.json: URL, command line, GPU, vLLM version)
printed what vLLM's start-up decided: the weights it loaded, the memory left for the KV cache,
the pool in tokens and the concurrency at --max-model-len. The estimate rebuilds the same
start-up from the model's inventory with the log's settings, the version's rules
(core/vllm/) and the sampler the log says vLLM found, and the table puts the two side by
side. Logs marked "tune" set the constants of the activation and non-torch model; the
"held-out" ones never did, and are summarised apart.

    .venv/bin/python -m benchmarks.vllm_logs            # the table
    .venv/bin/python -m benchmarks.vllm_logs --json     # every row as JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.percent import signed
from vramgui.core import storage
from vramgui.core.families import spec_from_config
from vramgui.core.inference import engine_kv_workload
from vramgui.core.model import ModelSpec, Role
from vramgui.core.rank_weights import rank_tensor_bytes
from vramgui.core.units import GiB, MiB
from vramgui.core.vllm.profile import CUDA_RESERVED_BYTES, cuda_total_bytes
from vramgui.core.vllm.rules import rules_for
from vramgui.core.vllm.startup import build_plan
from vramgui.core.workload import Workload

DATA = Path(__file__).resolve().parent / "data" / "vllm_logs.json"


def load() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def log_spec(name: str, configs: dict[str, Any]) -> ModelSpec:
    """The model a log ran: the data file's config of that name, its catalog entry (an entry
    of ``configs`` may name one, ``{"catalog": ...}``), or the catalog model of that name."""
    from vramgui.sources.resolve import load_model

    entry = configs.get(name)
    if entry is not None and "config" in entry:
        return spec_from_config(entry["config"], name)
    return load_model(entry["catalog"] if entry is not None else name).spec


def estimate_log(log: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """The estimate of one logged start-up, beside what the log printed."""
    spec = log_spec(log["model"], doc.get("configs", {}))
    rules = dataclasses.replace(rules_for(log["vllm"]), sampler=log["sampler"])
    settings = {"engine": "vllm", "vllm-version": rules.version, **log["settings"]}
    gpu = doc["gpus"].get(log["gpu"], {})
    if "arch" in gpu:  # the kernels vLLM picks for a format, and their padding, go by the GPU
        settings.setdefault("gpu-arch", gpu["arch"])
    # Under --kv-dtype auto vLLM caches in the checkpoint's KV scheme, as the estimate does.
    workload = engine_kv_workload(spec, Workload.from_dict(settings))
    # CUDA's total as the log prints it, else as the GPU's entry gives it (unified memory, for
    # which nvidia-smi prints none), else nvidia-smi's memory less what CUDA reserves.
    cuda_total_gib = log.get("cuda_total_gib", gpu.get("cuda_total_gib"))
    if cuda_total_gib is not None:
        capacity = round(cuda_total_gib * GiB) + CUDA_RESERVED_BYTES
    else:
        capacity = gpu["memory_mib"] * MiB
    total = cuda_total_bytes(capacity)
    plan = build_plan(
        spec, workload, rank_tensor_bytes(spec, workload), total, gpu_name=log["gpu"], rules=rules
    )
    up = plan.startup(capacity, workload.gpu_memory_utilization, workload.seq)
    logged = dict(log["logged"])
    from_pool = None
    if "available_gib" in logged:
        # The pool vLLM printed, in the tokens the estimate's KV layout gives it: the layout's
        # check apart from the memory model's.
        stage = plan.stages[0]
        blocks = stage.layout.blocks(round(logged["available_gib"] * GiB))
        from_pool = stage.layout.reported_tokens(
            blocks, workload.seq, plan.scheduler.max_num_batched_tokens, rules
        )
        if "kv_tokens" not in logged:
            logged["kv_tokens"] = from_pool
            logged["kv_tokens_derived"] = True
    row: dict[str, Any] = {
        "id": log["id"],
        "kind": log["kind"],
        "split": log["split"],
        "vllm": log["vllm"],
        "gpu": log["gpu"],
        "tokens_logged": logged.get("kv_tokens"),
        "tokens_estimate": up.pool_tokens,
        "available_logged_gib": logged.get("available_gib"),
        "available_estimate_gib": up.available_bytes / GiB,
        "weights_logged_gib": logged.get("weights_gib"),
        "weights_estimate_gib": (
            plan.weights_bytes
            + (plan.stages[0].non_torch_bytes if logged.get("weights_include_non_torch") else 0)
        )
        / GiB,
        "concurrency_logged": logged.get("max_concurrency"),
        "concurrency_estimate": up.max_concurrency,
        "starts_logged": logged.get("starts", True),
        "starts_estimate": up.starts,
        "tokens_derived": logged.get("kv_tokens_derived", False),
        "tokens_from_logged_pool": from_pool,
        "activation_logged_gib": logged.get("activation_gib"),
        "activation_estimate_gib": max(s.activation_bytes for s in plan.stages) / GiB,
    }
    if "checkpoint_gib" in logged:
        row["checkpoint_logged_gib"] = logged["checkpoint_gib"]
        row["checkpoint_estimate_gib"] = checkpoint_bytes(spec, workload) / GiB
    if logged.get("kv_tokens") and row["starts_logged"]:
        row["error"] = up.pool_tokens / logged["kv_tokens"] - 1
        if from_pool is not None and not row["tokens_derived"]:
            row["layout_error"] = from_pool / logged["kv_tokens"] - 1
    return row


def checkpoint_bytes(spec: ModelSpec, workload: Workload) -> int:
    """What the checkpoint's files hold under the log's settings: every tensor as the scheme
    stores it, the MTP layers' own included (vLLM's ``Checkpoint size`` line)."""
    own = tuple(t for t in spec.mtp_tensors if t.role not in (Role.EMBEDDING, Role.HEAD))
    whole = dataclasses.replace(spec, tensors=(*spec.tensors, *own), mtp_tensors=())
    return storage.weight_bytes(whole, workload.dtype, workload.quant)


def rows() -> list[dict[str, Any]]:
    doc = load()
    return [estimate_log(log, doc) for log in doc["logs"]]


def _tokens_cell(r: dict[str, Any], sep: str) -> str:
    """The pool in tokens, logged and estimated; a refused start reads as such."""
    if not r["starts_logged"] or not r["starts_estimate"]:
        logged = "refused" if not r["starts_logged"] else f"{r['tokens_logged'] or 0:,}"
        estimate = "refused" if not r["starts_estimate"] else f"{r['tokens_estimate']:,}"
        return f"{logged}{sep}{estimate}"
    mark = "*" if r["tokens_derived"] else ""
    return f"{r['tokens_logged'] or 0:,}{mark}{sep}{r['tokens_estimate']:,}"


def _gib(logged: float | None, estimate: float, sep: str) -> str:
    """A logged / estimated pair in GiB; "-" where the log did not print the figure."""
    return f"{'-' if logged is None else f'{logged:.2f}'}{sep}{estimate:.2f}"


def summary(
    table: list[dict[str, Any]], split: str | None = None, key: str = "error"
) -> dict[str, float]:
    """Median and largest error of ``key`` over one split: "error", the whole start-up;
    "layout_error", the tokens the estimate's KV layout makes of the pool the log printed; for
    SGLang's logs (benchmarks/sglang_logs.py), "arithmetic_error", SGLang's formula on the logged
    memory."""
    errors = [abs(r[key]) for r in table if key in r and split in (None, r["split"])]
    if not errors:
        return {}
    return {
        "logs": len(errors),
        "median_abs_error": statistics.median(errors),
        "max_abs_error": max(errors),
        "within_10pct": sum(e <= 0.10 for e in errors),
    }


def _checkpoint_line(r: dict[str, Any]) -> str:
    logged, estimate = r["checkpoint_logged_gib"], r["checkpoint_estimate_gib"]
    return (
        f"checkpoint size, {r['id']}: logged {logged:.2f} GiB, estimate {estimate:.2f} GiB "
        f"({signed(estimate / logged - 1, 1)})"
    )


def format_table(table: list[dict[str, Any]]) -> str:
    head = (
        f"{'log':<46}{'split':<9}{'vLLM':<8}{'weights GiB':>14}{'KV GiB':>14}"
        f"{'pool tokens':>24}{'error':>8}{'layout':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in table:
        weights = _gib(r["weights_logged_gib"], r["weights_estimate_gib"], "/")
        kv = _gib(r["available_logged_gib"], r["available_estimate_gib"], "/")
        tokens = _tokens_cell(r, "/")
        error = signed(r["error"], 1) if "error" in r else ""
        layout = signed(r["layout_error"], 1) if "layout_error" in r else ""
        version = r["vllm"].split()[0]
        lines.append(
            f"{r['id']:<46}{r['split']:<9}{version:<8}{weights:>14}{kv:>14}{tokens:>24}"
            f"{error:>8}{layout:>8}"
        )
    for r in table:
        if "checkpoint_logged_gib" in r:
            lines.append(_checkpoint_line(r))
    for key, what in (("error", "start-up"), ("layout_error", "layout (logged pool)")):
        for split in ("tune", "held-out", None):
            s = summary(table, split, key)
            if s:
                lines.append(
                    f"{what}, {split or 'all'}: {s['logs']} logs, median |error| "
                    f"{s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%}, "
                    f"{s['within_10pct']} within 10 %"
                )
    return "\n".join(lines)


def markdown_section(table: list[dict[str, Any]] | None = None) -> list[str]:
    """docs/accuracy.md's section: every log against the estimate, the summaries, the sources."""
    table = rows() if table is None else table
    doc = load()
    logs = {log["id"]: log for log in doc["logs"]}
    lines = [
        "### vLLM's start-up against its own logs (benchmarks/vllm_logs.py)",
        "",
        "Each published start-up log printed vLLM's weights (`Model loading took`), its KV pool",
        "(`Available KV cache memory`) and the pool in tokens (`GPU KV cache size`); the estimate",
        "rebuilds that start-up from the model's inventory with the log's command line, GPU (its",
        "size, and its generation, which picks the kernels vLLM runs a format with) and version",
        "(core/vllm/ follows the version's rules, and the sampler the log names).",
        "The pool in tokens is the figure compared; weights and pool in GiB show where a",
        "difference comes from. *tune* logs set the profile and non-torch constants; *held-out*",
        "logs never did. The *layout* column takes the pool the log printed and cuts it into",
        "blocks with the estimate's KV layout alone: it checks the layout rules (windows, MLA,",
        "state layers, KV dtypes, TP and PP) apart from the memory model.",
        "",
        "The estimate follows vLLM 0.20.2 and later by default (`--vllm-version` picks 0.10 or",
        "0.11); the code read is vLLM 0.9.2, 0.11.0, 0.11.2, 0.13.0, 0.19.0, 0.20.2, 0.21.0,",
        "0.23.0, 0.24.0 and 0.34.0.",
        "What changed between them: from 0.20.2 CUDA graph memory is profiled before the pool",
        "and taken out of it (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; vLLM's own message",
        "dates the default to 0.21.0), the `GPU KV cache size` line is the concurrency times",
        "`max_model_len`",
        "instead of blocks per KV cache group times the block size (the two differ for",
        "sliding-window and hybrid models), layers of different page sizes are given larger",
        "blocks (0.11 refuses them), a model with state layers refuses to start when",
        "`--max-num-seqs` exceeds its pool's blocks while full decode CUDA graphs are captured,",
        "and FlashInfer, whose sampler needs less memory than PyTorch's, is a dependency (0.10",
        "and 0.11 sample with FlashInfer wherever it is installed; 0.13.0 only under",
        "`VLLM_USE_FLASHINFER_SAMPLER=1`, so its logs and later ones that print no FlashInfer",
        "sampler line are estimated with PyTorch's); from",
        "0.11, CUDA graph sizes past 256 go in steps of 16 up to twice `--max-num-seqs`, with",
        "whole-step decode graphs beside them; 0.11 sets `--max-num-seqs` 1024 and 8192 batched",
        "tokens on GPUs of 70 GiB and more other than the A100 (256 and 2048 otherwise; the",
        "`LLM` class batches 16,384 and 8,192 tokens: logs run through it give theirs). State",
        "layers (Mamba, Gated DeltaNet) keep their convolution's last kernel - 1 inputs (one more",
        "per speculative token) and a recurrent state (float32 for Qwen3.5 and Nemotron-H); with",
        "prefix caching they keep one more state per request (two per request plus speculative",
        "ones, `align`) or, for the pure Mamba families, one per block of tokens (`all`). Up to",
        "0.24 prefix caching is off for such models unless asked for; 0.34 turns it on",
        "(`--enable-prefix-caching` / `--no-enable-prefix-caching` set it either way). On",
        "Hopper, gpt-oss's MXFP4 experts run on the Triton backend, which turns their biases to",
        "float32 and, with torch 2.8.1 and later (vLLM 0.11.1 on; the 0.11 rules follow 0.11.1",
        "and 0.11.2, as the llm-d logs' weights do), swizzles weights and scales into",
        "triton_kernels' Hopper layouts and keeps the loaded scales beside their copies (0.10",
        "and 0.11.0 keep the strided layout, a view). Multimodal models profile their vision",
        "encoder first (`gpu_model_runner.profile_run`, read in 0.22.0 and 0.24.0): as many",
        "dummy images of the largest size as the encoder budget holds (max(batched tokens,",
        "tokens per image) // tokens per image, at least one), whose pixel values and outputs",
        "stay allocated through the text forward. The estimate counts it under the 0.20 rules",
        "for Qwen3-VL, Qwen3.5 and Qwen3.6, with the image limit of Qwen's published",
        "preprocessor_config.json (4096 x 4096 pixels: one image of 16,384 tokens), since the",
        "inventory does not carry the checkpoint's own; and for Gemma 3, whose SigLIP tower",
        "reads 896 x 896 images of 256 tokens (pan-and-scan off, the processor's default), so",
        "the budget holds many (32 at 8192 batched tokens), all through the tower in one batch",
        "under FlashAttention (no score matrix); and for Mistral 3's Pixtral (Mistral Small",
        "3.1 / 3.2, Devstral Small 2), whose 1540 x 1540 images of 3,025 tokens run as one",
        "sequence kept apart, without xformers (no longer a dependency), by a dense mask of",
        "(patches x patches) alive through the tower: 1.09 GiB for the two images of an",
        "8192-token budget. Under the 0.11 rules (read in 0.11.0 and 0.11.2; 0.13.0 profiles",
        "an image, as the 0.20 rules do) Qwen3-VL profiles a video",
        "instead: its tokens are counted as the prompt holds them (12.5 per vision token, with",
        "timestamps) over as many frames as `--max-model-len` holds, up to 24,576 (of 32 x 32",
        "pixels at 65,536 tokens: 12,288 vision tokens, 153,600 prompt tokens), and",
        "`profile_run` copies the tower's output into a tensor of the encoder budget's rows,",
        "kept through the text forward on every rank (2.34 GiB for Qwen3-VL-30B-A3B). Every",
        "other tower (Gemma 4, Kimi, LFM2-VL, Pixtral under `--config-format mistral`, all",
        "of them under the 0.10 rules and all but Qwen3-VL's under 0.11, though vLLM profiles",
        "them there too) is named in a note, and the start-up is then given as an upper",
        "bound. Gemma 4's KV layout follows vLLM's code; vLLM 0.21's report of a 16-bit cache",
        "agrees with it (vllm-project/vllm#43308), and so does the fp8 start-up of",
        "Gemma-4-31B-IT-NVFP4 on the 128 GB unified-memory machine its pool implies (no 80 GB",
        "GPU can hold it; see the GPU notes below). Logs of the V0 engine (before 0.8, or",
        "`VLLM_USE_V1=0`) profile differently and are not modelled.",
        "",
        "SGLang sizes its pool otherwise: it profiles nothing, and keeps",
        "`--mem-fraction-static` of the memory free before loading for weights and KV pool",
        "(pool = that share less the weights), the rest for activations and CUDA graphs. Its",
        "default fraction is (GPU memory - reserved) / GPU memory with reserved = 1.5 MB per",
        "token of `--chunked-prefill-size` + 2 MB per CUDA graph batch size (sglang 0.5.23,",
        "arg_groups/memory_hook.py); the next section holds vramgui's SGLang estimate.",
        "",
        "| log | model | GPU | vLLM | weights GiB log / est. | KV pool GiB log / est. "
        "| pool tokens log / est. | error | layout | split |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        log = logs[r["id"]]
        error = signed(r["error"], 1) if "error" in r else ""
        layout = signed(r["layout_error"], 1) if "layout_error" in r else ""
        weights = _gib(r["weights_logged_gib"], r["weights_estimate_gib"], " / ")
        pool = _gib(r["available_logged_gib"], r["available_estimate_gib"], " / ")
        tokens = _tokens_cell(r, " / ")
        lines.append(
            f"| [{r['id']}]({log['url']}) | {log['model']} ({r['kind']}) | {r['gpu']} | "
            f"{r['vllm']} | {weights} | {pool} | {tokens} | {error} | {layout} | {r['split']} |"
        )
    lines.append("")
    lines.append(
        "\\* the log printed the pool in GiB only: the tokens are what vLLM's rules make of it."
    )
    refusals = [r for r in table if not r["starts_logged"]]
    agree = sum(r["starts_logged"] == r["starts_estimate"] for r in table)
    lines.append(
        f"Start or refuse: the estimate agrees with {agree} of {len(table)} logs "
        f"({len(refusals)} of them refusals)."
    )
    lines.append("")
    for split, name in (("tune", "Tuned on"), ("held-out", "Held out"), (None, "All")):
        s = summary(table, split)
        if s:
            lines.append(
                f"- {name}: {s['logs']} logs, median |error| {s['median_abs_error']:.1%}, "
                f"largest {s['max_abs_error']:.1%}, {s['within_10pct']} within 10 %."
            )
    s = summary(table, None, "layout_error")
    if s:
        lines.append(
            f"- The KV layout alone (the logged pool in tokens): {s['logs']} logs, median "
            f"|error| {s['median_abs_error']:.1%}, largest {s['max_abs_error']:.1%}."
        )
    sized = [r for r in table if "checkpoint_logged_gib" in r]
    if sized:
        lines += ["", "What the checkpoint's files hold (vLLM's `Checkpoint size` line):", ""]
        for r in sized:
            source = logs[r["id"]].get("checkpoint_source", logs[r["id"]]["url"])
            lines.append(f"- {_checkpoint_line(r).removeprefix('checkpoint size, ')}; {source}.")
    unnamed = [(log["id"], log["gpu"], log["gpu_note"]) for log in doc["logs"] if "gpu_note" in log]
    if unnamed:
        lines += ["", "GPUs the logs do not name (the estimate uses the one given):", ""]
        lines += [f"- {name}, {gpu}: {note}." for name, gpu, note in unnamed]
    gaps = [(log["id"], log["gap"]) for log in doc["logs"] if log.get("gap")]
    if gaps:
        lines += ["", "Where the estimate is known to miss:", ""]
        lines += [f"- {name}: {gap}." for name, gap in gaps]
    lines += ["", "Commands of the logs:", ""]
    lines += [f"- {log['id']}: `{log['what']}` ({log['gpu']})" for log in doc["logs"]]
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print every row as JSON")
    args = parser.parse_args(argv)
    table = rows()
    print(json.dumps(table, indent=2) if args.json else format_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
