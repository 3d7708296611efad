"""A live-bytes counter that tells listeners when each phase of a run begins, and which
attention kernels ran.

The harness names the phases as it runs them (``counter.phase = "prefill"``) and starts a new peak
window before each measured step (``counter.reset_peak()``). Progress reports and the GPU's
allocator figures hang off those two moments, so the measuring code itself stays as it is.

``scaled_dot_product_attention`` picks a kernel per call: a fused one (flash, memory-efficient,
cuDNN; on the CPU a flash kernel) or its math fallback, which holds fp32 scores of
batch x heads x seq x seq. Where the CPU falls back and CUDA would not (q/k and v head sizes that
differ, as in MLA), a fake run's activations are the CPU's: ``AttentionCalls`` counts the calls, the
counter the fused kernels among them, and the difference says so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from vramgui.measure.live_bytes import LiveBytes

_aten = torch.ops.aten
FUSED_ATTENTION = frozenset(
    {
        _aten._scaled_dot_product_flash_attention_for_cpu.default,
        _aten._scaled_dot_product_flash_attention.default,
        _aten._scaled_dot_product_efficient_attention.default,
        _aten._scaled_dot_product_cudnn_attention.default,
    }
)


class PhaseListener(Protocol):
    """Told about the phases of a run as they happen."""

    def phase_started(self, ended: str, started: str) -> None:
        """Phase ``ended`` is over and ``started`` begins ("" once the run is over)."""

    def window_started(self) -> None:
        """A new peak window begins (the harness measures the last one)."""


class PhaseCounter(LiveBytes):
    """``LiveBytes`` whose phase changes and peak resets reach ``listeners``."""

    def __init__(self, *listeners: PhaseListener) -> None:
        self._listeners: tuple[PhaseListener, ...] = ()
        self._phase = "setup"
        super().__init__()
        self._listeners = listeners
        self.fused_attention_calls = 0

    @property
    def phase(self) -> str:
        """The phase running now."""
        return self._phase

    @phase.setter
    def phase(self, value: str) -> None:
        ended, self._phase = self._phase, value
        for listener in self._listeners:
            listener.phase_started(ended, value)

    def reset_peak(self) -> None:
        for listener in self._listeners:
            listener.window_started()
        super().reset_peak()

    def finish(self) -> None:
        """The run is over: the last phase ends."""
        for listener in self._listeners:
            listener.phase_started(self._phase, "")

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Collection[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func in FUSED_ATTENTION:
            self.fused_attention_calls += 1
        return super().__torch_dispatch__(func, types, args, kwargs)


class AttentionCalls(TorchFunctionMode):
    """Counts calls of ``scaled_dot_product_attention``, whichever kernel then runs them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Collection[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is F.scaled_dot_product_attention:
            self.calls += 1
        return func(*args, **(kwargs or {}))
