"""One entry point for a measured run: the fake run on the CPU, or the same workload on the GPU.

Imports torch: reached only once ``vramgui.measure.extra`` has found it installed.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import transformers

from vramgui.measure import harness
from vramgui.measure.cuda import measure_on_cuda
from vramgui.measure.progress import AttentionCalls, PhaseCounter, PhaseListener
from vramgui.measure.request import CUDA, FAKE, MeasureError

# A library's message can list hundreds of names; the first of them say enough.
MESSAGE_CHARS = 240


def default_device() -> str:
    """ "cuda" where PyTorch sees a CUDA device, else "fake"."""
    return CUDA if torch.cuda.is_available() else FAKE


def run(
    config: dict,
    settings: dict,
    device: str,
    *,
    listeners: tuple[PhaseListener, ...] = (),
    required_bytes: int = 0,
    force: bool = False,
) -> dict[str, Any]:
    """Measure ``config``'s model under the harness ``settings`` on ``device``.

    Args:
        config: the model's config.json.
        settings: from ``request.harness_settings`` for the same device.
        device: "fake" (FakeTensorMode on the CPU: no memory, no GPU) or "cuda".
        listeners: told about each phase as it begins (progress).
        required_bytes: the estimate's total, held against the GPU's free memory on "cuda".
        force: run on the GPU even where ``required_bytes`` does not fit.

    Returns:
        The harness's record (see ``harness.measure``) with ``attention_calls`` and
        ``fused_attention_calls`` (SDPA calls, and those a fused kernel ran); on "cuda" also
        ``cuda`` (the allocator's and NVML's figures per phase, the context); on "fake" also
        ``host_peak_rss_bytes``.

    Raises:
        MeasureError: the run could not be made; the message says why, in one line.
    """
    tracker = _PhaseTracker()
    listening = (tracker, *listeners)
    try:
        with _quiet_libraries(), AttentionCalls() as attention:
            if device == CUDA:
                result = measure_on_cuda(
                    config, settings, listening, required_bytes=required_bytes, force=force
                )
            else:
                counter = PhaseCounter(*listening)
                result = harness.measure(config, settings, counter)
                counter.finish()
                result["fused_attention_calls"] = counter.fused_attention_calls
                result["host_peak_rss_bytes"] = _peak_rss_bytes()
        result["attention_calls"] = attention.calls
        return result
    except MeasureError:
        raise
    except harness.UnsupportedSettingError as exc:
        raise MeasureError(f"cannot measure this setup: {exc}") from None
    except Exception as exc:
        # transformers or peft refusing this config (an architecture it cannot build as a causal
        # LM, LoRA targets the model lacks): the reason is worth a line, a traceback is not.
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        if len(first) > MESSAGE_CHARS:
            first = first[:MESSAGE_CHARS].rsplit(" ", 1)[0] + " …"
        raise MeasureError(
            f"transformers could not run this model ({tracker.where}): "
            f"{type(exc).__name__}: {first}"
        ) from None


class _PhaseTracker:
    """Remembers the phase running now, to say where a failed run stopped."""

    def __init__(self) -> None:
        self.where = "building the model"

    def phase_started(self, ended: str, started: str) -> None:
        self.where = started or "finishing"

    def window_started(self) -> None:
        """A new window changes no phase."""


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Without the libraries' deprecation notices and info logs: they speak of their own API,
    nothing a person measuring a setup can act on."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def _peak_rss_bytes() -> int | None:
    """The most host memory this process has held, or None where the OS does not say."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
