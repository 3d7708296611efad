"""Fit rows, the largest batch / context that fits, GPU counts and the fit advisor."""

import pytest

from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.fit import (
    TOKEN_BLOCK,
    advise,
    cheapest,
    fit_rows,
    gpus_needed,
    largest_fitting,
    sweep,
)
from vramgui.core.units import GiB
from vramgui.core.workload import Workload

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
