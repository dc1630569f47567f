"""Property tests: hypothesis generates >= 500 cases per op per run (shapes, dtypes,
layouts, activations) and each must agree with the reference."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import (
    DTYPES,
    assert_matches,
    linear_error_bound,
    rms_norm_error_bound,
    silu_error_bound,
)

import ptkit_ops

pytestmark = pytest.mark.usefixtures("native_cpu_loaded")

EXAMPLES = 500
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

dtypes = st.sampled_from(DTYPES)
leading = st.lists(st.integers(0, 4), min_size=0, max_size=2)


def _tensor(
    shape: list[int], dtype: torch.dtype, seed: int, scale: float, transposed: bool
) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if transposed and len(shape) >= 2:
        t = (torch.randn(*shape[:-2], shape[-1], shape[-2], generator=g) * scale).to(dtype)
        return t.transpose(-1, -2)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _run_counted(test) -> int:  # type: ignore[no-untyped-def]
    calls = []
    test(calls)
    return len(calls)


def test_rms_norm_property() -> None:
    @SETTINGS
    @given(
        lead=leading,
        cols=st.integers(1, 300),
        dtype=dtypes,
        seed=st.integers(0, 2**31),
        scale=st.sampled_from([1e-3, 1.0, 50.0]),
        transposed=st.booleans(),
        eps=st.sampled_from([0.0, 1e-6, 1e-2]),
    )
    def check(calls, lead, cols, dtype, seed, scale, transposed, eps) -> None:  # type: ignore[no-untyped-def]
        calls.append(1)
        x = _tensor([*lead, cols], dtype, seed, scale, transposed)
        w = _tensor([cols], dtype, seed + 1, 1.0, False)
        reference = ptkit_ops.rms_norm_reference(x, w, eps)
        assert_matches(
            ptkit_ops.rms_norm(x, w, eps), reference, dtype, bound=rms_norm_error_bound(reference)
        )

    assert _run_counted(check) >= EXAMPLES


def test_silu_and_mul_property() -> None:
    @SETTINGS
    @given(
        lead=leading,
        d=st.integers(0, 300),
        dtype=dtypes,
        seed=st.integers(0, 2**31),
        scale=st.sampled_from([1e-2, 1.0, 30.0]),
        transposed=st.booleans(),
    )
    def check(calls, lead, d, dtype, seed, scale, transposed) -> None:  # type: ignore[no-untyped-def]
        calls.append(1)
        x = _tensor([*lead, 2 * d], dtype, seed, scale, transposed)
        assert_matches(
            ptkit_ops.silu_and_mul(x),
            ptkit_ops.silu_and_mul_reference(x),
            dtype,
            bound=silu_error_bound(ptkit_ops.silu_and_mul_reference(x)),
        )

    assert _run_counted(check) >= EXAMPLES


def test_fused_linear_property() -> None:
    @SETTINGS
    @given(
        lead=leading,
        k=st.integers(0, 200),
        n=st.integers(0, 40),
        dtype=dtypes,
        seed=st.integers(0, 2**31),
        activation=st.sampled_from(ptkit_ops.ACTIVATIONS),
        with_bias=st.booleans(),
        transposed=st.booleans(),
    )
    def check(calls, lead, k, n, dtype, seed, activation, with_bias, transposed) -> None:  # type: ignore[no-untyped-def]
        calls.append(1)
        x = _tensor([*lead, k], dtype, seed, 1.0, transposed)
        w = _tensor([n, k], dtype, seed + 1, 1 / math.sqrt(max(k, 1)), transposed)
        b = _tensor([n], dtype, seed + 2, 1.0, False) if with_bias else None
        assert_matches(
            ptkit_ops.fused_linear(x, w, b, activation),
            ptkit_ops.fused_linear_reference(x, w, b, activation),
            dtype,
            bound=linear_error_bound(x, w, b),
        )

    assert _run_counted(check) >= EXAMPLES
