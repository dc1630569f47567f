"""ptkit's torch mode on a classic-ABI extension (tests/fixtures/classic_muladd: at::Tensor,
TensorOptions, at::Vectorized, the current CUDA stream from c10, TORCH_LIBRARY, ATen calls
with Scalar arguments), built by `ptkit build` in two real environments: torch 2.14
(.venv) and torch 2.13 (a fresh venv on .venv-torch213 with ptkit[build] installed from
the wheelhouse). Each wheel's manifest records its torch; each loads into its own torch
and is refused by the other, with the reason, in a real subprocess there (the loader, the
doctor); the stable mode refuses the same sources naming their headers, and their port
(csrc_stable/, docs/porting.md) computes the same numbers on the stable ABI. The CUDA
library is compiled (cu13, sm_90) and audited; no GPU runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fresh_python import TORCH213
from support import REPO, cmake_configure, fresh_venv, python_env, run

pytestmark = pytest.mark.integration

FIXTURE = REPO / "tests" / "fixtures" / "classic_muladd"
VENV_BIN = Path(sys.executable).parent
PIP_CUDA = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*"))
# The ops on three inputs, and what they must give (computed by torch itself).
CHECK = """
import json, sys, torch, ptkit.runtime
sys.path.insert(0, sys.argv[1]) if len(sys.argv) > 1 else None
import muladd
decisions = [(d.library, d.status.value, d.reason) for d in ptkit.runtime.load_decisions("muladd")]
result = {"torch": torch.__version__, "decisions": decisions}
if decisions[0][1] == "loaded":
    torch.manual_seed(0)
    a, b = torch.randn(1000), torch.randn(1000)
    out = torch.empty(1000)
    torch.ops.muladd.myadd_out(a, b, out)
    result["errors"] = {
        "mymuladd": (torch.ops.muladd.mymuladd(a, b, 0.5) - (a * b + 0.5)).abs().max().item(),
        "mymul": (torch.ops.muladd.mymul(a, b) - a * b).abs().max().item(),
        "myadd_out": (out - (a + b)).abs().max().item(),
        "squared_relu": (torch.ops.muladd.squared_relu(a, 3.0) - torch.relu(3.0 * a) ** 2).abs().max().item(),
    }
print(json.dumps(result))
"""


def _build(python: Path, variant: str, work: Path, **env: str) -> Path:
    """`ptkit build` of the fixture with ``python``'s ptkit and torch; the wheel in dist/."""
    run([str(python), "-m", "ptkit", "build", "--source", str(FIXTURE), "--variant", variant,
         "--dist", str(work / "dist"), "--build-root", str(work / "build")],
        env=python_env(PATH=f"{python.parent}:/usr/local/bin:/usr/bin:/bin", **env),
        timeout=1200)  # fmt: skip
    (wheel,) = (work / "dist" / variant).glob("muladd-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel214(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(Path(sys.executable), "cpu", tmp_path_factory.mktemp("build214"))


@pytest.fixture(scope="module")
def wheel213(tmp_path_factory: pytest.TempPathFactory, torch213: Path) -> Path:
    return _build(torch213, "cpu", tmp_path_factory.mktemp("build213"))


def _manifest(wheel: Path, name: str = "muladd_cpu") -> dict:  # type: ignore[type-arg]
    with zipfile.ZipFile(wheel) as archive:
        return json.loads(archive.read(f"muladd/_native/{name}.manifest.json"))


def _installed(wheel: Path, base: Path, venv: Path, toolkit: Path) -> Path:
    """A fresh venv on ``base``'s packages (torch) with the toolkit and ``wheel``
    installed, no dependencies (torch 2.13's base has no click: the doctor is not run
    there)."""
    python = fresh_venv(venv, base)
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(toolkit), str(wheel)])
    return python


def _check(python: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(run([str(python), "-c", CHECK], env=python_env(), cwd=Path("/")).stdout)


def test_each_manifest_records_the_torch_and_cxx_abi_it_binds_to(
    wheel214: Path, wheel213: Path
) -> None:
    import torch

    assert _manifest(wheel214)["torch"] == {
        "abi": "torch", "built_with": torch.__version__, "cxx11_abi": True, "target_version": "2.14",
    }  # fmt: skip
    assert _manifest(wheel213)["torch"] == {
        "abi": "torch", "built_with": "2.13.0+cpu", "cxx11_abi": True, "target_version": "2.13",
    }  # fmt: skip


def test_each_build_loads_into_its_own_torch_and_computes_what_torch_does(
    wheel214: Path, wheel213: Path, toolkit_wheel: Path, tmp_path: Path
) -> None:
    for wheel, base, version in (
        (wheel214, Path(sys.executable), "2.14"),
        (wheel213, TORCH213, "2.13"),
    ):
        result = _check(_installed(wheel, base, tmp_path / version, toolkit_wheel))
        assert result["torch"].startswith(version)
        assert result["decisions"][0][:2] == ["libmuladd_cpu.so", "loaded"]
        assert f"classic C++ ABI, torch {version} only" in result["decisions"][0][2]
        assert max(result["errors"].values()) < 1e-5, result["errors"]


@pytest.mark.parametrize("direction", ["2.14 build in torch 2.13", "2.13 build in torch 2.14"])
def test_a_build_is_refused_by_the_other_torch_minor_with_the_reason(
    wheel214: Path, wheel213: Path, toolkit_wheel: Path, tmp_path: Path, direction: str
) -> None:
    if direction.startswith("2.14"):
        python = _installed(wheel214, TORCH213, tmp_path / "venv", toolkit_wheel)
        built, running = "2.14", "2.13"
    else:
        python = _installed(wheel213, Path(sys.executable), tmp_path / "venv", toolkit_wheel)
        built, running = "2.13", "2.14"
    reason = (
        f"built for torch {built} (classic C++ ABI); this is torch {running}: install the build "
        f"for torch {running} from the index, or rebuild"
    )
    result = _check(python)
    assert result["decisions"] == [["libmuladd_cpu.so", "skipped", reason]]
    if running == "2.14":  # the doctor needs the toolkit's CLI dependencies (.venv has them)
        doctor = subprocess.run(
            [str(python), "-m", "ptkit", "doctor", "--json"],
            capture_output=True, text=True, env=python_env(), cwd=Path("/"), timeout=300,
            check=False,
        )  # fmt: skip
        assert reason in doctor.stdout, doctor.stdout + doctor.stderr
        assert '"skipped"' in doctor.stdout


def test_the_cuda_library_is_compiled_in_the_torch_mode_and_its_gpu_code_audited(
    tmp_path: Path,
) -> None:
    if not PIP_CUDA:
        pytest.fail("the cu13 toolchain is missing: run scripts/bootstrap (make test does)")
    wheel = _build(Path(sys.executable), "cu13", tmp_path, PTKIT_CUDA_ROOT=str(PIP_CUDA[-1]))
    cuda = _manifest(wheel, "muladd_cuda")
    assert cuda["torch"]["abi"] == "torch" and cuda["targets"] == {"sass": ["sm_90"], "ptx": []}
    from ptkit.release.wheel_audit import audit_wheel

    cuobjdump = PIP_CUDA[-1] / "bin" / "cuobjdump"
    audit = audit_wheel(wheel, cuobjdump=str(cuobjdump))
    assert audit.ok, audit.format()
    (library,) = [lib for lib in audit.libraries if lib.name == "libmuladd_cuda.so"]
    assert library.gpu_targets == ("sm_90",)
    assert {"libc10_cuda.so", "libcudart.so.13"} <= set(library.needed)
    assert not any("python" in lib for lib in library.needed)


def test_the_audit_of_the_same_library_marked_stable_is_one_summary(
    wheel214: Path, tmp_path: Path
) -> None:
    """What the audit says of a classic-API library that claims the stable ABI."""
    from ptkit.release.wheel_audit import audit_wheel

    relabelled = tmp_path / wheel214.name
    with zipfile.ZipFile(wheel214) as source, zipfile.ZipFile(relabelled, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("muladd_cpu.manifest.json"):
                manifest = json.loads(data)
                manifest["torch"] = {
                    "target_version": "2.10",
                    "built_with": manifest["torch"]["built_with"],
                }
                data = json.dumps(manifest).encode()
            target.writestr(info, data)
    (problem,) = audit_wheel(relabelled).problems
    assert problem.startswith("libmuladd_cpu.so needs ")
    assert "torch C++ symbols outside the stable ABI (" in problem and " c10::" in problem
    assert (
        "at::" in problem and "first: " in problem and " more): it uses torch's classic" in problem
    )
    assert problem.endswith("(torch/csrc/stable/; ptkit's docs/porting.md)")


def _cmake_build(tmp_path: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    from support import cmake_configure as configure

    proc = configure(FIXTURE, tmp_path / "build", f"-DCMAKE_INSTALL_PREFIX={tmp_path / 'prefix'}",
                     f"-Dptkit_DIR={_cmake_dir()}", "-DCMAKE_BUILD_TYPE=Release", *defines)  # fmt: skip
    if proc.returncode == 0:
        run([str(VENV_BIN / "cmake"), "--build", str(tmp_path / "build")])
        run([str(VENV_BIN / "cmake"), "--install", str(tmp_path / "build")])
    return proc


def _cmake_dir() -> Path:
    proc = run([str(VENV_BIN / "ptkit"), "--cmake-dir"], env=python_env(), cwd=Path("/"))
    return Path(proc.stdout.strip())


def test_the_stable_mode_refuses_the_classic_sources_naming_their_headers(tmp_path: Path) -> None:
    proc = cmake_configure(FIXTURE, tmp_path / "build", f"-Dptkit_DIR={_cmake_dir()}",
                           "-DMULADD_ABI=stable")  # fmt: skip
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert (
        "ptkit_add_kernel_library(muladd_cpu): muladd.cpp:9 includes <ATen/cpu/vec/vec.h>, "
        "<torch/all.h> (line 10), <torch/library.h> (line 11): torch's classic C++ API" in message
    )
    assert "Fix: build it in the torch mode (ABI torch" in message
    assert "ptkit's docs/porting.md" in message


def test_the_stable_port_computes_the_same_numbers_in_both_torch_minors(
    tmp_path: Path, torch213: Path
) -> None:
    proc = _cmake_build(tmp_path, "-DMULADD_ABI=stable", "-DMULADD_SOURCES=csrc_stable")
    assert proc.returncode == 0, proc.stderr
    package = tmp_path / "package"
    shutil.copytree(FIXTURE / "muladd", package / "muladd")
    shutil.copytree(tmp_path / "prefix" / "muladd" / "_native", package / "muladd" / "_native")
    manifest = json.loads((package / "muladd" / "_native" / "muladd_cpu.manifest.json").read_text())
    assert manifest["torch"] == {**manifest["torch"], "abi": "stable", "target_version": "2.10"}
    for python in (Path(sys.executable), torch213):
        out = run([str(python), "-c", CHECK, str(package)], env=python_env(), cwd=Path("/"))
        result = json.loads(out.stdout)
        assert result["decisions"][0][:2] == ["libmuladd_cpu.so", "loaded"], result
        assert max(result["errors"].values()) < 1e-5, result["errors"]


def test_a_header_that_includes_torch_extension_h_stops_the_build_with_the_fix(
    tmp_path: Path,
) -> None:
    """Where the include is in a header the configure-time check does not read, the guard
    header stops the compiler, and `ptkit build` names the cause in ptkit's words."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    (project / "csrc" / "compat.h").write_text("#pragma once\n#include <torch/extension.h>\n")
    source = project / "csrc" / "muladd.cpp"
    source.write_text(source.read_text().replace("#include <torch/all.h>", '#include "compat.h"'))
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "build", "--source", str(project), "--variant", "cpu",
         "--dist", str(tmp_path / "dist"), "--build-root", str(tmp_path / "build")],
        capture_output=True, text=True, env=python_env(), timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith(
        "ptkit build: stage 'build' failed for variant cpu: <torch/extension.h> includes "
        "Python.h (pybind11, libtorch_python), and a ptkit library has no Python"
    ), proc.stderr
    assert "Fix: the compiler's message is at the end of the build log, above" in proc.stderr


def test_plain_cmake_with_torch_213s_python_builds_for_torch_213(tmp_path: Path) -> None:
    """The CMake package installed in .venv (torch 2.14), configured with .venv-torch213's
    Python: torch is the build Python's own, not the one beside ptkit."""
    if not TORCH213.exists():
        pytest.fail(".venv-torch213 is missing: run scripts/bootstrap (make test does)")
    proc = _cmake_build(tmp_path, f"-DPython_EXECUTABLE={TORCH213}")
    assert proc.returncode == 0, proc.stderr
    assert "ptkit: torch 2.13.0+cpu (headers and libtorch_cpu)" in proc.stdout
    assert "it loads into torch 2.13 only" in proc.stdout
    native = tmp_path / "prefix" / "muladd" / "_native"
    manifest = json.loads((native / "muladd_cpu.manifest.json").read_text())
    assert manifest["torch"] == {
        "abi": "torch", "built_with": "2.13.0+cpu", "cxx11_abi": True, "target_version": "2.13",
    }  # fmt: skip
    loaded = run([str(TORCH213), "-c", "import sys, torch; torch.ops.load_library(sys.argv[1]); "
                  "print(torch.ops.muladd.mymuladd(torch.ones(3), torch.ones(3), 1.0).tolist())",
                  str(native / "libmuladd_cpu.so")], env=python_env(), cwd=Path("/"))  # fmt: skip
    assert loaded.stdout.strip() == "[2.0, 2.0, 2.0]"
