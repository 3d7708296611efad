"""`vramgui estimate --mode training --gpu ... --train-tokens`: the speed block, time and cost."""

import argparse
import json

import pytest

from vramgui.cli import main
from vramgui.cli.estimate import parse_count
from vramgui.core.units import format_duration
from vramgui.hardware.gpus import find_gpu

LLAMA = {
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    return str(path)


def _json(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_training_on_a_catalog_gpu_has_tokens_per_second_and_step_time(capsys, config_path):
    doc = _json(capsys, "estimate", config_path, "--mode", "training", "--gpu", "A100 80GB")
    speed = doc["speed"]
    assert speed["gpu"] == "A100 SXM 80GB"
    assert speed["tokens_per_second"] > 0
    assert speed["step_seconds"] == pytest.approx(
        speed["tokens_per_step"] / speed["tokens_per_second"], rel=1e-3
    )
    assert speed["utilization"]["source"] == "default"
    assert "time_seconds" not in speed  # no tokens asked for


def test_train_tokens_give_time_gpu_hours_and_cost_with_the_price_named(capsys, config_path):
    doc = _json(
        capsys, "estimate", config_path, "--mode", "training", "--gpu", "H100", "--gpus", "2",
        "--train-tokens", "200M",
    )  # fmt: skip
    speed = doc["speed"]
    gpu = find_gpu("H100")
    assert speed["train_tokens"] == 200_000_000
    assert speed["time_seconds"] == pytest.approx(2e8 / speed["tokens_per_second"], rel=1e-3)
    assert speed["gpu_hours"] == pytest.approx(2 * speed["time_seconds"] / 3600, rel=1e-3)
    assert speed["cost"] == pytest.approx(speed["gpu_hours"] * gpu.rent_usd_per_hour, rel=1e-3)
    assert speed["currency"] == "USD"
    assert speed["price_source"] == gpu.rent_source
    assert speed["price"]["date"] == gpu.rent_date


def test_epochs_over_a_dataset_and_a_price_of_ones_own(capsys, config_path):
    doc = _json(
        capsys, "estimate", config_path, "--mode", "training", "--gpu", "RTX 4090",
        "--dataset-tokens", "50M", "--epochs", "3", "--price-per-hour", "0.4", "--currency", "EUR",
    )  # fmt: skip
    speed = doc["speed"]
    assert speed["train_tokens"] == 150_000_000
    assert speed["cost"] == pytest.approx(speed["gpu_hours"] * 0.4, rel=1e-2)
    assert (speed["currency"], speed["price_source"]) == ("EUR", "set with --price-per-hour")


def test_a_utilization_of_ones_own_is_used_and_said(capsys, config_path):
    base = _json(capsys, "estimate", config_path, "--mode", "training", "--gpu", "L40S")
    mine = _json(
        capsys, "estimate", config_path, "--mode", "training", "--gpu", "L40S",
        "--matmul-utilization", "0.3",
    )  # fmt: skip
    assert mine["speed"]["utilization"]["source"] == "set"
    assert mine["speed"]["tokens_per_second"] < base["speed"]["tokens_per_second"]


def test_the_table_shows_the_speed_and_the_run(capsys, config_path):
    assert main(["estimate", config_path, "--mode", "training", "--gpu", "A100 80GB",
                 "--train-tokens", "1B"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "speed on A100 SXM 80GB:" in out and "tokens/s" in out
    assert "1,000,000,000 tokens:" in out and "GPU-hours" in out and "per GPU-hour" in out


def test_a_gpu_without_a_rental_price_gives_time_but_no_cost(capsys, config_path):
    doc = _json(
        capsys, "estimate", config_path, "--mode", "training", "--gpu", "RTX 3060",
        "--train-tokens", "10M",
    )  # fmt: skip
    assert doc["speed"]["cost"] is None and doc["speed"]["time_seconds"] > 0


def test_inference_has_a_serving_block_instead(capsys, config_path):
    doc = _json(capsys, "estimate", config_path, "--gpu", "A100 80GB", "--batch", "16")
    assert "speed" not in doc
    serving = doc["serving"]
    assert serving["concurrency"] == 16 and serving["tokens_per_second"] > 0
    price = serving["price"]["per_gpu_hour"]
    assert serving["cost_per_million_tokens"] == pytest.approx(
        price / 3600 / serving["tokens_per_second"] * 1e6, rel=1e-3
    )
    assert main(["estimate", config_path, "--gpu", "A100 80GB", "--batch", "16"]) == 0
    assert "serving on A100 SXM 80GB:" in capsys.readouterr().out


def test_a_gpu_without_a_tensor_rate_gets_a_note_not_an_error(capsys, config_path):
    doc = _json(capsys, "estimate", config_path, "--mode", "training", "--gpu", "M2 Ultra")
    assert doc["speed"] is None
    assert any("no speed" in note and "tensor rate" in note for note in doc["notes"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--epochs", "2"], "--epochs needs --dataset-tokens"),
        (["--train-tokens", "1M", "--dataset-tokens", "1M"], "not both"),
        (["--train-tokens", "1M", "--mode", "inference"], "need --mode training"),
        (["--train-tokens", "lots"], "not a token count"),
        (["--matmul-utilization", "1.5", "--mode", "training"], "must be in (0, 1]"),
        (["--price-per-hour", "-2", "--mode", "training"], "price per GPU-hour"),
    ],
)
def test_bad_speed_options_exit_2_with_one_line(capsys, config_path, args, message):
    try:
        code = main(["estimate", config_path, "--gpu", "A100 80GB", *args])
    except SystemExit as exit_:  # argparse refuses a bad value itself
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "text, value",
    [("200M", 200_000_000), ("1.5B", 1_500_000_000), ("500k", 500_000), ("2e9", 2_000_000_000),
     ("1,000", 1000), ("7", 7)],
)  # fmt: skip
def test_token_counts_read_as_people_write_them(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["0", "-5M", "M", "", "1e30"])
def test_impossible_token_counts_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_count(text)


def test_durations_read_at_a_glance():
    assert [format_duration(s) for s in (5, 600, 7200, 3 * 86400)] == [
        "5 s", "10 min", "2.0 h", "3.0 days",
    ]  # fmt: skip


def test_rank_by_cost_lists_the_catalog_gpus_that_fit_cheapest_run_first(capsys, config_path):
    doc = _json(
        capsys, "estimate", config_path, "--mode", "training", "--method", "lora",
        "--train-tokens", "100M", "--rank", "cost",
    )  # fmt: skip
    ranked = doc["ranked"]
    priced = [r for r in ranked if r["cost"] is not None]
    assert len(priced) >= 3
    assert [r["cost"] for r in priced] == sorted(r["cost"] for r in priced)
    assert ranked.index(priced[-1]) < len(ranked) - 1 or len(priced) == len(ranked)
    assert all(r["price"]["source"] for r in priced)


def test_rank_by_time_for_serving(capsys, config_path):
    doc = _json(capsys, "estimate", config_path, "--batch", "16", "--rank", "time")
    speeds = [r["tokens_per_second"] for r in doc["ranked"]]
    assert speeds == sorted(speeds, reverse=True)
    assert all(r["time_seconds"] is None for r in doc["ranked"])
    assert main(["estimate", config_path, "--batch", "16", "--rank", "cost"]) == 0
    assert "per million tokens generated" in capsys.readouterr().out


def test_the_rank_choices_are_the_cores():
    from vramgui.cli import estimate
    from vramgui.core import fit

    assert estimate.RANK_KEYS == fit.RANK_KEYS


def test_a_calibration_measured_on_the_gpu_replaces_the_default_and_says_so(capsys, config_path):
    import datetime as dt

    from vramgui.core.families import spec_from_config
    from vramgui.core.workload import Workload
    from vramgui.hardware import calibration
    from vramgui.hardware.rates import speed_hardware

    hardware = speed_hardware(find_gpu("A100 80GB"), "bf16")
    spec = spec_from_config(LLAMA, "tiny")
    work = Workload(mode="training", batch=8, seq=2048)
    from vramgui.core.speed import Utilization, training_speed

    slow = training_speed(spec, work, hardware, Utilization(matmul=0.3, attention=0.225))
    stored = calibration.calibrate(
        spec, work, hardware, tokens_per_second=slow.tokens_per_second, device="NVIDIA A100",
        now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
    )  # fmt: skip
    calibration.save(stored)
    args = ("estimate", config_path, "--mode", "training", "--gpu", "A100 80GB")
    doc = _json(capsys, *args)
    u = doc["speed"]["utilization"]
    assert (u["source"], u["matmul"]) == ("measured", pytest.approx(0.3, abs=1e-3))
    assert "NVIDIA A100" in u["detail"] and "2026-12-01" in u["detail"]
    assert main([*args]) == 0
    assert "measured: NVIDIA A100" in capsys.readouterr().out
    mine = _json(capsys, *args, "--matmul-utilization", "0.5")
    assert mine["speed"]["utilization"]["source"] == "set"
    other = _json(capsys, "estimate", config_path, "--mode", "training", "--gpu", "H100")
    assert other["speed"]["utilization"]["source"] == "default"  # only the GPU measured


@pytest.mark.parametrize("gpu", ["T4", "Apple M2 Ultra 192GB"])
def test_llamacpp_is_timed_as_plan_times_it_on_gpus_without_a_bf16_rate(capsys, gpu):
    """llama.cpp multiplies in fp16 whatever the checkpoint's dtype: a T4 (no bf16) and an
    Apple GPU (no tensor cores, its ALU peak) get the speed ``plan`` gives, with a first token."""
    args = ("llama-3.1-8b", "--quant", "Q4_K_M", "--gpu", gpu)
    serving = _json(capsys, "estimate", *args, "--engine", "llamacpp")["serving"]
    plan = _json(capsys, "plan", *args)
    assert serving["decode_tokens_per_second"] == pytest.approx(plan["tokens_per_second"], rel=1e-3)
    assert serving["time_to_first_token_seconds"] == pytest.approx(
        plan["prefill_seconds"], rel=1e-3
    )
    assert serving["basis"] == "extrapolated"


def test_a_host_bound_serving_step_gives_the_range_of_the_host_classes(capsys, config_path):
    """A 1.1B model under vLLM at one request: the engine's fixed time bounds the step, and the
    host's CPU sets that time, so the figure (the slow host class) comes with the fast class's
    speed as a range, in the JSON, its note and the text line; the roofline of transformers has
    no host classes and no range."""
    args = ("estimate", config_path, "--engine", "vllm", "--gpu", "H100", "--batch", "1")
    serving = _json(capsys, *args)["serving"]
    low, high = serving["host_range_tokens_per_second"]
    assert serving["bound"] == "host"
    assert low == serving["tokens_per_second"] and high > 1.5 * low
    assert any(f"{low:,.0f} to {high:,.0f} tokens/s by the host" in n for n in serving["notes"])
    assert main(list(args)) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("serving on"))
    assert f"{low:,.0f} to {high:,.0f} by the host's CPU" in line
    roofline = _json(capsys, "estimate", config_path, "--gpu", "H100", "--batch", "1")["serving"]
    assert roofline["host_range_tokens_per_second"] is None
