"""`make test`'s ending: tests/conftest.py writes each pytest run's counts where
PTKIT_TEST_RESULTS says and times slow tests in verbose runs; scripts/test_summary.py
prints the phases, the wheels built with their tags and sizes, and the counts. The summary
runs for real here on a results folder; the child pytest that writes the counts is
tests/integration/test_make_test_summary.py (it takes seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _wheel(path: Path, tags: list[str]) -> Path:
    import zipfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        wheel = "Wheel-Version: 1.0\n" + "".join(f"Tag: {t}\n" for t in tags)
        archive.writestr("demo-0.1.dist-info/WHEEL", wheel)
        archive.writestr("demo/big.bin", os.urandom(300_000))
    return path


def test_the_summary_lists_phases_wheels_and_counts_and_ends_with_the_total(
    tmp_path: Path,
) -> None:
    script = REPO / "scripts" / "test_summary.py"
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "test_summary.py").write_bytes(script.read_bytes())
    old = _wheel(repo / "dist" / "xpu" / "ptkit_ops-0.1.0+xpu-py3-none-linux_x86_64.whl", ["x"])
    os.utime(old, (1, 1))  # from an earlier run: not listed
    since = time.time() - 5
    _wheel(repo / "dist" / "cpu" / "ptkit_ops-0.1.0+cpu-py3-none-manylinux_2_35_x86_64.whl",
           ["py3-none-manylinux_2_35_x86_64"])  # fmt: skip
    results = tmp_path / "results"
    results.mkdir()
    (results / "phases.tsv").write_text(
        "set-up\t2\t0\nunit tests\t31\t0\nintegration tests\t600\t2\n"
    )
    (results / "unit.json").write_text(json.dumps({"passed": 1040, "skipped": 3, "seconds": 30.6}))
    (results / "integration.json").write_text(
        json.dumps({"passed": 300, "failed": 2, "skipped": 9, "seconds": 600})
    )
    proc = subprocess.run(
        [sys.executable, str(repo / "scripts" / "test_summary.py"), str(results),
         "--since", str(since), "--status", "2"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    out = proc.stdout
    assert "unit tests" in out and "31 s  ok" in out
    assert "integration tests" in out and "FAILED (exit 2)" in out
    assert "dist/cpu/ptkit_ops-0.1.0+cpu-py3-none-manylinux_2_35_x86_64.whl" in out
    assert "tags py3-none-manylinux_2_35_x86_64; 0.30 MB" in out
    assert "xpu" not in out
    assert "unit         1040 passed, 3 skipped in 31 s" in out
    assert "integration  300 passed, 2 failed, 9 skipped in 600 s" in out
    assert out.rstrip().splitlines()[-1] == "total: 1340 passed, 2 failed, 12 skipped"


def _summary(results: Path, status: int) -> str:
    """What scripts/test_summary.py prints for the results folder and make test's status."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "test_summary.py"), str(results),
         "--since", str(time.time()), "--status", str(status)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return proc.stdout


def test_without_results_the_summary_says_what_did_not_run(tmp_path: Path) -> None:
    out = _summary(tmp_path, 1)
    assert "unit         no counts: not run, or stopped before its end" in out
    assert "make test FAILED (exit 1)" in out


def test_a_run_stopped_by_a_signal_says_so_with_the_phase_it_stopped_in(tmp_path: Path) -> None:
    # scripts/test records the running phase with the signal's status when it is stopped.
    (tmp_path / "phases.tsv").write_text("unit tests\t31\t0\nintegration tests\t1800\t143\n")
    (tmp_path / "unit.json").write_text(json.dumps({"passed": 10, "seconds": 30.6}))
    out = _summary(tmp_path, 143)
    assert "integration tests   1800 s  STOPPED by SIGTERM (exit 143)" in out
    assert "integration  no counts: not run, or stopped before its end" in out
    assert "make test STOPPED by SIGTERM (exit 143)" in out
