"""``python -m ptkit.platforms``: the platform rules for CMake, which never re-derives them.

``isa-flags SYSTEM PROCESSOR COMPILER_ID LEVEL…``
    The CPU ISA levels a library is compiled for on this platform (CMake's
    ``CMAKE_SYSTEM_NAME``, ``CMAKE_SYSTEM_PROCESSOR``, ``CMAKE_CXX_COMPILER_ID``), best
    first and ``default`` last: ``LEVELS=…``, ``SKIPPED=…`` (levels that do not apply
    here), ``FLAGS_<i>=…`` (the compiler flags of the i-th level) and ``KNOWN=…`` (every
    level of the processor, best first: the order ``PTKIT_CPU_ISA`` caps in). An unknown
    level exits 1 with the known ones.

``requires-isa PROCESSOR COMPILER_ID LEVEL…``
    The compiler flags of the CPU ISA levels a whole library requires
    (``REQUIRES_ISA``, :mod:`ptkit.platforms.required_isa`): ``LEVELS=…`` and
    ``FLAGS=…`` (all of them, in order). An unknown level exits 1 with the known ones.
``library SYSTEM``
    What a kernel library is on that system (CMake's ``CMAKE_SYSTEM_NAME``): ``TYPE=``
    (CMake's library type), ``PREFIX=`` and ``SUFFIX=`` (its file name around the target's).

``cpu-features``
    What this machine's CPU reports: ``PROCESSOR=…``, ``FEATURES=…`` (or ``UNKNOWN=…``, why).

Lists are CMake lists (``;``-separated), one ``KEY=value`` per line. Standard library only.
"""

from __future__ import annotations

import argparse
import sys

from ptkit.platforms import PLATFORMS, platform_for_system, this_cpu
from ptkit.platforms.base import Platform, dialect_flags
from ptkit.platforms.required_isa import required_isa


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptkit.platforms")
    commands = parser.add_subparsers(dest="command", required=True)
    isa = commands.add_parser("isa-flags")
    isa.add_argument("system")
    isa.add_argument("processor")
    isa.add_argument("compiler_id")
    isa.add_argument("levels", nargs="*")
    requires = commands.add_parser("requires-isa")
    requires.add_argument("processor")
    requires.add_argument("compiler_id")
    requires.add_argument("levels", nargs="+")
    commands.add_parser("cpu-features")
    library = commands.add_parser("library")
    library.add_argument("system")
    args = parser.parse_args(argv)
    if args.command == "requires-isa":
        return _requires_isa(args.processor, args.compiler_id, args.levels)
    if args.command == "cpu-features":
        cpu = this_cpu()
        print(f"PROCESSOR={cpu.processor}")
        if cpu.features is None:
            print(f"UNKNOWN={cpu.source}")
        else:
            print(f"FEATURES={';'.join(sorted(cpu.features))}")
        return 0
    platform = platform_for_system(args.system)
    if platform is None:
        known = ", ".join(p.system for p in PLATFORMS.values())
        print(
            f"ptkit: no platform module for system {args.system!r} (known: {known})",
            file=sys.stderr,
        )
        return 1
    if args.command == "library":
        print(f"TYPE={platform.library_type}")
        print(f"PREFIX={platform.library_prefix}")
        print(f"SUFFIX={platform.library_suffix}")
        return 0
    try:
        builds, skipped = platform.isa_builds(args.levels, args.processor, args.compiler_id)
    except ValueError as exc:
        print(f"ptkit: {exc}", file=sys.stderr)
        return 1
    print(f"LEVELS={';'.join(name for name, _ in builds)}")
    print(f"SKIPPED={';'.join(skipped)}")
    for index, (_, flags) in enumerate(builds):
        print(f"FLAGS_{index}={';'.join(flags)}")
    print(f"KNOWN={';'.join(level.name for level in platform.isa_levels(args.processor))}")
    return 0


def _requires_isa(processor: str, compiler_id: str, levels: list[str]) -> int:
    dialect = Platform().compiler_dialect(compiler_id)
    flags: list[str] = []
    try:
        for name in levels:
            level = required_isa(name, processor)
            found = dialect_flags(level.flags, dialect)
            if found is None:
                print(
                    f"ptkit: the CPU ISA level {name} has no flags for the {dialect} compiler "
                    "dialect: build it with GCC or Clang, or without REQUIRES_ISA",
                    file=sys.stderr,
                )
                return 1
            flags += [flag for flag in found if flag not in flags]
    except ValueError as exc:
        print(f"ptkit: {exc}", file=sys.stderr)
        return 1
    print(f"LEVELS={';'.join(levels)}")
    print(f"FLAGS={';'.join(flags)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
