"""benchmarks/bench_cpu.py's report: the summary of ratios per case and level, each
level's table and the plot, from a results document shaped as the script writes it
(no timing here: the numbers are the test's own)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_cpu.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cpu", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_cpu"] = module
    spec.loader.exec_module(module)
    return module


def _level(isa: str, ptkit_ms: float, torch_ms: float, caps: dict[str, str]) -> dict[str, Any]:
    row = {
        "op": "rms_norm(out=)", "dtype": "bf16", "shape": "x[64,4096]", "size": 64, "out": True,
        "ptkit_ms": ptkit_ms, "torch_ms": torch_ms, "ratio": torch_ms / ptkit_ms,
        "bytes": 1 << 20, "gbs": 20.0, "alloc_ms": 0.0, "reps": 5, "check": "ok",
        "copy_gbs": 25.0, "pct_copy": 80.0, "pct_best_copy": 50.0,
    }  # fmt: skip
    machine = {
        "cpu": "Test CPU", "cores": 2, "torch_threads": 2, "torch": "2.14.1", "ptkit": "0.1.0",
        "python": "3.11.7", "thp_mem_alloc": True, "torch_cpu_capability": "AVX2",
        "torch_caps": caps, "ptkit_cpu_isa": isa, "load_average_at_start": 0.5,
        "load_average_at_end": 0.6,
    }  # fmt: skip
    return {"machine": machine, "copy_bandwidth_gbs": 40.0, "elapsed_s": 20.0, "rows": [row]}


def test_the_report_has_both_comparisons_per_level_and_names_skipped_levels(
    bench: ModuleType, tmp_path: Path
) -> None:
    results = {
        "quick": True,
        "best_level": "amx-bf16",
        "levels": {
            "amx-bf16": _level("amx-bf16", 0.5, 1.0, {}),
            "x86-64-v3": _level("x86-64-v3", 2.0, 3.0, bench.TORCH_CAPS["x86-64-v3"]),
            "x86-64-v2": {"skipped": "the library ran x86-64-v3: x86-64-v2 is not built"},
        },
    }
    text = bench.to_markdown(results)
    # torch at the same level / torch at its best (the amx-bf16 run's 1.0 ms).
    assert "| rms_norm(out=) bf16 x[64,4096] | 2.00 / 2.00 | 1.50 / 0.50 |" in text
    assert "- x86-64-v2: skipped: the library ran x86-64-v3: x86-64-v2 is not built" in text
    assert "caps: ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2" in text
    # Each row against the copies timed during it and against the level's best copy.
    assert "| 1.00 | 20.0 | 25.0 | 80 % | 50 % | 0.000 | ok |" in text
    assert "40.0 GB/s; during each case (median of its copies): 25.0 to 25.0 GB/s" in text
    # The goals per level: the row is an out= rms_norm at T = 64, at 80 % of its copy and
    # 50 % of the best one.
    assert "| goal | amx-bf16 | x86-64-v3 |" in text
    assert (
        "| rms_norm, silu_and_mul at T >= 64 with out= >= 70 % of copy "
        "| missed: rms_norm(out=) bf16 x[64,4096]: 80.0 / 50.0 % "
        "| missed: rms_norm(out=) bf16 x[64,4096]: 80.0 / 50.0 % |"
    ) in text
    assert "| every row >= 1.0x torch at its level | met | met |" in text
    bench.plot(results, tmp_path / "results.png")
    assert (tmp_path / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("vendor", ["AuthenticAMD", "GenuineIntel", None])
def test_the_report_says_where_mkl_does_not_take_its_cap(
    bench: ModuleType, vendor: str | None
) -> None:
    level = _level("x86-64-v3", 2.0, 3.0, bench.TORCH_CAPS["x86-64-v3"])
    level["machine"]["cpu_vendor"] = vendor
    text = bench.to_markdown(
        {"quick": True, "best_level": "x86-64-v3", "levels": {"x86-64-v3": level}}
    )
    assert (bench.MKL_ON_AMD in text) == (vendor == "AuthenticAMD")


def test_every_x86_level_has_torchs_caps(bench: ModuleType) -> None:
    """Each level ptkit builds on x86-64 has the torch switches of a CPU of that class."""
    from ptkit.platforms.base import isa_levels

    assert {level.name for level in isa_levels("x86_64")} == set(bench.TORCH_CAPS)


def _row(op: str, size: int, out: bool, ratio: float, pct: tuple[float, float]) -> dict[str, Any]:
    return {
        "op": op, "dtype": "fp32", "shape": f"x[{size}]", "size": size, "out": out,
        "ratio": ratio, "pct_copy": pct[0], "pct_best_copy": pct[1],
    }  # fmt: skip


def test_each_goal_names_the_rows_that_miss_it_with_both_percentages(bench: ModuleType) -> None:
    rows = [
        _row("fused_linear(silu)", 1, False, 1.6, (98.0, 95.0)),
        _row("fused_linear(silu)", 4, False, 3.7, (61.0, 96.0)),  # under 70 % of its own copy
        _row("fused_linear(silu)", 16, False, 0.994, (24.0, 14.0)),  # not a GEMV goal row
        _row("rms_norm(out=)", 4096, True, 8.8, (88.0, 69.5)),  # under 70 % of the best copy
        _row("silu_and_mul(out=)", 64, True, 1.7, (195.0, 193.0)),
        _row("silu_and_mul", 1, False, 1.2, (24.0, 22.0)),  # T < 64: no bandwidth goal
        _row("silu_and_mul", 4096, False, 2.0, (60.0, 56.0)),
    ]
    misses = bench.goal_misses(rows)
    assert misses == {
        "every row >= 1.0x torch at its level": ["fused_linear(silu) fp32 x[16]: 0.994x"],
        "decode GEMV (B <= 4) >= 70 % of copy": ["fused_linear(silu) fp32 x[4]: 61.0 / 96.0 %"],
        "rms_norm, silu_and_mul at T >= 64 with out= >= 70 % of copy": [
            "rms_norm(out=) fp32 x[4096]: 88.0 / 69.5 %"
        ],
        "the same without out= (a fresh output per call, its page faults included)": [
            "silu_and_mul fp32 x[4096]: 60.0 / 56.0 %"
        ],
    }
    # Every goal met: nothing named.
    met = [r | {"ratio": 1.5, "pct_copy": 90.0, "pct_best_copy": 80.0} for r in rows]
    assert all(not names for names in bench.goal_misses(met).values())


def test_the_copies_are_timed_among_the_repetitions_each_followed_by_both_sides(
    bench: ModuleType,
) -> None:
    events: list[str] = []
    timing = bench.time_pair(
        lambda: events.append("p"),
        lambda: events.append("t"),
        budget_s=0.02,
        copy_fn=lambda: events.append("c"),
        copies=3,
    )
    assert timing.reps >= 5 and len(timing.copy_s) == 3 and events.count("c") == 3
    copies_at = [i for i, e in enumerate(events) if e == "c"]
    # After each copy (which flushed the caches), one call of each side before the timing
    # goes on; and the copies are spread over the repetitions, not run back to back.
    assert all(events[i + 1 : i + 3] == ["p", "t"] for i in copies_at)
    first = copies_at[0]  # the first repetition's (the warm-up calls come before it)
    assert copies_at[-1] - first > (len(events) - first) / 2
    assert timing.ptkit_s > 0 and timing.torch_s > 0
