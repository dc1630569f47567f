"""macOS (Apple silicon): Mach-O dylibs, delocate, ``macosx_<version>_arm64`` tags.

A kernel library is a ``SHARED`` dylib (CMake's ``MODULE`` on macOS is a bundle, linked
with ``-bundle``, which zig's linker lacks and which torch does not need), audited by
:mod:`ptkit.release.macho_audit`. The deployment target is the minimum macOS of the
torch the wheel is built against: a dylib that links torch's cannot load on an older
macOS than torch's own, and linking for an older one only earns linker warnings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from ptkit.platforms.base import MpsSupport, Platform, ReleasePlatform

__all__ = ["TORCH_MINIMUM_MACOS", "MacosPlatform", "macos_version_tuple"]

TORCH_MINIMUM_MACOS = "14.0"
"""The minimum macOS of torch's own arm64 wheels the release builds against: 14.0 for
torch 2.12 to 2.15 (PyPI's file names, read 2026-12-03; 2.9 and 2.11 were 11.0). A cross
build reads it from the target torch's ``libtorch_cpu.dylib`` instead (:mod:`ptkit.cross`)."""


def macos_version_tuple(version: str) -> tuple[int, int, int] | None:
    """``14.5`` -> (14, 5, 0), padded so that ``14`` and ``14.0`` compare equal; None for
    what is not a macOS version (``platform.mac_ver()`` answers ``''`` off macOS)."""
    match = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", version.strip())
    if match is None:
        return None
    major, minor, patch = (int(part or 0) for part in match.groups())
    return major, minor, patch


class MacosPlatform(Platform):
    name = "macos"
    system = "Darwin"
    binary_format = "Mach-O"
    # Thin (32/64-bit, either byte order) and fat (universal) headers.
    binary_magics = tuple(
        bytes.fromhex(m) for m in ("feedface", "cefaedfe", "feedfacf", "cffaedfe", "cafebabe")
    )
    library_suffix = ".dylib"
    library_type = "SHARED"
    repair_tool = "delocate"
    repair_note = (
        "torch's libraries are not in the repair environment (the build's isolated\n"
        "environment held torch): they stay unresolved and uncopied, found at run time."
    )
    release_platforms = (
        ReleasePlatform(
            "macosx_arm64", "macos", "arm64", ("arm64",), "darwin-arm64", "macosx_arm64",
            "macos-15", f"macosx_{TORCH_MINIMUM_MACOS.replace('.', '_')}_arm64",
        ),
    )  # fmt: skip
    build_environment: ClassVar[dict[str, str]] = {"MACOSX_DEPLOYMENT_TARGET": TORCH_MINIMUM_MACOS}
    _native_pattern = re.compile(r"\.(dylib|so)$")
    wheel_tag_prefixes = ("macosx",)

    def mps_support(self, machine: str, apple_gpu: bool, os_version: str | None) -> MpsSupport:
        """torch's macOS wheels are arm64 only (Apple silicon) and built with MPS; its
        device needs the Apple GPU and the macOS torch itself needs
        (:data:`TORCH_MINIMUM_MACOS`)."""
        if machine.lower() != "arm64":
            return MpsSupport(False, False, f"torch's macOS wheels are for arm64, not {machine}")
        if not apple_gpu:
            return MpsSupport(True, False, "no Apple GPU was found")
        version = macos_version_tuple(os_version or "")
        minimum = macos_version_tuple(TORCH_MINIMUM_MACOS)
        if version is None or minimum is None:
            return MpsSupport(True, False, "the macOS version is unknown")
        if version < minimum:
            return MpsSupport(
                True,
                False,
                f"macOS {os_version} is older than {TORCH_MINIMUM_MACOS}, the oldest torch's "
                "arm64 wheels run on",
            )
        return MpsSupport(True, True, "")

    def repair_command(self, excludes: Sequence[str]) -> str:
        flags = " ".join(f"--exclude {lib}" for lib in excludes)
        return (
            "delocate-wheel --require-archs arm64 --ignore-missing-dependencies "
            f"{flags} -w {{dest_dir}} -v {{wheel}}"
        )


PLATFORM = MacosPlatform()
