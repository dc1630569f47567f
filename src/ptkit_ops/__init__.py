"""ptkit-ops: ptkit's reference ops ``rms_norm``, ``fused_linear`` and ``silu_and_mul``.

Each is a ``torch.ops.ptkit.*`` custom op: native kernels serve the devices they
were built and loaded for, the pure-PyTorch reference serves every other device,
and ``torch.compile(fullgraph=True)`` / ``torch.export`` trace them.
``ptkit.runtime.explain("ptkit_ops")`` says which implementation serves which device.

The functions below check their arguments in Python before dispatching, so a mistake
raises the same exception with the same message on every path (``OpArgumentError``,
``OpArgumentTypeError``: ValueError / TypeError and RuntimeError both).

This distribution is built with the ptkit toolkit like any other extension project
(``CMakeLists.txt``, ``recipes/``, one wheel per platform and variant): importing it
defines the ops, then ``ptkit.runtime.load_package`` loads the native libraries in
``_native/`` whose manifests match this machine. It never fails because of a native
library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import ptkit.runtime
from ptkit_ops import _checks
from ptkit_ops._checks import (
    ACTIVATIONS,
    SUPPORTED_DTYPES,
    OpArgumentError,
    OpArgumentTypeError,
)
from ptkit_ops._library import (
    NAMESPACE,
    SCHEMAS,
    fused_linear_reference,
    rms_norm_reference,
    silu_and_mul_reference,
)
from ptkit_ops._metal import register_metal_kernels

__all__ = [
    "ACTIVATIONS",
    "NAMESPACE",
    "OPS",
    "SCHEMAS",
    "SUPPORTED_DTYPES",
    "OpArgumentError",
    "OpArgumentTypeError",
    "__version__",
    "fused_linear",
    "fused_linear_reference",
    "rms_norm",
    "rms_norm_reference",
    "silu_and_mul",
    "silu_and_mul_reference",
]

OPS = tuple(SCHEMAS)

# Bound once: attribute lookups on torch.ops cost more than the small ops themselves.
_rms_norm = torch.ops.ptkit.rms_norm.default
_fused_linear = torch.ops.ptkit.fused_linear.default
_silu_and_mul = torch.ops.ptkit.silu_and_mul.default
_rms_norm_out = torch.ops.ptkit.rms_norm.out
_silu_and_mul_out = torch.ops.ptkit.silu_and_mul.out

# Bound once too: the guard the fast path of _dispatch enters (absent from a future torch,
# the dispatcher's path is kept).
_below_autograd = getattr(torch._C, "_AutoDispatchBelowAutograd", None)


def _dispatch(op: Any, *args: Any) -> torch.Tensor:
    """``op(*args)``, below autograd when the call cannot need a gradient.

    The autograd kernel that ``torch.library.register_autograd`` installs is Python: about
    15 us a call (3 GHz EPYC, torch 2.14), more than rms_norm of a 4096-wide row, even when
    it only passes the call on. torch's own test decides (grad mode off, or no tensor
    argument requiring grad), and the call goes where that kernel would send it. Traced
    calls (torch.compile, torch.export) keep the dispatcher's path.
    """
    if (
        _below_autograd is None
        or torch.compiler.is_compiling()
        or (
            torch.is_grad_enabled()
            and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        )
    ):
        y: torch.Tensor = op(*args)
        return y
    with _below_autograd():
        y = op(*args)
    return y


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Root-mean-square normalisation over the last dimension.

    ``y = x * rsqrt(mean(x**2, dim=-1) + eps) * weight``, accumulated in float32.

    Args:
        x: ``[..., hidden]``, float32, float16 or bfloat16.
        weight: ``[hidden]``, same dtype and device as ``x``.
        eps: added to the mean square before the reciprocal square root (>= 0).
        out: optional contiguous tensor of ``x``'s shape, dtype and device to write the
            result into (no output allocated; no autograd, like torch's ``out=``).

    Returns:
        A tensor of ``x``'s shape and dtype (``out`` when given).
    """
    _checks.check_rms_norm(x, weight, eps)
    if out is not None:
        _checks.check_out("rms_norm", out, tuple(x.shape), x, weight)
        _rms_norm_out(x, weight, eps, out=out)
        return out
    return _dispatch(_rms_norm, x, weight, eps)


def fused_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str = "none",
) -> torch.Tensor:
    """``activation(x @ weight.T + bias)`` in one op.

    Decode shapes (at most 16 rows of ``x``) take a GEMV kernel with the bias and
    activation fused; larger inputs use the library GEMM plus a fused epilogue.

    Args:
        x: ``[..., in_features]``, float32, float16 or bfloat16.
        weight: ``[out_features, in_features]``, same dtype and device as ``x``.
        bias: optional ``[out_features]``.
        activation: one of ``none``, ``relu``, ``gelu``, ``gelu_tanh``, ``silu``.

    Returns:
        ``[..., out_features]`` in ``x``'s dtype.
    """
    _checks.check_fused_linear(x, weight, bias, activation)
    return _dispatch(_fused_linear, x, weight, bias, activation)


def silu_and_mul(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """SwiGLU gating: ``silu(x[..., :d]) * x[..., d:]`` with ``d = x.shape[-1] // 2``.

    Args:
        x: ``[..., 2 * d]``, float32, float16 or bfloat16.
        out: optional contiguous ``[..., d]`` tensor of ``x``'s dtype and device to write
            the result into (no output allocated; no autograd, like torch's ``out=``).

    Returns:
        ``[..., d]`` in ``x``'s dtype (``out`` when given).
    """
    _checks.check_silu_and_mul(x)
    if out is not None:
        _checks.check_out("silu_and_mul", out, _checks.silu_and_mul_shape(x), x)
        _silu_and_mul_out(x, out=out)
        return out
    return _dispatch(_silu_and_mul, x)


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptkit-ops")
    except PackageNotFoundError:  # running from a source tree
        return None


__version__ = _installed_version() or ptkit.__version__

# A source checkout has no native folder: the reference implementations serve.
if (Path(__file__).resolve().parent / "_native").is_dir():
    ptkit.runtime.load_package(__name__, metal_binding=register_metal_kernels, ops={NAMESPACE: OPS})
