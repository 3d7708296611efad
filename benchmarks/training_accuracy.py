"""Training accuracy: the training estimate against measured peak tensor memory, case by case.

Two sets. The harness's cases (benchmarks/data/measured_training.json: the second optimizer step
of real transformers models run by PyTorch on the CPU, peak live tensor bytes) are compared with
the estimate for the CPU (``device="cpu"``: CPU autocast's op lists and CPU dropout masks, see
``vramgui.core.training``). The published GPU figures (../shared/validation/published.json) are
compared with the estimate for CUDA. Beside each, the rules of thumb: accelerate's 8 bytes per
parameter, the transformers docs' 18, DeepSpeed's 16, and Hamel Husain's LoRA rule.

    .venv/bin/python -m benchmarks.training_accuracy
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from benchmarks.harness.cases import PUBLISHED, load_config
from vramgui.core import dtypes, rules
from vramgui.core.families import spec_from_config
from vramgui.core.training import training_estimate
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.measure.compare import relative_error

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "data" / "measured_training.json"

_SETTING_KEYS = {
    "batch",
    "seq",
    "dtype",
    "quant",
    "attention",
    "method",
    "precision",
    "optimizer",
    "grad-checkpointing",
    "lora-rank",
    "lora-targets",
    "grad-accum",
    "gpus",
    "zero",
    "fsdp",
    "tp",
    "pp",
    "loop",
}
# peft's default targets when a case names none (the harness then lets peft choose).
_PEFT_DEFAULT_TARGETS = {
    "llama": "q_proj,v_proj",
    "mistral": "q_proj,v_proj",
    "qwen2": "q_proj,v_proj",
    "gpt2": "c_attn",
    "opt": "q_proj,v_proj",
    "gpt_neox": "query_key_value",
    "bloom": "query_key_value",
    "falcon": "query_key_value",
    "bert": "query,value",
}


def workload_of(settings: dict, model_type: str) -> Workload:
    """The Workload of a case's settings (CLI option names)."""
    data = {k: v for k, v in settings.items() if k in _SETTING_KEYS and v not in ("", None)}
    if data.get("method", "full") != "full" and "lora-targets" not in data:
        data["lora-targets"] = _PEFT_DEFAULT_TARGETS[model_type]
    data["mode"] = "training"
    return Workload.from_dict(data)


def _rules(spec, w: Workload, trainable: int) -> dict[str, int]:
    params = spec.parameters
    out = {
        "accelerate_8": rules.training_bytes_per_parameter(params, 8),
        "hf_docs_18": rules.training_bytes_per_parameter(params, 18),
        "deepspeed_16": rules.training_bytes_per_parameter(params, 16),
    }
    if w.method != "full":
        bits = dtypes.bits_per_weight(spec, w.dtype, w.quant if w.method == "qlora" else "none")
        base = dtypes.weight_bytes(spec, w.dtype, w.quant if w.method == "qlora" else "none")
        out["hamel_lora"] = rules.lora_rule(base, trainable, bits)
    return out


def _row(
    case_id: str, measured: int, spec, w: Workload, device: str, autocast: str, **extra: object
) -> dict:
    est = training_estimate(spec, w, device=device, autocast_rules=autocast)
    row = {
        "id": case_id,
        "measured": measured,
        "estimate": est.total_bytes,
        "error": relative_error(est.total_bytes, measured),
        "phase": est.phase,
        "components": est.components,
        "rules": _rules(spec, w, est.trainable_parameters),
    }
    row.update(extra)
    return row


def _autocast_rules(record: dict) -> str:
    """The autocast float32 list a record was measured under: the harness's first version ran
    plain CPU autocast, the current one adds CUDA's rules (its note says which)."""
    return "cuda" if "float32 rules" in record.get("notes", "") else "cpu"


def rows() -> list[dict]:
    """Harness cases: id, measured, estimate, error, phase (estimated and measured), rules."""
    records = json.loads(MEASURED.read_text())["cases"]
    out = []
    for rec in records:
        spec = spec_from_config(load_config(rec["config"]), rec["model"])
        w = workload_of(rec["settings"], spec.facts.model_type)
        out.append(
            _row(
                rec["id"],
                rec["peak_bytes"],
                spec,
                w,
                "cpu",
                _autocast_rules(rec),
                measured_phase=rec["phase"],
            )
        )
    return out


def _published_measured(case: dict) -> tuple[int, str] | None:
    """Peak tensor bytes of a published case and how it was obtained, or None if unknown."""
    measured = case["measured"]
    if measured["what"] == "peak_allocated":
        return measured["bytes"], "peak_allocated"
    if measured["what"] == "device_used" and "bytes" in measured:
        # "about 1343 MB is the CUDA context" on the stated stack.
        context = 1343 * 2**20
        return measured["bytes"] - context, "device_used - 1343 MB context"
    return None


def published_rows() -> list[dict]:
    """published.json training cases with one figure: the CUDA estimate against it."""
    doc = json.loads(PUBLISHED.read_text())
    out = []
    for case in doc["cases"]:
        if case["settings"].get("mode") != "training":
            continue
        found = _published_measured(case)
        if found is None:
            continue
        measured, how = found
        spec = spec_from_config(doc["models"][case["model"]], case["model"])
        settings = dict(case["settings"])
        if settings.get("method") == "qlora":
            settings.setdefault("precision", "pure")
        w = workload_of(settings, spec.facts.model_type)
        out.append(
            _row(
                case["id"],
                measured,
                spec,
                w,
                "cuda",
                "cuda",
                measured_phase="",
                how=how,
                approximate=bool(case.get("unknown")),
            )
        )
    return out


def _fmt(n: float) -> str:
    return f"{n / GiB:,.2f}"


def table(rows_: list[dict], title: str) -> list[str]:
    """A markdown table of ``rows_`` with the rules of thumb beside the estimate."""
    lines = [
        f"### {title}",
        "",
        "| case | measured GiB | estimate GiB | error | phase | 8 B/param | 18 B/param "
        "| 16 B/param | LoRA rule |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows_:
        rl = r["rules"]
        lora = rl.get("hamel_lora")
        lines.append(
            f"| {r['id']} | {_fmt(r['measured'])} | {_fmt(r['estimate'])} | {r['error']:+.2%} "
            f"| {r['phase']} | {_fmt(rl['accelerate_8'])} | {_fmt(rl['hf_docs_18'])} "
            f"| {_fmt(rl['deepspeed_16'])} | {_fmt(lora) if lora else '-'} |"
        )
    errors = [abs(r["error"]) for r in rows_]
    if errors:
        lines += [
            "",
            f"{len(rows_)} cases: median |error| {statistics.median(errors):.2%}, "
            f"worst {max(errors):.2%}.",
            "",
        ]
    return lines


def main() -> int:
    """Print both tables."""
    print("\n".join(table(rows(), "Training (harness, CPU)")))
    published = published_rows()
    print("\n".join(table(published, "Training (published GPU figures)")))
    for r in published:
        if r["approximate"]:
            print(f"{r['id']}: approximate ({r['how']}; conditions not all published)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
