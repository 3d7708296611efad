"""docs/accuracy.md: its section on `vramgui measure` (no torch needed), its percentages."""

import json
import re
from pathlib import Path

import pytest

from benchmarks import accuracy
from benchmarks.percent import signed

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [(0.0123, 1, "+1.2%"), (-0.004, 1, "-0.4%"), (-0.00001, 2, "0.00%"), (0.00004, 2, "0.00%")],
)
def test_an_error_that_rounds_to_nothing_has_no_sign(value, digits, text):
    assert signed(value, digits) == text


def test_the_document_shows_no_signed_zero():
    """F1 once opened tables of "-0.00%"."""
    assert re.findall(r"[-+]0\.0*%", (DOCS / "accuracy.md").read_text(encoding="utf-8")) == []


def test_the_document_says_the_gpu_path_is_not_run_yet_and_lists_the_limits(tmp_path, monkeypatch):
    limits = tmp_path / "measure_limits.json"
    case = {"model": "big", "options": "--seq 8", "parameters": 10**12, "wall_seconds": 9.0,
            "run_seconds": 4.0, "host_peak_rss_bytes": 400 * 2**20,
            "measured_tensor_bytes": 2**40, "error": -0.01, "math_kernel_calls": 0}  # fmt: skip
    failed = {"model": "odd", "options": "", "error": "vramgui: no"}
    limits.write_text(json.dumps({"machine": "m", "cases": [case, failed]}))
    monkeypatch.setattr(accuracy, "LIMITS", limits)
    text = "\n".join(accuracy.measure_section())
    assert "not been run on GPU hardware yet" in text
    assert (
        "| big | --seq 8 | 1,000,000,000,000 | 9.0 | 4.0 | 400 | 1,024.000 | -1.00% | 0 |" in text
    )
    assert "| odd |  | failed: vramgui: no |" in text
