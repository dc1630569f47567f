"""The ``ptkit`` operator namespace: schemas, reference and fake kernels, gradients.

Schemas are defined here, once. The reference implementation is registered for
every device (CompositeExplicitAutograd); a native library registers backend keys
(CPU, CUDA …), which the dispatcher prefers, so any device without a usable native
kernel still runs, correctly. The fake kernels let torch.compile and torch.export
trace the ops without running them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ptkit_ops import _checks
from ptkit_ops._autograd import register_gradients

NAMESPACE = "ptkit"

SCHEMAS: dict[str, str] = {
    "rms_norm": "rms_norm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor",
    "fused_linear": (
        "fused_linear(Tensor x, Tensor weight, Tensor? bias=None, str activation='none') -> Tensor"
    ),
    "silu_and_mul": "silu_and_mul(Tensor x) -> Tensor",
    # Into a preallocated output (the out= of the Python functions): the elementwise ops,
    # whose large outputs cost as much to allocate (fresh pages, faulted in and zeroed by
    # the kernel) as to compute. Mutating, returning nothing: torch.compile and
    # torch.export trace them (auto_functionalize); no autograd, as torch's out= ops.
    "rms_norm.out": "rms_norm.out(Tensor x, Tensor weight, float eps=1e-06, *, Tensor(a!) out) -> ()",
    "silu_and_mul.out": "silu_and_mul.out(Tensor x, *, Tensor(a!) out) -> ()",
}

# Kept alive for the life of the process: dropping it would unregister the schemas.
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")
for _schema in SCHEMAS.values():
    _LIBRARY.define(_schema)


def _limits(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """silu, gelu and gelu_tanh at ±inf: their limits (+inf, -0), where torch's formulas
    meet -inf * 0 = NaN; and a negative x whose result underflows gives -0 (x times a
    non-negative factor), where torch's vectorized gelu gives +0 and its scalar tail -0.
    ptkit's semantics on every path (docs/using.md)."""
    y = torch.where((y == 0) & (x < 0), -0.0, y)
    return torch.where(torch.isinf(x), torch.where(x > 0, x, -0.0), y)


def _activate(y: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "relu":
        return F.relu(y)
    if activation == "gelu":
        return _limits(y, F.gelu(y))
    if activation == "gelu_tanh":
        return _limits(y, F.gelu(y, approximate="tanh"))
    if activation == "silu":
        return _limits(y, F.silu(y))
    return y


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    _checks.check_rms_norm(x, weight, eps)
    xf = x.float()
    mean_square = xf.square().mean(dim=-1, keepdim=True)
    y = xf * torch.rsqrt(mean_square + eps) * weight.float()
    # float32 squares overflow for |x| > ~1.8e19 (bfloat16 and float32 inputs hold such
    # values): those rows again in float64, as the native kernels do.
    overflowed = torch.isinf(mean_square) & torch.isfinite(xf).all(dim=-1, keepdim=True)
    if bool(overflowed.any()):
        xd = x.double()
        yd = xd * torch.rsqrt(xd.square().mean(dim=-1, keepdim=True) + eps) * weight.double()
        y = torch.where(overflowed, yd.float(), y)
    return y.to(x.dtype)


def fused_linear_reference(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str = "none",
) -> torch.Tensor:
    _checks.check_fused_linear(x, weight, bias, activation)
    # The GEMM in the input dtype (fp32 accumulation inside), the epilogue in fp32.
    y = F.linear(x, weight, bias)
    if activation == "none":
        return y
    return _activate(y.float(), activation).to(x.dtype)


def silu_and_mul_reference(x: torch.Tensor) -> torch.Tensor:
    _checks.check_silu_and_mul(x)
    d = x.shape[-1] // 2
    gate = x[..., :d].float()
    return (_limits(gate, F.silu(gate)) * x[..., d:].float()).to(x.dtype)


def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    _checks.check_rms_norm(x, weight, eps)
    return x.new_empty(x.shape)


def _fused_linear_fake(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str = "none",
) -> torch.Tensor:
    _checks.check_fused_linear(x, weight, bias, activation)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _silu_and_mul_fake(x: torch.Tensor) -> torch.Tensor:
    _checks.check_silu_and_mul(x)
    return x.new_empty(_checks.silu_and_mul_shape(x))


def _rms_norm_out_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, out: torch.Tensor
) -> None:
    _checks.check_rms_norm(x, weight, eps)
    _checks.check_out("rms_norm", out, tuple(x.shape), x, weight)
    out.copy_(rms_norm_reference(x, weight, eps))


def _silu_and_mul_out_reference(x: torch.Tensor, *, out: torch.Tensor) -> None:
    _checks.check_silu_and_mul(x)
    _checks.check_out("silu_and_mul", out, _checks.silu_and_mul_shape(x), x)
    out.copy_(silu_and_mul_reference(x))


def _rms_norm_out_fake(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, out: torch.Tensor
) -> None:
    _checks.check_rms_norm(x, weight, eps)
    _checks.check_out("rms_norm", out, tuple(x.shape), x, weight)


def _silu_and_mul_out_fake(x: torch.Tensor, *, out: torch.Tensor) -> None:
    _checks.check_silu_and_mul(x)
    _checks.check_out("silu_and_mul", out, _checks.silu_and_mul_shape(x), x)


REFERENCE_IMPLEMENTATIONS = {
    "rms_norm": rms_norm_reference,
    "fused_linear": fused_linear_reference,
    "silu_and_mul": silu_and_mul_reference,
    "rms_norm.out": _rms_norm_out_reference,
    "silu_and_mul.out": _silu_and_mul_out_reference,
}

for _name, _fn in REFERENCE_IMPLEMENTATIONS.items():
    _LIBRARY.impl(_name, _fn, "CompositeExplicitAutograd")

torch.library.register_fake(f"{NAMESPACE}::rms_norm", _rms_norm_fake, lib=_LIBRARY)
torch.library.register_fake(f"{NAMESPACE}::fused_linear", _fused_linear_fake, lib=_LIBRARY)
torch.library.register_fake(f"{NAMESPACE}::silu_and_mul", _silu_and_mul_fake, lib=_LIBRARY)
torch.library.register_fake(f"{NAMESPACE}::rms_norm.out", _rms_norm_out_fake, lib=_LIBRARY)
torch.library.register_fake(f"{NAMESPACE}::silu_and_mul.out", _silu_and_mul_out_fake, lib=_LIBRARY)
# One backward per op for every implementation (native or reference): _autograd.py.
register_gradients(NAMESPACE, _LIBRARY)


def _register_out_version_bumps() -> None:
    """As torch's own out= ops do, the .out overloads bump the output's version counter, so
    that a backward which saved that tensor before it was overwritten fails with torch's
    "modified by an inplace operation" instead of using the new values. ADInplaceOrView is
    the dispatch key that counts in-place writes (skipped in inference mode, traced as a
    mutation by torch.compile); the call then goes on to the backend's kernel."""
    after_view_keys = torch._C._after_ADInplaceOrView_keyset
    for name in (n for n in SCHEMAS if n.endswith(".out")):
        base, overload = name.split(".")
        op: torch._ops.OpOverload = getattr(getattr(torch.ops.ptkit, base), overload)

        def bump_then_redispatch(
            keyset: torch._C.DispatchKeySet,
            *args: Any,
            _op: torch._ops.OpOverload = op,
            **kwargs: Any,
        ) -> Any:
            torch.autograd.graph.increment_version(kwargs["out"])
            return _op.redispatch(keyset & after_view_keys, *args, **kwargs)

        _LIBRARY.impl(name, bump_then_redispatch, "ADInplaceOrView", with_keyset=True)


_register_out_version_bumps()
