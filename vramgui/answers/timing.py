"""How fast a setup runs and what it costs: one answer for the estimate, the window's time /
cost line and the comparison of profiles.

A speed exists only for a placement that runs. A setup that fits the GPU picked is timed as
chosen; under llama.cpp it is timed as its offload plan places it (every layer on the GPUs when
they hold them, else the fastest placement with host RAM: ``answers.offload``); under the other
engines a setup that does not fit is timed on the fewest GPUs of the kind that hold it (one
machine at most), and one that no such machine holds is not timed, with the reason. The
placement timed is part of the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from vramgui.answers.host import HostSettings
from vramgui.answers.offload import AS_SET as PLACED_AS_SET
from vramgui.answers.offload import (
    OffloadAnswer,
    bandwidths_for,
    everything_on_gpus,
    plan_offload,
)
from vramgui.answers.rates import Rates
from vramgui.core import fit, offload
from vramgui.core.engines import engine
from vramgui.core.errors import VramguiError, message_of
from vramgui.core.estimate import Estimate
from vramgui.core.llamacpp_speed import EXTRAPOLATED, speed_basis
from vramgui.core.model import ModelSpec
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.serving_speed import serving_speed
from vramgui.core.speed import (
    Price,
    TrainingSpeed,
    Utilization,
    cost_per_million_tokens,
    run_cost,
    training_speed,
)
from vramgui.core.units import format_bytes
from vramgui.core.workload import Workload

# What a timing's placement is (``TimedPlacement.kind``).
AS_SET = "as set"  # the setup as chosen: it fits
MORE_GPUS = "more gpus"  # the fewest GPUs of the kind that hold it
OFFLOAD = "offload"  # llama.cpp's plan, with what the GPUs do not hold in host RAM

# What an inference speed rests on besides ``core.llamacpp_speed``'s measured / extrapolated.
ROOFLINE = "roofline"

# Why a setup has no timing (``Untimed.code``).
NO_RATES = "no-rates"
DOES_NOT_FIT = "does-not-fit"
REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class TimedPlacement:
    """The placement a timing is for.

    Attributes:
        kind: ``as set``, ``more gpus`` or ``offload`` (the constants above).
        gpu: the GPU model.
        gpus: how many of them.
        flags: the engine flags that make this placement (``-ngl 49 --n-cpu-moe 29``,
            ``--tensor-parallel-size 4``), "" where the setup runs as chosen.
        gpu_layers: llama.cpp's ``-ngl`` (offload), else None.
        layers: units llama.cpp places (blocks and the output; offload), else None.
        host_bytes: weights in host RAM (offload).
        disk_bytes: weights read from disk (offload).
        host: the host RAM and disk the offload plan used, else None.
    """

    kind: str
    gpu: str
    gpus: int
    flags: str = ""
    gpu_layers: int | None = None
    layers: int | None = None
    host_bytes: int = 0
    disk_bytes: int = 0
    host: HostSettings | None = None

    def describe(self) -> str:
        """The placement in words, e.g. "llama.cpp -ngl 25 on RTX 3060 12GB, 40.1 GiB in host
        RAM"."""
        where = f"{self.gpus} x {self.gpu}" if self.gpus > 1 else self.gpu
        if self.kind == MORE_GPUS:
            return f"{where} ({self.flags})" if self.flags else where
        if self.kind != OFFLOAD:
            return f"every layer on {where} ({self.flags})" if self.flags else where
        text = f"llama.cpp {self.flags} on {where}"
        if self.host_bytes:
            text += f", {format_bytes(self.host_bytes)} in host RAM"
        if self.disk_bytes:
            text += f", {format_bytes(self.disk_bytes)} read from disk"
        return text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "flags": self.flags,
            "text": self.describe(),
        }
        if self.gpu_layers is not None:
            out.update(
                {
                    "gpu_layers": self.gpu_layers,
                    "layers": self.layers,
                    "host_bytes": self.host_bytes,
                    "disk_bytes": self.disk_bytes,
                    "host": None if self.host is None else self.host.to_dict(),
                }
            )
        return out


@dataclass(frozen=True, slots=True)
class Timing:
    """How fast a setup runs on ``placement`` and what it costs.

    Attributes:
        gpu: the GPU model timed.
        gpus: GPUs of the placement.
        mode: "training" or "inference".
        tokens_per_second: trained or generated, over all GPUs.
        step_seconds: an optimizer step (training) or a decode step (inference).
        mfu: model FLOPs utilization (training), else None.
        bound: what limits the step (``core.speed``'s parts; an offload plan's resources).
        utilization: the shares of peak used.
        price: the price of a GPU-hour, or None.
        cost_per_million: the price of a million tokens trained or generated, or None.
        placement: what is timed.
        train_tokens: the tokens of the training run timed, or None.
        time_seconds: the run's wall time, or None.
        gpu_hours: the run's GPU-hours, or None.
        cost: the run's cost, or None.
        notes: what the figures assume.
        concurrency: sequences decoded together (inference).
        training: the training speed in full (its JSON block), or None.
        basis: what an inference speed rests on: "measured" or "extrapolated" (llama.cpp,
            published llama-bench rows: ``core.llamacpp_speed``; extrapolated too where part of
            the model is off the GPU; vLLM and SGLang, vLLM's step fitted on published serving
            runs: ``core.serving_steps``), "roofline" (datasheet peaks at the default shares);
            "" for training.
        prefill_seconds: the time to first token: processing ``prompt_tokens`` from an empty
            cache, where it is estimated (llama.cpp with a tensor rate), else None.
        prompt_tokens: the prompt timed (``--prompt``, else the whole context), or None.
        engine: the engine timed (the workload's).
        host_range: vLLM and SGLang, where the host's CPU moves the speed: the tokens per
            second on the slow host class (``tokens_per_second``) and the fast one
            (``core.serving_speed.ServingSpeed.host_range``); else None.
    """

    gpu: str
    gpus: int
    mode: str
    tokens_per_second: float
    step_seconds: float
    mfu: float | None
    bound: str
    utilization: Utilization
    price: Price | None
    cost_per_million: float | None
    placement: TimedPlacement
    train_tokens: int | None = None
    time_seconds: float | None = None
    gpu_hours: float | None = None
    cost: float | None = None
    notes: tuple[str, ...] = ()
    concurrency: int = 1
    training: TrainingSpeed | None = None
    basis: str = ""
    prefill_seconds: float | None = None
    prompt_tokens: int | None = None
    engine: str = ""
    host_range: tuple[float, float] | None = None

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens one sequence is given per second while it decodes (inference)."""
        return self.tokens_per_second / max(1, self.concurrency)

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Prompt tokens processed per second, where a time to first token is estimated."""
        if self.prefill_seconds is None or self.prompt_tokens is None:
            return None
        return self.prompt_tokens / self.prefill_seconds

    def block(self) -> dict[str, Any]:
        """The document's ``speed`` (training) or ``serving`` (inference) object (docs/cli.md)."""
        price = None if self.price is None else self.price.to_dict()
        money = {
            "currency": None if self.price is None else self.price.currency,
            "price_source": None if self.price is None else self.price.source,
        }
        if self.training is not None:
            out = {
                "gpu": self.gpu,
                **self.training.to_dict(),
                "price": price,
                "cost_per_million_tokens": _rounded(self.cost_per_million, 4),
                "gpus": self.gpus,
            }
            if self.train_tokens is not None:
                out.update(
                    {
                        "train_tokens": self.train_tokens,
                        "time_seconds": _rounded(self.time_seconds, 1),
                        "gpu_hours": _rounded(self.gpu_hours, 3),
                        "cost": _rounded(self.cost, 2),
                        **money,
                    }
                )
            return {**out, "placement": self.placement.to_dict()}
        return {
            "gpu": self.gpu,
            "concurrency": self.concurrency,
            "tokens_per_second": round(self.tokens_per_second, 1),
            "step_seconds": round(self.step_seconds, 6),
            "bound": self.bound,
            "cost_per_million_tokens": _rounded(self.cost_per_million, 4),
            "price": price,
            **money,
            "gpus": self.gpus,
            "placement": self.placement.to_dict(),
            "decode_tokens_per_second": round(self.decode_tokens_per_second, 1),
            "prefill_tokens_per_second": _rounded(self.prefill_tokens_per_second, 1),
            "time_to_first_token_seconds": _rounded(self.prefill_seconds, 4),
            "prompt_tokens": self.prompt_tokens,
            "basis": self.basis,
            "notes": list(self.notes),
            "host_range_tokens_per_second": (
                None if self.host_range is None else [round(v, 1) for v in self.host_range]
            ),
        }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True)
class Untimed:
    """No speed or cost for a setup, and why.

    Attributes:
        gpu: the GPU it was to be timed on.
        code: ``no-rates`` (the GPU cannot be timed), ``does-not-fit`` (no placement of up to
            one machine of these GPUs runs it) or ``refused`` (settings the speed model refuses).
        reason: the reason in words.
    """

    gpu: str
    code: str
    reason: str

    def note(self) -> str:
        return f"no speed or cost: {self.reason}"


def time_setup(
    spec: ModelSpec,
    est: Estimate,
    gpu: str,
    capacity: int,
    rates: Rates,
    *,
    host: HostSettings,
    train_tokens: int | None = None,
    draft: ModelSpec | None = None,
    n_gpu_layers: int | None = None,
    layout: LlamaCppLayout | None = None,
) -> Timing | Untimed:
    """Time ``est``'s setup on GPUs named ``gpu`` of ``capacity`` bytes, on the placement that
    would run (module docstring): decoding at the batch as concurrency, or training (a run of
    ``train_tokens`` when given). ``n_gpu_layers`` and ``layout`` place a llama.cpp setup as
    given (a profile's saved placement) instead of the fastest."""
    w = est.workload
    try:
        if w.mode == "inference" and engine(w.engine).ggml:
            answer = llamacpp_plan(
                spec, w, capacity, rates, host=host, n_gpu_layers=n_gpu_layers, layout=layout
            )
            return _time_llamacpp(answer, gpu, rates, fits=_fits(est, gpu, capacity))
        fits = _fits(est, gpu, capacity)
        placement = TimedPlacement(AS_SET, gpu, w.gpus)
        if not fits:
            count = fit.gpus_needed(spec, w, capacity, fit.MAX_GPUS_PER_MACHINE, draft)
            if count is None:
                return Untimed(
                    gpu,
                    DOES_NOT_FIT,
                    f"the setup does not fit {gpu}, nor {fit.MAX_GPUS_PER_MACHINE} of them "
                    "(one machine)",
                )
            w = fit.sharded(w, count)
            placement = TimedPlacement(MORE_GPUS, gpu, count, _sharding_flags(w))
        return _timed(spec, w, rates, placement, train_tokens)
    except VramguiError as exc:
        return Untimed(gpu, REFUSED, message_of(exc))


def _fits(est: Estimate, gpu: str, capacity: int) -> bool:
    return fit.fit_rows(est, [(gpu, capacity)])[0].fits


def _sharding_flags(w: Workload) -> str:
    if w.mode == "training":
        return "FSDP" if w.fsdp else (f"ZeRO-{w.zero}" if w.zero else "data parallel")
    flag = engine(w.engine).tensor_parallel_flag
    return f"{flag} {w.tp}" if flag else f"tensor parallel over {w.tp} GPUs"


def _timed(
    spec: ModelSpec,
    w: Workload,
    rates: Rates,
    placement: TimedPlacement,
    train_tokens: int | None,
) -> Timing:
    price = rates.price
    if w.mode == "training":
        trained = training_speed(spec, w, rates.hardware, rates.utilization)
        run = None if train_tokens is None else run_cost(trained, w.gpus, train_tokens, price)
        return Timing(
            gpu=placement.gpu,
            gpus=w.gpus,
            mode=w.mode,
            tokens_per_second=trained.tokens_per_second,
            step_seconds=trained.step_seconds,
            mfu=trained.mfu,
            bound=trained.bound,
            utilization=trained.utilization,
            price=price,
            cost_per_million=_per_million(trained.tokens_per_second, w.gpus, price),
            placement=placement,
            train_tokens=train_tokens,
            time_seconds=None if run is None else run.time_seconds,
            gpu_hours=None if run is None else run.gpu_hours,
            cost=None if run is None else run.cost,
            notes=trained.notes,
            training=trained,
        )
    served = serving_speed(spec, w, rates.hardware, rates.utilization)
    return Timing(
        gpu=placement.gpu,
        gpus=w.gpus,
        mode=w.mode,
        tokens_per_second=served.tokens_per_second,
        step_seconds=served.step_seconds,
        mfu=None,
        bound=served.bound,
        utilization=rates.utilization,
        price=price,
        cost_per_million=_per_million(served.tokens_per_second, w.gpus, price),
        placement=placement,
        concurrency=served.concurrency,
        notes=served.notes,
        basis=served.basis,
        prefill_seconds=served.prefill_seconds,
        prompt_tokens=None if served.prefill_seconds is None else (w.prompt or w.seq),
        engine=w.engine,
        host_range=served.host_range,
    )


def _per_million(tokens_per_second: float, gpus: int, price: Price | None) -> float | None:
    return None if price is None else cost_per_million_tokens(tokens_per_second, gpus, price)


def llamacpp_plan(
    spec: ModelSpec,
    workload: Workload,
    capacity: int,
    rates: Rates,
    *,
    host: HostSettings,
    n_gpu_layers: int | None = None,
    layout: LlamaCppLayout | None = None,
    curves: bool = False,
) -> OffloadAnswer:
    """llama.cpp's offload plan of ``workload`` on its GPUs of ``capacity`` bytes, with the
    catalog's speeds of ``rates.gpu``: what ``vramgui plan --gpu NAME`` places by default
    (``curves``: with both curves walked, as ``plan_offload`` says)."""
    gpus = max(1, workload.gpus)
    bandwidths = bandwidths_for(rates.gpu, host, others=[rates.gpu] * (gpus - 1))
    return plan_offload(
        spec,
        workload,
        "llamacpp",
        [capacity] * gpus,
        bandwidths=bandwidths,
        host=host,
        n_gpu_layers=n_gpu_layers,
        layout=layout,
        curves=curves,
    )


def _time_llamacpp(
    answer: OffloadAnswer, gpu: str, rates: Rates, *, fits: bool
) -> Timing | Untimed:
    """The timing of llama.cpp's plan: ``as set`` where the estimate fits (``fits``) and the
    plan holds every layer on the GPUs, else the plan named (``offload``); its decode at the
    full context and its time to first token for the prompt, with what they rest on."""
    host = answer.host
    p = answer.placement
    within = all(
        used <= budget for used, budget in zip(p.gpu_bytes, p.vram_budget_bytes, strict=True)
    )
    if not within:
        reason = (
            f"llama.cpp cannot start on {gpu}: even one layer on the GPU needs "
            f"{format_bytes(answer.min_vram_bytes)}"
            if answer.chosen != PLACED_AS_SET
            else f"llama.cpp with {answer.flags} needs more than {gpu} holds"
        )
        return Untimed(gpu, DOES_NOT_FIT, reason)
    placement = TimedPlacement(
        AS_SET if fits and everything_on_gpus(p) else OFFLOAD,
        gpu,
        len(p.gpu_bytes),
        answer.flags,
        gpu_layers=p.gpu_layers,
        layers=p.blocks + 1,
        host_bytes=p.host_bytes,
        disk_bytes=p.disk_bytes,
        host=host,
    )
    t = answer.throughput
    gpus = len(p.gpu_bytes)
    basis, notes = llamacpp_basis(answer, rates)
    w = p.workload
    prompt = w.prompt or w.seq
    kernels = answer.bandwidths.kernels_of(0)
    ttft = None
    if kernels is not None and kernels.prompts:
        ttft = offload.prefill_seconds(p, answer.bandwidths, prompt, batch=1)
    return Timing(
        gpu=gpu,
        gpus=gpus,
        mode="inference",
        tokens_per_second=t.tokens_per_second,
        step_seconds=t.step_seconds,
        mfu=None,
        bound=t.bound,
        utilization=rates.utilization,
        price=rates.price,
        cost_per_million=_per_million(t.tokens_per_second, gpus, rates.price),
        placement=placement,
        concurrency=t.batch,
        notes=p.notes + notes,
        basis=basis,
        prefill_seconds=ttft,
        prompt_tokens=None if ttft is None else prompt,
        engine=w.engine,
    )


def llamacpp_basis(answer: OffloadAnswer, rates: Rates) -> tuple[str, tuple[str, ...]]:
    """What the speed of llama.cpp's plan rests on: its GPU layers on published llama-bench
    rows (``core.llamacpp_speed``: measured or extrapolated), and what is off the GPU on the
    offload roofline, checked on published offload runs (docs/offload.md): extrapolated."""
    p = answer.placement
    moe = any(unit.unit.experts for unit in p.units)
    basis, notes = speed_basis(rates.hardware, p.workload, moe=moe)
    if not everything_on_gpus(p):
        basis = EXTRAPOLATED
        notes += (
            "part of the model is off the GPU: host RAM, disk and PCIe timed by the offload "
            "roofline (published offload runs, docs/offload.md), not by llama-bench rows",
        )
    if len(p.gpu_bytes) > 1:
        notes += (
            f"split by layers over {len(p.gpu_bytes)} GPUs: they work in turn, "
            f"{offload.LLAMACPP_SPLIT_SECONDS * 1e6:.0f} us per hand-over",
        )
    if p.workload.batch > 1:
        basis = EXTRAPOLATED
        notes += (f"{p.workload.batch} sequences at once: llama-bench rows time one",)
    return basis, notes


def rank_setups(
    spec: ModelSpec,
    workload: Workload,
    offers: Sequence[tuple[str, int, Rates]],
    *,
    by: str,
    host: HostSettings,
    train_tokens: int | None = None,
    draft: ModelSpec | None = None,
) -> list[fit.RankedSetup]:
    """The GPUs of ``offers`` (name, capacity, rates) that fit, the fewest of each, ranked by
    time or cost (``core.fit.rank_setups``); a llama.cpp setup timed as its plan places it on
    them, as ``time_setup`` times it."""
    ranked = fit.rank_setups(
        spec,
        workload,
        [(name, capacity, r.hardware, r.price) for name, capacity, r in offers],
        by=by,
        train_tokens=train_tokens,
        utilizations={name: r.utilization for name, _, r in offers},
        draft=draft,
    )
    if workload.mode != "inference" or not engine(workload.engine).ggml:
        return ranked
    by_name = {name: (capacity, r) for name, capacity, r in offers}
    timed = []
    for setup in ranked:
        capacity, r = by_name[setup.gpu]
        try:
            answer = llamacpp_plan(spec, setup.workload, capacity, r, host=host)
        except VramguiError:
            continue
        per_second = answer.throughput.tokens_per_second
        timed.append(
            replace(
                setup,
                tokens_per_second=per_second,
                cost_per_million=_per_million(per_second, setup.count, setup.price),
                basis=llamacpp_basis(answer, r)[0],
            )
        )
    return fit.order_setups(timed, by)
