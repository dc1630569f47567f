"""ptkit's CPU kernels against their torch eager equivalents, in one process and one run.

Usage::

    python benchmarks/bench_cpu.py [--quick] [--out benchmarks/results]

Run it where the *installed* ptkit is imported (not ``src/`` from a checkout without
the native library): ``ptkit.runtime.load_decisions()`` must report the CPU library
as loaded, otherwise ptkit's ops would be the pure-torch references.

What is measured
    * ``fused_linear(x, W, b, "silu")`` vs ``F.silu(F.linear(x, W, b))``, fp32 and bf16,
      x = [B, 1, 4096] for B in {1, 4, 16}, W = [4096, 4096] (the decode GEMV path);
    * ``rms_norm(x, w, eps)`` vs ``F.rms_norm(x, (4096,), w, eps)`` and
      ``silu_and_mul(x)`` vs ``F.silu(x[..., :d]) * x[..., d:]`` (d = 4096, x = [T, 2d]),
      fp32 and bf16, T in {1, 64, 4096};
    * the machine's copy bandwidth in the same run: ``dst.copy_(src)`` on a 256 MiB
      fp32 tensor, (read + write bytes) / time, best of several copies at the start and
      at the end of the run (on a shared machine, one batch can fall in a busy spell).

Timing
    torch uses all cores (``torch.set_num_threads(os.cpu_count())``) and ptkit's ops
    run on the same intra-op thread pool. Each case is warmed up, then timed in
    repetitions that alternate ptkit and torch (so that drift and background load hit
    both sides alike); a repetition is enough back-to-back calls to last ~1 ms or more,
    and the reported time per call is the median over repetitions. ``ratio`` is
    torch_time / ptkit_time: above 1 means ptkit is faster.

Bytes and bandwidth
    ``bytes`` is the minimum traffic of the op: every input read once plus every output
    written once (for fused_linear: x, W, bias and y). GB/s = bytes / ptkit time
    (1 GB = 1e9 bytes) and ``% copy`` relates it to the copy bandwidth measured above.
    A row is marked bandwidth-bound (``bw-bound``) when its bytes are >= 16 MiB: half
    the 32 MiB L3 of the machine this was written on, so the working set cannot stay in
    cache from one call to the next and the op streams from DRAM. For such rows the
    target is >= 70 % of copy bandwidth. Two caveats make ``% copy`` a lower bound of
    the kernel's own efficiency: (1) copy_ writes into a preallocated tensor, while the
    ops allocate their output per call (fresh pages for large outputs: page faults and
    zeroing by the kernel, which torch eager pays too); (2) a read-mostly op (GEMV) can
    exceed 100 %, because copy's bytes include writes, which cost more than reads, and
    part of a 32 MiB weight can survive in L3 between calls.

Allocator
    Every op (ptkit's and torch's) allocates its output per call. glibc serves blocks
    above its mmap threshold (dynamic, at most 32 MiB) with fresh mmap()s, so a 64 MiB
    output costs ~16 k page faults and the kernel zeroing every page: on the (virtual)
    machine this was written on, several times the op itself (x * 2 on 64 MiB fp32:
    30 to 60 ms with a fresh output, 4 to 8 ms into a preallocated one; with THP
    about 8 ms). Unless THP_MEM_ALLOC_ENABLE is already set, the script sets
    it to 1 before importing torch: c10's CPU allocator then backs allocations of
    2 MiB and more with transparent huge pages (512 times fewer faults), for both
    sides alike. ``--no-thp`` keeps torch's default; the header says which was used.
    The last two columns separate that cost: ``out alloc ms`` is what allocating a
    tensor of the op's output size costs over reusing one (median time of
    ``torch.empty(...).fill_(0)`` minus that of ``out.fill_(0)``: page faults and the
    kernel zeroing the pages), and ``% copy excl. alloc`` is the bandwidth of ptkit's
    time minus that (n/a when the difference is within noise of the op's time).

Correctness
    Each ptkit result is compared with the torch result (``torch.allclose`` with a
    dtype-appropriate tolerance); mismatches are flagged in the ``check`` column and
    make the script exit with status 1.

Outputs ``results.json`` and ``results.md`` (a markdown table with a header of machine
facts: CPU model, cores, torch version, ptkit version and the ptkit CPU ISA in use) in
the ``--out`` folder, and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Before torch is imported (c10 reads it at the first allocation): see "Allocator".
if "--no-thp" not in sys.argv:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch
import torch.nn.functional as F

import ptkit
import ptkit_ops as ops

MiB = 1024 * 1024
BW_BOUND_BYTES = 16 * MiB
HIDDEN = 4096
EPS = 1e-6
TOLERANCE = {  # (rtol, atol) for ptkit vs torch eager
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}
DTYPE_NAME = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


# --------------------------------------------------------------------------- timing


def _run(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


def time_pair(
    ptkit_fn: Callable[[], object], torch_fn: Callable[[], object], budget_s: float
) -> tuple[float, float, int]:
    """Median seconds per call of each function, timed in alternating repetitions."""
    # Warm-up: at least two calls each and ~10 % of the budget.
    per_call = []
    for fn in (ptkit_fn, torch_fn):
        _run(fn, 2)
        n, t = 1, _run(fn, 1)
        while t < 0.05 * budget_s and n < 1000:
            n *= 2
            t = _run(fn, n)
        per_call.append(t / n)
    slowest = max(per_call)
    # Each repetition lasts >= ~1 ms; as many repetitions as fit in the budget (5..200).
    inner = [max(1, round(1e-3 / t)) for t in per_call]
    reps = int(min(200, max(5, budget_s / (2 * max(slowest, 1e-3)))))
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(reps):
        for i, fn in enumerate((ptkit_fn, torch_fn)):
            samples[i].append(_run(fn, inner[i]) / inner[i])
    return statistics.median(samples[0]), statistics.median(samples[1]), reps


def alloc_time(shape: tuple[int, ...], dtype: torch.dtype, budget_s: float) -> float:
    """Seconds that allocating an output costs over writing into an existing one.

    Median of ``torch.empty(shape).fill_(0)`` minus median of ``out.fill_(0)`` (both on
    all threads, like the ops): the page faults and the kernel zeroing fresh pages.
    """
    out = torch.empty(shape, dtype=dtype)
    fresh, reuse = (lambda: torch.empty(shape, dtype=dtype).fill_(0)), (lambda: out.fill_(0))
    _run(fresh, 2)
    _run(reuse, 2)
    n = max(3, min(100, int(0.2 * budget_s / max(_run(fresh, 1), 1e-6))))
    t_fresh = statistics.median(_run(fresh, 1) for _ in range(n))
    t_reuse = statistics.median(_run(reuse, 1) for _ in range(n))
    return max(0.0, t_fresh - t_reuse)


def copy_bandwidth(quick: bool) -> float:
    """Bytes / s of dst.copy_(src) on 256 MiB of fp32 (read + write), best of several."""
    src = torch.rand(64 * MiB)  # 256 MiB
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(_run(lambda: dst.copy_(src), 1) for _ in range(4 if quick else 10))
    return 2 * src.numel() * src.element_size() / best


# --------------------------------------------------------------------------- cases


def _nbytes(*tensors: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def case_fused_linear(dtype: torch.dtype, batch: int) -> dict:
    g = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, 1, HIDDEN, generator=g).to(dtype)
    w = (torch.randn(HIDDEN, HIDDEN, generator=g) / HIDDEN**0.5).to(dtype)
    b = torch.randn(HIDDEN, generator=g).to(dtype)
    y = ops.fused_linear(x, w, b, "silu")
    return {
        "op": "fused_linear(silu)",
        "shape": f"x[{batch},1,{HIDDEN}] W[{HIDDEN},{HIDDEN}]",
        "ptkit": lambda: ops.fused_linear(x, w, b, "silu"),
        "torch": lambda: F.silu(F.linear(x, w, b)),
        "bytes": _nbytes(x, w, b, y),
        "out": (tuple(y.shape), dtype),
    }


def case_rms_norm(dtype: torch.dtype, tokens: int) -> dict:
    g = torch.Generator().manual_seed(tokens)
    x = torch.randn(tokens, HIDDEN, generator=g).to(dtype)
    w = torch.randn(HIDDEN, generator=g).to(dtype)
    return {
        "op": "rms_norm",
        "shape": f"x[{tokens},{HIDDEN}]",
        "ptkit": lambda: ops.rms_norm(x, w, EPS),
        "torch": lambda: F.rms_norm(x, (HIDDEN,), w, EPS),
        "bytes": 2 * _nbytes(x) + _nbytes(w),
        "out": (tuple(x.shape), dtype),
    }


def case_silu_and_mul(dtype: torch.dtype, tokens: int) -> dict:
    g = torch.Generator().manual_seed(tokens + 1)
    x = torch.randn(tokens, 2 * HIDDEN, generator=g).to(dtype)
    d = HIDDEN
    return {
        "op": "silu_and_mul",
        "shape": f"x[{tokens},{2 * HIDDEN}]",
        "ptkit": lambda: ops.silu_and_mul(x),
        "torch": lambda: F.silu(x[..., :d]) * x[..., d:],
        "bytes": _nbytes(x) + _nbytes(x) // 2,
        "out": ((tokens, d), dtype),
    }


def cases() -> list[tuple[Callable[..., dict], torch.dtype, int]]:
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        out += [(case_fused_linear, dtype, batch) for batch in (1, 4, 16)]
    for fn in (case_rms_norm, case_silu_and_mul):
        for dtype in (torch.float32, torch.bfloat16):
            out += [(fn, dtype, tokens) for tokens in (1, 64, 4096)]
    return out


def check(ptkit_out: torch.Tensor, torch_out: torch.Tensor, dtype: torch.dtype) -> str:
    if ptkit_out.shape != torch_out.shape or ptkit_out.dtype != torch_out.dtype:
        return f"MISMATCH shape/dtype {tuple(ptkit_out.shape)} {ptkit_out.dtype}"
    rtol, atol = TOLERANCE[dtype]
    if torch.allclose(ptkit_out.float(), torch_out.float(), rtol=rtol, atol=atol):
        return "ok"
    err = (ptkit_out.float() - torch_out.float()).abs().max().item()
    return f"MISMATCH max|diff|={err:.3g}"


# --------------------------------------------------------------------------- report


def machine_facts() -> dict:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    isa = None
    loaded = False
    for decision in ptkit.runtime.load_decisions("ptkit_ops"):
        details = dict(decision.details)
        if "isa" in details:
            isa = details["isa"]
        loaded = loaded or decision.status.value == "loaded"
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "ptkit": getattr(ptkit, "__version__", "unknown"),
        "ptkit_cpu_isa": isa,
        "ptkit_native_loaded": loaded,
        "python": platform.python_version(),
        "thp_mem_alloc": os.environ.get("THP_MEM_ALLOC_ENABLE", "0") not in ("", "0"),
        "load_average_at_start": _load_average(),
    }


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def to_markdown(facts: dict, copy_gbs: float, rows: list[dict], quick: bool) -> str:
    lines = [
        "# ptkit CPU kernels vs torch eager",
        "",
        f"- CPU: {facts['cpu']}, {facts['cores']} cores (torch threads: {facts['torch_threads']})",
        f"- torch {facts['torch']} (CPU capability {facts['torch_cpu_capability']}), "
        f"ptkit {facts['ptkit']}, ptkit CPU ISA: {facts['ptkit_cpu_isa']}",
        f"- copy bandwidth (dst.copy_(src), 256 MiB fp32, read + write, best at start / end of "
        f"the run): {copy_gbs:.1f} GB/s",
        f"- outputs allocated with transparent huge pages (THP_MEM_ALLOC_ENABLE): "
        f"{'yes' if facts['thp_mem_alloc'] else 'no'}",
        f"- 1-min load average at start / end: {_fmt(facts['load_average_at_start'])} / "
        f"{_fmt(facts.get('load_average_at_end'))} (other processes on these cores slow "
        "both sides)",
        f"- mode: {'quick' if quick else 'full'}; times are medians per call; ratio = torch / ptkit "
        f"(> 1: ptkit faster); bw-bound = bytes >= {BW_BOUND_BYTES // MiB} MiB",
        "",
        "| op | dtype | shape | ptkit ms | torch ms | ratio | bytes (MiB) | GB/s | % copy | bw-bound "
        "| check | out alloc ms | % copy excl. alloc |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for r in rows:
        excl = r["pct_copy_excl_alloc"]
        lines.append(
            f"| {r['op']} | {r['dtype']} | {r['shape']} | {r['ptkit_ms']:.4f} | {r['torch_ms']:.4f} "
            f"| {r['ratio']:.2f} | {r['bytes'] / MiB:.2f} | {r['gbs']:.1f} | {r['pct_copy']:.0f} % "
            f"| {'yes' if r['bw_bound'] else 'no'} | {r['check']} | {r['alloc_ms']:.3f} "
            f"| {'n/a' if excl is None else f'{excl:.0f} %'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run (< ~40 s)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--no-thp",
        action="store_true",
        help="keep torch's default allocator (see the module docstring)",
    )
    args = parser.parse_args(argv)

    torch.set_num_threads(os.cpu_count() or 1)
    facts = machine_facts()
    if not facts["ptkit_native_loaded"]:
        print(
            "warning: ptkit's native CPU library is not loaded; ptkit ops are the references",
            file=sys.stderr,
        )
    budget = 0.4 if args.quick else 3.0  # seconds of timed repetitions per case (both sides)

    started = time.perf_counter()
    copy_start = copy_bandwidth(args.quick)
    rows = []
    with torch.inference_mode():
        for make, dtype, size in cases():
            case = make(dtype, size)
            result = check(case["ptkit"](), case["torch"](), dtype)
            t_ptkit, t_torch, reps = time_pair(case["ptkit"], case["torch"], budget)
            t_alloc = alloc_time(*case["out"], budget)
            rows.append(
                {
                    "op": case["op"],
                    "dtype": DTYPE_NAME[dtype],
                    "shape": case["shape"],
                    "ptkit_ms": t_ptkit * 1e3,
                    "torch_ms": t_torch * 1e3,
                    "ratio": t_torch / t_ptkit,
                    "bytes": case["bytes"],
                    "gbs": case["bytes"] / t_ptkit / 1e9,
                    "bw_bound": case["bytes"] >= BW_BOUND_BYTES,
                    "alloc_ms": t_alloc * 1e3,
                    "reps": reps,
                    "check": result,
                }
            )
            del case
    copy_end = copy_bandwidth(args.quick)
    copy_bps = max(copy_start, copy_end)
    for r in rows:
        r["pct_copy"] = 100 * r["gbs"] / (copy_bps / 1e9)
        kernel_s = (r["ptkit_ms"] - r["alloc_ms"]) / 1e3
        r["pct_copy_excl_alloc"] = (
            100 * r["bytes"] / kernel_s / copy_bps
            if kernel_s > 0.05 * r["ptkit_ms"] / 1e3
            else None
        )
    elapsed = time.perf_counter() - started
    facts["load_average_at_end"] = _load_average()

    md = to_markdown(facts, copy_bps / 1e9, rows, args.quick)
    md += f"\n(run took {elapsed:.0f} s)\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(md)
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "machine": facts,
                "copy_bandwidth_gbs": copy_bps / 1e9,
                "copy_bandwidth_gbs_start_end": [copy_start / 1e9, copy_end / 1e9],
                "bw_bound_threshold_bytes": BW_BOUND_BYTES,
                "quick": args.quick,
                "elapsed_s": elapsed,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(md)
    mismatches = [r for r in rows if r["check"] != "ok"]
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
