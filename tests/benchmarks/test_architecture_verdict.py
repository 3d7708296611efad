"""benchmarks/architectures.py's verdict on each type (no torch needed)."""

import json

from benchmarks import architectures


def _points(errors: list[tuple[int, int, float]], config: int = 0) -> list[dict]:
    return [
        {"config": config, "batch": b, "seq": s, "error": e, "hidden": 64} for b, s, e in errors
    ]


def test_an_error_beyond_three_percent_that_grows_with_the_prompt_fails():
    v = architectures.verdict(_points([(4, 512, 0.001), (1, 8192, 0.02), (4, 32768, 0.06)]))
    assert v["grows"]
    assert v["worst_error"] == 0.06 and v["worst_shape"] == [4, 32768]


def test_a_steady_error_or_one_within_three_percent_does_not():
    steady = architectures.verdict(_points([(4, 512, -0.05), (4, 32768, -0.05)]))
    small = architectures.verdict(_points([(4, 512, 0.0), (4, 32768, 0.029)]))
    assert not steady["grows"] and not small["grows"]


def test_the_range_checked_covers_the_default_shapes_and_every_size():
    points = _points([(4, 512, 0.0), (3, 1500, 0.0), (4, 32768, 0.0)])
    points += [{"config": 2, "batch": 1, "seq": 4000, "error": 0.04, "hidden": 32}]
    v = architectures.verdict(points)
    assert v["seq"] == [512, 32768] and v["batch"] == 4
    assert v["hidden"] == [32, 64]
    assert v["worst_error"] == 0.04  # the sizes count towards the worst error
    assert [e[:2] for e in v["errors"]] == [[4, 512], [3, 1500], [4, 32768]]


def test_a_type_with_no_measurement_has_no_verdict():
    assert architectures.verdict([{"config": 0, "batch": 1, "seq": 8, "measure_error": "x"}]) == {}


def test_every_default_config_gets_four_shapes_within_its_learned_positions():
    """A type whose learned positions cut the benchmark's prompts (bert's 512, blenderbot's 128)
    is measured at shorter prompts instead, never at fewer than four shapes."""
    cases = json.loads(architectures.CASES.read_text())["types"]
    plan = [(0, b, s) for b, s in architectures.SHAPES]
    for model_type in ("bert", "blenderbot", "bart", "llama"):
        configs = [c["config"] for c in cases[model_type]]
        default = [(b, s) for i, b, s in architectures.shaped_plan(configs, plan) if i == 0]
        longest = architectures._longest(configs[0]) or max(s for _, s in architectures.SHAPES)
        assert len(set(default)) >= architectures.MIN_SHAPES, model_type
        assert all(s <= longest for _, s in default), model_type
    llama = [c["config"] for c in cases["llama"]]
    assert architectures.shaped_plan(llama, plan) == plan  # nothing cut, nothing added
