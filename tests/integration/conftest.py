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


# The files that take longest, started first (seconds in a make test run here, two workers:
# 340, 291, 234, 222, 195, 126): with one file per pytest-xdist worker at a time, a long
# file left for the end would keep one worker busy while the other sits idle.
LONGEST_FIRST = (
    "test_linux_aarch64.py",
    "test_torch_range.py",
    "test_release_local.py",
    "test_adopt.py",
    "test_torch_abi.py",
    "test_shapes_cpp_schemas.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other files as collected, their tests in order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
