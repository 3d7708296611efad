"""Pre-quantized checkpoints, from config.json alone, weigh what they store.

The cases and the checkpoints the libraries write for them are benchmarks/stored_formats.py's
(built from transformers' module tree and each library's own tensor names and dtypes, never from
vramgui's code); every format is checked at two sizes or more, and the gpt-oss checkpoints
against their published totals. A header-only safetensors checkpoint of each format, written from
the same tensor list, must agree with the config-only estimate.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from benchmarks import checkpoint_layouts as lay
from benchmarks.stored_formats import (
    CASES,
    PUBLISHED,
    expected_tensors,
    format_of,
    write_config,
)
from tests.fakehub.files import write_sparse_safetensors
from vramgui.core import storage
from vramgui.sources.catalog import find
from vramgui.sources.resolve import load_model

# Differences the layouts allow: bitsandbytes' JSON quant state varies in length with its
# values, and vramgui counts it (and the 1 KiB nested code table) as the in-memory quant state.
TOLERANCE = {"bnb": 2e-4}


def _tolerance(case) -> float:
    return TOLERANCE.get(case[0].split("-")[0], 0)


def test_every_format_is_checked_at_two_sizes_or_more():
    sizes: dict[str, set[str]] = {}
    for case in CASES:
        sizes.setdefault(format_of(case), set()).add(case[1])
    assert len(sizes) >= 14
    assert all(len(models) >= 2 for models in sizes.values()), sizes


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_config_alone_weighs_what_the_checkpoint_stores(tmp_path, case):
    expected = lay.total_bytes(expected_tensors(case))
    spec = load_model(str(write_config(tmp_path / "m", case) / "config.json")).spec
    got = storage.weight_bytes(spec, "bf16", "none")
    assert abs(got - expected) <= _tolerance(case) * expected, (got, expected)
    assert spec.quantization is not None
    assert spec.parameters == find(case[1]).parameters


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_gpt_oss_from_config_is_its_published_size(tmp_path, name):
    entry = find(name)
    assert storage.weight_bytes(entry.spec(), "bf16", "none") == PUBLISHED[name]
    case = next(c for c in CASES if c[1] == name)
    assert lay.total_bytes(expected_tensors(case)) == PUBLISHED[name]
    folder = write_config(tmp_path / "m", case)
    spec = load_model(str(folder / "config.json")).spec
    assert storage.weight_bytes(spec, "bf16", "none") == PUBLISHED[name]
    assert storage.format_label(spec, "bf16") == "MXFP4 experts, bf16 elsewhere"


# Header-only checkpoints of each format, at its smaller sizes (a 30B MoE's header of 40,000
# tensors takes long to write and proves nothing more).
HEADER_MODELS = {
    "gpt-oss-20b", "qwen3-8b", "mistral-7b-v0.3", "llama-3.1-8b", "llama-3.2-3b", "llama-3.2-1b",
    "qwen2.5-7b", "deepseek-v2-lite",
}  # fmt: skip
HEADER_CASES = [c for c in CASES if c[1] in HEADER_MODELS]


def test_every_format_has_a_header_only_case():
    assert {format_of(c) for c in HEADER_CASES} == {format_of(c) for c in CASES}


@pytest.mark.parametrize("case", HEADER_CASES, ids=[c[0] for c in HEADER_CASES])
def test_header_only_checkpoint_agrees_with_the_config_alone(tmp_path, case):
    tensors = expected_tensors(case)
    folder = write_config(tmp_path / "m", case)
    write_sparse_safetensors(folder / "model.safetensors", tensors)
    from_headers = load_model(str(folder)).spec
    from_config = load_model(str(folder / "config.json")).spec
    stored = lay.total_bytes(tensors)
    assert storage.weight_bytes(from_headers, "bf16", "none") == stored
    got = storage.weight_bytes(from_config, "bf16", "none")
    assert abs(got - stored) <= _tolerance(case) * stored
    # the packed tensors count as the parameters the model holds unquantized
    assert from_headers.parameters == from_config.parameters == find(case[1]).parameters
    assert from_headers.quantization == from_config.quantization
