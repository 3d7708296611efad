"""core.fit.rank_setups: the GPUs that fit, ranked by the time or the cost of the work."""

import pytest

from tests.configs import LLAMA
from vramgui.core import fit, speed
from vramgui.core.families import spec_from_config
from vramgui.core.units import GiB
from vramgui.core.workload import Workload


def _gpu(name, flops, bandwidth, link, arch):
    return speed.Hardware(name, flops, bandwidth, link, 25e9, architecture=arch)


OFFERS = [
    ("A100 SXM 80GB", 80 * GiB, _gpu("A100 SXM 80GB", 312e12, 2039e9, 300e9, "Ampere"),
     speed.Price(2.45)),
    ("H100 SXM", 80 * GiB, _gpu("H100 SXM", 989e12, 3350e9, 450e9, "Hopper"), speed.Price(4.76)),
    ("L40S", 48 * GiB, _gpu("L40S", 362e12, 864e9, 32e9, "Ada Lovelace"), speed.Price(1.40)),
    ("small", 8 * GiB, _gpu("small", 100e12, 500e9, 32e9, "Ampere"), speed.Price(0.1)),
    ("unpriced", 80 * GiB, _gpu("unpriced", 312e12, 2039e9, 300e9, "Ampere"), None),
]  # fmt: skip


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(LLAMA, "llama-7b")


def test_training_ranked_by_cost_and_by_time(spec):
    w = Workload(mode="training", method="full", batch=2, seq=2048, grad_checkpointing=True)
    by_cost = fit.rank_setups(spec, w, OFFERS, by="cost", train_tokens=10**9)
    by_time = fit.rank_setups(spec, w, OFFERS, by="time", train_tokens=10**9)
    names = [r.gpu for r in by_cost]
    assert "small" not in names  # a 7B full fine-tune fits no 8 GiB GPUs up to eight of them
    assert names[-1] == "unpriced"  # no price: last when ranked by cost
    costs = [r.cost for r in by_cost if r.cost is not None]
    assert costs == sorted(costs)
    times = [r.time_seconds for r in by_time]
    assert times == sorted(times)
    for r in by_cost:
        assert r.workload.gpus == r.count
        assert r.time_seconds == pytest.approx(1e9 / r.tokens_per_second)
        assert r.gpu_hours == pytest.approx(r.count * r.time_seconds / 3600)
        if r.price:
            assert r.cost == pytest.approx(r.gpu_hours * r.price.per_gpu_hour)
            assert r.cost_per_million == pytest.approx(r.cost / 1000, rel=1e-6)
    l40s = next(r for r in by_cost if r.gpu == "L40S")
    assert l40s.count > 1 and l40s.workload.zero == 3  # sharded, as gpus_needed shards it


def test_inference_ranked_by_cost_per_million_tokens(spec):
    w = Workload(batch=16, seq=2048)
    ranked = fit.rank_setups(spec, w, OFFERS, by="cost")
    assert [r.gpu for r in ranked][-1] == "unpriced"
    assert all(r.time_seconds is None and r.cost is None for r in ranked)
    small = next(r for r in ranked if r.gpu == "small")
    assert small.count > 1 and small.workload.tp == small.count
    per_million = [r.cost_per_million for r in ranked if r.cost_per_million is not None]
    assert per_million == sorted(per_million)


def test_a_measured_utilization_replaces_the_default_for_its_gpu(spec):
    w = Workload(mode="training", method="lora", precision="pure", batch=2, seq=1024)
    base = {r.gpu: r for r in fit.rank_setups(spec, w, OFFERS[:1], by="time")}
    slow = speed.Utilization(matmul=0.2, attention=0.15, source="measured")
    measured = fit.rank_setups(spec, w, OFFERS[:1], by="time", utilizations={OFFERS[0][0]: slow})
    assert measured[0].tokens_per_second < base["A100 SXM 80GB"].tokens_per_second


def test_only_cost_or_time(spec):
    with pytest.raises(ValueError, match="cost or time"):
        fit.rank_setups(spec, Workload(), OFFERS, by="speed")
