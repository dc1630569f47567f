"""On a GPU: the CUDA kernels against the reference, and a CUDA-graph-captured decode step."""

from __future__ import annotations

import math

import pytest
import torch
from support import (
    DTYPES,
    OUT_CASES,
    assert_matches,
    linear_error_bound,
    rms_norm_error_bound,
    silu_error_bound,
)

import ptkit
import ptkit_ops

pytestmark = pytest.mark.cuda

ids = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@pytest.fixture(scope="module", autouse=True)
def cuda_library_loaded() -> None:
    decisions = {d.library: d for d in ptkit.runtime.load_decisions("ptkit_ops")}
    d = decisions.get("libptkit_cuda.so")
    assert d is not None and d.status.value == "loaded", [
        (x.library, x.status, x.reason) for x in decisions.values()
    ]


def _randn(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize(
    "shape",
    [(0, 8), (1, 1), (3, 7), (5, 33), (2, 3, 4095), (16, 4096), (7, 8192), (1, 65536)],
    ids=str,
)
def test_rms_norm_cuda(shape, dtype) -> None:
    x = _randn(*shape, dtype=dtype, scale=3.0)
    w = _randn(shape[-1], dtype=dtype)
    ref = ptkit_ops.rms_norm_reference(x, w, 1e-5)
    assert_matches(
        ptkit_ops.rms_norm(x, w, 1e-5).cpu(),
        ref.cpu(),
        dtype,
        bound=rms_norm_error_bound(ref.cpu()),
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize(
    "shape", [(0, 8), (1, 2), (3, 66), (2, 5, 4098), (7, 8194), (4096, 8192)], ids=str
)
def test_silu_and_mul_cuda(shape, dtype) -> None:
    x = _randn(*shape, dtype=dtype, scale=4.0)
    assert_matches(
        ptkit_ops.silu_and_mul(x).cpu(),
        ptkit_ops.silu_and_mul_reference(x).cpu(),
        dtype,
        bound=silu_error_bound(ptkit_ops.silu_and_mul_reference(x).cpu()),
    )
    xt = (
        x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() == 2 and x.shape[0] > 1 else x
    )
    assert_matches(
        ptkit_ops.silu_and_mul(xt).cpu(),
        ptkit_ops.silu_and_mul_reference(xt).cpu(),
        dtype,
        bound=silu_error_bound(ptkit_ops.silu_and_mul_reference(xt).cpu()),
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("activation", ptkit_ops.ACTIVATIONS)
@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (1, 7, 3),
        (4, 33, 17),
        (16, 4097, 9),
        (5, 4104, 9),  # on an H200: the 8-feature tensor-core kernel, a k tail
        (1, 8192, 8192),
        (16, 8192, 64),
        (17, 64, 33),
        (256, 1024, 512),
    ],
    ids=str,
)
def test_fused_linear_cuda(shape, activation, dtype) -> None:
    m, k, n = shape
    x = _randn(m, k, dtype=dtype)
    w = _randn(n, k, dtype=dtype, scale=1 / math.sqrt(k))
    for bias in (None, _randn(n, dtype=dtype)):
        out = ptkit_ops.fused_linear(x, w, bias, activation).cpu()
        ref = ptkit_ops.fused_linear_reference(x, w, bias, activation).cpu()
        bound = linear_error_bound(x.cpu(), w.cpu(), bias.cpu() if bias is not None else None)
        assert_matches(out, ref, dtype, bound=bound)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids.get)
@pytest.mark.parametrize("shape", [(0, 8), (3, 66), (2, 5, 4098), (7, 8194), (4096, 8192)], ids=str)
def test_out_on_cuda_writes_what_the_op_returns(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    """The CUDA library serves out= itself (not the reference copying in): the result is
    the one the op returns, bit for bit, in the tensor given."""
    routes = {(r.op, r.device_type): r for r in ptkit.runtime.explain("ptkit_ops")}
    for op in ("rms_norm.out", "silu_and_mul.out"):
        route = routes[(op, "cuda")]
        assert (route.implementation, route.library) == ("native", "libptkit_cuda.so"), route
    x = _randn(*shape, dtype=dtype, scale=3.0)
    out = torch.full((*shape[:-1], shape[-1] // 2), math.nan, dtype=dtype, device="cuda")
    assert ptkit_ops.silu_and_mul(x, out=out) is out
    assert torch.equal(out, ptkit_ops.silu_and_mul(x))
    w = _randn(shape[-1], dtype=dtype)
    out = torch.full(shape, math.nan, dtype=dtype, device="cuda")
    assert ptkit_ops.rms_norm(x, w, 1e-5, out=out) is out
    assert torch.equal(out, ptkit_ops.rms_norm(x, w, 1e-5))


def _on_cuda(make):  # type: ignore[no-untyped-def]
    """A support.OUT_CASES maker with its tensors moved to the GPU (strides kept)."""

    def moved():  # type: ignore[no-untyped-def]
        args, out = make()
        return tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args), out.cuda()

    return moved


# out= mistakes on CUDA: the CPU's (support.OUT_CASES), plus an out on another device.
OUT_MISTAKES = [
    *((op, _on_cuda(make), message) for op, make, message in OUT_CASES),
    (
        "silu_and_mul",
        lambda: ((_randn(4, 6, dtype=torch.float32),), torch.empty(4, 3)),
        r"ptkit\.silu_and_mul: expected out on .*",
    ),
]


@pytest.mark.parametrize(
    ("op", "make", "message"), OUT_MISTAKES, ids=lambda c: c if isinstance(c, str) else ""
)
def test_out_mistakes_on_cuda_are_the_same_errors(op: str, make, message: str) -> None:  # type: ignore[no-untyped-def]
    """Through the public function: ptkit's argument error; through torch.ops directly
    (the CUDA library's own check): a RuntimeError; both with the message."""
    args, out = make()
    with pytest.raises(ptkit_ops.OpArgumentError, match=message):
        getattr(ptkit_ops, op)(*args, out=out)
    with pytest.raises(RuntimeError, match=message):
        getattr(torch.ops.ptkit, op).out(*args, out=out)


def test_bad_input_on_cuda_is_an_exception_not_a_crash() -> None:
    with pytest.raises(
        (RuntimeError, ValueError), match=r"ptkit\.rms_norm: expected weight of shape \[8\]"
    ):
        ptkit_ops.rms_norm(_randn(2, 8, dtype=torch.float32), _randn(7, dtype=torch.float32))
    with pytest.raises((RuntimeError, ValueError), match=r"ptkit\.rms_norm: expected weight on"):
        ptkit_ops.rms_norm(_randn(2, 8, dtype=torch.float32), torch.randn(8))


@torch.no_grad()
def test_cuda_graph_capture_of_a_decode_step() -> None:
    hidden, inter = 1024, 2816
    norm = _randn(hidden, dtype=torch.bfloat16)
    up = _randn(2 * inter, hidden, dtype=torch.bfloat16, scale=hidden**-0.5)
    down = _randn(hidden, inter, dtype=torch.bfloat16, scale=inter**-0.5)
    static_x = _randn(4, 1, hidden, dtype=torch.bfloat16)

    def step(x: torch.Tensor) -> torch.Tensor:
        h = ptkit_ops.rms_norm(x, norm, 1e-6)
        h = ptkit_ops.silu_and_mul(ptkit_ops.fused_linear(h, up, None, "none"))
        return x + ptkit_ops.fused_linear(h, down, None, "none")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_x)
    for _ in range(3):
        new_x = _randn(4, 1, hidden, dtype=torch.bfloat16)
        static_x.copy_(new_x)
        graph.replay()
        torch.testing.assert_close(static_out, step(new_x), rtol=0, atol=0)
