"""Cross builds from Linux: a macOS arm64 or Windows amd64 wheel, compiled and linked here
with zig (PyPI's ``ziglang``: clang and lld for every target, with its libcs) against the
target platform's own torch.

What a cross build needs besides the project is made once per machine and cached:

* the target's torch: its wheel for that platform (``pip download --platform``, the build
  Python's torch version), unpacked to ``<cache>/cross-torch/<platform>/torch`` (headers,
  ``lib/``, ``share/``, ``version.py``); CMake is pointed at it with
  ``PTKIT_TARGET_TORCH`` (:func:`ptkit.torch_abi.locate_torch`);
* zig's compiler, archiver and ranlib as commands CMake can call, and a toolchain file
  (``CMAKE_TOOLCHAIN_FILE``) naming the target system, processor, minimum macOS and
  ``PTKIT_COMPILER_ID=Zig`` (:meth:`ptkit.platforms.base.Platform.compiler_dialect`).

The wheel's platform tag comes from ``_PYTHON_HOST_PLATFORM`` (scikit-build-core's
cross-build switch). Such a wheel is a compile and link proof: its libraries are audited
here (:mod:`ptkit.release.macho_audit`, :mod:`ptkit.release.pe_audit`) but neither
repaired nor smoke-tested; the release's macOS and Windows wheels come from cibuildwheel
on those runners. zig links its own static libc++ (LLVM's) into each library where the
release links the platform's (Apple's libc++, MSVC's runtime).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from ptkit.backends.toolchain_cache import cache_root

__all__ = [
    "CROSS_TARGETS",
    "CrossBuild",
    "CrossError",
    "CrossTarget",
    "build_zig_runtimes",
    "prepare_cross_build",
]

# What of torch's wheel a build reads: headers, the libraries to link, CMake files, version.
_TORCH_PARTS = ("torch/include/", "torch/lib/", "torch/share/", "torch/version.py")


class CrossError(Exception):
    """A cross build cannot be set up; the message names the cause and the fix."""


@dataclasses.dataclass(frozen=True)
class CrossTarget:
    """A release platform this machine can cross-build for."""

    platform: str
    """The release platform (:data:`ptkit.platforms.RELEASE_PLATFORMS`): ``macosx_arm64``."""
    zig_target: str
    """zig's ``-target`` (without the minimum OS, added for macOS)."""
    system: str
    """CMake's ``CMAKE_SYSTEM_NAME`` there."""
    processor: str
    """CMake's ``CMAKE_SYSTEM_PROCESSOR`` there (what CMake says on that machine)."""

    @property
    def torch_tag(self) -> str:
        """The platform tag ``pip download --platform`` asks torch's wheel for: the
        release's own tag for the platform (pip takes older macOS tags under it too)."""
        from ptkit.platforms import RELEASE_PLATFORMS

        return RELEASE_PLATFORMS[self.platform].wheel_tag

    @property
    def torch_wheels(self) -> str:
        """A glob of the torch wheels that serve it (``macosx_*_arm64``: any minimum macOS)."""
        return re.sub(r"^macosx_\d+_\d+_", "macosx_*_", self.torch_tag)

    def host_platform(self, minimum_macos: str | None) -> str:
        """``_PYTHON_HOST_PLATFORM`` (sysconfig's spelling: ``macosx-14.0-arm64``)."""
        if self.system == "Darwin":
            return f"macosx-{minimum_macos}-arm64"
        return "win-amd64"


CROSS_TARGETS = {
    t.platform: t
    for t in (
        CrossTarget("macosx_arm64", "aarch64-macos", "Darwin", "arm64"),
        CrossTarget("win_amd64", "x86_64-windows-gnu", "Windows", "AMD64"),
    )
}


@dataclasses.dataclass(frozen=True)
class CrossBuild:
    """A prepared cross build: what the build's environment gets."""

    target: CrossTarget
    torch: Path
    """The target's torch package folder."""
    toolchain_file: Path
    minimum_macos: str | None
    """The target torch's minimum macOS (its ``libtorch_cpu.dylib``); None for Windows."""

    @property
    def wheel_tag(self) -> str:
        return self.target.host_platform(self.minimum_macos).replace("-", "_").replace(".", "_")

    def environment(self) -> dict[str, str]:
        env = {
            "CMAKE_TOOLCHAIN_FILE": str(self.toolchain_file),
            "PTKIT_TARGET_TORCH": str(self.torch),
            "_PYTHON_HOST_PLATFORM": self.target.host_platform(self.minimum_macos),
        }
        if self.minimum_macos:
            env["MACOSX_DEPLOYMENT_TARGET"] = self.minimum_macos
        return env


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError as exc:
        raise CrossError(
            "a cross build takes the build Python's torch version, and it has no torch: "
            f"install torch into {sys.executable}'s environment"
        ) from exc


def target_torch(
    target: CrossTarget, version: str, *, cache: Path, echo: Callable[[str], None]
) -> Path:
    """The target's torch ``version``, unpacked under ``cache`` (downloaded on first use)."""
    home = cache / "cross-torch" / target.platform / version
    torch = home / "torch"
    if (torch / "version.py").is_file():
        return torch
    downloads = cache / "cross-torch" / "wheels"
    downloads.mkdir(parents=True, exist_ok=True)
    wheels = sorted(downloads.glob(f"torch-{version}-*-{target.torch_wheels}.whl"))
    if not wheels:
        echo(f"ptkit: downloading torch {version} for {target.torch_tag} (once) into {downloads}")
        command = [
            sys.executable, "-m", "pip", "download", f"torch=={version}", "--no-deps",
            "--only-binary=:all:", "--platform", target.torch_tag,
            "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
            "-d", str(downloads),
        ]  # fmt: skip
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3600)
        wheels = sorted(downloads.glob(f"torch-{version}-*-{target.torch_wheels}.whl"))
        if proc.returncode != 0 or not wheels:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
            raise CrossError(
                f"cannot download torch {version} for {target.torch_tag}: pip said:\n{tail}\n"
                "check that your index serves it (PIP_INDEX_URL, PIP_CONFIG_FILE), or put the "
                f"wheel into {downloads}"
            )
    home.mkdir(parents=True, exist_ok=True)
    # Unpacked beside and renamed into place: an interrupted unpack leaves no half tree.
    with tempfile.TemporaryDirectory(dir=home) as tmp, zipfile.ZipFile(wheels[-1]) as archive:
        for name in archive.namelist():
            if name.startswith(_TORCH_PARTS):
                archive.extract(name, tmp)
        shutil.rmtree(torch, ignore_errors=True)
        Path(tmp, "torch").rename(torch)
    return torch


def _minimum_macos(torch: Path) -> str:
    """The minimum macOS of the target torch's ``libtorch_cpu.dylib`` (LC_BUILD_VERSION)."""
    from ptkit.release.macho_audit import read_macho

    library = torch / "lib" / "libtorch_cpu.dylib"
    try:
        found = read_macho(library).minimum_os_text
    except (OSError, ValueError) as exc:
        raise CrossError(f"cannot read the minimum macOS of {library}: {exc}") from exc
    if not found:
        raise CrossError(f"{library} names no minimum macOS (LC_BUILD_VERSION)")
    return found


def _command(path: Path, argv: list[str]) -> None:
    """A shell script that runs ``argv`` with its own arguments (CMake wants one path)."""
    quoted = " ".join(f"'{a}'" for a in argv)
    path.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n', encoding="utf-8")
    path.chmod(0o755)


def _zig_target(target: CrossTarget, minimum_macos: str | None) -> str:
    return f"{target.zig_target}.{minimum_macos}" if minimum_macos else target.zig_target


def write_toolchain(
    target: CrossTarget, folder: Path, minimum_macos: str | None, python: str = sys.executable
) -> Path:
    """zig's commands and a CMake toolchain file for ``target``, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    zig = [python, "-m", "ziglang"]
    triple = _zig_target(target, minimum_macos)
    commands = {
        "cc": [*zig, "cc", "-target", triple],
        "c++": [*zig, "c++", "-target", triple],
        "ar": [*zig, "ar"],
        "ranlib": [*zig, "ranlib"],
    }
    for name, argv in commands.items():
        _command(folder / f"zig-{name}", argv)
    lines = [
        f"# ptkit.cross: {target.platform} with zig ({triple}); written by ptkit build.",
        f"set(CMAKE_SYSTEM_NAME {target.system})",
        f"set(CMAKE_SYSTEM_PROCESSOR {target.processor})",
        f'set(CMAKE_C_COMPILER "{folder / "zig-cc"}")',
        f'set(CMAKE_CXX_COMPILER "{folder / "zig-c++"}")',
        f'set(CMAKE_AR "{folder / "zig-ar"}" CACHE FILEPATH "")',
        f'set(CMAKE_RANLIB "{folder / "zig-ranlib"}" CACHE FILEPATH "")',
        # ptkit.platforms' flags for zig's driver (-mcpu=x86_64_v3, not -march).
        "set(PTKIT_COMPILER_ID Zig)",
        # Programs run here; libraries and headers come only from the named torch.
        "set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)",
        # CMake's try_compile checks compile without linking: each zig link is slow, and
        # only the library's link needs the target's runtimes (zig builds them once per
        # target, whatever the -O, on the first link: the compiler identification's).
        "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)",
    ]
    if minimum_macos:
        lines += [
            f'set(CMAKE_OSX_DEPLOYMENT_TARGET "{minimum_macos}" CACHE STRING "")',
            'set(CMAKE_OSX_ARCHITECTURES "arm64" CACHE STRING "")',
        ]
    toolchain = folder / "toolchain.cmake"
    toolchain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return toolchain


def prepare_cross_build(
    platform: str,
    build_root: Path,
    *,
    environ: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> CrossBuild:
    """Everything a cross build for ``platform`` needs (see the module docstring)."""
    target = CROSS_TARGETS.get(platform)
    if target is None:
        raise CrossError(
            f"--platform {platform!r} cannot be cross-built here: expected one of "
            f"{', '.join(CROSS_TARGETS)} (the Linux platforms build natively or in containers)"
        )
    try:
        import ziglang  # type: ignore[import-untyped]  # noqa: F401  (run as python -m ziglang)
    except ImportError as exc:
        raise CrossError(
            f"a cross build for {platform} compiles with zig, which is not installed: "
            f"{sys.executable} -m pip install ziglang"
        ) from exc
    env = os.environ if environ is None else environ
    given = env.get("PTKIT_TARGET_TORCH", "").strip()
    cache = cache_root(env)
    torch = (
        Path(given).resolve()
        if given
        else target_torch(target, _torch_version(), cache=cache, echo=echo)
    )
    minimum_macos = _minimum_macos(torch) if target.system == "Darwin" else None
    toolchain = write_toolchain(target, build_root / f"cross-{platform}", minimum_macos)
    return CrossBuild(target, torch, toolchain, minimum_macos)


def build_zig_runtimes(platform: str, folder: Path, echo: Callable[[str], None] = print) -> None:
    """Has zig build ``platform``'s C++ runtime into its cache now (libc++, libc++abi and
    libunwind; MinGW's C runtime for Windows): it builds them the first time it links for
    a target, minutes on a small machine, whatever the flags (one build serves -O0 and
    -O3). A program and a library are linked with the toolchain :func:`prepare_cross_build`
    writes (the same zig target), as CMake's compiler check and the build link them.
    scripts/bootstrap runs this beside its other parts, so no cross build waits for it."""
    build = prepare_cross_build(platform, folder, echo=echo)
    cxx = build.toolchain_file.parent / "zig-c++"
    source = folder / "runtime_probe.cpp"
    source.write_text(
        "#include <string>\n"
        "int probe(int n) { return static_cast<int>(std::string(n, 'x').size()); }\n"
        "int main(int argc, char**) { return probe(argc); }\n",
        encoding="utf-8",
    )
    for kind, flags in (("program", []), ("library", ["-shared"])):
        out = folder / f"runtime_probe_{platform}_{kind}"
        subprocess.run([str(cxx), *flags, str(source), "-o", str(out)], check=True)
        echo(f"{platform}: zig linked a C++ {kind}")
