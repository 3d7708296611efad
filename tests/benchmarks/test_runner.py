"""The case runner's data file: records are merged, never lost (no torch needed)."""

import json

from benchmarks.harness.cases import INFERENCE_CASES
from benchmarks.harness.run import load_records, store_result


def test_records_from_two_runners_are_both_kept(tmp_path):
    path = tmp_path / "measured_inference.json"
    first, second = INFERENCE_CASES[0], INFERENCE_CASES[1]
    store_result(path, "inference", second, {"peak_bytes": 2, "phase": "prefill"})
    store_result(path, "inference", first, {"peak_bytes": 1, "phase": "prefill"})
    document = json.loads(path.read_text())
    assert [r["id"] for r in document["cases"]] == [first.id, second.id]
    assert document["cases"][0]["measured_at"]


def test_a_failure_replaces_the_earlier_record_of_its_case(tmp_path):
    path = tmp_path / "measured_inference.json"
    case = INFERENCE_CASES[0]
    store_result(path, "inference", case, {"peak_bytes": 1, "phase": "prefill"})
    store_result(path, "inference", case, {"error": "RuntimeError: boom"})
    document = load_records(path)
    assert document["cases"] == []
    assert document["failures"] == [
        {"id": case.id, "model": case.model, "error": "RuntimeError: boom"}
    ]
