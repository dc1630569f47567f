"""``python -m ptkit_ops.smoke``: does the installed ptkit-ops wheel work? Its release
smoke test (the recipes' ``test-command``).

Run by ``ptkit build`` (stage smoke, in a fresh environment) and by cibuildwheel's
test command, on every platform a wheel is built for. It checks what a user would
hit first:

* the checks every ptkit-built package gets (``ptkit.runtime.smoke``): ``import
  ptkit_ops`` works, no native library's load decision is FAILED (a broken install: a
  missing symbol, a bad manifest, a wrong sha256), the CPU library LOADED and serves the
  CPU ops (otherwise the comparisons below would compare the reference with itself),
  every GPU library is LOADED or SKIPPED with a reason (no GPU here, another torch);
* each op (rms_norm, fused_linear with M=1 and M=33, silu_and_mul) on CPU in float32
  and bfloat16, and rms_norm and silu_and_mul into a preallocated output (``out=``),
  match the reference implementations within error bounds derived from the dtypes'
  unit roundoff (the same bounds as tests/support.py, doubled);
* the native error path: the CPU kernel's own argument check, reached past the Python
  checks, raises RuntimeError naming the op (a C++ exception crossing into torch).

Exit status 0 with a short summary, or 1 with the reasons. Standard library and torch
only; no platform-specific code.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["main", "run_smoke"]


class SmokeFailure(RuntimeError):
    """The installed ptkit-ops does not work; the message says what failed and why."""


def _unit_roundoff(dtype: torch.dtype) -> float:
    import torch

    return {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}[dtype]


def _compare(
    name: str,
    native: torch.Tensor,
    reference: torch.Tensor,
    extra_bound: torch.Tensor | float,
) -> str:
    """Native vs reference: a few ulps of the dtype plus ``extra_bound`` (accumulation order).

    Returns the summary line; raises SmokeFailure when an element is out of bounds.
    """
    if native.shape != reference.shape or native.dtype != reference.dtype:
        raise SmokeFailure(
            f"{name}: native gives {native.dtype} {tuple(native.shape)}, the reference "
            f"{reference.dtype} {tuple(reference.shape)}"
        )
    u = _unit_roundoff(native.dtype)
    a, b = native.double(), reference.double()
    allowed = 2 * (4 * u * b.abs() + 64 * u * 2.0**-10 + extra_bound)
    error = (a - b).abs()
    bad = ~(error <= allowed)
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        raise SmokeFailure(
            f"{name}: {int(bad.sum())} of {a.numel()} elements differ from the reference; "
            f"first at flat index {i}: native {a.flatten()[i].item()!r}, reference "
            f"{b.flatten()[i].item()!r}, allowed ±{allowed.flatten()[i].item():.3g}"
        )
    worst = float((error / allowed).max().item()) if error.numel() else 0.0
    return f"{name:<32} ok  (max error {float(error.max().item()):.2e}, {worst:.0%} of bound)"


def _op_checks() -> list[tuple[str, Callable[[], str]]]:
    """One check per op, shape and dtype, run on CPU."""
    import torch

    import ptkit_ops as ops

    u32 = 2.0**-24
    checks: list[tuple[str, Callable[[], str]]] = []

    def rms_norm(dtype: torch.dtype, into: bool) -> str:
        x = torch.randn(3, 5, 257).to(dtype)
        w = torch.randn(257).to(dtype)
        ref = ops.rms_norm_reference(x, w)
        bound = ref.abs().double() * 8 * u32 * 257**0.5
        native = ops.rms_norm(x, w, out=torch.empty_like(x)) if into else ops.rms_norm(x, w)
        return _compare(f"rms_norm{' out=' * into} {dtype}", native, ref, bound)

    def fused_linear(dtype: torch.dtype, m: int) -> str:
        k, n = 257, 130
        x = torch.randn(m, k).to(dtype)
        weight = (torch.randn(n, k) / 16).to(dtype)
        bias = torch.randn(n).to(dtype)
        ref = ops.fused_linear_reference(x, weight, bias, "silu")
        # fp32 sums in another order, and the reference rounds the GEMM to the dtype.
        mag = x.abs().double() @ weight.abs().double().T + bias.abs().double()
        bound = 16 * u32 * k**0.5 * mag
        if dtype != torch.float32:
            bound = bound + 2 * _unit_roundoff(dtype) * mag
        native = ops.fused_linear(x, weight, bias, "silu")
        return _compare(f"fused_linear M={m} {dtype}", native, ref, bound)

    def silu_and_mul(dtype: torch.dtype, into: bool) -> str:
        g = torch.randn(7, 2 * 130).to(dtype)
        ref = ops.silu_and_mul_reference(g)
        bound = ref.abs().double() * 8 * u32
        native = ops.silu_and_mul(g, out=torch.empty_like(ref)) if into else ops.silu_and_mul(g)
        return _compare(f"silu_and_mul{' out=' * into} {dtype}", native, ref, bound)

    def native_error() -> str:
        # The CPU kernel's own check, past ptkit_ops' Python checks: its C++ exception
        # must come back through torch as an exception, not end the process. (It cannot
        # with a library built by one C++ runtime and a torch built by another, e.g. zig's
        # libc++ against torch's MSVC build: docs/status.md.)
        x = torch.zeros(2, 8, dtype=torch.int64)
        try:
            torch.ops.ptkit.rms_norm(x, torch.ones(8), 1e-6)
        except RuntimeError as exc:
            if "ptkit.rms_norm" not in str(exc):
                raise SmokeFailure(
                    f"native error path: the message does not name the op: {exc}"
                ) from exc
            return f"{'native error path':<32} ok  (RuntimeError: {str(exc).splitlines()[0]})"
        raise SmokeFailure("native error path: rms_norm on an int64 tensor did not raise")

    checks.append(("native error path", native_error))
    for dtype in (torch.float32, torch.bfloat16):
        checks.append((f"rms_norm {dtype}", functools.partial(rms_norm, dtype, False)))
        for m in (1, 33):
            checks.append(
                (f"fused_linear M={m} {dtype}", functools.partial(fused_linear, dtype, m))
            )
        checks.append((f"silu_and_mul {dtype}", functools.partial(silu_and_mul, dtype, False)))
    # Into a preallocated output (out=), once per op.
    checks.append(("rms_norm out=", functools.partial(rms_norm, torch.float32, True)))
    checks.append(("silu_and_mul out=", functools.partial(silu_and_mul, torch.bfloat16, True)))
    return checks


def _check_cpu_native() -> None:
    """ptkit-ops' own promise, beyond what its manifests say: every variant ships the CPU
    library and it serves each op on CPU (else the comparisons below would compare the
    reference with itself). Other packages need no CPU library (ptkit.runtime.smoke)."""
    import ptkit.runtime

    cpu = [d for d in ptkit.runtime.load_decisions("ptkit_ops") if d.backend == "cpu"]
    if not cpu:
        raise SmokeFailure(
            "FAILED: the wheel has no CPU library: every ptkit-ops variant ships one"
        )
    if not any(d.status.value == "loaded" for d in cpu):
        raise SmokeFailure(
            f"FAILED: the CPU library did not load: {cpu[0].library} {cpu[0].reason}"
        )
    slow = sorted(
        r.op
        for r in ptkit.runtime.explain("ptkit_ops")
        if r.device_type == "cpu" and r.implementation != "native"
    )
    if slow:
        raise SmokeFailure(
            f"FAILED: the CPU library loaded but {', '.join(slow)} do not run it on CPU"
        )


def run_smoke(expect_version: str | None = None, echo: Callable[[str], None] = print) -> int:
    """The smoke test; returns the number of op checks that passed, raises SmokeFailure."""
    from ptkit.runtime.smoke import PackageSmokeFailure, run_package_smoke

    try:
        run_package_smoke("ptkit_ops", expect_version, echo)
    except PackageSmokeFailure as exc:
        raise SmokeFailure(str(exc)) from exc
    _check_cpu_native()
    import torch

    torch.manual_seed(0)
    checks = _op_checks()
    for name, check in checks:
        try:
            echo(f"  {check()}")
        except SmokeFailure:
            raise
        except Exception as exc:  # a kernel error is a failed check, not a traceback
            raise SmokeFailure(f"{name}: {type(exc).__name__}: {exc}") from exc
    return len(checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ptkit_ops.smoke", description="Smoke-test the installed ptkit-ops wheel."
    )
    parser.add_argument(
        "--expect-version", help="fail unless this ptkit-ops version is the one imported"
    )
    args = parser.parse_args(argv)
    try:
        count = run_smoke(args.expect_version)
    except SmokeFailure as exc:
        print(f"ptkit-ops smoke test FAILED:\n{exc}", file=sys.stderr)
        return 1
    print(f"ptkit-ops smoke test passed: libraries load as they should, {count} op checks on CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
