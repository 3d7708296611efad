"""llama.cpp's own fitting (``--fit on``, its default): the context, the GPU layers and which
layers keep their routed experts in host RAM, chosen so that every GPU keeps ``--fit-target``
MiB free (1024 by default).

Ported from ``common/fit.cpp`` (``common_params_fit_impl``), with this package's memory figures in
place of llama.cpp's trial loads:

1. If every layer fits every GPU with its margin, nothing changes.
2. If the context was not set (``-c 0``), it shrinks from the model's trained context, no lower
   than ``--fit-ctx`` (4096), until the whole model fits.
3. Otherwise layers are filled back to front: the last GPU first, each GPU taking the most that
   keep its margin. For a mixture of experts the layers first go as "dense only" (their routed
   experts in host RAM); if every layer then fits with room to spare, the dense-only layers at
   the back become full ones from the front of each GPU, and part of one more layer is tried
   (its up, then also its gate projection, on the GPU).

The result is an ordinary placement: ``-ngl``, a ``--tensor-split`` in layers per GPU and the
tensor overrides llama.cpp would set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.model import ModelSpec
from vramgui.core.offload.defaults import DEFAULT_FIT_MIN_CONTEXT
from vramgui.core.offload.devices import CPU
from vramgui.core.offload.llamacpp import LlamaCppModel, llamacpp_model
from vramgui.core.offload.overrides import LlamaCppLayout, TensorOverride
from vramgui.core.offload.placement import Placement
from vramgui.core.units import MiB
from vramgui.core.workload import Workload

# llama.cpp's --fit-target default, per device (--fit-ctx's: defaults.DEFAULT_FIT_MIN_CONTEXT).
DEFAULT_FIT_TARGET_BYTES = 1024 * MiB
# What of a layer stays on the GPU when part of it overflows (common_layer_fraction_t).
_OVERFLOW = {
    "moe": r"\.ffn_(up|down|gate_up|gate)_(ch|)exps",  # everything but the routed experts
    "gate": r"\.ffn_down.*",  # attention, up and gate
    "up": r"\.ffn_(gate|gate_up|down).*",  # attention and up
    "attn": r"\.ffn_(gate|up|gate_up|down).*",  # attention only
}


@dataclass(frozen=True, slots=True)
class FitResult:
    """What llama.cpp's fitting chooses.

    Attributes:
        placement: the placement at the chosen settings.
        context: the context it runs with (``-c``).
        layers_per_gpu: whole layers each GPU holds (the ``--tensor-split`` it sets).
        expert_layers_on_cpu: layers whose routed experts stay in host RAM.
        changed: whether anything had to change from every layer on the GPUs.
        notes: what was chosen and why.
    """

    placement: Placement
    context: int
    layers_per_gpu: tuple[int, ...]
    expert_layers_on_cpu: int
    changed: bool
    notes: tuple[str, ...]


@dataclass
class _Device:
    layers: int = 0  # layers assigned, the output counted on the last GPU
    partial: int = 0  # of them, layers with part of their FFN in host RAM
    overflow: str = "moe"  # what the first partial layer keeps on the GPU


def _layout(
    model: LlamaCppModel, devices: Sequence[_Device], base: LlamaCppLayout
) -> tuple[int, LlamaCppLayout]:
    """``-ngl``, ``--tensor-split`` and the overrides for layers per device, as llama.cpp sets
    them (``set_ngl_tensor_split_tbo``): the full layers of a GPU first, its partial ones after."""
    n_total = model.blocks + 1
    ngl = sum(d.layers for d in devices)
    first = n_total - ngl
    overrides: list[TensorOverride] = []
    for d in devices:
        first += d.layers - d.partial
        for il in range(first, first + d.partial):
            kind = d.overflow if il == first else "moe"
            overrides.append(TensorOverride(rf"blk\.{il}{_OVERFLOW[kind]}", CPU, "CPU"))
        first += d.partial
    split = tuple(float(d.layers) for d in devices) if len(devices) > 1 else ()
    return ngl, replace(base, overrides=tuple(overrides), tensor_split=split)


def _used(
    model: LlamaCppModel, devices: Sequence[_Device], budgets: Sequence[int], base: LlamaCppLayout
) -> tuple[int, ...]:
    ngl, layout = _layout(model, devices, base)
    return model.gpu_bytes_each(ngl, budgets, layout)


def _fill(
    model: LlamaCppModel,
    devices: list[_Device],
    budgets: Sequence[int],
    targets: Sequence[int],
    base: LlamaCppLayout,
    *,
    dense_only: bool,
) -> None:
    """Back to front: each GPU takes the most layers (dense-only ones for a MoE) it holds."""
    n_total = model.blocks + 1
    last = len(devices) - 1
    for i in range(last, -1, -1):
        free = n_total - sum(d.layers for d in devices[i + 1 :])
        best = 0
        for count in range(1, free + 1):
            devices[i] = _Device(count, (count if i < last else count - 1) if dense_only else 0)
            if _used(model, devices, budgets, base)[i] > targets[i]:
                break
            best = count
        devices[i] = _Device(best, (best if i < last else max(best - 1, 0)) if dense_only else 0)


def _convert(
    model: LlamaCppModel,
    devices: list[_Device],
    budgets: Sequence[int],
    targets: Sequence[int],
    base: LlamaCppLayout,
) -> None:
    """Front to back: dense-only layers become full ones while each GPU holds them, then part of
    one more layer is tried (``common_params_fit_impl``, step 4)."""
    for i in range(len(devices)):
        while devices[i].partial:
            kept = devices[i]
            devices[i] = replace(kept, partial=kept.partial - 1)
            if _used(model, devices, budgets, base)[i] > targets[i]:
                devices[i] = kept
                break
        current = devices[i]
        if not current.partial:
            continue
        # Part of one more layer: its up projection on the GPU, then its gate too; where not
        # even the up fits, llama.cpp keeps that layer's attention alone on the GPU.
        devices[i] = replace(current, overflow="up")
        if _used(model, devices, budgets, base)[i] < targets[i]:
            with_up = devices[i]
            devices[i] = replace(with_up, overflow="gate")
            if _used(model, devices, budgets, base)[i] >= targets[i]:
                devices[i] = with_up
        else:
            devices[i] = replace(current, overflow="attn")
            if _used(model, devices, budgets, base)[i] >= targets[i]:
                devices[i] = current


def fit_llamacpp(
    spec: ModelSpec,
    workload: Workload,
    budgets: Sequence[int],
    *,
    margin_bytes: int | Sequence[int] = DEFAULT_FIT_TARGET_BYTES,
    context_auto: bool = False,
    min_context: int = DEFAULT_FIT_MIN_CONTEXT,
    host_ram_bytes: int | None = None,
    layout: LlamaCppLayout | None = None,
) -> FitResult:
    """llama.cpp's ``--fit``: the settings that keep ``margin_bytes`` free on every GPU.

    Args:
        spec: the model.
        workload: the settings; its ``seq`` is the context unless ``context_auto``.
        budgets: each GPU's memory (llama.cpp: its free memory).
        margin_bytes: ``--fit-target``, one figure or one per GPU.
        context_auto: the context was not set (``-c 0``): start from the model's trained
            context and shrink it down to ``min_context`` before moving layers.
        min_context: ``--fit-ctx``.
        host_ram_bytes: host RAM (None: no limit).
        layout: the split mode and main GPU (``--tensor-split`` and overrides are what fitting
            sets, as llama.cpp refuses to fit when they are given).

    Raises:
        WorkloadError: settings llama.cpp does not support, or a split fitting does not handle.
    """
    budgets = tuple(budgets)
    margins = (
        tuple(margin_bytes) if not isinstance(margin_bytes, int) else (margin_bytes,) * len(budgets)
    )
    if len(margins) != len(budgets):
        raise WorkloadError(f"--fit-target gives {len(margins)} margins for {len(budgets)} GPUs")
    base = layout or LlamaCppLayout()
    if base.overrides or base.moves_experts or base.tensor_split:
        raise WorkloadError(
            Message(
                "llama.cpp fits only what is not set: leave out {split}, {overrides}, {cpu_moe} "
                "and {n_cpu_moe} with {fit} (it sets them itself)",
                split=Setting("tensor_split"),
                overrides=Setting("overrides"),
                cpu_moe=Setting("cpu_moe"),
                n_cpu_moe=Setting("n_cpu_moe"),
                fit=Setting("fit"),
            )
        )
    if base.split_mode != "layer" and len(budgets) > 1:
        raise WorkloadError(
            Message(
                "with several GPUs llama.cpp's --fit handles {layer} only (common/fit.cpp)",
                layer=Setting("split_mode", "layer"),
            )
        )
    targets = tuple(b - m for b, m in zip(budgets, margins, strict=True))
    notes: list[str] = []
    context = workload.seq
    if context_auto:
        context = spec.facts.max_position_embeddings or workload.seq
    model = llamacpp_model(spec, workload.with_(seq=context))
    n_total = model.blocks + 1

    def fits(m: LlamaCppModel, ngl: int, lay: LlamaCppLayout) -> bool:
        used = m.gpu_bytes_each(ngl, budgets, lay)
        return all(u <= t for u, t in zip(used, targets, strict=True))

    if fits(model, n_total, base):
        placement = model.place(
            budgets, host_ram_bytes=host_ram_bytes, n_gpu_layers=n_total, layout=base
        )
        return FitResult(
            placement, context, (), 0, False, ("Every layer fits: nothing to change.",)
        )
    if context_auto and context > min_context:
        low, high = min_context, context
        shrunk = llamacpp_model(spec, workload.with_(seq=low))
        if fits(shrunk, n_total, base):
            # The largest context, in llama.cpp's steps of 256, that still holds every layer.
            low //= 256
            high //= 256
            while high - low > 1:
                middle = (low + high) // 2
                trial = llamacpp_model(spec, workload.with_(seq=middle * 256))
                if fits(trial, n_total, base):
                    low = middle
                else:
                    high = middle
            context = low * 256
            model = llamacpp_model(spec, workload.with_(seq=context))
            placement = model.place(
                budgets, host_ram_bytes=host_ram_bytes, n_gpu_layers=n_total, layout=base
            )
            notes.append(f"The context shrinks to {context:,} tokens so that every layer fits.")
            return FitResult(placement, context, (), 0, True, tuple(notes))
        context = min_context
        model = shrunk
        notes.append(f"The context shrinks to the --fit-ctx floor of {context:,} tokens.")
    devices = [_Device() for _ in budgets]
    moe = model.moe_blocks > 0
    _fill(model, devices, budgets, targets, base, dense_only=moe)
    if moe and sum(d.layers for d in devices) == n_total:
        _convert(model, devices, budgets, targets, base)
    ngl, chosen = _layout(model, devices, base)
    placement = model.place(budgets, host_ram_bytes=host_ram_bytes, n_gpu_layers=ngl, layout=chosen)
    on_cpu = sum(
        1 for u in placement.units if any(p.expert_bytes and p.device != u.device for p in u.parts)
    )
    if moe:
        notes.append(
            f"-ngl {ngl}: {on_cpu} layers keep their routed experts in host RAM (llama.cpp's "
            "--fit moves the experts of the last layers of each GPU; the bytes are those of "
            f"--n-cpu-moe {on_cpu})."
        )
    else:
        notes.append(f"-ngl {ngl}: the most whole layers that keep the margin free.")
    return FitResult(
        placement,
        context,
        tuple(d.layers for d in devices),
        on_cpu,
        True,
        tuple(notes),
    )
