"""The Hub client against a fake Hub on 127.0.0.1: exact inventories from Range-read headers,
gated / missing / failing / slow repos, and the disk cache that answers when the Hub cannot."""

import json
import math
import time
from pathlib import Path

import pytest

from tests.fakehub.files import (
    TINY_LLAMA_CONFIG,
    header_totals,
    llama_tensors,
    repo_files,
    safetensors_bytes,
    write_gguf,
)
from vramgui.core.dtypes import storage_bytes
from vramgui.paths import user_dir
from vramgui.sources import hub_repo
from vramgui.sources.errors import (
    BadModelFile,
    GatedModel,
    HubUnavailable,
    IncompleteModel,
    ModelNotFound,
)
from vramgui.sources.hub import HubClient
from vramgui.sources.resolve import load_model

TENSORS = llama_tensors(TINY_LLAMA_CONFIG)
CONFIG = json.dumps(TINY_LLAMA_CONFIG).encode()


def _stored_bytes(spec):
    return sum(storage_bytes(t.shape, t.dtype) for t in spec.tensors)


@pytest.fixture
def client(fake_hub):
    return HubClient(timeout_s=2.0)


def test_single_file_repo_is_exactly_its_header(fake_hub, client):
    repo = fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    loaded = load_model("org/tiny", hub=client)
    params, data = header_totals(TENSORS)
    assert loaded.spec.parameters == params
    assert _stored_bytes(loaded.spec) == data
    assert loaded.ref.kind == "hub" and loaded.ref.revision == repo.sha
    assert loaded.notices == ()
    weight_reads = [r for r in fake_hub.requests if r.path.endswith(".safetensors")]
    assert weight_reads and all(r.range and r.range.startswith("bytes=0-") for r in weight_reads)


@pytest.mark.parametrize("one_request", [True, False])
def test_sharded_repo_reads_every_shard_header(fake_hub, client, one_request):
    fake_hub.sharded_metadata = one_request
    fake_hub.add("org/sharded", repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=3))
    spec = client.load("org/sharded").spec
    assert spec.parameters == header_totals(TENSORS)[0]
    assert _stored_bytes(spec) == header_totals(TENSORS)[1]
    assert {t.name for t in spec.tensors} == set(TENSORS)
    shard_reads = [r for r in fake_hub.requests if r.path.endswith(".safetensors")]
    assert len(shard_reads) == (0 if one_request else 3)


def test_a_revision_other_than_main_reads_shards_one_by_one(fake_hub, client):
    repo = fake_hub.add("org/sharded", repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=2))
    client.load("org/sharded", revision=repo.sha)
    assert not any("safetensors-metadata" in r.path for r in fake_hub.requests)
    assert sum(r.path.endswith(".safetensors") for r in fake_hub.requests) == 2


def test_repo_with_an_index_and_a_consolidated_copy_counts_the_shards_once(fake_hub, client):
    files = repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=2)
    files["consolidated.safetensors"] = safetensors_bytes(
        {"tok_embeddings.weight": ("BF16", (8, 8))}
    )
    fake_hub.add("org/mistral-like", files)
    assert client.load("org/mistral-like").spec.parameters == header_totals(TENSORS)[0]
    assert not any(r.path.endswith("consolidated.safetensors") for r in fake_hub.requests)


def test_header_larger_than_the_first_range_takes_a_second_one(fake_hub, client):
    tensors = dict(TENSORS)
    tensors.update({f"model.layers.1.mlp.extra_{i}.weight": ("F16", (3,)) for i in range(2000)})
    raw = safetensors_bytes(tensors)
    assert int.from_bytes(raw[:8], "little") > 100_001  # huggingface_hub reads bytes 0-100000 first
    fake_hub.add("org/wide", {"config.json": CONFIG, "model.safetensors": raw})
    spec = client.load("org/wide").spec
    assert spec.parameters == header_totals(tensors)[0]
    ranges = [r.range for r in fake_hub.requests if r.path.endswith(".safetensors")]
    assert ranges[1].startswith("bytes=8-")


def test_server_that_ignores_range_still_gives_the_header(fake_hub, client):
    fake_hub.ignore_range = True
    fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    assert client.load("org/tiny").spec.parameters == header_totals(TENSORS)[0]


def test_gguf_repo_lists_files_and_reads_the_chosen_header(fake_hub, client, tmp_path, monkeypatch):
    layout = write_gguf(tmp_path / "a.gguf")
    write_gguf(tmp_path / "b.gguf", file_type=7)
    files = {
        "tiny-Q4_K_M.gguf": (tmp_path / "a.gguf").read_bytes(),
        "tiny-Q8_0.gguf": (tmp_path / "b.gguf").read_bytes(),
    }
    fake_hub.add("org/tiny-GGUF", files, library="gguf")
    # Small first reads make the client grow its prefix until the tensor table is inside.
    monkeypatch.setattr(hub_repo, "GGUF_FIRST_RANGE_BYTES", 256)
    assert client.list_gguf_files("org/tiny-GGUF") == sorted(
        (name, len(data)) for name, data in files.items()
    )
    loaded = load_model("org/tiny-GGUF", hub=client)
    assert loaded.ref.file == "tiny-Q4_K_M.gguf"
    assert loaded.spec.quantization == "Q4_K_M"
    assert loaded.spec.parameters == sum(math.prod(s) for _, s, _ in layout.values())
    assert _stored_bytes(loaded.spec) == sum(n for _, _, n in layout.values())
    assert any("tiny-Q8_0.gguf" in n for n in loaded.notices)
    reads = [r for r in fake_hub.requests if r.path.endswith(".gguf")]
    assert all(r.range for r in reads) and len(reads) > 1
    chosen = load_model("org/tiny-GGUF:tiny-Q8_0.gguf", hub=client)
    assert chosen.ref.file == "tiny-Q8_0.gguf" and chosen.spec.quantization == "Q8_0"

    listing = client.list_gguf_files("org/tiny-GGUF")
    fake_hub.stop()
    assert client.list_gguf_files("org/tiny-GGUF") == listing
    offline = load_model("org/tiny-GGUF:tiny-Q8_0.gguf", hub=client)
    assert offline.spec.tensors == chosen.spec.tensors


def test_a_gguf_name_of_300_characters_and_a_lying_content_range(fake_hub, client, tmp_path):
    """Both raised tracebacks (a temporary file named after the GGUF, truncated to the stated
    size); the header is now walked in memory and the size comes from the repo's listing."""
    write_gguf(tmp_path / "a.gguf")
    name = "q" * 292 + "-Q4_K_M.gguf"
    fake_hub.add("org/long-GGUF", {name: (tmp_path / "a.gguf").read_bytes()})
    fake_hub.content_range_total = 10**30
    loaded = client.load("org/long-GGUF")
    assert loaded.ref.file == name and loaded.spec.parameters > 0


def test_damaged_gguf_on_the_hub(fake_hub, client, tmp_path):
    write_gguf(tmp_path / "a.gguf")
    raw = (tmp_path / "a.gguf").read_bytes()
    fake_hub.add("org/bad-GGUF", {"x-Q4_K_M.gguf": b"GGML" + raw[4:]})
    with pytest.raises(BadModelFile, match="wrong magic"):
        client.load("org/bad-GGUF")
    fake_hub.add("org/cut-GGUF", {"x-Q4_K_M.gguf": raw[:3000]})
    with pytest.raises(BadModelFile, match="truncated"):
        client.load("org/cut-GGUF")


def test_gated_repo_explains_how_to_log_in(fake_hub, client, monkeypatch):
    fake_hub.add(
        "org/gated",
        {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)},
        gated=True,
    )
    with pytest.raises(GatedModel) as info:
        client.load("org/gated")
    message = str(info.value)
    assert message.startswith("org/gated is gated: its terms must be accepted on its page, ")
    assert f"{fake_hub.url}/org/gated" in message
    assert "no token was sent" in message and "hf auth login" in message and "HF_TOKEN" in message
    assert fake_hub.requests[-1].path.endswith("config.json")

    with pytest.raises(GatedModel, match=r"a token was sent \(from the token given\) but"):
        HubClient(token="hf_bad_token").load("org/gated")
    monkeypatch.setenv("HF_TOKEN", "hf_other_token")
    with pytest.raises(GatedModel, match=r"a token was sent \(from HF_TOKEN\) but .* no access"):
        HubClient().load("org/gated")

    monkeypatch.setenv("HF_TOKEN", "good-token")
    assert HubClient().load("org/gated").spec.parameters == header_totals(TENSORS)[0]
    cached = "".join(p.read_text() for p in user_dir("cache").rglob("*.json"))
    assert "good-token" not in cached


def test_missing_repo(fake_hub, client):
    with pytest.raises(ModelNotFound, match="not on the Hub"):
        client.load("org/nothing")


def test_missing_revision(fake_hub, client):
    fake_hub.add("org/tiny", {"config.json": CONFIG})
    with pytest.raises(ModelNotFound, match="revision"):
        client.load("org/tiny", revision="v9")


def test_repo_without_config_json(fake_hub, client):
    fake_hub.add("org/noconfig", {"model.safetensors": safetensors_bytes(TENSORS)})
    with pytest.raises(IncompleteModel, match=r"no config\.json"):
        client.load("org/noconfig")


def test_repo_with_config_only_synthesizes_tensors_with_a_notice(fake_hub, client):
    fake_hub.add("org/bare", {"config.json": CONFIG})
    loaded = client.load("org/bare")
    assert loaded.spec.parameters == header_totals(TENSORS)[0]
    assert any("synthesized" in n for n in loaded.notices)


@pytest.mark.parametrize(
    ("status", "words"), [(429, "rate-limiting"), (500, "failed with 500"), (502, "502")]
)
def test_failing_hub_without_cache(fake_hub, client, status, words):
    fake_hub.add("org/tiny", {"config.json": CONFIG})
    fake_hub.fail["org/tiny"] = status
    with pytest.raises(HubUnavailable, match=words):
        load_model("org/tiny", hub=client)
    tries = sum(r.path.startswith("/api/models/org/tiny") for r in fake_hub.requests)
    assert tries == (2 if status == 502 else 1)  # one quick retry on 502-504 only


def test_slow_hub_times_out(fake_hub):
    fake_hub.add("org/tiny", {"config.json": CONFIG})
    fake_hub.delay_s["org/tiny"] = 10.0
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match=r"did not answer within 0\.3 s"):
        HubClient(timeout_s=0.3).load("org/tiny")
    assert time.perf_counter() - started < 5.0


def test_one_deadline_bounds_all_requests_of_a_load(fake_hub):
    fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    fake_hub.delay_s["org/tiny/config.json"] = 0.5
    fake_hub.delay_s["org/tiny/model.safetensors"] = 0.5
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match=r"within 0\.7 s \((config\.json|model\.safetensors)"):
        HubClient(timeout_s=0.7).load("org/tiny")
    assert time.perf_counter() - started < 1.5  # each request alone would fit; together not


def test_fail_on_one_file_only(fake_hub, client):
    fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    fake_hub.fail["org/tiny/model.safetensors"] = 500
    with pytest.raises(HubUnavailable, match="500"):
        client.load("org/tiny")


def test_cached_facts_answer_when_the_hub_cannot(fake_hub, client):
    fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    first = client.load("org/tiny")

    fake_hub.fail["org/tiny"] = 500
    failing = client.load("org/tiny")
    assert failing.spec.tensors == first.spec.tensors
    assert failing.ref == first.ref
    assert any("500" in n and "showing what was read" in n for n in failing.notices)

    fake_hub.stop()
    stopped = load_model("org/tiny", hub=client)
    assert stopped.spec.parameters == first.spec.parameters
    assert any("cannot reach the Hub" in n for n in stopped.notices)


def test_offline_mode_uses_the_cache_without_asking(fake_hub, client, monkeypatch):
    fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    client.load("org/tiny")
    asked = len(fake_hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = client.load("org/tiny")
    assert loaded.spec.parameters == header_totals(TENSORS)[0]
    assert any("offline mode" in n for n in loaded.notices)
    assert len(fake_hub.requests) == asked
    with pytest.raises(HubUnavailable, match="offline mode"):
        client.load("org/other")


def test_same_commit_is_not_read_twice_and_a_new_commit_is(fake_hub, client):
    repo = fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    client.load("org/tiny")
    client.load("org/tiny")
    assert sum(r.method == "GET" and r.path.endswith("config.json") for r in fake_hub.requests) == 1
    bigger = {**TINY_LLAMA_CONFIG, "num_hidden_layers": 3}
    repo.files = {
        "config.json": json.dumps(bigger).encode(),
        "model.safetensors": safetensors_bytes(llama_tensors(bigger)),
    }
    repo.sha = "f" * 40
    loaded = client.load("org/tiny")
    assert loaded.ref.revision == "f" * 40
    assert loaded.spec.facts.num_layers == 3


def test_damaged_cache_files_are_ignored(fake_hub, client):
    fake_hub.add(
        "org/tiny", {"config.json": CONFIG, "model.safetensors": safetensors_bytes(TENSORS)}
    )
    client.load("org/tiny")
    for path in user_dir("cache").rglob("*.json"):
        path.write_text("{not json")
    assert client.load("org/tiny").spec.parameters == header_totals(TENSORS)[0]


def test_bad_repo_id():
    with pytest.raises(ModelNotFound, match="org/name"):
        HubClient(endpoint="http://127.0.0.1:9").load("not a repo")


def test_fake_hub_answers_huggingface_hub_itself(fake_hub):
    """The fake speaks the Hub's protocol: huggingface_hub's own client reads it (HEAD, Range)."""
    from huggingface_hub import HfApi, hf_hub_download  # noqa: TID251 (the reference client)

    fake_hub.add("org/sharded", repo_files(TINY_LLAMA_CONFIG, TENSORS, shards=3))
    api = HfApi(endpoint=fake_hub.url)
    metadata = api.get_safetensors_metadata("org/sharded")
    assert metadata.sharded and len(metadata.files_metadata) == 3
    counted = sum(sum(f.parameter_count.values()) for f in metadata.files_metadata.values())
    assert counted == header_totals(TENSORS)[0]
    assert api.get_sharded_safetensors_metadata("org/sharded").files_metadata.keys() == (
        metadata.files_metadata.keys()
    )
    assert not api.file_exists("org/sharded", "nothing.json")
    path = hf_hub_download("org/sharded", "config.json", endpoint=fake_hub.url)
    assert json.loads(Path(path).read_text(encoding="utf-8")) == TINY_LLAMA_CONFIG


def test_a_modelopt_repo_reads_its_hf_quant_config(fake_hub, client):
    # NVIDIA's ModelOpt exports state their quantization beside config.json, not in it.
    quant = {
        "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}
    }
    tensors = {}
    for name, (dtype, shape) in TENSORS.items():
        module = name.removesuffix(".weight")
        if len(shape) == 2 and ".layers." in name:
            out, inp = shape
            tensors[f"{module}.weight"] = ("U8", (out, inp // 2))
            tensors[f"{module}.weight_scale"] = ("F8_E4M3", (out, inp // 16))
            tensors[f"{module}.weight_scale_2"] = ("F32", ())
            tensors[f"{module}.input_scale"] = ("F32", ())
        else:
            tensors[name] = (dtype, shape)
    fake_hub.add(
        "org/tiny-NVFP4",
        {
            "config.json": CONFIG,
            "hf_quant_config.json": json.dumps(quant).encode(),
            "model.safetensors": safetensors_bytes(tensors),
        },
    )
    spec = load_model("org/tiny-NVFP4", hub=client).spec
    assert spec.quantization == "nvfp4"
    assert spec.stored_format is not None and spec.stored_format.method == "modelopt"
    assert _stored_bytes(spec) == header_totals(tensors)[1]
    # the packed weights count as the parameters the model holds
    assert spec.parameters == header_totals(TENSORS)[0]
    # only vLLM loads ModelOpt checkpoints
    from vramgui.core.workload import default_engine

    assert default_engine("none", spec.quantization) == "vllm"
