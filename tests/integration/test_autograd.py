"""Gradients of every op, on the native path and on the reference path.

The backward is one set of formulas (ptkit_ops/_autograd.py) for every implementation;
what differs between the paths is the forward it differentiates. gradcheck runs in
float32 (the ops take no float64) with the finite-difference step and tolerances below,
the error bound stated for float32 inputs of magnitude ~1: eps 1e-3, atol/rtol 2e-2
(gradgradcheck: 5e-2).
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from support import child_python, python_env
from torch.autograd import gradcheck, gradgradcheck

import ptkit_ops

ACTIVATIONS = ptkit_ops.ACTIVATIONS
GRADCHECK = {"eps": 1e-3, "atol": 2e-2, "rtol": 2e-2}
GRADGRADCHECK = {"eps": 1e-3, "atol": 5e-2, "rtol": 5e-2}


def _leaf(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).requires_grad_()


def _cases() -> list[tuple[str, object, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    cases: list[tuple[str, object, tuple[torch.Tensor, ...]]] = [
        ("rms_norm", lambda x, w: ptkit_ops.rms_norm(x, w, 1e-5), (_leaf(2, 3, 8), _leaf(8)))
    ]
    for activation in ACTIVATIONS:
        cases.append(
            (
                f"fused_linear/{activation}",
                lambda x, w, b, a=activation: ptkit_ops.fused_linear(x, w, b, a),
                (_leaf(3, 5), _leaf(4, 5), _leaf(4)),
            )
        )
    cases.append(
        (
            "fused_linear/no bias",
            lambda x, w: ptkit_ops.fused_linear(x, w),
            (_leaf(1, 1, 6), _leaf(3, 6)),
        )
    )
    cases.append(("silu_and_mul", ptkit_ops.silu_and_mul, (_leaf(3, 10),)))
    return cases


@pytest.mark.parametrize(("name", "fn", "inputs"), _cases(), ids=[c[0] for c in _cases()])
def test_gradcheck_and_gradgradcheck(native_cpu_loaded: None, name: str, fn, inputs) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"Input #\d+ requires gradient and is not a double"
        )
        assert gradcheck(fn, inputs, **GRADCHECK)
        assert gradgradcheck(fn, inputs, **GRADGRADCHECK)


def test_every_input_gets_its_gradient_and_no_warning(native_cpu_loaded: None) -> None:
    x, w, b = _leaf(4, 16), _leaf(8, 16), _leaf(8)
    norm = _leaf(16)
    with warnings.catch_warnings():
        # torch warns when an op without an autograd kernel is used with requires_grad.
        warnings.simplefilter("error")
        y = ptkit_ops.silu_and_mul(
            ptkit_ops.fused_linear(ptkit_ops.rms_norm(x, norm), w, b, "gelu")
        )
        y.sum().backward()
    for t in (x, w, b, norm):
        assert t.grad is not None and torch.isfinite(t.grad).all()


@pytest.mark.parametrize(("name", "fn", "inputs"), _cases(), ids=[c[0] for c in _cases()])
def test_a_gradient_reaches_each_input_that_asks_and_no_call_without_one_records(  # type: ignore[no-untyped-def]
    native_cpu_loaded: None, name: str, fn, inputs
) -> None:
    # Calls that cannot need a gradient skip the autograd kernel (ptkit_ops._dispatch): each
    # input alone requiring grad must still get its gradient, and only it.
    for asking in range(len(inputs)):
        leaves = [t.detach().clone().requires_grad_(i == asking) for i, t in enumerate(inputs)]
        y = fn(*leaves)
        assert y.grad_fn is not None, (name, asking)
        y.sum().backward()
        for i, t in enumerate(leaves):
            assert (t.grad is not None) == (i == asking), (name, asking, i)
    plain = [t.detach() for t in inputs]
    assert fn(*plain).grad_fn is None and not fn(*plain).requires_grad
    with torch.no_grad():
        assert not fn(*inputs).requires_grad
    with torch.inference_mode():
        assert not fn(*plain).requires_grad


def test_bfloat16_gradients_match_float32_within_bfloat16_rounding(native_cpu_loaded: None) -> None:
    torch.manual_seed(1)
    x32, w32 = torch.randn(4, 64), torch.randn(64)
    grads = []
    for dtype in (torch.float32, torch.bfloat16):
        x = x32.to(dtype).detach().clone().requires_grad_()
        w = w32.to(dtype).detach().clone().requires_grad_()
        (ptkit_ops.rms_norm(x, w).float() ** 2).sum().backward()
        assert x.grad is not None and x.grad.dtype == dtype
        grads.append(x.grad.float())
    torch.testing.assert_close(grads[1], grads[0], atol=0.1, rtol=0.05)


TRAIN = r"""
import json, torch, ptkit_ops

torch.manual_seed(0)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.Parameter(torch.ones(16))
        self.up = torch.nn.Parameter(torch.randn(64, 16) / 4)
        self.down = torch.nn.Parameter(torch.randn(4, 32) / 4)

    def forward(self, x):
        h = ptkit_ops.rms_norm(x, self.norm, 1e-6)
        h = ptkit_ops.silu_and_mul(ptkit_ops.fused_linear(h, self.up, None, "none"))
        return ptkit_ops.fused_linear(h, self.down, None, "none")


x, target = torch.randn(64, 16), torch.randn(64, 4)
result = {}
for mode in ("eager", "compiled"):
    torch.manual_seed(0)
    model = Model()
    step = model if mode == "eager" else torch.compile(model, backend="aot_eager", fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(step(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    result[mode] = losses
exported = torch.export.export(Model(), (x,)).module()
grads = torch.autograd.grad(exported(x).sum(), [p for p in exported.parameters()])
result["exported_grads_finite"] = all(bool(torch.isfinite(g).all()) for g in grads)
print(json.dumps(result))
"""


@pytest.mark.parametrize("path", ["native", "reference"])
def test_a_training_loop_learns_eagerly_compiled_and_exported(path: str) -> None:
    env = python_env(**({"PTKIT_FORCE_REFERENCE": "1"} if path == "reference" else {}))
    out = json.loads(child_python(TRAIN, env=env).stdout.strip().splitlines()[-1])
    for mode in ("eager", "compiled"):
        losses = out[mode]
        assert losses[-1] < 0.5 * losses[0], (mode, losses[0], losses[-1])
    # aot_eager runs the same kernels through AOTAutograd: the same losses, to rounding.
    assert out["compiled"] == pytest.approx(out["eager"], rel=1e-4, abs=1e-6)
    assert out["exported_grads_finite"] is True
