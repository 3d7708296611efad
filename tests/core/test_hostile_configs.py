"""Configs that once took gigabytes, minutes or a RecursionError before any size was checked:
a layer count repeated into a list, a string multiplied or formatted by the table's
expressions, ``int`` of infinity, per-layer lists of millions tested once per layer, lists nested
hundreds deep. Each runs in a child held to 1.5 GB (tests/bounded.py) and must end in a result
or a ConfigError that says what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.architecture_table import bare
from tests.bounded import run_bounded
from vramgui.core.errors import ConfigError
from vramgui.core.families import CLASSIC_TYPES, expressions, spec_from_config, table
from vramgui.core.families.expressions import MAX_RANGE, compile_expression

DATA = Path(__file__).resolve().parents[1] / "data" / "families"
# The config is Python source evaluated in the child (json for JSON's Infinity and deep lists).
_SPEC = """
import json
from vramgui.core.errors import ConfigError
from vramgui.core.families import spec_from_config

def nested(depth):
    return json.loads("[" * depth + "]" * depth)

QWEN3_MOE = json.loads(open("tests/data/families/configs.json").read())["Qwen/Qwen3-30B-A3B"]

try:
    spec = spec_from_config({config})
except ConfigError as exc:
    print(json.dumps({{"refused": str(exc)}}))
else:
    print(json.dumps({{"parameters": spec.parameters, "inventory": spec.inventory.value}}))
"""

REFUSED = {
    # amplification: a list, a string or an int() built before any size was checked
    "layer-types-of-2e8-layers": (
        "{'model_type': 'laguna', 'num_hidden_layers': 200_000_000}",
        "'num_hidden_layers' = 200,000,000 is implausibly large",
    ),
    "lfm2-of-2e8-layers": (
        "{'model_type': 'lfm2', 'num_hidden_layers': 200_000_000}",
        "'num_hidden_layers' = 200,000,000 is implausibly large",
    ),
    "text-config-of-2e8-layers": (
        "{'model_type': 'qwen2_5_vl', 'text_config': {'num_hidden_layers': 200_000_000}}",
        "'text_config.num_hidden_layers' = 200,000,000 is implausibly large",
    ),
    "string-head-count-times-head-dim": (
        "{'model_type': 'gemma4_text', 'num_attention_heads': 'abcdefgh', 'head_dim': 2**28}",
        "'num_attention_heads' must be a whole number, not 'abcdefgh'",
    ),
    "per-layer-config-of-2-62-layers": (
        "{'model_type': 'smollm3', 'num_hidden_layers': 2**62,"
        " 'per_layer_config': {'0': {'head_dim': 64}}}",
        "'num_hidden_layers' = 4,611,686,018,427,387,904 is implausibly large",
    ),
    "ffn-multiplier-1e308": (
        "{'model_type': 'lfm2', 'block_ffn_dim_multiplier': 1e308, 'block_auto_adjust_ff_dim': True}",
        "do not give a size of model.layers.0.feed_forward.w1.weight",
    ),
    "ffn-multiplier-infinity": (
        "{'model_type': 'lfm2', 'block_auto_adjust_ff_dim': True,"
        " 'block_ffn_dim_multiplier': json.loads('Infinity')}",
        "do not give a size of model.layers.0.feed_forward.w1.weight",
    ),
    # per-layer work over a list of millions
    "gemma4-head-dim-of-1m": (
        "{'model_type': 'gemma4_text', 'head_dim': [256] * 500_000 + [512] * 500_000}",
        "'head_dim' lists 1,000,000 entries, more than the model's 30 layers",
    ),
    "mlp-only-layers-of-2m": (
        "{'model_type': 'qwen3_next', 'mlp_only_layers': [-1] * 2_000_000,"
        " 'num_hidden_layers': 4000}",
        "'mlp_only_layers' lists 2,000,000 entries, more than the model's 4,000 layers",
    ),
    "classic-mlp-only-layers-of-2m": (
        "{**QWEN3_MOE, 'mlp_only_layers': [-1] * 2_000_000}",
        "'mlp_only_layers' lists 2,000,000 entries, more than the model's 48 layers",
    ),
    "moe-layers-of-2m": (
        "{'model_type': 'llama4_text', 'moe_layers': [-1] * 2_000_000, 'num_hidden_layers': 4000}",
        "'moe_layers' lists 2,000,000 entries, more than the model's 4,000 layers",
    ),
    "full-attn-idxs-of-2m": (
        "{'model_type': 'lfm2', 'full_attn_idxs': [-1] * 2_000_000, 'num_hidden_layers': 4000}",
        "'full_attn_idxs' lists 2,000,000 entries, more than the model's 4,000 layers",
    ),
    "layer-types-of-2m": (
        "{'model_type': 'laguna', 'layer_types': ['full_attention'] * 2_000_000}",
        "'layer_types' lists 2,000,000 entries, more than the model's 40 layers",
    ),
    "classic-list-nested-900-deep": (
        "{**QWEN3_MOE, 'mlp_only_layers': [nested(900)]}",
        "'mlp_only_layers' must be a list of whole numbers, not [[[[...]]]]",
    ),
}

ESTIMATED = {
    # as long as the layer count: every layer tested against a set, not the list
    "mlp-only-layers-of-4000": (
        "{'model_type': 'qwen3_next', 'mlp_only_layers': [-1] * 4000, 'num_hidden_layers': 4000}"
    ),
    "moe-layers-of-4000": (
        "{'model_type': 'llama4_text', 'moe_layers': [-1] * 4000, 'num_hidden_layers': 4000}"
    ),
    # nested hundreds deep: cleaned without recursion
    "unread-list-nested-900-deep": "{'model_type': 'smollm3', 'foo': nested(900)}",
    "read-list-nested-600-deep": "{'model_type': 'smollm3', 'no_rope_layers': nested(600)}",
    "sub-config-list-nested-990-deep": (
        "{'model_type': 'qwen2_5_vl', 'text_config': {'layer_types': nested(990)}}"
    ),
}


def _outcome(config: str) -> dict:
    return json.loads(run_bounded(_SPEC.format(config=config)).stdout)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_hostile_config_is_refused_with_its_reason(case):
    config, reason = REFUSED[case]
    outcome = _outcome(config)
    assert reason in outcome.get("refused", ""), outcome


@pytest.mark.parametrize("case", sorted(ESTIMATED))
def test_a_hostile_config_within_bounds_is_estimated(case):
    outcome = _outcome(ESTIMATED[case])
    assert outcome.get("parameters", 0) > 0, outcome


@pytest.mark.parametrize(
    ("text", "values", "error"),
    [
        ("['full_attention'] * n", {"n": MAX_RANGE + 1}, ValueError),
        ("x * n", {"x": "ab", "n": 3}, TypeError),
        ("x * n", {"x": [1, 2], "n": MAX_RANGE // 2 + 1}, ValueError),
        ("x * n", {"x": [1], "n": 2.0}, TypeError),
        ("x % n", {"x": "%05d", "n": 3}, TypeError),
        ("x + y", {"x": "a", "y": "b"}, TypeError),
        ("x + y", {"x": [1], "y": [2]}, TypeError),
        ("int(x)", {"x": float("inf")}, ValueError),
        ("int(x)", {"x": float("nan")}, ValueError),
        ("int(x)", {"x": "12"}, TypeError),
    ],
)
def test_expressions_refuse_what_a_config_could_amplify(text, values, error):
    with pytest.raises(error):
        compile_expression(text)(values, ())


def test_expressions_keep_their_arithmetic():
    values = {"n": 3, "h": 64.0, "k": 7}
    assert compile_expression("['a'] * n")(values, ()) == ["a", "a", "a"]
    assert compile_expression("int(2 * h / 3) + k % 4")(values, ()) == 45
    assert compile_expression("[48] * n")(values, ()) == [48, 48, 48]


def test_member_list_answers_as_the_list_does():
    layers = expressions.MemberList([3, 5, [1], "x"])
    assert 5 in layers and "x" in layers and [1] in layers and 4 not in layers
    hashable = expressions.MemberList([3, 5])
    assert 3 in hashable and [3] not in hashable
    assert hashable == [3, 5] and json.dumps(hashable) == "[3, 5]"


def test_a_pattern_may_outnumber_a_tiny_models_layers():
    """RecurrentGemma's block pattern is three long; a two-layer test model keeps it."""
    spec = spec_from_config(
        {
            "model_type": "recurrent_gemma",
            "num_hidden_layers": 2,
            "block_types": ["recurrent", "recurrent", "attention"],
        }
    )
    assert spec.facts.num_layers == 2


def test_a_message_shows_a_bounded_value():
    qwen3_moe = json.loads((DATA / "configs.json").read_text())["Qwen/Qwen3-30B-A3B"]
    with pytest.raises(ConfigError) as caught:
        spec_from_config({**qwen3_moe, "mlp_only_layers": ["x" * 1000] * 30})
    assert len(str(caught.value)) < 200


_CORE_SIZES = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "head_dim",
    "vocab_size",
    "num_key_value_heads",
)
# Sizes a classic family's model never reads (MLA's head sizes have names of their own; GPT
# BigCode's single key/value head follows multi_query): a config may say anything there.
_UNREAD = {("deepseek_v3", "head_dim"), ("gpt_bigcode", "num_key_value_heads")}


@pytest.mark.parametrize("key", sorted(table._table()["architectures"]))
def test_every_architecture_refuses_a_core_size_of_zero(key):
    """Each core size the table's entry sets (the model's or its text_config's), given as 0 or as
    a string, is refused with its name, as the classic families refuse it."""
    model_type, _, class_name = key.partition(":")
    arch = table.architecture(model_type, class_name)
    checked = 0
    for name in _CORE_SIZES:
        for sub in ("", "text_config"):
            if f"{sub}.{name}".lstrip(".") not in arch.defaults or (model_type, name) in _UNREAD:
                continue
            for bad in (0, "4096"):
                config = dict(bare(key), **({sub: {name: bad}} if sub else {name: bad}))
                # The classic families word it their own way (a head count, a derived size).
                said = None if model_type in CLASSIC_TYPES else rf"'{sub}\.?{name}' must be"
                with pytest.raises(ConfigError, match=said):
                    spec_from_config(config)
                checked += 1
    assert checked


_LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 1000,
}


def _ct(**weights) -> dict:
    group = {"targets": ["Linear"], "weights": weights}
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": group}}


QUANTIZATION = {
    "block-of-zeros": (
        _ct(num_bits=8, type="float", strategy="block", block_structure=[0, 0]),
        "'block_structure[0]'",
    ),
    "block-of-strings": (
        _ct(num_bits=8, type="float", strategy="block", block_structure=["128", "x"]),
        "'block_structure[0]'",
    ),
    "block-of-nan": (
        _ct(num_bits=8, type="float", strategy="block", block_structure=[128, float("nan")]),
        "'block_structure[1]'",
    ),
    "block-of-infinity": (
        _ct(num_bits=8, type="float", strategy="block", block_structure=[float("inf"), 128]),
        "'block_structure[0]'",
    ),
    "num-bits-2-62": (_ct(num_bits=2**62, strategy="group", group_size=128), "'num_bits'"),
    "negative-num-bits": (_ct(num_bits=-4, strategy="group", group_size=128), "'num_bits'"),
    "group-strategy-of-group-size-1": (
        _ct(num_bits=4, strategy="group", group_size=-1),
        "'group_size'",
    ),
    "modelopt-nvfp4-group-size-1": (
        {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": -1},
        "'group_size'",
    ),
    "gptq-negative-bits": ({"quant_method": "gptq", "bits": -3}, "'bits'"),
    "fp8-block-of-zeros": (
        {"quant_method": "fp8", "weight_block_size": [0, 0]},
        "'weight_block_size[0]'",
    ),
}


@pytest.mark.parametrize("case", sorted(QUANTIZATION))
def test_a_hostile_quantization_config_is_refused_as_model_and_as_draft(case, tmp_path, capsys):
    """Values that sized weights in negative bytes or raised ZeroDivision / Overflow errors end
    in one message naming the field, exit 2, for the model and for a speculative draft alike."""
    from vramgui.cli import main

    quantization, field = QUANTIZATION[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_LLAMA, "quantization_config": quantization}))
    for argv in (
        ["estimate", str(path), "--json"],
        ["estimate", "smollm-135m", "--engine", "vllm", "--speculative-model", str(path), "--json"],
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and f"quantization_config's {field} must be a whole number" in err
