"""The integration tests exercise the *installed* wheels (``make test`` builds and installs
the toolkit and ptkit-ops' cpu wheel into .venv), never the source tree."""

from __future__ import annotations

from pathlib import Path

import pytest
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
