"""The degradation APIs on a real GPU (skipped without one, see conftest.py): a CUDA
graph captured and replayed, and the runtime profile's view of the device."""

from __future__ import annotations

import torch

import ptkit
import ptkit_ops


def _add_scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y


def test_cuda_graph_capture_and_replay() -> None:
    x, y = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    captured = ptkit.graphs.capture(_add_scaled, x, y)
    assert captured.mode == "cuda_graph", captured.reason
    a, b = torch.randn_like(x), torch.randn_like(y)
    out = captured.replay(a, b)
    torch.testing.assert_close(out, _add_scaled(a, b))
    assert captured.replay(b, a) is out  # static output buffer, as CUDA graphs give
    torch.testing.assert_close(out, _add_scaled(b, a))


def test_cuda_graph_of_a_ptkit_op() -> None:
    x = torch.randn(4, 1, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    captured = ptkit.graphs.capture(lambda t: ptkit_ops.rms_norm(t, w), x)
    assert captured.mode == "cuda_graph", captured.reason
    z = torch.randn_like(x)
    torch.testing.assert_close(captured.replay(z), ptkit_ops.rms_norm(z, w))


def test_profile_sees_the_gpu() -> None:
    data = ptkit.runtime.profile().to_json()
    cuda = [d for d in data["devices"] if d["type"] == "cuda"]
    assert cuda and all(d["arch"].startswith("sm_") for d in cuda)
    assert data["graphs"]["mode"] == "cuda_graph"
    assert data["distributed"]["candidates"][0]["backend"] in ("nccl2", "nccl")
