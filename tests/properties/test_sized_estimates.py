"""The fast paths over batch and context give what a plain estimate gives, byte for byte.

``Estimator`` (and the sweeps and solvers built on it) works out once what does not depend on
the two sizes; each example here draws a model and settings as the estimate properties do and
holds every figure, note, detail and error against ``estimate`` of the same workload.
"""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from tests.properties.test_estimate_properties import (
    BOUNDED,
    max_seq,
    models,
    settings_of,
    spec_of,
    workload_of,
)
from vramgui.core import fit
from vramgui.core.errors import VramguiError
from vramgui.core.estimate import Estimate, Estimator, estimate
from vramgui.core.model import ModelSpec
from vramgui.core.units import GiB
from vramgui.core.workload import MAX_BATCH, Workload

SIZE_FIELDS = st.sampled_from(("seq", "batch"))
# None: no capacity (vLLM's pool unsized); else a share of the setup's own total, or a GPU.
CAPACITIES = st.sampled_from((None, 0.3, 0.9, 1.0, 1.7, 24 * GiB, 80 * GiB))


def plain(spec: ModelSpec, w: Workload, field: str, value: int, capacity: int | None) -> str:
    """What the plain path gives: the estimate's full repr (dict order included), or the error."""
    try:
        return repr(estimate(spec, w.with_size(field, value), capacity))
    except VramguiError as exc:
        return f"{type(exc).__name__}: {exc}"


def plain_or_none(spec: ModelSpec, w: Workload, field: str, value: int) -> Estimate | None:
    try:
        return estimate(spec, w.with_size(field, value))
    except VramguiError:
        return None


def sized(estimator: Estimator, field: str, value: int) -> str:
    try:
        return repr(estimator.at(field, value))
    except VramguiError as exc:
        return f"{type(exc).__name__}: {exc}"


def capacity_of(spec: ModelSpec, w: Workload, drawn: float | int | None) -> int | None:
    if drawn is None or drawn > 100:
        return drawn  # type: ignore[return-value]
    try:
        return round(estimate(spec, w).total_bytes * drawn)
    except VramguiError:
        return 24 * GiB


def values_of(spec: ModelSpec, field: str, fractions: list[float]) -> list[int]:
    # Past the model's context too (learned positions refuse it) and past the limits (0, max).
    high = 2 * max_seq(spec) if field == "seq" else 300
    return [0, *(max(1, round(f * high)) for f in fractions)]


@BOUNDED
@given(
    model=models,
    drawn=settings_of,
    field=SIZE_FIELDS,
    fractions=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5),
    capacity=CAPACITIES,
)
def test_estimator_gives_the_plain_estimate(
    model: str, drawn: dict, field: str, fractions: list[float], capacity: float | None
) -> None:
    spec = spec_of(model)
    w = workload_of(spec, drawn)
    cap = capacity_of(spec, w, capacity)
    estimator = Estimator(spec, w, cap)
    for value in values_of(spec, field, fractions):
        assert sized(estimator, field, value) == plain(spec, w, field, value, cap), value


@BOUNDED
@given(
    model=models,
    drawn=settings_of,
    field=SIZE_FIELDS,
    fractions=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5),
)
def test_sweep_gives_the_plain_estimates(
    model: str, drawn: dict, field: str, fractions: list[float]
) -> None:
    spec = spec_of(model)
    w = workload_of(spec, drawn)
    values = values_of(spec, field, fractions)[1:]
    swept = fit.sweep(spec, w, field, values)
    assert [repr(e) for e in swept] == [repr(plain_or_none(spec, w, field, v)) for v in values]


def bisection(spec: ModelSpec, w: Workload, capacity: int, field: str) -> int | None:
    """largest_fitting as it was first written: halve [step, upper] over plain estimates."""
    step = fit.TOKEN_BLOCK if field == "seq" else 1
    upper = max(spec.facts.max_position_embeddings, w.seq) if field == "seq" else MAX_BATCH

    def fits(value: int) -> bool:
        try:
            return estimate(spec, w.with_size(field, value), capacity).total_bytes <= capacity
        except VramguiError:
            return False

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


@BOUNDED
@given(
    model=models,
    drawn=settings_of,
    field=SIZE_FIELDS,
    capacity=st.sampled_from((0.3, 0.9, 1.0, 1.7, 6.0, 24 * GiB, 80 * GiB)),
)
def test_largest_fitting_finds_what_bisection_finds(
    model: str, drawn: dict, field: str, capacity: float
) -> None:
    spec = spec_of(model)
    w = workload_of(spec, drawn)
    # vLLM's and SGLang's largest batch is the requests their pre-allocated pool holds at once,
    # not where a total that grows with the batch meets the GPU: bisection has nothing to find.
    assume(not (field == "batch" and w.mode == "inference" and w.engine in ("vllm", "sglang")))
    cap = capacity_of(spec, w, capacity)
    assert cap is not None
    assert fit.largest_fitting(spec, w, cap, field) == bisection(spec, w, cap, field)
