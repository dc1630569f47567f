"""On a GPU: the numerics docs/using.md states, for the CUDA kernels.

The same table of special values as tests/integration/test_numerics.py (CPU native and
reference), run on CUDA tensors against the CPU reference; rms_norm rows long enough
for each of its three kernels (warp per row, block per row, the two-pass loop) with
squares that overflow float32, and long rows whose plain running sum would drift.
Skipped without a CUDA device (tests/device/conftest.py); scripts/device-check runs it.
"""

from __future__ import annotations

import math

import pytest
import torch

import ptkit_ops

pytestmark = pytest.mark.cuda

INF, NAN = math.inf, math.nan
SPECIAL = [-INF, INF, NAN, -0.0, 0.0, 1e-40, -1e-40, 1.0, -1.0, 1e30, -1e30]


def _same(native: torch.Tensor, reference: torch.Tensor) -> None:
    """NaN where the reference has NaN, infinities and zeros (with their sign) exactly,
    other values within a few float32 ulps, or for a 16-bit output within one of its ulps
    (a float32 result a few ulps off a rounding midpoint rounds to the other neighbour)."""
    rel = 8 * 2.0**-24 if native.dtype == torch.float32 else torch.finfo(native.dtype).eps
    a, b = native.double().cpu().flatten().tolist(), reference.double().flatten().tolist()
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if math.isnan(y):
            assert math.isnan(x), (a, b)
        elif math.isinf(y) or y == 0:
            assert x == y and math.copysign(1, x) == math.copysign(1, y), (a, b)
        else:
            assert x == pytest.approx(y, rel=rel), (a, b)


@pytest.mark.parametrize("activation", ptkit_ops.ACTIVATIONS)
def test_fused_linear_special_values_match_the_reference(activation: str) -> None:
    column = torch.tensor(SPECIAL).reshape(-1, 1)
    one = torch.ones(1, 1)
    native = ptkit_ops.fused_linear(column.cuda(), one.cuda(), None, activation)
    _same(native, ptkit_ops.fused_linear_reference(column, one, None, activation))


def test_silu_and_mul_special_values_match_the_reference() -> None:
    up = [1.0, -1.0, 1.0, INF, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    x = torch.tensor(SPECIAL + up).reshape(1, -1)
    _same(ptkit_ops.silu_and_mul(x.cuda()), ptkit_ops.silu_and_mul_reference(x))


# One row length per rms_norm kernel: 64 (warp per row), 8192 (block per row), 2^17
# (two passes over global memory).
@pytest.mark.parametrize("cols", [64, 8192, 2**17])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_rms_norm_rows_whose_squares_overflow_normalise_as_in_float64(
    cols: int, dtype: torch.dtype
) -> None:
    torch.manual_seed(cols)
    rows = torch.randn(4, cols)
    rows[0] *= 1e30  # squares overflow float32: rescued
    rows[1] *= 3e38 / rows[1].abs().max()  # near float32's largest value
    rows[2, 0] = INF  # a true infinity: NaN there, 0 elsewhere, as the reference
    x = rows.to(dtype)
    w = torch.randn(cols).to(dtype)
    native = ptkit_ops.rms_norm(x.cuda(), w.cuda(), 1e-6).cpu()
    reference = ptkit_ops.rms_norm_reference(x, w, 1e-6)
    assert torch.isfinite(native[:2]).all()
    _same(native, reference)


@pytest.mark.parametrize("cols", [2**24, 2**27 + 1])
def test_rms_norm_long_rows_stay_near_float32_roundoff(cols: int) -> None:
    constant = ptkit_ops.rms_norm(
        torch.full((1, cols), 3.0, device="cuda"), torch.ones(cols, device="cuda"), 0.0
    )
    assert float(constant.min()) == pytest.approx(1.0, rel=4 * 2.0**-24)
    assert float(constant.max()) == pytest.approx(1.0, rel=4 * 2.0**-24)
    torch.manual_seed(cols)
    x = torch.randn(1, cols, device="cuda")
    y = ptkit_ops.rms_norm(x, torch.ones(cols, device="cuda"), 1e-6).double()
    exact = x.double() / torch.sqrt(x.double().square().mean() + 1e-6)
    error = float((y - exact).abs().max() / exact.abs().max())
    assert error < 16 * 2.0**-24, error
