"""Fixtures shared by the unit and the integration tests: the wheels under test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import REPO


@pytest.fixture(scope="session")
def toolkit_wheel() -> Path:
    """The toolkit wheel: $PTKIT_TEST_TOOLKIT_WHEEL (set by `make test`) or dist/toolkit/'s."""
    given = os.environ.get("PTKIT_TEST_TOOLKIT_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "toolkit").glob("ptkit-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no toolkit wheel to test: run `make toolkit` (dist/toolkit/ptkit-*.whl)")
    return wheels[-1].resolve()


@pytest.fixture(scope="session")
def ptkit_wheel() -> Path:
    """ptkit-ops' cpu wheel: $PTKIT_TEST_WHEEL (set by `make test`) or the one in dist/cpu/."""
    given = os.environ.get("PTKIT_TEST_WHEEL")
    if given:
        path = Path(given)
    else:
        wheels = sorted((REPO / "dist" / "cpu").glob("ptkit_ops-*.whl"))
        if not wheels:
            pytest.fail("no wheel to test: run `make test` (it builds dist/cpu/ptkit_ops-*.whl)")
        path = wheels[-1]
    assert path.is_file(), f"PTKIT_TEST_WHEEL={path} does not exist"
    return path.resolve()


@pytest.fixture(scope="session")
def cu13_wheel() -> Path:
    """The cu13 wheel: $PTKIT_TEST_CU13_WHEEL (set by `make test`) or the one in dist/cu13/."""
    given = os.environ.get("PTKIT_TEST_CU13_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "cu13").glob("ptkit_ops-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no cu13 wheel to test: run `make test` (it builds dist/cu13/ptkit_ops-*.whl)")
    return wheels[-1].resolve()


@pytest.fixture(scope="session")
def rocm_wheel() -> Path:
    """The rocm7.14 wheel: $PTKIT_TEST_ROCM_WHEEL (set by `make test`) or dist/rocm7.14/."""
    given = os.environ.get("PTKIT_TEST_ROCM_WHEEL")
    wheels = (
        [Path(given)] if given else sorted((REPO / "dist" / "rocm7.14").glob("ptkit_ops-*.whl"))
    )
    if not wheels or not wheels[-1].is_file():
        pytest.fail(
            "no rocm7.14 wheel to test: run `make test` (it builds dist/rocm7.14/ptkit_ops-*.whl)"
        )
    return wheels[-1].resolve()


@pytest.fixture(scope="session")
def native_cpu_loaded() -> None:
    """Native-vs-reference tests mean nothing if the native library did not load."""
    import ptkit.runtime
    import ptkit_ops  # noqa: F401  (its import loads the libraries)

    decisions = ptkit.runtime.load_decisions("ptkit_ops")
    cpu = [d for d in decisions if d.backend == "cpu"]
    assert cpu and cpu[0].status.value == "loaded", (
        f"the native CPU library did not load: {[(d.library, d.status, d.reason) for d in decisions]}"
    )
    wanted_isa = os.environ.get("PTKIT_CPU_ISA")
    if wanted_isa:
        assert dict(cpu[0].details).get("isa") == wanted_isa
