"""Timing a few training steps on the GPU, for the speed model's calibration.

The memory run (``cuda.py``) counts every tensor through a dispatch mode, which slows each
operation: its steps say nothing of speed. Here the same model and step run again with nothing
watching them: a few warm-up steps (kernel selection, the allocator's first growth), then
``steps`` timed ones, each ended by synchronizing the device before the clock is read. The
median step is reported with the tokens it trained.

Written for a GPU machine; tests run it on the CPU with a scripted clock and synchronizer.
"""

from __future__ import annotations

import gc
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
from vramgui.core.speed import training_speed
from vramgui.core.workload import Workload
from vramgui.hardware import calibration
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.measure import harness

WARMUP_STEPS = 2
TIMED_STEPS = 5


@dataclass(frozen=True, slots=True)
class StepTiming:
    """Training steps timed on one device.

    Attributes:
        step_seconds: the median of the timed steps.
        steps_seconds: every timed step, in order.
        tokens_per_step: batch x sequence x gradient accumulation.
        device: what the steps ran on (the GPU's name).
    """

    step_seconds: float
    steps_seconds: tuple[float, ...]
    tokens_per_step: int
    device: str

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_step / self.step_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_seconds": self.step_seconds,
            "steps_seconds": list(self.steps_seconds),
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_second": self.tokens_per_second,
            "device": self.device,
        }


def time_training_steps(
    config: dict,
    settings: dict,
    *,
    device: str,
    synchronize: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = WARMUP_STEPS,
    steps: int = TIMED_STEPS,
) -> StepTiming:
    """Build ``config``'s model as the harness does (on the current default device) and time
    ``steps`` optimizer steps of ``settings`` after ``warmup`` untimed ones.

    Args:
        config: the model's config.json.
        settings: the harness's settings (``fake`` False; training).
        device: the device's name, for the record.
        synchronize: waits until the device has finished its queued work.
        clock: seconds, monotonic.
    """
    parsed = harness.Settings.from_dict(settings)
    if parsed.mode != "training" or parsed.fake:
        raise ValueError("timing runs real training steps: mode training, fake false")
    model = harness.build_model(config, parsed)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    # The harness's own step: its optimizer, scaler, forward and clipping.
    optimizer = harness._make_optimizer(trainable, parsed.optimizer)
    scaler = harness._grad_scaler(parsed)
    input_ids = torch.zeros((parsed.batch, parsed.seq), dtype=torch.long)
    encoder = model.config.model_type in harness.ENCODER_MODEL_TYPES
    extra = {"attention_mask": torch.ones_like(input_ids)} if encoder else {"use_cache": False}
    batch = {"input_ids": input_ids, "labels": input_ids, **extra}

    def step() -> None:
        for _ in range(parsed.grad_accum):
            loss = harness._forward(model, parsed, batch).loss / parsed.grad_accum
            (loss if scaler is None else scaler.scale(loss)).backward()
            del loss
        if scaler is not None:
            scaler.unscale_(optimizer)
        if parsed.loop == "trainer":
            torch.nn.utils.clip_grad_norm_(trainable, harness.MAX_GRAD_NORM)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)

    # The model and the optimizer go when this returns (or raises): nothing else holds them.
    for _ in range(warmup):
        step()
    synchronize()
    seconds = []
    for _ in range(steps):
        start = clock()
        step()
        synchronize()
        seconds.append(clock() - start)
    return StepTiming(
        step_seconds=statistics.median(seconds),
        steps_seconds=tuple(seconds),
        tokens_per_step=parsed.batch * parsed.seq * parsed.grad_accum,
        device=device,
    )


def time_on_cuda(config: dict, settings: dict, steps: int = TIMED_STEPS) -> StepTiming:
    """Time ``steps`` training steps on the current CUDA device (the memory run has ended and
    freed it); the allocator's cache is emptied afterwards."""
    device = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_properties(device).name
    try:
        with device:
            return time_training_steps(
                config,
                settings,
                device=name,
                synchronize=lambda: torch.cuda.synchronize(device),
                steps=steps,
            )
    except torch.OutOfMemoryError as exc:
        # The traceback's frames hold the model: cleared, the memory can go back.
        traceback.clear_frames(exc.__traceback__)
        raise RuntimeError(f"out of memory while timing: {str(exc).splitlines()[0]}") from None
    finally:
        gc.collect()
        torch.cuda.empty_cache()


def calibrate_from_run(
    spec: ModelSpec,
    workload: Workload,
    config: dict,
    settings: dict,
    *,
    timer: Callable[[dict, dict], StepTiming] = time_on_cuda,
    store: Path | None = None,
) -> dict[str, Any]:
    """Time the setup's steps on the GPU, calibrate the speed model's utilization for that GPU
    model and store it (``hardware.calibration``): the ``measured.speed`` block of
    `vramgui measure`'s document.

    A GPU the catalog lacks, or a run that cannot calibrate, is timed but not stored (``stored``
    null and ``reason`` say why).
    """
    try:
        steps = timer(config, settings)
    except RuntimeError as exc:  # out of memory, a kernel the GPU lacks: the memory run stands
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return {"stored": None, "reason": f"the timed steps failed: {first}"}
    block: dict[str, Any] = {**steps.to_dict(), "stored": None}
    try:
        gpu = find_gpu(steps.device)
        hardware = speed_hardware(gpu, workload.dtype)
        block["default_tokens_per_second"] = training_speed(
            spec, workload, hardware
        ).tokens_per_second
        result = calibration.calibrate(
            spec, workload, hardware, tokens_per_second=steps.tokens_per_second,
            device=steps.device,
        )  # fmt: skip
        path = calibration.save(result, store)
    except VramguiError as exc:
        block["reason"] = str(exc)
        return block
    block.update({"gpu": gpu.name, "matmul": result.matmul, "stored": str(path)})
    return block
