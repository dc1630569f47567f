"""Audits of a built native library: what it links and which symbols it expects.

A library on the LibTorch stable ABI may need torch's C shim (``aoti_torch_*``,
``torch_*``) and the C/C++ runtime, and nothing of torch's C++ API outside the
header-only ``torch::stable`` namespace; it must not link libpython or
libtorch_python, so that one wheel serves every CPython and every torch >= its
target. Needs ``pyelftools`` (the ``test`` extra).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

__all__ = ["FORBIDDEN_NEEDED", "ElfAudit", "audit_elf"]

# Linking any of these ties the wheel to one Python or one torch build.
FORBIDDEN_NEEDED = (re.compile(r"^libpython\d"), re.compile(r"^libtorch_python\.so"))

# Itanium-mangled names in torch's C++ namespaces (c10::, at::, torch::, caffe2::).
_TORCH_CXX = re.compile(r"^_ZN(?:K|St)?(?:3c10|2at|5torch|6caffe2)")
_TORCH_STABLE = re.compile(r"^_ZN(?:K)?5torch6stable")


@dataclasses.dataclass(frozen=True)
class ElfAudit:
    path: Path
    needed: tuple[str, ...]
    undefined: tuple[str, ...]
    rpath: tuple[str, ...]

    @property
    def problems(self) -> list[str]:
        found = []
        for lib in self.needed:
            if any(p.match(lib) for p in FORBIDDEN_NEEDED):
                found.append(
                    f"{self.path.name} links {lib}: the wheel would be tied to one Python/torch"
                )
        for sym in self.undefined:
            if _TORCH_CXX.match(sym) and not _TORCH_STABLE.match(sym):
                found.append(
                    f"{self.path.name} needs {sym}, a torch C++ symbol outside the stable ABI: "
                    "build with TORCH_STABLE_ONLY and torch/csrc/stable headers only"
                )
        return found


def audit_elf(path: Path) -> ElfAudit:
    """Read DT_NEEDED, DT_RPATH/DT_RUNPATH and the undefined dynamic symbols of an ELF file."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    needed: list[str] = []
    rpath: list[str] = []
    undefined: list[str] = []
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
                if sym.name and sym["st_shndx"] == "SHN_UNDEF":
                    undefined.append(sym.name)
    return ElfAudit(path, tuple(needed), tuple(sorted(set(undefined))), tuple(rpath))
