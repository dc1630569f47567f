"""The operating system: name, kernel release, C library and the newest manylinux tag
this machine accepts. (Named ``os_facts`` so that it never shadows the ``platform``
module.)"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

from ptkit.doctor.model import OsFacts
from ptkit.hardware.facts import PlatformFacts

__all__ = ["libc_of_this_process", "manylinux_tag", "os_release_name", "probe_os"]

# platform.machine() -> the architecture part of a manylinux tag (PEP 600).
_MANYLINUX_ARCH = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "i686": "i686",
    "i386": "i686",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "armv7l": "armv7l",
    "riscv64": "riscv64",
}


def libc_of_this_process() -> str | None:
    """``glibc 2.36`` from the running C library, ``musl`` where a musl loader is found."""
    try:
        # "glibc 2.36": the library actually loaded, not the headers Python was built with.
        confstr = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # not POSIX, or not glibc
        confstr = None
    if confstr:
        name, _, version = confstr.partition(" ")
        return f"{'glibc' if name == 'glibc' else name} {version}".strip()
    name, version = platform.libc_ver()
    if name:
        return f"{name} {version}".strip()
    # musl has no version query; its dynamic loader's name is the evidence.
    if any(Path("/lib").glob("ld-musl-*.so.1")):
        return "musl"
    return None


def manylinux_tag(libc: str | None, machine: str) -> str | None:
    """The newest manylinux tag a machine with this C library and CPU accepts: glibc
    2.36 on x86_64 -> ``manylinux_2_36_x86_64`` (pip accepts every older 2_N too)."""
    if not libc:
        return None
    match = re.fullmatch(r"glibc (\d+)\.(\d+)(?:\.\d+)?", libc.strip())
    arch = _MANYLINUX_ARCH.get(machine.lower())
    if match is None or arch is None:
        return None  # musl (musllinux), an unknown libc or an architecture PEP 600 lacks
    return f"manylinux_{match.group(1)}_{match.group(2)}_{arch}"


def os_release_name(root: Path) -> str | None:
    """PRETTY_NAME of ``<root>/etc/os-release`` (or ``usr/lib/os-release``)."""
    for relative in ("etc/os-release", "usr/lib/os-release"):
        try:
            text = (root / relative).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                return value.strip().strip("\"'") or None
    return None


def probe_os(
    root: Path = Path("/"),
    *,
    platform_facts: PlatformFacts | None = None,
    libc: str | None = None,
    release: str | None = None,
) -> OsFacts:
    """The OS at ``root`` (a fixture tree in tests). ``libc``: default, this process's C
    library when ``root`` is ``/`` (a fixture tree has none to ask)."""
    facts = platform_facts or PlatformFacts.current()
    real_root = root == Path("/")
    name: str | None = None
    if facts.system == "Linux":
        name = os_release_name(root)
        if libc is None and real_root:
            libc = libc_of_this_process()
    elif facts.system == "Darwin" and real_root:
        mac = platform.mac_ver()[0]
        name = f"macOS {mac}" if mac else "macOS"
    elif facts.system == "Windows" and real_root:
        name = f"Windows {platform.release()}"
    return OsFacts(
        system=facts.system,
        machine=facts.machine,
        release=release if release is not None else platform.release(),
        name=name,
        libc=libc if facts.system == "Linux" else None,
        manylinux=manylinux_tag(libc, facts.machine) if facts.system == "Linux" else None,
    )
