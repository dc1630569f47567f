"""The interface every platform module fills in (``linux``, ``macos``, ``windows``).

A platform is an operating system as a wheel sees it: what its native libraries are
called and how they are built (binary format, compiler dialect, ISA flags), how a wheel
is repaired (auditwheel, delocate, delvewheel) and audited, and which release platforms
(an OS and a CPU, with the wheel tag, cibuildwheel's names and GitHub's runner) it has.
Standard library only: the loader and CMake (``python -m ptkit.platforms``) use it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

__all__ = ["CpuFacts", "IsaLevel", "MpsSupport", "Platform", "ReleasePlatform", "dialect_flags"]


@dataclasses.dataclass(frozen=True)
class ReleasePlatform:
    """One (OS, CPU) the release builds a wheel for."""

    name: str
    """The recipes' spelling (``manylinux_2_28_x86_64``)."""
    os: str
    """The platform module's name, also cibuildwheel's ``--platform`` (``linux``)."""
    arch: str
    """cibuildwheel's ``--archs`` (``x86_64``, ``aarch64``, ``arm64``, ``AMD64``)."""
    machines: tuple[str, ...]
    """What ``platform.machine()`` says on it (``x86_64``, ``amd64``)."""
    manifest_platform: str
    """The manifests' ``platform`` (``linux-x86_64``): CMake's system and processor."""
    identifier: str
    """The platform part of cibuildwheel's build identifiers (``manylinux_x86_64``)."""
    runner: str
    """The GitHub-hosted runner that builds natively for it."""
    wheel_tag: str
    """The repaired wheel's platform tag."""
    image_option: str = ""
    """cibuildwheel's option naming the manylinux image, for Linux."""


@dataclasses.dataclass(frozen=True)
class IsaLevel:
    """A CPU instruction-set level the CPU kernels can be compiled for."""

    name: str
    """``x86-64-v3``; ``default`` is the baseline of every CPU of the architecture."""
    flags: dict[str, tuple[str, ...]]
    """Compiler dialect (``gnu``: GCC and Clang, ``msvc``, ``zig``) -> its flags for the level."""


@dataclasses.dataclass(frozen=True)
class CpuFacts:
    """What the loader needs to know about this machine's CPU for ``REQUIRES_ISA``."""

    processor: str
    """``platform.machine()``: ``x86_64``, ``aarch64``."""
    features: frozenset[str] | None
    """The CPU's feature flags (``/proc/cpuinfo`` names); None: this platform cannot tell."""
    source: str
    """Where they were read (``/proc/cpuinfo``), or why they are unknown."""


@dataclasses.dataclass(frozen=True)
class MpsSupport:
    """What torch's MPS device (Apple GPUs, ptkit's ``metal`` backend) would be on a
    machine: ``torch.backends.mps.is_built()`` and ``is_available()``, predicted without
    torch (the doctor) from the OS's own facts."""

    built: bool
    """Whether torch's wheel for this OS and CPU is built with MPS."""
    available: bool
    """Whether that torch would find an MPS device here."""
    reason: str
    """Why it would not be available; empty when it would."""


class Platform:
    name: ClassVar[str]
    """``linux``, ``macos``, ``windows``: cibuildwheel's platform names."""
    system: ClassVar[str]
    """``platform.system()`` and CMake's ``CMAKE_SYSTEM_NAME`` there."""
    binary_format: ClassVar[str]
    """``ELF``, ``Mach-O`` or ``PE``."""
    binary_magics: ClassVar[tuple[bytes, ...]]
    """What a file of that format starts with (:func:`ptkit.platforms.platform_for_binary`)."""
    library_prefix: ClassVar[str] = "lib"
    library_suffix: ClassVar[str]
    """What a native kernel library (CMake target ``ptkit_cpu``) is called: ``libptkit_cpu.so``."""
    library_type: ClassVar[str] = "MODULE"
    """CMake's library type for a kernel library: ``MODULE`` (loaded with dlopen, never
    linked against) where that is an ordinary shared library; ``SHARED`` where CMake's
    ``MODULE`` is something else (a macOS bundle, linked with ``-bundle``)."""
    repair_tool: ClassVar[str]
    """The tool that makes a built wheel portable (``auditwheel``, ``delocate``, ``delvewheel``)."""
    repair_note: ClassVar[str] = ""
    """Why the repair leaves torch's libraries out, for the generated configuration."""
    release_platforms: ClassVar[tuple[ReleasePlatform, ...]] = ()
    toolkit_dir: ClassVar[str] = ""
    """Where a release job installs a recipe's pip toolkit (a venv), on the build machine."""
    toolkit_site: ClassVar[str] = ""
    """That venv's site-packages."""
    build_environment: ClassVar[dict[str, str]] = {}
    """Environment every release build on this OS needs."""

    library_names_ignore_case: ClassVar[bool] = False
    """Whether the OS compares library file names without case (Windows: ``PTKIT_CPU.DLL``
    is ``ptkit_cpu.dll``)."""

    _native_pattern: ClassVar[re.Pattern[str]]

    def library_file(self, target: str) -> str:
        """The file CMake writes for a kernel library target: ``libptkit_cpu.so``."""
        return f"{self.library_prefix}{target}{self.library_suffix}"

    def kernel_library_target(self, file_name: str) -> str | None:
        """The kernel library target a file is named for (``libptkit_cpu.so`` ->
        ``ptkit_cpu``; the inverse of :meth:`library_file`), or None: not a kernel library
        of this platform (another OS's, a manifest, a ``.metal`` source)."""
        prefix, suffix = self.library_prefix, self.library_suffix
        name = file_name.lower() if self.library_names_ignore_case else file_name
        if self.library_names_ignore_case:
            prefix, suffix = prefix.lower(), suffix.lower()
        if not (name.startswith(prefix) and name.endswith(suffix)):
            return None
        target = file_name[len(prefix) : len(file_name) - len(suffix)]
        return target or None

    def library_search_folders(self, library: Path, torch_dir: Path) -> tuple[Path, ...]:
        """The folders the OS must be told to search, before ``library`` is loaded, for
        the libraries it imports (torch's), in the order they are added; ``torch_dir``:
        the torch package's folder. None by default: ELF and Mach-O loaders resolve an
        import by name against the libraries torch already loaded (or the library's
        RPATH), so nothing needs adding."""
        return ()

    def mps_support(self, machine: str, apple_gpu: bool, os_version: str | None) -> MpsSupport:
        """torch's MPS device on this OS, from the facts: the CPU (``platform.machine()``),
        whether an Apple GPU was found, and the OS version (``platform.mac_ver()``'s).
        By default none: torch builds MPS only into its macOS wheels."""
        return MpsSupport(False, False, f"torch has no MPS device on {self.name}")

    def is_native_library(self, file_name: str) -> bool:
        """Whether a wheel entry is a native library of this platform."""
        return bool(self._native_pattern.search(file_name))

    def library_problem(self, path: Path) -> str | None:
        """Why ``path`` cannot be loaded here (truncated, another CPU…), checked before
        ``dlopen``; None when it looks loadable. The default checks nothing."""
        return None

    def repair_command(self, excludes: Sequence[str]) -> str:
        """The repair tool's command line for cibuildwheel (``{wheel}``, ``{dest_dir}``),
        leaving out the libraries matching ``excludes``."""
        raise NotImplementedError

    def compiler_dialect(self, compiler_id: str) -> str:
        """``gnu``, ``msvc`` or ``zig`` for CMake's ``CMAKE_CXX_COMPILER_ID`` (``Zig``:
        ``PTKIT_COMPILER_ID``, set by ptkit's cross toolchain files, :mod:`ptkit.cross`)."""
        return _DIALECTS.get(compiler_id, "gnu")

    def isa_levels(self, processor: str) -> tuple[IsaLevel, ...]:
        """The ISA levels of a processor (CMake's ``CMAKE_SYSTEM_PROCESSOR``), best first,
        ``default`` last."""
        return isa_levels(processor)

    def isa_builds(
        self, levels: Sequence[str], processor: str, compiler_id: str
    ) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
        """The ISA levels a CPU library is compiled for, with each one's flags, and the
        levels skipped: ``levels`` in the given order (best first) that apply to this
        processor and compiler (CMake's ``CMAKE_SYSTEM_PROCESSOR``,
        ``CMAKE_CXX_COMPILER_ID``), then ``default``, always and last. A level other than
        ``default`` with no flags for this compiler is skipped: it would be the baseline
        again under another name. ``ValueError`` for a level no processor has."""
        known = known_isa_levels()
        unknown = [level for level in levels if level not in known]
        if unknown:
            raise ValueError(f"unknown CPU ISA level {unknown[0]!r}; known: {', '.join(known)}")
        available = {level.name: level for level in self.isa_levels(processor)}
        dialect = self.compiler_dialect(compiler_id)
        builds: list[tuple[str, tuple[str, ...]]] = []
        skipped: list[str] = []
        for name in dict.fromkeys([*(lv for lv in levels if lv != "default"), "default"]):
            level = available.get(name)
            flags = dialect_flags(level.flags, dialect) if level is not None else None
            if level is None or flags is None or (not flags and name != "default"):
                skipped.append(name)
            else:
                builds.append((name, flags))
        return tuple(builds), tuple(skipped)

    def cpu_features(self) -> tuple[frozenset[str] | None, str]:
        """This CPU's feature flags in ``/proc/cpuinfo``'s names, and where they came from;
        (None, why) where the platform has no way to read them yet."""
        return None, f"ptkit does not read the CPU's features on {self.name} yet"

    def required_isa_problem(self, levels: Sequence[str], cpu: CpuFacts) -> str | None:
        """Why a library that requires the ISA ``levels`` (its manifest's ``requires_isa``)
        must not be loaded on ``cpu``, or None: every level's flags are there. A CPU whose
        features are unknown runs nothing that requires a level (it could die of an
        illegal instruction)."""
        from ptkit.platforms.required_isa import missing_cpu_flags, required_isa

        for name in levels:
            try:
                level = required_isa(name, cpu.processor)
            except ValueError as exc:
                return f"{exc}: rebuild the library for {cpu.processor}"
            if cpu.features is None:
                return (
                    f"requires the CPU ISA level {name} and {cpu.source}, so whether this CPU "
                    f"has it is unknown; ptkit does not load it (it could die of an illegal "
                    f"instruction): build it without REQUIRES_ISA {name} for this platform"
                )
            missing = missing_cpu_flags(level, cpu.features)
            if missing:
                return (
                    f"requires the CPU ISA level {name} (REQUIRES_ISA), which this CPU lacks "
                    f"(no {', '.join(missing)} in {cpu.source}; {level.has_it} have it): run "
                    f"on such a CPU, or ship a build without REQUIRES_ISA {name} for this one"
                )
        return None

    def release_platform_for(self, machine: str) -> ReleasePlatform | None:
        for release in self.release_platforms:
            if machine.lower() in release.machines:
                return release
        return None

    @staticmethod
    def _quoted(items: Sequence[str]) -> str:
        return " ".join(shlex.quote(item) for item in items)

    # --- wheel tags and release shell commands ---------------------------------------

    wheel_tag_prefixes: ClassVar[tuple[str, ...]] = ()
    """How this OS's wheel platform tags begin (``manylinux``, ``linux``; ``macosx``; ``win``)."""
    toolkit_python: ClassVar[str] = "python"
    """The Python a release job makes the toolkit venv (``toolkit_dir``) with."""

    def has_wheel_tag(self, tag: str) -> bool:
        """Whether a wheel platform tag (``manylinux_2_28_x86_64``) is one of this OS's."""
        return tag.startswith(self.wheel_tag_prefixes)

    def venv_python(self, venv: str) -> str:
        """The Python of a venv made at ``venv`` on this OS."""
        return f"{venv}/bin/python"

    def shell_quote(self, argument: str) -> str:
        """``argument`` quoted for the shell cibuildwheel runs this OS's commands in (sh)."""
        return shlex.quote(argument)


_DIALECTS = {"MSVC": "msvc", "Zig": "zig"}


def dialect_flags(flags: dict[str, tuple[str, ...]], dialect: str) -> tuple[str, ...] | None:
    """A level's flags for ``dialect``; None when it has none. zig's driver is clang's,
    but it takes a CPU only as ``-mcpu=<zig name>`` (it refuses ``-march``/``-mtune``):
    a level says its zig flags, and the single-feature ``-m`` flags are clang's."""
    if dialect == "zig" and "zig" not in flags:
        found = flags.get("gnu")
        return (
            found
            if found is None or not any(f.startswith(("-march", "-mtune")) for f in found)
            else None
        )
    return flags.get(dialect)


# Best first. Above the psABI levels, two that only the bf16 GEMV uses (every other kernel
# is the x86-64-v4 code again): avx512-bf16 (vdpbf16ps: 32 bf16 products a step) and
# amx-bf16 (the tile unit; Linux also has to grant the process its state, which the CPU
# library asks for when it picks the level, and falls back when refused). MSVC has no
# flag that enables them (its intrinsics need none) and compiles the kernels' portable
# path, which uses neither: no copy for it.
_X86_64_LEVELS = (
    IsaLevel(
        "amx-bf16",
        {
            "gnu": ("-march=x86-64-v4", "-mavx512bf16", "-mamx-tile", "-mamx-bf16", "-mtune=generic"),
            "zig": ("-mcpu=x86_64_v4+avx512bf16+amx_tile+amx_bf16",),
        },
    ),
    IsaLevel(
        "avx512-bf16",
        {
            "gnu": ("-march=x86-64-v4", "-mavx512bf16", "-mtune=generic"),
            "zig": ("-mcpu=x86_64_v4+avx512bf16",),
        },
    ),
    IsaLevel(
        "x86-64-v4",
        {
            "gnu": ("-march=x86-64-v4", "-mtune=generic"),
            "msvc": ("/arch:AVX512",),
            "zig": ("-mcpu=x86_64_v4",),
        },
    ),
    IsaLevel(
        "x86-64-v3",
        {
            "gnu": ("-march=x86-64-v3", "-mtune=generic"),
            "msvc": ("/arch:AVX2",),
            "zig": ("-mcpu=x86_64_v3",),
        },
    ),
    IsaLevel(
        "x86-64-v2",
        {"gnu": ("-march=x86-64-v2", "-mtune=generic"), "msvc": (), "zig": ("-mcpu=x86_64_v2",)},
    ),
    IsaLevel("default", {"gnu": (), "msvc": (), "zig": ()}),
)  # fmt: skip
# AArch64's baseline (armv8-a) already has NEON (AdvSIMD): ``default`` is NEON code there.
# neon-bf16 adds the BF16 extension's BFDOT for the bf16 GEMV (Armv8.6, optional from
# Armv8.2: Neoverse V1/N2, Graviton 3 and later, Apple M2 and later; zig names the
# macOS baseline's CPU, Apple M1, plus the feature).
_AARCH64_LEVELS = (
    IsaLevel(
        "neon-bf16",
        {"gnu": ("-march=armv8.2-a+bf16",), "zig": ("-mcpu=apple_m1+bf16",)},
    ),
    IsaLevel("default", {"gnu": (), "msvc": (), "zig": ()}),
)
_BASELINE_ONLY = (IsaLevel("default", {"gnu": (), "msvc": (), "zig": ()}),)
_PROCESSORS = {
    "x86_64": _X86_64_LEVELS,
    "amd64": _X86_64_LEVELS,
    "aarch64": _AARCH64_LEVELS,
    "arm64": _AARCH64_LEVELS,
}


def isa_levels(processor: str) -> tuple[IsaLevel, ...]:
    """The ISA levels ptkit knows for a processor; other processors have the baseline."""
    return _PROCESSORS.get(processor.lower(), _BASELINE_ONLY)


def known_isa_levels() -> tuple[str, ...]:
    """Every ISA level ptkit knows on any processor, best first (``default`` last)."""
    names = [lv.name for levels in _PROCESSORS.values() for lv in levels if lv.name != "default"]
    return tuple(dict.fromkeys([*names, "default"]))
