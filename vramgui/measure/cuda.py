"""The harness's workload on the local NVIDIA GPU, with what the allocator and the driver report.

The model is built on the GPU from its config.json (no weights are downloaded) and runs the same
steps as the fake run. At the end of every phase the caching allocator's peaks
(``torch.cuda.max_memory_allocated`` and ``max_memory_reserved``, reset for the next phase) and
NVML's view of the device are read. The CUDA context is what NVML sees beyond the allocator's
reserved memory. Whatever happens, the run leaves the GPU as it found it: the model is dropped and
the allocator's cache emptied before this returns or raises.

Written for a GPU machine; without one, tests run it on the CPU with a scripted allocator and NVML.
"""

from __future__ import annotations

import gc
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from vramgui.core.units import format_bytes
from vramgui.hardware.nvml import GpuSnapshot, LocalGpu, NvmlProbe
from vramgui.measure import harness
from vramgui.measure.progress import PhaseCounter, PhaseListener
from vramgui.measure.request import MeasureError


class Allocator(Protocol):
    """The memory functions of ``torch.cuda`` for one device (tests script them)."""

    def synchronize(self) -> None: ...
    def max_memory_allocated(self) -> int: ...
    def max_memory_reserved(self) -> int: ...
    def memory_allocated(self) -> int: ...
    def memory_reserved(self) -> int: ...
    def reset_peak_memory_stats(self) -> None: ...
    def empty_cache(self) -> None: ...


class TorchAllocator:
    """``torch.cuda``'s allocator figures for ``device``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def max_memory_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device)

    def max_memory_reserved(self) -> int:
        return torch.cuda.max_memory_reserved(self.device)

    def memory_allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device)

    def memory_reserved(self) -> int:
        return torch.cuda.memory_reserved(self.device)

    def reset_peak_memory_stats(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()


class DeviceView:
    """What NVML sees of one GPU: this process's memory on it, or the device's in-use memory.

    Created before the run's first allocation: what the device holds then belongs to others.

    Args:
        snapshot: reads every GPU (``NvmlProbe().snapshot``; tests pass scripted ones).
        uuid: the GPU's UUID as torch reports it (without NVML's "GPU-" prefix).
    """

    def __init__(self, snapshot: Callable[[], GpuSnapshot], uuid: str) -> None:
        self._snapshot = snapshot
        self._uuid = uuid
        self.basis = "unavailable"
        gpu = self._gpu()
        self._before = None if gpu is None else gpu.used_bytes

    def _gpu(self) -> LocalGpu | None:
        for gpu in self._snapshot().gpus:
            if self._uuid and gpu.uuid and gpu.uuid.removeprefix("GPU-") == self._uuid:
                return gpu
        return None

    def used_bytes(self) -> int | None:
        """This process's bytes on the GPU as the driver counts them, or None if unknown.

        Where NVML lists this process (not in every container), its own figure; else the device's
        memory in use less what was in use before the run.
        """
        gpu = self._gpu()
        if gpu is None:
            return None
        own = [p.used_bytes for p in gpu.processes or () if p.pid == os.getpid()]
        if own and own[0] is not None:
            self.basis = "this process (NVML)"
            return own[0]
        if gpu.used_bytes is None or self._before is None:
            return None
        self.basis = "the whole GPU less what was in use before the run (NVML)"
        return gpu.used_bytes - self._before


@dataclass(slots=True)
class _Reading:
    window: int
    phase: str
    max_allocated: int
    max_reserved: int
    nvml_used: int | None


class CudaRecorder:
    """Reads the allocator's peaks and NVML at the end of each phase (a ``PhaseListener``)."""

    def __init__(self, allocator: Allocator, view: DeviceView) -> None:
        self._allocator = allocator
        self._view = view
        self._window = 0
        self._current = "setup"
        self.readings: list[_Reading] = []
        allocator.reset_peak_memory_stats()

    def phase_started(self, ended: str, started: str) -> None:
        self._close(ended)
        self._current = started

    def window_started(self) -> None:
        self._close(self._current)
        self._window += 1

    def _close(self, phase: str) -> None:
        allocator = self._allocator
        allocator.synchronize()
        self.readings.append(
            _Reading(
                self._window,
                phase,
                allocator.max_memory_allocated(),
                allocator.max_memory_reserved(),
                self._view.used_bytes(),
            )
        )
        allocator.reset_peak_memory_stats()

    def figures(self) -> dict[str, Any]:
        """Per phase of the measured (last) window, the peaks; and the model's loading."""
        last = max((r.window for r in self.readings), default=0)
        phases: dict[str, dict[str, int | None]] = {}
        for r in self.readings:
            if r.window != last:
                continue
            seen = phases.setdefault(
                r.phase,
                {"max_memory_allocated": 0, "max_memory_reserved": 0, "nvml_used_bytes": None},
            )
            seen["max_memory_allocated"] = max(seen["max_memory_allocated"] or 0, r.max_allocated)
            seen["max_memory_reserved"] = max(seen["max_memory_reserved"] or 0, r.max_reserved)
            if r.nvml_used is not None:
                seen["nvml_used_bytes"] = max(seen["nvml_used_bytes"] or 0, r.nvml_used)
        load = next((r for r in self.readings if r.window == 0 and r.phase == "setup"), None)
        used = [p["nvml_used_bytes"] for p in phases.values() if p["nvml_used_bytes"] is not None]
        return {
            "max_memory_allocated": max(
                (p["max_memory_allocated"] or 0 for p in phases.values()), default=0
            ),
            "max_memory_reserved": max(
                (p["max_memory_reserved"] or 0 for p in phases.values()), default=0
            ),
            "nvml_used_bytes": max(used) if used else None,
            "phases": phases,
            "load": None
            if load is None
            else {
                "max_memory_allocated": load.max_allocated,
                "max_memory_reserved": load.max_reserved,
                "nvml_used_bytes": load.nvml_used,
            },
        }


def context_bytes(view: DeviceView, allocator: Allocator) -> int | None:
    """The CUDA context (and whatever else is not the allocator's): NVML's figure less reserved."""
    used = view.used_bytes()
    return None if used is None else max(0, used - allocator.memory_reserved())


def run_on_device(
    config: dict,
    settings: dict,
    device: torch.device,
    allocator: Allocator,
    view: DeviceView,
    *,
    listeners: tuple[PhaseListener, ...] = (),
) -> dict[str, Any]:
    """The harness's run with ``device`` as the default device, read by ``allocator`` and ``view``.

    Frees what the run allocated before it returns or raises (``freed`` in the result: what the
    allocator still holds afterwards, zero when everything was released).

    Raises:
        MeasureError: the GPU ran out of memory (the phase is named).
    """
    context_at_start = context_bytes(view, allocator)
    recorder = CudaRecorder(allocator, view)
    counter = PhaseCounter(recorder, *listeners)
    try:
        with device:
            result = harness.measure(config, settings, counter)
        counter.finish()
        result["fused_attention_calls"] = counter.fused_attention_calls
        context_at_end = context_bytes(view, allocator)
    except torch.OutOfMemoryError as exc:
        # The traceback's frames hold the model: cleared, the memory can go back.
        traceback.clear_frames(exc.__traceback__)
        raise MeasureError(
            f"the GPU ran out of memory during {counter.phase}: {str(exc).splitlines()[0]}"
        ) from None
    finally:
        del counter
        gc.collect()
        allocator.empty_cache()
    figures = recorder.figures()
    result.pop("notes", None)  # the harness's notes describe CPU autocast
    result["cuda"] = {
        **figures,
        "context_bytes": context_at_end,
        "context_at_start_bytes": context_at_start,
        "nvml_basis": view.basis,
        "freed": {
            "memory_allocated": allocator.memory_allocated(),
            "memory_reserved": allocator.memory_reserved(),
        },
    }
    return result


def measure_on_cuda(
    config: dict,
    settings: dict,
    listeners: tuple[PhaseListener, ...] = (),
    *,
    required_bytes: int,
    force: bool,
) -> dict[str, Any]:
    """Run on the current CUDA device, refusing a setup that the estimate says does not fit.

    Args:
        config: config.json of the model.
        settings: the harness's settings (``fake`` False).
        listeners: told about the phases (progress).
        required_bytes: the estimate's total for this GPU, checked against its free memory.
        force: run even when ``required_bytes`` exceeds the free memory.

    Raises:
        MeasureError: no CUDA device, the setup does not fit, or the GPU ran out of memory.
    """
    if not torch.cuda.is_available():
        raise MeasureError(
            f"PyTorch {torch.__version__} sees no CUDA device; --device fake measures the same "
            "workload without a GPU"
        )
    device = torch.device("cuda", torch.cuda.current_device())
    properties = torch.cuda.get_device_properties(device)
    probe = NvmlProbe()
    try:
        view = DeviceView(probe.snapshot, str(getattr(properties, "uuid", "")))
        free, total = torch.cuda.mem_get_info(device)
        if required_bytes > free and not force:
            raise MeasureError(
                f"the estimate, {format_bytes(required_bytes)}, does not fit the "
                f"{format_bytes(free)} free on {properties.name}; --force runs it anyway"
            )
        result = run_on_device(
            config, settings, device, TorchAllocator(device), view, listeners=listeners
        )
    finally:
        probe.close()
    result["cuda"].update(
        {"device": properties.name, "total_bytes": total, "free_before_bytes": free}
    )
    result["versions"]["cuda"] = torch.version.cuda
    return result
