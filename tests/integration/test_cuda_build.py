"""CUDA target resolution at configure time: real CMake, real nvcc (pip 13.5 and the
system's 13.0); configure only, nothing is compiled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REPO
from support import cmake_configure as _configure

pytestmark = pytest.mark.integration

PIP_CUDA = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*"))
SYSTEM_NVCC = Path("/usr/local/bin/nvcc")


@pytest.fixture
def pip_cuda_root() -> Path:
    if not PIP_CUDA:
        pytest.fail("the cu13 toolchain is missing: run scripts/bootstrap (make test does)")
    return PIP_CUDA[-1]


def test_system_cuda_13_0_cannot_build_sm107_and_says_how_to_fix(tmp_path: Path) -> None:
    if not SYSTEM_NVCC.exists():
        pytest.skip("no system nvcc on this machine")
    # An empty toolchain cache: the system's nvcc is the one found, whatever another run
    # put into ~/.cache/ptkit.
    no_cache = {"PTKIT_CACHE_DIR": str(tmp_path / "no-cache")}
    proc = _configure(
        REPO, tmp_path / "build", "-DPTKIT_VARIANT=cu13", "-DPTKIT_CUDA_USE_SYSTEM=ON", env=no_cache
    )
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert (
        "ptkit_add_kernel_library(ptkit_cuda): CUDA target sm_107 needs CUDA >= 13.5; found "
        "nvcc 13.0" in message
    )
    assert f"at {SYSTEM_NVCC}" in message
    # What the compiler builds, SASS by capability, then PTX.
    assert "(it builds: sm_75 sm_80 sm_86" in message
    # The fix installs the recipe's toolkit where ptkit keeps it, never into torch's env.
    assert f"-m ptkit toolchain install cu13 --source {REPO}" in message
    assert "pip install 'nvidia-cuda-nvcc" not in message


def test_a_failed_configure_then_ptkit_cuda_root_succeeds_in_the_same_build_folder(
    tmp_path: Path, pip_cuda_root: Path
) -> None:
    """The fix the message gives works when followed: the first configure finds no
    toolkit (none on the build Python's path, an empty toolchain cache) and fails; the
    next, in the same folder with PTKIT_CUDA_ROOT set as the message says, succeeds."""
    empty = {"PTKIT_CACHE_DIR": str(tmp_path / "no-cache")}
    build = tmp_path / "build"
    args = ("-DPTKIT_VARIANT=cu13", "-DPTKIT_REQUIRE_BACKEND=ON")
    failed = _configure(REPO, build, *args, env=empty)
    assert failed.returncode != 0
    message = " ".join(failed.stderr.split())
    assert "nvcc not found" in message and "or set PTKIT_CUDA_ROOT to a CUDA toolkit" in message
    fixed = _configure(REPO, build, *args, env={**empty, "PTKIT_CUDA_ROOT": str(pip_cuda_root)})
    assert fixed.returncode == 0, fixed.stderr
    assert "ptkit: CUDA 13.5" in fixed.stdout and f"(PTKIT_CUDA_ROOT) at {pip_cuda_root}" in (
        fixed.stdout
    )


def test_arch_list_override_is_resolved_like_torch_cuda_arch_list(
    tmp_path: Path, pip_cuda_root: Path
) -> None:
    proc = _configure(
        REPO,
        tmp_path,
        "-DPTKIT_VARIANT=cu13",
        env={"PTKIT_CUDA_ROOT": str(pip_cuda_root), "PTKIT_CUDA_ARCHS": "9.0;10.0+PTX;9.0a"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "PTKIT_CUDA_ARCHS=9.0;10.0+PTX;9.0a -> sm_90;sm_100;compute_100;sm_90a" in proc.stdout
    manifest = json.loads((tmp_path / "ptkit_cuda.manifest.in.json").read_text())
    assert manifest["targets"] == {"sass": ["sm_90", "sm_100", "sm_90a"], "ptx": ["compute_100"]}
    assert manifest["toolkit"]["name"] == "cuda" and manifest["toolkit"]["version"].startswith(
        "13.5"
    )


def test_malformed_arch_list_is_rejected(tmp_path: Path, pip_cuda_root: Path) -> None:
    proc = _configure(
        REPO,
        tmp_path,
        "-DPTKIT_VARIANT=cu13",
        env={"PTKIT_CUDA_ROOT": str(pip_cuda_root), "PTKIT_CUDA_ARCHS": "sm90"},
    )
    assert proc.returncode != 0
    assert (
        "PTKIT_CUDA_ARCHS='sm90': 'sm90' is not a compute capability (expected entries like "
        "9.0, 10.0a, 12.0f or 12.0+PTX)" in " ".join(proc.stderr.split())
    )


def test_optional_target_the_toolkit_lacks_is_dropped_and_recorded(tmp_path: Path) -> None:
    if not SYSTEM_NVCC.exists():
        pytest.skip("no system nvcc on this machine")
    project = tmp_path / "ext"
    project.mkdir()
    (project / "kernels.cu").write_text("__global__ void k() {}\n")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.26)\nproject(ext LANGUAGES CXX)\n"
        f'set(ptkit_DIR "{REPO / "src" / "ptkit" / "cmake"}")\n'
        "find_package(ptkit CONFIG REQUIRED)\nptkit_enable_cuda()\n"
        "ptkit_add_kernel_library(ext_cuda BACKEND cuda NAMESPACE ext SOURCES kernels.cu\n"
        "  TARGETS sm_90 compute_90 OPTIONAL_TARGETS sm_107 OPS my_op DTYPES float32 INSTALL_DIR ext/_native)\n"
    )
    proc = _configure(
        project,
        tmp_path / "build",
        "-DPTKIT_CUDA_USE_SYSTEM=ON",
        env={"PTKIT_CACHE_DIR": str(tmp_path / "no-cache")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "ptkit_resolve_targets(cuda): optional target(s) sm_107 dropped" in " ".join(
        proc.stderr.split()
    )
    manifest = json.loads((tmp_path / "build" / "ext_cuda.manifest.in.json").read_text())
    assert manifest["dropped_targets"] == ["sm_107"]
    assert manifest["targets"] == {"sass": ["sm_90"], "ptx": ["compute_90"]}


def test_torch_cuda_arch_list_8_0_with_the_cu13_recipe_builds_and_audits_sm80(
    tmp_path: Path, pip_cuda_root: Path
) -> None:
    """torch's own variable, honoured by `ptkit build` of ptkit-ops' cu13 recipe: the build
    says it replaced the recipe's targets, and the fatbinary holds sm_80 and nothing else
    (the install-time audit and stage 3 both check it against the manifest)."""
    import subprocess
    import sys
    import zipfile

    from support import python_env

    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "build", "--source", str(REPO), "--variant", "cu13",
         "--dist", str(tmp_path / "dist"), "--build-root", str(tmp_path / "build")],
        capture_output=True, text=True, timeout=1800, check=False,
        env=python_env(TORCH_CUDA_ARCH_LIST="8.0", PTKIT_CUDA_ROOT=str(pip_cuda_root)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    log = proc.stdout
    assert "ptkit: TORCH_CUDA_ARCH_LIST=8.0 -> sm_80" in log
    assert (
        "ptkit: TORCH_CUDA_ARCH_LIST='8.0' replaces the recipe's targets (sm_90 sm_100 sm_103 "
        "sm_107 sm_110 sm_120 compute_120); PTKIT_CUDA_ARCHS would win over it" in log
    )
    assert (
        "fatbinary audit: libptkit_cuda.so holds SASS sm_80; PTX none (as in its manifest)" in log
    )
    assert "[3/5] audit ok" in log and "GPU code sm_80" in log
    (wheel,) = (tmp_path / "dist" / "cu13").glob("ptkit_ops-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        manifest = json.loads(archive.read("ptkit_ops/_native/ptkit_cuda.manifest.json"))
    assert manifest["targets"] == {"sass": ["sm_80"], "ptx": []}


def test_ptkit_cuda_archs_wins_over_torch_cuda_arch_list_and_says_so(
    tmp_path: Path, pip_cuda_root: Path
) -> None:
    proc = _configure(
        REPO,
        tmp_path,
        "-DPTKIT_VARIANT=cu13",
        env={"PTKIT_CUDA_ROOT": str(pip_cuda_root), "PTKIT_CUDA_ARCHS": "9.0",
             "TORCH_CUDA_ARCH_LIST": "8.0"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        "ptkit: PTKIT_CUDA_ARCHS wins over TORCH_CUDA_ARCH_LIST='8.0' (both are set)" in proc.stdout
    )
    manifest = json.loads((tmp_path / "ptkit_cuda.manifest.in.json").read_text())
    assert manifest["targets"] == {"sass": ["sm_90"], "ptx": []}


def test_a_removed_arch_is_named_as_removed_with_the_last_toolkit(
    tmp_path: Path, pip_cuda_root: Path
) -> None:
    proc = _configure(
        REPO,
        tmp_path,
        "-DPTKIT_VARIANT=cu13",
        env={"PTKIT_CUDA_ROOT": str(pip_cuda_root), "PTKIT_CUDA_ARCHS": "6.0;9.0"},
    )
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert (
        "ptkit_add_kernel_library(ptkit_cuda): CUDA target sm_60 was removed in CUDA 13.0; CUDA "
        "12.9 is the last toolkit that builds it; found nvcc 13.5" in message
    )
    assert (
        'Fix: build sm_60 with CUDA 12.9 (a variant whose recipe has [toolkit] version = "12.9")'
        in message
    )
    assert "needs a newer CUDA toolkit" not in message
