"""The numerics ptkit states (docs/using.md, "Bad arguments and special values"), on
the native path and on the reference path alike:

* special values: NaN in, NaN out; silu, gelu and gelu_tanh take their limits at ±inf
  (+inf, -0); signed zeros and subnormal inputs are kept; relu(-inf) = 0;
* rms_norm's sum of squares is blocked (float32 blocks, a double total): a row of any
  length (2^27 + 1 elements tested) stays near float32's unit roundoff; rows whose
  float32 squares overflow are computed in float64.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from support import child_python, python_env

import ptkit_ops

pytestmark = pytest.mark.usefixtures("native_cpu_loaded")

INF, NAN = math.inf, math.nan
SPECIAL = [-INF, INF, NAN, -0.0, 0.0, 1e-40, -1e-40, 1.0, -1.0, 1e30, -1e30]

# Each probe returns its outputs as lists; NaN compares by position, zeros by sign.
PROBE = r"""
import json, math, torch, ptkit_ops
inf, nan = math.inf, math.nan
special = torch.tensor(SPECIAL)
out = {}
column = special.reshape(-1, 1)
for activation in ptkit_ops.ACTIVATIONS:
    y = ptkit_ops.fused_linear(column, torch.ones(1, 1), None, activation)
    out[f"fused_linear/{activation}"] = y.flatten().tolist()
gate_up = torch.cat([special, torch.tensor([1.0, -1.0, 1.0, inf, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])])
out["silu_and_mul"] = ptkit_ops.silu_and_mul(gate_up.reshape(1, -1)).flatten().tolist()
rows = torch.tensor([[inf, 1.0], [nan, 1.0], [0.0, 0.0], [1e-40, -1e-40], [3e38, 3e38], [-3e38, 1e30]])
out["rms_norm"] = ptkit_ops.rms_norm(rows, torch.ones(2), 1e-6).tolist()
print(json.dumps(out, allow_nan=True))
"""


def _signature(values: list) -> list:
    """NaN as 'nan', zeros with their sign, infinities: what must agree exactly; other
    values as themselves (compared within a few float32 ulps: the paths round apart)."""
    flat = [v for row in values for v in row] if values and isinstance(values[0], list) else values
    return [
        "nan" if math.isnan(v) else "-0" if v == 0 and math.copysign(1, v) < 0 else v for v in flat
    ]


def _probe(**env: str) -> dict[str, list]:
    code = PROBE.replace("SPECIAL", repr(SPECIAL))
    return json.loads(child_python(code, env=python_env(**env)).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def native() -> dict[str, list]:
    return _probe()


@pytest.fixture(scope="module")
def reference() -> dict[str, list]:
    return _probe(PTKIT_FORCE_REFERENCE="1")


CASES = [*(f"fused_linear/{a}" for a in ptkit_ops.ACTIVATIONS), "silu_and_mul", "rms_norm"]


@pytest.mark.parametrize("case", CASES)
def test_special_values_agree_on_both_paths(
    native: dict[str, list], reference: dict[str, list], case: str
) -> None:
    ours, theirs = _signature(native[case]), _signature(reference[case])
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        if isinstance(a, str) or isinstance(b, str) or math.isinf(a) or a == 0:
            assert a == b, (ours, theirs)
        else:
            assert a == pytest.approx(b, rel=4 * 2.0**-24), (ours, theirs)


@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_smooth_activations_take_their_limits_at_infinity(
    native: dict[str, list], activation: str
) -> None:
    values = _signature(native[f"fused_linear/{activation}"])
    assert values[:3] == ["-0", INF, "nan"]  # -inf, +inf, NaN


def test_relu_and_the_gated_product_follow_ieee(native: dict[str, list]) -> None:
    assert _signature(native["fused_linear/relu"])[:4] == [0.0, INF, "nan", 0.0]
    # silu(-inf) * 1 = -0, silu(+inf) * -1 = -inf, NaN, silu(-0) * inf = NaN (0 * inf).
    assert _signature(native["silu_and_mul"])[:4] == ["-0", -INF, "nan", "nan"]


def test_rms_norm_rows_with_infinities_zeros_and_huge_values(native: dict[str, list]) -> None:
    rows = native["rms_norm"]
    assert math.isnan(rows[0][0]) and rows[0][1] == 0.0  # inf / inf; 1 / inf
    assert all(math.isnan(v) for v in rows[1])
    assert rows[2] == [0.0, 0.0]
    assert rows[4] == [1.0, 1.0]  # float32 squares overflow: computed in float64
    assert rows[5][0] == pytest.approx(-math.sqrt(2), rel=1e-6)


def test_a_row_of_two_to_the_27_plus_one_equal_values_normalises_to_one() -> None:
    n = 2**27 + 1
    y = ptkit_ops.rms_norm(torch.full((1, n), 3.0), torch.ones(n), 0.0)
    assert float(y.min()) == float(y.max()) == 1.0


@pytest.mark.parametrize("cols", [2**20, 2**24])
def test_long_random_rows_stay_near_float32_roundoff(cols: int) -> None:
    torch.manual_seed(cols)
    x = torch.randn(1, cols)
    y = ptkit_ops.rms_norm(x, torch.ones(cols), 1e-6).double()
    exact = x.double() / torch.sqrt(x.double().square().mean() + 1e-6)
    error = float((y - exact).abs().max() / exact.abs().max())
    assert error < 4 * 2.0**-24, error  # a few units of float32 roundoff, whatever the length
