"""Accuracy benchmark: the estimator against measured memory, case by case, rules of thumb beside.

Four sources of measurements:
- the harness (vramgui/measure): peak live tensor bytes of real transformers models, run under
  FakeTensorMode on this machine (benchmarks/data/measured_*.json);
- published GPU figures (benchmarks/data/published.json): engine logs and reports;
- published file sizes of GGUF quantizations;
- pre-quantized checkpoints' stored bytes: published totals, and the checkpoints the libraries
  write, built from their own definitions (benchmarks/stored_formats.py).

    .venv/bin/python -m benchmarks.accuracy            # print the tables
    .venv/bin/python -m benchmarks.accuracy --markdown # and write docs/accuracy.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks import architectures, sglang_logs, stored_formats, training_accuracy, vllm_logs
from benchmarks.harness.cases import PUBLISHED, load_config
from benchmarks.percent import signed
from vramgui.core import rules, storage
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.inference import inference_breakdown
from vramgui.core.units import GiB, MiB
from vramgui.core.workload import Workload
from vramgui.measure.compare import relative_error

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
DOC = ROOT / "docs" / "accuracy.md"
LIMITS = DATA / "measure_limits.json"

_SETTING_KEYS = {"mode", "batch", "seq", "dtype", "quant", "engine", "kv-dtype", "attention"}


def _spec(hub_id: str):
    return spec_from_config(load_config(hub_id), hub_id)


def inference_rows() -> list[dict]:
    """Harness inference cases: measured peak, estimate, error, and P x bytes x 1.2."""
    records = json.loads((DATA / "measured_inference.json").read_text())["cases"]
    rows = []
    for rec in records:
        spec = spec_from_config(load_config(rec["config"]), rec["model"])
        settings = {k: v for k, v in rec["settings"].items() if k in _SETTING_KEYS}
        w = Workload.from_dict(settings)
        # The harness runs PyTorch's CPU kernels: the estimate for them is compared, and where
        # CUDA's hold less (SDPA's math kernel for MLA's unequal head sizes), CUDA's is noted.
        cuda = estimate(spec, w).tensor_bytes
        cpu = inference_breakdown(spec, w, device="cpu")
        est = cpu.weights_bytes + cpu.kv_cache_bytes + cpu.activations_bytes
        rule = rules.serving_rule(spec.parameters, storage.bits_per_weight(spec, w.dtype, w.quant))
        measured = rec["peak_bytes"]
        note = ""
        if cuda != est:
            note = (
                f"the CPU's SDPA takes its math kernel (fp32 scores); CUDA's kernels: "
                f"{cuda / GiB:,.3f} GiB"
            )
        rows.append(
            {
                "id": rec["id"],
                "measured": measured,
                "estimate": est,
                "error": relative_error(est, measured),
                "rules": {"P x bytes x 1.2": rule},
                "note": note,
                "apart": False,
            }
        )
    return rows


def decode_rows() -> list[dict]:
    """Harness inference cases' decode phase: generate's last step against the estimate with a
    one-token prompt and the whole context cached (``--prompt``), the moment that bounds a
    short prompt's peak. The harness's decode step caches the prompt and one token more."""
    records = json.loads((DATA / "measured_inference.json").read_text())["cases"]
    rows = []
    for rec in records:
        decode = rec.get("phase_peaks", {}).get("decode")
        if decode is None:
            continue
        spec = spec_from_config(load_config(rec["config"]), rec["model"])
        settings = {k: v for k, v in rec["settings"].items() if k in _SETTING_KEYS}
        w = Workload.from_dict(settings)
        cpu = inference_breakdown(spec, w.with_(seq=w.seq + 1, prompt=1), device="cpu")
        est = cpu.weights_bytes + cpu.kv_cache_bytes + cpu.activations_bytes
        measured = decode["peak_bytes"]
        rows.append(
            {
                "id": rec["id"],
                "measured": measured,
                "estimate": est,
                "error": relative_error(est, measured),
                "rules": {},
                "note": "",
                "apart": False,
                "phase": cpu.phase,
            }
        )
    return rows


def published_component_rows() -> list[dict]:
    """Engine-reported components from published.json, each against the estimate."""
    doc = json.loads(PUBLISHED.read_text())
    cases = {c["id"]: c for c in doc["cases"]}
    llama3 = _spec("meta-llama/Meta-Llama-3-8B")
    llama2 = _spec("meta-llama/Llama-2-7b-hf")
    bert = _spec("google-bert/bert-base-cased")
    # vLLM's start-up (activation peak, KV pool) is checked against its V1 logs in
    # benchmarks/vllm_logs.py; these figures come from its V0 engine, whose weights are the same.
    vllm = inference_breakdown(llama3, Workload(engine="vllm"))
    vllm_tp2 = inference_breakdown(llama3, Workload(engine="vllm", gpus=2, tp=2))
    # The log ran without flash attention (the default of llama.cpp then).
    cpp = inference_breakdown(
        llama2,
        Workload(engine="llamacpp", quant="Q4_K_M", seq=2048, kv_dtype="fp16", attention="eager"),
    )
    bert_est = estimate(bert, Workload(dtype="fp32", seq=512))
    rows = [
        (
            "vLLM Llama-3-8B weights",
            cases["vllm-llama3-8b-weights"]["measured"]["bytes"],
            vllm.weights_bytes,
        ),
        ("vLLM Llama-3-8B weights per GPU, TP 2", round(7.48 * GiB), vllm_tp2.weights_bytes),
        ("llama.cpp Llama-2-7B Q4_K_M weights on GPU", round(3820.94 * MiB), cpp.weights_bytes),
        ("llama.cpp token embeddings on host", round(70.31 * MiB), cpp.host_bytes),
        ("llama.cpp KV cache, n_ctx 2048, f16", 1024 * MiB, cpp.kv_cache_bytes),
        ("llama.cpp CUDA compute buffer", round(164.01 * MiB), cpp.activations_bytes),
        (
            "BERT-base fp32 weights (accelerate, MiB)",
            round(413.68 * MiB),
            bert_est.components["weights"],
        ),
    ]
    notes = {
        "llama.cpp CUDA compute buffer": "llama.cpp of early 2024, its inputs in a buffer of "
        "their own; today's buffers: docs/offload.md"
    }
    return [
        {
            "id": name,
            "measured": m,
            "estimate": e,
            "error": e / m - 1,
            "rules": {},
            "note": notes.get(name, ""),
            "apart": name in notes,
        }
        for name, m, e in rows
    ]


def gguf_rows() -> list[dict]:
    """Bits per weight of Llama-3.1-8B GGUF files (llama.cpp's quantize README)."""
    doc = json.loads(PUBLISHED.read_text())
    case = next(c for c in doc["cases"] if c["id"] == "gguf-sizes-llama31-8b")
    spec = _spec("meta-llama/Meta-Llama-3-8B")
    out = []
    for quant, published in case["measured"]["bits_per_weight"].items():
        bits = storage.bits_per_weight(spec, "bf16", quant)
        out.append(
            {"id": quant, "published": published, "estimate": bits, "error": bits / published - 1}
        )
    return out


def _gib(n: float) -> str:
    return f"{n / GiB:,.3f}"


def table(rows: list[dict], title: str) -> list[str]:
    rule_names = sorted({name for r in rows for name in r["rules"]})
    head = "| case | measured GiB | estimate GiB | error |" + "".join(
        f" {n} GiB | error |" for n in rule_names
    )
    lines = [f"### {title}", "", head + " note |", "|---" * (4 + 2 * len(rule_names)) + "|---|"]
    for r in rows:
        cells = [r["id"], _gib(r["measured"]), _gib(r["estimate"]), signed(r["error"], 2)]
        for name in rule_names:
            value = r["rules"].get(name)
            cells += [_gib(value), signed(value / r["measured"] - 1, 1)] if value else ["", ""]
        lines.append("| " + " | ".join(cells) + f" | {r['note']} |")
    lines += ["", summary(rows), ""]
    return lines


def summary(rows: list[dict]) -> str:
    errors = [abs(r["error"]) for r in rows if not r["apart"]]
    within = sum(e <= 0.03 for e in errors)
    text = (
        f"{len(rows)} cases: median |error| {statistics.median(errors):.2%}, "
        f"worst {max(errors):.2%}, {within} within 3 %"
    )
    marked = len(rows) - len(errors)
    return text + (f" ({marked} marked case left out of the statistics)." if marked else ".")


def gguf_table(rows: list[dict]) -> list[str]:
    lines = [
        "### GGUF bits per weight, Llama-3.1-8B (llama.cpp tools/quantize/README.md)",
        "",
        "| type | published | estimate | error |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['id']} | {r['published']:.4f} | {r['estimate']:.4f} | {signed(r['error'], 3)} |"
        for r in rows
    ]
    worst = max(abs(r["error"]) for r in rows)
    return [*lines, "", f"{len(rows)} types, worst |error| {worst:.3%}.", ""]


def training_tables() -> list[str]:
    return training_accuracy.sections()


def _architecture_errors(path: Path) -> dict[str, list[dict]]:
    """Per type, each stored measurement with today's estimate of it (for the CPU kernels the
    measurement ran) and the error."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    configs = json.loads(architectures.CASES.read_text())["types"]
    out: dict[str, list[dict]] = {}
    for model_type, rec in doc["types"].items():
        rows = []
        for p in rec["points"]:
            row = {"config": p["config"], "batch": p["batch"], "seq": p["seq"]}
            if "measured" not in p:
                row["failed"] = p.get("measure_error") or p.get("estimate_error") or "not run"
                rows.append(row)
                continue
            config = configs[model_type][p["config"]]["config"]
            est = architectures.estimated(config, p["batch"], p["seq"])
            row |= {
                "measured": p["measured"]["peak_bytes"],
                "estimate": est["tensor_bytes"],
                "error": relative_error(est["tensor_bytes"], p["measured"]["peak_bytes"]),
                "cuda": "cuda_activations" in est,
            }
            rows.append(row)
        out[model_type] = rows
    return out


def _cell(row: dict | None) -> str:
    if row is None:
        return ""
    if "error" not in row:
        return "not run"
    return signed(row["error"], 1) + (" \\*" if row["cuda"] else "")


def architectures_section() -> list[str]:
    results = _architecture_errors(DATA / "architectures_inference.json")
    shapes = [tuple(s) for s in architectures.SHAPES]
    worst = {
        t: max((abs(r["error"]) for r in rows if "error" in r), default=None)
        for t, rows in results.items()
    }
    done = [t for t, e in worst.items() if e is not None]
    within = [t for t in done if worst[t] <= 0.01]
    close = [t for t in done if 0.01 < worst[t] <= 0.03]
    far = sorted((t for t in done if worst[t] > 0.03), key=lambda t: -worst[t])
    heads = [f"{b} x {s:,}" for b, s in shapes] + ["double size", "half size"]
    lines = [
        "### Every causal-LM architecture at four or more shapes and three sizes (harness, "
        "transformers)",
        "",
        "`python -m benchmarks.architectures`: each type transformers 5.24 builds, on its "
        "default config at batch x prompt "
        + ", ".join(f"{b} x {s:,}" for b, s in shapes)
        + f" and on configs of half and double its widths at {architectures.SIZE_SHAPE[0]} x "
        f"{architectures.SIZE_SHAPE[1]:,} (bf16, SDPA, eager where the class has no other); "
        "the estimate for the kernels the run executes (PyTorch's CPU kernels) against the "
        "measured peak. Prompts longer than a model's learned positions are cut to them (batch 2 "
        "at a half, a quarter and an eighth of them make up four shapes). "
        f"{len(results)} of the {len(json.loads(architectures.CASES.read_text())['types'])} "
        f"types run, {len(done)} measured: {len(within)} within 1 % at every shape "
        f"and size, {len(close)} within 3 %, {len(far)} beyond (each estimate of those says it "
        "is approximate and by how much; every estimate says so outside the shapes and sizes "
        "measured, and every estimate of a type not run says it is approximate: "
        "vramgui/core/families/validation.json). \\* marks a shape where CUDA's "
        "kernels hold less than the CPU's the run executes (SDPA's math kernel for MLA's "
        "unequal head sizes): the estimate a user sees is CUDA's.",
        "",
        "| type | " + " | ".join(heads) + " |",
        "|---|" + "---:|" * len(heads),
    ]
    for t in [t for t in architectures.HEADLINE if t in results] + [
        t for t in far if t not in architectures.HEADLINE
    ]:
        rows = results[t]
        by_shape = {(r["batch"], r["seq"]): r for r in rows if r["config"] == 0}
        # prompts cut to a model's learned positions are shown under the shape asked for
        cells = []
        for b, s in shapes:
            cut = [(rs, r) for (rb, rs), r in by_shape.items() if rb == b and rs < s]
            row = by_shape.get((b, s)) or (max(cut, key=lambda c: c[0])[1] if cut else None)
            cells.append(_cell(row))
        for index in (1, 2):
            cells.append(_cell(next((r for r in rows if r["config"] == index), None)))
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    failed = sorted(t for t, e in worst.items() if e is None)
    lines += [
        "",
        "Types with Mamba, short-convolution or linear-attention blocks run transformers' "
        "PyTorch reference kernels (what transformers runs without mamba-ssm, causal-conv1d and "
        "flash-linear-attention: a CPU, or a GPU without them); the estimate follows those. Not "
        f"measured ({len(failed)}): " + ", ".join(failed) + ".",
        "",
        *_held_out_lines(),
    ]
    return lines


def parameter_counts_section() -> list[str]:
    """benchmarks/parameter_counts.py's figures: counts at sizes the table never saw."""
    doc = json.loads((DATA / "parameter_counts.json").read_text())
    s = doc["summary"]
    rows = doc["rows"]
    lines = [
        "### Parameter counts at sizes never learned (transformers, meta device)",
        "",
        "`python -m benchmarks.parameter_counts`: for every type transformers "
        f"{doc['transformers']} ships, configs the architecture table was not learned from "
        "(every size scaled at random, the same as `save_pretrained` writes it, an explicit "
        "`head_dim` that is not the width over the heads, the stack reshaped), real published "
        "configs (benchmarks/data/published_configs.json) and the bundled catalog's, counted "
        "by transformers and estimated from config.json alone. "
        f"{s['configs']} configs of {s['types']} types: {s['exact']} exact, "
        f"{s['wrong'] + s['off']} wrong yet called exact, {s['approximate']} said to be "
        f"approximate ({s['approximate_off']} of them more than 1 % off), {s['refused']} "
        "refused with a message.",
        "",
        "| config | type | transformers | estimate | error | estimate says |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        if not r["kind"].startswith("published:"):
            continue
        got = f"{r['estimate']:,}" if r.get("estimate") is not None else "refused"
        lines.append(
            f"| {r['kind'].removeprefix('published: ')} | {r['type']} | {r['transformers']:,} "
            f"| {got} | {signed(r.get('error', 0.0), 2)} | {r['inventory']} |"
        )
    off = sorted(
        (r for r in rows if r["verdict"] != "refused" and abs(r.get("error", 0.0)) > 0.01),
        key=lambda r: (r["type"], r["kind"]),
    )
    if off:
        lines += [
            "",
            "More than 1 % off: "
            + ", ".join(
                f"{r['type']} ({r['kind']}, {signed(r['error'], 1)}, {r['inventory']})" for r in off
            )
            + ".",
        ]
    lines.append("")
    return lines


def _held_out_lines() -> list[str]:
    results = _architecture_errors(DATA / "architectures_held_out.json")
    if not results:
        return []
    shapes = [tuple(s) for s in architectures.HELD_OUT]
    lines = [
        "#### Held-out shapes",
        "",
        "`python -m benchmarks.architectures --held-out`: shapes no rule of the estimator was "
        "written or checked from, "
        + ", ".join(f"{b} x {s:,}" for b, s in shapes)
        + ", on the default config and the half-size one of the 2025-26 types (the worst "
        "|error| of the two).",
        "",
        "| type | " + " | ".join(f"{b} x {s:,}" for b, s in shapes) + " |",
        "|---|" + "---:|" * len(shapes),
    ]
    for t in architectures.HEADLINE:
        rows = results.get(t)
        if not rows:
            continue
        cells = []
        for b, s in shapes:
            errors = [r["error"] for r in rows if (r["batch"], r["seq"]) == (b, s) and "error" in r]
            cells.append(signed(max(errors, key=abs), 1) if errors else "not run")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def measure_section() -> list[str]:
    """`vramgui measure`: the instrument behind these tables, its GPU path and its cost."""
    lines = [
        "## `vramgui measure`",
        "",
        "The harness figures above come from the code `vramgui measure` runs (vramgui/measure):",
        "`vramgui measure SOURCE --device fake` puts the same measurement beside any estimate, and",
        "the window's Verify runs that command. Its CUDA path (`--device cuda`: the model built on",
        "the GPU, `torch.cuda.max_memory_allocated` / `max_memory_reserved`, NVML and the CUDA",
        "context per phase) is written and tested with a scripted allocator and NVML, but **has",
        "not been run on GPU hardware yet**: there is no CUDA column in these tables.",
        "",
    ]
    if not LIMITS.exists():
        return lines
    doc = json.loads(LIMITS.read_text(encoding="utf-8"))
    lines += [
        "### What a fake run costs on the largest models",
        "",
        f"`python -m benchmarks.measure_limits` on {doc['machine']}: the command in a fresh",
        "process (imports included), its run alone, and the process's peak host memory. Nothing",
        "is allocated for the model: its tensors are fake.",
        "",
        "| model | options | parameters | wall s | run s | host peak MiB | measured tensors GiB "
        "| estimate error | SDPA math-kernel calls |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["cases"]:
        if not isinstance(r["error"], float):
            lines.append(f"| {r['model']} | {r['options']} | failed: {r['error']} |")
            continue
        lines.append(
            f"| {r['model']} | {r['options']} | {r['parameters']:,} | {r['wall_seconds']} "
            f"| {r['run_seconds']} | {r['host_peak_rss_bytes'] / MiB:,.0f} "
            f"| {_gib(r['measured_tensor_bytes'])} | {signed(r['error'], 2)} "
            f"| {r['math_kernel_calls']} |"
        )
    lines += [
        "",
        "Where SDPA took its math kernel on the CPU (MLA's different q/k and v head sizes), the",
        "measured activations are the CPU kernel's fp32 scores, far above what CUDA's fused",
        "kernels hold: those errors are the CPU's, and the command says so in its notes.",
        "",
    ]
    return lines


# What benchmarks/perturbed_counts.py found before the table read these sizes (tools/
# build_architectures.py: OVERRIDES, DERIVED, UNLEARNED): type, attribute changed, the
# estimate's error then, what the estimate called itself then.
PERTURBED_FOUND = (
    ("deepseek_v32, glm_moe_dsa, sarvam_mla, minicpm3, axk2",
     "qk_rope_head_dim (rope width held at 64 or 32)", "-0.05% to -0.40%", "exact"),
    ("bailing_hybrid", "qk_rope_head_dim, short_conv_kernel_size", "-0.02%, -0.001%",
     "approximate (linear-attention state)"),
    ("hy_v4", "num_attention_heads (held at 32), qk_rope_head_dim", "-4.0%, +0.05%",
     "approximate (activations)"),
    ("mamba, falcon_mamba", "expand (intermediate_size held at 2 x width)", "-15.6%",
     "approximate (context)"),
    ("marian", "vocab_size (decoder embedding held at 58,101)", "-10.2%",
     "approximate (activations)"),
    ("moshi", "hidden_size, vocab_size (held at 4096, 32000)", "+43.0%, +4.3%",
     "approximate (KV projections)"),
    ("xlnet", "d_model (held at 1024, heads at 16 x 64)", "-25.1%",
     "approximate (context, KV projections)"),
    ("longcat_flash", "every size (zero experts counted as weights)", "+25.7% to +39.8%",
     "exact"),
    ("trocr", "cross_attention_hidden_size set (cross-attention keys and values held at "
     "d_model)", "+8.0%", "exact"),
    ("sarvam_mla, bailing_hybrid, kimi_linear",
     "q_lora_rank set (the low-rank query's tensors not in the entry)",
     "+1.06%, +0.08%, +0.09%", "exact, approximate (context), approximate (context)"),
    ("gpt_neo", "intermediate_size set (held at 4 x width)", "+85.6%",
     "approximate (activations)"),
)  # fmt: skip


def perturbed_counts_section() -> list[str]:
    """benchmarks/perturbed_counts.py's figures: each size of each type changed alone."""
    path = DATA / "perturbed_counts.json"
    if not path.exists():
        return []
    doc = json.loads(path.read_text())
    s = doc["summary"]
    found = s["constants"] + s["read_wrong"]
    lines = [
        "### One attribute changed at a time (benchmarks/perturbed_counts.py)",
        "",
        "`python -m benchmarks.perturbed_counts` (about two minutes on one core): each of the "
        f"{s['types']} table types' default config, cut to {doc['layers']} layers, with each "
        "integer attribute changed alone (nested ones included; a size the default leaves unset "
        "given one, a fraction that may size a tensor changed), counted by transformers "
        f"{doc['transformers']} on the meta device and estimated from config.json alone. A "
        "count that misses while the estimate holds the sizes it read sure (none defaulted, no "
        "per-layer pattern guessed) is a finding, whether the estimate calls itself exact or "
        f"approximate only for its KV cache or activations. {s['attributes']:,} attributes, "
        f"{s['moving']:,} of which move transformers' count ({s['unbuildable']} no value of "
        "which transformers builds alone).",
        "",
        f"Findings now: {found} ({s['silent']} called exact); {s['exact']} exact, "
        f"{s['approximate']} approximate, each miss among them approximate for the count "
        "itself. Before the table read them, 35 findings in 16 types, 22 of them called exact:",
        "",
        "| type | attribute changed | estimate before | called |",
        "|---|---|---:|---|",
        *(f"| {t} | {a} | {e} | {c} |" for t, a, e, c in PERTURBED_FOUND),
        "",
        "LongCat-Flash's default now counts 560,664,958,976 parameters, as transformers 5.25 and "
        "the published checkpoint (the table learned at 5.24 said 741,053,585,408, called "
        "exact). On the held-out configs of `tests/data/architectures/held_out.json` written "
        "without `head_dim` (a config.json that names only `qk_rope_head_dim`), the MLA types "
        "were off and sure of it before (deepseek_v32 -0.04%, glm_moe_dsa +0.04%, sarvam_mla "
        "-0.17%, minicpm3 -0.45% to -0.57%, axk2 -0.18% to -0.22%) and are exact now.",
        "",
    ]
    return lines


def document() -> str:
    inference = inference_rows()
    parts = [
        "# Accuracy",
        "",
        "Generated by `python -m benchmarks.accuracy --markdown`; do not edit by hand.",
        "",
        "Every estimate is checked against measurements, never against its own formulas:",
        "",
        "- **Harness** figures are the peak live tensor bytes (what `torch.cuda.max_memory_allocated`",
        "  reports) of real transformers models built from their config.json, run for real under",
        "  torch's FakeTensorMode on a CPU (vramgui/measure). Inference is a prefill of the",
        "  whole prompt plus one decode step, as `model.generate` runs them. The estimate compared",
        "  is `total_bytes - runtime_overhead`.",
        "- **Published** figures are engine logs and reports measured on GPUs",
        "  (benchmarks/data/published.json, sources listed there).",
        "- The rule of thumb beside each case is parameters x bytes per parameter x 1.2 for",
        "  inference; the training tables add accelerate's 8, the transformers docs' 18 bytes per",
        "  parameter and Hamel Husain's LoRA rule.",
        "",
        *table(inference, "Inference (harness, transformers)"),
        *table(decode_rows(), "generate's last step, the whole context cached (harness; --prompt)"),
        *architectures_section(),
        *parameter_counts_section(),
        *perturbed_counts_section(),
        *table(published_component_rows(), "Inference components (published engine figures)"),
        *vllm_logs.markdown_section(),
        *sglang_logs.markdown_section(),
        *gguf_table(gguf_rows()),
        *stored_formats.section(),
        *training_tables(),
        *measure_section(),
    ]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Estimate against measurement, case by case.")
    parser.add_argument("--markdown", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = document()
    print(text)
    if args.markdown:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
