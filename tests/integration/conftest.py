"""The integration tests exercise the *installed* wheels (``make test`` builds and installs
the toolkit and ptkit-ops' cpu wheel into .venv), never the source tree."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from fresh_python import build_python_213
from support import REPO
from turns import IN_TURNS, TurnError, describe, left_to_other_turns, this_turn


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
    try:
        return this_turn()
    except TurnError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_report_header(config: pytest.Config) -> str:
    return describe(_turn())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    left = left_to_other_turns(_turn())
    deselected = [item for item in items if item.path.name in left]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.path.name not in left]
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other files as collected, their tests in order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
