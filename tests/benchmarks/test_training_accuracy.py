"""The training accuracy benchmark's own collection of published figures, and its loop pairs."""

import json

import pytest

from benchmarks import training_accuracy


@pytest.fixture
def own_collection_only(monkeypatch, tmp_path):
    """The project's published figures alone, whether or not ../shared sits beside the checkout."""
    monkeypatch.setattr(training_accuracy, "PUBLISHED", tmp_path / "absent.json")


def test_every_published_case_names_its_source_versions_and_what_was_measured():
    doc = json.loads(training_accuracy.PUBLISHED_TRAINING.read_text())
    assert doc["cases"]
    for case in doc["cases"]:
        assert case["source"] and case["gpu"] and case["versions"]["bitsandbytes"]
        assert case["measured"]["what"] == "peak_allocated" and case["measured"]["bytes"] > 0
        assert case["conditions"] and case["not_modelled"]


def test_published_rows_include_the_projects_collection(own_collection_only):
    rows = training_accuracy.published_rows()
    ids = {r["id"] for r in rows}
    assert "fms-mistral-7b-qlora-nf4-fsdp2-bs2" in ids
    assert all(r["approximate"] for r in rows)  # each lists what the estimate leaves out


def test_sharded_four_bit_weights_match_what_the_runs_held(own_collection_only):
    """Held after training under FSDP: the codes divided, the quant state whole, 16-bit rest."""
    rows = [
        r for r in training_accuracy.resident_rows() if "qlora" in r["id"] and "fsdp" in r["id"]
    ]
    assert len(rows) >= 3
    for r in rows:
        assert abs(r["error"]) < 0.05, r["id"]
        assert r["if_divided"] < r["estimate"]


def test_the_custom_loop_adds_what_was_measured():
    pairs = training_accuracy.loop_rows(training_accuracy.rows())
    assert len(pairs) >= 8
    for p in pairs:
        assert p["measured_extra"] > 0
        assert abs(p["estimated_extra"] / p["measured_extra"] - 1) < 0.01, p["id"]


def test_mixtral_qlora_follows_the_transformers_release_it_ran(own_collection_only):
    """fms-acceleration's Mixtral-8x7B QLoRA runs (transformers 4.48: one nn.Linear per expert,
    quantized by bitsandbytes) against the estimate under that release; transformers 5's
    stacked experts, left in 16 bits and upcast to fp32, would be several times the figure."""
    peaks = {r["id"]: r for r in training_accuracy.published_rows() if "mixtral" in r["id"]}
    held = {r["id"]: r for r in training_accuracy.resident_rows() if "mixtral" in r["id"]}
    assert len(peaks) == len(held) == 4
    for case_id, row in peaks.items():
        assert abs(row["error"]) < 0.10, case_id
        assert abs(held[case_id]["error"]) < 0.05, case_id
    doc = json.loads(training_accuracy.PUBLISHED_TRAINING.read_text())
    case = next(c for c in doc["cases"] if c["id"] == "fms-mixtral-8x7b-qlora-nf4-bs4")
    spec = training_accuracy.spec_from_config(
        training_accuracy.load_config(case["model"]), case["model"]
    )
    five = training_accuracy.workload_of(case["settings"], "mixtral", {"transformers": "5.0"})
    stacked = training_accuracy.training_estimate(spec, five).total_bytes
    assert stacked > 3 * case["measured"]["bytes"]


def test_published_rows_read_the_shared_collection_beside_the_projects():
    # The shared collection (benchmarks/data/published.json) holds inference cases whose models
    # carry no config.json there (a GGUF's size): the training rows are read all the same.
    shared = json.loads(training_accuracy.PUBLISHED.read_text())
    training = {
        c["id"]
        for c in shared["cases"]
        if c["settings"].get("mode") == "training" and "bytes" in c["measured"]
    }
    assert any(c["settings"].get("mode") != "training" for c in shared["cases"])
    ids = {r["id"] for r in training_accuracy.published_rows()}
    assert training and training <= ids
