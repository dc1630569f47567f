"""The backend table: every backend module fills in the one interface, consistently."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ptkit.backends import (
    BACKENDS,
    UnknownBackendError,
    backend_for_device_kind,
    backends_for_device_type,
    get_backend,
)
from ptkit.platforms import PLATFORMS, RELEASE_PLATFORMS

SRC = Path(__file__).resolve().parents[2] / "src"


def test_one_module_per_backend_in_one_table() -> None:
    assert list(BACKENDS) == ["cpu", "cuda", "hip", "xpu", "metal"]
    for name, backend in BACKENDS.items():
        assert backend.name == name
        assert type(backend).__module__ == f"ptkit.backends.{name}"


def test_device_kinds_and_dispatch_keys() -> None:
    assert [b.device_kind for b in BACKENDS.values()] == [None, "nvidia", "amd", "intel", "apple"]
    assert backend_for_device_kind("amd").name == "hip"
    # A ROCm torch serves HIP kernels under the CUDA device type and dispatch key.
    assert [b.name for b in backends_for_device_type("cuda")] == ["cuda", "hip"]
    assert {b.dispatch_key for b in backends_for_device_type("cuda")} == {"CUDA"}
    assert BACKENDS["metal"].dispatch_key == "MPS"


def test_unknown_backend_names_the_known_ones_with_a_suggestion() -> None:
    with pytest.raises(
        UnknownBackendError, match=r"unknown backend 'cdua' \(did you mean 'cuda'\?\)"
    ):
        get_backend("cdua")


def test_release_platforms_and_runtime_libraries_name_known_platforms() -> None:
    for backend in BACKENDS.values():
        assert backend.release_platforms, backend.name
        assert set(backend.release_platforms) <= set(RELEASE_PLATFORMS), backend.name
        assert set(backend.runtime_libraries) <= set(PLATFORMS), backend.name
    # Every platform's torch libraries are known (the repair excludes them everywhere).
    assert set(BACKENDS["cpu"].runtime_libraries) == set(PLATFORMS)


def test_the_cuda_target_pattern_is_written_once() -> None:
    """Issue 14: grep for the CUDA target pattern finds it in one Python module."""
    pattern = re.compile(r"\(sm\|compute\)")
    hits = [
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*")
        if p.suffix in (".py", ".cmake") and pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert hits == ["ptkit/backends/cuda.py"]


def test_cmake_reads_the_rules_through_python_dash_m() -> None:
    env_value = "9.0;bogus;12.0+PTX"
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit.backends", "request", "cuda", "--targets", "sm_90"],
        env={"PYTHONPATH": str(SRC), "PTKIT_CUDA_ARCHS": env_value, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "ptkit: PTKIT_CUDA_ARCHS='9.0;bogus;12.0+PTX': 'bogus' is not a compute capability "
        "(expected entries like 9.0, 10.0a, 12.0f or 12.0+PTX)"
    )
