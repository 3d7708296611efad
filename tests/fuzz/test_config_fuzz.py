"""config.json from anywhere: arbitrary JSON-like dicts and mutated real configs.

``spec_from_config`` (and the estimate of what it returns) may refuse a config only with a
``ConfigError`` or another vramgui error, never hang, and never build an inventory the size of a
lying field (10^12 layers, a 10^15-wide hidden size).
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, parse_safely
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.workload import Workload
from vramgui.sources.local import parse_config

DATA = Path(__file__).resolve().parents[1] / "data" / "families"
REAL = {
    **json.loads((DATA / "configs.json").read_text(encoding="utf-8")),
    **json.loads((DATA / "tiny_configs.json").read_text(encoding="utf-8")),
}
KEYS = sorted({key for config in REAL.values() for key in config})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from((0, 1, -1, 10**12, 10**15, 2**63)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=20,
)


def build_and_estimate(config: object) -> None:
    spec = spec_from_config(config)  # type: ignore[arg-type]
    assert spec.parameters >= 0
    estimate(spec, Workload(seq=min(128, spec.facts.max_position_embeddings or 128)))


@FUZZ
@given(config=st.dictionaries(st.sampled_from(KEYS), json_values, max_size=12))
def test_arbitrary_dicts_of_config_keys(config: dict) -> None:
    parse_safely(lambda: build_and_estimate(config))


@FUZZ
@given(
    name=st.sampled_from(sorted(REAL)),
    changes=st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4),
    dropped=st.sets(st.sampled_from(KEYS), max_size=4),
)
@example(name="meta-llama/Llama-3.1-8B", changes={"num_hidden_layers": 10**12}, dropped=set())
@example(name="meta-llama/Llama-3.1-8B", changes={"hidden_size": 10**15}, dropped=set())
@example(name="mistralai/Mixtral-8x7B-v0.1", changes={"num_local_experts": 10**9}, dropped=set())
@example(
    name="meta-llama/Llama-3.1-8B", changes={"layer_types": ["full_attention"] * 3}, dropped=set()
)
@example(name="google/gemma-2-9b", changes={"num_attention_heads": 0}, dropped=set())
@example(name="deepseek-ai/DeepSeek-V3", changes={"n_routed_experts": 10**7}, dropped=set())
def test_mutated_real_configs(name: str, changes: dict, dropped: set) -> None:
    config = {k: v for k, v in REAL[name].items() if k not in dropped}
    config.update(changes)
    parse_safely(lambda: build_and_estimate(config))


@FUZZ
@given(value=json_values)
def test_anything_that_is_not_a_dict(value: object) -> None:
    parse_safely(lambda: build_and_estimate(value))


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.builds(json.dumps, json_values)))
@example(text="[" * 100_000)
@example(text='{"a": ' * 50_000)
@example(text="1e999999")
def test_config_text(text: str) -> None:
    parse_safely(lambda: build_and_estimate(parse_config(text, "config.json")))
