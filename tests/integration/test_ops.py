"""Native CPU kernels against the pure-PyTorch reference, op by op and dtype by dtype."""

from __future__ import annotations

import json
import math
import os
import platform
import sys

import pytest
import torch
from support import (
    DTYPES,
    assert_matches,
    child_python,
    cpu_lacks,
    linear_error_bound,
    python_env,
    rms_norm_error_bound,
    run_op_tests,
    silu_error_bound,
)

import ptkit
import ptkit_ops
from ptkit.platforms.base import isa_levels

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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=ids.get)
def test_silu_and_mul_looks_up_every_16_bit_gate_as_it_computes_it(dtype: torch.dtype) -> None:
    """The CPU kernel looks 16-bit gates up in a table of silu (8 or 16 at a time) and
    computes the last few of a row (fewer than 8): every one of the 65536 values, looked
    up (one row) and computed (one per row), gives the same bits, NaNs and infinities
    included. The factors are random, so the products round differently per value."""
    gates = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    ups = _randn(65536, dtype=dtype, scale=3.0)
    one_row = torch.cat([gates, ups]).unsqueeze(0)
    looked_up = ptkit_ops.silu_and_mul(one_row).flatten()
    computed = ptkit_ops.silu_and_mul(torch.stack([gates, ups], dim=1)).flatten()
    same = looked_up.view(torch.int16) == computed.view(torch.int16)
    nan_both = looked_up.isnan() & computed.isnan()  # NaN payloads may differ
    assert bool((same | nan_both).all()), (
        f"{int((~(same | nan_both)).sum())} of 65536 differ; first gate bits "
        f"{int(gates.view(torch.int16)[~(same | nan_both)][0]):#06x}"
    )
    reference = ptkit_ops.silu_and_mul_reference(one_row).flatten()
    assert_matches(looked_up, reference, dtype, bound=silu_error_bound(reference))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
def test_silu_and_mul_gives_a_gate_the_same_bits_wherever_it_sits(dtype: torch.dtype) -> None:
    """silu takes a shorter way where every lane of a vector (8 lanes, 4 on SSE2) has its
    gate at or above -87, and otherwise a scaled one that rounds alike there, so a gate's
    result must not depend on its neighbours. Gates on both sides of -87, and far from it,
    in every rotation of one row (the vector loops) and each alone (a row's tail)."""
    edge = [-110.5, -104.0, -95.0, -88.8, -88.0, -87.01, -86.99, -50.0, -16.7, -1.0, -1e-3]
    far = [0.0, 0.7, 3.0, 20.0, 87.9, 88.5, 95.0, -1e4, 1e4, math.inf, -math.inf, math.nan, -30.0]
    gates = torch.tensor([*edge, *far]).to(dtype)
    ups = _randn(len(gates), dtype=dtype, scale=3.0)
    rotations = range(len(gates))
    in_rows = ptkit_ops.silu_and_mul(
        torch.stack([torch.cat([gates.roll(r), ups.roll(r)]) for r in rotations])
    )
    alone = ptkit_ops.silu_and_mul(torch.stack([gates, ups], dim=1)).flatten()
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    for r in rotations:
        got = in_rows[r].roll(-r)
        same = (got.view(bits) == alone.view(bits)) | (got.isnan() & alone.isnan())
        assert bool(same.all()), (r, gates[~same].tolist(), got[~same].tolist(), alone[~same])


# (rows of x, K, N): decode rows 1..16 take the GEMV, 17+ the library GEMM + epilogue.
# On amx-bf16, bf16 rows 4..16 with K >= 32 take the tile unit for whole blocks of 32
# outputs (the rest, and the K tail past a multiple of 32, the dot products): (4, 97, 70)
# and (16, 4101, 71) have both; (3, 100, 40) stays below the tiles' rows.
LINEAR_SHAPES = [
    (0, 8, 4),
    (1, 0, 5),
    (1, 1, 1),
    (1, 7, 3),
    (4, 33, 17),
    (3, 100, 40),
    (4, 97, 70),
    (16, 4097, 9),
    (16, 4101, 71),
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


def _cpu_decision() -> ptkit.runtime.LoadDecision:
    return next(d for d in ptkit.runtime.load_decisions("ptkit_ops") if d.backend == "cpu")


# The processor's levels, best first (ptkit.platforms' table): each one this library holds.
ISA_LEVELS = [level.name for level in isa_levels(platform.machine())]


@pytest.mark.parametrize("level", ISA_LEVELS)
def test_native_matches_reference_at_every_isa_level(level: str) -> None:
    """The library carries one kernel copy per ISA level and runs the best one this CPU
    has (the rest of this file tests that one). Every other level it holds runs the same
    native-vs-reference tests with PTKIT_CPU_ISA=<level> (the conftest fixture checks that
    the level ran). A level not built, or one above what this CPU runs (lacking or refused
    by the OS), is skipped saying which: the levels are nested, so the one in use tells."""
    decision = _cpu_decision()
    assert decision.manifest is not None
    built = decision.manifest.targets.get("isa", ())
    details = dict(decision.details)
    running = details["isa"]
    if level not in built:
        pytest.skip(f"{level} is not built into {decision.library} (built: {', '.join(built)})")
    if os.environ.get("PTKIT_CPU_ISA"):
        pytest.skip(f"this run is capped at PTKIT_CPU_ISA={os.environ['PTKIT_CPU_ISA']}")
    if ISA_LEVELS.index(level) < ISA_LEVELS.index(running):
        note = details.get("isa note", "")
        lacking = ", ".join(cpu_lacks(level)) or "the OS refused it"
        reason = f"this CPU does not run {level} (lacks {lacking}; the library runs {running})"
        pytest.skip(note if level in note else reason)
    if level == running:
        return  # the tests of this file ran at this level, in this process
    run_op_tests(sys.executable, PTKIT_CPU_ISA=level)


def test_amx_refused_by_linux_falls_back_with_the_reason() -> None:
    """Linux grants the AMX tile state only on request, and refuses it while a signal
    stack of the process is too small for it (ENOSPC): a real refusal, asked of the real
    kernel by a child that sets a 4 KiB sigaltstack before ptkit loads. The library then
    runs the next level and explain() says why."""
    decision = _cpu_decision()
    assert decision.manifest is not None
    if "amx-bf16" not in decision.manifest.targets.get("isa", ()):
        pytest.skip(f"amx-bf16 is not built into {decision.library}")
    if dict(decision.details)["isa"] != "amx-bf16":
        pytest.skip(f"this machine does not run amx-bf16 ({dict(decision.details)})")
    code = (
        "import ctypes, json\n"
        "class Stack(ctypes.Structure):\n"
        "    _fields_ = [('sp', ctypes.c_void_p), ('flags', ctypes.c_int), ('size', ctypes.c_size_t)]\n"
        "buf = ctypes.create_string_buffer(4096)\n"
        "stack = Stack(ctypes.cast(buf, ctypes.c_void_p), 0, 4096)\n"
        "assert ctypes.CDLL(None, use_errno=True).sigaltstack(ctypes.byref(stack), None) == 0\n"
        "import torch, ptkit.runtime, ptkit_ops\n"
        "d = next(d for d in ptkit.runtime.load_decisions('ptkit_ops') if d.backend == 'cpu')\n"
        "x = torch.randn(8, 64, dtype=torch.bfloat16); w = torch.randn(64, 64, dtype=torch.bfloat16)\n"
        "ok = torch.allclose(ptkit_ops.fused_linear(x, w).float(),\n"
        "                    ptkit_ops.fused_linear_reference(x, w).float(), rtol=2e-2, atol=2e-2)\n"
        "print(json.dumps([dict(d.details), ptkit.runtime.format_explain('ptkit_ops'), ok]))\n"
    )
    proc = child_python(code, env=python_env(PYTHONFAULTHANDLER=""))
    details, explained, ok = json.loads(proc.stdout.strip().splitlines()[-1])
    assert details["isa"] == "avx512-bf16", details
    note = details["isa note"]
    assert note.startswith("amx-bf16 passed over: Linux refused the AMX tile state"), note
    assert "No space left on device" in note and "sigaltstack" in note, note
    assert note in explained
    assert ok


OUT_SHAPES = [(0, 8), (3, 66), (2, 5, 4098), (64, 8192)]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("shape", OUT_SHAPES, ids=str)
def test_out_writes_what_the_op_returns(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    """out= runs the same kernels into a preallocated tensor: the result is the one the
    op returns, bit for bit, in the tensor given."""
    x = _randn(*shape, dtype=dtype, scale=3.0)
    out = torch.full((*shape[:-1], shape[-1] // 2), float("nan"), dtype=dtype)
    assert ptkit_ops.silu_and_mul(x, out=out) is out
    assert torch.equal(out, ptkit_ops.silu_and_mul(x))
    w = _randn(shape[-1], dtype=dtype)
    out = torch.full(shape, float("nan"), dtype=dtype)
    assert ptkit_ops.rms_norm(x, w, 1e-5, out=out) is out
    assert torch.equal(out, ptkit_ops.rms_norm(x, w, 1e-5))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
def test_outputs_of_16_mib_stream_and_match(dtype: torch.dtype) -> None:
    """Outputs of 16 MiB or more are written with streaming stores (ops.cpp's
    kCachedBytes) where they start 32-byte aligned, as a fresh tensor does; an out=
    that starts 4 or 2 bytes further on takes the plain stores. Both give the same bits,
    and match the reference."""
    rows = (16 << 20) // (4096 * torch.finfo(dtype).bits // 8)
    for op, x, args in (
        ("rms_norm", _randn(rows, 4096, dtype=dtype), (_randn(4096, dtype=dtype), 1e-5)),
        ("silu_and_mul", _randn(rows, 8192, dtype=dtype, scale=3.0), ()),
    ):
        fn = getattr(ptkit_ops, op)
        streamed = fn(x, *args)
        assert streamed.numel() * streamed.element_size() == 16 << 20
        assert streamed.data_ptr() % 32 == 0
        unaligned = torch.empty(streamed.numel() + 1, dtype=dtype)[1:].view(streamed.shape)
        assert fn(x, *args, out=unaligned) is unaligned
        assert torch.equal(streamed, unaligned), op
        reference = getattr(ptkit_ops, f"{op}_reference")(x, *args)
        bound = rms_norm_error_bound(reference) if op == "rms_norm" else silu_error_bound(reference)
        assert_matches(streamed, reference, dtype, bound=bound)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
def test_decode_gemv_asks_for_16_mib_of_weights_ahead_with_the_same_bits(
    dtype: torch.dtype,
) -> None:
    """Weights of 16 MiB or more (ops.cpp's kCachedBytes) are asked for a tile ahead
    (LinearArgs::prefetch_weights); the sums are those of the GEMV without it: one tile
    fewer rows, just under the size, gives the same bits for the columns both have."""
    k = 1024
    n = (16 << 20) // (k * torch.finfo(dtype).bits // 8)
    w = _randn(n, k, dtype=dtype, scale=1 / 32)
    b = _randn(n, dtype=dtype)
    for m in (1, 4):
        x = _randn(m, k, dtype=dtype)
        ahead = ptkit_ops.fused_linear(x, w, b, "silu")
        plain = ptkit_ops.fused_linear(x, w[: n - 8], b[: n - 8], "silu")
        assert torch.equal(ahead[:, : n - 8], plain), m
        reference = ptkit_ops.fused_linear_reference(x, w, b, "silu")
        assert_matches(ahead, reference, dtype, bound=linear_error_bound(x, w, b))


def test_out_bumps_the_version_so_a_backward_that_saved_it_is_refused() -> None:
    """As torch's out= ops: writing into a tensor that a graph saved for its backward makes
    that backward fail with torch's in-place error, not compute with the new values;
    through the public functions and through torch.ops directly."""
    x, w = torch.randn(2, 8), torch.randn(8)
    calls = [
        lambda h: ptkit_ops.rms_norm(x, w, out=h),
        lambda h: torch.ops.ptkit.rms_norm.out(x, w, 1e-6, out=h),
        lambda h: ptkit_ops.silu_and_mul(torch.randn(2, 16), out=h),
        lambda h: torch.ops.ptkit.silu_and_mul.out(torch.randn(2, 16), out=h),
    ]
    for write in calls:
        z = torch.randn(2, 8, requires_grad=True)
        saved = torch.randn(2, 8)
        loss = (z * saved).sum()  # its backward needs `saved`
        version = saved._version
        write(saved)
        assert saved._version == version + 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
    with torch.inference_mode():  # no version counters there: the call still runs
        out = torch.empty(2, 8)
        assert torch.equal(ptkit_ops.rms_norm(x, w, out=out), ptkit_ops.rms_norm(x, w))


def test_out_takes_no_part_in_autograd() -> None:
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(ptkit_ops.OpArgumentError, match=r"out= takes no part in autograd, but x"):
        ptkit_ops.silu_and_mul(x, out=torch.empty(2, 4))
    w = torch.randn(8, requires_grad=True)
    with pytest.raises(ptkit_ops.OpArgumentError, match=r"but weight requires grad"):
        ptkit_ops.rms_norm(x.detach(), w, out=torch.empty(2, 8))
    with torch.no_grad():
        out = ptkit_ops.rms_norm(x, w, out=torch.empty(2, 8))
    assert torch.equal(out, ptkit_ops.rms_norm(x.detach(), w.detach()))
