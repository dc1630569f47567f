"""The Mach-O audit (ptkit.release.macho_audit, with the shared rules of
ptkit.release.linkage) on real dylibs: small libraries cross-compiled here with zig (PyPI's
ziglang, clang and its Mach-O linker) for arm64 macOS, each breaking one rule, in wheels
written here; ``ptkit inspect``'s report of them.

Every library is linked with ``-nostdlib``: zig then links libSystem's text stub alone and
builds no compiler-rt, so a cold zig cache costs no half-minute build and each library
about 0.1 s."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "ziglang", reason="zig (PyPI's ziglang, requirements/dev.txt) builds the Mach-O test dylibs"
)

from support import ptkit_from_source, wheel_holding_library

from ptkit.release.inspection import inspect_path
from ptkit.release.macho_audit import audit_macho_library, read_macho
from ptkit.release.torch_libraries import torch_libraries
from ptkit.release.wheel_audit import audit_wheel

TAG = "macosx_14_0_arm64"
TARGET = "aarch64-macos.14.0"
NAME = "libptkit_cpu.dylib"
# What a stable-ABI CPU kernel library calls in torch: the C shim (libtorch_cpu) and c10.
CLEAN_SOURCE = """
int aoti_torch_get_device_type(void* tensor, int* device_type);
int ptkit_test_f(void* tensor) { int t = 0; return aoti_torch_get_device_type(tensor, &t) + t; }
"""


def _dylib(
    folder: Path,
    name: str,
    source: str,
    *flags: str,
    target: str = TARGET,
    install_name: str | None = None,
    suffix: str = ".c",
) -> Path:
    """``folder/name`` compiled from ``source`` (C, or C++ with ``suffix`` ``.cpp``) for
    ``target``; its LC_ID_DYLIB is ``install_name`` (default: @rpath/<name>)."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{name.split('.')[0]}{suffix}"
    src.write_text(source)
    out = folder / name
    cmd = [sys.executable, "-m", "ziglang", "cc", "-target", target, "-shared", "-nostdlib"]
    cmd += [
        "-O2",
        "-o",
        str(out),
        str(src),
        f"-Wl,-install_name,{install_name or '@rpath/' + name}",
    ]
    proc = subprocess.run([*cmd, *flags], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every library the tests audit, built once: torch stand-ins, then one kernel library
    per rule (each in a folder of its own, all named libptkit_cpu.dylib)."""
    root = tmp_path_factory.mktemp("macho")
    stubs = root / "stubs"
    _dylib(
        stubs,
        "libtorch_cpu.dylib",
        "int aoti_torch_get_device_type(void* t, int* d) { (void)t; *d = 0; return 0; }\n",
    )
    _dylib(
        stubs, "libc10.dylib", "namespace c10 { int foo(int x) { return x + 1; } }\n", suffix=".cpp"
    )
    # Stand-ins of what is installed elsewhere, by install name: a Homebrew library, the
    # python.org framework build's Python, a system framework.
    _dylib(
        stubs,
        "libfoo.dylib",
        "int foo_f(void) { return 2; }\n",
        install_name="/opt/homebrew/lib/libfoo.dylib",
    )
    frameworks = stubs / "frameworks"
    _dylib(
        frameworks / "Python.framework",
        "Python",
        "void* PyLong_FromLong(long v) { (void)v; return 0; }\n",
        install_name="/Library/Frameworks/Python.framework/Versions/3.11/Python",
    )
    _dylib(
        frameworks / "Metal.framework",
        "Metal",
        "void* MTLCreateSystemDefaultDevice(void) { return 0; }\n",
        install_name="/System/Library/Frameworks/Metal.framework/Versions/A/Metal",
    )
    # Foundation's binary is under Versions/C, not A (as torch's libc10.dylib links it).
    _dylib(
        frameworks / "Foundation.framework",
        "Foundation",
        "void* NSLog(void* format) { return format; }\n",
        install_name="/System/Library/Frameworks/Foundation.framework/Versions/C/Foundation",
    )
    torch = ("-L", str(stubs), "-ltorch_cpu")
    metal_source = "void* MTLCreateSystemDefaultDevice(void);\nvoid* NSLog(void*);\n" + (
        CLEAN_SOURCE.replace("return ", "return NSLog(MTLCreateSystemDefaultDevice()) != 0 && ")
    )
    libraries = {
        "clean": _dylib(root / "clean", NAME, CLEAN_SOURCE, *torch),
        "homebrew": _dylib(
            root / "homebrew",
            NAME,
            "int foo_f(void);\n" + CLEAN_SOURCE.replace("return ", "return foo_f() + "),
            *torch,
            "-lfoo",
        ),
        "macos15": _dylib(
            root / "macos15", NAME, CLEAN_SOURCE, *torch, target="aarch64-macos.15.0"
        ),
        "x86_64": _dylib(
            root / "x86_64",
            NAME,
            "int ptkit_test_f(void) { return 1; }\n",
            target="x86_64-macos.14.0",
        ),
        "classic": _dylib(
            root / "classic",
            NAME,
            "namespace c10 { int foo(int x); }\n"
            'extern "C" int ptkit_test_g(int x) { return c10::foo(x); }\n',
            "-L",
            str(stubs),
            "-lc10",
            suffix=".cpp",
        ),
        "python": _dylib(
            root / "python",
            NAME,
            "void* PyLong_FromLong(long v);\nvoid* ptkit_test_h(void) { return PyLong_FromLong(1); }\n",
            "-F",
            str(frameworks),
            "-framework",
            "Python",
        ),
        "metal": _dylib(
            root / "metal",
            "libptkit_metal.dylib",
            metal_source,
            *torch,
            "-F",
            str(frameworks),
            "-framework",
            "Metal",
            "-framework",
            "Foundation",
        ),
        # torch linked by the build machine's path, and an LC_RPATH into it.
        "build_paths": _dylib(
            root / "build_paths",
            NAME,
            CLEAN_SOURCE,
            str(
                _dylib(
                    root / "torch" / "lib",
                    "libtorch_cpu.dylib",
                    "int aoti_torch_get_device_type(void* t, int* d) { return 0; }\n",
                    install_name=str(root / "torch/lib/libtorch_cpu.dylib"),
                )
            ),
            "-Wl,-rpath,/Users/runner/work/torch/lib",
            "-Wl,-rpath,@loader_path",
        ),
    }
    return libraries


def _manifest(library: Path, backend: str = "cpu", abi: str = "stable") -> bytes:
    """A valid manifest of ``library`` (its sha256) for ``backend``, bound by ``abi``."""
    torch = {"target_version": "2.10", "built_with": "2.14.1", "abi": abi}
    return json.dumps(
        {
            "schema_version": 1,
            "package": "ptkit_ops",
            "namespace": "ptkit",
            "library": library.name,
            "backend": backend,
            "variant": backend,
            "toolkit": {"name": "zig", "version": "0.17.0"},
            "targets": {"isa": ["default"]},
            "dropped_targets": [],
            "torch": torch,
            "platform": "darwin-arm64",
            "ops": {"rms_norm": ["float32"]},
            "sha256": hashlib.sha256(library.read_bytes()).hexdigest(),
        }
    ).encode()


def _wheel(folder: Path, library: Path, *, tag: str = TAG, **manifest: str) -> Path:
    return wheel_holding_library(folder, library, _manifest(library, **manifest), tag)


def _audit(library: Path, backend: str = "cpu", abi: str = "stable", tag: str = TAG) -> list[str]:
    """The Mach-O rules alone, for a ``backend`` library of a ``tag`` wheel."""
    result = audit_macho_library(
        library,
        backend=backend,
        torch_patterns=torch_libraries(backend, "macos", abi),
        platforms=(tag,),
        abi=abi,
    )
    return list(result.problems)


def test_a_library_of_torch_and_libsystem_passes_in_its_wheel(
    built: dict[str, Path], tmp_path: Path
) -> None:
    result = audit_wheel(_wheel(tmp_path, built["clean"]))
    assert result.problems == (), result.format()
    (library,) = result.libraries
    assert library.binary_format == "Mach-O"
    assert library.needed == ("/usr/lib/libSystem.B.dylib", "@rpath/libtorch_cpu.dylib")
    assert (library.minimum_os, library.architectures) == ("14.0", ("arm64",))
    assert library.summary() == (
        f"{NAME}: links /usr/lib/libSystem.B.dylib, @rpath/libtorch_cpu.dylib; macOS 14.0+; arm64"
    )


def test_the_reader_sees_the_load_commands_and_symbols(built: dict[str, Path]) -> None:
    file = read_macho(built["build_paths"])
    assert file.install_name == f"@rpath/{NAME}"
    assert file.linkage.rpath == ("/Users/runner/work/torch/lib", "@loader_path")
    assert file.slices[0].version_command == "LC_BUILD_VERSION"
    # Mach-O's leading underscore is dropped: the C names, as the shared rules read them.
    assert "aoti_torch_get_device_type" in file.linkage.undefined
    assert "ptkit_test_f" in file.linkage.exported


def test_a_link_to_a_homebrew_library_is_refused(built: dict[str, Path], tmp_path: Path) -> None:
    (problem,) = audit_wheel(_wheel(tmp_path, built["homebrew"])).problems
    assert problem.startswith(
        f"{NAME} links /opt/homebrew/lib/libfoo.dylib, which is neither what torch provides "
        "to cpu code (@rpath/libtorch.dylib, @rpath/libtorch_cpu.dylib, @rpath/libc10.dylib) "
        "nor a system library every macOS has"
    )
    assert problem.endswith("users would not have it; link it statically or drop the dependency")


def test_a_minimum_macos_above_the_tag_is_refused_and_the_right_tag_passes(
    built: dict[str, Path], tmp_path: Path
) -> None:
    (problem,) = audit_wheel(_wheel(tmp_path / "14", built["macos15"])).problems
    assert problem == (
        f"{NAME} (arm64) needs macOS 15.0 (LC_BUILD_VERSION minos) but its wheel's tag "
        f"{TAG} says macOS 14.0: pip would install it on macOS 14.0, where dyld refuses it. "
        "Fix: build with MACOSX_DEPLOYMENT_TARGET=14.0 (ptkit's macOS build environment and "
        "cibuildwheel set it), or tag the wheel macosx_15_0_arm64"
    )
    tagged = _wheel(tmp_path / "15", built["macos15"], tag="macosx_15_0_arm64")
    assert audit_wheel(tagged).problems == ()
    # An older library in a newer tag is fine: dyld loads it on every macOS >= its minos.
    assert _audit(built["clean"], tag="macosx_15_0_arm64") == []


def test_an_x86_64_library_in_an_arm64_wheel_is_refused(built: dict[str, Path]) -> None:
    (problem,) = _audit(built["x86_64"])
    assert problem.startswith(
        f"{NAME} is built for x86_64 but its wheel's tag {TAG} says arm64: on arm64 Macs pip "
        "would install it and dyld refuse it. Fix: build for arm64 (CMAKE_OSX_ARCHITECTURES=arm64"
    )
    assert _audit(built["x86_64"], tag="macosx_14_0_x86_64") == []
    (universal,) = _audit(built["clean"], tag="macosx_14_0_universal2")
    assert "is built for arm64 but its wheel's tag macosx_14_0_universal2 says arm64+x86_64" in (
        universal
    )


def test_a_c10_symbol_in_a_stable_abi_library_is_refused_and_allowed_in_torch_mode(
    built: dict[str, Path],
) -> None:
    (problem,) = _audit(built["classic"])
    assert problem.startswith(
        f"{NAME} needs 1 torch C++ symbol outside the stable ABI (1 c10::; first: "
    )
    assert "c10::foo(int)" in problem or "_ZN3c103fooEi" in problem  # demangled if c++filt
    assert "Fix: build it in the torch mode (ptkit_add_kernel_library(… ABI torch)" in problem
    assert _audit(built["classic"], abi="torch") == []


def test_the_python_framework_is_refused(built: dict[str, Path]) -> None:
    (problem,) = _audit(built["python"])
    assert problem.startswith(
        f"{NAME} links /Library/Frameworks/Python.framework/Versions/3.11/Python "
        "(LC_LOAD_DYLIB) for 1 symbol of Python's C API or torch's Python bindings "
        "(PyLong_FromLong): the wheel would run on one Python only. Fix: a kernel library "
        "links no Python"
    )


def test_metal_frameworks_are_a_metal_librarys_only(built: dict[str, Path]) -> None:
    metal = built["metal"]
    frameworks = [
        "/System/Library/Frameworks/Metal.framework/Versions/A/Metal",
        "/System/Library/Frameworks/Foundation.framework/Versions/C/Foundation",
    ]
    assert set(frameworks) <= set(read_macho(metal).linkage.needed)
    assert _audit(metal, backend="metal") == []
    problems = _audit(metal, backend="cpu")
    assert sorted(p.split(",")[0] for p in problems) == sorted(
        f"libptkit_metal.dylib links {f}" for f in frameworks
    )
    fix = (
        ", which only a metal library may: it is a cpu library, so its Metal code would load "
        "wherever the metal variant is not chosen. Fix: move the Metal code into the metal "
        "backend's library (ptkit_add_kernel_library(… BACKEND metal)), or drop the link"
    )
    assert all(p.endswith(fix) for p in problems), problems


def test_torch_by_a_build_path_and_an_absolute_rpath_are_refused(built: dict[str, Path]) -> None:
    problems = _audit(built["build_paths"])
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{NAME} links torch's libtorch_cpu.dylib as /")
    assert problems[0].endswith(f"/torch/lib/libtorch_cpu.dylib @rpath/libtorch_cpu.dylib {NAME}")
    assert problems[1].startswith(
        f"{NAME} has LC_RPATH /Users/runner/work/torch/lib, a path on the build machine"
    )
    assert problems[1].endswith(
        f"install_name_tool -delete_rpath /Users/runner/work/torch/lib {NAME}"
    )


def test_a_corrupt_dylib_is_a_problem_not_a_traceback(
    built: dict[str, Path], tmp_path: Path
) -> None:
    broken = tmp_path / NAME
    broken.write_bytes(built["clean"].read_bytes()[:100])
    (problem,) = _audit(broken)
    assert problem.startswith(f"{NAME}: not a readable Mach-O library (")
    assert problem.endswith("the wheel is corrupt; rebuild it")


def test_inspect_shows_the_load_commands_minimum_macos_architecture_and_isa(
    built: dict[str, Path], tmp_path: Path
) -> None:
    (report,) = inspect_path(_wheel(tmp_path / "15", built["macos15"], tag="macosx_15_0_arm64"))
    text = report.format()
    for line in (
        "  manifest: cpu / variant cpu / zig 0.17.0 / torch target 2.10, built with 2.14.1 / "
        "ABI stable (torch 2.10 and later)",
        "  targets.isa: default",
        f"  LC_ID_DYLIB: @rpath/{NAME}",
        "  LC_LOAD_DYLIB: /usr/lib/libSystem.B.dylib, @rpath/libtorch_cpu.dylib",
        "  LC_RPATH: (none)",
        "  minimum macOS: 15.0",
        "  architectures: arm64",
        "  audit: ok",
    ):
        assert line in text.splitlines(), text
    assert report.to_json()["binary_format"] == "Mach-O"
    # The release audit's rules against the wheel's tag: what it would refuse, inspect shows.
    (early,) = inspect_path(_wheel(tmp_path / "14", built["macos15"]))
    (problem,) = early.problems
    assert problem.startswith(f"{NAME} (arm64) needs macOS 15.0 (LC_BUILD_VERSION minos)")
    assert f"  PROBLEM: {problem}" in early.format().splitlines()


def test_inspect_of_a_lone_dylib_applies_the_rules_a_file_can_tell(
    built: dict[str, Path],
) -> None:
    """Known by its magic number; no tag, so no minimum macOS or architecture to hold it
    to, but its links and Python ties are its own."""
    (python,) = inspect_path(built["python"])
    assert python.binary_format == "Mach-O"
    assert python.problems[0] == f"no manifest next to {NAME}: the loader will not load it"
    assert "Python.framework/Versions/3.11/Python (LC_LOAD_DYLIB)" in python.problems[1]
    (homebrew,) = inspect_path(built["homebrew"])
    assert [p.split(",")[0] for p in homebrew.problems[1:]] == [
        f"{NAME} links /opt/homebrew/lib/libfoo.dylib"
    ]
    (newer,) = inspect_path(built["macos15"])
    assert newer.minimum_os == "15.0" and newer.problems == [
        f"no manifest next to {NAME}: the loader will not load it"
    ]
    # The command takes the lone file too (its magic number, not a wheel's zip).
    cli = ptkit_from_source("inspect", str(built["macos15"]))
    assert cli.returncode == 1, cli.stderr  # the missing manifest is a problem
    assert "  LC_LOAD_DYLIB: " in cli.stdout and "Traceback" not in cli.stderr, (
        cli.stdout + cli.stderr
    )
