"""What a wheel takes from torch (ptkit.release.torch_libraries): one table, the
backends' ``runtime_libraries``, read by the repair, the release configuration and the
audit."""

from __future__ import annotations

import pytest

from ptkit.backends import BACKENDS
from ptkit.platforms import PLATFORMS
from ptkit.release.torch_libraries import all_torch_libraries, is_torch_library, torch_libraries


@pytest.mark.parametrize("os_name", PLATFORMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backend_takes_the_cpus_libraries_and_its_own(backend: str, os_name: str) -> None:
    cpu = BACKENDS["cpu"].runtime_libraries.get(os_name, ())
    own = BACKENDS[backend].runtime_libraries.get(os_name, ())
    assert cpu, f"the CPU has no torch libraries on {os_name}"
    assert torch_libraries(backend, os_name) == tuple(dict.fromkeys((*cpu, *own)))
    assert set(torch_libraries(backend, os_name)) <= set(all_torch_libraries(os_name))


def test_the_linux_rows() -> None:
    assert torch_libraries("cpu", "linux") == ("libtorch.so", "libtorch_cpu.so", "libc10.so")
    assert torch_libraries("cuda", "linux")[3:] == (
        "libtorch_cuda.so",
        "libc10_cuda.so",
        "libcudart.so.*",
    )
    assert torch_libraries("metal", "macos") == torch_libraries("cpu", "macos")
    # No CUDA on macOS: the CPU's row only.
    assert torch_libraries("cuda", "macos") == torch_libraries("cpu", "macos")


def test_patterns_match_sonames_as_the_repair_tools_do() -> None:
    cuda = torch_libraries("cuda", "linux")
    assert is_torch_library("libcudart.so.13", cuda)
    assert not is_torch_library("libcudart.so", cuda)
    assert not is_torch_library("libcudart.so.13", torch_libraries("hip", "linux"))
    assert is_torch_library("cudart64_13.dll", torch_libraries("cuda", "windows"))
