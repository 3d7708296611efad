"""The bundled catalog: its counts agree with core.families, lookups and search work, it needs no torch."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    # 2025-26
    "gpt-oss-20b", "gpt-oss-120b", "qwen3-coder-480b-a35b", "qwen3-vl-2b", "qwen3-vl-8b",
    "qwen3-vl-30b-a3b", "qwen3-vl-235b-a22b", "qwen3.5-9b", "qwen3.5-27b", "qwen3.5-35b-a3b",
    "qwen3.5-397b-a17b", "deepseek-v3.1-nvfp4", "deepseek-v3.2", "gemma-4-26b-a4b", "kimi-k2",
    "kimi-k2.5", "glm-5", "minimax-m2.5", "nemotron-3-nano-30b-a3b", "olmo-3.1-32b",
    "devstral-small-2507", "devstral-small-2-24b", "smollm3-3b", "lfm2-1.2b", "lfm2.5-vl-1.6b",
    # quantized releases
    "qwen3-30b-a3b-fp8", "qwen3-32b-fp8", "qwen3-235b-a22b-fp8", "qwen3-235b-a22b-nvfp4",
    "deepseek-v3.2-nvfp4", "glm-5-fp8", "glm-5-nvfp4", "minimax-m2.5-nvfp4",
    "nemotron-3-nano-30b-a3b-nvfp4", "llama-3.1-70b-instruct-fp8",
]  # fmt: skip
# Fields tools/build_catalog.py adds to each record of tools/catalog_models.json.
GENERATED = ("architecture", "parameters_transformers", "parameters_text", "parameters_by_part")
# A stored copy is cited at a fixed commit, so the link keeps showing the values that were read.
PINNED_COPY = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+\.json")


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_families_count_equals_transformers_count(entry: CatalogEntry):
    # Every entry is counted to the parameter (DeepSeek V4, Kimi K2.5, Devstral Small 2,
    # LFM2.5-VL, Nemotron 3's latent experts, Gemma 4's experts and vision tower included).
    spec = spec_from_config(entry.config, name=entry.hub_id)
    assert spec.parameters == entry.parameters


def test_spec_comes_from_the_entry_config():
    entry = find("llama-3.1-8b")
    spec = entry.spec()
    assert spec.parameters == entry.parameters == 8_030_261_248
    assert spec.facts.num_layers == entry.config["num_hidden_layers"]
    assert "catalog" in spec.source
    assert spec.source.endswith("config from huggingface.co/meta-llama/Llama-3.1-8B")


def test_config_origin_is_short():
    assert find("gpt-oss-20b").config_origin == "github.com/ai-dynamo/aiconfigurator"
    assert find("smollm3-3b").config_origin == "github.com/fetchwiki/HuggingFaceTB-SmolLM3-3B"
    assert find("opt-175b").config_origin.startswith("OPT paper")


def test_well_known_counts():
    # Published sizes, to the precision model cards state them; a wrong config shows up here.
    expected = {
        "llama-2-7b": 6.74e9, "llama-3.1-405b": 405.9e9, "qwen2.5-72b": 72.7e9,
        "mixtral-8x7b": 46.7e9, "deepseek-v3": 671.0e9, "opt-175b": 174.6e9, "bloom-176b": 176.2e9,
        "gpt2": 124.4e6, "bert-base-uncased": 109.5e6, "falcon-40b": 41.3e9, "phi-4": 14.66e9,
        "gpt-oss-20b": 20.91e9, "gpt-oss-120b": 116.83e9,
    }  # fmt: skip
    for name, count in expected.items():
        assert find(name).parameters == pytest.approx(count, rel=2e-3), name


def test_counts_match_the_published_safetensors_index():
    # total_parameters of the model.safetensors.index.json stored beside the config copy.
    assert find("smollm3-3b").parameters == 3_075_098_624
    assert find("devstral-small-2507").parameters == 23_572_403_200
    # Devstral Small 2 is that language model plus a Pixtral vision tower and projector.
    assert find("devstral-small-2-24b").parameters_text == 23_572_403_200


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


def test_every_config_says_where_it_came_from():
    for e in ENTRIES:
        source = e.config_source
        if source.startswith("https://huggingface.co/"):
            assert source == f"https://huggingface.co/{e.hub_id}/blob/main/config.json", e.name
        elif source.startswith("https://github.com/"):
            assert PINNED_COPY.fullmatch(source), f"{e.name}: {source}"
        else:
            assert source and not e.hub_id and e.note, f"{e.name}: no Hub config, so say why"


def test_parts_add_up_to_the_whole_checkpoint():
    for e in ENTRIES:
        assert sum(e.parameters_by_part.values()) == e.parameters, e.name
        assert e.parameters_text == e.parameters_by_part["language_model"], e.name


def test_multimodal_checkpoints_count_their_towers():
    multimodal = [e for e in ENTRIES if "vision_config" in e.config]
    assert len(multimodal) >= 15
    for e in multimodal:
        towers = {k: n for k, n in e.parameters_by_part.items() if k != "language_model"}
        assert towers and all(n > 0 for n in towers.values()), e.name
        assert e.parameters_text < e.parameters, e.name
    text_only = [e for e in ENTRIES if "text_config" not in e.config]
    assert all(e.parameters_by_part == {"language_model": e.parameters} for e in text_only)
    parts = find("qwen3-vl-8b").parameters_by_part
    assert parts["visual"] > 0.5e9 and parts["language_model"] == find("qwen3-8b").parameters


def test_entries_without_the_newer_fields_still_load():
    # A catalog written before the fields existed: the whole count is the language model.
    raw = {"name": "m", "hub_id": "o/m", "family": "M", "parameters_transformers": 10, "config": {}}
    entry = catalog._entry(raw)
    assert entry.parameters_text == 10
    assert entry.parameters_by_part == {"language_model": 10}
    assert entry.config_source == "" and entry.config_origin == ""


def test_catalog_is_generated_from_the_source_file():
    # Editing tools/catalog_models.json without rerunning tools/build_catalog.py fails here.
    source = json.loads((ROOT / "tools" / "catalog_models.json").read_text())["models"]
    built = json.loads((ROOT / "resources" / "catalog.json").read_text())
    assert built["transformers"] and built["generated"]
    generated = [{k: v for k, v in e.items() if k not in GENERATED} for e in built["entries"]]
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
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("Qwen/Qwen3-VL-32B-Thinking", "qwen3-vl-32b"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-v3"),
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
        "llama-3.1-70b-instruct-fp8",
        "llama-3.3-70b",
    }
    assert [e.popularity for e in hits] == sorted((e.popularity for e in hits), reverse=True)
    moe = search("qwen moe")
    assert {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-vl-30b-a3b", "qwen3.5-35b-a3b"} <= {
        e.name for e in moe
    }
    assert all(e.model_type.endswith("moe") and e.name.startswith("qwen") for e in moe)
    assert [e.popularity for e in moe] == sorted((e.popularity for e in moe), reverse=True)
    # "7b" is a token prefix, so 27B models do not match.
    assert all("27b" not in e.name for e in search("7b"))
    assert {e.name for e in search("Qwen/Qwen2.5")} == {
        n for n in REQUIRED if n.startswith("qwen2.5")
    }


def test_a_number_in_the_query_matches_a_whole_number():
    # "llama 4" is no Llama 3.1 405B; the catalog has no Llama 4, so nothing.
    assert search("llama 4") == []
    assert {"llama-3.1-405b", "llama-3.1-8b"} <= {e.name for e in search("llama 3")}
    assert "llama-3.1-405b" in {e.name for e in search("llama 405")}
    assert {"qwen2.5-7b"} <= {e.name for e in search("qwen 2")}
    assert all("27b" not in e.name for e in search("gemma 7b"))


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


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_every_entry_estimates(entry: CatalogEntry):
    from vramgui.core.estimate import estimate
    from vramgui.core.workload import Workload, default_engine

    spec = entry.spec()
    seq = min(1024, spec.facts.max_position_embeddings)
    workload = Workload(engine=default_engine("none", spec.quantization), seq=seq)
    est = estimate(spec, workload)
    assert est.components["weights"] > 0
    if spec.facts.is_decoder:  # vLLM serves every format the catalog holds
        assert estimate(spec, workload.with_(engine="vllm"), 200 * 2**30).total_bytes > 0


def test_quantized_entries_are_estimated_as_stored():
    from vramgui.core import storage

    quantized = [e for e in ENTRIES if e.spec().quantization]
    assert len(quantized) >= 20
    for e in quantized:
        spec = e.spec()
        stored = storage.weight_bytes(spec, "bf16", "none")
        unquantized = 2 * spec.parameters
        assert stored < 0.65 * unquantized, e.name  # 8 bits or fewer for most weights
        assert storage.format_label(spec, "bf16"), e.name
        if e.stored_bytes:
            assert stored == e.stored_bytes, e.name


def test_stored_copies_of_hf_quant_config_are_cited():
    with_quant = [e for e in ENTRIES if e.hf_quant_config]
    assert len(with_quant) >= 5
    for e in with_quant:
        assert PINNED_COPY.fullmatch(e.hf_quant_config_source), e.name
        assert e.hf_quant_config_source.endswith("hf_quant_config.json"), e.name
    for e in ENTRIES:
        if e.stored_bytes:
            assert e.stored_bytes_source.startswith("https://huggingface.co/"), e.name


def test_the_refused_entries_formats_are_read_already():
    # What their checkpoints store is known now; the table builds their tensors later.
    from vramgui.core.formats import read_format

    expected = {
        "deepseek-v4-flash": ("fp8", {"mxfp4", "fp8-block"}),  # FP4 experts, FP8 blocks
        "deepseek-v4-pro": ("fp8", {"mxfp4", "fp8-block"}),
        "gemma-4-31b-it-nvfp4": ("modelopt", {"nvfp4"}),
        "kimi-k2.5": ("compressed-tensors", {"w4a16-g32"}),
        "kimi-k2.6-nvfp4": ("modelopt", {"nvfp4"}),
        "devstral-small-2-24b": ("fp8", {"fp8-tensor"}),
    }
    for name, (method, schemes) in expected.items():
        entry = find(name)
        found = read_format(entry.config, entry.hf_quant_config or None)
        assert found is not None and found.known, name
        assert found.method == method, name
        assert {r.scheme.name for r in found.rules} == schemes, name
    for name in ("gemma-4-26b-a4b", "lfm2.5-vl-1.6b"):
        assert read_format(find(name).config) is None
