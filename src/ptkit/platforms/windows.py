"""Windows (x86-64): PE DLLs, delvewheel, ``win_amd64`` tags, MSVC's flags.

A kernel library is ``ptkit_cpu.dll`` (no ``lib`` prefix, CMake's ``MODULE``), audited by
:mod:`ptkit.release.pe_audit` (imported DLLs, exports, machine type). Before the loader
loads one it adds torch's ``lib`` folder and the library's own with
``os.add_dll_directory`` (:meth:`WindowsPlatform.library_search_folders`, applied by
:mod:`ptkit.runtime.library_folders`): Windows does not search the folder of an
already-loaded DLL for a DLL's imports, and Python 3.8+ no longer searches ``PATH``.
The kernels compile for MSVC through their portable path (``cpp/include/ptkit/cpu/
simd_portable.h``), which the C++ kernels pick by cpuid themselves. Not done yet: reading
the CPU's features in Python (``cpu_features``), so a ``REQUIRES_ISA`` library is not
loaded here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from ptkit.platforms.base import Platform, ReleasePlatform

__all__ = ["WindowsPlatform"]


class WindowsPlatform(Platform):
    name = "windows"
    system = "Windows"
    binary_format = "PE"
    binary_magics = (b"MZ",)  # the DOS stub every PE file starts with
    library_prefix = ""
    library_suffix = ".dll"
    library_names_ignore_case = True
    repair_tool = "delvewheel"
    repair_note = "torch's DLLs (and its GPU runtime's) are loaded by `import torch`, not bundled."
    release_platforms = (
        ReleasePlatform(
            "win_amd64", "windows", "AMD64", ("amd64", "x86_64"), "windows-amd64", "win_amd64",
            "windows-2025", "win_amd64",
        ),
    )  # fmt: skip
    toolkit_dir = "C:\\ptkit-toolkit"
    toolkit_site = "C:/ptkit-toolkit/Lib/site-packages"
    # Compiler launchers need a Ninja build (the Visual Studio generator ignores them).
    build_environment: ClassVar[dict[str, str]] = {"CMAKE_GENERATOR": "Ninja"}
    _native_pattern = re.compile(r"\.(dll|pyd)$")
    wheel_tag_prefixes = ("win",)

    def library_search_folders(self, library: Path, torch_dir: Path) -> tuple[Path, ...]:
        """torch's ``lib`` folder (``torch_cpu.dll``, ``c10.dll`` and the GPU runtime
        torch ships), then the library's own folder (another DLL of the package). torch's
        ``__init__`` adds its folder too, but a kernel DLL must not depend on how torch
        was imported. Windows searches added folders in no set order, so the order here
        is only the order they are added in."""
        return tuple(dict.fromkeys((torch_dir / "lib", library.parent)))

    def repair_command(self, excludes: Sequence[str]) -> str:
        flags = " ".join(f"--exclude {lib}" for lib in excludes)
        return f"delvewheel repair {flags} -w {{dest_dir}} {{wheel}}"

    def venv_python(self, venv: str) -> str:
        return f"{venv}\\Scripts\\python.exe"

    def shell_quote(self, argument: str) -> str:
        # cibuildwheel runs Windows commands in cmd.exe, which knows double quotes only.
        return f'"{argument}"'


PLATFORM = WindowsPlatform()
