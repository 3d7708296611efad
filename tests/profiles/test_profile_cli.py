"""``vramgui profile ...`` end to end, with the estimate replaced by a scripted one where the test
needs the figures to change between saving and reopening (as they do when the core improves)."""

import json

import pytest

from vramgui.cli import main
from vramgui.cli import profile as profile_cli
from vramgui.core.model import ModelRef
from vramgui.profiles import ProfileStore, source_of


class ScriptedEstimate:
    """Stands in for profile_cli.estimate_for: a document whose figures follow the workload."""

    def __init__(self, scale=1000):
        self.scale = scale
        self.calls = []

    def __call__(self, loaded, workload, gpu_names):
        self.calls.append((loaded.ref, workload, list(gpu_names)))
        weights = loaded.spec.parameters * 2
        kv = workload.batch * workload.seq * self.scale
        return {
            "schema": "vramgui.estimate/1",
            "model": {"name": loaded.spec.name, "parameters": loaded.spec.parameters},
            "settings": workload.to_dict(),
            "gpus": workload.gpus,
            "per_gpu": {
                "total_bytes": weights + kv,
                "phase": "prefill",
                "components": {"weights": weights, "kv_cache": kv},
            },
            "layers": [],
            "fit": [
                {"gpu": g, "capacity_bytes": 24 * 2**30, "fits": weights + kv < 24 * 2**30,
                 "headroom_bytes": 24 * 2**30 - weights - kv}
                for g in gpu_names
            ],
        }  # fmt: skip


@pytest.fixture
def scripted(monkeypatch):
    fake = ScriptedEstimate()
    monkeypatch.setattr(profile_cli, "estimate_for", fake)
    return fake


def run(capsys, *argv):
    code = main(["profile", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_save_list_show(capsys, scripted):
    code, out, err = run(capsys, "save", "Small plan", "llama-3.2-1b", "--batch", "2", "--seq",
                         "1024", "--gpu", "RTX 4090", "--notes", "first try")  # fmt: skip
    assert code == 0, err
    assert "saved profile 'Small plan'" in out
    saved = ProfileStore().get("small plan")
    assert saved.model == ModelRef(kind="catalog", id="llama-3.2-1b")
    assert (saved.workload.batch, saved.workload.seq) == (2, 1024)
    assert saved.gpus == ("RTX 4090",) and saved.notes == "first try"
    assert saved.saved_estimate["per_gpu"]["components"]["kv_cache"] == 2 * 1024 * 1000

    code, out, _ = run(capsys, "list", "--json")
    doc = json.loads(out)
    assert doc["schema"] == "vramgui.profiles/1"
    [item] = doc["profiles"]
    assert item["name"] == "Small plan" and item["readable"]
    assert item["saved_total_bytes"] == saved.saved_estimate["per_gpu"]["total_bytes"]

    code, out, _ = run(capsys, "list")
    assert "Small plan" in out and "llama-3.2-1b" in out

    # Same core: reopening gives the same figures.
    code, out, _ = run(capsys, "show", "Small plan", "--json")
    doc = json.loads(out)
    assert doc["changes"] == [] and doc["estimate"] == saved.saved_estimate
    assert scripted.calls[-1][1] == saved.workload and scripted.calls[-1][2] == ["RTX 4090"]


def test_show_reports_what_changed_since_saving(capsys, monkeypatch, scripted):
    assert run(capsys, "save", "Plan", "llama-3.2-1b", "--seq", "4096", "--gpu", "RTX 4090")[0] == 0
    monkeypatch.setattr(profile_cli, "estimate_for", ScriptedEstimate(scale=3000))
    code, out, _ = run(capsys, "show", "plan", "--json")
    assert code == 0
    changes = {c["figure"]: (c["saved"], c["now"]) for c in json.loads(out)["changes"]}
    assert changes["per_gpu.components.kv_cache"] == (4096 * 1000, 4096 * 3000)
    assert "per_gpu.total_bytes" in changes and "fit.RTX 4090.headroom_bytes" in changes
    assert "per_gpu.components.weights" not in changes
    code, out, _ = run(capsys, "show", "plan")
    assert "kv_cache" in out and "changed since saving" in out


def test_show_without_the_model_falls_back_to_the_saved_estimate(capsys, tmp_path, scripted):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_tiny_llama()))
    assert run(capsys, "save", "Local", str(config))[0] == 0
    assert ProfileStore().get("Local").model.kind in ("config", "local")
    config.unlink()
    code, out, _ = run(capsys, "show", "Local", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["estimate"] is None
    assert any("cannot re-estimate" in n for n in doc["notices"])
    assert doc["saved_estimate"]["per_gpu"]["total_bytes"] > 0


def test_compare(capsys, scripted):
    run(capsys, "save", "A", "llama-3.2-1b", "--batch", "1", "--gpu", "RTX 4090")
    run(capsys, "save", "B", "qwen2.5-0.5b", "--batch", "4", "--gpu", "RTX 4090")
    code, out, _ = run(capsys, "compare", "A", "b", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [p["name"] for p in doc["profiles"]] == ["A", "B"]
    assert "batch" in doc["differences"] and "seq" not in doc["differences"]
    assert all(p["re_estimated"] for p in doc["profiles"])
    code, out, _ = run(capsys, "compare", "A", "B")
    assert "* batch" in out and "* model" in out and "fits RTX 4090" in out
    assert "total per GPU" in out


def test_user_errors_exit_2_with_one_line(capsys, scripted):
    run(capsys, "save", "A", "llama-3.2-1b")
    code, _, err = run(capsys, "save", "a", "llama-3.2-1b")
    assert code == 2 and "a profile named 'A' exists" in err and "Traceback" not in err
    assert run(capsys, "save", "a", "llama-3.2-1b", "--overwrite", "--batch", "3")[0] == 0
    assert ProfileStore().get("A").workload.batch == 3
    code, _, err = run(capsys, "show", "nothing")
    assert code == 2 and "no profile named 'nothing'" in err
    code, _, err = run(capsys, "save", "X", "no-such-model-anywhere")
    assert code == 2 and err.count("\n") == 1
    assert ProfileStore().names() == ["a"]  # an overwrite takes the spelling it was given


def test_list_shows_unreadable_files(capsys, scripted):
    run(capsys, "save", "Good", "llama-3.2-1b")
    bad = ProfileStore().directory / "broken.json"
    bad.write_text('{"format": "vramgui.profile", "forma')
    code, out, _ = run(capsys, "list")
    assert code == 0 and "Good" in out and "unreadable" in out
    doc = json.loads(run(capsys, "list", "--json")[1])
    assert [p["readable"] for p in doc["profiles"]] == [True, False]
    assert bad.read_text() == '{"format": "vramgui.profile", "forma'


def test_export_import(capsys, tmp_path, scripted):
    run(capsys, "save", "A", "llama-3.2-1b")
    run(capsys, "save", "B", "qwen2.5-0.5b")
    bundle = tmp_path / "share.json"
    code, out, _ = run(capsys, "export", str(bundle), "A")
    assert code == 0 and "exported 1 profile" in out
    code, out, _ = run(capsys, "import", str(bundle))
    assert code == 0 and "A (2)" in out
    assert sorted(ProfileStore().names()) == ["A", "A (2)", "B"]


def test_source_of_hub_refs():
    assert source_of(ModelRef("hub", "org/name")) == "org/name"
    ref = ModelRef("hub", "org/name-GGUF", revision="abc", file="m-Q4_K_M.gguf")
    assert source_of(ref) == "org/name-GGUF@abc:m-Q4_K_M.gguf"
    assert source_of(ModelRef("local", "/m/x.gguf")) == "/m/x.gguf"


def _tiny_llama():
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 512,
        "tie_word_embeddings": False,
    }  # fmt: skip


def test_real_estimate_reopens_identically(capsys):
    # No stand-in: a profile saved by this version reopens with the very same estimate.
    code, _, err = run(capsys, "save", "Real", "qwen2.5-0.5b", "--seq", "1024", "--gpu", "RTX 4090")
    assert code == 0, err
    saved = ProfileStore().get("Real").saved_estimate
    assert saved["schema"] == "vramgui.estimate/1" and saved["per_gpu"]["total_bytes"] > 0
    doc = json.loads(run(capsys, "show", "Real", "--json")[1])
    assert doc["changes"] == [] and doc["estimate"] == saved
