"""ptkit-ops' Metal kernels without a Mac: the .metal source against the binding's table, and
the MPS op implementations run on the CPU against a fake shader library.

No Apple GPU or Metal compiler is needed. ``FakeMetalLibrary`` stands in for the
object ``torch.mps.compile_shader`` returns: it reads each kernel's buffer arguments
from ``metal/ptkit_kernels.metal`` (so it binds the binding's positional arguments
the way torch would, by buffer index), checks them like torch's binder would need
them, and computes what the kernel computes -- fp32 math, one rounding on the
store, over exactly the grid that ``threads`` / ``group_size`` launch -- on CPU
tensors.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from pathlib import Path

import pytest
import torch
from metal_source import MetalSourceError, metal_signature_problems, parse_metal_kernels
from support import DTYPES, child_python, python_env

import ptkit_ops
from ptkit_ops import ACTIVATIONS
from ptkit_ops import _metal as metal
from ptkit_ops._metal import (
    DTYPE_SUFFIX,
    GEMV_MAX_ROWS,
    KERNELS,
    MetalArg,
    MetalBindingError,
    MetalKernels,
)

METAL_SOURCE = Path(__file__).parents[2] / "metal" / "ptkit_kernels.metal"

ids = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}
SUFFIX_DTYPE = {suffix: dtype for dtype, suffix in DTYPE_SUFFIX.items()}


@pytest.fixture(scope="module")
def source() -> str:
    return METAL_SOURCE.read_text(encoding="utf-8")


# --- the .metal source against the binding -------------------------------------------


def test_every_kernel_and_dtype_is_instantiated_with_the_binding_arguments(source) -> None:
    parsed = parse_metal_kernels(source)
    expected = set()
    for kernel, args in KERNELS.items():
        for dtype, suffix in DTYPE_SUFFIX.items():
            name = f"ptkit_{kernel}_{suffix}"
            expected.add(name)
            assert name in parsed, f"{name} is not instantiated in {METAL_SOURCE}"
            assert parsed[name] == args, (
                f"{name}: the .metal has {parsed[name]}, the binding passes {args} ({dtype})"
            )
    assert set(parsed) == expected, f"exported but unknown: {sorted(set(parsed) - expected)}"
    assert metal_signature_problems(source) == []


def test_binding_table_shapes() -> None:
    assert set(KERNELS) == {"rms_norm", "silu_and_mul", "gemv", "bias_activation"}
    suffixes = {torch.float32: "float", torch.float16: "half", torch.bfloat16: "bfloat"}
    assert suffixes == DTYPE_SUFFIX
    for args in KERNELS.values():
        assert all(a.kind in ("tensor", "float", "int") for a in args)
        assert len({a.name for a in args}) == len(args)


def _metal_constants(source: str) -> dict[str, int]:
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"constant\s+constexpr\s+\w+\s+(k\w+)\s*=\s*(\d+)\s*;", source)
    }


def test_metal_constants_match_the_binding(source) -> None:
    constants = _metal_constants(source)
    assert constants["kGemvMaxRows"] == GEMV_MAX_ROWS
    assert constants["kSimdWidth"] == 32
    codes = {
        "none": "kActNone",
        "relu": "kActRelu",
        "gelu": "kActGelu",
        "gelu_tanh": "kActGeluTanh",
        "silu": "kActSilu",
    }
    assert [constants[codes[a]] for a in ACTIVATIONS] == list(range(len(ACTIVATIONS)))


def _erfc_coefficients(source: str) -> list[float]:
    body = re.search(r"kErfcP\[\d+\]\s*=\s*\{([^}]*)\}", source)
    assert body, "kErfcP not found in the .metal source"
    return [float(c.strip().rstrip("f")) for c in body.group(1).split(",") if c.strip()]


def test_erfc_approximation_in_the_metal_source_is_accurate(source) -> None:
    """The coefficients as written in the .metal give erfc to ~1.2e-7 relative error
    (checked in float64, so this measures the fit, not fp32 rounding)."""
    p_coeffs = _erfc_coefficients(source)
    assert len(p_coeffs) == 10
    z = torch.linspace(0, 9, 90001, dtype=torch.float64)
    t = 1 / (1 + 0.5 * z)
    p = torch.full_like(z, p_coeffs[0])
    for c in p_coeffs[1:]:
        p = p * t + c
    approx = t * torch.exp(-z * z + p)
    exact = torch.special.erfc(z)
    assert ((approx - exact).abs() / exact).max().item() < 1.3e-7


# A copy of the source with one thing changed, and what the check must then say.
MISMATCHES = [
    pytest.param(
        (
            "constant float& eps [[buffer(4)]],\n    uint row",
            "constant float& epsilon [[buffer(4)]],\n    uint row",
            2,
        ),
        "ptkit_rms_norm_half",
        id="renamed-argument",
    ),
    pytest.param(
        (
            "constant long& m [[buffer(4)]],\n    constant long& k [[buffer(5)]],",
            "constant long& k [[buffer(4)]],\n    constant long& m [[buffer(5)]],",
            0,
        ),
        "template gemv: the .metal declares",
        id="reordered-arguments-in-the-template",
    ),
    pytest.param(
        (
            "constant long& m [[buffer(4)]],\n    constant long& k [[buffer(5)]],",
            "constant long& k [[buffer(4)]],\n    constant long& m [[buffer(5)]],",
            2,
        ),
        "ptkit_gemv_half: the .metal declares (x: tensor, w: tensor, bias: tensor, y: tensor, k: int, m: int",
        id="reordered-arguments-in-an-instantiation",
    ),
    pytest.param(
        (
            "device const bfloat* x [[buffer(0)]],\n    device const bfloat* weight [[buffer(1)]],",
            "device const bfloat* weight [[buffer(1)]],\n    device const bfloat* x [[buffer(0)]],",
            0,
        ),
        "is [[buffer(1)]] but is buffer argument 0",
        id="buffer-index-not-position",
    ),
    pytest.param(
        ("constant long& d [[buffer(2)]]", "constant int& d [[buffer(2)]]", 1),
        "none of `device T*`, `constant float&`, `constant long&`",
        id="int32-scalar",
    ),
    pytest.param(
        ("device const half* w [[buffer(1)]]", "device const float* w [[buffer(1)]]", 0),
        "ptkit_gemv_half: buffer w is a `device float*`, expected `device half*`",
        id="wrong-element-type",
    ),
    pytest.param(
        (
            '[[host_name("ptkit_silu_and_mul_bfloat")]]',
            '[[host_name("ptkit_silu_and_mul_bf16")]]',
            0,
        ),
        "ptkit_silu_and_mul_bfloat is missing",
        id="missing-instantiation",
    ),
    pytest.param(
        (
            '[[host_name("ptkit_silu_and_mul_bfloat")]]',
            '[[host_name("ptkit_silu_and_mul_bf16")]]',
            0,
        ),
        "ptkit_silu_and_mul_bf16 is exported by the .metal source but unknown to the binding",
        id="unknown-instantiation",
    ),
    pytest.param(
        ("kernel void bias_activation<float>(", "kernel void gemv<float>(", 0),
        "ptkit_bias_activation_float instantiates gemv<float>, expected bias_activation<float>",
        id="instantiates-the-wrong-template",
    ),
]


@pytest.mark.parametrize(("edit", "expected"), MISMATCHES)
def test_signature_check_reports_a_mismatch(source, edit, expected) -> None:
    old, new, occurrence = edit
    starts = [m.start() for m in re.finditer(re.escape(old), source)]
    assert len(starts) > occurrence, f"the edit's anchor {old!r} is not in the source"
    at = starts[occurrence]
    changed = source[:at] + new + source[at + len(old) :]
    problems = metal_signature_problems(changed)
    assert any(expected in p for p in problems), problems


def test_signature_check_reports_a_binding_side_change(source) -> None:
    reordered = dict(KERNELS)
    x, weight, *rest = KERNELS["rms_norm"]
    reordered["rms_norm"] = (weight, x, *rest)
    problems = metal_signature_problems(source, reordered)
    assert any(
        p.startswith("ptkit_rms_norm_float: the .metal declares (x: tensor, weight: tensor")
        for p in problems
    ), problems


def test_parser_reads_buffers_and_skips_builtin_inputs() -> None:
    src = """
    // template [[host_name("commented_out")]] kernel void nope<float>(device float* q);
    template <typename T>
    kernel void scale(device const T* x [[buffer(0)]], device T* y [[buffer(1)]],
                      constant float& s [[buffer(2)]], constant long& n,
                      uint2 gid [[thread_position_in_grid]]) {}
    template [[host_name("scale_f")]] kernel void scale<float>(
        device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
        constant float& s [[buffer(2)]], constant long& n,
        uint2 gid [[thread_position_in_grid]]);
    """
    assert parse_metal_kernels(src) == {
        "scale_f": (
            MetalArg("x", "tensor"),
            MetalArg("y", "tensor"),
            MetalArg("s", "float"),
            MetalArg("n", "int"),
        )
    }


def test_parser_rejects_a_host_name_it_cannot_read() -> None:
    src = 'template [[host_name("odd")]] [[visible]] void helper<float>(device float* x);'
    with pytest.raises(MetalSourceError, match="1 host_name attributes but 0 parsed"):
        parse_metal_kernels(src)


# --- the fake shader library ---------------------------------------------------------


def _mul_sigmoid(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    # ptkit::mul_sigmoid: x / (1 + e) for a >= 0, x e / (1 + e) for a < 0, e = exp(-|a|).
    e = torch.exp(-a.abs())
    return x * torch.where(a < 0, e, torch.ones_like(e)) / (1 + e)


class FakeMetalLibrary:
    """A FAKE of torch's MPS shader library, for machines without an Apple GPU.

    Attribute ``ptkit_<kernel>_<suffix>`` is a callable taking the kernel's buffer
    arguments positionally plus ``threads=`` / ``group_size=``, like the real one.
    Arguments are bound by position to the parameters parsed from the .metal
    source, type-checked the way torch binds them (tensor -> ``device T*`` of the
    instantiation's type, float -> ``constant float&``, int -> ``constant long&``),
    and the kernel's math runs on the CPU over the launched grid only: a grid that
    is too small leaves outputs unwritten and one that reads or writes past a
    buffer raises, as either would corrupt results on a GPU.
    """

    def __init__(self, source: str) -> None:
        self.signatures = parse_metal_kernels(source)
        self.erfc_p = _erfc_coefficients(source)
        self.calls: list[tuple[str, int, int]] = []
        self.fail_with: Exception | None = None

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self.signatures:
            raise AttributeError(f"FakeMetalLibrary has no kernel {name!r}")

        def launch(*args, threads=None, group_size=None) -> None:
            self._launch(name, args, threads, group_size)

        return launch

    def kernels_called(self) -> list[str]:
        return [name for name, _, _ in self.calls]

    def _launch(self, name: str, args: tuple, threads, group_size) -> None:
        signature = self.signatures[name]
        kernel, _, suffix = name.removeprefix("ptkit_").rpartition("_")
        dtype = SUFFIX_DTYPE[suffix]
        assert len(args) == len(signature), f"{name}: {len(args)} args for {signature}"
        bound = {}
        for arg, spec in zip(args, signature, strict=True):
            if spec.kind == "tensor":
                assert isinstance(arg, torch.Tensor), f"{name}.{spec.name}: {type(arg)}"
                assert arg.dtype == dtype, f"{name}.{spec.name}: {arg.dtype}, kernel is {dtype}"
                assert arg.is_contiguous(), f"{name}.{spec.name} is not contiguous"
                bound[spec.name] = arg.view(-1)  # what the GPU sees: the raw buffer
            elif spec.kind == "float":
                assert type(arg) is float, f"{name}.{spec.name}: {type(arg)} for constant float&"
                bound[spec.name] = arg
            else:
                assert type(arg) is int, f"{name}.{spec.name}: {type(arg)} for constant long&"
                bound[spec.name] = arg
        assert isinstance(threads, int) and threads > 0, f"{name}: threads={threads!r}"
        assert isinstance(group_size, int) and 0 < group_size <= 1024, group_size
        self.calls.append((name, threads, group_size))
        if self.fail_with is not None:
            raise self.fail_with
        getattr(self, f"_{kernel}")(bound, dtype, threads, group_size)

    @staticmethod
    def _read(buffer: torch.Tensor, index: torch.Tensor, what: str) -> torch.Tensor:
        if index.numel() and int(index.max()) >= buffer.numel():
            raise IndexError(f"kernel reads {what}[{int(index.max())}] of {buffer.numel()}")
        return buffer[index].float()

    @staticmethod
    def _write(buffer: torch.Tensor, index: torch.Tensor, value: torch.Tensor, what: str) -> None:
        if index.numel() and int(index.max()) >= buffer.numel():
            raise IndexError(f"kernel writes {what}[{int(index.max())}] of {buffer.numel()}")
        buffer[index] = value.to(buffer.dtype)  # the one rounding, on the store

    def _activate(self, v: torch.Tensor, activation: int) -> torch.Tensor:
        name = ACTIVATIONS[activation]
        if name == "relu":
            return torch.where(v < 0, torch.zeros_like(v), v)
        if name == "gelu":
            # ptkit::gelu_erf with the .metal's erfc fit (in float64: the fit, not fp32's
            # rounding, is what differs from torch).
            vd = v.double()
            z = vd.abs() * 0.70710678118654752
            t = 1 / (1 + 0.5 * z)
            p = torch.full_like(z, self.erfc_p[0])
            for c in self.erfc_p[1:]:
                p = p * t + c
            half_erfc = 0.5 * t * torch.exp(p - 0.5 * vd * vd)
            return (vd * torch.where(vd < 0, half_erfc, 1 - half_erfc)).float()
        if name == "gelu_tanh":
            return _mul_sigmoid(v, 1.5957691216057308 * (v + 0.044715 * v * v * v))
        if name == "silu":
            return _mul_sigmoid(v, v)
        return v

    def _rms_norm(self, a: dict, dtype: torch.dtype, threads: int, group: int) -> None:
        # One threadgroup per row; the kernel's simdgroup bookkeeping wants whole
        # simdgroups and at most 32 of them.
        assert group % 32 == 0 and group <= 1024, f"rms_norm threadgroup of {group}"
        assert threads % group == 0, "rms_norm: the grid must be whole threadgroups (rows)"
        rows, cols = threads // group, a["cols"]
        index = torch.arange(rows * cols)
        x = self._read(a["x"], index, "x").view(rows, cols)
        w = self._read(a["weight"], torch.arange(cols), "weight")
        inv = torch.rsqrt(x.square().sum(-1, keepdim=True) / cols + a["eps"])
        self._write(a["y"], index, (x * inv * w).flatten(), "y")

    def _silu_and_mul(self, a: dict, dtype: torch.dtype, threads: int, group: int) -> None:
        gid = torch.arange(threads)
        d = a["d"]
        row, c = gid // d, gid % d
        gate = self._read(a["x"], row * 2 * d + c, "x")
        up = self._read(a["x"], row * 2 * d + d + c, "x")
        self._write(a["y"], gid, _mul_sigmoid(gate, gate) * up, "y")

    def _gemv(self, a: dict, dtype: torch.dtype, threads: int, group: int) -> None:
        # One 32-lane simdgroup per column, found from the grid position: the grid and
        # the threadgroups must be whole simdgroups.
        assert threads % 32 == 0 and group % 32 == 0, (threads, group)
        m, k, n = a["m"], a["k"], a["n"]
        assert 1 <= m <= GEMV_MAX_ROWS, f"gemv with m={m}"
        cols = min(threads // 32, n)  # columns >= n return early
        x = self._read(a["x"], torch.arange(m * k), "x").view(m, k)
        w = self._read(a["w"], torch.arange(cols * k), "w").view(cols, k)
        acc = x @ w.T  # fp32 accumulation
        if a["has_bias"]:
            acc = acc + self._read(a["bias"], torch.arange(cols), "bias")
        out = self._activate(acc, a["activation"])
        index = (torch.arange(m)[:, None] * n + torch.arange(cols)[None, :]).flatten()
        self._write(a["y"], index, out.flatten(), "y")

    def _bias_activation(self, a: dict, dtype: torch.dtype, threads: int, group: int) -> None:
        gid = torch.arange(threads)
        v = self._read(a["y"], gid, "y")
        if a["has_bias"]:
            v = v + self._read(a["bias"], gid % a["n"], "bias")
        self._write(a["y"], gid, self._activate(v, a["activation"]), "y")


@pytest.fixture
def fake():
    """MetalKernels on the shipped source, "compiled" into a FakeMetalLibrary."""
    libraries: list[FakeMetalLibrary] = []

    def compile_fake(path: Path) -> FakeMetalLibrary:
        libraries.append(FakeMetalLibrary(path.read_text(encoding="utf-8")))
        return libraries[-1]

    kernels = MetalKernels(METAL_SOURCE, compile=compile_fake)
    assert libraries == [], "MetalKernels compiled before the first call"
    kernels.library()
    assert len(libraries) == 1
    return kernels, libraries[0]


def _randn(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape) * scale).to(dtype)


def _poisoned_empty(monkeypatch) -> None:
    """Make the outputs the binding allocates start as NaN, not whatever memory held:
    an output the launched grid did not cover then cannot pass by luck."""
    real_empty_like, real_new_empty = torch.empty_like, torch.Tensor.new_empty

    def empty_like(t, *args, **kwargs):
        return real_empty_like(t, *args, **kwargs).fill_(float("nan"))

    def new_empty(self, *args, **kwargs):
        return real_new_empty(self, *args, **kwargs).fill_(float("nan"))

    monkeypatch.setattr(torch, "empty_like", empty_like)
    monkeypatch.setattr(torch.Tensor, "new_empty", new_empty)


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype == dtype
    torch.testing.assert_close(actual, expected, **TOLERANCE[dtype])


RMS_SHAPES = [(1,), (7,), (3, 33), (2, 5, 1000), (4, 4096), (0, 8), (3, 0)]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("shape", RMS_SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-6, 0.25])
def test_rms_norm_on_the_fake_library(fake, monkeypatch, dtype, shape, eps) -> None:
    kernels, lib = fake
    _poisoned_empty(monkeypatch)
    torch.manual_seed(0)
    x = _randn(*shape, dtype=dtype, scale=3.0)
    weight = _randn(shape[-1], dtype=dtype)
    out = kernels.rms_norm(x, weight, eps)
    assert kernels.failure is None, kernels.failure
    _assert_close(out, ptkit_ops.rms_norm_reference(x, weight, eps), dtype)
    assert lib.kernels_called() == (
        [] if x.numel() == 0 else [f"ptkit_rms_norm_{DTYPE_SUFFIX[dtype]}"]
    )


SILU_SHAPES = [(2,), (3, 74), (2, 3, 600), (0, 8), (4, 0)]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("shape", SILU_SHAPES, ids=str)
def test_silu_and_mul_on_the_fake_library(fake, monkeypatch, dtype, shape) -> None:
    kernels, lib = fake
    _poisoned_empty(monkeypatch)
    torch.manual_seed(1)
    x = _randn(*shape, dtype=dtype, scale=4.0)
    out = kernels.silu_and_mul(x)
    assert kernels.failure is None, kernels.failure
    _assert_close(out, ptkit_ops.silu_and_mul_reference(x), dtype)
    expected = [] if out.numel() == 0 else [f"ptkit_silu_and_mul_{DTYPE_SUFFIX[dtype]}"]
    assert lib.kernels_called() == expected


# x's leading shape (m = their product), k, n: m <= 16 takes the gemv kernel.
LINEAR_SHAPES = [
    ((), 64, 10),  # 1-D x: m = 1
    ((1,), 1, 1),
    ((3,), 70, 9),
    ((2, 3), 33, 40),
    ((16,), 128, 300),  # the largest gemv
    ((17,), 48, 20),  # the smallest GEMM
    ((3, 8), 96, 33),
    ((64,), 16, 5),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize(("lead", "k", "n"), LINEAR_SHAPES, ids=str)
def test_fused_linear_on_the_fake_library(
    fake, monkeypatch, dtype, activation, with_bias, lead, k, n
) -> None:
    kernels, lib = fake
    _poisoned_empty(monkeypatch)
    torch.manual_seed(2)
    x = _randn(*lead, k, dtype=dtype, scale=2.0)
    weight = _randn(n, k, dtype=dtype, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype) if with_bias else None
    out = kernels.fused_linear(x, weight, bias, activation)
    assert kernels.failure is None, kernels.failure
    _assert_close(out, ptkit_ops.fused_linear_reference(x, weight, bias, activation), dtype)

    suffix = DTYPE_SUFFIX[dtype]
    m = math.prod(lead)
    if m <= GEMV_MAX_ROWS:
        assert lib.kernels_called() == [f"ptkit_gemv_{suffix}"]
    elif with_bias or activation != "none":
        assert lib.kernels_called() == [f"ptkit_bias_activation_{suffix}"]
    else:
        assert lib.kernels_called() == []  # the library GEMM alone


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize(
    ("x_shape", "n"),
    [((0, 8), 4), ((3, 8), 0), ((3, 0), 5), ((20, 0), 5), ((2, 0, 8), 3)],
    ids=str,
)
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
def test_fused_linear_empty_on_the_fake_library(fake, dtype, x_shape, n, with_bias) -> None:
    kernels, _ = fake
    x = _randn(*x_shape, dtype=dtype)
    weight = _randn(n, x_shape[-1], dtype=dtype)
    bias = _randn(n, dtype=dtype) if with_bias else None
    for activation in ACTIVATIONS:
        out = kernels.fused_linear(x, weight, bias, activation)
        assert kernels.failure is None, kernels.failure
        _assert_close(out, ptkit_ops.fused_linear_reference(x, weight, bias, activation), dtype)


def test_non_contiguous_inputs_are_made_contiguous(fake) -> None:
    kernels, lib = fake
    torch.manual_seed(3)
    x = torch.randn(40, 6).t()  # [6, 40], strides (1, 6)
    weight = torch.randn(40)
    _assert_close(
        kernels.rms_norm(x, weight), ptkit_ops.rms_norm_reference(x, weight), torch.float32
    )
    w2 = torch.randn(12, 40)[:, ::1].t().contiguous().t()  # [12, 40] column-major
    _assert_close(
        kernels.fused_linear(x, w2, None, "silu"),
        ptkit_ops.fused_linear_reference(x, w2, None, "silu"),
        torch.float32,
    )
    gate_up = torch.randn(8, 6).t()
    _assert_close(
        kernels.silu_and_mul(gate_up),
        ptkit_ops.silu_and_mul_reference(gate_up),
        torch.float32,
    )
    assert kernels.failure is None and len(lib.calls) == 3


def test_invalid_inputs_raise_the_reference_errors_before_compiling() -> None:
    compiled = []
    kernels = MetalKernels(METAL_SOURCE, compile=lambda p: compiled.append(p))
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match=r"ptkit\.rms_norm: expected weight of shape \[8\]"):
        kernels.rms_norm(x, torch.randn(7))
    with pytest.raises(ValueError, match=r"ptkit\.silu_and_mul: expected an even last dimension"):
        kernels.silu_and_mul(torch.randn(3))
    with pytest.raises(ValueError, match=r"ptkit\.fused_linear: expected activation"):
        kernels.fused_linear(x, torch.randn(4, 8), None, "tanh")
    assert compiled == [] and kernels.failure is None


# --- _dispatch: every launch is checked against KERNELS ------------------------------


def _rms_norm_args() -> tuple:
    return (torch.randn(2, 8), torch.ones(8), torch.empty(2, 8), 8, 1e-6)


def test_dispatch_launches_the_dtype_instantiation(source) -> None:
    lib = FakeMetalLibrary(source)
    for dtype, suffix in DTYPE_SUFFIX.items():
        x = torch.randn(2, 8).to(dtype)
        args = (x, torch.ones(8, dtype=dtype), torch.empty_like(x), 8, 1e-6)
        metal._dispatch(lib, "rms_norm", dtype, args, 64, 32)
        assert lib.calls[-1] == (f"ptkit_rms_norm_{suffix}", 64, 32)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda a: a[:4],
            r"ptkit_rms_norm_float: expected 5 arguments \(x: tensor, weight: tensor",
        ),
        (lambda a: (*a[:3], 8.0, a[4]), r"argument 3 \(cols: int\): expected an int, got float"),
        (lambda a: (*a[:4], 1), r"argument 4 \(eps: float\): expected a float, got int"),
        (lambda a: (*a[:3], True, a[4]), r"argument 3 \(cols: int\): expected an int, got bool"),
        (
            lambda a: (a[0].double(), *a[1:]),
            r"argument 0 \(x: tensor\): expected dtype torch.float32",
        ),
        (lambda a: (a[0], 1.0, *a[2:]), r"argument 1 \(weight: tensor\): expected a torch.Tensor"),
        (
            lambda a: (a[0].t().contiguous().t(), *a[1:]),
            r"argument 0 \(x: tensor\): expected a contiguous",
        ),
    ],
    ids=["count", "float-for-int", "int-for-float", "bool", "dtype", "not-a-tensor", "strided"],
)
def test_dispatch_rejects_arguments_that_do_not_match_the_table(source, change, message) -> None:
    lib = FakeMetalLibrary(source)
    args = change(_rms_norm_args())
    with pytest.raises(MetalBindingError, match=message):
        metal._dispatch(lib, "rms_norm", torch.float32, args, 64, 32)
    assert lib.calls == []


def test_dispatch_rejects_unknown_kernels_and_bad_grids(source) -> None:
    lib = FakeMetalLibrary(source)
    with pytest.raises(MetalBindingError, match="no Metal kernel 'softmax'"):
        metal._dispatch(lib, "softmax", torch.float32, (), 1, 1)
    with pytest.raises(MetalBindingError, match="expected 0 < group_size <= threads"):
        metal._dispatch(lib, "rms_norm", torch.float32, _rms_norm_args(), 32, 64)
    assert lib.calls == []


# --- failures: recorded once, then the reference serves -------------------------------


def _op_calls() -> list[tuple[str, tuple]]:
    torch.manual_seed(4)
    x = torch.randn(3, 16)
    return [
        ("rms_norm", (x, torch.randn(16), 1e-6)),
        ("fused_linear", (x, torch.randn(5, 16), torch.randn(5), "gelu")),
        ("silu_and_mul", (x,)),
    ]


REFERENCES = {
    "rms_norm": ptkit_ops.rms_norm_reference,
    "fused_linear": ptkit_ops.fused_linear_reference,
    "silu_and_mul": ptkit_ops.silu_and_mul_reference,
}


def _warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ptkit.runtime" and r.levelno == logging.WARNING]


def test_compile_failure_is_recorded_and_the_reference_serves(caplog) -> None:
    attempts = []

    def broken_compile(path: Path) -> object:
        attempts.append(path)
        raise RuntimeError("program_source:12:5: error: use of undeclared identifier 'bfloat'")

    kernels = MetalKernels(METAL_SOURCE, compile=broken_compile)
    assert kernels.failure is None and kernels.state == "not compiled yet"
    caplog.set_level(logging.WARNING, logger="ptkit.runtime")
    for _ in range(2):
        for op, args in _op_calls():
            assert torch.equal(getattr(kernels, op)(*args), REFERENCES[op](*args))
    assert attempts == [METAL_SOURCE], "compiled more than once"
    assert kernels.failure is not None
    assert str(METAL_SOURCE) in kernels.failure
    assert (
        "RuntimeError: program_source:12:5: error: use of undeclared identifier" in kernels.failure
    )
    assert kernels.state == f"failed: {kernels.failure}" and not kernels.compiled
    warnings = _warnings(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert kernels.failure in warnings[0].getMessage()


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS would compile the kernels")
def test_default_compile_without_mps_falls_back(caplog) -> None:
    """On a torch without a usable MPS device torch.mps.compile_shader raises: the real
    compile path, end to end, must fall back rather than raise."""
    kernels = MetalKernels(METAL_SOURCE)
    caplog.set_level(logging.WARNING, logger="ptkit.runtime")
    for op, args in _op_calls():
        assert torch.equal(getattr(kernels, op)(*args), REFERENCES[op](*args))
    assert kernels.failure is not None and kernels.failure.startswith(f"compiling {METAL_SOURCE}")
    assert len(_warnings(caplog)) == 1


def test_a_failed_launch_is_recorded_and_the_reference_serves_from_then_on(fake, caplog) -> None:
    kernels, lib = fake
    caplog.set_level(logging.WARNING, logger="ptkit.runtime")
    lib.fail_with = RuntimeError("Failed to create pipeline state")
    (op, args), *rest = _op_calls()
    assert torch.equal(getattr(kernels, op)(*args), REFERENCES[op](*args))
    assert kernels.failure is not None
    assert "ptkit.rms_norm with the Metal kernels of" in kernels.failure
    assert "RuntimeError: Failed to create pipeline state" in kernels.failure
    lib.fail_with = None
    launches = len(lib.calls)
    for op, args in rest:
        assert torch.equal(getattr(kernels, op)(*args), REFERENCES[op](*args))
    assert len(lib.calls) == launches, "the failed library was used again"
    assert len(_warnings(caplog)) == 1


def test_first_calls_from_many_threads_compile_once(source) -> None:
    compiles = []

    def slow_compile(path: Path) -> FakeMetalLibrary:
        compiles.append(path)
        time.sleep(0.05)
        return FakeMetalLibrary(source)

    kernels = MetalKernels(METAL_SOURCE, compile=slow_compile)
    x = torch.randn(4, 32)
    expected = ptkit_ops.silu_and_mul_reference(x)
    results: list[torch.Tensor] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        results.append(kernels.silu_and_mul(x))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(compiles) == 1 and kernels.compiled and kernels.failure is None
    assert len(results) == 8
    for r in results:
        torch.testing.assert_close(r, expected)


# --- registration ---------------------------------------------------------------------

_REGISTER = """
import torch
import ptkit_ops
from pathlib import Path
from ptkit_ops import _metal as metal

has = torch._C._dispatch_has_kernel_for_dispatch_key
ops = ("rms_norm", "fused_linear", "silu_and_mul")
existing = metal.metal_kernels()
x, w = torch.randn(3, 8), torch.randn(8)
cpu_before = ptkit_ops.rms_norm(x, w)  # native or reference, whichever serves CPU here
if existing is None:
    assert not any(has(f"ptkit::{op}", "MPS") for op in ops), "MPS kernels before registering"
    path = Path(LIBRARY_PATH)
else:  # a loader that already registered them (a Mac): same path again
    path = existing.library_path

kernels = metal.register_metal_kernels(path)
assert all(has(f"ptkit::{op}", "MPS") for op in ops)
assert metal.metal_kernels() is kernels
assert metal.register_metal_kernels(path) is kernels
try:
    metal.register_metal_kernels(path.with_name("other.metallib"))
except RuntimeError as exc:
    assert "already registered" in str(exc)
else:
    raise AssertionError("a second library path was accepted")
if existing is None:
    assert kernels.state == "not compiled yet", kernels.state

# CPU tensors do not reach the MPS kernels, and nothing compiles for them.
assert torch.equal(ptkit_ops.rms_norm(x, w), cpu_before)
if existing is None:
    assert kernels.state == "not compiled yet", kernels.state
print("registered", kernels.state)
"""


def test_registering_adds_mps_kernels_without_compiling() -> None:
    # In a child process: registration is process-global. It imports the same
    # ptkit_ops (and toolkit) as this process: the source tree here.
    here = str(Path(ptkit_ops.__file__).resolve().parents[1])
    proc = child_python(
        _REGISTER.replace("LIBRARY_PATH", repr(str(METAL_SOURCE))), env=python_env(PYTHONPATH=here)
    )
    assert "registered" in proc.stdout
