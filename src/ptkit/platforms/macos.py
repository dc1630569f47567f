"""macOS (Apple silicon): Mach-O dylibs, delocate, ``macosx_<version>_arm64`` tags.

Filled in as far as the release configuration needs it; building, auditing (Mach-O load
commands, ``@rpath``, minimum OS) and loading on macOS are not done yet: a Mach-O
library is reported as not audited rather than passed unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from ptkit.platforms.base import Platform, ReleasePlatform

__all__ = ["MacosPlatform"]


class MacosPlatform(Platform):
    name = "macos"
    system = "Darwin"
    binary_format = "Mach-O"
    library_suffix = ".dylib"
    repair_tool = "delocate"
    repair_note = (
        "torch's libraries are not in the repair environment (the build's isolated\n"
        "environment held torch): they stay unresolved and uncopied, found at run time."
    )
    release_platforms = (
        # 11.0: cibuildwheel's floor for arm64, and torch's own macOS wheels' tag.
        ReleasePlatform(
            "macosx_arm64", "macos", "arm64", ("arm64",), "darwin-arm64", "macosx_arm64",
            "macos-15", "macosx_11_0_arm64",
        ),
    )  # fmt: skip
    build_environment: ClassVar[dict[str, str]] = {"MACOSX_DEPLOYMENT_TARGET": "11.0"}
    _native_pattern = re.compile(r"\.(dylib|so)$")
    wheel_tag_prefixes = ("macosx",)

    def repair_command(self, excludes: Sequence[str]) -> str:
        flags = " ".join(f"--exclude {lib}" for lib in excludes)
        return (
            "delocate-wheel --require-archs arm64 --ignore-missing-dependencies "
            f"{flags} -w {{dest_dir}} -v {{wheel}}"
        )


PLATFORM = MacosPlatform()
