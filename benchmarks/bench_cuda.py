"""GPU benchmark: ptkit's CUDA kernels against torch (cuBLAS for the GEMV) and against
the device's copy bandwidth, measured in the same run.

    python benchmarks/bench_cuda.py [--out DIR] [--reps N]

Rows:
- decode GEMV, bf16, x = [B, 1, K], B in {1, 4, 16}, K = N = 8192: ``fused_linear`` vs
  ``F.linear`` (no bias, no activation: the GEMV alone), and with bias + silu vs
  ``F.silu(F.linear(x, w, b))``;
- ``rms_norm``, bf16, tokens in {1, 64, 4096, 16384} x hidden 8192 vs ``F.rms_norm``.

Bytes moved are the minimum: inputs read once + outputs written once. Copy bandwidth is
``dst.copy_(src)`` on 1 GiB, counting bytes read + written. Times are CUDA-event medians
over ``--reps`` launches after warm-up; ratio = torch time / ptkit time (> 1: ptkit faster).
Goals (H200): GEMV >= 1.0x F.linear and >= 85 % of copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

import ptkit
import ptkit_ops


def cuda_time(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def copy_bandwidth(reps: int) -> float:
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = cuda_time(lambda: dst.copy_(src), reps)
    return 2 * src.numel() * 4 / t


def measure(op, shape, ours, theirs, nbytes, reps, bw):  # type: ignore[no-untyped-def]
    """One result row (bf16): both timings, the ratio against torch and the bandwidth."""
    t_ours, t_torch = cuda_time(ours, reps), cuda_time(theirs, reps)
    return dict(
        op=op,
        shape=shape,
        dtype="bf16",
        ptkit_us=t_ours * 1e6,
        torch_us=t_torch * 1e6,
        ratio=t_torch / t_ours,
        gbps=nbytes / t_ours / 1e9,
        pct_copy=100 * nbytes / t_ours / bw,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "bench_cuda.py needs a CUDA device"
    torch.manual_seed(0)
    bw = copy_bandwidth(args.reps)
    rows = []
    bf16 = torch.bfloat16
    k = n = 8192
    w = torch.randn(n, k, device="cuda", dtype=bf16) / k**0.5
    b = torch.randn(n, device="cuda", dtype=bf16)
    for batch in (1, 4, 16):
        x = torch.randn(batch, 1, k, device="cuda", dtype=bf16)
        nbytes = w.numel() * 2 + x.numel() * 2 + batch * n * 2
        cases = {
            "gemv": (lambda x=x: ptkit_ops.fused_linear(x, w), lambda x=x: F.linear(x, w)),
            "gemv+bias+silu": (
                lambda x=x: ptkit_ops.fused_linear(x, w, b, "silu"),
                lambda x=x: F.silu(F.linear(x, w, b)),
            ),
        }
        for name, (ours, theirs) in cases.items():
            torch.testing.assert_close(ours().float(), theirs().float(), rtol=2e-2, atol=2e-2)
            rows.append(
                measure(
                    f"fused_linear {name}", f"[{batch},1,{k}] x [{n},{k}]", ours, theirs, nbytes,
                    args.reps, bw,
                )
            )  # fmt: skip
    hidden = 8192
    weight = torch.randn(hidden, device="cuda", dtype=bf16)
    for tokens in (1, 64, 4096, 16384):
        x = torch.randn(tokens, hidden, device="cuda", dtype=bf16)
        nbytes = 2 * x.numel() * 2 + hidden * 2
        ours = lambda x=x: ptkit_ops.rms_norm(x, weight, 1e-6)  # noqa: E731
        theirs = lambda x=x: F.rms_norm(x, (hidden,), weight, 1e-6)  # noqa: E731
        rows.append(
            measure("rms_norm", f"[{tokens},{hidden}]", ours, theirs, nbytes, args.reps, bw)
        )
    facts = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "ptkit": ptkit.__version__,
        "copy_bandwidth_gbps": bw / 1e9,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=2))
    lines = [
        f"# ptkit CUDA benchmark — {facts['device']}, torch {facts['torch']}, ptkit {facts['ptkit']}",
        f"copy bandwidth (read + write): {bw / 1e9:.0f} GB/s",
        "",
        "| op | shape | dtype | ptkit µs | torch µs | ratio | GB/s | % copy bw |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['ptkit_us']:.1f} | {r['torch_us']:.1f} | "
        f"{r['ratio']:.2f} | {r['gbps']:.0f} | {r['pct_copy']:.0f} |"
        for r in rows
    ]
    (args.out / "cuda.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
