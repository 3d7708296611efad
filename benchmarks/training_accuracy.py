"""Training accuracy: the training estimate against measured peak tensor memory, case by case.

Two sets. The harness's cases (benchmarks/data/measured_training.json: the second optimizer step
of real transformers models run by PyTorch on the CPU, peak live tensor bytes) are compared with
the estimate for the CPU (``device="cpu"``: CPU autocast's op lists and CPU dropout masks, see
``vramgui.core.training``); the cases run in both training loops (``loop``: Trainer, or the loop
that keeps ``outputs``) are also paired. The published GPU figures
(benchmarks/data/published.json, and benchmarks/data/published_training.json: LoRA and QLoRA
on one GPU and under FSDP) are compared with the estimate for CUDA. Beside each, the rules of
thumb: accelerate's 8 bytes per parameter, the transformers docs' 18, DeepSpeed's 16, and Hamel
Husain's LoRA rule.

    .venv/bin/python -m benchmarks.training_accuracy
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from benchmarks.harness.cases import PUBLISHED, load_config
from benchmarks.percent import signed
from vramgui.core import rules, storage
from vramgui.core.families import spec_from_config
from vramgui.core.training import training_estimate
from vramgui.core.units import GiB
from vramgui.core.workload import Workload, transformers_release
from vramgui.measure.compare import relative_error

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "data" / "measured_training.json"
# LoRA / QLoRA / FSDP figures published with their library versions (the project's own collection).
PUBLISHED_TRAINING = ROOT / "benchmarks" / "data" / "published_training.json"
CUSTOM_SUFFIX = "-custom"

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
    "transformers-version",
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


def workload_of(settings: dict, model_type: str, versions: dict | None = None) -> Workload:
    """The Workload of a case's settings (CLI option names), under the transformers release the
    case ran (``versions``, when it names one)."""
    data = {k: v for k, v in settings.items() if k in _SETTING_KEYS and v not in ("", None)}
    if versions and "transformers" in versions:
        data.setdefault("transformers-version", transformers_release(versions["transformers"]))
    if data.get("method", "full") != "full" and "lora-targets" not in data:
        data["lora-targets"] = _PEFT_DEFAULT_TARGETS[model_type]
    data["mode"] = "training"
    if data.get("method") == "qlora":
        # QLoRA's precision follows its recipe (the 4-bit base fixes it); a run's stated "pure"
        # only says that no autocast was asked for.
        data.pop("precision", None)
    return Workload.from_dict(data)


def _rules(spec, w: Workload, trainable: int) -> dict[str, int]:
    params = spec.parameters
    out = {
        "accelerate_8": rules.training_bytes_per_parameter(params, 8),
        "hf_docs_18": rules.training_bytes_per_parameter(params, 18),
        "deepspeed_16": rules.training_bytes_per_parameter(params, 16),
    }
    if w.method != "full":
        bits = storage.bits_per_weight(spec, w.dtype, w.quant if w.method == "qlora" else "none")
        base = storage.weight_bytes(spec, w.dtype, w.quant if w.method == "qlora" else "none")
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


def loop_rows(harness_rows: list[dict]) -> list[dict]:
    """Each case measured in the custom loop beside its Trainer twin: what keeping ``outputs``
    adds, measured and estimated."""
    by_id = {r["id"]: r for r in harness_rows}
    out = []
    for custom in harness_rows:
        trainer = by_id.get(custom["id"].removesuffix(CUSTOM_SUFFIX))
        if not custom["id"].endswith(CUSTOM_SUFFIX) or trainer is None:
            continue
        out.append(
            {
                "id": trainer["id"],
                "trainer": trainer["measured"],
                "custom": custom["measured"],
                "measured_extra": custom["measured"] - trainer["measured"],
                "estimated_extra": custom["estimate"] - trainer["estimate"],
                "error": custom["error"],
            }
        )
    return out


def _published_cases() -> list[tuple[dict, dict]]:
    """(case, config.json) of every published training case: the shared collection when it sits
    beside the checkout, and the project's own."""
    cases = json.loads(PUBLISHED.read_text())["cases"] if PUBLISHED.exists() else []
    cases += json.loads(PUBLISHED_TRAINING.read_text())["cases"]
    # The shared collection holds inference cases too (a GGUF's size), whose models it need not
    # carry a config.json for: only the training cases are read.
    return [(c, load_config(c["model"])) for c in cases if c["settings"].get("mode") == "training"]


def published_rows() -> list[dict]:
    """Published training cases with one figure: the CUDA estimate against it."""
    out = []
    for case, config in _published_cases():
        found = _published_measured(case)
        if found is None:
            continue
        measured, how = found
        spec = spec_from_config(config, case["model"])
        settings = dict(case["settings"])
        w = workload_of(settings, spec.facts.model_type, case.get("versions"))
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
                approximate=bool(case.get("unknown") or case.get("not_modelled")),
            )
        )
    return out


def resident_rows() -> list[dict]:
    """What a run still held once training returned (weights, adapters, optimizer states) against
    the estimate's weights + LoRA adapters + optimizer states: the 4-bit storage and its sharding
    checked apart from the activations."""
    out = []
    for case, config in _published_cases():
        after = case.get("also_reported", {}).get("allocated_after_training_bytes")
        if after is None:
            continue
        spec = spec_from_config(config, case["model"])
        w = workload_of(case["settings"], spec.facts.model_type, case.get("versions"))
        parts = training_estimate(spec, w).components
        held = sum(parts.get(k, 0) for k in ("weights", "lora_adapters", "optimizer_states"))
        # The alternative the figures should tell apart: the quant state divided like the codes.
        divided = held
        if w.method == "qlora" and w.data_parallel > 1 and (w.fsdp or w.zero == 3):
            state = _quant_state_bytes(spec, w)
            divided = held - state + state // w.data_parallel
        out.append(
            {
                "id": case["id"],
                "measured": after,
                "estimate": held,
                "error": relative_error(held, after),
                "if_divided": divided,
            }
        )
    return out


def _quant_state_bytes(spec, w: Workload) -> int:
    """The quant state (absmax, nested absmax, code table) of every 4-bit weight."""
    stored = storage.assign_storage(spec, w.dtype, w.quant)
    return sum(
        s.bytes - storage.bnb_4bit_packed_bytes(s.tensor.shape)
        for s in stored
        if s.storage == w.quant
    )


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
            f"| {r['id']} | {_fmt(r['measured'])} | {_fmt(r['estimate'])} "
            f"| {signed(r['error'], 2)} | {r['phase']} "
            f"| {_fmt(rl['accelerate_8'])} | {_fmt(rl['hf_docs_18'])} "
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


def loop_table(rows_: list[dict]) -> list[str]:
    """The two training loops side by side, case by case."""
    lines = [
        "### Training loops: Trainer and `outputs = model(**batch)` (harness, CPU)",
        "",
        "`loop` trainer is transformers' Trainer: `compute_loss` returns the loss alone, so the",
        "logits are freed before backward; the harness also runs its gradient clipping",
        "(`max_grad_norm` 1.0) and, in fp16 mixed precision, its GradScaler. `loop` custom is",
        "`outputs = model(**batch); loss = outputs.loss; loss.backward()` as tutorials and",
        "accelerate's examples write it: `outputs` lives until the next forward has returned, and",
        "under mixed precision holds the logits in fp32 (accelerate's `convert_outputs_to_fp32`",
        "wraps the forward; the harness runs that wrapper in both loops).",
        "",
        "| case | Trainer GiB | custom GiB | measured extra GiB | estimated extra GiB "
        "| custom error |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows_:
        lines.append(
            f"| {r['id']} | {_fmt(r['trainer'])} | {_fmt(r['custom'])} "
            f"| {_fmt(r['measured_extra'])} | {_fmt(r['estimated_extra'])} "
            f"| {signed(r['error'], 2)} |"
        )
    return [*lines, ""]


def resident_table(rows_: list[dict]) -> list[str]:
    """Weights, adapters and states held after training, published against estimated."""
    lines = [
        "### Held once training returned (published GPU figures)",
        "",
        "`torch.cuda.memory_allocated()` after `train()` against the estimate's weights + LoRA",
        "adapters + optimizer states: the 4-bit storage, and what FSDP divides of it, without",
        "the activations. The estimate keeps each 4-bit weight's quant state whole on every",
        "rank; the last column is the figure had FSDP divided it like the codes.",
        "",
        "| case | measured GiB | estimate GiB | error | quant state divided GiB | error |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows_:
        divided = r["if_divided"]
        alt = (
            f"{_fmt(divided)} | {signed(relative_error(divided, r['measured']), 2)}"
            if divided != r["estimate"]
            else "- | -"
        )
        lines.append(
            f"| {r['id']} | {_fmt(r['measured'])} | {_fmt(r['estimate'])} "
            f"| {signed(r['error'], 2)} | {alt} |"
        )
    return [*lines, ""]


# What the QLoRA / FSDP estimate follows and what the published figures could not settle; kept
# beside the tables it explains.
BNB_NOTES = (
    "### bitsandbytes 4-bit and FSDP, as the libraries behave",
    "",
    "- `BitsAndBytesConfig(load_in_4bit=True)` with nothing else set stores FP4 without double",
    "  quantization (`--quant fp4-nodq`) and computes in float32: QLoRA accepts `--dtype fp32`",
    "  for that compute dtype (inputs cast to fp32 for the 4-bit matmul, each weight",
    "  dequantized to fp32). QLoRA's recipe is `--quant nf4` (NF4, double quantization).",
    "  transformers before 5 loaded the modules left unquantized in fp16 when no dtype was",
    "  given; 5.x takes the checkpoint's dtype (`--dtype`).",
    "- transformers 4 holds a Mixtral / Qwen-MoE / DeepSeek block's experts as nn.Linear layers,",
    "  which bitsandbytes quantizes; transformers 5 stacks them into parameters it leaves in 16 bits",
    "  (fp32 after `prepare_model_for_kbit_training`). The fms-mixtral cases ran transformers 4.48",
    "  and are estimated under `--transformers-version 4.46` (each published case under the release",
    "  of its own transformers); under 5.0 they would read +372 %, +266 %, +173 % and +126 %.",
    "- bitsandbytes' 4-bit matmul keeps only the packed weight for backward since 0.43.2",
    "  (earlier versions also kept its input in the compute dtype): the estimate keeps none.",
    "- Single-GPU QLoRA follows `prepare_model_for_kbit_training`: embeddings, norms and head",
    "  upcast to fp32, adapters fp32. `--precision pure` is a script that never calls it",
    "  (Answer.AI's fsdp_qlora `train.py`): embeddings, norms and head stay in `--dtype`.",
    "- Sharded QLoRA (`--fsdp` or `--zero 3`): the 4-bit codes are stored as",
    "  `bnb_4bit_quant_storage` = `--dtype` and divided over the ranks with the other weights;",
    "  each weight's quant state (absmax, nested absmax) is an attribute every rank keeps",
    "  whole; FSDP gathers a layer's codes, not 16-bit copies; TRL skips",
    "  `prepare_model_for_kbit_training` for a sharded model and builds 16-bit adapters, so",
    "  embeddings, norms, head and adapters stay in `--dtype`.",
    "- The held figures on one GPU are below the estimate by what TRL 0.13 (the runs' version)",
    "  gives back after `prepare_model_for_kbit_training`: `peft_module_casting_to_bf16` casts",
    "  embeddings and head to bf16 again. Under FSDP they side with a quant state kept whole",
    "  on every rank, without settling it: the difference is a few percent of the 4-bit",
    "  weights. The shared collection's mistral-7b-qlora-nf4-bs4 dates from June 2024, before",
    "  bitsandbytes 0.43.2, when the 4-bit matmul still kept its input.",
    "- The peaks are above the estimate on one GPU and further above it under FSDP (most on",
    "  Llama-2-70B), for LoRA without quantization from the same runs as well: the runs used",
    "  `lora_dropout` 0.1, which the estimate leaves out (each targeted module keeps a mask and",
    "  a dropped copy of its input), and FSDP's own buffers beyond the gathered layers are not",
    "  modelled. No bitsandbytes run could be made here (it needs CUDA): these published",
    "  figures are the only check.",
    "",
    "### Trainer's extras and TRL",
    "",
    "- Gradient clipping (`max_grad_norm` 1.0): `clip_grad_norm_` computes one norm per",
    "  gradient tensor (`torch._foreach_norm` on CUDA), stacks them and scales the gradients in",
    "  place: a scalar per tensor, freed before the step. The fp16 GradScaler adds its scale,",
    "  growth tracker and one found-inf flag per device, and unscales in place. Both run in the",
    "  harness's trainer loop; neither changes a figure above.",
    "- TRL's SFTTrainer is not modelled. From 0.16 its `compute_loss` keeps the outputs for",
    "  its token accuracy, a contiguous copy of the shifted logits (fp32 under mixed",
    "  precision) made before backward, and from 1.0 also an entropy over the logits in chunks",
    "  of 128 rows; 1.16 computes the loss through a chunked, fused LM head that never builds",
    "  the logits and makes QLoRA adapters bf16 without `prepare_model_for_kbit_training`.",
    "  Since 1.0 `SFTConfig` turns on gradient checkpointing and bf16 by default: set them",
    "  here (`--grad-checkpointing`, `--dtype bf16`).",
    "",
)


def sections() -> list[str]:
    """docs/accuracy.md's training sections: harness, loops, published figures, QLoRA / FSDP."""
    harness = rows()
    published = published_rows()
    approximate = [r for r in published if r["approximate"]]
    notes = [
        f"{', '.join(r['id'] for r in approximate)}: conditions not all published or not all "
        "modelled (each case's `unknown` / `not_modelled` says which).",
        "",
    ]
    return [
        *table(harness, "Training (harness: second optimizer step, CPU)"),
        *loop_table(loop_rows(harness)),
        *table(published, "Training (published GPU figures)"),
        *(notes if approximate else []),
        *resident_table(resident_rows()),
        *BNB_NOTES,
    ]


def main() -> int:
    """Print the training sections."""
    print("\n".join(sections()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
