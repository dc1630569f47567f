"""Gradients of ptkit's ops, registered with ``torch.library.register_autograd``.

One backward per op, from the reference's formulas, in float32 (the ops accumulate in
float32 forward too) and cast to each input's dtype; the same backward serves every
implementation (native or reference), and, being made of differentiable torch ops, is
itself differentiable (``gradgradcheck``). Native backward kernels would save the
recomputation of ``x @ W.T`` in ``fused_linear``'s backward; the formulas here are
what torch's own eager ops cost for the same gradients.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["activation_derivative", "register_gradients"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_CUBIC = 0.044715


def activation_derivative(z: torch.Tensor, activation: str) -> torch.Tensor:
    """d activation(z) / dz, elementwise, for the activations ``fused_linear`` takes."""
    if activation == "none":
        return torch.ones_like(z)
    if activation == "relu":
        return (z > 0).to(z.dtype)
    if activation == "gelu":  # Φ(z) + z φ(z)
        cdf = 0.5 * (1.0 + torch.erf(z * (1.0 / math.sqrt(2.0))))
        pdf = torch.exp(-0.5 * z * z) * (1.0 / math.sqrt(2.0 * math.pi))
        return cdf + z * pdf
    if activation == "gelu_tanh":
        u = _SQRT_2_OVER_PI * (z + _GELU_TANH_CUBIC * z**3)
        t = torch.tanh(u)
        du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_CUBIC * z * z)
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * du
    if activation == "silu":
        s = torch.sigmoid(z)
        return s * (1.0 + z * (1.0 - s))
    raise ValueError(f"ptkit.fused_linear: no derivative for activation {activation!r}")


# --- rms_norm: y = x * r * w, r = (mean(x^2) + eps)^-1/2 -----------------------------


def _rms_norm_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_norm_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    x, weight = ctx.saved_tensors
    xf, wf, gf = x.float(), weight.float(), grad.float()
    r = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + ctx.eps)
    normed = xf * r
    g_normed = gf * wf  # dL/d(x r)
    grad_x = grad_w = None
    if ctx.needs_input_grad[0]:
        # d(x_i r)/dx_j = r (δ_ij - x̂_i x̂_j / n)
        grad_x = (r * (g_normed - normed * (g_normed * normed).mean(dim=-1, keepdim=True))).to(
            x.dtype
        )
    if ctx.needs_input_grad[1]:
        grad_w = (gf * normed).reshape(-1, x.shape[-1]).sum(dim=0).to(weight.dtype)
    return grad_x, grad_w, None


# --- fused_linear: y = act(x @ W.T + b) ---------------------------------------------


def _fused_linear_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, weight, bias, activation = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.activation = activation


def _fused_linear_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    x, weight, bias = ctx.saved_tensors
    xf, wf = x.float(), weight.float()
    z = F.linear(xf, wf, None if bias is None else bias.float())
    grad_z = (grad.float() * activation_derivative(z, ctx.activation)).reshape(-1, weight.shape[0])
    rows = xf.reshape(-1, weight.shape[1])
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_x = (grad_z @ wf).reshape(x.shape).to(x.dtype)
    if ctx.needs_input_grad[1]:
        grad_w = (grad_z.T @ rows).to(weight.dtype)
    if bias is not None and ctx.needs_input_grad[2]:
        grad_b = grad_z.sum(dim=0).to(bias.dtype)
    return grad_x, grad_w, grad_b, None


# --- silu_and_mul: y = silu(a) * b, x = [a, b] -------------------------------------------


def _silu_and_mul_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)


def _silu_and_mul_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    (x,) = ctx.saved_tensors
    d = x.shape[-1] // 2
    a, b, gf = x[..., :d].float(), x[..., d:].float(), grad.float()
    grad_a = gf * b * activation_derivative(a, "silu")
    grad_b = gf * F.silu(a)
    return (torch.cat([grad_a, grad_b], dim=-1).to(x.dtype),)


def register_gradients(namespace: str, library: torch.library.Library) -> None:
    """Register the three backwards for ``<namespace>::<op>``."""
    for op, backward, setup in (
        ("rms_norm", _rms_norm_backward, _rms_norm_setup),
        ("fused_linear", _fused_linear_backward, _fused_linear_setup),
        ("silu_and_mul", _silu_and_mul_backward, _silu_and_mul_setup),
    ):
        torch.library.register_autograd(
            f"{namespace}::{op}", backward, setup_context=setup, lib=library
        )
