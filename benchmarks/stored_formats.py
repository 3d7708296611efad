"""Stored bytes of pre-quantized checkpoints: config.json alone against what the libraries write.

Each case is a published model's config.json (from the bundled catalog) with the
``quantization_config`` its quantized release carries (the published one where the catalog has
it, else the library's usual recipe). What the checkpoint stores is built in
benchmarks/checkpoint_layouts.py from transformers' own module tree and each library's own tensor
names and dtypes, never from vramgui's code, and for gpt-oss it is the published total of its
model.safetensors.index.json. docs/accuracy.md shows the table (``section``);
tests/core/test_formats.py holds every case to it.

    .venv/bin/python -m benchmarks.stored_formats     # print the table (needs transformers)
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

from benchmarks import checkpoint_layouts as lay
from benchmarks.percent import signed
from vramgui.core import storage
from vramgui.sources.catalog import find
from vramgui.sources.resolve import load_model

# model.safetensors.index.json "total_size" of the published checkpoints.
PUBLISHED = {"gpt-oss-120b": 65_248_815_744, "gpt-oss-20b": 13_761_264_768}
PUBLISHED_SOURCE = "https://huggingface.co/openai/{name}/blob/main/model.safetensors.index.json"

# Where each layout is defined (the code checkpoint_layouts.py follows).
DEFINITIONS = {
    "mxfp4": "transformers integrations/mxfp4.py (Mxfp4GptOssExperts), the published index",
    "fp8": "transformers integrations/finegrained_fp8.py (FP8Linear, FP8Experts)",
    "fbgemm": "transformers integrations/fbgemm_fp8.py (FbgemmFp8Linear)",
    "ct": "compressed-tensors compressors/quantized_compressors (pack, float, int, nvfp4) and "
    "quantization/lifecycle/initialize.py",
    "modelopt": "vLLM model_executor/layers/quantization/modelopt.py (create_weights)",
    "awq": "AutoAWQ WQLinear_GEMM (qweight, qzeros, scales)",
    "gptq": "GPTQ QuantLinear (qweight, qzeros, scales, g_idx)",
    "bnb": "bitsandbytes Params4bit / QuantState.as_dict(packed=True), Int8Params (SCB)",
}

QWEN3_MOE_IGNORE = ["lm_head", "re:.*mlp.gate$"]
# Qwen/Qwen3-30B-A3B-FP8's modules_to_not_convert names, per layer, its norms and router.
QWEN3_30B_FP8 = ["lm_head"] + [
    f"model.layers.{n}.{m}"
    for n in range(48)
    for m in ("input_layernorm", "mlp.gate", "post_attention_layernorm")
]


def _ct(weights: dict, *, fmt: str, ignore: list[str], acts: dict | None = None) -> dict:
    group = {"weights": weights, "targets": ["Linear"]}
    if acts is not None:
        group["input_activations"] = acts
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "config_groups": {"group_0": group},
        "ignore": ignore,
    }


W4A16 = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}
FP8_DYNAMIC = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"}
INT8 = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"}
NVFP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
DYNAMIC_TOKEN = {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}

# (id, catalog model, quantization_config, hf_quant_config, layout, rule, options)
CASES = [
    ("mxfp4-gpt-oss-20b", "gpt-oss-20b", None, None, None, None, {"mxfp4": True}),
    ("mxfp4-gpt-oss-120b", "gpt-oss-120b", None, None, None, None, {"mxfp4": True}),
    (
        "fp8-block-qwen3-8b",
        "qwen3-8b",
        {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
        None,
        lay.fine_grained_fp8((128, 128)),
        lay.transformers_rule([]),
        {},
    ),
    (
        "fp8-block-qwen3-30b-a3b",
        "qwen3-30b-a3b",
        {
            "quant_method": "fp8",
            "activation_scheme": "dynamic",
            "weight_block_size": [128, 128],
            "modules_to_not_convert": QWEN3_30B_FP8,
        },
        None,
        lay.fine_grained_fp8((128, 128)),
        lay.transformers_rule(QWEN3_30B_FP8),
        {},
    ),
    (
        "fp8-block-ue8m0-deepseek-v2-lite",
        "deepseek-v2-lite",
        {"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"},
        None,
        lay.fine_grained_fp8((128, 128), scale="F8_E8M0"),
        lay.transformers_rule(["mlp.gate"]),
        {},
    ),
    (
        "fp8-tensor-static-mistral-7b-v0.3",
        "mistral-7b-v0.3",
        {"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": None},
        None,
        lay.fine_grained_fp8(None, static=True),
        lay.transformers_rule([]),
        {},
    ),
    (
        "fp8-tensor-static-llama-3.1-8b",
        "llama-3.1-8b",
        {"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": None},
        None,
        lay.fine_grained_fp8(None, static=True),
        lay.transformers_rule([]),
        {},
    ),
    (
        "fbgemm-llama-3.1-8b",
        "llama-3.1-8b",
        {"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["model.layers.0.mlp"]},
        None,
        lay.fbgemm_fp8,
        lay.transformers_rule(["model.layers.0.mlp"]),
        {},
    ),
    (
        "fbgemm-llama-3.1-70b",
        "llama-3.1-70b",
        {"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["model.layers.79.mlp"]},
        None,
        lay.fbgemm_fp8,
        lay.transformers_rule(["model.layers.79.mlp"]),
        {},
    ),
    *(
        (
            f"ct-fp8-dynamic-{name}",
            name,
            _ct(FP8_DYNAMIC, fmt="float-quantized", ignore=["lm_head"], acts={"dynamic": True}),
            None,
            lay.ct_fp8("channel"),
            lay.compressed_tensors_rule(["Linear"], ["lm_head"]),
            {},
        )
        for name in ("llama-3.1-8b", "qwen2.5-7b")
    ),
    *(
        (
            f"ct-w4a16-{name}",
            name,
            _ct(W4A16, fmt="pack-quantized", ignore=["lm_head"]),
            None,
            lay.ct_packed(4, 128),
            lay.compressed_tensors_rule(["Linear"], ["lm_head"]),
            {},
        )
        for name in ("llama-3.1-8b", "qwen2.5-14b")
    ),
    (
        "ct-w4a16-g32-asym-actorder-qwen3-30b-a3b",
        "qwen3-30b-a3b",
        _ct(
            {**W4A16, "group_size": 32, "symmetric": False, "actorder": "group"},
            fmt="pack-quantized",
            ignore=QWEN3_MOE_IGNORE,
        ),
        None,
        lay.ct_packed(4, 32, symmetric=False, actorder=True),
        lay.compressed_tensors_rule(["Linear"], QWEN3_MOE_IGNORE),
        {},
    ),
    *(
        (
            f"ct-w8a8-{name}",
            name,
            _ct(INT8, fmt="int-quantized", ignore=["lm_head"], acts=DYNAMIC_TOKEN),
            None,
            lay.ct_int8,
            lay.compressed_tensors_rule(["Linear"], ["lm_head"]),
            {},
        )
        for name in ("llama-3.2-3b", "qwen2.5-7b")
    ),
    *(
        (
            f"ct-nvfp4-{name}",
            name,
            _ct(
                NVFP4, fmt="nvfp4-pack-quantized", ignore=ignore, acts={**NVFP4, "dynamic": "local"}
            ),
            None,
            lay.ct_nvfp4,
            lay.compressed_tensors_rule(["Linear"], ignore),
            {},
        )
        for name, ignore in (("llama-3.1-8b", ["lm_head"]), ("qwen3-30b-a3b", QWEN3_MOE_IGNORE))
    ),
    *(
        (
            f"modelopt-nvfp4-{name}",
            name,
            None,
            {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ex}},
            lay.modelopt_nvfp4,
            lay.modelopt_rule(ex),
            {},
        )
        for name, ex in (
            ("llama-3.1-8b", ["lm_head"]),
            ("qwen3-30b-a3b", ["lm_head", "*mlp.gate"]),
        )
    ),
    *(
        (
            f"modelopt-fp8-{name}",
            name,
            {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]},
            None,
            lay.modelopt_fp8,
            lay.modelopt_rule(["lm_head"]),
            {},
        )
        for name in ("llama-3.1-8b", "qwen2.5-7b")
    ),
    *(
        (
            f"awq-{name}",
            name,
            {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
            None,
            lay.awq(128),
            lay.decoder_only,
            {},
        )
        for name in ("qwen2.5-7b", "llama-3.1-8b")
    ),
    *(
        (
            f"gptq-{name}",
            name,
            {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True},
            None,
            lay.gptq(4, 128),
            lay.decoder_only,
            {},
        )
        for name in ("qwen2.5-7b", "mistral-7b-v0.3")
    ),
    *(
        (
            f"bnb-nf4-{name}",
            name,
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            None,
            lay.bnb_4bit("nf4", double_quant=True),
            lay.transformers_rule([]),
            {},
        )
        for name in ("llama-3.1-8b", "mistral-7b-v0.3")
    ),
    *(
        (
            f"bnb-int8-{name}",
            name,
            {"quant_method": "bitsandbytes", "load_in_8bit": True},
            None,
            lay.bnb_int8,
            lay.transformers_rule([]),
            {},
        )
        for name in ("llama-3.2-1b", "qwen2.5-3b")
    ),
]


def config_of(case) -> dict:
    _, name, qc, _, _, _, _ = case
    config = copy.deepcopy(find(name).config)
    if qc is not None:
        config["quantization_config"] = qc
    return config


def expected_tensors(case) -> lay.Tensors:
    _, _, _, _, layout, rule, options = case
    config = config_of(case)
    if options.get("mxfp4"):
        ignore = config["quantization_config"]["modules_to_not_convert"]
        return lay.checkpoint(
            config,
            lambda m, o, i: {},
            lay.transformers_rule(ignore),
            experts_only=True,
            fused_experts=True,
        )
    return lay.checkpoint(config, layout, rule)


def write_config(folder: Path, case) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config_of(case)))
    if case[3] is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(case[3]))
    return folder


def format_of(case: tuple) -> str:
    """The format a case checks ("ct-w4a16", "fp8-block"), its variants ("-g32-asym") aside."""
    return "-".join(case[0].removesuffix("-" + case[1]).split("-")[:2])


def rows() -> list[dict]:
    """Each case: the checkpoint's bytes, the estimate from config.json alone, the error."""
    import tempfile

    out = []
    for case in CASES:
        stored = lay.total_bytes(expected_tensors(case))
        with tempfile.TemporaryDirectory() as tmp:
            folder = write_config(Path(tmp) / "m", case)
            spec = load_model(str(folder / "config.json")).spec
        estimate = storage.weight_bytes(spec, "bf16", "none")
        published = PUBLISHED.get(case[1])
        out.append(
            {
                "case": case[0],
                "model": find(case[1]).hub_id,
                "format": storage.format_label(spec, "bf16"),
                "stored": published or stored,
                "estimate": estimate,
                "error": estimate / (published or stored) - 1,
                "source": PUBLISHED_SOURCE.format(name=case[1])
                if published
                else DEFINITIONS[case[0].split("-")[0]],
            }
        )
    return out


def section() -> list[str]:
    """The docs/accuracy.md table."""
    found = rows()
    lines = [
        "### Pre-quantized checkpoints: stored bytes from config.json alone",
        "",
        "The weights each format stores, against the estimate from the model's config.json and "
        "its `quantization_config` alone (the catalog and config-only paths). Stored bytes are "
        "the published `total_size` of the checkpoint's model.safetensors.index.json where one "
        "was found (gpt-oss), else the bytes of the checkpoint the library writes, built from "
        "transformers' module tree and the library's own tensor names and dtypes "
        "(benchmarks/checkpoint_layouts.py, `python -m benchmarks.stored_formats`).",
        "",
        "Each case is the config.json of the model named, with the `quantization_config` of its "
        "quantized release (the published one for gpt-oss and the Qwen3 FP8 lists, the library's "
        "usual recipe otherwise).",
        "",
        "| case | config of | stored as | stored GB | estimate GB | error | source |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in found:
        lines.append(
            f"| {r['case']} | {r['model']} | {r['format']} | {r['stored'] / 1e9:,.3f} | "
            f"{r['estimate'] / 1e9:,.3f} | {signed(r['error'], 4)} | {r['source']} |"
        )
    worst = max(abs(r["error"]) for r in found)
    lines += [
        "",
        f"{len(found)} checkpoints, {len({r['case'].split('-')[0] for r in found})} libraries: "
        f"worst |error| {worst:.4%} (bitsandbytes' JSON quant state varies in length with its "
        "values; every other case is to the byte).",
        "",
    ]
    return lines


def main() -> int:
    print("\n".join(section()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
