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
        "op": "rms_norm(out=)", "dtype": "bf16", "shape": "x[64,4096]", "ptkit_ms": ptkit_ms,
        "torch_ms": torch_ms, "ratio": torch_ms / ptkit_ms, "bytes": 1 << 20, "gbs": 20.0,
        "alloc_ms": 0.0, "reps": 5, "check": "ok", "copy_gbs": 25.0, "pct_copy": 80.0,
        "pct_best_copy": 50.0,
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
    # Each row against the copy timed before it and against the level's best copy.
    assert "| 1.00 | 20.0 | 25.0 | 80 % | 50 % | 0.000 | ok |" in text
    assert "40.0 GB/s; right before each case: 25.0 to 25.0 GB/s" in text
    bench.plot(results, tmp_path / "results.png")
    assert (tmp_path / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_x86_level_has_torchs_caps(bench: ModuleType) -> None:
    """Each level ptkit builds on x86-64 has the torch switches of a CPU of that class."""
    from ptkit.platforms.base import isa_levels

    assert {level.name for level in isa_levels("x86_64")} == set(bench.TORCH_CAPS)
