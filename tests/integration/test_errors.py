"""Invalid input: a clear error naming the op, what was expected and what was given,
the same type and message from the native kernel and from the reference."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from support import OUT_CASES, child_python, python_env

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
    (
        "rms_norm",
        lambda: (None, torch.randn(8)),
        r"ptkit\.rms_norm: expected x to be a torch.Tensor, got None",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8), None, None, "none"),
        r"ptkit\.fused_linear: expected weight to be a torch.Tensor, got None",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8), torch.randn(4, 8), None, "swish"),
        r"ptkit\.fused_linear: expected activation to be one of none, relu, gelu, gelu_tanh, "
        r"silu, got 'swish' \(swish is silu: pass activation='silu'\)",
    ),
    (
        "fused_linear",
        lambda: (torch.randn(2, 8), torch.randn(4, 8), None, "sillu"),
        r"ptkit\.fused_linear: expected activation to be one of none, relu, gelu, gelu_tanh, "
        r"silu, got 'sillu' \(did you mean 'silu'\?\)",
    ),
]


# Whatever implementation serves the device, a mistake through the public functions raises
# the same type with the same message; through torch.ops.ptkit.* directly, a RuntimeError
# with the same message (ptkit_ops/_checks.py says why).
PROBE = r"""
import json, sys, torch, ptkit_ops

sys.path[:0] = [TESTS, TESTS + "/.."]
from test_errors import CASES, OUT_CASES

def attempt(call):
    try:
        call()
    except Exception as exc:
        return [type(exc).__name__, isinstance(exc, RuntimeError), str(exc).splitlines()[0]]

out = []
for op, make_args, _ in CASES:
    out.append({"public": attempt(lambda: getattr(ptkit_ops, op)(*make_args())),
                "torch.ops": attempt(lambda: getattr(torch.ops.ptkit, op)(*make_args()))})
for op, make, _ in OUT_CASES:
    out.append({"public": attempt(lambda: getattr(ptkit_ops, op)(*make()[0], out=make()[1])),
                "torch.ops": attempt(lambda: getattr(torch.ops.ptkit, op).out(*make()[0], out=make()[1]))})
print(json.dumps(out))
"""


def _probe(**env: str) -> list[dict[str, list]]:
    code = PROBE.replace("TESTS", repr(str(Path(__file__).parent)))
    proc = child_python(code, env=python_env(**env))
    # A None reaching a kernel must not print a C++ backtrace from torch's C shim.
    assert "Exception across libtorch C API boundary" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def native() -> list[dict[str, list]]:
    return _probe()


@pytest.fixture(scope="module")
def reference() -> list[dict[str, list]]:
    return _probe(PTKIT_FORCE_REFERENCE="1")


@pytest.mark.parametrize(
    ("index", "case"),
    list(enumerate(CASES + OUT_CASES)),
    ids=[c[0] for c in CASES] + [f"{c[0]}(out=)" for c in OUT_CASES],
)
def test_the_same_mistake_is_the_same_error_on_both_paths(
    native: list[dict[str, list]], reference: list[dict[str, list]], index: int, case: tuple
) -> None:
    _, _, message = case
    for path in (native, reference):
        kind, is_runtime_error, text = path[index]["public"]
        assert kind in ("OpArgumentError", "OpArgumentTypeError"), path[index]
        assert is_runtime_error and re.fullmatch(message, text), text
        # Called through torch.ops directly: a RuntimeError with the same message.
        _, direct_is_runtime_error, direct_text = path[index]["torch.ops"]
        assert direct_is_runtime_error, path[index]
        assert re.fullmatch(message, direct_text), direct_text
    assert native[index]["public"] == reference[index]["public"]
    assert native[index]["torch.ops"][2] == reference[index]["torch.ops"][2]


@pytest.mark.parametrize(
    ("op", "make_args", "message"), CASES, ids=lambda c: c if isinstance(c, str) else ""
)
def test_the_exception_classes_are_value_or_type_errors_and_runtime_errors(
    op: str, make_args, message: str
) -> None:
    with pytest.raises((ptkit_ops.OpArgumentError, ptkit_ops.OpArgumentTypeError)) as info:
        getattr(ptkit_ops, op)(*make_args())
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value, (ValueError, TypeError))
    with pytest.raises(type(info.value), match=message):
        getattr(ptkit_ops, f"{op}_reference")(*make_args())


def test_meta_tensors_are_checked_by_the_fake_kernel() -> None:
    x = torch.empty(2, 8, device="meta")
    assert ptkit_ops.rms_norm(x, torch.empty(8, device="meta")).shape == (2, 8)
    with pytest.raises(
        ptkit_ops.OpArgumentError, match=r"ptkit\.rms_norm: expected weight of shape \[8\]"
    ):
        ptkit_ops.rms_norm(x, torch.empty(9, device="meta"))


def test_mixed_devices_are_rejected() -> None:
    with pytest.raises(
        ValueError, match=r"ptkit\.rms_norm: expected weight on cpu \(the device of x\), got meta"
    ):
        ptkit_ops.rms_norm_reference(torch.randn(2, 8), torch.empty(8, device="meta"))
