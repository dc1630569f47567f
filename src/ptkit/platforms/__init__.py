"""The platforms: one module each (``linux``, ``macos``, ``windows``), behind one interface
(``ptkit.platforms.base.Platform``), listed in one table, as cibuildwheel does.

The loader (library names, the pre-``dlopen`` check, the manifest's platform), ``ptkit
select`` (the release platform of this machine), the build pipeline (repair), the audit
(binary format), the release matrix (tags, runners, repair commands) and CMake (ISA flags)
ask this table; ``commands`` runs a command with a timeout, killing its whole process
group (every probe and build stage uses it). Standard library only.
"""

from __future__ import annotations

import platform as _platform

from ptkit.platforms import linux, macos, windows
from ptkit.platforms.base import CpuFacts, IsaLevel, Platform, ReleasePlatform

__all__ = [
    "PLATFORMS",
    "RELEASE_PLATFORMS",
    "CpuFacts",
    "IsaLevel",
    "Platform",
    "ReleasePlatform",
    "current_platform",
    "manifest_platform",
    "platform_for_binary",
    "platform_for_system",
    "platform_for_wheel_tag",
    "release_platform",
    "release_platform_for",
    "this_cpu",
]

PLATFORMS: dict[str, Platform] = {m.PLATFORM.name: m.PLATFORM for m in (linux, macos, windows)}
# Every release platform, by its recipe name, in the order recipes list them.
RELEASE_PLATFORMS: dict[str, ReleasePlatform] = {
    release.name: release for p in PLATFORMS.values() for release in p.release_platforms
}


def platform_for_system(system: str) -> Platform | None:
    """The platform whose ``platform.system()`` is ``system`` (``Linux``), or None."""
    return next((p for p in PLATFORMS.values() if p.system == system), None)


MAGIC_LENGTH = 4
"""How many leading bytes :func:`platform_for_binary` needs."""


def platform_for_binary(head: bytes) -> Platform | None:
    """The platform whose binary format a file's first bytes (:data:`MAGIC_LENGTH` of
    them) are, or None: a macOS Python module is a Mach-O ``.so``, so the bytes, not the
    name, say what a lone library is."""
    return next(
        (p for p in PLATFORMS.values() if any(head.startswith(magic) for magic in p.binary_magics)),
        None,
    )


def platform_for_wheel_tag(tag: str) -> Platform | None:
    """The platform of a wheel platform tag (``manylinux_2_28_x86_64`` -> linux); None for
    ``any`` and the tags of systems ptkit has no module for."""
    return next((p for p in PLATFORMS.values() if p.has_wheel_tag(tag)), None)


def release_platform(name: str) -> ReleasePlatform:
    """A release platform by its recipe name; KeyError for an unknown one."""
    return RELEASE_PLATFORMS[name]


def release_platform_for(system: str, machine: str) -> ReleasePlatform | None:
    """The release platform of an OS (``platform.system()``) and CPU (``platform.machine()``)."""
    platform = platform_for_system(system)
    return platform.release_platform_for(machine) if platform else None


def current_platform() -> Platform | None:
    """This machine's platform; None on an OS ptkit has no module for."""
    return platform_for_system(_platform.system())


def manifest_platform() -> str:
    """This machine as manifests spell it: ``<system>-<processor>``, CMake's names in lower
    case (``linux-x86_64``, ``darwin-arm64``, ``windows-amd64``)."""
    return f"{_platform.system()}-{_platform.machine()}".lower()


def this_cpu() -> CpuFacts:
    """This machine's CPU: its processor and the feature flags its platform reads."""
    platform = current_platform()
    if platform is None:
        features, source = None, f"ptkit has no platform module for {_platform.system()}"
    else:
        features, source = platform.cpu_features()
    return CpuFacts(_platform.machine(), features, source)
