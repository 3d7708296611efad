"""Command-line values that pass a loose range check and then overflow a figure."""

import pytest

from vramgui.cli import main


@pytest.mark.parametrize("value", ["1e-300", "5e-324", "0.005", "nan", "inf", "-0.0"])
@pytest.mark.parametrize(
    ("engine", "flag"),
    [("vllm", "--gpu-memory-utilization"), ("sglang", "--mem-fraction-static")],
)
def test_a_memory_share_too_small_to_run_is_refused(capsys, engine, flag, value):
    """1e-300 passed (0, 1] and raised OverflowError (a budget divided by it)."""
    argv = ["estimate", "smollm-135m", "--engine", engine, flag, value, "--gpu", "RTX 4090"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag.removeprefix('--')} must be from 0.01 to 1" in err


def test_the_smallest_memory_share_still_estimates(capsys):
    argv = ["estimate", "smollm-135m", "--engine", "vllm", "--gpu-memory-utilization", "0.01"]
    assert main([*argv, "--gpu", "RTX 4090", "--json"]) == 0
