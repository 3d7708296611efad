"""The answers: a speed only for a placement that runs, the fastest llama.cpp placement, the
advice to offload, and the host a plan is made with."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest

from vramgui.answers.advice import advise, saving_text, shortfall_text
from vramgui.answers.host import SET, THIS_MACHINE, choose_host, this_machine
from vramgui.answers.rates import NoRates, rates_for
from vramgui.answers.timing import AS_SET, DOES_NOT_FIT, MORE_GPUS, OFFLOAD, Untimed, time_setup
from vramgui.cli import main
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.fit import fit_rows
from vramgui.core.units import GiB, format_bytes
from vramgui.core.workload import Workload
from vramgui.hardware.capacity import resolve_capacities
from vramgui.profiles import OffloadSettings, Profile, ProfileError
from vramgui.sources.resolve import load_model

HOST = choose_host(this_machine(None), 64 * GiB)


def _json(*argv: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return json.loads(out.getvalue())


def _timed(source: str, gpu: str, **settings):
    spec = load_model(source).spec
    workload = Workload(**settings)
    name, capacity = resolve_capacities([gpu])[0]
    est = estimate(spec, workload, capacity, name)
    return time_setup(spec, est, name, capacity, rates_for(name, workload.dtype), host=HOST)


def test_a_llamacpp_setup_too_big_for_its_gpu_is_timed_as_llamacpp_offloads_it():
    # The case: "does not fit", then 19 tokens/s and $8.80 per million as if it did.
    doc = _json("estimate", "llama-3.1-70b", "--engine", "llamacpp", "--quant", "Q4_K_M",
                "--gpu", "RTX 4090", "--ram-gib", "64", "--json")  # fmt: skip
    assert not doc["fit"][0]["fits"]
    placement = doc["serving"]["placement"]
    assert placement["kind"] == OFFLOAD and placement["host_bytes"] > 10 * GiB
    assert placement["gpu_layers"] < placement["layers"] and "-ngl" in placement["text"]
    assert placement["host"] == {"ram_bytes": 64 * GiB, "ram_source": SET,
                                 "disk_bytes_per_s": 3.5e9, "disk_source": "default"}  # fmt: skip
    # With 40 GiB of its weights read from host RAM each token, it decodes at a few tokens/s.
    assert doc["serving"]["tokens_per_second"] < 5


def test_a_model_larger_than_gpu_and_ram_is_timed_reading_from_disk():
    timing = _timed("deepseek-v3", "RTX 4090", engine="llamacpp", quant="Q4_K_M")
    assert timing.placement.kind == OFFLOAD and timing.placement.disk_bytes > 100 * GiB
    assert "read from disk" in timing.placement.describe() and timing.bound == "disk"


def test_a_placement_given_that_the_gpu_cannot_hold_is_not_timed():
    spec = load_model("llama-3.1-70b").spec
    workload = Workload(engine="llamacpp", quant="Q4_K_M")
    name, capacity = resolve_capacities(["RTX 4090"])[0]
    est = estimate(spec, workload, capacity, name)
    untimed = time_setup(spec, est, name, capacity, rates_for(name, "bf16"), host=HOST,
                         n_gpu_layers=81)  # fmt: skip
    assert isinstance(untimed, Untimed) and untimed.code == DOES_NOT_FIT
    assert "-ngl 81" in untimed.reason


def test_vllm_that_does_not_start_is_timed_on_the_fewest_gpus_that_start_it():
    timing = _timed("llama-3.1-70b", "H100 SXM", engine="vllm")
    assert timing.placement.kind == MORE_GPUS and timing.gpus == timing.placement.gpus == 2
    assert timing.placement.flags == "--tensor-parallel-size 2"
    fits = _timed("llama-3.1-8b", "H100 SXM", engine="vllm")
    assert fits.placement.kind == AS_SET and fits.gpus == 1


def test_more_gpus_are_named_with_each_engines_own_flag():
    sglang = _timed("llama-3.1-70b", "H100 SXM", engine="sglang")
    assert sglang.placement.kind == MORE_GPUS and sglang.placement.flags.startswith("--tp-size ")
    transformers = _timed("llama-3.1-70b", "H100 SXM", engine="transformers")
    assert transformers.placement.kind == MORE_GPUS
    assert transformers.placement.flags.startswith("tensor parallel over ")


def test_training_no_machine_holds_has_no_time_and_no_cost():
    # The gpt-oss-120b QLoRA, 480 GiB short: "100M tokens in 39.5 h for $23.70".
    untimed = _timed("gpt-oss-120b", "RTX 4090", mode="training", method="qlora", quant="nf4")
    assert isinstance(untimed, Untimed) and untimed.code == DOES_NOT_FIT
    doc = _json("estimate", "gpt-oss-120b", "--mode", "training", "--method", "qlora",
                "--gpu", "RTX 4090", "--train-tokens", "100M", "--json")  # fmt: skip
    assert doc["speed"] is None and any(n.startswith("no speed or cost") for n in doc["notes"])


def test_plan_launches_the_fastest_placement_and_lists_the_other():
    # The case: -ngl 25 printed at 18.1 tokens/s while --n-cpu-moe 29 gave 27.2.
    doc = _json("plan", "qwen3-30b-a3b", "--quant", "Q4_K_M", "--engine", "llamacpp",
                "--seq", "40960", "--gpu", "RTX 3060 12GB", "--ram-gib", "64", "--json")  # fmt: skip
    layers, experts = doc["best"]["layers"], doc["best"]["experts"]
    assert experts["tokens_per_second"] > layers["tokens_per_second"]
    assert doc["chosen"] == "fastest" and doc["llamacpp"]["n_cpu_moe"] == experts["value"]
    assert doc["tokens_per_second"] == pytest.approx(experts["tokens_per_second"])
    assert f"--n-cpu-moe {experts['value']}" in doc["launch"][0]["text"]
    # The estimate quotes the same placement and figure.
    served = _json("estimate", "qwen3-30b-a3b", "--quant", "Q4_K_M", "--engine", "llamacpp",
                   "--seq", "40960", "--gpu", "RTX 3060 12GB", "--ram-gib", "64",
                   "--json")["serving"]  # fmt: skip
    assert served["placement"]["flags"] == f"-ngl 49 --n-cpu-moe {experts['value']}"
    assert served["tokens_per_second"] == round(doc["tokens_per_second"], 1)
    # -ngl given: placed as given, not the fastest.
    fixed = _json("plan", "qwen3-30b-a3b", "--quant", "Q4_K_M", "--engine", "llamacpp",
                  "--seq", "40960", "--gpu", "RTX 3060 12GB", "--ram-gib", "64", "--ngl", "20",
                  "--json")  # fmt: skip
    assert fixed["chosen"] == "as set" and fixed["gpu_layers"] == 20


def test_the_advisor_offers_layers_or_experts_in_host_ram_with_their_speed():
    spec = load_model("qwen3-30b-a3b").spec
    workload = Workload(engine="llamacpp", quant="Q4_K_M", seq=40960)
    name, capacity = resolve_capacities(["RTX 3060 12GB"])[0]
    est = estimate(spec, workload, capacity, name)
    advice = advise(spec, est, capacity, host=HOST, rates=rates_for(name, "bf16"))
    first, second = advice[:2]
    assert first.placement == (49, int(first.title.rsplit(" ", 1)[1]))
    assert "--n-cpu-moe" in first.title and "tokens/s" in first.cost and first.fits
    assert "-ngl" in second.title and second.placement[1] == 0
    assert all(s.placement is None for s in advice[2:])
    # vLLM: no offloading advice
    vllm = estimate(spec, workload.with_(engine="vllm", quant="none"), capacity, name)
    assert all(
        s.placement is None
        for s in advise(spec, vllm, capacity, host=HOST, rates=rates_for(name, "bf16"))
    )


def test_host_settings_say_where_each_figure_comes_from():
    machine = this_machine(22 * GiB)
    assert machine.ram_source == THIS_MACHINE and machine.disk_source == "default"
    set_ram = choose_host(machine, 64 * GiB)
    assert (set_ram.ram_bytes, set_ram.ram_source) == (64 * GiB, SET)
    back = choose_host(machine, None, 7e9)
    assert (back.ram_bytes, back.ram_source, back.disk_source) == (22 * GiB, THIS_MACHINE, SET)
    with pytest.raises(WorkloadError):
        choose_host(machine, 0)


def test_a_gpu_the_catalog_lacks_has_no_rates():
    with pytest.raises(NoRates, match="not in the GPU catalog"):
        rates_for("Some Unknown Accelerator", "bf16")


def test_a_profile_keeps_its_placement_and_host_and_older_ones_still_open():
    ref = load_model("llama-3.2-1b").ref
    kept = OffloadSettings(
        n_gpu_layers=20, n_cpu_moe=3, ram_bytes=64 * GiB, disk_bytes_per_s=7e9, op_offload=False
    )
    profile = Profile("p", ref, offload=kept)
    assert Profile.from_dict(profile.to_dict()).offload == kept
    older = profile.to_dict()
    del older["offload"]
    assert Profile.from_dict(older).offload is None
    bad = {**profile.to_dict(), "offload": {"n_gpu_layers": -1}}
    with pytest.raises(ProfileError, match=r"offload\.n_gpu_layers"):
        Profile.from_dict(bad)


def test_a_saved_placement_times_the_profile_as_saved(capsys):
    flags = ("qwen3-30b-a3b", "--quant", "Q4_K_M", "--engine", "llamacpp", "--seq", "40960",
             "--gpu", "RTX 3060 12GB", "--ram-gib", "64")  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["profile", "save", "fastest", *flags]) == 0
        assert main(["profile", "save", "ngl 20", *flags, "--ngl", "20"]) == 0
    docs = _json("profile", "compare", "fastest", "ngl 20", "--json")["profiles"]
    fastest, fixed = (d["estimate"]["serving"] for d in docs)
    assert "--n-cpu-moe" in fastest["placement"]["flags"]
    assert fixed["placement"]["flags"] == "-ngl 20"
    assert fixed["tokens_per_second"] < fastest["tokens_per_second"]


@pytest.mark.parametrize(
    ("source", "seq", "gib", "ram_gib"),
    [
        ("qwen3-30b-a3b", 40960, 12, 64),
        ("qwen3-30b-a3b", 4096, 8, 16),
        ("qwen3-30b-a3b", 32768, 24, 8),
        ("llama-3.1-70b", 8192, 24, 64),
        ("llama-3.1-70b", 8192, 12, 20),
        ("mixtral-8x7b", 4096, 16, 64),
    ],
)
def test_the_fastest_points_found_by_search_are_the_best_of_the_walked_curves(
    source, seq, gib, ram_gib
):
    from vramgui.answers.offload import bandwidths_for
    from vramgui.core import offload
    from vramgui.core.offload import curves
    from vramgui.hardware.gpus import find_gpu

    spec = load_model(source).spec
    model = offload.llamacpp_model(spec, Workload(engine="llamacpp", quant="Q4_K_M", seq=seq))
    bandwidths = bandwidths_for(find_gpu("RTX 4090"), HOST)
    kwargs = {"host_ram_bytes": ram_gib * GiB, "margin_bytes": GiB}
    found = curves.best_points(model, [gib * GiB], bandwidths, **kwargs)

    def untimed(point):  # the search does not time the first token; the walked curves do
        return None if point is None else dataclasses.replace(point, first_token_seconds=None)

    assert found[curves.LAYERS] == untimed(
        curves.best(curves.layer_curve(model, [gib * GiB], bandwidths, **kwargs))
    )
    assert found[curves.EXPERTS] == untimed(
        curves.best(curves.expert_curve(model, [gib * GiB], bandwidths, **kwargs))
    )


def test_estimate_gives_the_advisor_when_the_first_gpu_is_too_small():
    doc = _json("estimate", "qwen3-30b-a3b", "--quant", "Q4_K_M", "--engine", "llamacpp",
                "--seq", "40960", "--gpu", "RTX 3060 12GB", "--ram-gib", "64", "--json")  # fmt: skip
    first = doc["advice"][0]
    # The first advice is the placement the serving block times: -ngl 49 --n-cpu-moe N.
    moved = int(doc["serving"]["placement"]["flags"].split()[-1])
    assert first["placement"] == {"n_gpu_layers": 49, "n_cpu_moe": moved}
    assert first["fits"] and "tokens/s" in first["cost"]
    fits = _json("estimate", "llama-3.2-1b", "--gpu", "RTX 4090", "--json")
    assert "advice" not in fits


def test_a_pool_the_weights_leave_no_room_for_is_said_so_not_as_zero_tokens():
    text = saving_text(3 * GiB, pool_bytes=-2 * GiB, pool_tokens=0)
    assert text == "the weights leave no KV pool; 3.00 GiB more room for a request of the context"
    assert saving_text(None, pool_bytes=0, pool_tokens=0) == "the weights leave no KV pool"
    assert saving_text(GiB, pool_bytes=6 * GiB, pool_tokens=1000).startswith(
        "KV pool 6.00 GiB (1,000 tokens), 1.00 GiB more room"
    )


def test_a_pre_allocating_engine_that_does_not_fit_says_what_its_pool_is_short_of():
    def row(source: str, gpu: str, **settings):
        spec = load_model(source).spec
        name, capacity = resolve_capacities([gpu])[0]
        est = estimate(spec, Workload(**settings), capacity, name)
        return fit_rows(est, [(name, capacity)])[0]

    long = row("llama-3.1-8b", "RTX 4090", engine="vllm", seq=131072)
    up = long.vllm
    assert not long.fits and up is not None and 0 < up.available_bytes < up.needed_bytes
    assert shortfall_text(long, 131072) == (
        f"KV pool {format_bytes(up.available_bytes)} is "
        f"{format_bytes(up.needed_bytes - up.available_bytes)} short of one request of "
        "131,072 tokens"
    )
    sglang = row("llama-3.1-8b", "RTX 4090", engine="sglang", seq=131072)
    assert shortfall_text(sglang, 131072).startswith("KV pool ")
    assert "short of one request of 131,072 tokens" in shortfall_text(sglang, 131072)
    heavy = row("llama-3.1-70b", "H100 SXM", engine="vllm", seq=8192)
    assert shortfall_text(heavy, 8192).startswith("the weights leave no KV pool; one request of")
    greedy = row("llama-3.1-8b", "H100 SXM", engine="vllm", gpu_memory_utilization=1.0)
    assert "vLLM's memory share" in shortfall_text(greedy, 2048)
    # An engine that allocates as it goes: the memory missing.
    plain = row("llama-3.1-70b", "H100 SXM")
    assert shortfall_text(plain, 2048) == f"{format_bytes(-plain.headroom_bytes)} short"
