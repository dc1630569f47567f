"""The integration tests exercise the *installed* wheels (``make test`` builds and installs
the toolkit and ptkit-ops' cpu wheel into .venv), never the source tree."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest
from fresh_python import build_python_213
from support import REPO


def pytest_sessionstart(session: pytest.Session) -> None:
    import ptkit

    for name, module in (("ptkit", ptkit),):
        location = Path(module.__file__ or "").resolve()
        if REPO / "src" in location.parents:
            raise pytest.UsageError(
                f"{name} was imported from the source tree ({location}); the integration tests "
                "need the built wheels installed: run `make test`"
            )


@pytest.fixture(scope="session")
def torch213(tmp_path_factory: pytest.TempPathFactory, toolkit_wheel: Path) -> Path:
    """A venv with torch 2.13 (.venv-torch213's) and ptkit[build]: it builds torch-mode
    projects for torch 2.13 (made once for the session)."""
    return build_python_213(tmp_path_factory.mktemp("torch213") / "venv", toolkit_wheel)


# The slowest jobs, the platform and torch matrices, take turns: all of them do not fit CI's
# 90 minutes on a 2-core Zen 1 (the whole suite ran past 5400 s there). Each run takes one
# turn of TURNS, the commit's hash modulo TURNS, so that consecutive commits go round them;
# PTKIT_TEST_TURN=all runs every one (=0, 1 or 2: that turn). The run's header names the
# files it runs and the ones it leaves to the other turns.
IN_TURNS = (
    "test_cross_build.py",
    "test_adopt.py",
    "test_release_local.py",
    "test_torch_range.py",
    "test_torch_abi.py",
    "test_linux_aarch64.py",
    "test_cpython315.py",
)
TURNS = 3

# The files that take longest, started first: with one file per pytest-xdist worker at a
# time, a long file left for the end keeps one worker busy while the other sits idle.
# Seconds on a 2-core Zen 1 in a make test run with every turn: linux_aarch64 719,
# torch_range 670, release_local 592, adopt 589, torch_abi 550, cross_build 499,
# shapes_cpp_schemas 381, cmake_package 246, build_pipeline about 240, portable_kernels
# about 230 (the last four run every time).
LONGEST_FIRST = (
    *IN_TURNS,
    "test_shapes_cpp_schemas.py",
    "test_cmake_package.py",
    "test_build_pipeline.py",
    "test_portable_kernels.py",
)


@functools.cache
def _turn() -> int | None:
    """This run's turn, or None for all of them."""
    given = os.environ.get("PTKIT_TEST_TURN", "").strip()
    if given == "all":
        return None
    if given:
        if given not in {str(t) for t in range(TURNS)}:
            raise pytest.UsageError(
                f"PTKIT_TEST_TURN={given!r}: expected 'all' or a turn from 0 to {TURNS - 1}"
            )
        return int(given)
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except OSError:  # no git: the Debian roots' nested runs of named files
        return None
    if head.returncode != 0:
        return None  # not a git checkout: every file
    return int(head.stdout.strip(), 16) % TURNS


def _left_to_other_turns(turn: int | None) -> set[str]:
    if turn is None:
        return set()
    return {name for place, name in enumerate(IN_TURNS) if place % TURNS != turn}


def pytest_report_header(config: pytest.Config) -> str:
    turn = _turn()
    if turn is None:
        why = "PTKIT_TEST_TURN=all, or git cannot name the checkout's HEAD"
        return f"slow jobs: all {len(IN_TURNS)} ({why})"
    left = _left_to_other_turns(turn)
    runs = [name for name in IN_TURNS if name not in left]
    return (
        f"slow jobs, turn {turn} of {TURNS}: {', '.join(runs)}; left to the other turns: "
        f"{', '.join(sorted(left))} (PTKIT_TEST_TURN=all runs every one)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    left = _left_to_other_turns(_turn())
    deselected = [item for item in items if item.path.name in left]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.path.name not in left]
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other files as collected, their tests in order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
