"""`ptkit build` says what the build stage is doing while it runs: the build backend's
phases, ptkit's CMake messages and the compiler's `[n/N]` lines, each with the elapsed
time, before the stage's own `[1/5] build ok` line. A real build of ptkit-ops' cpu wheel
by the installed console script, writing to a pipe (as in a CI log), in an empty build
folder so that Ninja has every part to do."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support import REPO, python_env, run

pytestmark = pytest.mark.integration

PTKIT = Path(sys.executable).parent / "ptkit"


def test_the_build_stage_streams_its_phases_and_the_compilers_parts(tmp_path: Path) -> None:
    proc = run(
        [str(PTKIT), "build", "--variant", "cpu", "--source", str(REPO),
         "--build-root", str(tmp_path / "build"), "--dist", str(tmp_path / "dist"),
         "--compiler-cache", "none"],
        env=python_env(),
        timeout=900,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    start = lines.index("[1/5] build …")
    end = next(i for i, line in enumerate(lines) if line.startswith("[1/5] build ok"))
    during = lines[start + 1 : end]
    timed = re.compile(r"^ {6} *\d+(\.\d)? s  (?P<said>.*)$")
    said = [m.group("said") for m in map(timed.match, during) if m]
    assert "Configuring CMake..." in said, during
    assert any(s.startswith("ptkit: torch ") for s in said), during
    parts = [re.match(r"\[(\d+)/(\d+)\] ", s) for s in said]
    numbers = [(int(p.group(1)), int(p.group(2))) for p in parts if p]
    assert numbers, f"no [n/N] line from Ninja while building:\n{proc.stdout}"
    total = numbers[-1][1]
    assert numbers[-1][0] == total and [n for n, _ in numbers] == sorted(n for n, _ in numbers)
    assert any("Building CXX object" in s for s in said)
    assert said.index("Configuring CMake...") < said.index(
        next(s for s in said if s.startswith("[1/"))
    )
    assert "Making wheel..." in said
    # The elapsed times only grow.
    seconds = [float(m.group(0).split(" s  ")[0]) for m in map(timed.match, during) if m]
    assert seconds == sorted(seconds)
