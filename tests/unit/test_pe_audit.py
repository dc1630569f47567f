"""The PE audit (ptkit.release.pe_audit, with the shared rules of ptkit.release.linkage) on
real DLLs: small libraries cross-compiled here with zig (PyPI's ziglang: clang for the MSVC
target and lld-link) for Windows, each breaking one rule, in wheels written here;
``ptkit inspect``'s report of them.

The DLLs a library imports are import libraries made with ``zig dlltool`` from a .def
file (what the DLL exports): the audit reads the library's import table only, and the
names are the real ones (KERNEL32.dll, the UCRT's api-ms-win-crt-*, VCRUNTIME140.dll,
torch_cpu.dll, c10.dll with an MSVC-decorated C++ name, python3.dll). Every library is
linked with ``-nostdlib`` and its own entry point: no CRT to build (a cold zig cache would
spend two minutes on MinGW's), about 0.1 s a library."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "ziglang", reason="zig (PyPI's ziglang, requirements/dev.txt) builds the PE test DLLs"
)

from support import ptkit_from_source, wheel_holding_library

from ptkit.release.inspection import inspect_path
from ptkit.release.pe_audit import audit_pe_library, read_pe
from ptkit.release.torch_libraries import torch_libraries
from ptkit.release.wheel_audit import audit_wheel

TAG = "win_amd64"
NAME = "ptkit_cpu.dll"
# A DLL's entry point where no CRT provides one (lld-link's default name for -shared).
_ENTRY = (
    "EXTERN_C int __stdcall _DllMainCRTStartup(void* h, unsigned long r, void* p) "
    "{ (void)h; (void)r; (void)p; return 1; }\n"
)
# DLL -> what the tests import from it.
EXPORTS = {
    "KERNEL32.dll": ("GetTickCount",),
    "api-ms-win-crt-runtime-l1-1-0.dll": ("_initterm",),
    "VCRUNTIME140.dll": ("_purecall",),
    "torch_cpu.dll": ("aoti_torch_get_device_type",),
    "c10.dll": ("?foo@c10@@YAHH@Z",),
    "python3.dll": ("PyLong_FromLong",),
    "python311.dll": ("PyLong_FromLong",),
    "cudart64_12.dll": ("cudaGetDeviceCount",),
    "foo.dll": ("foo_f",),
    "ucrtbased.dll": ("_malloc_dbg",),
}
# A stable-ABI CPU kernel library as MSVC links it: torch's C shim, KERNEL32, the UCRT, and
# the MSVC runtime.
CLEAN_SOURCE = """
__declspec(dllimport) int aoti_torch_get_device_type(void* tensor, int* device_type);
__declspec(dllimport) unsigned long __stdcall GetTickCount(void);
__declspec(dllimport) int _initterm(void* first, void* last);
__declspec(dllimport) int _purecall(void);
__declspec(dllexport) int ptkit_test_f(void* tensor) {
  int t = 0;
  return aoti_torch_get_device_type(tensor, &t) + (int)GetTickCount() + _initterm(0, 0) + _purecall();
}
"""


def _zig(*args: str) -> None:
    cmd = [sys.executable, "-m", "ziglang", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


def _import_library(folder: Path, dll: str, names: tuple[str, ...], machine: str) -> Path:
    """``<dll>.<machine>.lib``: the import library of ``dll`` exporting ``names``."""
    folder.mkdir(parents=True, exist_ok=True)
    definition = folder / f"{dll}.{machine}.def"
    definition.write_text(f'LIBRARY "{dll}"\nEXPORTS\n' + "".join(f"{n}\n" for n in names))
    lib = definition.with_suffix(".lib")
    _zig("dlltool", "-m", machine, "-d", str(definition), "-l", str(lib))
    return lib


def _dll(
    folder: Path,
    name: str,
    source: str,
    imports: tuple[str, ...],
    stubs: dict[str, dict[str, Path]],
    *,
    arch: str = "x86_64",
    suffix: str = ".c",
    shared: bool = True,
) -> Path:
    """``folder/name`` compiled from ``source`` for ``arch`` Windows (MSVC target),
    importing from the DLLs ``imports``."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{name.split('.')[0]}{suffix}"
    src.write_text(
        ('#define EXTERN_C extern "C"\n' if suffix == ".cpp" else "#define EXTERN_C\n")
        + (_ENTRY if shared else _ENTRY.replace("_DllMainCRTStartup", "mainCRTStartup"))
        + source
    )
    out = folder / name
    libs = [str(stubs[arch][dll]) for dll in imports]
    # An executable names its entry and subsystem, which no CRT supplies here.
    kind = ["-shared"] if shared else ["-Wl,--subsystem,console", "-Wl,--entry,mainCRTStartup"]
    _zig(
        "cc",
        "-target",
        f"{arch}-windows-msvc",
        *kind,
        "-nostdlib",
        "-O2",
        "-o",
        str(out),
        str(src),
        *libs,
    )
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every library the tests audit, built once (each in a folder of its own)."""
    root = tmp_path_factory.mktemp("pe")
    machines = {"x86_64": "i386:x86-64", "aarch64": "arm64"}
    stubs = {
        arch: {
            dll: _import_library(root / "stubs", dll, names, machine)
            for dll, names in EXPORTS.items()
        }
        for arch, machine in machines.items()
    }
    system = (
        "torch_cpu.dll",
        "KERNEL32.dll",
        "api-ms-win-crt-runtime-l1-1-0.dll",
        "VCRUNTIME140.dll",
    )

    def one(kind: str, source: str, *imports: str, **kwargs: str | bool) -> Path:
        name = str(kwargs.pop("name", NAME))
        return _dll(root / kind, name, source, imports, stubs, **kwargs)  # type: ignore[arg-type]

    python_source = (
        "__declspec(dllimport) void* PyLong_FromLong(long v);\n"
        "__declspec(dllexport) void* ptkit_test_h(void) { return PyLong_FromLong(1); }\n"
    )
    return {
        "clean": one("clean", CLEAN_SOURCE, *system),
        "python3": one("python3", python_source, "python3.dll"),
        "python311": one("python311", python_source, "python311.dll"),
        "classic": one(
            "classic",
            "namespace c10 { __declspec(dllimport) int foo(int x); }\n"
            'extern "C" __declspec(dllexport) int ptkit_test_g(int x) { return c10::foo(x); }\n',
            "c10.dll",
            suffix=".cpp",
        ),
        "cuda": one(
            "cuda",
            "__declspec(dllimport) int cudaGetDeviceCount(int* n);\n"
            "__declspec(dllexport) int ptkit_test_c(void) { int n = 0; return cudaGetDeviceCount(&n); }\n",
            "cudart64_12.dll",
            name="ptkit_cuda.dll",
        ),
        "foo": one(
            "foo",
            "__declspec(dllimport) int foo_f(void);\n"
            "__declspec(dllexport) int ptkit_test_f(void) { return foo_f(); }\n",
            "foo.dll",
        ),
        "debug": one(
            "debug",
            "__declspec(dllimport) void* _malloc_dbg(unsigned long long n, int b, const char* f, int l);\n"
            "__declspec(dllexport) void* ptkit_test_f(void) { return _malloc_dbg(1, 1, 0, 0); }\n",
            "ucrtbased.dll",
        ),
        "module": one(
            "module", "__declspec(dllexport) void* PyInit_ptkit_cpu(void) { return 0; }\n"
        ),
        "arm64": one("arm64", CLEAN_SOURCE, *system, arch="aarch64"),
        "exe": one(
            "exe", "int ptkit_test_f(void) { return 1; }\n", name="ptkit_cpu.exe", shared=False
        ),
    }


def _manifest(library: Path, backend: str = "cpu") -> bytes:
    """A valid manifest of ``library`` (its sha256) for ``backend``."""
    return json.dumps(
        {
            "schema_version": 1,
            "package": "ptkit_ops",
            "namespace": "ptkit",
            "library": library.name,
            "backend": backend,
            "variant": backend,
            "toolkit": {"name": "zig", "version": "0.17.0"},
            "targets": {"isa": ["x86-64-v3", "default"]},
            "dropped_targets": [],
            "torch": {"target_version": "2.10", "built_with": "2.14.1"},
            "platform": "windows-amd64",
            "ops": {"rms_norm": ["float32"]},
            "sha256": hashlib.sha256(library.read_bytes()).hexdigest(),
        }
    ).encode()


def _wheel(folder: Path, library: Path, *, tag: str = TAG) -> Path:
    return wheel_holding_library(folder, library, _manifest(library), tag)


def _audit(library: Path, backend: str = "cpu", abi: str = "stable", tag: str = TAG) -> list[str]:
    """The PE rules alone, for a ``backend`` library of a ``tag`` wheel."""
    result = audit_pe_library(
        library,
        backend=backend,
        torch_patterns=torch_libraries(backend, "windows", abi),
        platforms=(tag,),
        abi=abi,
    )
    return list(result.problems)


def test_a_dll_of_torch_kernel32_the_ucrt_and_vcruntime_passes_in_its_wheel(
    built: dict[str, Path], tmp_path: Path
) -> None:
    result = audit_wheel(_wheel(tmp_path, built["clean"]))
    assert result.problems == (), result.format()
    (library,) = result.libraries
    assert library.binary_format == "PE"
    assert sorted(library.needed) == sorted(
        ["torch_cpu.dll", "KERNEL32.dll", "api-ms-win-crt-runtime-l1-1-0.dll", "VCRUNTIME140.dll"]
    )
    assert library.architectures == ("AMD64",)
    assert library.summary().startswith(f"{NAME}: imports ")
    assert library.summary().endswith("; AMD64")


def test_the_reader_sees_imports_exports_and_machine(built: dict[str, Path]) -> None:
    pe = read_pe(built["clean"])
    assert (pe.machine, pe.is_dll) == ("AMD64", True)
    assert pe.imports["torch_cpu.dll"] == ("aoti_torch_get_device_type",)
    assert pe.linkage.exported == ("ptkit_test_f",)
    assert pe.linkage.rpath == ()


@pytest.mark.parametrize(
    ("python", "tie"),
    [
        ("python311", "on one Python only"),
        # The limited API's DLL is every CPython 3's, but still Python's, and not all of them.
        ("python3", "only where a CPython that provides it has loaded it (not the free-threaded"),
    ],
)
def test_pythons_dll_is_refused(built: dict[str, Path], python: str, tie: str) -> None:
    (problem,) = _audit(built[python])
    assert problem.startswith(
        f"{NAME} links {python}.dll (import) for 1 symbol of Python's C API or torch's Python "
        f"bindings (PyLong_FromLong): the wheel would run {tie}"
    )
    assert "Fix: a kernel library links no Python" in problem


def test_a_dll_neither_torchs_nor_windows_is_refused(
    built: dict[str, Path], tmp_path: Path
) -> None:
    (problem,) = audit_wheel(_wheel(tmp_path, built["foo"])).problems
    assert problem.startswith(
        f"{NAME} links foo.dll, which is neither what torch provides to cpu code (torch.dll, "
        "torch_cpu.dll, c10.dll) nor a DLL every Windows has"
    )
    assert problem.endswith("users would not have it; link it statically or drop the dependency")


def test_the_gpu_runtime_is_a_gpu_librarys_only(built: dict[str, Path]) -> None:
    cuda = built["cuda"]
    assert _audit(cuda, backend="cuda") == []
    (problem,) = _audit(cuda, backend="cpu")
    assert problem.startswith("ptkit_cuda.dll links cudart64_12.dll, which is neither what torch")


def test_the_debug_runtime_says_debug_build(built: dict[str, Path]) -> None:
    (problem,) = _audit(built["debug"])
    assert problem == (
        f"{NAME} imports ucrtbased.dll, the debug C/C++ runtime of a Debug build: no user has "
        "it. Fix: build Release (CMAKE_BUILD_TYPE=Release, /MD not /MDd)"
    )


def test_a_c10_symbol_in_a_stable_abi_dll_is_refused_and_allowed_in_torch_mode(
    built: dict[str, Path],
) -> None:
    # MSVC's decoration (?foo@c10@@YAHH@Z), not Itanium's: the shared rule reads both.
    (problem,) = _audit(built["classic"])
    assert problem.startswith(
        f"{NAME} needs 1 torch C++ symbol outside the stable ABI (1 c10::; first: "
        "?foo@c10@@YAHH@Z): it uses torch's classic C++ API. Fix: build it in the torch mode"
    )
    assert _audit(built["classic"], abi="torch") == []


def test_an_exported_module_init_is_refused(built: dict[str, Path]) -> None:
    (problem,) = _audit(built["module"])
    assert problem.startswith(f"{NAME} exports PyInit_ptkit_cpu: it is a Python extension module")


def test_an_arm64_dll_in_an_amd64_wheel_and_an_exe_are_refused(built: dict[str, Path]) -> None:
    (problem,) = _audit(built["arm64"])
    assert problem.startswith(
        f"{NAME} is an ARM64 DLL but its wheel's tag {TAG} says AMD64: pip would install it "
        "on AMD64 Windows, where it does not load. Fix: build with the AMD64 MSVC toolchain"
    )
    assert _audit(built["arm64"], tag="win_arm64") == []
    (problem,) = _audit(built["exe"])
    assert problem.startswith("ptkit_cpu.exe is a PE image but not a DLL (no IMAGE_FILE_DLL)")


def test_a_corrupt_dll_is_a_problem_not_a_traceback(built: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / NAME
    broken.write_bytes(built["clean"].read_bytes()[:200])
    (problem,) = _audit(broken)
    assert problem.startswith(f"{NAME}: not a readable PE library (")
    assert problem.endswith("the wheel is corrupt; rebuild it")


def test_inspect_shows_the_imports_machine_and_isa(built: dict[str, Path], tmp_path: Path) -> None:
    (report,) = inspect_path(_wheel(tmp_path, built["clean"]))
    lines = report.format().splitlines()
    assert "  targets.isa: x86-64-v3, default" in lines
    assert "  machine: AMD64" in lines
    (imports,) = [line for line in lines if line.startswith("  imports: ")]
    for dll in ("torch_cpu.dll (1 symbol)", "KERNEL32.dll (1 symbol)", "VCRUNTIME140.dll"):
        assert dll in imports
    assert lines[-1] == "  audit: ok"
    assert report.to_json()["imports"]["torch_cpu.dll"] == ["aoti_torch_get_device_type"]
    # The release audit's rules against the wheel's tag: what it would refuse, inspect shows.
    (arm64,) = inspect_path(_wheel(tmp_path / "arm64", built["arm64"]))
    assert arm64.architectures == ["ARM64"]
    (problem,) = arm64.problems
    assert problem.startswith(f"{NAME} is an ARM64 DLL but its wheel's tag {TAG} says AMD64")
    assert f"  PROBLEM: {problem}" in arm64.format().splitlines()


def test_inspect_of_a_lone_dll_applies_the_rules_a_file_can_tell(built: dict[str, Path]) -> None:
    """Known by its magic number; no tag, so no machine to hold it to, but its imports
    and Python ties are its own."""
    (python,) = inspect_path(built["python3"])
    assert python.binary_format == "PE"
    assert python.problems[0] == f"no manifest next to {NAME}: the loader will not load it"
    assert python.problems[1].startswith(f"{NAME} links python3.dll (import)")
    (arm64,) = inspect_path(built["arm64"])
    assert arm64.problems == [f"no manifest next to {NAME}: the loader will not load it"]
    # The command takes the lone file too (its magic number, not a wheel's zip).
    cli = ptkit_from_source("inspect", str(built["arm64"]))
    assert cli.returncode == 1, cli.stderr  # the missing manifest is a problem
    assert "  imports: " in cli.stdout and "Traceback" not in cli.stderr, cli.stdout + cli.stderr
