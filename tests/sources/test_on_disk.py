"""Models other tools downloaded: the Hugging Face cache answers a repo id before the Hub, and
the stores of the Hugging Face cache, Ollama and LM Studio are listed, sized and opened, each
built in a temporary folder with small real files, and never written to."""

import json

import pytest

from tests.fakehub.files import (
    TINY_LLAMA_CONFIG,
    header_totals,
    llama_tensors,
    repo_files,
    write_gguf,
)
from tests.fakehub.stores import hf_cache_repo, sample_stores, tree_state
from vramgui.cli import main
from vramgui.core.dtypes import storage_bytes
from vramgui.core.model import Inventory
from vramgui.sources import on_disk
from vramgui.sources.errors import HubUnavailable, ModelNotFound
from vramgui.sources.hub import HubClient
from vramgui.sources.resolve import load_model, load_ref

TENSORS = llama_tensors(TINY_LLAMA_CONFIG)
FILES = repo_files(TINY_LLAMA_CONFIG, TENSORS)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache that HF_HUB_CACHE points at."""
    folder = tmp_path / "hf-cache"
    folder.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    return folder


@pytest.fixture
def gguf_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "m.gguf"
    write_gguf(path)
    return path.read_bytes()


def _stored_bytes(spec):
    return sum(storage_bytes(t.shape, t.dtype) for t in spec.tensors)


@pytest.mark.parametrize("shards", [1, 3])
def test_offline_estimate_of_a_repo_in_the_cache_is_exact(cache, monkeypatch, capsys, shards):
    hf_cache_repo(cache, "org/tiny", repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=shards))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert main(["estimate", "org/tiny", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    params, data = header_totals(TENSORS)
    assert doc["model"]["parameters"] == params
    assert doc["model"]["inventory"] == Inventory.FROM_HEADERS.value
    loaded = load_model("org/tiny")
    assert _stored_bytes(loaded.spec) == data
    assert loaded.ref.kind == "hub" and loaded.ref.revision is not None
    assert loaded.spec.source.startswith("Hugging Face cache, org/tiny@") and not loaded.notices
    assert load_ref(loaded.ref).spec.tensors == loaded.spec.tensors


def test_the_cache_comes_before_the_hub(cache, fake_hub):
    fake_hub.add("org/tiny", FILES)
    snapshot = hf_cache_repo(cache, "org/tiny", FILES)
    loaded = load_model("org/tiny", hub=HubClient(timeout_s=2))
    assert loaded.ref.revision == snapshot.name
    assert fake_hub.requests == []


def test_the_cache_comes_before_the_catalog(cache):
    """A catalog model downloaded whole is read from its own headers."""
    config = {**TINY_LLAMA_CONFIG, "num_hidden_layers": 3}
    hf_cache_repo(cache, "meta-llama/Llama-3.1-8B", repo_files(config, llama_tensors(config)))
    loaded = load_model("meta-llama/Llama-3.1-8B")
    assert loaded.spec.source.startswith("Hugging Face cache, meta-llama/Llama-3.1-8B@")
    assert loaded.spec.facts.num_layers == 3
    assert load_model("llama-3.1-8b").spec.facts.num_layers == 32  # the catalog's own name


def test_a_snapshot_without_all_its_weights_sends_the_repo_to_the_hub(cache, fake_hub):
    fake_hub.add("org/tiny", repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=2))
    partial = repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=2)
    del partial["model-00002-of-00002.safetensors"]  # a download cut short
    hf_cache_repo(cache, "org/tiny", partial)
    loaded = load_model("org/tiny", hub=HubClient(timeout_s=2))
    assert loaded.spec.parameters == header_totals(TENSORS)[0]
    assert fake_hub.requests and not loaded.spec.source.startswith("Hugging Face cache")


def test_a_repo_an_estimate_fetched_estimates_again_offline(cache, fake_hub, monkeypatch):
    """config.json in the shared cache and the headers in vramgui's: no Hub needed next time."""
    fake_hub.add("org/tiny", FILES)
    first = load_model("org/tiny", hub=HubClient(timeout_s=2))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = load_model("org/tiny", hub=HubClient(timeout_s=2))
    assert again.spec.tensors == first.spec.tensors
    assert any("offline mode" in n for n in again.notices)
    with pytest.raises(HubUnavailable, match="neither in the Hugging Face cache"):
        load_model("org/other", hub=HubClient(timeout_s=2))


def test_revisions_and_gguf_files_of_the_cache(cache, gguf_bytes, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    old = hf_cache_repo(cache, "org/tiny", FILES, commit="1" * 40, ref="v1")
    assert load_model(f"org/tiny@{old.name}").ref.revision == old.name
    assert load_model("org/tiny@v1").ref.revision == old.name
    hf_cache_repo(cache, "org/tiny-GGUF", {"x-Q8_0.gguf": gguf_bytes, "x-Q4_K_M.gguf": gguf_bytes})
    chosen = load_model("org/tiny-GGUF")
    assert chosen.ref.file == "x-Q4_K_M.gguf"
    assert any("x-Q8_0.gguf" in n for n in chosen.notices)
    assert load_model("org/tiny-GGUF:x-Q8_0.gguf").ref.file == "x-Q8_0.gguf"


@pytest.fixture
def stores(tmp_path):
    """One store of each kind, with a model or two in each."""
    return sample_stores(tmp_path / "stores")


def test_every_store_is_listed_with_sizes(stores):
    gguf_bytes = (stores.hf_cache.parent / "tiny.gguf").read_bytes()
    found = on_disk.scan(stores)
    rows = {(m.where, m.name): m for m in found.models}
    assert set(rows) == {
        ("Hugging Face cache", "org/tiny"),
        ("Hugging Face cache", "org/tiny-GGUF:tiny-Q4_K_M.gguf"),
        ("Ollama", "llama3.2:3b"),
        ("Ollama", "someone/tiny:latest"),
        ("LM Studio", "lmstudio-community/Tiny-GGUF/Tiny-Q4_K_M.gguf"),
        ("LM Studio", "mlx-community/Tiny-4bit"),
    }
    assert rows["Hugging Face cache", "org/tiny"].size_bytes == len(FILES["model.safetensors"])
    assert rows["Ollama", "llama3.2:3b"].size_bytes == len(gguf_bytes)
    assert rows["Ollama", "llama3.2:3b"].source == "ollama:llama3.2:3b"
    assert {m.format for m in found.models} == {"safetensors", "gguf"}


def test_every_listed_model_opens_without_the_network(stores, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(on_disk, "default_stores", lambda: stores)
    monkeypatch.setenv("HF_HUB_CACHE", str(stores.hf_cache))
    for model in on_disk.scan(stores).models:
        opened = on_disk.open_model(model)
        assert opened.spec.parameters > 0, model.name
        by_source = load_model(model.source)
        assert by_source.spec.tensors == opened.spec.tensors, model.name


def test_reading_the_stores_writes_nothing_to_them(stores, monkeypatch):
    before = tree_state(stores.hf_cache.parent)
    monkeypatch.setattr(on_disk, "default_stores", lambda: stores)
    monkeypatch.setenv("HF_HUB_CACHE", str(stores.hf_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for model in on_disk.scan(stores).models:
        on_disk.open_model(model)
        load_model(model.source)
    assert tree_state(stores.hf_cache.parent) == before


def test_ollama_names_as_ollama_list_shows_them(stores, monkeypatch):
    monkeypatch.setattr(on_disk, "default_stores", lambda: stores)
    assert load_model("ollama:llama3.2:3b").spec.name == "llama3.2:3b"
    assert load_model("ollama:someone/tiny").spec.name == "someone/tiny:latest"
    with pytest.raises(ModelNotFound, match=r"no Ollama model 'llama3\.2'"):
        load_model("ollama:llama3.2")  # only the 3b tag is pulled


def test_default_stores_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "elsewhere"))
    for folder in ("elsewhere", ".lmstudio/models", "picked"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / ".lmstudio" / "settings.json").write_text(
        json.dumps({"downloadsFolder": str(tmp_path / "picked")})
    )
    found = on_disk.default_stores()
    assert found.ollama[0] == (tmp_path / "elsewhere").resolve()
    assert found.lm_studio[:2] == (
        (tmp_path / "picked").resolve(),
        (tmp_path / ".lmstudio/models").resolve(),
    )


def test_a_damaged_store_lists_what_it_can(stores):
    manifest = next((stores.ollama[0] / "manifests").rglob("3b"))
    manifest.write_text("{not json")
    (stores.lm_studio[0] / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf").write_bytes(
        b"GGUF"
    )
    names = {m.name for m in on_disk.scan(stores).models}
    assert "llama3.2:3b" not in names and "someone/tiny:latest" in names
    broken = next(m for m in on_disk.scan(stores).models if m.name.endswith("Tiny-Q4_K_M.gguf"))
    with pytest.raises(Exception, match="truncated"):
        on_disk.open_model(broken)


def test_local_command_lists_the_stores(stores, monkeypatch, capsys):
    monkeypatch.setattr(on_disk, "default_stores", lambda: stores)
    assert main(["local", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "vramgui.local/1"
    assert {m["source"] for m in doc["models"]} >= {"org/tiny", "ollama:llama3.2:3b"}
    assert main(["local"]) == 0
    table = capsys.readouterr().out
    assert "llama3.2:3b" in table and "Ollama" in table and "KB" in table
