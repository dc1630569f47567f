"""Input checks shared by the public functions, the reference and the fake kernels.

The messages are the native kernels' (cpp/include/ptkit/op_support.h):
``ptkit.<op>: expected …, got …``. One exception type per mistake on every path: a
bad value raises ``OpArgumentError`` and a non-tensor ``OpArgumentTypeError``; both are
``RuntimeError``s too, which is what a native kernel raises for the same mistake when
``torch.ops.ptkit.<op>`` is called directly, so ``except RuntimeError`` (or these
classes) handles a bad argument whichever implementation serves the device.
"""

from __future__ import annotations

import torch

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")

_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


class OpArgumentError(ValueError, RuntimeError):
    """A bad argument value (shape, dtype, device, activation …) of one of ptkit's ops."""


class OpArgumentTypeError(TypeError, RuntimeError):
    """An argument of the wrong type (a tensor expected) for one of ptkit's ops."""


# Activation names other libraries use, and ptkit's name for the same function.
# The native kernels give the same hint (activation_index in op_support.h).
ACTIVATION_ALIASES = {
    "swish": "silu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "identity": "none",
    "linear": "none",
}


def _fail(op: str, message: str) -> OpArgumentError:
    return OpArgumentError(f"ptkit.{op}: {message}")


def _not_a_tensor(op: str, arg: str, value: object) -> OpArgumentTypeError:
    given = "None" if value is None else type(value).__name__
    return OpArgumentTypeError(f"ptkit.{op}: expected {arg} to be a torch.Tensor, got {given}")


def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


def activation_hint(name: object) -> str:
    """`` (swish is silu: pass activation='silu')``, or `` (did you mean 'silu'?)`` for the
    first activation within two edits, else ``""``: the rule the native kernels apply."""
    if not isinstance(name, str):
        return ""
    alias = ACTIVATION_ALIASES.get(name.lower())
    if alias is not None:
        return f" ({name} is {alias}: pass activation={alias!r})"
    distances = [(_edit_distance(name.lower(), known), known) for known in ACTIVATIONS]
    distance, closest = min(distances, key=lambda pair: pair[0])
    return f" (did you mean {closest!r}?)" if distance <= 2 else ""


def _check_x(op: str, x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise _not_a_tensor(op, "x", x)
    if x.dtype not in SUPPORTED_DTYPES:
        raise _fail(
            op, f"expected x of dtype float32, float16 or bfloat16, got {dtype_name(x.dtype)}"
        )
    if x.dim() < 1:
        raise _fail(op, "expected x with at least 1 dimension, got a 0-d tensor")


def _check_like_x(op: str, arg: str, t: torch.Tensor, x: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise _not_a_tensor(op, arg, t)
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


def silu_and_mul_shape(x: torch.Tensor) -> tuple[int, ...]:
    """``silu_and_mul``'s output shape: ``x``'s with the last dimension halved."""
    return (*x.shape[:-1], x.shape[-1] // 2)


def check_out(
    op: str, out: torch.Tensor, shape: tuple[int, ...], x: torch.Tensor, *inputs: torch.Tensor
) -> None:
    """``out=`` of ``op``: a contiguous tensor of the result's ``shape``, with x's dtype and
    device, and no gradient asked of it or of the inputs (``x``, ``inputs``): torch's out=
    ops take no part in autograd either."""
    _check_like_x(op, "out", out, x)
    if tuple(out.shape) != shape:
        raise _fail(op, f"expected out of shape {list(shape)}, got {list(out.shape)}")
    if not out.is_contiguous():
        raise _fail(
            op,
            f"expected a contiguous out, got strides {list(out.stride())}: pass out.contiguous() "
            "and copy back, or call without out=",
        )
    if torch.is_grad_enabled():
        names = ("out", "x", *("weight" for _ in inputs))
        grads = [name for name, t in zip(names, (out, x, *inputs), strict=True) if t.requires_grad]
        if grads:
            raise _fail(
                op,
                f"out= takes no part in autograd, but {grads[0]} requires grad: call {op} "
                "without out= to get gradients, or under torch.no_grad()",
            )


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
            f"expected activation to be one of {', '.join(ACTIVATIONS)}, got {activation!r}"
            + activation_hint(activation),
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
