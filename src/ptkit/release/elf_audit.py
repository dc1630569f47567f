"""The audit of an ELF library (the Linux platform's binary format): what it links and
which symbols and symbol versions it needs.

A library binds to torch in one of two ways (:mod:`ptkit.torch_abi`). On the LibTorch
stable ABI it may need torch's C shim (``aoti_torch_*``, ``torch_*``) and the C/C++
runtime, and nothing of torch's C++ API outside the header-only ``torch::stable``
namespace, so that one wheel serves every torch >= its target. In the ``torch`` mode (the
classic C++ API) it is entitled to torch's C++ symbols (``at::``, ``c10::``, ``torch::``)
and to torch's libraries of its version. In both, it must not link libpython or
libtorch_python, need Python's C API (``Py*``) or export a Python module init
(``PyInit_*``): one wheel serves every CPython. Those rules are every format's
(:mod:`ptkit.release.linkage`); this module reads an ELF file into them
(:func:`audit_elf`) and adds what only ELF has. For a library of a wheel
(:mod:`ptkit.release.wheel_audit`):

* every DT_NEEDED is one torch provides for the library's backend
  (:mod:`ptkit.release.torch_libraries`) or the C/C++ runtime every manylinux system
  has; nothing else, so no library would be missing on a user's machine;
* no RPATH into the build machine (torch's libraries come from the process that
  imported torch);
* the highest GLIBC / GLIBCXX / CXXABI / GCC symbol version it requires is allowed by
  the wheel's manylinux tag, per the policy table auditwheel ships.

Symbols it may not need are reported as one summary per library (how many, from which
namespace, the first few demangled) with the way out, not one line per symbol.

Needs ``pyelftools``, imported inside the functions (the ``build`` extra: the loader
and the CLI import this package without it); the manylinux check needs ``auditwheel``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from pathlib import Path

from ptkit.release.linkage import PYTHON_SYMBOL, Linkage
from ptkit.release.torch_libraries import is_torch_library
from ptkit.torch_abi import DEFAULT_ABI

__all__ = [
    "C_RUNTIME_NEEDED",
    "PYTHON_SYMBOL",
    "ElfLibraryAudit",
    "ManylinuxPolicy",
    "audit_elf",
    "audit_elf_library",
    "highest_symbol_versions",
    "is_manylinux",
    "load_manylinux_policy",
    "required_symbol_versions",
]

# The C/C++ runtime: on every system a manylinux tag describes.
C_RUNTIME_NEEDED = (
    re.compile(r"^lib(c|m|dl|rt|pthread)\.so\.\d+$"),
    re.compile(r"^libstdc\+\+\.so\.6$"),
    re.compile(r"^libgcc_s\.so\.1$"),
    re.compile(r"^ld-linux(-x86-64|-aarch64)?\.so\.\d+$"),
    re.compile(r"^ld64\.so\.\d+$"),
)

_VERSIONED_PREFIXES = {"GLIBC", "GLIBCXX", "CXXABI", "GCC"}
_MANYLINUX = re.compile(r"^(manylinux_(\d+)_(\d+))_(\w+)$")
_LEGACY_MANYLINUX = {
    "manylinux1": "manylinux_2_5",
    "manylinux2010": "manylinux_2_12",
    "manylinux2014": "manylinux_2_17",
}
_TOOLCHAIN_FIX = (
    "build in the manylinux image of the tag you need (cibuildwheel does), or let "
    "auditwheel choose the tag (`ptkit build` does)"
)

# {policy name: {arch: {prefix: {version, …}}}}, auditwheel's table.
ManylinuxPolicy = dict[str, dict[str, dict[str, set[str]]]]


def audit_elf(path: Path, abi: str = DEFAULT_ABI) -> Linkage:
    """Read DT_NEEDED, DT_RPATH/DT_RUNPATH and the dynamic symbols (undefined, defined) of
    an ELF file; ``abi``: the library's torch ABI mode, for ``Linkage.problems``."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    needed: list[str] = []
    rpath: list[str] = []
    undefined: list[str] = []
    exported: list[str] = []
    with path.open("rb") as f:
        elf = ELFFile(f)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    # pyelftools sets these attributes per tag kind
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(str(getattr(tag, "needed", "")))
                    elif tag.entry.d_tag == "DT_RPATH":
                        rpath.append(str(getattr(tag, "rpath", "")))
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        rpath.append(str(getattr(tag, "runpath", "")))
        dynsym = elf.get_section_by_name(".dynsym")
        if isinstance(dynsym, SymbolTableSection):
            for sym in dynsym.iter_symbols():
                if not sym.name:
                    continue
                if sym["st_shndx"] == "SHN_UNDEF":
                    undefined.append(sym.name)
                elif sym["st_info"]["bind"] != "STB_LOCAL":
                    exported.append(sym.name)
    return Linkage(
        path,
        tuple(needed),
        tuple(sorted(set(undefined))),
        tuple(rpath),
        tuple(sorted(set(exported))),
        abi,
    )


# --- symbol versions and the manylinux policy ----------------------------------------


def _version_key(version: str) -> tuple[int, ...]:
    """``2.2.5`` < ``2.34``; non-numeric parts (``TM_1``) sort first."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[._]", version))


def required_symbol_versions(library: Path) -> dict[str, set[str]]:
    """``{soname: {"GLIBC_2.34", …}}`` from the library's version needs (.gnu.version_r).

    The dynamic loader is left out, as auditwheel does: its versions follow glibc's.
    """
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    found: dict[str, set[str]] = {}
    with library.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for verneed, auxiliaries in section.iter_versions():
                soname = str(verneed.name)
                if soname.startswith("ld-linux") or soname.startswith("ld64.so"):
                    continue
                found.setdefault(soname, set()).update(str(aux.name) for aux in auxiliaries)
    return found


def highest_symbol_versions(versions: dict[str, set[str]]) -> dict[str, str]:
    """Per prefix (GLIBC, GLIBCXX, CXXABI, GCC): the highest version required."""
    highest: dict[str, str] = {}
    for names in versions.values():
        for name in names:
            prefix, _, version = name.partition("_")
            if not version or prefix not in _VERSIONED_PREFIXES:
                continue
            if prefix not in highest or _version_key(version) > _version_key(highest[prefix]):
                highest[prefix] = version
    return highest


def _policy_file() -> Path | None:
    spec = importlib.util.find_spec("auditwheel")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "policy" / "manylinux-policy.json"
    return path if path.is_file() else None


def load_manylinux_policy(path: Path | None = None) -> ManylinuxPolicy:
    """``{policy name: {arch: {prefix: {version, …}}}}`` from auditwheel's policy table.

    The table is auditwheel's own, so the audit and the repair agree on what each
    manylinux tag allows; raises FileNotFoundError when auditwheel is not installed.
    """
    source = path or _policy_file()
    if source is None:
        raise FileNotFoundError(
            "auditwheel's manylinux-policy.json not found (auditwheel is in ptkit's build "
            "extra, not in ptkit itself); install it: pip install 'ptkit[build]' "
            "(or pip install auditwheel)"
        )
    table: ManylinuxPolicy = {}
    for entry in json.loads(source.read_text(encoding="utf-8")):
        by_arch = entry.get("symbol_versions", {})
        table[entry["name"]] = {
            arch: {prefix: set(versions) for prefix, versions in prefixes.items()}
            for arch, prefixes in by_arch.items()
        }
        for alias in entry.get("aliases", []):
            table[alias] = table[entry["name"]]
    return table


def is_manylinux(platform: str) -> bool:
    """Whether a platform tag is a manylinux one (PEP 600 or a legacy alias)."""
    return bool(_MANYLINUX.match(platform)) or platform.split("_", 1)[0] in _LEGACY_MANYLINUX


def _manylinux_problems(
    library: str, versions: dict[str, set[str]], platform: str, policy: ManylinuxPolicy
) -> list[str]:
    """Symbol versions ``library`` requires that ``platform``'s policy does not allow."""
    match = _MANYLINUX.match(platform)
    legacy = platform.split("_", 1)
    if match:
        name, arch = match.group(1), match.group(4)
    elif legacy[0] in _LEGACY_MANYLINUX and len(legacy) == 2:
        name, arch = _LEGACY_MANYLINUX[legacy[0]], legacy[1]
    else:
        return []
    allowed = policy.get(name, {}).get(arch)
    if allowed is None:
        return [
            f"{library}: no manylinux policy for {platform} in auditwheel's table: update "
            "auditwheel, or repair to a tag it knows"
        ]
    problems = []
    for soname, names in sorted(versions.items()):
        for full in sorted(names, key=lambda n: _version_key(n.partition("_")[2])):
            prefix, _, version = full.partition("_")
            if prefix in allowed and version not in allowed[prefix]:
                newest = max(allowed[prefix], key=_version_key)
                problems.append(
                    f"{library} needs {full} ({soname}), which {platform} does not allow "
                    f"(it allows up to {prefix}_{newest}): {_TOOLCHAIN_FIX}"
                )
    return problems


# --- one library of a wheel ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ElfLibraryAudit:
    needed: tuple[str, ...]
    highest_versions: dict[str, str]
    problems: tuple[str, ...]
    readable: bool = True
    """False: not an ELF file pyelftools can read (``problems`` says so)."""


def _needed_problems(elf: Linkage, torch_patterns: tuple[str, ...], backend: str) -> list[str]:
    return elf.link_problems(
        lambda lib: (
            is_torch_library(lib, torch_patterns) or any(p.match(lib) for p in C_RUNTIME_NEEDED)
        ),
        backend=backend,
        torch_patterns=torch_patterns,
        runtime="the C/C++ runtime",
    )


def _rpath_problems(name: str, rpath: tuple[str, ...]) -> list[str]:
    return [
        f"{name} has RPATH {item}, a path on the build machine: torch's libraries "
        'must come from the process that imported torch; set INSTALL_RPATH ""'
        for entry in rpath
        for item in entry.split(":")
        if item and not item.startswith("$ORIGIN")
    ]


def audit_elf_library(
    path: Path,
    *,
    backend: str,
    torch_patterns: tuple[str, ...],
    platforms: tuple[str, ...],
    policy: ManylinuxPolicy | None,
    abi: str = DEFAULT_ABI,
) -> ElfLibraryAudit:
    """Every ELF rule (the module docstring) for the ``backend`` library at ``path`` of a
    wheel tagged ``platforms``, bound to torch by ``abi``; ``policy`` None: the symbol
    versions are not checked."""
    from elftools.common.exceptions import ELFError

    name = path.name
    try:
        elf = audit_elf(path, abi)
        versions = required_symbol_versions(path)
    except (ELFError, OSError, ValueError) as exc:
        problem = f"{name}: not a readable ELF library ({exc}): the wheel is corrupt; rebuild it"
        return ElfLibraryAudit((), {}, (problem,), readable=False)
    problems = [
        *elf.problems,
        *_needed_problems(elf, torch_patterns, backend),
        *_rpath_problems(name, elf.rpath),
    ]
    if policy is not None:
        for platform in platforms:
            problems += _manylinux_problems(name, versions, platform, policy)
    return ElfLibraryAudit(elf.needed, highest_symbol_versions(versions), tuple(problems))
