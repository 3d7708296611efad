"""The bundled catalog: its counts agree with core.families, lookups and search work, it needs no torch."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vramgui.core.errors import ConfigError
from vramgui.core.families import spec_from_config
from vramgui.sources import catalog
from vramgui.sources.catalog import CatalogEntry, find, load_catalog, popular_default, search

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = load_catalog()

REQUIRED = [
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
    "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "llama-3.3-70b",
    "mistral-7b-v0.1", "mistral-7b-v0.3", "mistral-nemo-12b", "mixtral-8x7b", "mixtral-8x22b",
    "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
    "qwen2.5-72b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "gemma-2-2b", "gemma-2-9b", "gemma-2-27b", "gemma-3-1b",
    "gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "phi-3-mini-4k", "phi-3-medium-4k", "phi-4",
    "deepseek-v2-lite", "deepseek-v3", "gpt2", "gpt2-xl", "opt-125m", "opt-66b", "opt-175b",
    "falcon-7b", "falcon-40b", "bloom-560m", "bloom-7b1", "bloom-176b", "pythia-160m", "pythia-12b",
    "bert-base-uncased", "bert-large-uncased", "starcoder", "octocoder", "tinyllama-1.1b",
    "smollm-135m", "smollm2-1.7b",
]  # fmt: skip


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_families_count_equals_transformers_count(entry: CatalogEntry):
    try:
        spec = spec_from_config(entry.config, name=entry.hub_id)
    except ConfigError as exc:
        pytest.skip(f"core.families does not support {entry.model_type} yet: {exc}")
    assert spec.parameters == entry.parameters


def test_spec_comes_from_the_entry_config():
    entry = find("llama-3.1-8b")
    spec = entry.spec()
    assert spec.parameters == entry.parameters == 8_030_261_248
    assert spec.facts.num_layers == entry.config["num_hidden_layers"]
    assert "catalog" in spec.source


def test_well_known_counts():
    # Published sizes, to the precision model cards state them; a wrong config shows up here.
    expected = {
        "llama-2-7b": 6.74e9, "llama-3.1-405b": 405.9e9, "qwen2.5-72b": 72.7e9,
        "mixtral-8x7b": 46.7e9, "deepseek-v3": 671.0e9, "opt-175b": 174.6e9, "bloom-176b": 176.2e9,
        "gpt2": 124.4e6, "bert-base-uncased": 109.5e6, "falcon-40b": 41.3e9, "phi-4": 14.66e9,
    }  # fmt: skip
    for name, count in expected.items():
        assert find(name).parameters == pytest.approx(count, rel=2e-3), name


def test_required_models_are_present():
    names = {e.name for e in ENTRIES}
    assert not [n for n in REQUIRED if n not in names]


def test_names_and_hub_ids_are_unique():
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names))
    keys = [k.lower() for e in ENTRIES for k in (e.name, e.hub_id, *e.aliases) if k]
    assert len(keys) == len(set(keys))
    assert all(e.name == e.name.lower() and " " not in e.name for e in ENTRIES)


def test_every_entry_is_described():
    for e in ENTRIES:
        assert e.parameters > 0 and e.max_context > 0 and e.display_name and e.family, e.name
        assert e.architecture and e.license, e.name
        assert e.hub_id or e.note, f"{e.name}: an entry without a Hub repo must say why"


def test_catalog_is_generated_from_the_source_file():
    # Editing tools/catalog_models.json without rerunning tools/build_catalog.py fails here.
    source = json.loads((ROOT / "tools" / "catalog_models.json").read_text())["models"]
    built = json.loads((ROOT / "resources" / "catalog.json").read_text())
    assert built["transformers"] and built["generated"]
    generated = [
        {k: v for k, v in e.items() if k not in ("architecture", "parameters_transformers")}
        for e in built["entries"]
    ]
    assert generated == source


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("llama-2-7b", "llama-2-7b"),
        ("LLAMA-2-7B", "llama-2-7b"),
        ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
        ("meta-llama/llama-2-7b-HF", "llama-2-7b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("  Qwen/Qwen3-30B-A3B ", "qwen3-30b-a3b"),
        ("gpt2", "gpt2"),
    ],
)
def test_find(query, name):
    assert find(query).name == name


def test_find_unknown():
    assert find("no-such/model") is None
    assert find("") is None
    # opt-175b has no Hub repo: an empty hub id must not make "" an alias of it.
    assert find("opt-175b").hub_id == ""


def test_search_matches_every_token_most_popular_first():
    hits = search("llama 70b")
    assert {e.name for e in hits} == {
        "llama-2-70b",
        "llama-3-70b",
        "llama-3.1-70b",
        "llama-3.3-70b",
    }
    assert [e.popularity for e in hits] == sorted((e.popularity for e in hits), reverse=True)
    assert [e.name for e in search("qwen moe")] == ["qwen3-30b-a3b", "qwen3-235b-a22b"]
    # "7b" is a token prefix, so 27B models do not match.
    assert all("27b" not in e.name for e in search("7b"))
    assert {e.name for e in search("Qwen/Qwen2.5")} == {
        n for n in REQUIRED if n.startswith("qwen2.5")
    }


def test_search_limit_and_empty_query():
    assert len(search("", limit=5)) == 5
    assert search("", limit=1)[0] == max(ENTRIES, key=lambda e: e.popularity)
    assert search("llama", limit=0) == []
    assert search("zzz-nothing") == []


def test_popular_default():
    entry = popular_default()
    assert entry.name == catalog.DEFAULT_NAME
    assert entry.spec().parameters == entry.parameters


def test_catalog_loads_without_torch():
    # In a fresh interpreter: other tests of the same run may have imported torch themselves.
    code = (
        "import sys; from vramgui.sources import catalog; catalog.load_catalog()[0].spec();"
        "print([m for m in ('torch', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
