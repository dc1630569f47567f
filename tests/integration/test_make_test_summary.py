"""`make test`'s counts: tests/conftest.py writes each pytest run's counts where
PTKIT_TEST_RESULTS says and times slow tests in verbose runs; a child pytest on a small
test file, for real (the summary that reads them is tests/unit/test_make_test_summary.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SAMPLE = """
import os, subprocess, sys, time, pytest

def test_quick(): pass
def test_nested_run(tmp_path):
    # A test that starts a pytest of its own (as the aarch64 and release tests do), with
    # this environment: its counts must not replace the outer run's.
    (tmp_path / "test_inner.py").write_text("def test_inner(): pass")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                    "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                   cwd=tmp_path, env=os.environ, check=True, timeout=120)
    assert not os.path.exists(os.environ["SAMPLE_RESULTS"]), "the nested run wrote its counts"
def test_slow(): time.sleep(1.2)
def test_broken(): assert False
@pytest.mark.skip(reason="not here")
def test_skipped(): pass
"""


def test_a_pytest_run_writes_its_counts_and_names_its_slow_tests(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    results = tmp_path / "results" / "unit.json"
    env = {**os.environ, "PTKIT_TEST_RESULTS": str(results), "SAMPLE_RESULTS": str(results),
           "PYTHONPATH": str(REPO / "tests")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-v", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_sample.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    counts = json.loads(results.read_text())
    assert {k: counts[k] for k in ("passed", "failed", "skipped", "errors")} == {
        "passed": 3, "failed": 1, "skipped": 1, "errors": 0,
    }  # fmt: skip
    assert counts["exitstatus"] == 1 and counts["seconds"] >= 1.2
    assert "test_sample.py::test_slow PASSED (1." in proc.stdout
    assert "test_sample.py::test_quick PASSED " in proc.stdout  # no time under a second
    assert "test_quick PASSED (" not in proc.stdout
