"""load_model's order of precedence and errors, search with its cache and catalog fallbacks, and the
``search`` / ``estimate`` commands over the fake Hub."""

import json
import math
import time

import pytest

from tests.fakehub.files import (
    TINY_LLAMA_CONFIG,
    header_totals,
    llama_tensors,
    safetensors_bytes,
    write_gguf,
    write_model_folder,
    write_safetensors,
)
from vramgui.cli import main
from vramgui.core.estimate import estimate
from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload, default_engine
from vramgui.sources import catalog
from vramgui.sources.errors import HubUnavailable, ModelNotFound
from vramgui.sources.hub import HubClient
from vramgui.sources.resolve import load_model, load_ref, search_models

CONFIG = json.dumps(TINY_LLAMA_CONFIG).encode()
BF16 = llama_tensors(TINY_LLAMA_CONFIG, norm_dtype="BF16")


def _add_models(hub):
    hub.add(
        "org/tiny-llama",
        {"config.json": CONFIG, "model.safetensors": safetensors_bytes(BF16)},
        downloads=50,
        likes=3,
        parameters=header_totals(BF16)[0],
    )
    hub.add("org/tiny-llama-gated", {"config.json": CONFIG}, downloads=500, gated=True)
    hub.add("other/unrelated", {"config.json": CONFIG}, downloads=9000)


# ------------------------------------------------------------------------- load_model


def test_paths_come_before_everything(tmp_path, monkeypatch):
    folder = write_model_folder(tmp_path / "org" / "name", TINY_LLAMA_CONFIG, BF16)
    monkeypatch.chdir(tmp_path)
    loaded = load_model("org/name", hub=HubClient(endpoint="http://127.0.0.1:9"))
    assert loaded.ref.kind == "local" and loaded.ref.id == str(folder)


def test_catalog_name_needs_no_network():
    entry = catalog.load_catalog()[0]
    loaded = load_model(entry.name, hub=HubClient(endpoint="http://127.0.0.1:9", timeout_s=0.2))
    assert loaded.ref.kind == "catalog"
    assert loaded.spec.parameters == entry.parameters


def test_missing_path_says_so(tmp_path):
    with pytest.raises(ModelNotFound, match="no such file"):
        load_model(str(tmp_path / "nowhere" / "model.gguf"))


def test_unknown_name_says_what_was_tried():
    with pytest.raises(ModelNotFound) as info:
        load_model("definitely not a model")
    message = str(info.value)
    for tried in ("file or folder", "catalog", "Hub repo id", "vramgui search"):
        assert tried in message
    # A hint to copy into a shell: the words quoted as one query.
    assert "`vramgui search 'definitely not a model'`" in message


def test_unreachable_hub_without_cache_says_nothing_is_cached():
    with pytest.raises(HubUnavailable, match="neither in the Hugging Face cache"):
        load_model("org/never-seen", hub=HubClient(endpoint="http://127.0.0.1:9", timeout_s=0.5))


def test_revision_suffix_reaches_the_hub(fake_hub):
    _add_models(fake_hub)
    sha = fake_hub.repos["org/tiny-llama"].sha
    loaded = load_model(f"org/tiny-llama@{sha}", hub=HubClient(timeout_s=2))
    assert loaded.ref.revision == sha
    assert any(r.path.endswith(f"/revision/{sha}") for r in fake_hub.requests)


def test_every_kind_of_reference_loads_again(fake_hub, tmp_path):
    _add_models(fake_hub)
    client = HubClient(timeout_s=2)
    folder = write_model_folder(tmp_path / "m", TINY_LLAMA_CONFIG, BF16)
    sources = ["org/tiny-llama", str(folder), str(folder / "config.json"), "llama-3.1-8b"]
    for source in sources:
        first = load_model(source, hub=client)
        again = load_ref(ModelRef.from_dict(first.ref.to_dict()), hub=client)
        assert again.spec.tensors == first.spec.tensors, source
        assert again.ref == first.ref and again.notices == ()


def test_reference_to_a_changed_or_missing_file(tmp_path):
    path = write_safetensors(tmp_path / "m.safetensors", BF16)
    ref = load_model(str(path)).ref
    write_safetensors(path, llama_tensors({**TINY_LLAMA_CONFIG, "num_hidden_layers": 3}))
    changed = load_ref(ref)
    assert changed.spec.facts.num_layers == 3
    assert any("changed since" in n for n in changed.notices)
    path.unlink()
    with pytest.raises(ModelNotFound, match="was there when saved"):
        load_ref(ref)


def test_hub_reference_loads_its_commit_offline(fake_hub):
    _add_models(fake_hub)
    client = HubClient(timeout_s=1)
    ref = load_model("org/tiny-llama", hub=client).ref
    fake_hub.stop()
    again = load_ref(ref, hub=client)
    assert again.ref.revision == ref.revision
    assert again.spec.parameters == header_totals(BF16)[0]
    assert any("cannot reach" in n for n in again.notices)


# ------------------------------------------------------------------------- estimate CLI


def _estimate_json(capsys, source):
    pytest.importorskip("vramgui.cli.estimate")
    pytest.importorskip("vramgui.core.offload")  # the estimate document's per-layer view
    assert main(["estimate", source, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_of_a_hub_repo_reports_its_headers(fake_hub, capsys):
    _add_models(fake_hub)
    doc = _estimate_json(capsys, "org/tiny-llama")
    params, data = header_totals(BF16)
    assert doc["model"]["parameters"] == params
    assert doc["per_gpu"]["components"]["weights"] == data


@pytest.mark.parametrize("kind", ["folder", "safetensors"])
def test_estimate_of_local_checkpoints_reports_their_headers(tmp_path, capsys, kind):
    if kind == "folder":
        source = write_model_folder(tmp_path / "m", TINY_LLAMA_CONFIG, BF16)
    else:
        source = write_safetensors(tmp_path / "m.safetensors", BF16)
    doc = _estimate_json(capsys, str(source))
    params, data = header_totals(BF16)
    assert doc["model"]["parameters"] == params
    assert doc["per_gpu"]["components"]["weights"] == data


def test_estimate_of_a_gguf_file_reports_its_tensor_data(tmp_path, capsys):
    layout = write_gguf(tmp_path / "m.gguf")
    doc = _estimate_json(capsys, str(tmp_path / "m.gguf"))
    assert doc["model"]["parameters"] == sum(math.prod(s) for _, s, _ in layout.values())
    # Served by llama.cpp, which keeps the token embeddings in host RAM.
    weights = doc["per_gpu"]["components"]["weights"] + doc["host_bytes"]
    assert weights == sum(n for _, _, n in layout.values())


@pytest.mark.parametrize("kind", ["hub", "folder", "safetensors", "gguf"])
def test_core_estimate_of_every_source_weighs_exactly_its_stored_bytes(fake_hub, tmp_path, kind):
    params, data = header_totals(BF16)
    if kind == "hub":
        _add_models(fake_hub)
        source = "org/tiny-llama"
    elif kind == "folder":
        source = str(write_model_folder(tmp_path / "m", TINY_LLAMA_CONFIG, BF16))
    elif kind == "safetensors":
        source = str(write_safetensors(tmp_path / "m.safetensors", BF16))
    else:
        layout = write_gguf(tmp_path / "m.gguf")
        source = str(tmp_path / "m.gguf")
        params = sum(math.prod(s) for _, s, _ in layout.values())
        data = sum(n for _, _, n in layout.values())
    spec = load_model(source, hub=HubClient(timeout_s=2)).spec
    # Served by an engine that loads the checkpoint as stored (llama.cpp for the GGUF file).
    result = estimate(spec, Workload(engine=default_engine("none", spec.quantization)))
    assert result.parameters == params
    assert result.components["weights"] + result.host_bytes == data


def test_estimate_error_is_one_line_and_exit_2(tmp_path, capsys):
    pytest.importorskip("vramgui.cli.estimate")
    (tmp_path / "config.json").write_text("not json")
    assert main(["estimate", str(tmp_path / "config.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err


# ------------------------------------------------------------------------- search


def test_search_sorts_by_downloads_and_describes_models(fake_hub):
    _add_models(fake_hub)
    found = search_models("tiny", hub=HubClient(timeout_s=2))
    assert found.offline_notice is None
    assert [m.id for m in found.results] == ["org/tiny-llama-gated", "org/tiny-llama"]
    gated, plain = found.results
    assert gated.gated and not plain.gated
    assert plain.parameters == header_totals(BF16)[0]
    assert (plain.downloads, plain.likes, plain.library) == (50, 3, "transformers")


def test_search_answers_from_the_cache(fake_hub):
    _add_models(fake_hub)
    client = HubClient(timeout_s=2)
    search_models("tiny", hub=client)
    asked = len(fake_hub.requests)
    started = time.perf_counter()
    found = search_models("tiny", hub=client)
    elapsed_ms = (time.perf_counter() - started) * 1000
    print(f"search from the cache: {elapsed_ms:.1f} ms")
    assert len(fake_hub.requests) == asked
    assert {m.source for m in found.results} == {"cache"}


def test_search_with_the_hub_down_uses_old_results_then_the_catalog(fake_hub):
    _add_models(fake_hub)
    client = HubClient(timeout_s=1)
    search_models("tiny", hub=client)
    fake_hub.stop()
    stale = search_models("tiny", hub=client, max_age_s=0)
    assert [m.id for m in stale.results] == ["org/tiny-llama-gated", "org/tiny-llama"]
    assert "saved on" in stale.offline_notice and "cannot reach" in stale.offline_notice

    fallback = search_models("llama", hub=client)
    assert fallback.results and {m.source for m in fallback.results} == {"catalog"}
    assert "bundled catalog" in fallback.offline_notice
    assert [m.id for m in fallback.results] == [
        e.hub_id or e.name for e in catalog.search("llama", 20)
    ]


@pytest.mark.parametrize("status", [404, 429, 500])
def test_search_with_a_failing_hub_falls_back(fake_hub, status):
    fake_hub.fail["search"] = status
    found = search_models("qwen", hub=HubClient(timeout_s=1))
    assert found.results and found.results[0].source == "catalog"
    assert str(status) in found.offline_notice


def test_search_command_json(fake_hub, capsys):
    _add_models(fake_hub)
    assert main(["search", "tiny", "--json", "--limit", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "vramgui.search/1"
    assert doc["notice"] is None
    assert [r["id"] for r in doc["results"]] == ["org/tiny-llama-gated"]


def test_search_command_table_offline(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["search", "mistral"]) == 0
    out = capsys.readouterr()
    assert "catalog" in out.out and "offline mode" in out.err
