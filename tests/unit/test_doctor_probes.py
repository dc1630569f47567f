"""The doctor's probes: this machine (torch 2.14.1+cu130 in .venv, no GPU), crafted
folders (fake torch, dist-info names, manifests) and recorded machine trees; and
``collect_facts``' isolation (a probe that raises or hangs becomes a problem line)."""

from __future__ import annotations

import _hashlib
import hashlib
import importlib.machinery
import json
import os
import platform
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

import ptkit.doctor.collect as collect
from ptkit.backends import BACKENDS, TargetError
from ptkit.doctor.model import TorchInstall
from ptkit.doctor.probes.distributions import probe_distributions
from ptkit.doctor.probes.os_facts import manylinux_tag, probe_os
from ptkit.doctor.probes.packages import probe_packages, torch_facts_from
from ptkit.doctor.probes.profile import probe_profile
from ptkit.doctor.probes.python import probe_python
from ptkit.doctor.probes.toolchains import (
    could_build,
    hip_device_library_targets,
    probe_toolchains,
)
from ptkit.doctor.probes.torch_install import cxx11_abi, probe_torch
from ptkit.hardware import Machine, PlatformFacts, detect
from ptkit.loading.manifest import read_manifest
from ptkit.loading.rules import check_compatibility
from ptkit.loading.switches import RuntimeSwitches
from ptkit.platforms import manifest_platform
from ptkit.recipes.model import load_recipe
from ptkit.selection import recipes_dir

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "machines"
LINUX = PlatformFacts("Linux", "x86_64")
# The folder that holds the ptkit package under test (src/ or site-packages).
PTKIT_PARENT = Path(collect.__file__).resolve().parents[2]
HAS_TORCH = importlib.machinery.PathFinder.find_spec("torch", sys.path) is not None


def _fixture(name: str) -> Machine:
    return detect(MACHINES / name, commands=False, platform_facts=LINUX, nvml=False)


def _torch(**changes: object) -> TorchInstall:
    values: dict[str, object] = {
        "location": "/nowhere/torch",
        "version": "2.14.1+cu130",
        "cuda": "13.0",
        "hip": None,
        "xpu": False,
        "cxx11_abi": True,
        "compile_supported": True,
        "compile_reason": "",
        "cuda_runtimes": (),
        "problems": (),
    }
    values.update(changes)
    return TorchInstall(**values)  # type: ignore[arg-type]


# --- python, os ------------------------------------------------------------------------


def test_python_facts_of_this_interpreter() -> None:
    facts = probe_python()
    assert facts.version == platform.python_version()
    assert facts.implementation == sys.implementation.name
    assert facts.executable == sys.executable
    assert facts.free_threaded is (sysconfig.get_config_var("Py_GIL_DISABLED") == 1)
    if hasattr(sys, "_is_gil_enabled"):
        assert facts.gil_enabled is sys._is_gil_enabled()
    else:
        assert facts.gil_enabled is None


@pytest.mark.parametrize(
    ("libc", "machine", "tag"),
    [
        ("glibc 2.36", "x86_64", "manylinux_2_36_x86_64"),
        ("glibc 2.28", "aarch64", "manylinux_2_28_aarch64"),
        ("glibc 2.39", "arm64", "manylinux_2_39_aarch64"),
        ("glibc 2.17", "ppc64le", "manylinux_2_17_ppc64le"),
        ("musl 1.2.5", "x86_64", None),
        ("glibc 2.36", "sparc64", None),
        (None, "x86_64", None),
    ],
)
def test_manylinux_tag(libc: str | None, machine: str, tag: str | None) -> None:
    assert manylinux_tag(libc, machine) == tag


def test_os_from_a_fixture_root(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_text(
        'NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
    )
    facts = probe_os(tmp_path, platform_facts=LINUX, libc="glibc 2.36", release="6.1.0")
    assert facts.system == "Linux"
    assert facts.release == "6.1.0"
    assert facts.name == "Debian GNU/Linux 12 (bookworm)"
    assert facts.libc == "glibc 2.36"
    assert facts.manylinux == "manylinux_2_36_x86_64"
    # A recorded tree has no C library to ask, and here no os-release either.
    bare = probe_os(MACHINES / "h200", platform_facts=LINUX)
    assert (bare.name, bare.libc, bare.manylinux) == (None, None, None)


@pytest.mark.skipif(platform.system() != "Linux", reason="glibc facts are Linux's")
def test_os_of_this_machine() -> None:
    facts = probe_os()
    libc = os.confstr("CS_GNU_LIBC_VERSION")
    assert libc is not None
    version = libc.split()[1]
    assert facts.libc == f"glibc {version}"
    major, minor = version.split(".")[:2]
    assert facts.manylinux == f"manylinux_{major}_{minor}_{platform.machine()}"


# --- torch -----------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_TORCH, reason="no torch in this environment")
def test_torch_of_this_environment() -> None:
    facts = probe_torch()
    spec = importlib.machinery.PathFinder.find_spec("torch", sys.path)
    assert spec is not None
    assert spec.origin is not None
    assert facts.location == str(Path(spec.origin).parent)
    assert facts.version == "2.14.1+cu130"
    assert facts.cuda == "13.0"
    assert facts.hip is None
    assert facts.xpu is False
    # torch >= 2.7 hard-codes `return True` in compiled_with_cxx11_abi().
    assert facts.cxx11_abi is True
    assert facts.compile_supported is (sys.version_info < (3, 15))
    assert facts.problems == ()
    assert any(p.endswith("nvidia/cu13/lib/libcudart.so.13") for p in facts.cuda_runtimes)


def test_torch_missing(tmp_path: Path) -> None:
    facts = probe_torch(paths=[str(tmp_path)], environ={})
    assert facts.location is None
    assert facts.version is None
    assert facts.problems == ()
    assert facts.cuda_runtimes == ()


def test_fake_torch_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('this is not PyTorch')\n")
    real = tmp_path / "site" / "torch"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    facts = probe_torch(paths=[str(fake.parent), str(real.parent)], environ={})
    assert facts.location == str(fake)
    assert facts.version is None
    assert facts.compile_supported is None
    assert len(facts.problems) == 3
    assert facts.problems[0].startswith(f"torch/version.py is missing at {fake}: a broken or fake")
    assert facts.problems[1].startswith(f"no torch-*.dist-info beside {fake}")
    assert facts.problems[2].startswith(f"another torch at {real} is hidden by the one at {fake}")
    assert "torch" not in sys.modules or sys.modules["torch"].__file__ != str(fake / "__init__.py")


def _torch_tree(root: Path, version_py: str, dist_version: str) -> Path:
    torch = root / "torch"
    torch.mkdir(parents=True)
    (torch / "__init__.py").write_text("raise RuntimeError('never executed by the probe')\n")
    (torch / "version.py").write_text(version_py)
    dist = root / f"torch-{dist_version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.4\nName: torch\nVersion: {dist_version}\n")
    return torch


def test_version_file_and_metadata(tmp_path: Path) -> None:
    rocm = "__version__ = '2.14.1+rocm7.14'\ncuda = None\nhip: Optional[str] = '7.14.0-abc'\nxpu = None\n"
    torch = _torch_tree(tmp_path / "a", rocm, "2.14.1")
    lib = torch / "lib"
    lib.mkdir()
    (lib / "libcudart.so.13").write_bytes(b"")
    ld = tmp_path / "ld"
    ld.mkdir()
    (ld / "libcudart.so.12").write_bytes(b"")
    facts = probe_torch(paths=[str(tmp_path / "a")], environ={"LD_LIBRARY_PATH": str(ld)})
    assert (facts.version, facts.cuda, facts.hip, facts.xpu) == (
        "2.14.1+rocm7.14",
        None,
        "7.14.0-abc",
        False,
    )
    assert facts.problems == ()  # PyPI's METADATA has no local label: not a mismatch
    assert facts.cuda_runtimes == (str(lib / "libcudart.so.13"), str(ld / "libcudart.so.12"))
    overwritten = probe_torch(
        paths=[str(_torch_tree(tmp_path / "b", "__version__ = '2.14.1'\n", "2.13.0").parent)],
        environ={},
    )
    assert overwritten.version == "2.14.1"
    assert overwritten.problems == (
        "torch/version.py says 2.14.1 but torch-2.13.0.dist-info says 2.13.0: two installs "
        "overwrote each other; reinstall torch: pip install --force-reinstall torch (from the "
        "index of your variant)",
    )


def test_cxx11_abi_evidence(tmp_path: Path) -> None:
    old = tmp_path / "old"
    (old / "share" / "cmake" / "Torch").mkdir(parents=True)
    (old / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_text(
        'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n'
    )
    assert cxx11_abi(old) is False
    new = tmp_path / "new"
    new.mkdir()
    (new / "__init__.py").write_text(
        "def compiled_with_cxx11_abi() -> builtins.bool:\n"
        '    r"""Returns whether PyTorch was built with _GLIBCXX_USE_CXX11_ABI=1"""\n'
        "    return True\n"
    )
    assert cxx11_abi(new) is True
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "__init__.py").write_text(
        "def compiled_with_cxx11_abi():\n    return _C._GLIBCXX_USE_CXX11_ABI\n"
    )
    assert cxx11_abi(runtime) is None


# --- distributions ---------------------------------------------------------------------


def test_distributions_from_folder_names(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (
        first / "rocm-0.1.0.dist-info",
        first / "nvidia_cuda_runtime-13.0.96.dist-info",
        first / "requests-2.32.0.dist-info",
        first / "torch-2.1.0-py3.11.egg-info",
        second / "rocm-7.14.0.dist-info",
        second / "rocm_sdk_core-7.14.0.dist-info",
    ):
        folder.mkdir(parents=True)
    found = probe_distributions([str(first), str(second), str(tmp_path / "missing")])
    assert found == {
        "nvidia-cuda-runtime": "13.0.96",
        "rocm": "0.1.0",  # the first on the path wins, as for imports
        "rocm-sdk-core": "7.14.0",
        "torch": "2.1.0",
    }
    assert probe_distributions([str(first)], wanted=None)["requests"] == "2.32.0"


@pytest.mark.skipif(not HAS_TORCH, reason="no torch in this environment")
def test_distributions_of_this_environment() -> None:
    found = probe_distributions()
    assert found["torch"] == "2.14.1"
    assert found["nvidia-cuda-runtime"].startswith("13.0.")


# --- packages: the loader's decisions without loading ------------------------------------


def _manifest(folder: Path, backend: str, library: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "schema_version": 1,
        "package": "demo",
        "namespace": "demo",
        "library": library.name,
        "backend": backend,
        "variant": "cu13",
        "toolkit": {"name": "cuda", "version": "13.5"} if backend == "cuda" else {},
        "targets": {"sass": ["sm_90", "sm_100"], "ptx": ["compute_120"]}
        if backend == "cuda"
        else {"isa": ["default"]},
        "dropped_targets": [],
        "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130"},
        "platform": manifest_platform(),
        "ops": {"rms_norm": ["float32"], "silu_and_mul": ["float32"]}
        if backend == "cpu"
        else {"rms_norm": ["float32"]},
        "sha256": hashlib.sha256(library.read_bytes()).hexdigest(),
    }
    data.update(changes)
    path = folder / f"{library.stem}.manifest.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def demo_package(tmp_path: Path) -> Path:
    """demo/_native: a CPU library (a real ELF library of this machine) and a CUDA one."""
    native = tmp_path / "demo" / "_native"
    native.mkdir(parents=True)
    cpu = native / "libdemo_cpu.so"
    cpu.write_bytes(Path(_hashlib.__file__).read_bytes())
    cuda = native / "libdemo_cuda.so"
    cuda.write_bytes(Path(_hashlib.__file__).read_bytes())
    _manifest(native, "cpu", cpu)
    _manifest(native, "cuda", cuda)
    return native.parent


@pytest.mark.skipif(platform.system() != "Linux", reason="the manifests say Linux")
@pytest.mark.parametrize(
    ("machine_name", "torch_changes", "expected"),
    [
        ("h200", {}, {"cpu": "loaded", "cuda": "loaded"}),
        ("rtx4090", {}, {"cpu": "loaded", "cuda": "skipped"}),  # sm_89: no SASS, PTX too new
        ("mi300x", {"cuda": None, "hip": "7.14.0"}, {"cpu": "loaded", "cuda": "skipped"}),
        ("no_gpu", {"version": "2.9.0"}, {"cpu": "skipped", "cuda": "skipped"}),
        ("no_gpu", {"cuda": "12.8"}, {"cpu": "loaded", "cuda": "skipped"}),
    ],
)
def test_decisions_are_the_loaders(
    demo_package: Path,
    machine_name: str,
    torch_changes: dict[str, object],
    expected: dict[str, str],
) -> None:
    torch = _torch(**torch_changes)
    machine = _fixture(machine_name)
    switches = RuntimeSwitches()
    (package,) = probe_packages(
        torch=torch, machine=machine, environ={}, packages={"demo": demo_package}
    )
    assert {lib.backend: lib.status for lib in package.libraries} == expected
    predicted = torch_facts_from(torch, machine)
    assert predicted is not None
    facts = predicted[0]
    for library in package.libraries:
        manifest = read_manifest(
            demo_package / "_native" / f"{Path(library.library).stem}.manifest.json"
        )
        reason = check_compatibility(manifest, facts, switches, manifest_platform())
        if library.status == "skipped":
            assert library.reason == reason
        else:
            assert reason is None
    # The real loader, on the manifest it skips, gives the same record (nothing loads).
    if not HAS_TORCH:
        return
    from ptkit.runtime.loader import load_native_libraries

    skipped = [
        demo_package / "_native" / f"{Path(lib.library).stem}.manifest.json"
        for lib in package.libraries
        if lib.status == "skipped"
    ]
    for decision, library in zip(
        load_native_libraries(skipped, facts=facts, switches=switches),
        [lib for lib in package.libraries if lib.status == "skipped"],
        strict=True,
    ):
        assert (decision.status.value, decision.reason) == (library.status, library.reason)


@pytest.mark.skipif(platform.system() != "Linux", reason="the manifests say Linux")
def test_routes_and_integrity(demo_package: Path) -> None:
    machine = _fixture("no_gpu")
    (package,) = probe_packages(
        torch=_torch(), machine=machine, environ={}, packages={"demo": demo_package}
    )
    assert package.variant == "cu13"
    assert [(r.op, r.device_type, r.implementation) for r in package.routes] == [
        ("rms_norm", "cpu", "native"),
        ("silu_and_mul", "cpu", "native"),
        ("rms_norm", "cuda", "native"),  # no GPU: nothing to cover, the library would load
        ("silu_and_mul", "cuda", "reference"),
    ]
    # routing.routes' own words, as explain() would print them: the CUDA library loaded
    # but its manifest does not list silu_and_mul.
    assert package.routes[3].reason == (
        "libdemo_cuda.so is loaded but was built without silu_and_mul (its manifest lists rms_norm)"
    )
    assert package.routes[2].reason.startswith(
        "libdemo_cuda.so loaded: cu13 variant, built with torch 2.14.1+cu130, stable ABI "
        "target 2.10, devices no NVIDIA GPU visible; dtypes float32"
    )
    # PTKIT_FORCE_REFERENCE: every library skipped, as the loader would.
    (forced,) = probe_packages(
        torch=_torch(),
        machine=machine,
        environ={"PTKIT_FORCE_REFERENCE": "1"},
        packages={"demo": demo_package},
    )
    assert {lib.reason for lib in forced.libraries} == {
        "native code switched off by PTKIT_FORCE_REFERENCE=1"
    }
    # A modified library fails the integrity rule.
    (demo_package / "_native" / "libdemo_cpu.so").write_bytes(b"\x7fELF truncated")
    (broken,) = probe_packages(
        torch=_torch(), machine=machine, environ={}, packages={"demo": demo_package}
    )
    cpu = next(lib for lib in broken.libraries if lib.backend == "cpu")
    assert cpu.status == "failed"
    assert cpu.reason.startswith("libdemo_cpu.so does not match its manifest (sha256 ")


def test_packages_without_torch(demo_package: Path) -> None:
    (package,) = probe_packages(
        torch=_torch(location=None, version=None, cuda=None),
        machine=None,
        environ={},
        packages={"demo": demo_package},
    )
    assert [lib.status for lib in package.libraries] == ["skipped", "skipped"]
    assert package.libraries[0].reason == (
        "torch is not installed: import demo fails before any library loads; install torch"
    )
    assert package.routes == ()


def test_unreadable_manifest(tmp_path: Path) -> None:
    native = tmp_path / "demo" / "_native"
    native.mkdir(parents=True)
    (native / "bad.manifest.json").write_text("{not json")
    (package,) = probe_packages(
        torch=_torch(), machine=None, environ={}, packages={"demo": native.parent}
    )
    (library,) = package.libraries
    assert (library.library, library.backend, library.status) == (
        "bad.manifest.json",
        "unknown",
        "failed",
    )
    assert library.reason.startswith("unreadable manifest: ")


# --- profile ---------------------------------------------------------------------------


def test_profile_on_an_h200(tmp_path: Path) -> None:
    torch = tmp_path / "torch"
    (torch / "cuda").mkdir(parents=True)
    (torch / "cuda" / "graphs.py").write_text("")
    (torch / "distributed").mkdir()
    (torch / "distributed" / "distributed_c10d.py").write_text('Backend.register_backend("nccl2")')
    facts = probe_profile(_torch(location=str(torch)), _fixture("h200"), paths=[str(tmp_path)])
    assert facts.graph_capture == "CUDA graphs via torch.cuda.CUDAGraph"
    assert facts.distributed_backend.startswith("nccl2 (NVIDIA GPU visible")
    assert facts.gemm_backends == ("ATEN",)  # no triton, no cutlass on these paths
    assert "GEMM TRITON: triton is not installed" in facts.notes


def test_profile_without_a_gpu() -> None:
    facts = probe_profile(_torch(), _fixture("no_gpu"), paths=[])
    assert facts.graph_capture == "eager (no CUDA, ROCm or XPU device: graphs need one)"
    assert facts.distributed_backend.startswith("gloo (no GPU is visible")
    assert facts.gemm_backends == ("ATEN", "CPP")


# --- toolchains ------------------------------------------------------------------------


NVCC_13_0 = ["sm_75", "sm_80", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "compute_120"]
# Into ptkit's toolchain cache, never torch's environment.
CU13_TOOLKIT = "install the cu13 recipe's toolkit: ptkit toolchain install cu13"


def test_what_nvcc_could_build() -> None:
    """The build's own resolution (Backend.resolve), with the recipe's toolkit as the fix."""
    cuda, cu13 = BACKENDS["cuda"], load_recipe("cu13", recipes_dir())
    assert could_build(cuda, cu13, NVCC_13_0, "nvcc 13.0.88") == (
        "cu13: nothing: CUDA target sm_107 needs CUDA >= 13.5; found nvcc 13.0.88 (it builds: "
        "sm_75 sm_80 sm_90 sm_100 sm_103 sm_110 sm_120 compute_120). Fix: "
        f"{CU13_TOOLKIT}, or mark sm_107 optional in the recipe (targets.cuda-optional)."
    )
    assert could_build(cuda, cu13, [*NVCC_13_0, "sm_107"], "nvcc 13.5.37") == (
        "cu13: sm_90, sm_100, sm_103, sm_107, sm_110, sm_120, compute_120"
    )


def test_nvcc_with_a_target_override() -> None:
    cuda, cu13 = BACKENDS["cuda"], load_recipe("cu13", recipes_dir())
    env = {"PTKIT_CUDA_ARCHS": "9.0;12.0+PTX"}
    assert could_build(cuda, cu13, NVCC_13_0, "nvcc 13.0.88", env) == (
        "cu13: sm_90, sm_120, compute_120 (from PTKIT_CUDA_ARCHS)"
    )


@pytest.mark.parametrize("value", ["9.0;bogus;12.0+PTX", "9.0,10.0"])
def test_a_bad_cuda_override_is_the_builds_error(value: str) -> None:
    """The same words as CMake's (python -m ptkit.backends request) and ptkit select's."""
    cuda, cu13 = BACKENDS["cuda"], load_recipe("cu13", recipes_dir())
    env = {"PTKIT_CUDA_ARCHS": value}
    with pytest.raises(TargetError) as build:
        cuda.requested_targets((), (), env)
    assert could_build(cuda, cu13, NVCC_13_0, "nvcc 13.0.88", env) == (
        f"cu13: nothing: {build.value}"
    )
    assert str(build.value).startswith(f"PTKIT_CUDA_ARCHS={value!r}: ")


def test_hip_targets_from_device_libraries(tmp_path: Path) -> None:
    bitcode = tmp_path / "lib" / "x86_64-linux-gnu" / "amdgcn" / "bitcode"
    bitcode.mkdir(parents=True)
    for name in ("oclc_isa_version_90a.bc", "oclc_isa_version_1030.bc", "ocml.bc"):
        (bitcode / name).write_bytes(b"")
    targets, where = hip_device_library_targets(tmp_path)
    assert (targets, where) == (("gfx90a", "gfx1030"), bitcode)
    hip, rocm = BACKENDS["hip"], load_recipe("rocm7.14", recipes_dir())
    assert could_build(hip, rocm, targets, "HIP 5.2.21153-0") == (
        "rocm7.14: nothing: HIP target gfx942 needs ROCm >= 6.0; found HIP 5.2.21153-0 (it "
        "builds: gfx1030 gfx90a). Fix: install the rocm7.14 recipe's toolkit: pip install "
        "'rocm[libraries,devel]==7.14.*' --index-url https://rocm.nightlies.amd.com/v2/gfx94X-dcgpu/, "
        "or mark gfx942 optional in the recipe (targets.hip-optional)."
    )
    assert could_build(hip, rocm, targets, "HIP 5.2", {"PTKIT_HIP_TARGETS": "gfx90a"}) == (
        "rocm7.14: gfx90a (from PTKIT_HIP_TARGETS)"
    )
    assert hip_device_library_targets(tmp_path / "none") == ((), None)


def _fake_nvcc(folder: Path, release: str, targets: str) -> Path:
    """A pip-layout toolkit (nvidia/cu13/bin/nvcc) whose nvcc is a shell script."""
    nvcc = folder / "nvidia" / "cu13" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  --version) echo "Cuda compilation tools, release {release}, V{release}.0";;\n'
        f'  *) for t in {targets}; do echo "$t"; done;;\n'
        "esac\n"
    )
    nvcc.chmod(0o755)
    return nvcc


@pytest.mark.skipif(os.name != "posix", reason="a shell-script nvcc")
def test_nvcc_rows_are_the_builds_candidates(tmp_path: Path) -> None:
    """Every candidate of CudaBackend.toolkit_candidates gets a row with its source; the
    one the build takes (find_toolkit) says so."""
    first = _fake_nvcc(tmp_path / "a", "13.5", " ".join([*NVCC_13_0, "sm_107"]))
    second = _fake_nvcc(tmp_path / "b", "13.0", " ".join(NVCC_13_0))
    cu13 = load_recipe("cu13", recipes_dir())
    no_cache = str(tmp_path / "no-cache")
    rows = probe_toolchains(
        environ={"PATH": str(tmp_path / "empty"), "PTKIT_CACHE_DIR": no_cache},
        timeout_s=5.0,
        recipes=[cu13],
        paths=[str(tmp_path / "a"), str(tmp_path / "b")],
    )
    nvccs = [r for r in rows if r.name == "nvcc"]
    assert [(r.path, r.version) for r in nvccs] == [(str(first), "13.5.0"), (str(second), "13.0.0")]
    assert nvccs[0].could_build == (
        "cu13: sm_90, sm_100, sm_103, sm_107, sm_110, sm_120, compute_120 "
        f"(pip ({tmp_path / 'a'}), used by the build)"
    )
    assert nvccs[1].could_build.startswith("cu13: nothing: CUDA target sm_107 needs CUDA >= 13.5")
    assert nvccs[1].could_build.endswith(f"(pip ({tmp_path / 'b'}))")
    # An explicit toolkit that is not there: the build fails on it, and says so.
    rows = probe_toolchains(
        environ={"PATH": "", "PTKIT_CUDA_ROOT": str(tmp_path / "nowhere")},
        timeout_s=5.0,
        recipes=[cu13],
        paths=[str(tmp_path / "a")],
    )
    (missing,) = [r for r in rows if r.name == "nvcc"]
    assert missing.problem == f"{tmp_path / 'nowhere' / 'bin' / 'nvcc'} does not exist"
    # None anywhere: the fix is the recipe's toolkit packages.
    rows = probe_toolchains(
        environ={"PATH": "", "PTKIT_CACHE_DIR": no_cache}, timeout_s=5.0, recipes=[cu13], paths=[]
    )
    (none,) = [r for r in rows if r.name == "nvcc"]
    assert none.path is None
    assert f"; {CU13_TOOLKIT}; or point PTKIT_CUDA_ROOT at a CUDA toolkit" in none.could_build


@pytest.mark.skipif(os.name != "posix", reason="a shell-script nvcc")
def test_a_toolchain_in_ptkits_cache_is_a_row_the_build_takes(tmp_path: Path) -> None:
    """`ptkit toolchain install` puts it there; the doctor lists it without a search path."""
    from ptkit.backends.toolchain_cache import CachedToolchain, metadata
    from ptkit.release.toolchains import toolchain_spec

    cu13 = load_recipe("cu13", recipes_dir())
    env = {"PATH": "", "PTKIT_CACHE_DIR": str(tmp_path / "cache")}
    spec = toolchain_spec(cu13)
    assert spec is not None
    site = spec.path(env) / "lib" / "python3.11" / "site-packages"
    nvcc = _fake_nvcc(site, "13.5", " ".join([*NVCC_13_0, "sm_107"]))
    made = CachedToolchain(spec.path(env), spec, (), "2026-01-01")
    (spec.path(env) / "toolchain.json").write_text(json.dumps(metadata(made)))
    rows = probe_toolchains(environ=env, timeout_s=5.0, recipes=[cu13], paths=[])
    (row,) = [r for r in rows if r.name == "nvcc"]
    assert (row.path, row.version) == (str(nvcc), "13.5.0")
    assert row.could_build.endswith(f"(ptkit toolchain cache ({site}), used by the build)")


# --- collect_facts ---------------------------------------------------------------------


def test_collect_on_a_recorded_machine() -> None:
    facts = collect.collect_facts(root=MACHINES / "h200", timeout_s=2.0)
    assert facts.machine is not None
    assert [g.arch for g in facts.machine.nvidia] == ["sm_90", "sm_90"]
    assert facts.probe_problems == {}
    assert set(facts.probe_seconds) == {
        "python",
        "os",
        "torch",
        "machine",
        "distributions",
        "packages",
        "profile",
    }
    assert facts.toolchains is None
    assert facts.smoke is None


def test_a_probe_that_raises_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(collect, "probe_os", boom)
    monkeypatch.setattr(collect, "probe_torch", boom)
    facts = collect.collect_facts(root=MACHINES / "no_gpu", timeout_s=2.0)
    assert facts.os is None
    assert facts.probe_problems == {
        "os": "crashed: RuntimeError: boom",
        "torch": "crashed: RuntimeError: boom",
        "packages": "not run: the torch probe gave no facts (see its problem)",
        "profile": "not run: the torch probe gave no facts (see its problem)",
    }
    assert facts.python is not None
    assert facts.machine is not None


def test_a_probe_that_hangs_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(*args: object, **kwargs: object) -> dict[str, str]:
        time.sleep(30)
        return {}

    monkeypatch.setattr(collect, "probe_distributions", hang)
    started = time.perf_counter()
    facts = collect.collect_facts(root=MACHINES / "no_gpu", timeout_s=0.5)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.5
    assert facts.distributions is None
    assert facts.probe_problems["distributions"].startswith("timed out after 0.5 s: ")
    assert facts.probe_seconds["distributions"] == 0.5
    assert facts.python is not None


def test_collect_does_not_import_torch() -> None:
    code = (
        "from ptkit.doctor.collect import collect_facts; f = collect_facts(); "
        "import sys; print('torch' in sys.modules, sorted(f.probe_problems))"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PTKIT_PARENT), *filter(None, [env.get("PYTHONPATH")])])
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False []"


@pytest.mark.skipif(os.name != "posix", reason="a shell-script nvcc")
def test_a_hanging_nvcc_is_a_problem_row(tmp_path: Path) -> None:
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\nsleep 30\n")
    nvcc.chmod(0o755)
    started = time.perf_counter()
    rows = probe_toolchains(
        environ={"PTKIT_CUDA_ROOT": str(tmp_path / "cuda"), "PATH": str(tmp_path)},
        timeout_s=0.3,
        recipes=[],
        paths=[],
    )
    assert time.perf_counter() - started < 10
    row = next(r for r in rows if r.path == str(nvcc))
    assert (row.name, row.version, row.targets) == ("nvcc", None, ())
    assert row.problem == f"{nvcc} --version: no answer within 0.3 s (killed)"
    assert row.could_build == (
        "nothing: its targets could not be listed (PTKIT_CUDA_ROOT, used by the build)"
    )
