"""Optimizer states and the step's temporaries, as torch's and bitsandbytes' optimizers
allocate them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramgui.core.errors import WorkloadError

# bitsandbytes 8-bit optimizers: tensors under this many elements keep 32-bit states, and the
# 8-bit states carry one fp32 absmax per block.
_BNB_MIN_8BIT_SIZE = 4096
_BNB_BLOCK = 256


@dataclass(frozen=True, slots=True)
class OptimizerBytes:
    states: int
    temporaries: int


def optimizer_bytes(
    name: str, sizes: list[int], shapes: list[tuple[int, ...]], b: int
) -> OptimizerBytes:
    """States and step temporaries for trainable tensors of ``sizes`` elements, ``b`` bytes each."""
    total = sum(sizes) * b
    largest = max(sizes, default=0) * b
    if name == "adamw":
        # torch's foreach AdamW (the CUDA default): exp_avg, exp_avg_sq, and in the step
        # exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs) for the whole group at once.
        return OptimizerBytes(2 * total, total)
    if name == "adamw-fused":
        return OptimizerBytes(2 * total, 0)
    if name == "adamw-8bit":
        states = 0
        for n in sizes:
            if n < _BNB_MIN_8BIT_SIZE:
                states += 2 * n * 4
            else:
                states += 2 * (n + 4 * math.ceil(n / _BNB_BLOCK))
        return OptimizerBytes(states, 0)
    if name == "sgd":
        # momentum_buffer; the foreach update works in place.
        return OptimizerBytes(total, 0)
    if name == "lion":
        # exp_avg; the per-tensor update clones exp_avg and adds the gradient.
        return OptimizerBytes(total, 2 * largest)
    if name == "adafactor":
        states = 0
        matrix_total = 0
        vector_total = 0
        for shape in shapes:
            n = math.prod(shape)
            if len(shape) >= 2:
                rows = math.prod(shape[:-1])
                cols = math.prod(shape[:-2]) * shape[-1]
                states += (rows + cols) * b
                matrix_total += n * b
            else:
                states += n * b
                vector_total += n * b
        # torch's foreach Adafactor builds var_estimates (one full-size tensor per parameter) for
        # the matrices, and for the vectors the squared grads then a clone of the variances.
        return OptimizerBytes(states, max(matrix_total, vector_total))
    raise WorkloadError(f"unknown optimizer {name!r}")
