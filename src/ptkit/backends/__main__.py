"""``python -m ptkit.backends``: the backend rules for CMake, which never re-derives them.

``request BACKEND --targets T --optional O``
    The targets a build asks for: the CMake call's (``T``, ``O``: CMake lists), or the
    backend's override variable (``PTKIT_CUDA_ARCHS`` …; CUDA also honours
    ``TORCH_CUDA_ARCH_LIST``) when it is set. Prints ``TARGETS=…``, ``OPTIONAL=…``,
    ``SOURCE=…`` (``recipe`` or the variable that set them), ``OVERRIDE=…`` (the
    backend's variable) and ``NOTE=…`` (what the build should say about it); a bad
    override exits 1 with the reason.
``resolve BACKEND --targets T --optional O --source S --supported L --compiler C [--toolkit-fix F]``
    Those targets against what the compiler builds (``L``). Prints ``BUILT=…``,
    ``DROPPED=…`` and the manifest's target lists (``SASS=…``, ``PTX=…``; ``GFX=…``), or
    ``ERROR=…`` (exit 0: CMake prints the build report before it fails);
    ``MANIFEST_KEYS=…`` names those lists (``SASS;PTX``).

``toolkit BACKEND [--search-path P]… [--install-hint TEXT] [--cached VAR --build-dir D]``
    Where the build finds the backend's compiler: ``COMPILER=…``, ``ROOT=…``, ``SOURCE=…``
    and ``EXPLICIT=ON|OFF``, or ``NOTFOUND=``, ``LOOKED=…`` (each place looked) and
    ``REASON=…`` (the message, with the fix; ``TEXT`` first: the recipe's install
    command). The search paths default to this Python's ``sys.path``; ptkit's toolchain
    cache is searched too (the backend's own candidates). ``--cached VAR``: the value of
    ``VAR`` comes from the CMake cache of build folder ``D`` (-DVAR=…), not from the
    environment: the fix says how to replace or drop it.
``list``
    ``NAMES=cpu;cuda;…``: the backends, in the table's order; ``CACHED=cuda``: those
    whose recipe toolkits ``ptkit toolchain install`` puts into ptkit's toolchain cache.

Lists are CMake lists (``;``-separated), one ``KEY=value`` per line.
"""

from __future__ import annotations

import argparse
import os
import sys

from ptkit.backends import (
    BACKENDS,
    TargetError,
    TargetRequest,
    UnknownBackendError,
    get_backend,
)


def _list(value: str) -> tuple[str, ...]:
    return tuple(item for item in value.split(";") if item.strip())


def _print(key: str, values: tuple[str, ...] | str) -> None:
    text = values if isinstance(values, str) else ";".join(values)
    print(f"{key}={' '.join(text.splitlines())}")


def _explicit_missing(compiler: object, variable: str, args: argparse.Namespace) -> str:
    """Why the toolkit a variable names cannot be used, and how to name another: the
    environment variable replaces a cached -D value on the next configure."""
    if variable in args.cached:
        where = f" in {args.build_dir}" if args.build_dir else ""
        return (
            f"{compiler} (from -D{variable}, cached{where}) does not exist. Fix: set the "
            f"environment variable {variable} to the toolkit (it replaces the cached value), "
            f"or drop the cached one: cmake -U{variable} {args.build_dir or '<build folder>'}"
        )
    return (
        f"{compiler} (from {variable}) does not exist. Fix: point {variable} at the toolkit, "
        "or unset it"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptkit.backends")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("request", "resolve"):
        command = commands.add_parser(name)
        command.add_argument("backend")
        command.add_argument("--targets", default="")
        command.add_argument("--optional", default="")
    toolkit = commands.add_parser("toolkit")
    toolkit.add_argument("backend")
    toolkit.add_argument("--search-path", action="append", default=None)
    toolkit.add_argument("--install-hint", default="")
    toolkit.add_argument("--cached", action="append", default=[])
    toolkit.add_argument("--build-dir", default="")
    commands.add_parser("list")
    resolve = commands.choices["resolve"]
    resolve.add_argument("--source", default="recipe")
    resolve.add_argument("--supported", default="")
    resolve.add_argument("--compiler", required=True)
    resolve.add_argument("--toolkit-fix", default="")
    args = parser.parse_args(argv)
    if args.command == "list":
        _print("NAMES", tuple(BACKENDS))
        _print("CACHED", tuple(name for name, b in BACKENDS.items() if b.cached_toolkits))
        return 0
    try:
        backend = get_backend(args.backend)
        if args.command == "toolkit":
            paths = args.search_path if args.search_path is not None else sys.path
            found = backend.find_toolkit(os.environ, paths)
            if found is not None and found.explicit and not found.compiler.is_file():
                # Named by the user: that one or none, never a silent fallback.
                _print("NOTFOUND", "")
                _print("LOOKED", f"{found.compiler} ({found.source})")
                _print("REASON", _explicit_missing(found.compiler, found.source, args))
                return 0
            if found is None:
                looked = backend.toolkit_candidates(os.environ, paths)
                _print("NOTFOUND", "")
                _print("LOOKED", tuple(f"{c.compiler} ({c.source})" for c in looked))
                _print("REASON", backend.toolkit_missing(looked, args.install_hint))
                return 0
            _print("COMPILER", str(found.compiler))
            _print("ROOT", str(found.root))
            _print("SOURCE", found.source)
            _print("EXPLICIT", "ON" if found.explicit else "OFF")
            return 0
        if args.command == "request":
            request = backend.requested_targets(
                _list(args.targets), _list(args.optional), os.environ
            )
            _print("TARGETS", request.targets)
            _print("OPTIONAL", request.optional)
            _print("SOURCE", request.source)
            _print("OVERRIDE", backend.override_variable or "")
            _print("NOTE", request.note)
            return 0
        request = TargetRequest(_list(args.targets), _list(args.optional), args.source)
        resolution = backend.resolve(
            request, _list(args.supported), args.compiler, args.toolkit_fix
        )
    except (TargetError, UnknownBackendError) as exc:
        print(f"ptkit: {exc}", file=sys.stderr)
        return 1
    if resolution.error:
        _print("ERROR", resolution.error)
        return 0
    _print("BUILT", resolution.built)
    _print("DROPPED", resolution.dropped)
    lists = backend.manifest_targets(resolution.built)
    _print("MANIFEST_KEYS", tuple(key.upper() for key in lists))
    for key, values in lists.items():
        _print(key.upper(), values)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
