"""Backends whose toolchain is absent here (oneAPI's icpx, Xcode's metal): real CMake
configures and builds say what they skipped or shipped, and why; `ptkit build` fails
cleanly when the variant's backend is required."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, cmake_configure, python_env, run

pytestmark = pytest.mark.integration

# What the xpu row says where no icpx is: ptkit.backends.xpu's search and fix.
ICPX_NOT_FOUND = "icpx not found (searched PTKIT_ICPX, then CMPLR_ROOT, ONEAPI_ROOT"


def _installed_cmake_dir() -> Path:
    import ptkit

    return Path(ptkit.__file__).parent / "cmake"


def _report(build: Path) -> dict[str, dict[str, str]]:
    data = json.loads((build / "ptkit-build-report.json").read_text())
    return {row["backend"]: row for row in data["backends"]}


def test_xpu_without_icpx_is_skipped_with_the_reason_and_the_fix(tmp_path: Path) -> None:
    proc = cmake_configure(REPO, tmp_path, "-DPTKIT_VARIANT=xpu", env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    rows = _report(tmp_path)
    assert rows["xpu"]["status"] == "skipped"
    assert rows["xpu"]["detail"].startswith(ICPX_NOT_FOUND)
    assert "Fix: install oneAPI's DPC++ compiler" in rows["xpu"]["detail"]
    assert "setvars.sh" in rows["xpu"]["detail"]
    assert rows["cpu"]["status"] == "built"
    assert rows["cuda"] == {
        "backend": "cuda",
        "status": "skipped",
        "detail": "not part of variant xpu",
    }
    # The same table ends configure's output.
    table = proc.stdout[proc.stdout.index("ptkit build report (variant xpu)") :]
    assert f"xpu      skipped  {ICPX_NOT_FOUND}" in table


def test_a_required_backend_without_its_toolchain_fails_configure(tmp_path: Path) -> None:
    proc = cmake_configure(
        REPO,
        tmp_path,
        "-DPTKIT_VARIANT=xpu",
        "-DPTKIT_REQUIRE_BACKEND=ON",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert f"the xpu backend is required but was not found: {ICPX_NOT_FOUND}" in message
    assert _report(tmp_path)["xpu"]["status"] == "failed"


def test_ptkit_build_names_the_stage_and_cause_and_leaves_dist_empty(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptkit",
            "build",
            "--variant",
            "xpu",
            "--source",
            str(REPO),
            "--dist",
            str(dist),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
        env=python_env(),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"xpu      failed   {ICPX_NOT_FOUND}" in proc.stdout
    assert "stage 'build' failed for variant xpu: icpx" in proc.stderr
    assert not list(dist.glob("**/*.whl"))


def test_ptkit_build_rejects_an_unknown_variant(tmp_path: Path) -> None:
    """A usage error (exit 2) before any stage: the closest recipe and the ones there are."""
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "build", "--variant", "cuda13", "--source", str(REPO)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        f"ptkit build: --variant 'cuda13' is not a recipe of {REPO} (did you mean 'cu13'?); "
        "expected one of cpu, cu13, metal, rocm7.14, xpu (or add recipes/cuda13.toml)"
    )


def test_metal_sources_ship_with_a_manifest_when_there_is_no_metal_compiler(tmp_path: Path) -> None:
    """A project of its own, as another extension would write it, with ptkit's kernels and
    the installed CMake package."""
    project = tmp_path / "ext"
    project.mkdir()
    source = REPO / "metal" / "ptkit_kernels.metal"
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.26)\nproject(ext LANGUAGES CXX)\n"
        f'set(ptkit_DIR "{_installed_cmake_dir()}")\n'
        "find_package(ptkit CONFIG REQUIRED)\n"
        "ptkit_enable_backend(metal RESULT_VAR have_metal)\n"
        f'ptkit_add_kernel_library(ext_metal BACKEND metal NAMESPACE ext SOURCES "{source}"\n'
        "  OPS rms_norm DTYPES float32 float16 INSTALL_DIR ext/_native)\n"
    )
    build = tmp_path / "build"
    proc = cmake_configure(project, build, f"-DCMAKE_INSTALL_PREFIX={tmp_path / 'prefix'}")
    assert proc.returncode == 0, proc.stderr
    rows = _report(build)
    assert rows["metal"]["status"] == "built"
    assert (
        "sources shipped, compiled at first use by torch.mps.compile_shader"
        in rows["metal"]["detail"]
    )
    assert rows["xpu"]["detail"] == "not requested by this project"
    venv_bin = Path(sys.executable).parent
    run([str(venv_bin / "cmake"), "--build", str(build)])
    run([str(venv_bin / "cmake"), "--install", str(build)])
    native = tmp_path / "prefix" / "ext" / "_native"
    shipped = native / "ext_metal.metal"
    assert shipped.read_text() == source.read_text()
    manifest = json.loads((native / "ext_metal.manifest.json").read_text())
    assert manifest["backend"] == "metal" and manifest["library"] == "ext_metal.metal"
    assert manifest["targets"] == {"metal": ["source"]}
    assert manifest["sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()
