"""ptkit's CPU kernels against their torch eager equivalents, once per CPU ISA level.

Usage::

    python benchmarks/bench_cpu.py [--quick] [--levels all|L1,L2…] [--out benchmarks/results]

Run it where the *installed* ptkit-ops is imported (not ``src/`` from a checkout without
the native library). ``make bench`` does: it installs the cpu wheel into ``.venv`` first.

Levels
    The CPU library holds one copy of its kernels per ISA level (``x86-64-v3``,
    ``x86-64-v4``, ``avx512-bf16``, ``amx-bf16``, ``default``…) and picks the best one the
    CPU runs; ``PTKIT_CPU_ISA`` caps it. The script runs every level the library holds and
    this machine runs, each in a process of its own (the library picks its level once), and
    asks the library which level it ran: a level not built, or one this CPU lacks (the OS
    refusing it included), is reported as skipped with the library's reason.

    torch is capped alike in each level's process (``ATEN_CPU_CAPABILITY``,
    ``ONEDNN_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``: ``TORCH_CAPS``), so that each
    level's ratio is ptkit against torch on a CPU that has that level and no more: what a
    machine of that class gets. MKL does not take its cap on AMD CPUs (seen on a Zen 4);
    there ``results.md`` says so (``MKL_ON_AMD``). The best level's process leaves torch
    uncapped, and every level is also compared with that run's torch times (``vs torch's
    best``): what each level gives up against torch using everything this machine has.

What is measured (per level)
    * ``fused_linear(x, W, b, "silu")`` vs ``F.silu(F.linear(x, W, b))``, fp32 and bf16,
      x = [B, 1, 4096] for B in {1, 4, 16}, W = [4096, 4096] (the decode GEMV path);
    * ``rms_norm(x, w, eps)`` vs ``F.rms_norm(x, (4096,), w, eps)`` and
      ``silu_and_mul(x)`` vs ``F.silu(x[..., :d]) * x[..., d:]`` (d = 4096, x = [T, 2d]),
      fp32 and bf16, T in {1, 64, 4096}; for T >= 64 also with a preallocated output
      (``out=``) on both sides (torch: ``torch.mul(…, out=)`` after ``F.silu``, and
      ``F.rms_norm``'s result copied into ``out``: torch has no out= rms_norm, so its side
      pays one copy more);
    * the machine's copy bandwidth in the same run: ``dst.copy_(src)`` on a 256 MiB fp32
      tensor, (read + write bytes) / time: the median of 9 copies (3 with ``--quick``)
      timed at even intervals among each case's repetitions (``copy GB/s``: the memory's
      rate while that case ran), and the best of 10 at the start and at the end of each
      level's run (the level's header).

Timing
    torch uses all cores (``torch.set_num_threads(os.cpu_count())``) and ptkit's ops
    run on the same intra-op thread pool. Each case is warmed up, then timed in
    repetitions that alternate ptkit and torch (so that drift and background load hit
    both sides alike); a repetition is enough back-to-back calls to last ~1 ms or more,
    and the reported time per call is the median over repetitions. ``ratio`` is
    torch_time / ptkit_time: above 1 means ptkit is faster. The copies among the
    repetitions flush the caches: after each, one untimed call of each side, so that
    neither starts cold where the other does not.

Bytes and bandwidth
    ``bytes`` is the minimum traffic of the op: every input read once plus every output
    written once (for fused_linear: x, W, bias and y). GB/s = bytes / ptkit time
    (1 GB = 1e9 bytes). ``% copy`` relates it to the copies timed among the case's
    repetitions (two medians over the same seconds), and ``% best copy`` to the best copy
    of the level's run. Both are given because a machine's memory rate can change within
    a run (on the 2-core Zen 4 VM of results/results.md the copies took ~30-37 GB/s most
    of the time and ~50-58 GB/s for stretches of seconds): the first compares a case with
    the memory it had, the second with the best this machine showed. Working sets that
    stay in the last-level cache between calls can exceed 100 %: the copy reads and
    writes 512 MiB, more than any cache here.

Allocator
    Every op without ``out=`` (ptkit's and torch's) allocates its output per call.
    glibc serves blocks above its mmap threshold (at most 32 MiB) with fresh mmap()s,
    whose pages the kernel faults in and zeroes on first touch. Unless
    THP_MEM_ALLOC_ENABLE is already set, the script sets it to 1 before importing torch:
    c10's CPU allocator then backs allocations of 2 MiB and more with transparent huge
    pages (512 times fewer faults), for both sides alike. ``--no-thp`` keeps torch's
    default; the header says which was used. ``out alloc ms`` is what allocating a
    tensor of the op's output size costs over reusing one (median time of
    ``torch.empty(...).fill_(0)`` minus that of ``out.fill_(0)``); the ``out=`` rows show
    the rate without it.

Correctness
    Each ptkit result is compared with the torch result (``torch.allclose`` with a
    dtype-appropriate tolerance); mismatches are flagged in the ``check`` column and
    make the script exit with status 1.

Goals
    The speed goals of issue 20, checked per level from the rows (``GOALS``): every row at
    least as fast as torch at its level; the decode GEMV of B <= 4 rows, and rms_norm and
    silu_and_mul at T >= 64 (with ``out=``, and apart from it without), at 70 % or more
    of the copy bandwidth. A bandwidth goal is met where every such row reaches 70 %
    against both copies (those during it and the level's best); otherwise the rows
    under it are named with both percentages.

Outputs, in ``--out``: ``results.json`` (every level's rows, machine facts and goal
misses), ``results.md`` (a summary of the ratios per case and level, the goals per level,
then each level's table) and ``results.png`` (the ratios per case and level, both
comparisons).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

# Before torch is imported (c10 reads it at the first allocation): see "Allocator".
if "--no-thp" not in sys.argv:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

MiB = 1024 * 1024
HIDDEN = 4096
EPS = 1e-6
# torch's own switches for a CPU of each level: its ATen kernels' capability, oneDNN's
# (bf16 matmuls) and MKL's (fp32 matmuls) highest ISA. The best level measured runs torch
# uncapped instead (see "Levels").
_SSE = {
    "ATEN_CPU_CAPABILITY": "default",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
}
TORCH_CAPS: dict[str, dict[str, str]] = {
    "amx-bf16": {},
    "avx512-bf16": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
    "x86-64-v4": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
    "x86-64-v3": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    # oneDNN's floor is SSE4.1 and MKL_ENABLE_INSTRUCTIONS' SSE4.2: no switch holds torch to
    # x86-64's SSE2 (MKL_CBWR: below).
    "x86-64-v2": _SSE,
    "default": _SSE,
}  # fmt: skip
# What MKL ran on AMD's Zen 4 under each cap (perf): docs/status.md. MKL_CBWR=COMPATIBLE
# does hold it to SSE2 there, but that is MKL's reproducibility mode, with code paths of
# its own, not what a CPU of the class runs: the report says what ran instead.
MKL_ON_AMD = (
    "- on AMD CPUs MKL does not take MKL_ENABLE_INSTRUCTIONS: on a Zen 4 it ran the same "
    "kernels for torch's fp32 linear under every cap and under none (an AVX2 + FMA GEMM for 4 "
    "and 16 rows, an SSE GEMV for one row; docs/status.md), so torch's fp32 linear is the "
    "same code at every level here, and at the baseline both sides of the 16-row fp32 case run "
    "that GEMM (ptkit's path for it below AVX)"
)


# --------------------------------------------------------------------------- one level


def _run(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


class PairTiming(NamedTuple):
    ptkit_s: float  # median seconds per call
    torch_s: float
    reps: int
    copy_s: list[float]  # each copy timed among the repetitions


def time_pair(
    ptkit_fn: Callable[[], object],
    torch_fn: Callable[[], object],
    budget_s: float,
    copy_fn: Callable[[], object],
    copies: int,
) -> PairTiming:
    """Median seconds per call of each function, timed in alternating repetitions, with
    ``copies`` runs of ``copy_fn`` (at most one per repetition) timed at even intervals
    among them."""
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
    copy_at = {i * reps // copies for i in range(copies)}
    samples: tuple[list[float], list[float]] = ([], [])
    copy_s = []
    for rep in range(reps):
        if rep in copy_at:
            copy_s.append(_run(copy_fn, 1))
            # The copy flushed the caches: one untimed call each, so both sides start alike.
            ptkit_fn()
            torch_fn()
        for i, fn in enumerate((ptkit_fn, torch_fn)):
            samples[i].append(_run(fn, inner[i]) / inner[i])
    return PairTiming(statistics.median(samples[0]), statistics.median(samples[1]), reps, copy_s)


def _measure_level(args: argparse.Namespace) -> dict[str, Any]:
    """This process's level: every case, timed. Imports torch (capped by the caller)."""
    import torch
    import torch.nn.functional as F

    import ptkit
    import ptkit_ops as ops

    tolerance = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (1.6e-2, 1.6e-2)}
    dtype_name = {torch.float32: "fp32", torch.bfloat16: "bf16"}

    def nbytes(*tensors: torch.Tensor | None) -> int:
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def fused_linear(dtype: torch.dtype, batch: int, out: bool) -> dict[str, Any]:
        g = torch.Generator().manual_seed(batch)
        x = torch.randn(batch, 1, HIDDEN, generator=g).to(dtype)
        w = (torch.randn(HIDDEN, HIDDEN, generator=g) / HIDDEN**0.5).to(dtype)
        b = torch.randn(HIDDEN, generator=g).to(dtype)
        shape = (batch, 1, HIDDEN)
        return {
            "op": "fused_linear(silu)",
            "shape": f"x[{batch},1,{HIDDEN}] W[{HIDDEN},{HIDDEN}]",
            "ptkit": lambda: ops.fused_linear(x, w, b, "silu"),
            "torch": lambda: F.silu(F.linear(x, w, b)),
            "bytes": nbytes(x, w, b) + batch * HIDDEN * x.element_size(),
            "out": (shape, dtype),
        }

    def rms_norm(dtype: torch.dtype, tokens: int, out: bool) -> dict[str, Any]:
        g = torch.Generator().manual_seed(tokens)
        x = torch.randn(tokens, HIDDEN, generator=g).to(dtype)
        w = torch.randn(HIDDEN, generator=g).to(dtype)
        y = torch.empty_like(x)
        case = {
            "op": "rms_norm",
            "shape": f"x[{tokens},{HIDDEN}]",
            "ptkit": lambda: ops.rms_norm(x, w, EPS),
            "torch": lambda: F.rms_norm(x, (HIDDEN,), w, EPS),
            "bytes": 2 * nbytes(x) + nbytes(w),
            "out": (tuple(x.shape), dtype),
        }
        if out:
            case["op"] = "rms_norm(out=)"
            case["ptkit"] = lambda: ops.rms_norm(x, w, EPS, out=y)
            case["torch"] = lambda: y.copy_(F.rms_norm(x, (HIDDEN,), w, EPS))
        return case

    def silu_and_mul(dtype: torch.dtype, tokens: int, out: bool) -> dict[str, Any]:
        g = torch.Generator().manual_seed(tokens + 1)
        x = torch.randn(tokens, 2 * HIDDEN, generator=g).to(dtype)
        d = HIDDEN
        y = torch.empty(tokens, d, dtype=dtype)
        case = {
            "op": "silu_and_mul",
            "shape": f"x[{tokens},{2 * HIDDEN}]",
            "ptkit": lambda: ops.silu_and_mul(x),
            "torch": lambda: F.silu(x[..., :d]) * x[..., d:],
            "bytes": nbytes(x) + nbytes(x) // 2,
            "out": ((tokens, d), dtype),
        }
        if out:
            case["op"] = "silu_and_mul(out=)"
            case["ptkit"] = lambda: ops.silu_and_mul(x, out=y)
            case["torch"] = lambda: torch.mul(F.silu(x[..., :d]), x[..., d:], out=y)
        return case

    plan: list[tuple[Callable[..., dict[str, Any]], torch.dtype, int, bool]] = []
    for dtype in (torch.float32, torch.bfloat16):
        plan += [(fused_linear, dtype, batch, False) for batch in (1, 4, 16)]
    for make in (rms_norm, silu_and_mul):
        for dtype in (torch.float32, torch.bfloat16):
            plan += [(make, dtype, tokens, False) for tokens in (1, 64, 4096)]
            plan += [(make, dtype, tokens, True) for tokens in (64, 4096)]

    def alloc_time(shape: tuple[int, ...], dtype: torch.dtype, budget_s: float) -> float:
        out = torch.empty(shape, dtype=dtype)
        fresh, reuse = (lambda: torch.empty(shape, dtype=dtype).fill_(0)), (lambda: out.fill_(0))
        _run(fresh, 2)
        _run(reuse, 2)
        n = max(3, min(100, int(0.2 * budget_s / max(_run(fresh, 1), 1e-6))))
        t_fresh = statistics.median(_run(fresh, 1) for _ in range(n))
        t_reuse = statistics.median(_run(reuse, 1) for _ in range(n))
        return max(0.0, t_fresh - t_reuse)

    def copy() -> None:
        copy_dst.copy_(copy_src)

    def copy_bps(seconds: float) -> float:
        """A copy's (read + write bytes) / time."""
        return 2 * copy_src.numel() * copy_src.element_size() / seconds

    def copy_bandwidth(copies: int) -> float:
        """The best of ``copies`` copies."""
        return copy_bps(min(_run(copy, 1) for _ in range(copies)))

    def check(ptkit_out: torch.Tensor, torch_out: torch.Tensor, dtype: torch.dtype) -> str:
        if ptkit_out.shape != torch_out.shape or ptkit_out.dtype != torch_out.dtype:
            return f"MISMATCH shape/dtype {tuple(ptkit_out.shape)} {ptkit_out.dtype}"
        rtol, atol = tolerance[dtype]
        if torch.allclose(ptkit_out.float(), torch_out.float(), rtol=rtol, atol=atol):
            return "ok"
        err = (ptkit_out.float() - torch_out.float()).abs().max().item()
        return f"MISMATCH max|diff|={err:.3g}"

    torch.set_num_threads(os.cpu_count() or 1)
    facts = _machine_facts(torch, ptkit)
    if facts["ptkit_cpu_isa"] != os.environ.get("PTKIT_CPU_ISA", facts["ptkit_cpu_isa"]):
        return {"machine": facts}  # another level ran: the caller says why, nothing to time
    budget = 0.4 if args.quick else 3.0  # seconds of timed repetitions per case (both sides)
    started = time.perf_counter()
    copy_src = torch.rand(64 * MiB)  # 256 MiB
    copy_dst = torch.empty_like(copy_src)
    copy_dst.copy_(copy_src)
    copy_start = copy_bandwidth(4 if args.quick else 10)
    rows = []
    with torch.inference_mode():
        for make, dtype, size, out in plan:
            case = make(dtype, size, out)
            # Compared before timing: the out= cases write into the same tensor.
            result = check(case["ptkit"]().clone(), case["torch"]().clone(), dtype)
            timing = time_pair(
                case["ptkit"], case["torch"], budget, copy, copies=3 if args.quick else 9
            )
            t_alloc = 0.0 if out else alloc_time(*case["out"], budget)
            rows.append(
                {
                    "op": case["op"],
                    "dtype": dtype_name[dtype],
                    "shape": case["shape"],
                    "size": size,
                    "out": out,
                    "ptkit_ms": timing.ptkit_s * 1e3,
                    "torch_ms": timing.torch_s * 1e3,
                    "ratio": timing.torch_s / timing.ptkit_s,
                    "bytes": case["bytes"],
                    "gbs": case["bytes"] / timing.ptkit_s / 1e9,
                    "copy_gbs": copy_bps(statistics.median(timing.copy_s)) / 1e9,
                    "alloc_ms": t_alloc * 1e3,
                    "reps": timing.reps,
                    "check": result,
                }
            )
            del case
    copy_end = copy_bandwidth(4 if args.quick else 10)
    best_copy_bps = max(copy_start, copy_end)
    for r in rows:
        r["pct_copy"] = 100 * r["gbs"] / r["copy_gbs"]
        r["pct_best_copy"] = 100 * r["gbs"] / (best_copy_bps / 1e9)
    facts["load_average_at_end"] = _load_average()
    return {
        "machine": facts,
        "copy_bandwidth_gbs": best_copy_bps / 1e9,
        "copy_bandwidth_gbs_start_end": [copy_start / 1e9, copy_end / 1e9],
        "elapsed_s": time.perf_counter() - started,
        "rows": rows,
    }


def _machine_facts(torch: Any, ptkit: Any) -> dict[str, Any]:
    from ptkit.platforms.linux import cpuinfo_fields

    cpu = cpuinfo_fields()
    details: dict[str, str] = {}
    loaded = False
    for decision in ptkit.runtime.load_decisions("ptkit_ops"):
        if decision.backend == "cpu":
            details = dict(decision.details)
            loaded = decision.status.value == "loaded"
    return {
        "cpu": cpu.get("model name") or platform.processor() or platform.machine(),
        "cpu_vendor": cpu.get("vendor_id"),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_caps": {k: os.environ[k] for k in TORCH_CAPS["default"] if k in os.environ},
        "ptkit": getattr(ptkit, "__version__", "unknown"),
        "ptkit_cpu_isa": details.get("isa"),
        "ptkit_cpu_isa_note": details.get("isa note", ""),
        "ptkit_native_loaded": loaded,
        "python": platform.python_version(),
        "thp_mem_alloc": os.environ.get("THP_MEM_ALLOC_ENABLE", "0") not in ("", "0"),
        "load_average_at_start": _load_average(),
    }


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# --------------------------------------------------------------------------- all levels


def _processor_levels() -> list[str]:
    """This processor's levels, best first (ptkit.platforms' table)."""
    from ptkit.platforms.base import isa_levels

    return [level.name for level in isa_levels(platform.machine())]


def _best_level() -> str | None:
    """The level the CPU library runs here uncapped: the one torch is left uncapped for."""
    os.environ.pop("PTKIT_CPU_ISA", None)
    import ptkit.runtime
    import ptkit_ops  # noqa: F401  (its import loads the libraries)

    for decision in ptkit.runtime.load_decisions("ptkit_ops"):
        if decision.backend == "cpu":
            return dict(decision.details).get("isa")
    return None


def _run_level(level: str, uncapped: bool, args: argparse.Namespace) -> dict[str, Any]:
    """One level in a process of its own: its JSON, or {"skipped": why}."""
    env = dict(os.environ, PTKIT_CPU_ISA=level)
    for name in TORCH_CAPS["default"]:
        env.pop(name, None)
    if not uncapped:
        env.update(TORCH_CAPS.get(level, {}))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "level.json"
        cmd = [sys.executable, __file__, "--one-level", str(out)]
        cmd += ["--quick"] * args.quick + ["--no-thp"] * args.no_thp
        proc = subprocess.run(cmd, env=env, check=False)
        if proc.returncode != 0 or not out.is_file():
            return {"skipped": f"its process failed (exit {proc.returncode})", "failed": True}
        data: dict[str, Any] = json.loads(out.read_text())
    ran = data["machine"]["ptkit_cpu_isa"]
    if not data["machine"]["ptkit_native_loaded"]:
        return {"skipped": "ptkit's native CPU library is not loaded here", "failed": True}
    if ran != level:
        note = data["machine"]["ptkit_cpu_isa_note"]
        why = note or f"the library ran {ran}: {level} is not built into it or this CPU lacks it"
        return {"skipped": why}
    data["torch_uncapped"] = uncapped
    return data


# --------------------------------------------------------------------------- goals

BANDWIDTH_GOAL_PCT = 70.0


def _is_gemv(row: dict[str, Any]) -> bool:
    return bool(row["op"].startswith("fused_linear") and row["size"] <= 4)


def _is_large_elementwise(row: dict[str, Any], out: bool) -> bool:
    elementwise = row["op"].startswith(("rms_norm", "silu_and_mul"))
    return bool(elementwise and row["size"] >= 64 and row["out"] == out)


class Goal(NamedTuple):
    name: str
    covers: Callable[[dict[str, Any]], bool]  # the rows it applies to
    bandwidth: bool  # rows at BANDWIDTH_GOAL_PCT % of copy or more; else ratio >= 1


_PCT = f"{BANDWIDTH_GOAL_PCT:.0f} % of copy"
GOALS = [
    Goal("every row >= 1.0x torch at its level", lambda r: True, bandwidth=False),
    Goal(f"decode GEMV (B <= 4) >= {_PCT}", _is_gemv, bandwidth=True),
    Goal(
        f"rms_norm, silu_and_mul at T >= 64 with out= >= {_PCT}",
        lambda r: _is_large_elementwise(r, out=True),
        bandwidth=True,
    ),
    Goal(
        "the same without out= (a fresh output per call, its page faults included)",
        lambda r: _is_large_elementwise(r, out=False),
        bandwidth=True,
    ),
]


def goal_misses(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per goal, the rows of one level that miss it (empty: met), each with its numbers."""
    misses: dict[str, list[str]] = {}
    for goal in GOALS:
        misses[goal.name] = []
        for r in filter(goal.covers, rows):
            if goal.bandwidth and min(r["pct_copy"], r["pct_best_copy"]) < BANDWIDTH_GOAL_PCT:
                misses[goal.name].append(
                    f"{_case(r)}: {r['pct_copy']:.1f} / {r['pct_best_copy']:.1f} %"
                )
            elif not goal.bandwidth and r["ratio"] < 1.0:
                misses[goal.name].append(f"{_case(r)}: {r['ratio']:.3f}x")
    return misses


def goal_misses_by_level(results: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """goal_misses of every level that was measured."""
    return {
        name: goal_misses(data["rows"])
        for name, data in results["levels"].items()
        if "rows" in data
    }


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def _case(row: dict[str, Any]) -> str:
    return f"{row['op']} {row['dtype']} {row['shape']}"


def to_markdown(results: dict[str, Any]) -> str:
    levels = results["levels"]
    measured = [name for name, data in levels.items() if "rows" in data]
    best = results.get("best_level")
    best_torch = {_case(r): r["torch_ms"] for r in levels[best]["rows"]} if best in measured else {}
    lines = ["# ptkit CPU kernels vs torch eager, per CPU ISA level", ""]
    if measured:
        facts = levels[measured[0]]["machine"]
        lines += [
            f"- CPU: {facts['cpu']}, {facts['cores']} cores (torch threads: {facts['torch_threads']})",
            f"- torch {facts['torch']}, ptkit {facts['ptkit']}, Python {facts['python']}",
            f"- outputs allocated with transparent huge pages (THP_MEM_ALLOC_ENABLE): "
            f"{'yes' if facts['thp_mem_alloc'] else 'no'}",
        ]
    lines += [
        f"- mode: {'quick' if results['quick'] else 'full'}; times are medians per call; "
        "ratio = torch time / ptkit time (> 1: ptkit faster)",
        "- each level in its own process, ptkit capped with PTKIT_CPU_ISA and torch capped "
        f"alike (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS); {best} "
        "(the best level here) runs torch uncapped, and `vs best torch` compares each level "
        "with that run's torch",
    ]
    if measured and levels[measured[0]]["machine"].get("cpu_vendor") == "AuthenticAMD":
        lines.append(MKL_ON_AMD)
    lines.append("")
    for name, data in levels.items():
        if "rows" not in data:
            lines.append(f"- {name}: skipped: {data['skipped']}")
    lines += ["", "## Ratio per case and level (torch at the same level / torch at its best)", ""]
    lines.append("| case | " + " | ".join(measured) + " |")
    lines.append("|---|" + "---:|" * len(measured))
    cases = [_case(r) for r in levels[measured[0]]["rows"]] if measured else []
    for case in cases:
        cells = []
        for name in measured:
            row = next(r for r in levels[name]["rows"] if _case(r) == case)
            vs_best = best_torch.get(case, float("nan")) / row["ptkit_ms"]
            cells.append(f"{row['ratio']:.2f} / {vs_best:.2f}")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Goals per level",
        "",
        "Bandwidth rows as % of the copies during the case / % of the level's best copy; "
        f"a goal is met where every row it covers reaches {BANDWIDTH_GOAL_PCT:.0f} % against both.",
        "",
        "| goal | " + " | ".join(measured) + " |",
        "|---|" + "---|" * len(measured),
    ]
    misses = goal_misses_by_level(results)
    for goal in GOALS:
        cells = [
            "missed: " + "; ".join(misses[n][goal.name]) if misses[n][goal.name] else "met"
            for n in measured
        ]
        lines.append(f"| {goal.name} | " + " | ".join(cells) + " |")
    for name in measured:
        data = levels[name]
        facts = data["machine"]
        caps = ", ".join(f"{k}={v}" for k, v in facts["torch_caps"].items()) or "none"
        lines += [
            "",
            f"## {name}",
            "",
            f"- ptkit CPU ISA in use: {facts['ptkit_cpu_isa']}; torch CPU capability "
            f"{facts['torch_cpu_capability']} (caps: {caps})",
            f"- copy bandwidth (dst.copy_(src), 256 MiB fp32, read + write, best at start / end): "
            f"{data['copy_bandwidth_gbs']:.1f} GB/s; during each case (median of its copies): "
            f"{min(r['copy_gbs'] for r in data['rows']):.1f} to "
            f"{max(r['copy_gbs'] for r in data['rows']):.1f} GB/s",
            f"- 1-min load average at start / end: {_fmt(facts['load_average_at_start'])} / "
            f"{_fmt(facts['load_average_at_end'])}; run took {data['elapsed_s']:.0f} s",
            "",
            "| op | dtype | shape | ptkit ms | torch ms | ratio | vs best torch | MiB | GB/s "
            "| copy GB/s | % copy | % best copy | out alloc ms | check |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in data["rows"]:
            vs_best = best_torch.get(_case(r), float("nan")) / r["ptkit_ms"]
            lines.append(
                f"| {r['op']} | {r['dtype']} | {r['shape']} | {r['ptkit_ms']:.4f} "
                f"| {r['torch_ms']:.4f} | {r['ratio']:.2f} | {vs_best:.2f} | {r['bytes'] / MiB:.2f} "
                f"| {r['gbs']:.1f} | {r['copy_gbs']:.1f} | {r['pct_copy']:.0f} % "
                f"| {r['pct_best_copy']:.0f} % | {r['alloc_ms']:.3f} | {r['check']} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    """Ratio per case, one bar per level; against torch at the same level and at its best."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = {name: data for name, data in results["levels"].items() if "rows" in data}
    if not levels:
        return
    best = results.get("best_level")
    best_torch = {_case(r): r["torch_ms"] for r in levels[best]["rows"]} if best in levels else {}
    cases = [_case(r) for r in next(iter(levels.values()))["rows"]]
    fig, axes = plt.subplots(2, 1, figsize=(max(12, 0.6 * len(cases)), 10), sharex=True)
    width = 0.8 / len(levels)
    for i, (name, data) in enumerate(levels.items()):
        rows = {_case(r): r for r in data["rows"]}
        xs = [j + i * width for j in range(len(cases))]
        axes[0].bar(xs, [rows[c]["ratio"] for c in cases], width, label=name)
        axes[1].bar(
            xs, [best_torch.get(c, float("nan")) / rows[c]["ptkit_ms"] for c in cases], width
        )
    for ax, title in zip(
        axes,
        ("torch capped at the same level", f"torch at its best ({best}'s run)"),
        strict=True,
    ):
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("torch time / ptkit time")
        ax.set_title(f"ptkit vs {title}")
    axes[0].legend(title="PTKIT_CPU_ISA", ncol=len(levels))
    axes[1].set_xticks([j + 0.4 - width / 2 for j in range(len(cases))])
    axes[1].set_xticklabels(cases, rotation=75, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (~20 s a level)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--levels", default="all", help="comma list of PTKIT_CPU_ISA levels, or all (default)"
    )
    parser.add_argument(
        "--no-thp", action="store_true", help="keep torch's default allocator (see Allocator)"
    )
    parser.add_argument("--one-level", type=Path, help=argparse.SUPPRESS)  # a level's process
    args = parser.parse_args(argv)

    if args.one_level is not None:
        args.one_level.write_text(json.dumps(_measure_level(args), indent=2))
        return 0

    known = _processor_levels()
    wanted = known if args.levels == "all" else args.levels.split(",")
    unknown = [level for level in wanted if level not in known]
    if unknown:
        parser.error(f"--levels: {', '.join(unknown)} not a level of {platform.machine()}: {known}")
    best = _best_level()
    results: dict[str, Any] = {"quick": args.quick, "levels": {}, "best_level": best}
    for level in wanted:
        uncapped = level == best
        print(f"== {level} (torch {'uncapped' if uncapped else 'capped alike'})", flush=True)
        data = _run_level(level, uncapped, args)
        if "skipped" in data:
            print(f"   skipped: {data['skipped']}", flush=True)
        results["levels"][level] = data
    results["goal_misses"] = goal_misses_by_level(results)
    args.out.mkdir(parents=True, exist_ok=True)
    md = to_markdown(results)
    (args.out / "results.md").write_text(md)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "results.png")
    print(md)
    measured = [d for d in results["levels"].values() if "rows" in d]
    failed = [d for d in results["levels"].values() if d.get("failed")]
    mismatches = [r for d in measured for r in d["rows"] if r["check"] != "ok"]
    return 1 if mismatches or failed or not measured else 0


if __name__ == "__main__":
    sys.exit(main())
