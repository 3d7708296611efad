"""What a QLoRA setup of a mixture-of-experts model holds, loaded by the libraries themselves.

Each case is a small random model of a MoE architecture, saved in bf16 and loaded back the way
QLoRA recipes load it: transformers' ``from_pretrained`` with ``BitsAndBytesConfig`` (nf4, double
quantization, bf16 compute), peft's ``prepare_model_for_kbit_training`` and ``get_peft_model``
with ``target_modules="all-linear"``. What the loaded model holds is counted tensor by tensor:
the 4-bit codes and their quant state (``Params4bit`` and its ``QuantState``), every other
parameter by dtype, the adapters peft added, and the copies of the expert stacks one forward
saves for backward. transformers 5 holds a MoE block's experts as
stacked 3-D parameters, which bitsandbytes (it replaces ``nn.Linear`` layers) leaves in 16 bits
and ``prepare_model_for_kbit_training`` then upcasts to fp32; peft adapts the stacked experts and
the router of the MoE types transformers converts from per-expert checkpoints
(``transformers_weight_conversion``), the gate and up projections fused with twice the rank,
and folds each LoRA delta into a copy of the stack at every forward (``ParamWrapper``).

The counts are written to benchmarks/data/qlora_moe.json with the library versions;
tests/core/test_training_qlora_moe.py holds vramgui's QLoRA estimate to them (no bitsandbytes
needed there).

    PYTHONPATH=/path/to/bitsandbytes .venv/bin/python -m benchmarks.qlora_moe --write

Needs transformers, peft and bitsandbytes (which runs 4-bit on the CPU from 0.48 on).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "qlora_moe.json"

_COMMON = {"vocab_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2}
# (id, model_type, config values, LoRA rank)
CASES: list[tuple[str, str, dict[str, Any], int]] = [
    (
        "mixtral-small",
        "mixtral",
        {**_COMMON, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
         "num_local_experts": 4, "num_experts_per_tok": 2},
        8,
    ),
    (
        "mixtral-wider",
        "mixtral",
        {**_COMMON, "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 3,
         "num_local_experts": 8, "num_experts_per_tok": 2},
        16,
    ),
    (
        "qwen3-moe-small",
        "qwen3_moe",
        {**_COMMON, "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128,
         "num_hidden_layers": 2, "num_experts": 8, "num_experts_per_tok": 2, "head_dim": 32},
        8,
    ),
    (
        "qwen3-moe-wider",
        "qwen3_moe",
        {**_COMMON, "hidden_size": 512, "intermediate_size": 1024, "moe_intermediate_size": 256,
         "num_hidden_layers": 3, "num_experts": 16, "num_experts_per_tok": 4, "head_dim": 64},
        16,
    ),
    (
        "gpt-oss-small",
        "gpt_oss",
        {**_COMMON, "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 2,
         "num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 32,
         "layer_types": ["sliding_attention", "full_attention"]},
        8,
    ),
]  # fmt: skip


def measure(model_type: str, values: dict[str, Any], rank: int) -> dict[str, Any]:
    """Load the model as QLoRA recipes do and count what it holds."""
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    config = transformers.AutoConfig.for_model(model_type, **values)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        loaded = transformers.AutoModelForCausalLM.from_pretrained(
            folder,
            quantization_config=transformers.BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16,
            ),
            dtype=torch.bfloat16,
            device_map="cpu",
        )
    loaded = prepare_model_for_kbit_training(loaded, use_gradient_checkpointing=False)
    peft_model = get_peft_model(loaded, LoraConfig(r=rank, target_modules="all-linear"))
    codes = state = 0
    other: dict[str, int] = {}
    experts = 0
    trainable = 0
    for name, param in peft_model.named_parameters():
        if param.requires_grad:
            trainable += param.numel()
            continue
        if type(param).__name__ == "Params4bit":
            codes += param.numel() * param.element_size()
            packed = param.quant_state.as_dict(packed=True)
            state += sum(t.numel() * t.element_size() for t in packed.values())
            continue
        key = str(param.dtype).removeprefix("torch.")
        other[key] = other.get(key, 0) + param.numel() * param.element_size()
        if ".experts." in name:
            experts += param.numel() * param.element_size()
    return {
        "folded_expert_copies_bytes": _folded_copies(peft_model, config.vocab_size),
        "four_bit_codes_bytes": codes,
        "quant_state_bytes": state,
        "other_bytes_by_dtype": other,
        "expert_bytes": experts,
        "trainable_parameters": trainable,
    }


def _folded_copies(model: Any, vocab: int) -> int:
    """Bytes of the expert-stack-sized tensors one forward saves for backward that are not the
    parameters themselves: the copies peft's ParamWrapper folds its LoRA deltas into."""
    import torch

    stacks = {
        (tuple(sorted(p.shape)), p.dtype)
        for name, p in model.named_parameters()
        if p.dim() == 3 and ".experts." in name
    }
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if (tuple(sorted(t.shape)), t.dtype) in stacks and storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, vocab, (1, 32), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(saved.values())


def run() -> dict[str, Any]:
    import bitsandbytes
    import peft
    import torch
    import transformers

    return {
        "about": (
            "What a QLoRA setup of small MoE models holds, loaded by transformers + bitsandbytes "
            "(nf4, double quantization, bf16 compute), peft's prepare_model_for_kbit_training and "
            "get_peft_model(target_modules='all-linear'); written by benchmarks/qlora_moe.py"
        ),
        "versions": {
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "bitsandbytes": bitsandbytes.__version__,
            "torch": torch.__version__,
        },
        "cases": [
            {
                "id": case,
                "model_type": mt,
                "config": values,
                "lora_rank": rank,
                "measured": measure(mt, values, rank),
            }
            for case, mt, values, rank in CASES
        ],
    }


def main(argv: list[str] | None = None) -> int:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {DATA.name}")
    args = parser.parse_args(argv)
    doc = run()
    text = json.dumps(doc, indent=2) + "\n"
    if args.write:
        DATA.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
