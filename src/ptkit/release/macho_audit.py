"""The audit of a Mach-O library (the macOS platform's binary format): its load commands,
minimum macOS, architectures and the symbols it needs.

The Python ties and the torch ABI rules are every format's (:mod:`ptkit.release.linkage`);
this module reads a dylib into them (symbols without the leading underscore Mach-O gives
every C name: ``__ZN3c10…`` is the Itanium ``_ZN3c10…``) and adds what is macOS's own.
For a library of a ``macosx_<X>_<Y>_<arch>`` wheel (:mod:`ptkit.release.wheel_audit`):

* every LC_LOAD_DYLIB (and its weak, re-export, lazy and upward kinds) is torch's for the
  library's backend (:mod:`ptkit.release.torch_libraries`), named ``@rpath/<name>`` as
  torch's own install names are, or one of the few system libraries every macOS has
  (:data:`SYSTEM_DYLIBS`; a metal library also libobjc and the frameworks of
  :data:`METAL_FRAMEWORKS`, which no other backend's may link): nothing a user's machine
  would lack, and no Python;
* no LC_RPATH into the build machine: an absolute path (only ``@loader_path``,
  ``@executable_path`` and ``@rpath`` are relative to where the wheel lands);
* its minimum macOS (LC_BUILD_VERSION ``minos``, or LC_VERSION_MIN_MACOSX) is not newer
  than the tag's ``<X>.<Y>``: pip installs the wheel on every macOS the tag names, and
  dyld refuses a library newer than the running system;
* it holds the tag's architectures (``arm64``; ``universal2``: arm64 and x86_64).

Needs ``macholib`` (the reader delocate, the macOS repair tool, uses), imported inside
the functions: the loader and the CLI import this package without it.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from pathlib import Path
from typing import Any

from ptkit.backends import BACKENDS
from ptkit.release.linkage import MACH_O, Linkage
from ptkit.release.torch_libraries import is_torch_library
from ptkit.torch_abi import DEFAULT_ABI

__all__ = [
    "METAL_DYLIBS",
    "METAL_FRAMEWORKS",
    "SYSTEM_DYLIBS",
    "MachOFile",
    "MachOLibraryAudit",
    "MachOSlice",
    "audit_macho_library",
    "read_macho",
]

# The C and C++ runtime of every macOS (libSystem holds libc, libm, pthread and dyld's
# API; libc++ is the C++ runtime torch itself links): what ELF's C runtime is on Linux.
SYSTEM_DYLIBS = (
    "/usr/lib/libSystem.B.dylib",
    "/usr/lib/libc++.1.dylib",
    "/usr/lib/libc++abi.dylib",
)
# What Metal code written in Objective-C++ links: the Objective-C runtime, and Metal, MPS
# and Foundation (with CoreFoundation under it). On every macOS a Metal wheel's tag names,
# but a CPU library has no business with them.
METAL_DYLIBS = ("/usr/lib/libobjc.A.dylib",)
METAL_FRAMEWORKS = (
    "Metal",
    "MetalPerformanceShaders",
    "MetalPerformanceShadersGraph",
    "Foundation",
    "CoreFoundation",
)
# A system framework's binary: <Name>.framework/<Name>, or under Versions/<A, C …>/
# (Foundation's is Versions/C, as torch's own libc10.dylib links it).
_SYSTEM_FRAMEWORK = re.compile(
    r"^/System/Library/Frameworks/(\w+)\.framework/(?:Versions/[^/]+/)?(\w+)$"
)
_RELATIVE_RPATH = ("@loader_path", "@executable_path", "@rpath")
_MACOSX_TAG = re.compile(r"^macosx_(\d+)_(\d+)_(\w+)$")
# A tag's architecture -> the slices the library must hold.
_TAG_ARCHS: dict[str, tuple[str, ...]] = {
    "arm64": ("arm64",),
    "x86_64": ("x86_64",),
    "universal2": ("arm64", "x86_64"),
    "intel": ("i386", "x86_64"),
    "i386": ("i386",),
}
# <mach/machine.h>: CPU_TYPE_* (ABI64 is 0x01000000); arm64e is arm64 with subtype 2.
_CPU_TYPES = {0x0100000C: "arm64", 0x01000007: "x86_64", 7: "i386", 12: "arm", 18: "ppc"}
_CPU_SUBTYPE_ARM64E = 2
_PLATFORM_MACOS = 1
# <mach-o/nlist.h>: the type bits of a symbol table entry.
_N_STAB, _N_PEXT, _N_TYPE, _N_EXT = 0xE0, 0x10, 0x0E, 0x01
_N_UNDF = 0x0


Version = tuple[int, int, int]


def _version(encoded: int) -> Version:
    """``xxxx.yy.zz`` in nibbles, as LC_BUILD_VERSION and LC_VERSION_MIN_* write it."""
    return (encoded >> 16) & 0xFFFF, (encoded >> 8) & 0xFF, encoded & 0xFF


def _version_text(version: Version) -> str:
    major, minor, patch = version
    return f"{major}.{minor}.{patch}" if patch else f"{major}.{minor}"


def _tag_for(version: Version, arch: str) -> str:
    """The oldest macosx tag pip never installs below ``version``: from macOS 11 on pip
    knows ``<major>_0`` tags only, so 14.2 needs macosx_15_0."""
    major, minor, patch = version
    if major >= 11:
        return f"macosx_{major + (1 if (minor, patch) != (0, 0) else 0)}_0_{arch}"
    return f"macosx_{major}_{minor + (1 if patch else 0)}_{arch}"


@dataclasses.dataclass(frozen=True)
class MachOSlice:
    """One architecture of a (possibly fat) Mach-O file."""

    arch: str
    minimum_os: Version | None
    """The macOS it needs at least; None: it says none."""
    version_command: str
    """Where that came from: ``LC_BUILD_VERSION``, ``LC_VERSION_MIN_MACOSX``, ""."""
    platform: str = "macOS"
    """The platform it is built for (LC_BUILD_VERSION: iOS, Mac Catalyst …)."""


@dataclasses.dataclass(frozen=True)
class MachOFile:
    """What :func:`read_macho` found: the shared data, and what only Mach-O has."""

    linkage: Linkage
    install_name: str
    """LC_ID_DYLIB ("" for none)."""
    slices: tuple[MachOSlice, ...]

    @property
    def minimum_os(self) -> Version | None:
        """The newest minimum macOS of its slices."""
        found = [s.minimum_os for s in self.slices if s.minimum_os is not None]
        return max(found) if found else None

    @property
    def minimum_os_text(self) -> str:
        version = self.minimum_os
        return _version_text(version) if version is not None else ""

    @property
    def archs(self) -> tuple[str, ...]:
        return tuple(s.arch for s in self.slices)


def _command_string(lc: Any, cmd: Any, data: bytes) -> str:
    """The ``lc_str`` of a load command (a dylib's name, an rpath), as macholib's own
    ``walkRelocatables`` finds it: at its offset, after the command's fixed fields."""
    from macholib.ptypes import sizeof  # type: ignore[import-untyped]

    offset = int(cmd.name if hasattr(cmd, "name") else cmd.path) - int(
        sizeof(lc.__class__) + sizeof(cmd.__class__)
    )
    end = data.find(b"\x00", offset)
    return data[offset : end if end >= 0 else len(data)].decode("utf-8", "replace")


def _symbols(macho: Any, header: Any) -> tuple[list[str], list[str]]:
    """The undefined and the exported symbols of one slice, without Mach-O's underscore."""
    from macholib.SymbolTable import SymbolTable  # type: ignore[import-untyped]

    if header.getSymbolTableCommand() is None:
        return [], []
    undefined: list[str] = []
    exported: list[str] = []
    for entry, raw in SymbolTable(macho, header).nlists:
        kind = int(entry.n_type)
        if not raw or kind & _N_STAB or not kind & _N_EXT:
            continue
        name = bytes(raw).decode("utf-8", "replace")
        name = name[1:] if name.startswith("_") else name
        if kind & _N_TYPE == _N_UNDF:
            if int(entry.n_value) == 0:  # else a common symbol, defined here
                undefined.append(name)
        elif not kind & _N_PEXT:
            exported.append(name)
    return undefined, exported


def read_macho(path: Path, abi: str = DEFAULT_ABI) -> MachOFile:
    """The load commands and symbols of a Mach-O file, every slice of a fat one; ``abi``:
    the library's torch ABI mode, for ``linkage.problems``. Raises ValueError (and
    struct.error, OSError) for a file macholib cannot read."""
    from macholib import mach_o  # type: ignore[import-untyped]
    from macholib.MachO import MachO  # type: ignore[import-untyped]

    links = {
        mach_o.LC_LOAD_DYLIB,
        mach_o.LC_LOAD_WEAK_DYLIB,
        mach_o.LC_REEXPORT_DYLIB,
        mach_o.LC_LAZY_LOAD_DYLIB,
        mach_o.LC_LOAD_UPWARD_DYLIB,
    }
    # Newer linkers write load commands macholib may not know yet (LC_ATOM_INFO).
    macho = MachO(str(path), allow_unknown_load_commands=True)
    needed: dict[str, None] = {}
    rpath: dict[str, None] = {}
    undefined: set[str] = set()
    exported: set[str] = set()
    install_name = ""
    slices = []
    for header in macho.headers:
        cputype, subtype = int(header.header.cputype), int(header.header.cpusubtype)
        arch = _CPU_TYPES.get(cputype, f"cputype {cputype:#x}")
        if arch == "arm64" and subtype & 0xFF == _CPU_SUBTYPE_ARM64E:
            arch = "arm64e"
        minimum: Version | None = None
        command = ""
        platform = "macOS"
        for lc, cmd, data in header.commands:
            kind = int(lc.cmd)
            if kind in links:
                needed[_command_string(lc, cmd, data)] = None
            elif kind == mach_o.LC_RPATH:
                rpath[_command_string(lc, cmd, data)] = None
            elif kind == mach_o.LC_ID_DYLIB:
                install_name = _command_string(lc, cmd, data)
            elif kind == mach_o.LC_BUILD_VERSION:
                minimum, command = _version(int(cmd.minos)), "LC_BUILD_VERSION"
                code = int(cmd.platform)
                if code != _PLATFORM_MACOS:
                    platform = str(mach_o.PLATFORM_NAMES.get(code, f"platform {code}"))
            elif kind == mach_o.LC_VERSION_MIN_MACOSX and not command:
                minimum, command = _version(int(cmd.version)), "LC_VERSION_MIN_MACOSX"
            elif kind in (
                mach_o.LC_VERSION_MIN_IPHONEOS,
                mach_o.LC_VERSION_MIN_TVOS,
                mach_o.LC_VERSION_MIN_WATCHOS,
            ):
                platform = str(mach_o.LC_NAMES[kind]).removeprefix("LC_VERSION_MIN_")
        slice_undefined, slice_exported = _symbols(macho, header)
        undefined.update(slice_undefined)
        exported.update(slice_exported)
        slices.append(MachOSlice(arch, minimum, command, platform))
    linkage = Linkage(
        path,
        tuple(needed),
        tuple(sorted(undefined)),
        tuple(rpath),
        tuple(sorted(exported)),
        abi,
        MACH_O,
    )
    return MachOFile(linkage, install_name, tuple(slices))


# --- one library of a wheel ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MachOLibraryAudit:
    needed: tuple[str, ...]
    minimum_os: str
    """``11.0``; "" when the library says none (or is unreadable)."""
    archs: tuple[str, ...]
    problems: tuple[str, ...]
    readable: bool = True
    """False: not a Mach-O file macholib can read (``problems`` says so)."""


def _is_metal(lib: str) -> bool:
    """Whether an LC_LOAD_DYLIB is one of what Metal code links."""
    if lib in METAL_DYLIBS:
        return True
    match = _SYSTEM_FRAMEWORK.match(lib)
    return bool(match and match.group(1) == match.group(2) and match.group(1) in METAL_FRAMEWORKS)


def _may_link_metal(backend: str) -> bool:
    """A metal library may; so may one of unknown backend (no manifest), as it may link
    every backend's torch libraries."""
    return backend == "metal" or backend not in BACKENDS


def _system_text(backend: str) -> str:
    names = [*SYSTEM_DYLIBS]
    if _may_link_metal(backend):
        names += [*METAL_DYLIBS, f"the {', '.join(METAL_FRAMEWORKS)} frameworks"]
    return f"a system library every macOS has ({', '.join(names)})"


def _link_problems(linkage: Linkage, torch_patterns: tuple[str, ...], backend: str) -> list[str]:
    name = linkage.path.name
    may_link_metal = _may_link_metal(backend)

    def torch_name(lib: str) -> bool:
        return is_torch_library(lib.rsplit("/", 1)[-1], torch_patterns)

    # Every Mac has Metal: what is wrong is Metal code in a library of another backend,
    # which the loader would load where the metal variant is not chosen.
    problems = [
        f"{name} links {lib}, which only a metal library may: it is a {backend} library, "
        "so its Metal code would load wherever the metal variant is not chosen. Fix: move "
        "the Metal code into the metal backend's library (ptkit_add_kernel_library(… "
        "BACKEND metal)), or drop the link"
        for lib in linkage.needed
        if _is_metal(lib) and not may_link_metal
    ]
    problems += linkage.link_problems(
        lambda lib: torch_name(lib) or lib in SYSTEM_DYLIBS or _is_metal(lib),
        backend=backend,
        torch_patterns=tuple(f"@rpath/{p}" for p in torch_patterns),
        runtime=_system_text(backend),
    )
    for lib in linkage.needed:
        base = lib.rsplit("/", 1)[-1]
        if torch_name(lib) and not linkage.is_python_link(lib) and lib != f"@rpath/{base}":
            problems.append(
                f"{name} links torch's {base} as {lib}, not @rpath/{base}: the user's torch "
                "is elsewhere, so dyld would not find it (or would load a second torch). Fix: "
                f"link torch's targets as they are installed (their install name is "
                f"@rpath/{base}), or install_name_tool -change {lib} @rpath/{base} {name}"
            )
    return problems


def _rpath_problems(linkage: Linkage) -> list[str]:
    name = linkage.path.name
    return [
        f"{name} has LC_RPATH {entry}, a path on the build machine: torch's libraries must "
        'come from the process that imported torch; set INSTALL_RPATH "" (or only '
        f"@loader_path entries), or install_name_tool -delete_rpath {entry} {name}"
        for entry in linkage.rpath
        if not entry.startswith(_RELATIVE_RPATH)
    ]


def _tag_problems(file: MachOFile, platform_tag: str) -> list[str]:
    """The library's architectures and minimum macOS against one ``macosx_X_Y_arch`` tag."""
    name = file.linkage.path.name
    match = _MACOSX_TAG.match(platform_tag)
    if match is None:
        return [
            f"{name}: the wheel's tag {platform_tag} is not macosx_<major>_<minor>_<arch>: "
            "its minimum macOS and architecture cannot be checked; let delocate-wheel or "
            "cibuildwheel write the tag"
        ]
    tag_version: Version = (int(match.group(1)), int(match.group(2)), 0)
    tag_arch = match.group(3)
    wanted = _TAG_ARCHS.get(tag_arch)
    problems = []
    if wanted is None:
        problems.append(
            f"{name}: the wheel's tag {platform_tag} names architecture {tag_arch}, which ptkit "
            f"does not know ({', '.join(_TAG_ARCHS)}): the library's ({', '.join(file.archs)}) "
            "are unchecked; build for arm64 (ptkit's macOS release platform)"
        )
        wanted = ()
    missing = [arch for arch in wanted if arch not in file.archs]
    if missing:
        problems.append(
            f"{name} is built for {', '.join(file.archs) or 'no architecture'} but its wheel's "
            f"tag {platform_tag} says {'+'.join(wanted)}: on {', '.join(missing)} Macs pip would "
            f"install it and dyld refuse it. Fix: build for {';'.join(wanted)} "
            f"(CMAKE_OSX_ARCHITECTURES={';'.join(wanted)}; cibuildwheel: CIBW_ARCHS_MACOS), or "
            "tag the wheel for what it holds"
        )
    shown = _version_text(tag_version)
    for piece in file.slices:
        if piece.arch not in wanted and wanted:
            continue  # a slice the tag does not promise is never loaded there
        if piece.platform != "macOS":
            problems.append(
                f"{name} ({piece.arch}) is built for {piece.platform}, not macOS: dyld on a Mac "
                "refuses it. Fix: build it with the macOS SDK (no -target for another Apple "
                "platform)"
            )
        elif piece.minimum_os is None:
            problems.append(
                f"{name} ({piece.arch}) has neither LC_BUILD_VERSION nor LC_VERSION_MIN_MACOSX: "
                f"its minimum macOS is unknown, so the tag's {shown} cannot be checked. Fix: "
                f"link it with MACOSX_DEPLOYMENT_TARGET={shown} (the linker then writes it)"
            )
        elif piece.minimum_os > tag_version:
            needs = _version_text(piece.minimum_os)
            problems.append(
                f"{name} ({piece.arch}) needs macOS {needs} ({piece.version_command} minos) but "
                f"its wheel's tag {platform_tag} says macOS {shown}: pip would install it on "
                f"macOS {shown}, where dyld refuses it. Fix: build with "
                f"MACOSX_DEPLOYMENT_TARGET={shown} (ptkit's macOS build environment and "
                "cibuildwheel set it), or tag the wheel "
                f"{_tag_for(piece.minimum_os, tag_arch)}"
            )
    return problems


def audit_macho_library(
    path: Path,
    *,
    backend: str,
    torch_patterns: tuple[str, ...],
    platforms: tuple[str, ...],
    abi: str = DEFAULT_ABI,
) -> MachOLibraryAudit:
    """Every Mach-O rule (the module docstring) for the ``backend`` library at ``path`` of
    a wheel tagged ``platforms``, bound to torch by ``abi``."""
    name = path.name
    try:
        file = read_macho(path, abi)
    except (ValueError, OSError, struct.error, EOFError, IndexError, KeyError) as exc:
        problem = f"{name}: not a readable Mach-O library ({exc}): the wheel is corrupt; rebuild it"
        return MachOLibraryAudit((), "", (), (problem,), readable=False)
    linkage = file.linkage
    problems = [
        *linkage.problems,
        *_link_problems(linkage, torch_patterns, backend),
        *_rpath_problems(linkage),
    ]
    for platform_tag in platforms:
        problems += _tag_problems(file, platform_tag)
    return MachOLibraryAudit(linkage.needed, file.minimum_os_text, file.archs, tuple(problems))
