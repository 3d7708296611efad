"""docs/accuracy.md's section on `vramgui measure` (no torch needed)."""

import json

from benchmarks import accuracy


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
