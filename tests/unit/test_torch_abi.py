"""The two ABI modes (ptkit.torch_abi): their names, what a source of each may include,
the compile-time guards, a failed compile said in ptkit's words, and the torch a build
binds to, read from its files (this venv's real torch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptkit.torch_abi import (
    check_abi,
    compile_error_cause,
    include_problems,
    locate_torch,
    write_guards,
)

REPO = Path(__file__).resolve().parents[2]
CLASSIC = REPO / "tests" / "fixtures" / "classic_muladd"


def test_an_unknown_mode_names_the_modes_and_the_likely_one() -> None:
    assert check_abi("torch", "ABI") == "torch"
    with pytest.raises(ValueError, match=r"^PTKIT_ABI 'stabel' is not one of stable, torch \(did you mean 'stable'\?\): stable \(the LibTorch stable ABI"):  # fmt: skip
        check_abi("stabel", "PTKIT_ABI")


def test_the_classic_fixture_is_refused_in_the_stable_mode_naming_its_headers() -> None:
    sources = [CLASSIC / "csrc" / "muladd.cpp", CLASSIC / "csrc" / "muladd_cuda.cu"]
    problems = include_problems(sources, "stable")
    assert len(problems) == 2
    assert problems[0].startswith(
        "muladd.cpp:9 includes <ATen/cpu/vec/vec.h>, <torch/all.h> (line 10), <torch/library.h> "
        "(line 11): torch's classic C++ API"
    )
    assert "<c10/cuda/CUDAStream.h> (line 6)" in problems[1]
    assert all(
        "Fix: build it in the torch mode (ABI torch: the classic C++ API, one wheel per torch "
        "minor), or port it to torch/csrc/stable/ (ptkit's docs/porting.md)" in p
        for p in problems
    )
    assert include_problems(sources, "torch") == []


def test_the_stable_port_passes_in_the_stable_mode() -> None:
    assert include_problems(sorted((CLASSIC / "csrc_stable").iterdir()), "stable") == []


@pytest.mark.parametrize("abi", ["stable", "torch"])
def test_python_headers_are_refused_in_both_modes(tmp_path: Path, abi: str) -> None:
    source = tmp_path / "ext.cpp"
    source.write_text('#include <cstdint>\n#include "torch/extension.h"\n#include <Python.h>\n')
    (extension,) = include_problems([source], abi)[:1]
    assert extension.startswith(
        "ext.cpp:2: <torch/extension.h> includes Python.h (pybind11, libtorch_python), and a "
        "ptkit library has no Python"
    )
    assert "Fix: include <torch/all.h> and <torch/library.h> instead" in extension
    python_h = tmp_path / "module.cpp"
    python_h.write_text("#include <pybind11/pybind11.h>\n")
    assert include_problems([python_h], abi)[0].startswith(
        "module.cpp:1: <pybind11/pybind11.h> is Python's C API"
    )


def test_the_guards_stop_the_compiler_with_ptkits_reason(tmp_path: Path) -> None:
    """A header that includes torch/extension.h is no source the scan sees: the guard
    folder, searched first, stops g++ there; the build stage reads its #error back."""
    write_guards(tmp_path / "guards", "torch")
    (tmp_path / "helper.h").write_text("#include <torch/extension.h>\n")
    (tmp_path / "ops.cpp").write_text('#include "helper.h"\n')
    proc = subprocess.run(
        ["g++", "-fsyntax-only", f"-I{tmp_path / 'guards'}", str(tmp_path / "ops.cpp")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    cause = compile_error_cause(proc.stderr)
    assert cause is not None and cause.startswith("<torch/extension.h> includes Python.h")


def test_torchs_own_stable_only_error_is_said_with_the_fix() -> None:
    output = (
        '/venv/torch/include/ATen/core/TensorBody.h:12:2: error: #error "This file should not be '
        'included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION is defined."\n'
    )
    assert compile_error_cause(output) == (
        "<ATen/core/TensorBody.h>: torch's classic C++ API (ATen, c10, torch/all.h, "
        "torch/library.h), which a stable-ABI library cannot use (TORCH_STABLE_ONLY). Fix: "
        "build it in the torch mode (ABI torch: the classic C++ API, one wheel per torch "
        "minor), or port it to torch/csrc/stable/ (ptkit's docs/porting.md)"
    )
    # Clang's wording, indented as a build log may show it.
    clang = '  /t/include/c10/core/Device.h:4:2: error: "This file should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION is defined."\n'
    assert (compile_error_cause(clang) or "").startswith("<c10/core/Device.h>: torch's classic")
    assert compile_error_cause("ld: undefined reference to foo\n") is None


def test_the_torch_of_this_venv_as_its_files_say() -> None:
    import torch

    found = locate_torch()
    assert found.version == torch.__version__
    assert found.root == Path(torch.__file__).parent
    assert found.cxx11_abi is bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert found.cxx_standard == "20"  # torch >= 2.13's TorchConfig.cmake asks for C++20


def test_another_pythons_torch_is_not_taken_from_ptkits_folder(tmp_path: Path) -> None:
    """CMake runs ptkit with PYTHONPATH at ptkit's install: a build Python (here a new venv
    without torch) must be told it has no torch, not given the torch beside ptkit."""
    import torch

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True
    )
    site = str(Path(torch.__file__).parents[1])
    proc = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "python"), "-m", "ptkit.torch_abi", "locate"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{REPO / 'src'}:{site}"}, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    assert (
        proc.stderr == "ptkit: torch is not installed in this Python: pip install 'torch>=2.10'\n"
    )
    # The Python whose own site folder it is finds it there, PYTHONPATH or not.
    same = subprocess.run(
        [sys.executable, "-m", "ptkit.torch_abi", "locate"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{REPO / 'src'}:{site}"}, check=True,
    )  # fmt: skip
    assert f"VERSION={torch.__version__}" in same.stdout
