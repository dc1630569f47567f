"""What AMD GPU code a HIP library really carries, read from its offload bundles.

A HIP library keeps its device code objects in the ELF section ``.hip_fatbin``: one
clang offload bundle per translation unit, each listing entries such as
``hipv4-amdgcn-amd-amdhsa--gfx90a`` (plus the host's). This module reads them with
the standard library only: the CMake install step runs it (``python -m
ptkit.release.offload check <manifest>``) before ptkit is installed, and a mismatch
with the manifest fails the build. ``ptkit inspect`` and the release audit use the same
functions.

Compressed bundles (``clang --offload-compress``, magic ``CCOB``) are reported, not
decompressed: ptkit's builds do not compress, and the error says so.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

from ptkit.platforms.elf import ELF_MAGIC

__all__ = ["OffloadError", "hip_fatbin_section", "list_hip_targets"]

_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_COMPRESSED_MAGIC = b"CCOB"
_SECTION = ".hip_fatbin"


class OffloadError(ValueError):
    """The file is not a library whose offload bundles can be read."""


def hip_fatbin_section(data: bytes, name: str = "library") -> bytes | None:
    """The bytes of the ``.hip_fatbin`` section of a 64-bit little-endian ELF file."""
    if not data.startswith(ELF_MAGIC) or len(data) < 6 or data[4] != 2 or data[5] != 1:
        raise OffloadError(f"{name}: not a 64-bit little-endian ELF file")
    if len(data) < 0x40:
        raise OffloadError(f"{name}: no readable section table (truncated file?)")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data):
        raise OffloadError(f"{name}: no readable section table (truncated file?)")

    def header(index: int) -> tuple[int, int, int]:
        base = shoff + index * shentsize
        (name_offset,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name_offset, offset, size

    try:
        _, strtab_offset, _ = header(shstrndx)
        for index in range(shnum):
            name_offset, offset, size = header(index)
            start = strtab_offset + name_offset
            section_name = data[start : data.index(b"\0", start)].decode("ascii", "replace")
            if section_name == _SECTION:
                return data[offset : offset + size]
    except (struct.error, ValueError) as exc:
        raise OffloadError(f"{name}: corrupt section table ({exc})") from exc
    return None


def _bundle_entries(section: bytes, name: str) -> list[str]:
    """Entry ids (``hipv4-amdgcn-amd-amdhsa--gfx90a``) of every bundle in the section."""
    try:
        return _read_bundles(section, name)
    except struct.error as exc:
        raise OffloadError(f"{name}: truncated offload bundle ({exc})") from exc


def _read_bundles(section: bytes, name: str) -> list[str]:
    entries: list[str] = []
    position = 0
    while True:
        start = section.find(_BUNDLE_MAGIC, position)
        if start < 0:
            break
        (count,) = struct.unpack_from("<Q", section, start + len(_BUNDLE_MAGIC))
        cursor = start + len(_BUNDLE_MAGIC) + 8
        for _ in range(count):
            _offset, _size, id_size = struct.unpack_from("<QQQ", section, cursor)
            cursor += 24
            entries.append(section[cursor : cursor + id_size].decode("ascii", "replace"))
            cursor += id_size
        position = cursor
    if not entries and _COMPRESSED_MAGIC in section:
        raise OffloadError(
            f"{name}: the offload bundles are compressed (--offload-compress); list them with "
            "`clang-offload-bundler --list --type=o --input=<library>`"
        )
    return entries


def list_hip_targets(library: Path) -> list[str]:
    """The AMD GPU targets (``gfx90a``, ``gfx942:xnack-``…) a library has code for, sorted."""
    section = hip_fatbin_section(library.read_bytes(), library.name)
    if section is None:
        return []
    targets = set()
    for entry in _bundle_entries(section, library.name):
        kind, _, target = entry.partition("--")
        if kind.startswith("hip") and "amdgcn" in kind and target:
            targets.add(target)
    return sorted(targets)


def check_manifest(manifest_path: Path) -> list[str]:
    """Problems where the library's offload bundles and its manifest disagree."""
    manifest = json.loads(manifest_path.read_text())
    library = manifest_path.parent / manifest["library"]
    found = set(list_hip_targets(library))
    wanted = set(manifest["targets"].get("gfx", []))
    if found != wanted:
        return [f"AMD GPU code in {library.name}: {sorted(found)}; manifest says {sorted(wanted)}"]
    return []


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="offload.py")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser(
        "check", help="compare a HIP library's offload bundles with its manifest"
    )
    check.add_argument("manifest", type=Path)
    listing = sub.add_parser("list", help="list the AMD GPU targets in a library")
    listing.add_argument("library", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            print("\n".join(list_hip_targets(args.library)))
            return 0
        problems = check_manifest(args.manifest)
    except (OSError, OffloadError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    m = json.loads(args.manifest.read_text())
    print(
        f"offload bundle audit: {m['library']} holds code objects for "
        f"{', '.join(m['targets']['gfx'])} (as in its manifest)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
