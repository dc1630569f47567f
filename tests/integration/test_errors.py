"""Invalid input: a clear error naming the op, what was expected and what was given,
from the native kernel (RuntimeError) and from the reference (ValueError) alike."""

from __future__ import annotations

import pytest
import torch

import ptkit_ops

pytestmark = pytest.mark.usefixtures("native_cpu_loaded")

f32 = torch.float32

CASES = [
    (
        "rms_norm",
        lambda: (torch.randn(2, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)),
        r"ptkit\.rms_norm: expected x of dtype float32, float16 or bfloat16, got float64",
    ),
    (
        "rms_norm",
        lambda: (torch.randn(2, 8), torch.randn(7)),
        r"ptkit\.rms_norm: expected weight of shape \[8\] \(the last dimension of x\), got \[7\]",
    ),
    (
        "rms_norm",
        lambda: (torch.randn(2, 8), torch.randn(8, dtype=torch.bfloat16)),
        r"ptkit\.rms_norm: expected weight of dtype float32 \(the dtype of x\), got bfloat16",
    ),
    (
        "rms_norm",
        lambda: (torch.tensor(1.0), torch.randn(1)),
        r"ptkit\.rms_norm: expected x with at least 1 dimension, got a 0-d tensor",
    ),
    (
        "silu_and_mul",
        lambda: (torch.randn(3, 7),),
        r"ptkit\.silu_and_mul: expected an even last dimension \(gate and up halves\), got 7",
    ),
    (
        "silu_and_mul",
        lambda: (torch.randint(0, 5, (2, 4)),),
        r"ptkit\.silu_and_mul: expected x of dtype float32, float16 or bfloat16, got int64",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8), torch.randn(4, 9), None, "none"),
        r"ptkit\.fused_linear: expected weight of shape \[out_features, 8\] .*got \[4, 9\]",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8), torch.randn(4, 8), torch.randn(5), "none"),
        r"ptkit\.fused_linear: expected bias of shape \[4\] \(out_features\), got \[5\]",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8), torch.randn(4, 8), None, "tanh"),
        r"ptkit\.fused_linear: expected activation to be one of none, relu, gelu, gelu_tanh, silu, got 'tanh'",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8).half(), torch.randn(4, 8), None, "none"),
        r"ptkit\.fused_linear: expected weight of dtype float16 \(the dtype of x\), got float32",
    ),
]


@pytest.mark.parametrize(
    ("op", "make_args", "message"), CASES, ids=lambda c: c if isinstance(c, str) else ""
)
def test_native_kernel_rejects_bad_input(op: str, make_args, message: str) -> None:
    with pytest.raises((RuntimeError, ValueError), match=message):
        getattr(ptkit_ops, op)(*make_args())


@pytest.mark.parametrize(
    ("op", "make_args", "message"), CASES, ids=lambda c: c if isinstance(c, str) else ""
)
def test_reference_rejects_bad_input_with_the_same_message(
    op: str, make_args, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        getattr(ptkit_ops, f"{op}_reference")(*make_args())


def test_meta_tensors_are_checked_by_the_fake_kernel() -> None:
    x = torch.empty(2, 8, device="meta")
    assert ptkit_ops.rms_norm(x, torch.empty(8, device="meta")).shape == (2, 8)
    with pytest.raises(ValueError, match=r"ptkit\.rms_norm: expected weight of shape \[8\]"):
        ptkit_ops.rms_norm(x, torch.empty(9, device="meta"))


def test_mixed_devices_are_rejected() -> None:
    with pytest.raises(
        ValueError, match=r"ptkit\.rms_norm: expected weight on cpu \(the device of x\), got meta"
    ):
        ptkit_ops.rms_norm_reference(torch.randn(2, 8), torch.empty(8, device="meta"))
