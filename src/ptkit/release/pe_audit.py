"""The audit of a PE library (the Windows platform's binary format): the DLLs it imports,
the symbols it imports from them and exports, and its machine type.

The Python ties and the torch ABI rules are every format's (:mod:`ptkit.release.linkage`);
this module reads a DLL into them (imported names as the import table has them: C names,
and MSVC's decorated C++ names such as ``?foo@c10@@…``) and adds what is Windows' own. For
a library of a ``win_amd64`` wheel (:mod:`ptkit.release.wheel_audit`):

* every imported DLL (the import table and the delay-load one) is torch's for the
  library's backend (:mod:`ptkit.release.torch_libraries`, its GPU runtime included), or
  one every Windows the wheel runs on has (:data:`SYSTEM_DLLS`: KERNEL32, ADVAPI32,
  DbgHelp, the UCRT, the MSVC runtime torch ships and needs too); DLL names compare
  case-insensitively;
* no debug runtime (``ucrtbased.dll``, ``vcruntime140d.dll``): a Debug build;
* its machine type is the tag's (AMD64 for ``win_amd64``), and it is a DLL.

Needs ``pefile`` (the reader delvewheel, the Windows repair tool, uses), imported inside
the functions: the loader and the CLI import this package without it.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ptkit.release.linkage import PE, Linkage
from ptkit.torch_abi import DEFAULT_ABI

__all__ = [
    "SYSTEM_DLLS",
    "PeFile",
    "PeLibraryAudit",
    "audit_pe_library",
    "read_pe",
]

# What every Windows 10+ has, lower case: KERNEL32 and the API sets (api-ms-win-core-*
# resolve to it), ADVAPI32 and DbgHelp (torch's own c10.dll imports both), the Universal
# CRT (ucrtbase and its api-ms-win-crt-* API sets), and the MSVC runtime of /MD builds
# (VCRUNTIME140_1: x64 C++ exceptions; MSVCP140*: the C++ standard library), which
# torch's own DLLs import and torch's wheel ships.
SYSTEM_DLLS = (
    "kernel32.dll",
    "advapi32.dll",
    "dbghelp.dll",
    "api-ms-win-core-*.dll",
    "api-ms-win-crt-*.dll",
    "ucrtbase.dll",
    "vcruntime140.dll",
    "vcruntime140_1.dll",
    "msvcp140.dll",
    "msvcp140_1.dll",
    "msvcp140_2.dll",
    "msvcp140_atomic_wait.dll",
    "msvcp140_codecvt_ids.dll",
)
# The debug runtimes (/MDd): on no user's machine.
_DEBUG_RUNTIME = re.compile(r"^(?:ucrtbased|vcruntime140(?:_1)?d|msvcp140(?:_\d)?d(?:_\w+)?)\.dll$")
# IMAGE_FILE_MACHINE_*, and the machine each Windows wheel tag promises.
_MACHINES = {0x8664: "AMD64", 0xAA64: "ARM64", 0x14C: "I386", 0x1C4: "ARMNT"}
_TAG_MACHINES = {"win_amd64": "AMD64", "win_arm64": "ARM64", "win32": "I386"}
_IMAGE_FILE_DLL = 0x2000


def _matches(dll: str, patterns: tuple[str, ...]) -> bool:
    """Whether a DLL name matches one of ``patterns``; Windows compares them caselessly."""
    name = dll.lower()
    return any(fnmatchcase(name, pattern.lower()) for pattern in patterns)


@dataclasses.dataclass(frozen=True)
class PeFile:
    """What :func:`read_pe` found: the shared data, and what only PE has."""

    linkage: Linkage
    machine: str
    """``AMD64``, ``ARM64`` … (``machine 0x…`` for one ptkit does not name)."""
    is_dll: bool
    imports: dict[str, tuple[str, ...]]
    """DLL -> the names imported from it (by-ordinal imports have none)."""


def _name(value: Any) -> str:
    return bytes(value).decode("ascii", "replace") if value else ""


def read_pe(path: Path, abi: str = DEFAULT_ABI) -> PeFile:
    """The imports, exports and machine of a PE file; ``abi``: the library's torch ABI
    mode, for ``linkage.problems``. Raises pefile.PEFormatError (and OSError, ValueError)
    for a file pefile cannot read."""
    import pefile  # type: ignore[import-untyped]

    pe = pefile.PE(str(path), fast_load=True)
    try:
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY[f"IMAGE_DIRECTORY_ENTRY_{kind}"]
                for kind in ("IMPORT", "DELAY_IMPORT", "EXPORT")
            ]
        )
        imports: dict[str, tuple[str, ...]] = {}
        for table in ("DIRECTORY_ENTRY_IMPORT", "DIRECTORY_ENTRY_DELAY_IMPORT"):
            for entry in getattr(pe, table, []):
                dll = _name(entry.dll)
                names = tuple(_name(i.name) for i in entry.imports if i.name)
                imports[dll] = (*imports.get(dll, ()), *names)
        exports = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
        exported = [_name(s.name) for s in exports.symbols if s.name] if exports else []
        code = int(pe.FILE_HEADER.Machine)
        is_dll = bool(int(pe.FILE_HEADER.Characteristics) & _IMAGE_FILE_DLL)
    finally:
        pe.close()
    undefined = sorted({name for names in imports.values() for name in names})
    linkage = Linkage(
        path, tuple(imports), tuple(undefined), (), tuple(sorted(set(exported))), abi, PE
    )
    return PeFile(linkage, _MACHINES.get(code, f"machine {code:#x}"), is_dll, imports)


# --- one library of a wheel ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PeLibraryAudit:
    needed: tuple[str, ...]
    machine: str
    problems: tuple[str, ...]
    readable: bool = True
    """False: not a PE file pefile can read (``problems`` says so)."""


def _link_problems(pe: PeFile, torch_patterns: tuple[str, ...], backend: str) -> list[str]:
    name = pe.linkage.path.name
    problems = [
        f"{name} imports {dll}, the debug C/C++ runtime of a Debug build: no user has it. "
        "Fix: build Release (CMAKE_BUILD_TYPE=Release, /MD not /MDd)"
        for dll in pe.linkage.needed
        if _DEBUG_RUNTIME.match(dll.lower())
    ]
    return problems + pe.linkage.link_problems(
        lambda dll: (
            _matches(dll, (*torch_patterns, *SYSTEM_DLLS))
            or bool(_DEBUG_RUNTIME.match(dll.lower()))
        ),
        backend=backend,
        torch_patterns=torch_patterns,
        runtime="a DLL every Windows has (KERNEL32, ADVAPI32, DbgHelp, the UCRT's ucrtbase "
        "and api-ms-win-*, the MSVC runtime VCRUNTIME140*/MSVCP140*)",
    )


def _machine_problems(pe: PeFile, platforms: tuple[str, ...]) -> list[str]:
    name = pe.linkage.path.name
    problems = []
    if not pe.is_dll:
        problems.append(
            f"{name} is a PE image but not a DLL (no IMAGE_FILE_DLL): torch cannot load it. "
            "Fix: build it as a SHARED library (ptkit_add_kernel_library)"
        )
    for tag in platforms:
        wanted = _TAG_MACHINES.get(tag)
        if wanted is None:
            problems.append(
                f"{name}: the wheel's tag {tag} is none ptkit knows ({', '.join(_TAG_MACHINES)})"
                ": the DLL's machine is unchecked; let cibuildwheel or delvewheel write the tag"
            )
        elif pe.machine != wanted:
            problems.append(
                f"{name} is an {pe.machine} DLL but its wheel's tag {tag} says {wanted}: pip "
                f"would install it on {wanted} Windows, where it does not load. Fix: build with "
                f"the {wanted} MSVC toolchain (vcvarsall {wanted.lower()}; cibuildwheel: "
                f"CIBW_ARCHS_WINDOWS={wanted}), or tag the wheel for what it holds"
            )
    return problems


def audit_pe_library(
    path: Path,
    *,
    backend: str,
    torch_patterns: tuple[str, ...],
    platforms: tuple[str, ...],
    abi: str = DEFAULT_ABI,
) -> PeLibraryAudit:
    """Every PE rule (the module docstring) for the ``backend`` library at ``path`` of a
    wheel tagged ``platforms``, bound to torch by ``abi``."""
    import pefile

    name = path.name
    try:
        pe = read_pe(path, abi)
    except (pefile.PEFormatError, OSError, ValueError, struct.error, IndexError) as exc:
        problem = f"{name}: not a readable PE library ({exc}): the wheel is corrupt; rebuild it"
        return PeLibraryAudit((), "", (problem,), readable=False)
    problems = [
        *pe.linkage.problems,
        *_link_problems(pe, torch_patterns, backend),
        *_machine_problems(pe, platforms),
    ]
    return PeLibraryAudit(pe.linkage.needed, pe.machine, tuple(problems))
