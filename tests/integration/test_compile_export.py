"""A model built from ptkit's ops traces under torch.compile(fullgraph=True) and
torch.export, and computes what eager mode computes."""

from __future__ import annotations

import pytest
import torch

import ptkit_ops

pytestmark = pytest.mark.usefixtures("native_cpu_loaded")


class DecoderMLP(torch.nn.Module):
    def __init__(self, hidden: int = 64, intermediate: int = 96) -> None:
        super().__init__()
        self.norm = torch.nn.Parameter(torch.randn(hidden))
        self.up = torch.nn.Parameter(torch.randn(2 * intermediate, hidden) / hidden**0.5)
        self.up_bias = torch.nn.Parameter(torch.randn(2 * intermediate))
        self.down = torch.nn.Parameter(torch.randn(hidden, intermediate) / intermediate**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = ptkit_ops.rms_norm(x, self.norm, 1e-6)
        h = ptkit_ops.fused_linear(h, self.up, self.up_bias, "none")
        h = ptkit_ops.silu_and_mul(h)
        return x + ptkit_ops.fused_linear(h, self.down, None, "gelu_tanh")


@torch.no_grad()
def test_torch_compile_fullgraph_runs_the_ops() -> None:
    torch._dynamo.reset()
    model = DecoderMLP().eval()
    x = torch.randn(4, 1, 64)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_torch_export_keeps_the_custom_ops() -> None:
    model = DecoderMLP().eval()
    x = torch.randn(4, 1, 64)
    exported = torch.export.export(model, (x,))
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert {
        "ptkit.rms_norm.default",
        "ptkit.fused_linear.default",
        "ptkit.silu_and_mul.default",
    } <= targets
    torch.testing.assert_close(exported.module()(x), model(x), rtol=1e-5, atol=1e-5)


class DecoderMLPIntoBuffers(DecoderMLP):
    """The same model writing its norm and gate into preallocated buffers (out=)."""

    def forward(self, x: torch.Tensor, normed: torch.Tensor, gated: torch.Tensor) -> torch.Tensor:
        ptkit_ops.rms_norm(x, self.norm, 1e-6, out=normed)
        h = ptkit_ops.fused_linear(normed, self.up, self.up_bias, "none")
        ptkit_ops.silu_and_mul(h, out=gated)
        return x + ptkit_ops.fused_linear(gated, self.down, None, "gelu_tanh")


def _buffers(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty(*x.shape[:-1], 96)


@torch.no_grad()
def test_out_traces_under_compile_and_export_and_fills_the_buffers() -> None:
    torch._dynamo.reset()
    model = DecoderMLPIntoBuffers().eval()
    x = torch.randn(4, 1, 64)
    expected = DecoderMLP.forward(model, x)
    normed, gated = _buffers(x)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x, normed, gated), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(normed, ptkit_ops.rms_norm(x, model.norm, 1e-6))

    exported = torch.export.export(model, (x, *_buffers(x)))
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert {"ptkit.rms_norm.out", "ptkit.silu_and_mul.out"} <= targets, targets
    normed, gated = _buffers(x)
    torch.testing.assert_close(exported.module()(x, normed, gated), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(normed, ptkit_ops.rms_norm(x, model.norm, 1e-6))
