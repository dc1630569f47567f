"""Native CPU kernels against the pure-PyTorch reference, op by op and dtype by dtype."""

from __future__ import annotations

import math
import sys

import pytest
import torch
from support import (
    DTYPES,
    assert_matches,
    linear_error_bound,
    rms_norm_error_bound,
    run_op_tests,
    silu_error_bound,
)

import ptkit
import ptkit_ops

pytestmark = pytest.mark.usefixtures("native_cpu_loaded")

ids = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def _randn(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, dtype=torch.float32) * scale).to(dtype)


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous layout (last dim stride != 1)."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2) if t.dim() >= 2 else t[::1]


# Shapes: empty, one element, sizes that are not a multiple of any vector width, a large row.
RMS_SHAPES = [
    (0, 8),
    (3, 0),
    (1, 1),
    (1, 7),
    (3, 33),
    (2, 3, 4095),
    (5, 4097),
    (16, 4096),
    (1, 65536),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("shape", RMS_SHAPES, ids=str)
def test_rms_norm_native_matches_reference(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x = _randn(*shape, dtype=dtype, scale=3.0)
    w = _randn(shape[-1], dtype=dtype)
    reference = ptkit_ops.rms_norm_reference(x, w, 1e-5)
    assert_matches(
        ptkit_ops.rms_norm(x, w, 1e-5), reference, dtype, bound=rms_norm_error_bound(reference)
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
def test_rms_norm_non_contiguous_inputs(dtype: torch.dtype) -> None:
    x = _transposed(_randn(37, 129, dtype=dtype))
    assert not x.is_contiguous()
    w = _randn(258, dtype=dtype)[::2]
    out = ptkit_ops.rms_norm(x, w)
    assert out.is_contiguous()
    reference = ptkit_ops.rms_norm_reference(x, w)
    assert_matches(out, reference, dtype, bound=rms_norm_error_bound(reference))
    strided_rows = _randn(8, 2, 100, dtype=dtype)[:, 1]
    reference = ptkit_ops.rms_norm_reference(strided_rows, w[:100])
    assert_matches(
        ptkit_ops.rms_norm(strided_rows, w[:100]),
        reference,
        dtype,
        bound=rms_norm_error_bound(reference),
    )


SILU_SHAPES = [(0, 8), (4, 0), (1, 2), (3, 66), (2, 5, 4098), (7, 8194), (1, 80000)]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("shape", SILU_SHAPES, ids=str)
def test_silu_and_mul_native_matches_reference(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x = _randn(*shape, dtype=dtype, scale=4.0)
    assert_matches(
        ptkit_ops.silu_and_mul(x),
        ptkit_ops.silu_and_mul_reference(x),
        dtype,
        bound=silu_error_bound(ptkit_ops.silu_and_mul_reference(x)),
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
def test_silu_and_mul_extremes_and_non_contiguous(dtype: torch.dtype) -> None:
    gate = torch.tensor([0.0, -0.0, 1e-30, -90.0, 90.0, -1e4, 1e4, float("inf"), float("nan")])
    up = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    x = torch.cat([gate, up]).to(dtype).unsqueeze(0)
    assert_matches(
        ptkit_ops.silu_and_mul(x),
        ptkit_ops.silu_and_mul_reference(x),
        dtype,
        bound=silu_error_bound(ptkit_ops.silu_and_mul_reference(x)),
    )
    # silu(-inf): torch's x * sigmoid(x) gives -inf * 0 = nan; the limit is 0. Either is accepted.
    minus_inf = torch.tensor([[float("-inf"), 2.0]], dtype=dtype)
    value = ptkit_ops.silu_and_mul(minus_inf).item()
    assert value == 0.0 or value != value
    nc = _transposed(_randn(11, 64, dtype=dtype))
    assert_matches(
        ptkit_ops.silu_and_mul(nc),
        ptkit_ops.silu_and_mul_reference(nc),
        dtype,
        bound=silu_error_bound(ptkit_ops.silu_and_mul_reference(nc)),
    )


# (rows of x, K, N): decode rows 1..16 take the GEMV, 17+ the library GEMM + epilogue.
LINEAR_SHAPES = [
    (0, 8, 4),
    (1, 0, 5),
    (1, 1, 1),
    (1, 7, 3),
    (4, 33, 17),
    (16, 4097, 9),
    (17, 64, 33),
    (40, 129, 65),
    (2, 16384, 8),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("activation", ptkit_ops.ACTIVATIONS)
@pytest.mark.parametrize("shape", LINEAR_SHAPES, ids=str)
def test_fused_linear_native_matches_reference(
    shape: tuple[int, int, int], activation: str, dtype: torch.dtype
) -> None:
    m, k, n = shape
    x = _randn(m, k, dtype=dtype)
    w = _randn(n, k, dtype=dtype, scale=1 / math.sqrt(max(k, 1)))
    for bias in (None, _randn(n, dtype=dtype)):
        native = ptkit_ops.fused_linear(x, w, bias, activation)
        reference = ptkit_ops.fused_linear_reference(x, w, bias, activation)
        assert_matches(native, reference, dtype, bound=linear_error_bound(x, w, bias))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
def test_fused_linear_decode_shape_and_non_contiguous(dtype: torch.dtype) -> None:
    x = _randn(4, 1, 256, dtype=dtype)  # [B, 1, K]: the single-token decode step
    w = _transposed(_randn(96, 256, dtype=dtype, scale=1 / 16))
    b = _randn(192, dtype=dtype)[::2]
    out = ptkit_ops.fused_linear(x, w, b, "gelu_tanh")
    assert out.shape == (4, 1, 96)
    assert_matches(
        out,
        ptkit_ops.fused_linear_reference(x, w, b, "gelu_tanh"),
        dtype,
        bound=linear_error_bound(x, w, b),
    )
    xt = _transposed(_randn(20, 256, dtype=dtype))
    assert_matches(
        ptkit_ops.fused_linear(xt, w, b, "relu"),
        ptkit_ops.fused_linear_reference(xt, w, b, "relu"),
        dtype,
        bound=linear_error_bound(xt, w, b),
    )


def test_ops_are_served_natively_on_cpu() -> None:
    routes = {(r.op, r.device_type): r for r in ptkit.runtime.explain()}
    for op in ptkit_ops.OPS:
        route = routes[(op, "cpu")]
        assert route.implementation == "native", route
        assert route.library == "libptkit_cpu.so"


def test_native_matches_reference_on_the_baseline_isa() -> None:
    """The library carries one kernel copy per ISA level; PTKIT_CPU_ISA=default runs the
    baseline copy, which must agree with the reference too."""
    run_op_tests(sys.executable, PTKIT_CPU_ISA="default")
