"""The loader's and the doctor's per-OS decisions, one table per decision, for Linux,
macOS and Windows, on this (Linux) machine: each decision is the platform module's
(``ptkit.platforms``), a pure function of the facts it is given, so another OS's answer
is tested without that OS. Real files in ``tmp_path``; the one stand-in is
``fake_add_dll_directory_for_absent_windows`` (``os.add_dll_directory`` exists on Windows
only), and the loader is run for real with it.
"""

from __future__ import annotations

import _hashlib
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

import pytest

from ptkit.backends import BACKENDS
from ptkit.doctor.model import TorchInstall
from ptkit.doctor.probes.packages import probe_packages, torch_facts_from
from ptkit.hardware.facts import AppleGpu, Machine
from ptkit.loading.manifest import kernel_libraries
from ptkit.loading.rules import LoadStatus, listed_manifests
from ptkit.platforms import PLATFORMS, CpuFacts, Platform, manifest_platform
from ptkit.platforms.base import MpsSupport
from ptkit.platforms.linux import cpuinfo_features
from ptkit.platforms.macos import TORCH_MINIMUM_MACOS, macos_version_tuple

LINUX, MACOS, WINDOWS = PLATFORMS["linux"], PLATFORMS["macos"], PLATFORMS["windows"]
ON_LINUX = platform.system() == "Linux"

# --- library file names ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("os_name", "file_name", "pattern"),
    [
        ("linux", "libptkit_cpu.so", "lib*.so"),
        ("macos", "libptkit_cpu.dylib", "lib*.dylib"),
        ("windows", "ptkit_cpu.dll", "*.dll"),
    ],
)
def test_a_kernel_library_is_named_by_its_platform(
    os_name: str, file_name: str, pattern: str
) -> None:
    named = PLATFORMS[os_name]
    assert named.library_file("ptkit_cpu") == file_name
    assert named.library_file("*") == pattern
    assert named.kernel_library_target(file_name) == "ptkit_cpu"  # the inverse


@pytest.mark.parametrize(
    ("os_name", "file_name", "target"),
    [
        ("linux", "libptkit_cuda.so", "ptkit_cuda"),
        ("linux", "libptkit_cpu.dylib", None),  # macOS's
        ("linux", "ptkit_cpu.dll", None),  # Windows'
        ("linux", "libptkit_cpu.so.1", None),  # a versioned soname is no kernel library
        ("linux", "ptkit_cpu.so", None),  # no lib prefix: not what CMake writes
        ("linux", "lib.so", None),  # no target name
        ("linux", "ptkit_cpu.manifest.json", None),
        ("macos", "libptkit_metal.dylib", "ptkit_metal"),
        ("macos", "libptkit_cpu.so", None),  # Linux's (and a Python module's) suffix
        ("macos", "rms_norm.metal", None),  # Metal sources are no library
        ("windows", "ptkit_xpu.dll", "ptkit_xpu"),
        ("windows", "PTKIT_CPU.DLL", "PTKIT_CPU"),  # Windows names ignore case
        ("windows", "libptkit_cpu.so", None),
        ("windows", "ptkit_cpu.pyd", None),  # a Python module, not a kernel library
    ],
)
def test_which_file_names_are_kernel_libraries(
    os_name: str, file_name: str, target: str | None
) -> None:
    assert PLATFORMS[os_name].kernel_library_target(file_name) == target


# Every OS's kernel libraries in one package folder, plus what is never one.
FOLDER_FILES = (
    "libptkit_cpu.so",
    "libptkit_cuda.so",
    "libptkit_cpu.dylib",
    "ptkit_cpu.dll",
    "PTKIT_XPU.DLL",
    "libptkit_cpu.so.1",
    "rms_norm.metal",
    "ptkit_ops.pyd",
    "notes.txt",
)


@pytest.mark.parametrize(
    ("os_name", "found"),
    [
        ("linux", ["libptkit_cpu.so", "libptkit_cuda.so"]),
        ("macos", ["libptkit_cpu.dylib"]),
        ("windows", ["PTKIT_XPU.DLL", "ptkit_cpu.dll"]),
    ],
)
def test_the_kernel_libraries_found_in_a_package_folder(
    tmp_path: Path, os_name: str, found: list[str]
) -> None:
    native = tmp_path / "demo" / "_native"
    native.mkdir(parents=True)
    for name in FOLDER_FILES:
        (native / name).write_bytes(b"\0")
    (native / "libstray_folder.so").mkdir()  # a folder is no library, whatever its name
    (native / "stray_folder.dll").mkdir()
    assert kernel_libraries(native, PLATFORMS[os_name]) == [native / n for n in found]
    assert kernel_libraries(tmp_path / "missing", PLATFORMS[os_name]) == []


@pytest.mark.parametrize(
    ("os_name", "orphans"),
    [
        ("linux", [("libptkit_cpu.so", "ptkit_cpu"), ("libptkit_cuda.so", "ptkit_cuda")]),
        ("macos", [("libptkit_cpu.dylib", "ptkit_cpu")]),
        ("windows", [("PTKIT_XPU.DLL", "PTKIT_XPU"), ("ptkit_cpu.dll", "ptkit_cpu")]),
    ],
)
def test_a_kernel_library_without_any_manifest_is_a_failed_install(
    tmp_path: Path, os_name: str, orphans: list[tuple[str, str]]
) -> None:
    """What the loader, the session and the doctor report for a native folder that holds
    this OS's libraries and no manifest: each one FAILED, naming the manifest it lacks;
    another OS's libraries there are not this OS's business."""
    native = tmp_path / "_native"
    native.mkdir()
    for name in FOLDER_FILES:
        (native / name).write_bytes(b"\0")
    manifests, decisions = listed_manifests(native, PLATFORMS[os_name])
    assert manifests == []
    assert [(d.library, d.status) for d in decisions] == [
        (name, LoadStatus.FAILED) for name, _ in orphans
    ]
    for decision, (_, target) in zip(decisions, orphans, strict=True):
        assert decision.reason.startswith(
            f"a kernel library with no manifest beside it (no {target}.manifest.json in "
            "_native/): ptkit loads only a library its manifest describes"
        )
    # A folder with manifests is read by them alone (each names its own library).
    (native / "ptkit_cpu.manifest.json").write_text("{}")
    assert listed_manifests(native, PLATFORMS[os_name]) == (
        [native / "ptkit_cpu.manifest.json"],
        [],
    )


@pytest.mark.parametrize("os_name", ["linux", "macos", "windows"])
def test_a_folder_with_only_another_oss_libraries_has_nothing_to_load(
    tmp_path: Path, os_name: str
) -> None:
    others = [p for name, p in PLATFORMS.items() if name != os_name]
    for other in others:
        (tmp_path / other.library_file("ptkit_cpu")).write_bytes(b"\0")
    assert listed_manifests(tmp_path, PLATFORMS[os_name]) == ([], [])


# --- the DLL folders (Windows) -------------------------------------------------------------


TORCH_DIR = Path("/site/torch")
LIBRARY = Path("/site/demo/_native/demo_cpu.dll")


@pytest.mark.parametrize(
    ("os_name", "library", "folders"),
    [
        ("linux", LIBRARY, ()),
        ("macos", LIBRARY, ()),
        ("windows", LIBRARY, (TORCH_DIR / "lib", LIBRARY.parent)),
        # A library inside torch's own folder: the folder once.
        ("windows", TORCH_DIR / "lib" / "x.dll", (TORCH_DIR / "lib",)),
    ],
)
def test_the_folders_added_before_a_kernel_library_loads(
    os_name: str, library: Path, folders: tuple[Path, ...]
) -> None:
    assert PLATFORMS[os_name].library_search_folders(library, TORCH_DIR) == folders


class FakeDllDirectory:
    """What ``os.add_dll_directory`` returns on Windows: closing it removes the folder."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.closed = False

    def close(self) -> None:
        self.closed = True


def fake_add_dll_directory_for_absent_windows(path: str) -> FakeDllDirectory:
    """Stands in for ``os.add_dll_directory``, which only Windows has: it says on stderr
    that it was called, in the same stream as the loader's trace, so the order shows."""
    print(f"fake add_dll_directory {path}", file=sys.stderr, flush=True)
    return FakeDllDirectory(path)


@pytest.fixture
def fresh_dll_folders(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """A process with no folder added yet, and the stand-in for Windows' function."""
    pytest.importorskip("torch")
    from ptkit.runtime import library_folders

    handles: dict[str, object] = {}
    monkeypatch.setattr(library_folders, "_handles", handles)
    monkeypatch.setattr(
        os, "add_dll_directory", fake_add_dll_directory_for_absent_windows, raising=False
    )
    return handles


def _cpu_package(root: Path, namespace: str) -> Path:
    """A native folder with one CPU library this machine can load (a copy of Python's
    own _hashlib extension: a real shared library that registers nothing) and its
    manifest; returns the manifest."""
    native = root / "_native"
    native.mkdir(parents=True)
    library = native / "libdemo_cpu.so"
    library.write_bytes(Path(_hashlib.__file__).read_bytes())
    manifest = {
        "schema_version": 1,
        "package": namespace,
        "namespace": namespace,
        "library": library.name,
        "backend": "cpu",
        "variant": "cpu",
        "toolkit": {},
        "targets": {"isa": ["default"]},
        "dropped_targets": [],
        "torch": {"target_version": "2.10", "built_with": "2.14.1+cpu"},
        "platform": manifest_platform(),
        "ops": {"rms_norm": ["float32"]},
        "sha256": hashlib.sha256(library.read_bytes()).hexdigest(),
    }
    path = native / "demo_cpu.manifest.json"
    path.write_text(json.dumps(manifest))
    return path


@pytest.mark.skipif(not ON_LINUX, reason="the library is an ELF file of this machine")
def test_the_loader_adds_torchs_dll_folder_before_it_loads_on_windows(
    tmp_path: Path,
    fresh_dll_folders: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ptkit.loading import namespaces
    from ptkit.loading.rules import TorchFacts
    from ptkit.loading.switches import RuntimeSwitches
    from ptkit.runtime import loader
    from ptkit.runtime.library_folders import torch_package_dir

    monkeypatch.setattr(loader, "_claims", namespaces.Claims())  # this test's loads only
    manifest = _cpu_package(tmp_path, "ptkit_test_dll_folders")
    library = manifest.parent / "libdemo_cpu.so"
    facts = TorchFacts("2.14.1+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
    trace = RuntimeSwitches(load_trace=True)
    (decision,) = loader.load_native_libraries(
        [manifest], facts=facts, switches=trace, platform=WINDOWS
    )
    assert decision.status is LoadStatus.LOADED, decision.reason
    torch_lib = torch_package_dir() / "lib"
    assert capsys.readouterr().err.splitlines() == [
        f"fake add_dll_directory {torch_lib}",
        f"fake add_dll_directory {library.parent}",
        f"ptkit: added {torch_lib} to the DLL search path",
        f"ptkit: added {library.parent} to the DLL search path",
        f"ptkit: loading {library}",
        f"ptkit: loaded {library}",
    ]
    # The handles are kept open: closing one would take its folder off the search path.
    handles = list(fresh_dll_folders.values())
    assert [h.path for h in handles] == [str(torch_lib), str(library.parent)]  # type: ignore[attr-defined]
    assert not any(h.closed for h in handles)  # type: ignore[attr-defined]
    # A second load of the same folders adds nothing again.
    loader.load_native_libraries([manifest], facts=facts, switches=trace, platform=WINDOWS)
    assert "add_dll_directory" not in capsys.readouterr().err


@pytest.mark.skipif(not ON_LINUX, reason="the library is an ELF file of this machine")
@pytest.mark.parametrize("os_name", ["linux", "macos"])
def test_the_loader_adds_no_folder_elsewhere(
    tmp_path: Path,
    fresh_dll_folders: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    os_name: str,
) -> None:
    from ptkit.loading import namespaces
    from ptkit.loading.rules import TorchFacts
    from ptkit.loading.switches import RuntimeSwitches
    from ptkit.runtime import loader

    monkeypatch.setattr(loader, "_claims", namespaces.Claims())
    manifest = _cpu_package(tmp_path, f"ptkit_test_no_dll_folders_{os_name}")
    facts = TorchFacts("2.14.1+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
    (decision,) = loader.load_native_libraries(
        [manifest],
        facts=facts,
        switches=RuntimeSwitches(load_trace=True),
        platform=PLATFORMS[os_name],
    )
    assert decision.status is LoadStatus.LOADED, decision.reason
    err = capsys.readouterr().err
    assert "add_dll_directory" not in err and "DLL search path" not in err
    assert fresh_dll_folders == {}


@pytest.mark.skipif(not ON_LINUX, reason="the library is an ELF file of this machine")
def test_the_install_time_child_adds_the_folders_too(
    tmp_path: Path, fresh_dll_folders: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m ptkit.runtime.registrations`` loads a library alone: the same folders."""
    from ptkit.runtime.library_folders import torch_package_dir
    from ptkit.runtime.registrations import read_library

    library = _cpu_package(tmp_path, "ptkit_test_child").parent / "libdemo_cpu.so"
    registered = read_library(library, [], platform=WINDOWS)
    assert (registered.namespaces, registered.schemas, registered.kernels) == ((), {}, {})
    lines = capsys.readouterr().err.splitlines()
    assert lines.index(f"fake add_dll_directory {torch_package_dir() / 'lib'}") < lines.index(
        f"ptkit: loading {library}"
    )


def test_no_folder_is_added_that_does_not_exist(
    tmp_path: Path, fresh_dll_folders: dict[str, object]
) -> None:
    from ptkit.runtime.library_folders import add_library_folders

    library = tmp_path / "_native" / "demo_cpu.dll"  # its folder is not there either
    assert add_library_folders(library, WINDOWS, torch_dir=tmp_path / "no-torch") == ()
    assert fresh_dll_folders == {}


# --- MPS (Apple GPUs, the metal backend) -----------------------------------------------


MPS_READY = MpsSupport(True, True, "")


@pytest.mark.parametrize(
    ("os_name", "machine", "apple_gpu", "os_version", "expected"),
    [
        ("macos", "arm64", True, "15.1", MPS_READY),
        ("macos", "arm64", True, TORCH_MINIMUM_MACOS, MPS_READY),
        ("macos", "arm64", True, "14", MPS_READY),  # 14 is 14.0
        (
            "macos",
            "arm64",
            True,
            "13.6.1",
            MpsSupport(
                True,
                False,
                "macOS 13.6.1 is older than 14.0, the oldest torch's arm64 wheels run on",
            ),
        ),
        ("macos", "arm64", True, "", MpsSupport(True, False, "the macOS version is unknown")),
        ("macos", "arm64", False, "15.1", MpsSupport(True, False, "no Apple GPU was found")),
        (
            "macos",
            "x86_64",
            False,
            "15.1",
            MpsSupport(False, False, "torch's macOS wheels are for arm64, not x86_64"),
        ),
        (
            "linux",
            "aarch64",
            True,
            None,
            MpsSupport(False, False, "torch has no MPS device on linux"),
        ),
        (
            "linux",
            "x86_64",
            False,
            None,
            MpsSupport(False, False, "torch has no MPS device on linux"),
        ),
        (
            "windows",
            "AMD64",
            False,
            None,
            MpsSupport(False, False, "torch has no MPS device on windows"),
        ),
    ],
)
def test_the_mps_decision_per_platform(
    os_name: str, machine: str, apple_gpu: bool, os_version: str | None, expected: MpsSupport
) -> None:
    assert PLATFORMS[os_name].mps_support(machine, apple_gpu, os_version) == expected


@pytest.mark.parametrize(
    ("version", "parsed"),
    [("14.0", (14, 0, 0)), ("14", (14, 0, 0)), ("15.1.1", (15, 1, 1)), ("", None), ("x", None)],
)
def test_macos_versions_compare_as_numbers(
    version: str, parsed: tuple[int, int, int] | None
) -> None:
    assert macos_version_tuple(version) == parsed


def _torch_install() -> TorchInstall:
    return TorchInstall(
        location="/nowhere/torch",
        version="2.14.1",
        cuda=None,
        hip=None,
        xpu=False,
        cxx11_abi=None,
        compile_supported=True,
        compile_reason="",
        cuda_runtimes=(),
        problems=(),
    )


def _machine(system: str, arch: str, apple: bool) -> Machine:
    gpus = (AppleGpu("Apple M3"),) if apple else ()
    return Machine(system, arch, None, None, None, apple=gpus)


@pytest.mark.parametrize(
    ("system", "arch", "apple", "macos_version", "has_mps", "metal_absent"),
    [
        ("Darwin", "arm64", True, "15.1", True, None),
        (
            "Darwin",
            "arm64",
            True,
            "13.6",
            True,
            "no MPS device is available (an Apple-silicon Mac with macOS 14.0 or later is needed)",
        ),
        ("Linux", "x86_64", False, "", False, "torch 2.14.1 was built without MPS support"),
        ("Windows", "AMD64", False, "", False, "torch 2.14.1 was built without MPS support"),
    ],
)
def test_the_doctor_predicts_the_metal_backend_per_platform(
    system: str,
    arch: str,
    apple: bool,
    macos_version: str,
    has_mps: bool,
    metal_absent: str | None,
) -> None:
    """The doctor's TorchFacts for a probed machine take the MPS rule from the machine's
    platform; the metal backend's verdict follows from them."""
    predicted = torch_facts_from(
        _torch_install(), _machine(system, arch, apple), macos_version=macos_version
    )
    assert predicted is not None
    facts = predicted[0]
    assert facts.has_mps is has_mps
    assert facts.mps_available is (metal_absent is None)
    assert BACKENDS["metal"].torch_absent_reason(facts) == metal_absent


@pytest.mark.parametrize(
    ("system", "arch", "library", "expected"),
    [
        ("Linux", "x86_64", "libdemo_cpu.so", ["libdemo_cpu.so"]),
        ("Darwin", "arm64", "libdemo_cpu.so", []),  # a Linux library on a Mac: not its own
        ("Darwin", "arm64", "libdemo_cpu.dylib", ["libdemo_cpu.dylib"]),
        ("Windows", "AMD64", "demo_cpu.dll", ["demo_cpu.dll"]),
    ],
)
def test_the_doctor_names_the_probed_machines_libraries(
    tmp_path: Path, system: str, arch: str, library: str, expected: list[str]
) -> None:
    """A package folder holding a library and no manifest: the doctor reports it by the
    file names of the machine it probed, as the loader there would."""
    native = tmp_path / "demo" / "_native"
    native.mkdir(parents=True)
    (native / library).write_bytes(b"\0")
    (package,) = probe_packages(
        torch=_torch_install(),
        machine=_machine(system, arch, apple=False),
        environ={},
        packages={"demo": tmp_path / "demo"},
    )
    assert [(lib.library, lib.status) for lib in package.libraries] == [
        (name, "failed") for name in expected
    ]


# --- the CPU's features (REQUIRES_ISA) ----------------------------------------------------


def test_linux_reads_the_cpu_features_from_proc_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n\nprocessor\t: 1\n")
    assert cpuinfo_features(cpuinfo) == (frozenset({"fpu", "sse", "avx2", "fma"}), str(cpuinfo))
    arm = tmp_path / "cpuinfo-arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert cpuinfo_features(arm) == (frozenset({"fp", "asimd", "sve"}), str(arm))


@pytest.mark.parametrize(
    ("os_name", "source"),
    [
        ("macos", "ptkit does not read the CPU's features on macos yet"),
        ("windows", "ptkit does not read the CPU's features on windows yet"),
    ],
)
def test_where_each_platform_reads_the_cpu_features(os_name: str, source: str) -> None:
    """macOS and Windows cannot tell yet: a library that requires an ISA level is then
    not loaded there (it could die of an illegal instruction)."""
    assert PLATFORMS[os_name].cpu_features() == (None, source)
    cpu = CpuFacts("x86_64", None, source)
    problem = PLATFORMS[os_name].required_isa_problem(("x86-64-v3",), cpu)
    assert problem is not None
    assert problem.startswith(f"requires the CPU ISA level x86-64-v3 and {source}, so ")


@pytest.mark.skipif(not ON_LINUX, reason="this machine's /proc/cpuinfo")
def test_linux_names_proc_cpuinfo_as_the_source() -> None:
    features, source = LINUX.cpu_features()
    assert (source, features is not None) == ("/proc/cpuinfo", True)
    cpu = CpuFacts("x86_64", frozenset({"avx2"}), source)
    assert LINUX.required_isa_problem((), cpu) is None


def test_every_platform_is_in_the_tables() -> None:
    """A fourth platform module must join these tables."""
    assert sorted(PLATFORMS) == ["linux", "macos", "windows"]
    assert all(isinstance(p, Platform) for p in PLATFORMS.values())
