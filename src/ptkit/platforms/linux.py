"""Linux: ELF shared objects, auditwheel, manylinux tags.

The release's tag is ``manylinux_2_28`` because torch's own Linux wheels are (an older
tag would promise what torch does not); a local build gets the tag its machine's glibc
allows (``auditwheel show``), never one relabelled by hand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ptkit.platforms.base import Platform, ReleasePlatform
from ptkit.platforms.elf import ELF_MAGIC, elf_problem

__all__ = ["CPUINFO", "LinuxPlatform", "cpuinfo_features", "cpuinfo_fields"]

CPUINFO = Path("/proc/cpuinfo")
_FEATURE_LINE = re.compile(r"^(flags|Features)\s*:(.*)$", re.M)
# Only the first processor is read: its lines are a few KiB on any machine, while the whole
# file grows with the core count.
_CPUINFO_HEAD_BYTES = 64 * 1024


def _cpuinfo_head(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as f:
        return f.read(_CPUINFO_HEAD_BYTES)


def cpuinfo_fields(path: Path = CPUINFO) -> dict[str, str]:
    """The first processor's fields (``model name``, ``vendor_id``, ...) in a
    ``/proc/cpuinfo``-format file; empty where it cannot be read."""
    try:
        text = _cpuinfo_head(path)
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the end of the first processor's block
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def cpuinfo_features(path: Path) -> tuple[frozenset[str] | None, str]:
    """The feature flags of the first processor in a ``/proc/cpuinfo``-format file."""
    try:
        text = _cpuinfo_head(path)
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc})"
    match = _FEATURE_LINE.search(text)
    if match is None:
        return None, f"{path} has no flags or Features line"
    return frozenset(match.group(2).split()), str(path)


class LinuxPlatform(Platform):
    name = "linux"
    system = "Linux"
    binary_format = "ELF"
    binary_magics = (ELF_MAGIC,)
    library_suffix = ".so"
    repair_tool = "auditwheel"
    repair_note = (
        "torch and its GPU runtime are not grafted: they come with torch. --only-plat:\n"
        "tagged exactly as the image (AUDITWHEEL_PLAT, manylinux_2_28_<arch>), as the recipe says."
    )
    release_platforms = (
        ReleasePlatform(
            "manylinux_2_28_x86_64", "linux", "x86_64", ("x86_64", "amd64"), "linux-x86_64",
            "manylinux_x86_64", "ubuntu-24.04", "manylinux_2_28_x86_64", "manylinux-x86_64-image",
        ),
        ReleasePlatform(
            "manylinux_2_28_aarch64", "linux", "aarch64", ("aarch64", "arm64"), "linux-aarch64",
            "manylinux_aarch64", "ubuntu-24.04-arm", "manylinux_2_28_aarch64",
            "manylinux-aarch64-image",
        ),
    )  # fmt: skip
    # A venv of CPython 3.11, which manylinux images and scripts/release-local's image both
    # have, like scripts/bootstrap's .toolchains/ (the toolkit needs no particular Python).
    toolkit_dir = "/opt/ptkit-toolkit"
    toolkit_site = "/opt/ptkit-toolkit/lib/python3.11/site-packages"
    toolkit_python = "/opt/python/cp311-cp311/bin/python"
    _native_pattern = re.compile(r"\.so(\.\d+)*$")
    wheel_tag_prefixes = ("manylinux", "musllinux", "linux")

    def library_problem(self, path: Path) -> str | None:
        return elf_problem(path)

    def cpu_features(self) -> tuple[frozenset[str] | None, str]:
        """The first processor's ``flags`` (x86) or ``Features`` (Arm) line of
        ``/proc/cpuinfo``: every core of a machine reports the same."""
        return cpuinfo_features(CPUINFO)

    def repair_command(self, excludes: Sequence[str]) -> str:
        flags = " ".join(f"--exclude {self._quoted([lib])}" for lib in excludes)
        return f"auditwheel repair --only-plat {flags} -w {{dest_dir}} {{wheel}}"


PLATFORM = LinuxPlatform()
