"""benchmarks/bench_cpu.py run for real: ``--quick`` at the baseline level, the installed
ptkit-ops against torch, copies timed among each case's repetitions, and the goals the
report checks (the numbers are this machine's; only their shape and sense are tested)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import REPO


def test_a_quick_run_times_every_case_against_the_copies_during_it(tmp_path: Path) -> None:
    out = tmp_path / "results"
    bench = REPO / "benchmarks" / "bench_cpu.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--quick", "--levels", "default", "--out", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    rows = results["levels"]["default"]["rows"]
    assert results["levels"]["default"]["machine"]["ptkit_cpu_isa"] == "default"
    assert len(rows) == 26 and all(r["check"] == "ok" for r in rows)
    # Each case's copy rate is the median of the copies timed among its repetitions: a
    # real rate (a 256 MiB copy takes milliseconds), and the percentage follows from it.
    for r in rows:
        assert 0.5 < r["copy_gbs"] < 2000, r
        assert abs(r["pct_copy"] - 100 * r["gbs"] / r["copy_gbs"]) < 1e-6, r
    # The goals: every one judged, each miss naming a row of this run.
    misses = results["goal_misses"]["default"]
    assert len(misses) == 4
    cases = {f"{r['op']} {r['dtype']} {r['shape']}" for r in rows}
    assert all(miss.split(": ")[0] in cases for names in misses.values() for miss in names)
    report = (out / "results.md").read_text()
    assert "## Goals per level" in report and "| goal | default |" in report
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"
