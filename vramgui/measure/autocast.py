"""CUDA autocast's float32 rules, applied on top of CPU autocast.

Both autocasts run the same lower-precision ops (linear, matmul, bmm, baddbmm, addmm, conv,
scaled_dot_product_attention) in the 16-bit dtype and cache the 16-bit copies of fp32 weights
for the whole forward. They differ in the float32 list: CUDA autocast runs pow, exp, log, rsqrt,
layer_norm, group_norm, softplus, norms ... in float32 (casting 16-bit inputs up) and gives
softmax, log_softmax, sum, cumsum, prod a float32 result when no dtype is asked for; CPU autocast
leaves all of these in the input's dtype. In transformers this matters where a 16-bit activation
reaches one of them: GPT-2's gelu_new (pow) and eager softmax without dtype (GPT-2, BERT) are
float32 on CUDA. Source: the autocast lists of aten/src/ATen/autocast_mode.cpp (CUDA `fp32` and
`fp32_set_opt_dtype` vs. CPU `fp32`), torch 2.x.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_LOW_PRECISION = (torch.float16, torch.bfloat16)

# CUDA `fp32` policy: 16-bit floating inputs are cast to float32.
_CAST_TO_FP32 = frozenset(
    {
        torch.pow,
        torch.Tensor.pow,
        torch.Tensor.__pow__,
        torch.Tensor.__rpow__,
        torch.exp,
        torch.Tensor.exp,
        torch.expm1,
        torch.Tensor.expm1,
        torch.log,
        torch.Tensor.log,
        torch.log10,
        torch.Tensor.log10,
        torch.log2,
        torch.Tensor.log2,
        torch.log1p,
        torch.Tensor.log1p,
        torch.rsqrt,
        torch.Tensor.rsqrt,
        torch.reciprocal,
        torch.Tensor.reciprocal,
        torch.acos,
        torch.asin,
        torch.cosh,
        torch.sinh,
        torch.tan,
        torch.erfinv,
        torch.logsumexp,
        torch.Tensor.logsumexp,
        F.softplus,
        F.layer_norm,
        F.group_norm,
        F.cosine_similarity,
        F.mse_loss,
        F.l1_loss,
        F.smooth_l1_loss,
        F.huber_loss,
        F.kl_div,
        F.nll_loss,
        F.binary_cross_entropy_with_logits,
        torch.norm,
        torch.Tensor.norm,
        torch.cdist,
        torch.dist,
    }
)
# CUDA `fp32_set_opt_dtype` policy: a float32 result unless the caller gave a dtype.
_FP32_RESULT = frozenset(
    {
        torch.softmax,
        torch.Tensor.softmax,
        F.softmax,
        torch.log_softmax,
        torch.Tensor.log_softmax,
        F.log_softmax,
        torch.sum,
        torch.Tensor.sum,
        torch.cumsum,
        torch.Tensor.cumsum,
        torch.prod,
        torch.Tensor.prod,
        torch.cumprod,
        torch.Tensor.cumprod,
    }
)


def _is_low_precision(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype in _LOW_PRECISION


def _upcast(value: object) -> object:
    if isinstance(value, torch.Tensor) and value.dtype in _LOW_PRECISION:
        return value.float()
    return value


class CudaAutocastRules(TorchFunctionMode):
    """While CPU autocast is enabled, apply the float32 rules CUDA autocast has and CPU lacks."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Collection[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if torch.is_autocast_enabled("cpu"):
            if func in _CAST_TO_FP32:
                args = tuple(_upcast(a) for a in args)
                kwargs = {k: _upcast(v) for k, v in kwargs.items()}
            elif (
                func in _FP32_RESULT
                and args
                and _is_low_precision(args[0])
                and kwargs.get("dtype") is None
                and not any(isinstance(a, torch.dtype) for a in args[1:])
            ):
                kwargs = {**kwargs, "dtype": torch.float32}
        return func(*args, **kwargs)
