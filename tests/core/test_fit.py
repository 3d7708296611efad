"""Fit rows, the largest batch / context that fits, GPU counts and the fit advisor."""

import math
import random
from collections.abc import Callable

import pytest

from vramgui.core.boundary import largest_fitting_value
from vramgui.core.errors import VramguiError, WorkloadError
from vramgui.core.estimate import Estimator, estimate
from vramgui.core.families import spec_from_config
from vramgui.core.fit import (
    MAX_GPUS_PER_MACHINE,
    TOKEN_BLOCK,
    advise,
    cheapest,
    fit_rows,
    gpus_needed,
    largest_fitting,
    sweep,
)
from vramgui.core.units import GiB
from vramgui.core.workload import MAX_BATCH, Workload
from vramgui.sources.catalog import find

LLAMA3 = "meta-llama/Meta-Llama-3-8B"
RTX_4090 = 24 * GiB


def test_fit_rows_headroom_sign(real_spec):
    est = estimate(real_spec(LLAMA3), Workload(seq=4096))
    small, big = fit_rows(est, [("small", 8 * GiB), ("big", 80 * GiB)])
    assert not small.fits and small.headroom_bytes == 8 * GiB - est.total_bytes < 0
    assert big.fits and big.headroom_bytes == 80 * GiB - est.total_bytes > 0


def test_largest_context_is_the_boundary_within_one_block(real_spec):
    spec = real_spec(LLAMA3)
    w = Workload(batch=4)
    best = largest_fitting(spec, w, RTX_4090, "seq")
    assert best is not None and best % TOKEN_BLOCK == 0
    assert estimate(spec, w.with_(seq=best)).total_bytes <= RTX_4090
    assert estimate(spec, w.with_(seq=best + TOKEN_BLOCK)).total_bytes > RTX_4090


def test_largest_batch_is_the_boundary(real_spec):
    spec = real_spec(LLAMA3)
    w = Workload(seq=8192)
    best = largest_fitting(spec, w, RTX_4090, "batch")
    assert best is not None and best >= 1
    assert estimate(spec, w.with_(batch=best)).total_bytes <= RTX_4090
    assert estimate(spec, w.with_(batch=best + 1)).total_bytes > RTX_4090


def test_nothing_fits_returns_none(real_spec):
    assert largest_fitting(real_spec(LLAMA3), Workload(), 4 * GiB, "seq") is None


def test_sweep_grows_with_context(real_spec):
    totals = [e.total_bytes for e in sweep(real_spec(LLAMA3), Workload(), "seq", [512, 2048, 8192])]
    assert totals == sorted(totals) and totals[0] < totals[-1]


def test_advisor_offers_changes_that_fit_and_says_what_they_save(real_spec):
    spec = real_spec(LLAMA3)
    w = Workload(seq=32768, batch=2)
    base = estimate(spec, w).total_bytes
    assert base > RTX_4090
    suggestions = advise(spec, w, RTX_4090)
    assert suggestions and suggestions[0].fits
    for s in suggestions:
        after = estimate(spec, w.with_(**s.changes)).total_bytes
        assert s.saves_bytes == base - after > 0
        assert s.fits == (after <= RTX_4090)


@pytest.mark.parametrize(("engine", "gib"), [("vllm", 19), ("sglang", 20)])
def test_advice_for_an_engine_that_preallocates_says_what_each_change_gives_its_pool(
    real_spec, engine, gib
):
    # vLLM and SGLang take their share of the GPU whatever is set: every change that lets them
    # start leaves the same memory on the GPU, so what a change gives is told in the pool.
    spec = real_spec(LLAMA3)
    w = Workload(seq=8192, engine=engine)
    capacity = gib * GiB

    def start_up(workload: Workload):
        row = fit_rows(estimate(spec, workload, capacity), [("", capacity)])[0]
        return row.vllm or row.sglang

    def room(up) -> int:
        return -up.shortfall_bytes if engine == "vllm" else up.available_bytes - up.needed_bytes

    before = start_up(w)
    suggestions = advise(spec, w, capacity)
    fitting = [s for s in suggestions if s.fits]
    assert len(fitting) >= 4
    assert len({s.saves_bytes for s in fitting}) > len(fitting) // 2  # not one figure for all
    for s in suggestions:
        after = start_up(w.with_(**s.changes))
        assert s.pool_bytes == after.available_bytes and s.pool_tokens == after.pool_tokens
        assert s.saves_bytes == room(after) - room(before) > 0, s.title
    shorter = next(s for s in fitting if "seq" in s.changes)
    assert shorter.pool_tokens is not None and shorter.pool_tokens >= shorter.changes["seq"]


def test_advice_outside_engines_that_preallocate_names_no_pool(real_spec):
    suggestions = advise(real_spec(LLAMA3), Workload(seq=32768, batch=2), RTX_4090)
    assert suggestions and all(s.pool_bytes is None and s.pool_tokens is None for s in suggestions)


def test_advisor_is_silent_when_it_fits(real_spec):
    assert advise(real_spec(LLAMA3), Workload(seq=1024), 80 * GiB) == []


def test_gpus_needed_and_cheapest(real_spec):
    spec = real_spec("meta-llama/Llama-2-70b-hf")
    w = Workload(seq=4096)
    assert gpus_needed(spec, w, 24 * GiB) == 8
    assert gpus_needed(spec, w, 80 * GiB) == 2
    ranked = cheapest(
        spec, w, [("24G", 24 * GiB, 1600.0), ("80G", 80 * GiB, 25000.0), ("x", 1, None)]
    )
    assert [r[0] for r in ranked] == ["24G", "80G"]
    assert ranked[0][1:] == (8, 12800.0)


def test_llama_cpp_needs_any_number_of_gpus_tensor_parallel_engines_powers_of_two():
    # llama.cpp splits whole layers over any number of devices (--tensor-split): Llama 3.1 70B
    # at Q4_K_M (about 40 GiB of weights) spans three 16 GiB cards, not four.
    from vramgui.core.fit import sharded

    spec = find("llama-3.1-70b").spec()
    w = Workload(engine="llamacpp", quant="Q4_K_M", seq=8192)
    assert gpus_needed(spec, w, 16 * GiB, MAX_GPUS_PER_MACHINE) == 3
    two = estimate(spec, sharded(w, 2), 16 * GiB)
    assert fit_rows(two, [("16G", 16 * GiB)])[0].headroom_bytes < 0
    # vLLM shards tensors: a count that does not divide the heads is never offered.
    count = gpus_needed(spec, Workload(seq=8192), 48 * GiB, MAX_GPUS_PER_MACHINE)
    assert count is not None and count & (count - 1) == 0


def test_largest_fitting_rejects_other_fields(real_spec):
    with pytest.raises(ValueError):
        largest_fitting(real_spec(LLAMA3), Workload(), RTX_4090, "dtype")


def test_sweep_points_equal_fresh_workloads(real_spec):
    spec = real_spec(LLAMA3)
    w = Workload(batch=2)
    swept = sweep(spec, w, "seq", [1024, 4096])
    assert [e.total_bytes for e in swept] == [
        estimate(spec, Workload(batch=2, seq=s)).total_bytes for s in (1024, 4096)
    ]
    assert swept[1].workload == Workload(batch=2, seq=4096)
    with pytest.raises(WorkloadError):
        w.with_size("seq", 0)
    with pytest.raises(ValueError):
        w.with_size("dtype", 1)


def halving(total: Callable[[int], int | None], capacity: int, step: int, upper: int) -> int | None:
    """The boundary search largest_fitting first had: halve [step, upper] until one step apart."""

    def fits(value: int) -> bool:
        t = total(value)
        return t is not None and t <= capacity

    low = step
    if not fits(low):
        return None
    if fits(upper):
        return upper
    high = upper
    while high - low > step:
        mid = max((low + high) // 2 // step * step, low + step)
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


# Monotone totals of the shapes the estimate takes: lines (with rounding), a square term (eager
# scores), flat then rising (vLLM's pool), maxima of lines (phases), steps, and a region where
# the settings turn invalid (None); a concave one that no estimate has, to show it still ends.
SHAPES: dict[str, Callable[[int], int | None]] = {
    "line": lambda v: 15_000_000_000 + 131_072 * v,
    "rounded line": lambda v: 16_000_000_000 + round(131_072 * 1.05 * v),
    "square": lambda v: 16_000_000_000 + 300_000 * v + 40 * v * v,
    "flat, then a line": lambda v: max(21_000_000_000, 9_000_000_000 + 2_000_000 * v),
    "max of lines": lambda v: 4_000_000_000 + max(900_000 * v, 3_000_000_000 + 400_000 * v),
    "steps": lambda v: 1_000_000_000 + 7_000_000 * (v // 1000),
    "invalid past 70,000": lambda v: None if v > 70_000 else 2_000_000_000 + 500_000 * v,
    "concave": lambda v: 1_000_000_000 + 30_000_000 * math.isqrt(v),
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize(("step", "upper"), [(16, 131_072), (16, 1_000_003), (1, MAX_BATCH)])
def test_boundary_is_the_one_halving_finds_in_fewer_totals(shape, step, upper):
    total = SHAPES[shape]
    rng = random.Random(f"{shape} {step} {upper}")
    low_total, high_total = total(step), total(upper)
    high_total = high_total if high_total is not None else total(70_000)
    # Capacities below everything, above everything, on a total exactly, and between.
    capacities = [low_total - 1, low_total, high_total, high_total + 1, total(step * 37)]
    capacities += [rng.randint(low_total, high_total) for _ in range(40)]
    counts = []
    calls: list[int] = []

    def counted(value: int) -> int | None:
        calls.append(value)
        return total(value)

    for capacity in capacities:
        calls.clear()
        found = largest_fitting_value(counted, capacity, step, upper)
        assert found == halving(total, capacity, step, upper), capacity
        counts.append(len(calls))
        assert all(step <= v <= upper for v in calls)
        assert len(calls) <= 2 * 22  # never much worse than halving (22 totals at most here)
    if shape in ("line", "rounded line", "square", "flat, then a line", "max of lines"):
        assert sum(counts) / len(counts) <= 8, counts


def test_sized_estimates_raise_what_estimate_raises_in_its_order(real_spec):
    gpt2 = real_spec("openai-community/gpt2")  # learned positions for 1,024 tokens, 12 heads
    context, heads = "learned position embeddings", "--tp 5 does not divide"
    # The context is checked before the heads.
    cases = [
        (Workload(gpus=5, tp=5), (heads, heads, context)),
        (Workload(mode="training", method="qlora"), ("4-bit base",) * 3),
    ]
    for w, messages in cases:
        sized = Estimator(gpt2, w)
        for seq, message in zip((512, 1024, 2048), messages, strict=True):
            with pytest.raises(VramguiError, match=message) as plain:
                estimate(gpt2, w.with_size("seq", seq))
            with pytest.raises(VramguiError) as fast:
                sized.at("seq", seq)
            assert str(fast.value) == str(plain.value)


def test_sweep_of_other_settings_estimates_each(real_spec):
    spec = real_spec(LLAMA3)
    w = Workload(mode="training", method="lora")
    swept = sweep(spec, w, "lora_rank", [8, 64, 0])
    assert swept[0] == estimate(spec, w.with_(lora_rank=8))
    assert swept[1] == estimate(spec, w.with_(lora_rank=64))
    assert swept[2] is None  # rank 0 is refused


def test_lora_advice_keeps_the_base_in_16_bits_and_saves_what_it_says(real_spec):
    spec = real_spec(LLAMA3)
    full = Workload(mode="training", seq=1024, grad_checkpointing=True)
    advice = {s.title: s for s in advise(spec, full, RTX_4090)}
    lora = advice["LoRA instead of a full fine-tune"]
    assert lora.changes == {"method": "lora", "precision": "pure"}
    before = estimate(spec, full, RTX_4090).total_bytes
    after = estimate(spec, full.with_(**lora.changes), RTX_4090).total_bytes
    assert lora.saves_bytes == before - after
    # A 16-bit base: about two bytes per parameter of weights, not four.
    weights = estimate(spec, full.with_(**lora.changes)).components["weights"]
    assert weights < 2.2 * spec.parameters


def test_the_cheapest_gpus_stay_within_one_machine(real_spec):
    spec = real_spec(LLAMA3)
    offers = [("small", 8 * GiB, 300.0), ("big", 80 * GiB, 30000.0)]
    ranked = cheapest(spec, Workload(seq=2048), offers)
    assert all(count <= MAX_GPUS_PER_MACHINE for _, count, _ in ranked)
    # Eight 4 GiB cards cannot hold the 16 GB model: they are not ranked at all.
    tiny = cheapest(spec, Workload(seq=2048), [("tiny", 2 * GiB, 100.0)])
    assert tiny == []


def test_llama_cpp_advice_offers_the_mxfp4_gguf_of_an_mxfp4_checkpoint_first():
    gpt_oss = find("gpt-oss-120b").spec()
    # Converted to Q4_K_M as the checkpoint's rows force it (Q5_0 / Q8_0 fallbacks), 80 GB is short.
    advice = advise(gpt_oss, Workload(engine="llamacpp", quant="Q4_K_M"), 80 * GiB)
    first = advice[0]
    assert first.changes == {"quant": "MXFP4_MOE"} and first.fits
    assert first.cost.startswith("none: MXFP4 routed experts")
    assert first.total_bytes < 60 * GiB
    assert advise(gpt_oss, Workload(engine="llamacpp", quant="MXFP4_MOE"), 64 * GiB) == []


def test_llama_cpp_advice_offers_mxfp4_moe_to_mixtures_of_experts_only(real_spec):
    def quants(spec, capacity):
        w = Workload(engine="llamacpp", quant="Q8_0")
        return [s.changes.get("quant") for s in advise(spec, w, capacity)]

    moe = spec_from_config(
        {
            "model_type": "qwen3_moe",
            "hidden_size": 2048,
            "moe_intermediate_size": 768,
            "num_hidden_layers": 24,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "vocab_size": 151936,
            "num_experts": 128,
            "num_experts_per_tok": 8,
        }
    )
    assert "MXFP4_MOE" in quants(moe, 10 * GiB)
    assert "MXFP4_MOE" not in quants(real_spec(LLAMA3), 4 * GiB)
