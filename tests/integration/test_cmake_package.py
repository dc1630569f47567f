"""ptkit's CMake package as another project uses it: shipped in the toolkit wheel, found by
plain CMake through `ptkit --cmake-dir` and by scikit-build-core with no path at all,
building real stable-ABI kernel libraries (CPU, CUDA with .toolchains/cu13's nvcc, HIP
with Debian's hipcc) with their manifests; the errors a wrong call gets; and a target
override refused by CMake in exactly the words of ptkit.backends."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from support import REPO, cmake_configure, python_env, run

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
SITE = Path(sysconfig.get_path("purelib"))
INSTALLED_CMAKE_DIR = SITE / "ptkit" / "cmake"
PIP_CUDA = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*"))


@pytest.fixture(scope="module")
def toolkit_wheel() -> Path:
    """The toolkit wheel under test: $PTKIT_TEST_TOOLKIT_WHEEL (`make test`) or dist/toolkit/."""
    given = os.environ.get("PTKIT_TEST_TOOLKIT_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "toolkit").glob("ptkit-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail(
            "no toolkit wheel to test: run `make test` (it builds dist/toolkit/ptkit-*.whl)"
        )
    return wheels[-1]


def _cuda_root() -> Path:
    if not PIP_CUDA:
        pytest.fail("the cu13 toolchain is missing: run scripts/bootstrap (make test does)")
    return PIP_CUDA[-1]


# One op, demo::twice, on the stable ABI; its arithmetic compiled once per ISA level.
KERNELS_CPP = """\
#include <cstdint>
namespace demo::PTKIT_CPU_ISA {
void twice(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
}  // namespace demo::PTKIT_CPU_ISA
"""
OPS_CPP = """\
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>

#include "ptkit_cpu_isa_list.h"

#define DEMO_DECLARE(ns, name) \\
  namespace demo::ns { void twice(const float*, float*, int64_t); }
PTKIT_CPU_ISA_LIST(DEMO_DECLARE)

namespace {
using Twice = void (*)(const float*, float*, int64_t);
#define DEMO_ENTRY(ns, name) &demo::ns::twice,
const Twice kLevels[] = {PTKIT_CPU_ISA_LIST(DEMO_ENTRY)};  // best first; the last is the baseline

torch::stable::Tensor twice(torch::stable::Tensor x) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float && x.is_contiguous(),
                  "demo::twice: a contiguous float32 tensor");
  torch::stable::Tensor y = torch::stable::empty_like(x);
  kLevels[sizeof(kLevels) / sizeof(kLevels[0]) - 1](
      static_cast<const float*>(x.const_data_ptr()), static_cast<float*>(y.mutable_data_ptr()),
      x.numel());
  return y;
}
}  // namespace

STABLE_TORCH_LIBRARY(demo, m) { m.def("twice(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(demo, CPU, m) { m.impl("twice", TORCH_BOX(&twice)); }
"""
ADD_DEMO_CPU = """\
ptkit_add_kernel_library(demo_cpu BACKEND cpu NAMESPACE demo
  SOURCES ops.cpp ISA_SOURCES kernels.cpp ISA x86-64-v3
  OPS twice DTYPES float32 INSTALL_DIR demo/_native)
"""


def _project(root: Path, body: str, *, find: str = "find_package(ptkit CONFIG REQUIRED)\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernels.cpp").write_text(KERNELS_CPP)
    (root / "ops.cpp").write_text(OPS_CPP)
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.26)\nproject(demo LANGUAGES CXX)\n"
        + find
        + 'message(STATUS "demo: ptkit_DIR=${ptkit_DIR}")\n'
        + 'message(STATUS "demo: python path=${PTKIT_PYTHON_PATH}")\n'
        + body
    )
    return root


def _report(build: Path) -> dict[str, dict[str, str]]:
    data = json.loads((build / "ptkit-build-report.json").read_text())
    return {row["backend"]: row for row in data["backends"]}


def _cmake_dir() -> Path:
    proc = run([str(VENV_BIN / "ptkit"), "--cmake-dir"], env=python_env(), cwd=Path("/"))
    return Path(proc.stdout.strip())


def _check_library(library: Path, manifest_path: Path) -> dict[str, object]:
    """The manifest is valid, names this file with its sha256, and the op runs."""
    import jsonschema

    manifest = json.loads(manifest_path.read_text())
    schema = json.loads((SITE / "ptkit" / "loading" / "manifest.schema.json").read_text())
    jsonschema.validate(manifest, schema)
    assert manifest["library"] == library.name
    assert manifest["sha256"] == hashlib.sha256(library.read_bytes()).hexdigest()
    proc = run(
        [
            sys.executable,
            "-c",
            "import sys, torch; torch.ops.load_library(sys.argv[1]); "
            "print(torch.ops.demo.twice(torch.arange(4.0)).tolist())",
            str(library),
        ],
        env=python_env(),
        cwd=Path("/"),
    )
    assert proc.stdout.strip() == "[0.0, 2.0, 4.0, 6.0]"
    return manifest


def test_the_wheel_ships_the_cmake_package_and_ptkit_cmake_dir_prints_it(
    toolkit_wheel: Path,
) -> None:
    with zipfile.ZipFile(toolkit_wheel) as wheel:
        shipped = {
            n for n in wheel.namelist() if n.startswith("ptkit/cmake/") and not n.endswith("/")
        }
        entry_points = next(
            wheel.read(n).decode() for n in wheel.namelist() if n.endswith("entry_points.txt")
        )
    expected = {f"ptkit/cmake/{p.name}" for p in (REPO / "src" / "ptkit" / "cmake").glob("*.cmake")}
    assert "ptkit/cmake/ptkit-config.cmake" in expected
    assert shipped == expected
    # scikit-build-core's cmake.root group: ptkit_ROOT = the ptkit package folder.
    assert re.search(r"\[cmake\.root\]\nptkit = ptkit\n", entry_points)

    assert _cmake_dir() == INSTALLED_CMAKE_DIR
    assert (INSTALLED_CMAKE_DIR / "ptkit-config.cmake").is_file()
    # python -m ptkit, and neither form imports torch.
    probe = (
        "import atexit, sys, runpy\n"
        "atexit.register(lambda: sys.stderr.write('TORCH=%s' % ('torch' in sys.modules)))\n"
        "sys.argv = ['ptkit', '--cmake-dir']\n"
        "runpy.run_module('ptkit', run_name='__main__')\n"
    )
    proc = run([sys.executable, "-c", probe], env=python_env(), cwd=Path("/"))
    assert proc.stdout.strip() == str(INSTALLED_CMAKE_DIR)
    assert proc.stderr.endswith("TORCH=False"), proc.stderr


def test_the_entry_point_object_is_the_ptkit_folder_without_importing_torch() -> None:
    code = (
        "import sys, importlib.metadata as md, importlib.resources as r\n"
        "(ep,) = [e for e in md.entry_points(group='cmake.root') if e.name == 'ptkit']\n"
        "obj = ep.load()\n"
        "print(r.files(obj)); print(obj.__path__[0]); print('torch' in sys.modules)\n"
    )
    proc = run([sys.executable, "-c", code], env=python_env(), cwd=Path("/"))
    assert proc.stdout.split() == [str(SITE / "ptkit"), str(SITE / "ptkit"), "False"]


def test_plain_cmake_builds_a_kernel_library_with_the_installed_package(tmp_path: Path) -> None:
    project = _project(
        tmp_path / "demo", ADD_DEMO_CPU, find="find_package(ptkit 0.1 CONFIG REQUIRED)\n"
    )
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    proc = cmake_configure(
        project,
        build,
        f"-Dptkit_DIR={_cmake_dir()}",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        "-DCMAKE_BUILD_TYPE=Release",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The installed package, asking the installed ptkit: no source tree involved.
    assert f"demo: ptkit_DIR={INSTALLED_CMAKE_DIR}" in proc.stdout
    assert f"demo: python path={SITE}" in proc.stdout
    rows = _report(build)
    assert rows["cpu"]["status"] == "built"
    assert rows["cpu"]["detail"].startswith("demo_cpu: isa x86-64-v3, default")
    assert rows["cuda"]["detail"] == "not requested by this project"
    run([str(VENV_BIN / "cmake"), "--build", str(build)])
    run([str(VENV_BIN / "cmake"), "--install", str(build)])

    native = prefix / "demo" / "_native"
    manifest = _check_library(native / "libdemo_cpu.so", native / "demo_cpu.manifest.json")
    assert manifest["backend"] == "cpu" and manifest["namespace"] == "demo"
    assert manifest["targets"] == {"isa": ["x86-64-v3", "default"]}
    assert manifest["ops"] == {"twice": ["float32"]}


def test_the_documented_low_level_calls_equal_ptkit_add_kernel_library(tmp_path: Path) -> None:
    doc = (REPO / "docs" / "cmake.md").read_text()
    low_level = re.search(r"<!-- equivalent:cpu -->\n```cmake\n(.*?)```", doc, re.S)
    assert low_level, "docs/cmake.md lost its <!-- equivalent:cpu --> block"
    body = ADD_DEMO_CPU + low_level.group(1)
    project = _project(tmp_path / "demo", body)
    (project / "include").mkdir()
    build = tmp_path / "build"
    proc = cmake_configure(project, build, f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    high = json.loads((build / "demo_cpu.manifest.in.json").read_text())
    low = json.loads((build / "demo_low.manifest.in.json").read_text())
    assert (high.pop("library"), low.pop("library")) == ("libdemo_cpu.so", "libdemo_low.so")
    assert high == low
    rows = json.loads((build / "ptkit-build-report.json").read_text())["backends"]
    details = [r["detail"] for r in rows if r["backend"] == "cpu" and r["status"] == "built"]
    assert details[0].startswith("demo_cpu: isa x86-64-v3, default")
    assert details[1] == "demo_low: isa x86-64-v3, default"


def test_scikit_build_core_finds_ptkit_with_no_path(tmp_path: Path) -> None:
    project = _project(
        tmp_path / "demo",
        'message(STATUS "demo: ptkit_ROOT=${ptkit_ROOT}")\n' + ADD_DEMO_CPU,
    )
    (project / "demo").mkdir()
    (project / "demo" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core>=1.1", "ptkit", "torch>=2.10"]\n'
        'build-backend = "scikit_build_core.build"\n\n'
        '[project]\nname = "demo"\nversion = "0.1"\n\n'
        "[tool.scikit-build]\n"
        'wheel.py-api = "py3"\n'
        'cmake.build-type = "Release"\n'
        f'build-dir = "{(tmp_path / "skbuild").as_posix()}"\n'
        # Only the cmake.root entry point can find ptkit: site-packages is no prefix.
        "search.site-packages = false\n"
    )
    out = tmp_path / "wheels"
    proc = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(out),
            str(project),
        ],
        env=python_env(),
        cwd=tmp_path,
    )
    log = proc.stdout + proc.stderr
    init = (tmp_path / "skbuild" / "CMakeInit.txt").read_text()
    assert "CMAKE_PREFIX_PATH" not in init and f"set(ptkit_ROOT [===[{SITE / 'ptkit'}]===]" in init
    assert f"demo: ptkit_ROOT={SITE / 'ptkit'}" in log
    assert f"demo: ptkit_DIR={INSTALLED_CMAKE_DIR}" in log
    assert "demo_cpu: isa x86-64-v3, default" in log  # the build report
    (wheel,) = out.glob("demo-0.1-py3-none-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"demo/_native/libdemo_cpu.so", "demo/_native/demo_cpu.manifest.json"} <= names
        archive.extractall(tmp_path / "unpacked")
    native = tmp_path / "unpacked" / "demo" / "_native"
    _check_library(native / "libdemo_cpu.so", native / "demo_cpu.manifest.json")


BAD_CALLS = {
    "unknown backend": (
        "ptkit_add_kernel_library(demo_x BACKEND rocm NAMESPACE demo SOURCES ops.cpp "
        "OPS twice DTYPES float32 INSTALL_DIR demo/_native)\n",
        "ptkit_add_kernel_library(demo_x): BACKEND rocm is not one of cpu, cuda, hip, xpu, metal",
    ),
    "missing sources": (
        "ptkit_add_kernel_library(demo_x BACKEND cpu NAMESPACE demo "
        "OPS twice DTYPES float32 INSTALL_DIR demo/_native)\n",
        "ptkit_add_kernel_library(demo_x): SOURCES is required",
    ),
    "misspelled keyword": (
        "ptkit_add_kernel_library(demo_x BACKEND cpu NAMESPACE demo SOURCE ops.cpp "
        "OPS twice DTYPES float32 INSTALL_DIR demo/_native)\n",
        "ptkit_add_kernel_library(demo_x): unknown arguments: SOURCE;ops.cpp",
    ),
    "gpu backend not enabled": (
        "ptkit_add_kernel_library(demo_x BACKEND cuda NAMESPACE demo SOURCES k.cu TARGETS sm_90 "
        "OPS twice DTYPES float32 INSTALL_DIR demo/_native)\n",
        "ptkit_add_kernel_library(demo_x): BACKEND cuda needs ptkit_enable_backend(cuda) first",
    ),
    "metal kernels from C++": (
        "ptkit_add_metal_kernels(demo_metal SOURCES ops.cpp NAMESPACE demo OPS twice "
        "DTYPES float32 INSTALL_DIR demo/_native)\n",
        "ptkit_add_metal_kernels(demo_metal): SOURCES are .metal files; got ops.cpp",
    ),
    "small function without its target": (
        "ptkit_target_stable_abi(nowhere)\n",
        "ptkit_target_stable_abi(nowhere): no target named nowhere: add_library(nowhere MODULE",
    ),
    "small function before its backend": (
        "ptkit_resolve_targets(cuda TARGETS sm_90 RESULT_PREFIX r)\n",
        "ptkit_resolve_targets(cuda): no nvcc: call ptkit_enable_backend(cuda) first",
    ),
    "unknown dtype": (
        "add_library(demo_x MODULE ops.cpp)\n"
        "ptkit_install_kernel_library(demo_x BACKEND cpu NAMESPACE demo OPS twice "
        "DTYPES float64 INSTALL_DIR demo/_native)\n",
        "ptkit_install_kernel_library(demo_x): DTYPES float64 is not one of float32",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_a_wrong_call_fails_configure_naming_the_function(tmp_path: Path, case: str) -> None:
    body, expected = BAD_CALLS[case]
    project = _project(tmp_path / "demo", body)
    proc = cmake_configure(project, tmp_path / "build", f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}")
    assert proc.returncode != 0
    assert expected in " ".join(proc.stderr.split()), proc.stderr


def _cuda_project(root: Path, targets: str) -> Path:
    project = _project(
        root,
        "ptkit_enable_backend(cuda REQUIRED)\n"
        "ptkit_add_kernel_library(demo_cuda BACKEND cuda NAMESPACE demo SOURCES k.cu "
        f"TARGETS {targets} OPTIONAL_TARGETS sm_991 OPS twice DTYPES float32 "
        "INSTALL_DIR demo/_native)\n",
    )
    (project / "k.cu").write_text("__global__ void k() {}\n")
    return project


def test_a_cuda_target_nvcc_lacks_fails_with_the_fix(tmp_path: Path) -> None:
    project = _cuda_project(tmp_path / "demo", "sm_90 sm_990")
    build = tmp_path / "build"
    proc = cmake_configure(
        project,
        build,
        f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}",
        env={"PTKIT_CUDA_ROOT": str(_cuda_root())},
    )
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert (
        "ptkit_add_kernel_library(demo_cuda): CUDA target sm_990 needs a newer CUDA toolkit; "
        "found nvcc 13.5" in message
    )
    assert (
        "Fix: override the targets with PTKIT_CUDA_ARCHS (ones this compiler builds), or mark "
        "sm_990 optional in the recipe (targets.cuda-optional)." in message
    )
    row = _report(build)["cuda"]
    assert row["status"] == "failed" and "sm_990" in row["detail"]


@pytest.mark.parametrize("value", ["9.0;bogus;12.0+PTX", "9.0,10.0"])
def test_a_cuda_override_python_refuses_stops_configure_with_pythons_words(
    tmp_path: Path, value: str
) -> None:
    """PTKIT_CUDA_ARCHS is read by ptkit.backends.cuda only: CMake's error (and its report
    row) is the TargetError `python -m ptkit.backends request cuda` prints, word for word."""
    asked = subprocess.run(
        [sys.executable, "-m", "ptkit.backends", "request", "cuda", "--targets", "sm_90"],
        env=python_env(PTKIT_CUDA_ARCHS=value),
        capture_output=True,
        text=True,
        check=False,
    )
    assert asked.returncode == 1 and asked.stderr.startswith("ptkit: PTKIT_CUDA_ARCHS=")
    python_says = asked.stderr.strip().removeprefix("ptkit: ")
    project = _cuda_project(tmp_path / "demo", "sm_90")
    build = tmp_path / "build"
    proc = cmake_configure(
        project,
        build,
        f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}",
        env={"PTKIT_CUDA_ROOT": str(_cuda_root()), "PTKIT_CUDA_ARCHS": value},
    )
    assert proc.returncode != 0
    assert f"ptkit_add_kernel_library(demo_cuda): {python_says}" in " ".join(proc.stderr.split())
    row = _report(build)["cuda"]
    assert (row["status"], row["detail"]) == ("failed", f"demo_cuda: {python_says}")


def test_a_cuda_override_replaces_the_targets_and_optional_ones_are_dropped(
    tmp_path: Path,
) -> None:
    project = _cuda_project(tmp_path / "demo", "sm_90 compute_90")
    build = tmp_path / "build"
    proc = cmake_configure(
        project,
        build,
        f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}",
        env={"PTKIT_CUDA_ROOT": str(_cuda_root())},
    )
    assert proc.returncode == 0, proc.stderr
    assert "optional target(s) sm_991 dropped: nvcc 13.5" in " ".join(proc.stderr.split())
    manifest = json.loads((build / "demo_cuda.manifest.in.json").read_text())
    assert manifest["targets"] == {"sass": ["sm_90"], "ptx": ["compute_90"]}
    assert manifest["dropped_targets"] == ["sm_991"]
    overridden = cmake_configure(
        project,
        tmp_path / "build2",
        f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}",
        env={"PTKIT_CUDA_ROOT": str(_cuda_root()), "PTKIT_CUDA_ARCHS": "9.0 12.0+PTX"},
    )
    assert overridden.returncode == 0, overridden.stderr
    assert "ptkit: PTKIT_CUDA_ARCHS=9.0 12.0+PTX -> sm_90;sm_120;compute_120" in overridden.stdout
    manifest = json.loads((tmp_path / "build2" / "demo_cuda.manifest.in.json").read_text())
    assert manifest["targets"] == {"sass": ["sm_90", "sm_120"], "ptx": ["compute_120"]}
    assert manifest["dropped_targets"] == []


GPU_LIBRARIES = {
    # backend: (kernel file, its source, targets, the audit's line at install)
    "cuda": (
        "k.cu",
        # The install step checks OPS against what the library registers: it registers twice.
        "#include <torch/csrc/stable/library.h>\n"
        "__global__ void k(float* x) { x[0] = 1; }\nvoid launch(float* x) { k<<<1, 1>>>(x); }\n"
        "torch::stable::Tensor twice(torch::stable::Tensor x) { return x; }\n"
        'STABLE_TORCH_LIBRARY_IMPL(demo, CUDA, m) { m.impl("twice", TORCH_BOX(&twice)); }\n',
        "sm_90 compute_90",
        "fatbinary audit: libdemo_cuda.so holds SASS sm_90; PTX compute_90 (as in its manifest)",
    ),
    "hip": (
        "k.hip",
        "#include <hip/hip_runtime.h>\n__global__ void k(float* x) { x[0] = 1; }\n"
        "void launch(float* x) { hipLaunchKernelGGL(k, dim3(1), dim3(1), 0, 0, x); }\n",
        "gfx90a",
        "offload bundle audit: libdemo_hip.so holds code objects for gfx90a (as in its manifest)",
    ),
}


@pytest.mark.parametrize("backend", sorted(GPU_LIBRARIES))
def test_a_gpu_library_from_the_installed_package_passes_the_code_audit_at_install(
    tmp_path: Path, backend: str
) -> None:
    """The install-time audit runs ptkit's tools (ptkit.release.fatbin, .offload) from the
    installed ptkit, the package that holds the CMake files."""
    kernel, source, targets, audit_line = GPU_LIBRARIES[backend]
    env: dict[str, str] = {}
    if backend == "cuda":
        env["PTKIT_CUDA_ROOT"] = str(_cuda_root())
    project = _project(
        tmp_path / "demo",
        f"ptkit_enable_backend({backend} REQUIRED)\n"
        f"ptkit_add_kernel_library(demo_{backend} BACKEND {backend} NAMESPACE demo SOURCES {kernel} "
        f"TARGETS {targets} OPS twice DTYPES float32 INSTALL_DIR demo/_native)\n",
    )
    (project / kernel).write_text(source)
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    proc = cmake_configure(
        project,
        build,
        f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _report(build)[backend]["status"] == "built"
    run([str(VENV_BIN / "cmake"), "--build", str(build)])
    installed = run([str(VENV_BIN / "cmake"), "--install", str(build)])
    assert audit_line in installed.stdout, installed.stdout
    manifest = json.loads(
        (prefix / "demo" / "_native" / f"demo_{backend}.manifest.json").read_text()
    )
    assert manifest["backend"] == backend


# --- a library's own arguments: DEFINES, COMPILE_OPTIONS, LINK_LIBRARIES, REQUIRES_ISA ---

SCALED_KERNELS_CPP = """\
#include <cstdint>
#ifndef DEMO_SCALE
#error "DEMO_SCALE is the library's DEFINES"
#endif
namespace demo::PTKIT_CPU_ISA {
void twice(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = DEMO_SCALE * x[i];
}
}  // namespace demo::PTKIT_CPU_ISA
"""
# An AMX instruction: it compiles only with the level's flags, and must never run on a CPU
# without AMX (the loader skips the library there).
AMX_CPP = """\
#include <immintrin.h>
extern "C" __attribute__((visibility("default"))) void demo_amx_release() { _tile_release(); }
"""
PACKAGE_INIT = "import ptkit.runtime\nptkit.runtime.load_package(__name__)\n"
LOAD_AND_RUN = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import demo, ptkit.runtime
decisions = [(d.library, d.status.value, d.reason) for d in ptkit.runtime.load_decisions("demo")]
out = torch.ops.demo.twice(torch.arange(4.0)).tolist() if decisions[0][1] == "loaded" else None
print(json.dumps({"decisions": decisions, "out": out}))
"""


def _build_package(tmp_path: Path, arguments: str, extra_sources: dict[str, str]) -> Path:
    """Build and install the demo library with ``arguments``; the package folder (demo/
    with its _native/) ptkit's loader loads it from."""
    project = _project(
        tmp_path / "demo",
        "ptkit_add_kernel_library(demo_cpu BACKEND cpu NAMESPACE demo\n"
        f"  SOURCES ops.cpp {' '.join(extra_sources)} ISA_SOURCES kernels.cpp ISA x86-64-v3\n"
        f"  {arguments}\n  OPS twice DTYPES float32 INSTALL_DIR demo/_native)\n",
    )
    (project / "kernels.cpp").write_text(SCALED_KERNELS_CPP)
    for name, text in extra_sources.items():
        (project / name).write_text(text)
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    proc = cmake_configure(project, build, f"-Dptkit_DIR={INSTALLED_CMAKE_DIR}",
                           f"-DCMAKE_INSTALL_PREFIX={prefix}", "-DCMAKE_BUILD_TYPE=Release")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run([str(VENV_BIN / "cmake"), "--build", str(build)])
    run([str(VENV_BIN / "cmake"), "--install", str(build)])
    (prefix / "demo" / "__init__.py").write_text(PACKAGE_INIT)
    return prefix


def _load(prefix: Path) -> dict[str, object]:
    proc = run([sys.executable, "-c", LOAD_AND_RUN, str(prefix)], env=python_env(), cwd=Path("/"))
    return json.loads(proc.stdout)


def test_a_librarys_defines_options_and_link_libraries_reach_its_sources_and_isa_copies(
    tmp_path: Path,
) -> None:
    prefix = _build_package(
        tmp_path,
        "DEFINES DEMO_SCALE=3.0f COMPILE_OPTIONS -fno-math-errno LINK_LIBRARIES m",
        {},
    )
    result = _load(prefix)
    # ops.cpp runs the baseline copy; every copy was compiled with DEMO_SCALE (#error else).
    assert result["out"] == [0.0, 3.0, 6.0, 9.0], result


@pytest.mark.parametrize("level", ["amx-bf16", "avx512-bf16", "x86-64-v3"])
def test_a_library_requiring_an_isa_level_loads_where_the_cpu_has_it_else_is_skipped(
    tmp_path: Path, level: str
) -> None:
    """The machines CI runs on differ (one had AVX2 only, another AVX-512 without AMX,
    another AMX): /proc/cpuinfo says which outcome is right here, and each level is
    checked for it. The AMX library holds AMX instructions (compiled with the level's
    flags), so a load where the CPU lacks AMX would be the bug this rule prevents."""
    from ptkit.platforms.required_isa import missing_cpu_flags, required_isa

    required = required_isa(level, "x86_64")
    text = Path("/proc/cpuinfo").read_text()
    flags = next(line for line in text.splitlines() if line.startswith("flags")).split()
    missing = missing_cpu_flags(required, flags[2:])
    sources = {"amx.cpp": AMX_CPP} if level.startswith("amx") else {}
    prefix = _build_package(tmp_path, f"DEFINES DEMO_SCALE=2.0f REQUIRES_ISA {level}", sources)
    manifest = json.loads((prefix / "demo" / "_native" / "demo_cpu.manifest.json").read_text())
    assert manifest["requires_isa"] == [level]
    result = _load(prefix)
    if missing:
        assert result["decisions"] == [
            [
                "libdemo_cpu.so",
                "skipped",
                f"requires the CPU ISA level {level} (REQUIRES_ISA), which this CPU lacks (no "
                f"{', '.join(missing)} in /proc/cpuinfo; {required.has_it} have it): run on "
                f"such a CPU, or ship a build without REQUIRES_ISA {level} for this one",
            ]
        ], result
    else:
        assert result["decisions"][0][1] == "loaded", result
        assert f"requires CPU ISA {level}" in str(result["decisions"][0][2])
        assert result["out"] == [0.0, 2.0, 4.0, 6.0]
