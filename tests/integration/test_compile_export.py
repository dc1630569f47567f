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
