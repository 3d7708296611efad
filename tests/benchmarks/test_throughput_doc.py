"""docs/performance.md's training-time tables are what benchmarks/throughput.py prints now."""

from pathlib import Path

from benchmarks import throughput

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def test_the_document_holds_the_benchmarks_current_tables():
    tables = throughput.table(throughput.rows(throughput.load_cases()), markdown=True).strip()
    assert tables in DOC.read_text(), "re-run `python -m benchmarks.throughput --markdown`"


def test_the_cases_cover_every_method_gpu_kind_and_one_and_several_gpus():
    cases = throughput.load_cases()
    tuning = [c for c in cases if c["set"] == "tuning"]
    assert len(tuning) >= 12
    assert {c["method"] for c in tuning} == {"full", "lora", "qlora"}
    assert {c["gpu"] for c in tuning} >= {"A100 SXM 80GB", "H100 SXM", "RTX 4090"}
    assert {c["gpu_count"] == 1 for c in tuning} == {True, False}
    assert all(c["source"] and c["conditions"] for c in cases)
    assert len({c["id"] for c in cases}) == len(cases)
