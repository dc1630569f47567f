"""Is a file a complete shared library for this machine? Checked before ``dlopen``.

``dlopen`` of a truncated library whose segments reach past the end of the file
kills the process (SIGBUS when the mapping is touched), and a library for another
architecture fails with a message that does not say so. Both are caught here from
the ELF header and program headers, with the standard library only.
"""

from __future__ import annotations

import platform
import struct
from pathlib import Path

__all__ = ["ELF_MAGIC", "elf_problem"]

ELF_MAGIC = b"\x7fELF"
"""What every ELF file starts with (the System V ABI's ``e_ident``)."""

# ELF e_machine values (System V ABI) and the names machines report.
_MACHINES = {
    3: "x86",
    62: "x86_64",
    40: "arm",
    183: "aarch64",
    21: "ppc64le",
    22: "s390x",
    243: "riscv64",
}
_MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64", "i686": "x86", "i386": "x86"}
_PT_LOAD = 1


def _this_machine() -> str:
    machine = platform.machine().lower()
    return _MACHINE_ALIASES.get(machine, machine)


def elf_problem(path: Path, machine: str | None = None) -> str | None:
    """Why ``path`` cannot be a loadable library for ``machine`` (default: this one)."""
    machine = machine or _this_machine()
    try:
        with path.open("rb") as f:
            header = f.read(64)
            size = path.stat().st_size
            if len(header) < 64 or not header.startswith(ELF_MAGIC):
                return f"{path.name} is not an ELF shared library"
            if header[4] != 2 or header[5] != 1:
                return (
                    f"{path.name} is not a 64-bit little-endian ELF file; this machine is {machine}"
                )
            (e_machine,) = struct.unpack_from("<H", header, 0x12)
            built_for = _MACHINES.get(e_machine, f"ELF machine {e_machine}")
            if built_for != machine:
                return f"{path.name} was built for {built_for}; this machine is {machine}"
            (phoff,) = struct.unpack_from("<Q", header, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
            if phoff + phnum * phentsize > size:
                return f"{path.name} is truncated: its program headers end past the file ({size} bytes)"
            f.seek(phoff)
            table = f.read(phnum * phentsize)
    except OSError as exc:
        return f"{path.name} cannot be read: {exc.strerror or exc}"
    for index in range(phnum):
        (p_type,) = struct.unpack_from("<I", table, index * phentsize)
        p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(
            "<QQQQ", table, index * phentsize + 8
        )
        if p_type == _PT_LOAD and p_offset + p_filesz > size:
            return (
                f"{path.name} is truncated: a loadable segment ends at byte {p_offset + p_filesz}, "
                f"the file has {size}; reinstall the package"
            )
    return None
