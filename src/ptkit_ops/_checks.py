"""Input checks shared by the reference and fake kernels.

The messages follow the native kernels' (cpp/ops.cpp): ``ptkit.<op>: expected …, got …``.
"""

from __future__ import annotations

import torch

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")

_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"ptkit.{op}: {message}")


def _check_x(op: str, x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"ptkit.{op}: expected x to be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise _fail(
            op, f"expected x of dtype float32, float16 or bfloat16, got {dtype_name(x.dtype)}"
        )
    if x.dim() < 1:
        raise _fail(op, "expected x with at least 1 dimension, got a 0-d tensor")


def _check_like_x(op: str, arg: str, t: torch.Tensor, x: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"ptkit.{op}: expected {arg} to be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != x.dtype:
        raise _fail(
            op,
            f"expected {arg} of dtype {dtype_name(x.dtype)} (the dtype of x), "
            f"got {dtype_name(t.dtype)}",
        )
    if t.device != x.device:
        raise _fail(op, f"expected {arg} on {x.device} (the device of x), got {t.device}")


def check_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    _check_x("rms_norm", x)
    _check_like_x("rms_norm", "weight", weight, x)
    cols = x.shape[-1]
    if weight.dim() != 1 or weight.shape[0] != cols:
        raise _fail(
            "rms_norm",
            f"expected weight of shape [{cols}] (the last dimension of x), got {list(weight.shape)}",
        )
    if not eps >= 0.0:
        raise _fail("rms_norm", f"expected eps >= 0, got {eps}")


def check_silu_and_mul(x: torch.Tensor) -> None:
    _check_x("silu_and_mul", x)
    if x.shape[-1] % 2 != 0:
        raise _fail(
            "silu_and_mul",
            f"expected an even last dimension (gate and up halves), got {x.shape[-1]}",
        )


def check_fused_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str
) -> None:
    if activation not in ACTIVATIONS:
        raise _fail(
            "fused_linear",
            f"expected activation to be one of {', '.join(ACTIVATIONS)}, got {activation!r}",
        )
    _check_x("fused_linear", x)
    _check_like_x("fused_linear", "weight", weight, x)
    k = x.shape[-1]
    if weight.dim() != 2 or weight.shape[1] != k:
        raise _fail(
            "fused_linear",
            f"expected weight of shape [out_features, {k}] (in_features = the last dimension "
            f"of x), got {list(weight.shape)}",
        )
    if bias is not None:
        _check_like_x("fused_linear", "bias", bias, x)
        if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
            raise _fail(
                "fused_linear",
                f"expected bias of shape [{weight.shape[0]}] (out_features), got {list(bias.shape)}",
            )
