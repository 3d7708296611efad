"""llama.cpp's speed is the one published llama-bench rows measured, in every front end:
``estimate --json``, ``plan --json``, the window's time / cost line and the GPUs-to-rent
ranking, each saying whether the figure is measured or extrapolated."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from vramgui.answers.host import host_settings
from vramgui.answers.rates import catalog_rates, rates_for
from vramgui.answers.timing import Timing, rank_setups
from vramgui.cli import main
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import load_catalog
from vramgui.sources.resolve import load_model
from vramgui.ui import timing
from vramgui.ui.controller import EstimateController

ROWS = Path(__file__).parents[2] / "benchmarks" / "data" / "llama_bench.json"
A100 = "A100 SXM 80GB"
RTX4090 = "RTX 4090"
# llama-bench's own settings for the published rows: -fa off, a 512-token test.
SETUP = ("llama-3-8b", "--engine", "llamacpp", "--quant", "Q4_K_M", "--seq", "512",
         "--prompt", "512", "--attention", "eager", "--ram-gib", "64")  # fmt: skip
# A current build's generation measured on an RTX 4090 (pull request 15035): Qwen2.5-3B in Q4_0
# with flash attention, llama.cpp's default.
CURRENT = ("qwen2.5-3b", "--engine", "llamacpp", "--quant", "Q4_0", "--seq", "512",
           "--prompt", "512", "--ram-gib", "64")  # fmt: skip


def _measured(
    test: str, gpu: str = A100, quant: str = "Q4_K_M", model: str = "llama-3-8b"
) -> float:
    """The published llama-bench figure of a model on one GPU at depth 0 (Llama 3 8B Q4_K_M on an
    A100 SXM 80GB: a May 2024 build, its prompt dequantized for cuBLAS)."""
    data = json.loads(ROWS.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    (row,) = [
        r
        for r in rows
        if r["gpu"] == gpu and r["model"] == model and r["quant"] == quant
        and r["gpus"] == 1 and r["test"] == test and r["depth"] == 0
    ]  # fmt: skip
    return float(row["measured_tps"])


def _cli(*argv: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return json.loads(out.getvalue())


def test_estimate_json_gives_the_measured_decode_and_prefill():
    serving = _cli("estimate", *SETUP, "--gpu", A100, "--json")["serving"]
    tg, pp = _measured("tg512"), _measured("pp512")
    # A current build generates faster than the May 2024 row (its per-block time, measured on
    # GeForce cards only: extrapolated, said below).
    assert tg < serving["tokens_per_second"] < 1.5 * tg
    assert serving["decode_tokens_per_second"] == serving["tokens_per_second"]
    # The estimate is a current build's: MMQ multiplies the quantized prompt faster than the
    # May 2024 row's dequantize + cuBLAS, and no row of the A100's kind measured MMQ: said so.
    assert serving["prefill_tokens_per_second"] > pp
    assert serving["basis"] == "extrapolated"
    assert any("MMQ" in note for note in serving["notes"])
    # An RTX 4090 in Q4_0 without flash attention: a current build's row (pull request 7676).
    q4_0 = (*SETUP[:3], "--quant", "Q4_0", *SETUP[5:])
    serving = _cli("estimate", *q4_0, "--gpu", "RTX 4090", "--json")["serving"]
    pp = _measured("pp512", "RTX 4090", "Q4_0")
    assert serving["prefill_tokens_per_second"] == pytest.approx(pp, rel=0.25)
    assert serving["time_to_first_token_seconds"] == pytest.approx(512 / pp, rel=0.25)
    assert serving["prompt_tokens"] == 512
    assert serving["basis"] == "measured"
    # Flash attention (llama.cpp's default) has no published row on HBM cards: said so.
    default = _cli("estimate", *SETUP[:-6], "--gpu", A100, "--json")["serving"]
    assert default["basis"] == "extrapolated"
    assert any("flash attention" in note for note in default["notes"])


def test_plan_json_gives_the_estimates_decode_on_an_a100():
    doc = _cli("plan", *SETUP, "--gpu", A100, "--json")
    estimate = _cli("estimate", *SETUP, "--gpu", A100, "--json")["serving"]
    assert doc["tokens_per_second"] == pytest.approx(estimate["tokens_per_second"], rel=1e-3)
    assert doc["tokens_per_second"] > _measured("tg512")  # a current build, the row May 2024's
    assert 512 / doc["prefill_seconds"] == pytest.approx(
        estimate["prefill_tokens_per_second"], rel=1e-3
    )


def test_part_of_the_model_in_host_ram_is_extrapolated_and_slower_layer_by_layer():
    speeds = []
    for ngl in (0, 16, 31, 32, 33):
        doc = _cli("plan", *SETUP, "--gpu", "RTX 4090", "--ngl", str(ngl), "--json")
        speeds.append(doc["tokens_per_second"])
    assert speeds == sorted(speeds)
    serving = _cli("estimate", "llama-3.1-70b", "--engine", "llamacpp", "--quant", "Q4_K_M",
                   "--gpu", "RTX 4090", "--ram-gib", "64", "--json")["serving"]  # fmt: skip
    assert serving["placement"]["kind"] == "offload" and serving["basis"] == "extrapolated"
    assert any("off the GPU" in note for note in serving["notes"])


def test_the_window_line_shows_the_measured_decode_and_first_token(qtbot):
    # An RTX 4090: rows of current builds measured its generation and MMQ prompts.
    doc = _cli("estimate", *CURRENT, "--gpu", RTX4090, "--json")
    controller = EstimateController(
        load_model, rates=catalog_rates(load_catalog()), host=host_settings(64 * GiB)
    )
    controller.set_model(load_model("qwen2.5-3b"), "qwen2.5-3b")
    controller.set_workload(Workload.from_dict(doc["settings"]))
    controller.set_capacities(((RTX4090, doc["fit"][0]["capacity_bytes"]),))
    controller.recompute_now()
    assert controller.analysis is not None
    speed = controller.analysis.speed
    assert isinstance(speed, Timing)
    measured = _measured("tg128", RTX4090, "Q4_0", "qwen2.5-3b")
    assert speed.tokens_per_second == pytest.approx(measured, rel=0.2)
    text = timing.speed_text(speed)
    assert f"<b>{speed.tokens_per_second:.0f} tokens/s</b> decode, measured" in text
    assert "first token in <b>0." in text and "512-token prompt" in text
    assert "published llama-bench rows" in timing.speed_tooltip(speed)


def test_the_rent_ranking_says_which_speeds_are_measured():
    spec = load_model("qwen2.5-3b").spec
    w = Workload.from_dict(_cli("estimate", *CURRENT, "--gpu", RTX4090, "--json")["settings"])
    catalog = {g.name: g for g in load_catalog()}
    offers = [
        (name, catalog[name].memory_bytes, rates_for(name, w.dtype))
        for name in (RTX4090, A100, "RTX 3060 12GB")
    ]
    ranked = rank_setups(spec, w, offers, by="time", host=host_settings(64 * GiB))
    basis = {r.gpu: r.basis for r in ranked}
    # No row of the A100's kind measured MMQ, flash attention or a current build's generation.
    assert basis == {RTX4090: "measured", A100: "extrapolated", "RTX 3060 12GB": "extrapolated"}
    rtx4090 = next(r for r in ranked if r.gpu == RTX4090)
    measured = _measured("tg128", RTX4090, "Q4_0", "qwen2.5-3b")
    assert rtx4090.tokens_per_second == pytest.approx(measured, rel=0.2)
    text = timing.ranked_text(ranked, "inference")
    assert "tokens/s (measured)" in text and "tokens/s (extrapolated)" in text


def test_a_mixture_of_experts_prompt_speed_is_said_to_be_rough_everywhere(qtbot):
    """A mixture of experts' prompt rests on a per-token time of no known cause, and
    DeepSeek-V2-Lite's on a DGX Spark ran at a quarter of the estimate (docs/performance.md):
    the CLI's text, its JSON and the window say so."""
    args = ("estimate", "gpt-oss-20b", "--engine", "llamacpp", "--gpu", "RTX 3090",
            "--seq", "2048", "--ram-gib", "64")  # fmt: skip
    doc = _cli(*args, "--json")
    (moe,) = [n for n in doc["serving"]["notes"] if n.startswith("mixture of experts")]
    assert "read the prompt speed as rough" in moe
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    assert f"  speed: {moe}" in out.getvalue().splitlines()
    controller = EstimateController(
        load_model, rates=catalog_rates(load_catalog()), host=host_settings(64 * GiB)
    )
    controller.set_model(load_model("gpt-oss-20b"), "gpt-oss-20b")
    controller.set_workload(Workload.from_dict(doc["settings"]))
    controller.set_capacities((("RTX 3090", doc["fit"][0]["capacity_bytes"]),))
    controller.recompute_now()
    assert controller.analysis is not None
    speed = controller.analysis.speed
    assert isinstance(speed, Timing) and speed.basis == "extrapolated"
    assert "read the prompt speed as rough" in timing.speed_tooltip(speed)
