"""``vramgui profile ...`` end to end, with the estimate replaced by a scripted one where the test
needs the figures to change between saving and reopening (as they do when the core improves)."""

import dataclasses
import io
import json
import os
import sys

import pytest

from vramgui.cli import main
from vramgui.core.model import ModelRef
from vramgui.profiles import ProfileStore, source_of


class ScriptedEstimate:
    """Stands in for vramgui.answers.documents.timed_document (what profiles are saved and
    reopened with): a document whose figures follow the workload."""

    def __init__(self, scale=1000):
        self.scale = scale
        self.calls = []

    def __call__(self, spec, workload, capacities, **_timing):
        gpu_names = [name for name, _ in capacities]
        self.calls.append((spec.name, workload, gpu_names))
        weights = spec.parameters * 2
        kv = workload.batch * workload.seq * self.scale
        return {
            "schema": "vramgui.estimate/1",
            "model": {"name": spec.name, "parameters": spec.parameters},
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
    monkeypatch.setattr("vramgui.answers.documents.timed_document", fake)
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
    monkeypatch.setattr("vramgui.answers.documents.timed_document", ScriptedEstimate(scale=3000))
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
    assert "--update" in err and err.count("\n") == 1
    code, _, err = run(capsys, "show", "nothing")
    assert code == 2 and "no profile named 'nothing'" in err
    code, _, err = run(capsys, "save", "X", "no-such-model-anywhere")
    assert code == 2 and err.count("\n") == 1
    assert ProfileStore().names() == ["A"]


def test_a_second_save_never_replaces_and_an_update_can_be_undone(capsys, scripted):
    # The new user's first day: a Q4_K_M plan was replaced by a Q2_K one without a word.
    q4 = ("--engine", "llamacpp", "--quant", "Q4_K_M")
    q2 = ("--engine", "llamacpp", "--quant", "Q2_K")
    assert run(capsys, "save", "Plan", "llama-3.2-1b", *q4, "--notes", "for the laptop")[0] == 0
    code, out, err = run(capsys, "save", "Plan", "llama-3.2-1b", *q2)
    assert code == 2 and "exists" in err
    assert ProfileStore().get("Plan").workload.quant == "Q4_K_M"

    code, out, _ = run(capsys, "save", "Plan", "llama-3.2-1b", *q2, "--update")
    assert code == 0 and "updated profile 'Plan'" in out
    assert "vramgui profile restore Plan" in out
    updated = ProfileStore().get("Plan")
    assert updated.workload.quant == "Q2_K" and updated.notes == "for the laptop"

    code, out, _ = run(capsys, "versions", "plan")
    assert code == 0 and "Q4_K_M" in out and "Q2_K" not in out
    doc = json.loads(run(capsys, "versions", "Plan", "--json")[1])
    assert [v["workload"]["quant"] for v in doc["versions"]] == ["Q4_K_M"]

    code, out, _ = run(capsys, "restore", "Plan")
    assert code == 0 and "restored 'Plan'" in out
    assert ProfileStore().get("Plan").workload.quant == "Q4_K_M"
    # The Q2_K setup it replaced is kept too: restoring again brings it back.
    assert run(capsys, "restore", "Plan")[0] == 0
    assert ProfileStore().get("Plan").workload.quant == "Q2_K"

    code, _, err = run(capsys, "restore", "Plan", "9")
    assert code == 2 and "pick 1 to 3" in err
    code, _, err = run(capsys, "restore", "Other")
    assert code == 2 and "no earlier version of 'Other'" in err


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
    code, _, err = run(capsys, "export", str(bundle), "A")
    assert code == 0 and "exported 1 profile" in err
    code, out, _ = run(capsys, "import", str(bundle))
    assert code == 0 and "A (2)" in out
    assert sorted(ProfileStore().names()) == ["A", "A (2)", "B"]


def test_export_to_standard_output_and_import_from_standard_input(capsys, monkeypatch, scripted):
    run(capsys, "save", "A", "llama-3.2-1b")
    code, out, err = run(capsys, "export", "-")
    assert code == 0 and "exported 1 profile(s) to standard output" in err
    assert json.loads(out)["profiles"][0]["name"] == "A"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(out.encode())))
    code, out, _ = run(capsys, "import", "-")
    assert code == 0 and "A (2)" in out


def test_export_refuses_special_files_and_replaces_only_with_force(capsys, tmp_path, scripted):
    run(capsys, "save", "A", "llama-3.2-1b")
    link = tmp_path / "stdout"
    link.symlink_to("/dev/stdout")
    code, _, err = run(capsys, "export", str(link))
    assert code == 2 and "is a symbolic link" in err and link.is_symlink()
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    code, _, err = run(capsys, "export", str(pipe), "--force")
    assert code == 2 and "is a named pipe" in err and pipe.is_fifo()
    existing = tmp_path / "notes.json"
    existing.write_text("my notes")
    code, _, err = run(capsys, "export", str(existing))
    assert code == 2 and "add --force" in err and existing.read_text() == "my notes"
    assert run(capsys, "export", str(existing), "--force")[0] == 0
    assert json.loads(existing.read_text())["format"] == "vramgui.profiles"


def test_one_bad_profile_leaves_every_command_working(capsys, tmp_path, scripted):
    # A 401-digit number made list, show, compare, export and save fail with OverflowError;
    # `per_gpu: "x"` crashed `profile list`, `fit: 5` and `components: []` crashed `show`.
    run(capsys, "save", "Good", "llama-3.2-1b", "--gpu", "RTX 4090")
    good = ProfileStore().get("Good").to_dict()
    folder = ProfileStore().directory
    bad = {
        "gmu": ("workload", "gpu-memory-utilization", 10**400),
        "mtime": ("model", "mtime", 10**400),
        "per-gpu": ("saved_estimate", "per_gpu", "x"),
        "fit": ("saved_estimate", "fit", 5),
    }
    for stem, (section, key, value) in bad.items():
        doc = json.loads(json.dumps(good))
        doc["name"] = f"Bad {stem}"
        doc[section][key] = value
        (folder / f"{stem}.json").write_text(json.dumps(doc))
    components = json.loads(json.dumps(good))
    components["name"] = "Bad components"
    components["saved_estimate"]["per_gpu"]["components"] = []
    (folder / "components.json").write_text(json.dumps(components))

    code, out, err = run(capsys, "list")
    assert code == 0 and "Traceback" not in err
    assert out.count("unreadable: bad profile field") == 5
    listed = json.loads(run(capsys, "list", "--json")[1])["profiles"]
    assert [p["readable"] for p in listed] == [True] + [False] * 5
    assert run(capsys, "show", "Good")[0] == 0
    assert run(capsys, "compare", "Good", "good")[0] == 0
    assert run(capsys, "save", "New", "llama-3.2-1b")[0] == 0
    code, _, err = run(capsys, "export", str(tmp_path / "all.json"))
    assert code == 0 and "5 unreadable profile file(s) left out" in err
    code, _, err = run(capsys, "show", "Bad fit")
    assert code == 2 and "'saved_estimate.fit' must be a list" in err


def test_a_model_path_that_is_no_path_here_leaves_the_saved_estimate(capsys, scripted):
    # `~user` paths and 300-character names raised from the path code in `profile show`.
    run(capsys, "save", "Good", "llama-3.2-1b")
    store = ProfileStore()
    good = store.get("Good")
    for name, path in (("Tilde", "~nosuchuser/" + "m" * 300), ("Long", "/" + "x" * 300)):
        ref = ModelRef("local", path, size_bytes=1, mtime=1.0)
        store.save(dataclasses.replace(good, name=name, model=ref))
        code, out, err = run(capsys, "show", name)
        assert code == 0 and "cannot re-estimate now" in out, err
    code, out, _ = run(capsys, "compare", "Good", "Tilde", "Long", "--json")
    doc = json.loads(out)
    assert code == 0 and [p["re_estimated"] for p in doc["profiles"]] == [True, False, False]


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


def test_gguf_files_and_ollama_models_are_saved_as_estimate_reads_them(
    capsys, tmp_path, monkeypatch
):
    from tests.fakehub.files import write_gguf
    from tests.fakehub.stores import ollama_model

    gguf = tmp_path / "tiny.Q4_K_M.gguf"
    write_gguf(gguf)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    ollama_model(tmp_path / "ollama", "tiny", "q4", gguf)
    for name, source in (("file", str(gguf)), ("ollama", "ollama:tiny:q4")):
        code, _, err = run(capsys, "save", name, source)
        assert code == 0, err  # served by llama.cpp, as `estimate` serves it
        assert ProfileStore().get(name).workload.engine == "llamacpp"
        code, _, err = run(capsys, "save", f"{name} again", source, "--engine", "llamacpp")
        assert code == 0, err
    # An Ollama model is kept by its name, not by the blob it was pulled into.
    saved = ProfileStore().get("ollama again")
    assert (saved.model.kind, saved.model.id) == ("ollama", "tiny:q4")
    assert source_of(saved.model) == "ollama:tiny:q4"
    code, out, _ = run(capsys, "show", "ollama again")
    assert code == 0 and "model: ollama:tiny:q4" in out
    assert "Same figures as when saved." in out
    doc = json.loads(run(capsys, "show", "ollama again", "--json")[1])
    assert doc["changes"] == []
    code, out, _ = run(capsys, "list")
    assert "tiny:q4" in out and "sha256-" not in out


def test_compare_leaves_out_settings_that_do_not_apply(capsys):
    run(capsys, "save", "serve", "qwen2.5-0.5b", "--lora-rank", "8", "--seq", "1024")
    run(capsys, "save", "serve more", "qwen2.5-0.5b", "--lora-rank", "64", "--seq", "2048")
    doc = json.loads(run(capsys, "compare", "serve", "serve more", "--json")[1])
    assert doc["differences"] == ["seq"]  # a LoRA rank does nothing when serving
    run(capsys, "save", "tune", "qwen2.5-0.5b", "--mode", "training", "--engine", "vllm")
    run(capsys, "save", "tune more", "qwen2.5-0.5b", "--mode", "training", "--batch", "2")
    doc = json.loads(run(capsys, "compare", "tune", "tune more", "--json")[1])
    assert doc["differences"] == ["batch"]  # nor an engine when training
    code, out, _ = run(capsys, "compare", "serve", "tune")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("* optimizer"))
    assert row.split()[2:] == ["-", "adamw"]  # not a setting of the inference profile
