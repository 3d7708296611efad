"""What to change when a setup does not fit: ``core.fit.advise``'s changes to the settings and,
under llama.cpp, what a llama.cpp user does first: put whole layers (``-ngl``) or the routed
experts (``--n-cpu-moe``) in host RAM, each with the speed it runs at."""

from __future__ import annotations

from collections.abc import Callable

from vramgui.answers.host import HostSettings
from vramgui.answers.rates import Rates
from vramgui.answers.timing import llamacpp_plan
from vramgui.core import fit
from vramgui.core.engines import engine
from vramgui.core.errors import VramguiError
from vramgui.core.estimate import Estimate
from vramgui.core.model import ModelSpec
from vramgui.core.offload.curves import LAYERS, CurvePoint
from vramgui.core.units import format_bytes, format_rate


def advise(
    spec: ModelSpec,
    current: Estimate,
    capacity: int,
    *,
    host: HostSettings,
    rates: Rates | None,
    draft: ModelSpec | None = None,
) -> list[fit.Suggestion]:
    """Changes that make ``current``'s setup fit ``capacity`` bytes: offloading first under
    llama.cpp (fastest first; timed with ``rates``, the target GPU's), then the settings."""
    w = current.workload
    changes = fit.advise(spec, w, capacity, draft)
    if w.mode != "inference" or not engine(w.engine).ggml or rates is None:
        return changes
    if current.total_bytes <= capacity:
        return changes
    try:
        answer = llamacpp_plan(spec, w, capacity, rates, host=host, curves=True)
    except VramguiError:
        return changes
    points = [p for p in answer.alternatives.values() if p is not None]
    points.sort(key=lambda p: -p.tokens_per_second)
    every = answer.placement.blocks + 1
    return [_offload(p, current.total_bytes, host, every) for p in points] + changes


def saving_text(
    saves_bytes: int | None,
    pool_bytes: int | None = None,
    pool_tokens: int | None = None,
    size: Callable[[int], str] = format_bytes,
) -> str:
    """What a change gives, as the front ends write it (``size`` formats bytes in the reader's
    unit): the memory it frees, or under an engine that pre-allocates its KV pool (a pool is
    given), the pool the engine starts with and the room the change makes there for a request
    of the context (``core.fit.Suggestion.saves_bytes``). Empty when there is nothing to say."""
    if pool_bytes is None:
        return f"frees {size(saves_bytes)}" if saves_bytes else ""
    room = (
        f"{size(saves_bytes)} more room for a request of the context"
        if saves_bytes and saves_bytes > 0
        else ""
    )
    if pool_bytes <= 0:
        # The weights take the whole share ("KV pool 0.00 GiB (0 tokens)" would hide why).
        pool, joint = "the weights leave no KV pool", "; "
    else:
        tokens = f" ({pool_tokens:,} tokens)" if pool_tokens is not None else ""
        pool, joint = f"KV pool {size(pool_bytes)}{tokens}", ", "
    return f"{pool}{joint}{room}" if room else pool


def shortfall_text(row: fit.FitRow, seq: int, size: Callable[[int], str] = format_bytes) -> str:
    """What a setup that does not fit ``row``'s GPU is short of, as the front ends word it: under
    an engine that pre-allocates its KV pool (vLLM, SGLang), what the pool its start-up model
    allocates lacks for one request of the context (``seq`` tokens), else the memory missing."""
    up = row.vllm or row.sglang
    if up is None or up.shortfall_bytes <= 0:
        if row.vllm is not None and row.vllm.message:
            return f"vLLM refuses to start: {row.vllm.message}"
        return f"{size(-row.headroom_bytes)} short"
    request = f"one request of {seq:,} tokens"
    lack = up.needed_bytes - up.available_bytes
    if lack != up.shortfall_bytes:
        # vLLM's share asks for more than the GPU has free: there is no pool to speak of.
        return (
            f"vLLM's memory share ({size(up.requested_bytes)}) is {size(up.shortfall_bytes)} "
            "more than is free"
        )
    if up.available_bytes <= 0:
        return f"the weights leave no KV pool; {request} needs {size(up.needed_bytes)}"
    return f"KV pool {size(up.available_bytes)} is {size(lack)} short of {request}"


def _offload(point: CurvePoint, total_bytes: int, host: HostSettings, every: int) -> fit.Suggestion:
    """The advice of one placement with part of the model in host RAM (``every``: the layers
    llama.cpp places, all of which stay on the GPU when experts move); ``total_bytes`` is the
    estimate's, per GPU."""
    if point.kind == LAYERS:
        title = f"Put layers in host RAM: {point.flag} of {every}"
        placement = (point.value, 0)
    else:
        title = f"Put experts in host RAM: -ngl {every} {point.flag}"
        placement = (every, point.value)
    ram = "" if host.ram_bytes is None else f" of {format_bytes(host.ram_bytes)}"
    cost = (
        f"decodes at about {format_rate(point.tokens_per_second)} tokens/s with "
        f"{format_bytes(point.host_bytes)} in host RAM{ram} (llama.cpp)"
    )
    # Per GPU, as the estimate's total: the GPU that holds the most.
    fullest = max(point.gpu_bytes)
    return fit.Suggestion(
        title, {}, total_bytes - fullest, cost, True, fullest, placement=placement
    )
