"""GPU benchmark: ptkit's CUDA kernels against torch (cuBLAS for the GEMV) and against
the device's copy bandwidth, measured in the same run.

    python benchmarks/bench_cuda.py [--out DIR] [--reps N]

Rows (bf16 unless named):
- decode GEMV, x = [B, 1, K], B in {1, 4, 16}, K = N = 8192: ``fused_linear`` vs
  ``F.linear`` (no bias, no activation: the GEMV alone), and with bias + silu vs
  ``F.silu(F.linear(x, w, b))``; fp32 at B = 1;
- ``rms_norm``, tokens in {1, 64, 4096, 16384} x hidden 8192 vs ``F.rms_norm``, and
  ``out=`` at 4096 tokens;
- ``silu_and_mul``, tokens in {64, 4096} x [gate | up] of 2 x 8192 vs
  ``F.silu(gate) * up``, and ``out=`` at 4096 tokens.

Two times per side:
- device: CALLS calls captured in one CUDA graph, replayed, timed by CUDA events
  (median over ``--reps`` replays, per call). The launch cost is gone, so this is the
  kernels' own time; the calls rotate over copies of the inputs totalling at least four
  times the L2 cache, so that a large input is read from memory, not from the previous call's
  cache lines. ratio and % copy come from this time.
- eager: the same calls launched one after another from Python (per call, over
  ``--reps`` rounds): what a caller without graphs sees, the Python and dispatcher cost
  included where it exceeds the kernel's.

Bytes moved are the minimum: inputs read once + outputs written once. Copy bandwidth is
``dst.copy_(src)`` on 1 GiB launched eagerly, counting bytes read + written. ratio = torch time / ptkit
time (> 1: ptkit faster). Goals (H200): GEMV >= 1.0x F.linear and >= 85 % of copy
bandwidth.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

import ptkit
import ptkit_ops

# Calls per captured graph (and per eager round).
CALLS = 20
Call = Callable[[], object]


def per_call(run_round: Call, calls: int, reps: int) -> float:
    """Seconds per call: the median over ``reps`` CUDA-event-timed rounds of ``calls`` calls."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run_round()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(times)


def run_all(calls: Sequence[Call]) -> None:
    for call in calls:
        call()


def device_time(calls: Sequence[Call], reps: int) -> float:
    """Seconds per call of ``calls`` replayed as one CUDA graph (torch's capture recipe:
    warm-up on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run_all(calls)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_all(calls)
    for _ in range(3):
        graph.replay()
    t = per_call(graph.replay, len(calls), reps)
    del graph
    torch.cuda.empty_cache()
    return t


def eager_time(calls: Sequence[Call], reps: int) -> float:
    """Seconds per call of ``calls`` launched from Python, back to back."""
    run_all(calls)
    torch.cuda.synchronize()
    return per_call(functools.partial(run_all, calls), len(calls), reps)


def copies_beyond_l2(nbytes: int) -> int:
    """How many copies of a call's inputs to rotate over: together at least four times the
    L2 cache (at most CALLS), so that no call finds the last one's data there."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return max(1, min(CALLS, math.ceil(4 * l2 / max(nbytes, 1))))


def copy_bandwidth(reps: int) -> float:
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    # Launched eagerly: a copy_ captured in a graph becomes a memcpy node that the copy
    # engines serve (2.8 TB/s on an H200, against 4.2 TB/s for torch's copy kernel).
    t = eager_time([lambda: dst.copy_(src)] * 4, reps)
    return 2 * src.numel() * 4 / t


def measure(  # type: ignore[no-untyped-def]
    op: str, shape: str, dtype: str, ours, theirs, make_inputs, nbytes: int, reps: int, bw: float
) -> dict[str, object]:
    """One row: ``ours(*inputs)`` against ``theirs(*inputs)``, first for agreement, then
    timed both ways over CALLS calls rotating over copies of ``make_inputs()``."""
    inputs = [make_inputs() for _ in range(copies_beyond_l2(nbytes))]
    torch.testing.assert_close(
        ours(*inputs[0]).float(), theirs(*inputs[0]).float(), rtol=2e-2, atol=2e-2
    )

    def calls(fn) -> list[Call]:  # type: ignore[no-untyped-def]
        return [functools.partial(fn, *inputs[i % len(inputs)]) for i in range(CALLS)]

    t_ours, t_torch = device_time(calls(ours), reps), device_time(calls(theirs), reps)
    e_ours, e_torch = eager_time(calls(ours), reps), eager_time(calls(theirs), reps)
    return dict(
        op=op,
        shape=shape,
        dtype=dtype,
        ptkit_us=t_ours * 1e6,
        torch_us=t_torch * 1e6,
        ratio=t_torch / t_ours,
        gbps=nbytes / t_ours / 1e9,
        pct_copy=100 * nbytes / t_ours / bw,
        eager_ptkit_us=e_ours * 1e6,
        eager_torch_us=e_torch * 1e6,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_cuda.py needs a CUDA device: run it on a GPU machine")
    torch.manual_seed(0)
    reps = args.reps
    bw = copy_bandwidth(reps)
    rows = []
    k = n = 8192
    for dtype, batches in ((torch.bfloat16, (1, 4, 16)), (torch.float32, (1,))):
        name, size = {torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype], dtype.itemsize
        for batch in batches:
            nbytes = (n * k + batch * k + batch * n) * size
            shape = f"[{batch},1,{k}] x [{n},{k}]"

            def gemv_inputs(batch=batch, dtype=dtype):  # type: ignore[no-untyped-def]
                return (
                    torch.randn(batch, 1, k, device="cuda", dtype=dtype),
                    torch.randn(n, k, device="cuda", dtype=dtype) / k**0.5,
                    torch.randn(n, device="cuda", dtype=dtype),
                )

            rows.append(measure(
                "fused_linear gemv", shape, name,
                lambda x, w, b: ptkit_ops.fused_linear(x, w), lambda x, w, b: F.linear(x, w),
                gemv_inputs, nbytes, reps, bw,
            ))  # fmt: skip
            if dtype == torch.bfloat16:
                rows.append(measure(
                    "fused_linear gemv+bias+silu", shape, name,
                    lambda x, w, b: ptkit_ops.fused_linear(x, w, b, "silu"),
                    lambda x, w, b: F.silu(F.linear(x, w, b)),
                    gemv_inputs, nbytes, reps, bw,
                ))  # fmt: skip
    hidden = 8192
    bf16 = torch.bfloat16
    for tokens in (1, 64, 4096, 16384):
        nbytes = 2 * tokens * hidden * 2 + hidden * 2

        def norm_inputs(tokens=tokens):  # type: ignore[no-untyped-def]
            x = torch.randn(tokens, hidden, device="cuda", dtype=bf16)
            return x, torch.randn(hidden, device="cuda", dtype=bf16), torch.empty_like(x)

        shape = f"[{tokens},{hidden}]"
        rows.append(measure(
            "rms_norm", shape, "bf16",
            lambda x, w, out: ptkit_ops.rms_norm(x, w, 1e-6),
            lambda x, w, out: F.rms_norm(x, (hidden,), w, 1e-6),
            norm_inputs, nbytes, reps, bw,
        ))  # fmt: skip
        if tokens == 4096:
            rows.append(measure(
                "rms_norm(out=)", shape, "bf16",
                lambda x, w, out: ptkit_ops.rms_norm(x, w, 1e-6, out=out),
                lambda x, w, out: F.rms_norm(x, (hidden,), w, 1e-6),
                norm_inputs, nbytes, reps, bw,
            ))  # fmt: skip
    for tokens in (64, 4096):
        nbytes = 3 * tokens * hidden * 2

        def gated_inputs(tokens=tokens):  # type: ignore[no-untyped-def]
            x = torch.randn(tokens, 2 * hidden, device="cuda", dtype=bf16)
            return x, torch.empty(tokens, hidden, device="cuda", dtype=bf16)

        def torch_silu_and_mul(x, out):  # type: ignore[no-untyped-def]
            return F.silu(x[..., :hidden]) * x[..., hidden:]

        shape = f"[{tokens},{2 * hidden}]"
        rows.append(measure(
            "silu_and_mul", shape, "bf16", lambda x, out: ptkit_ops.silu_and_mul(x),
            torch_silu_and_mul, gated_inputs, nbytes, reps, bw,
        ))  # fmt: skip
        if tokens == 4096:
            rows.append(measure(
                "silu_and_mul(out=)", shape, "bf16",
                lambda x, out: ptkit_ops.silu_and_mul(x, out=out),
                torch_silu_and_mul, gated_inputs, nbytes, reps, bw,
            ))  # fmt: skip
    facts = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "ptkit": ptkit.__version__,
        "copy_bandwidth_gbps": bw / 1e9,
        "calls_per_graph": CALLS,
        "reps": reps,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=2))
    lines = [
        f"# ptkit CUDA benchmark — {facts['device']}, torch {facts['torch']}, ptkit {facts['ptkit']}",
        f"copy bandwidth (read + write): {bw / 1e9:.0f} GB/s; device times from CUDA graphs of "
        f"{CALLS} calls, eager times launched from Python (medians of {reps})",
        "",
        "| op | shape | dtype | ptkit µs | torch µs | ratio | GB/s | % copy bw "
        "| eager ptkit µs | eager torch µs |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['ptkit_us']:.1f} | {r['torch_us']:.1f} | "
        f"{r['ratio']:.2f} | {r['gbps']:.0f} | {r['pct_copy']:.0f} | {r['eager_ptkit_us']:.1f} | "
        f"{r['eager_torch_us']:.1f} |"
        for r in rows
    ]
    (args.out / "cuda.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
