"""The integration tests exercise the *installed* wheels (``make test`` builds and installs
the toolkit and ptkit-ops' cpu wheel into .venv), never the source tree."""

from __future__ import annotations

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


# The files that take longest, started first: with one file per pytest-xdist worker at a
# time, a long file left for the end keeps one worker busy while the other sits idle.
# Seconds on a 2-core Zen 1 (cross_build alone, the others in make test runs): cross_build
# 1124, adopt about 900, release_local 684, torch_range 578, torch_abi 561, shapes_cpp_schemas
# 325, cmake_package 254, build_pipeline 239, portable_kernels 234, cpython315 128-264;
# linux_aarch64 took 1054 with the loader's tests under qemu, which it no longer runs.
LONGEST_FIRST = (
    "test_cross_build.py",
    "test_adopt.py",
    "test_release_local.py",
    "test_torch_range.py",
    "test_torch_abi.py",
    "test_linux_aarch64.py",
    "test_shapes_cpp_schemas.py",
    "test_cmake_package.py",
    "test_build_pipeline.py",
    "test_portable_kernels.py",
    "test_cpython315.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other files as collected, their tests in order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
