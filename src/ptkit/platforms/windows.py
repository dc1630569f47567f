"""Windows (x86-64): PE DLLs, delvewheel, ``win_amd64`` tags, MSVC's flags.

A kernel library is ``ptkit_cpu.dll`` (no ``lib`` prefix, CMake's ``MODULE``), audited by
:mod:`ptkit.release.pe_audit` (imported DLLs, exports, machine type). Not done yet:
the loader's ``os.add_dll_directory`` for torch's ``lib`` folder (Windows does not search
the folder of an already-loaded DLL for its imports), and the kernels' MSVC path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from ptkit.platforms.base import Platform, ReleasePlatform

__all__ = ["WindowsPlatform"]


class WindowsPlatform(Platform):
    name = "windows"
    system = "Windows"
    binary_format = "PE"
    library_prefix = ""
    library_suffix = ".dll"
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

    def repair_command(self, excludes: Sequence[str]) -> str:
        flags = " ".join(f"--exclude {lib}" for lib in excludes)
        return f"delvewheel repair {flags} -w {{dest_dir}} {{wheel}}"

    def venv_python(self, venv: str) -> str:
        return f"{venv}\\Scripts\\python.exe"

    def shell_quote(self, argument: str) -> str:
        # cibuildwheel runs Windows commands in cmd.exe, which knows double quotes only.
        return f'"{argument}"'


PLATFORM = WindowsPlatform()
