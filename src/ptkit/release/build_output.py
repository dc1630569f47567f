"""What the build stage's own output (the unrepaired wheel) must not hold, checked before
any repair can hide it.

auditwheel's repair removes a ``DT_NEEDED`` on libpython (forbidden in manylinux wheels)
and adds an RPATH; after it, the library still needs Python's symbols, but nothing in the
repaired wheel says so. So the libraries of the wheel ``pip wheel`` wrote are checked
here, for what ties them to Python (:meth:`ptkit.release.linkage.Linkage.python_problems`,
the same rule the audit applies): libpython or libtorch_python linked, Python's C API
needed (``PyModule_Create2``, ``_Py_Dealloc``), a Python module init exported
(``PyInit_*``). Every problem names the library, the cause and the fix.

ELF (Linux) only: auditwheel's is the repair that hides such a link. A cross-built
Mach-O or PE wheel is not repaired here, so the audit sees its links as built. Needs
``pyelftools`` (the ``build`` extra).
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

from ptkit.platforms import platform_for_wheel_tag

__all__ = ["python_ties"]


def _platform_tag(wheel: Path) -> str:
    return wheel.name[: -len(".whl")].split("-")[-1]


def python_ties(wheel: Path) -> list[str]:
    """The problems of ``wheel``'s native libraries that tie them to Python (empty: none)."""
    from elftools.common.exceptions import ELFError

    from ptkit.release.elf_audit import audit_elf

    platform = platform_for_wheel_tag(_platform_tag(wheel).split(".")[0])
    if platform is None or platform.binary_format != "ELF":
        return []
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not platform.is_native_library(name):
                continue
            path = Path(archive.extract(name, tmp))
            try:
                problems += audit_elf(path).python_problems
            except (ELFError, OSError, ValueError) as exc:
                problems.append(f"{name}: not a readable ELF library ({exc}): rebuild it")
    return problems
