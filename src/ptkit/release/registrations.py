"""What a native library really registers, recorded in its manifest at install time.

``python -m ptkit.release.registrations record <manifest> [--dtypes "float32;…"]`` is run
by the install step of ptkit's CMake package (``ptkit-write-manifest.cmake``), after the
manifest is written, with the build's Python (which has torch) and ``PYTHONPATH`` at the
package that holds the CMake files. It loads the library alone in a child Python
(``python -m ptkit.runtime.registrations``: a library that crashes kills the child, and
the install fails with the signal and the command that shows it again), and writes what
it registered into the manifest's ``registrations`` block. Then, written once:

* a library built without ``OPS`` gets its op table from the registrations: every op it
  registers a kernel of its backend's dispatch key for, each with the library's
  ``DTYPES``;
* a library built with ``OPS`` must register exactly those: a difference is a build
  error naming both lists.

Standard library only (this process runs before ptkit is installed); the child imports
torch. A library built for another platform cannot be loaded here: it keeps its declared
``OPS`` and no registrations, said so.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptkit.backends import BACKENDS
from ptkit.loading.manifest import (
    Manifest,
    ManifestError,
    Registrations,
    parse_manifest_text,
    parse_registrations,
)
from ptkit.platforms import manifest_platform

__all__ = [
    "RegistrationError",
    "child_command",
    "main",
    "op_table",
    "read_registrations",
    "record",
    "signal_name",
]

# torch's import plus one library: seconds; a library that hangs in its initialiser must
# not hang the build.
CHILD_TIMEOUT = 600


class RegistrationError(RuntimeError):
    """The library cannot be loaded alone, or registers other ops than it declares; the
    message says what, the fix, and how to see it again."""


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; ``signal 77`` for a number Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def child_command(python: str, library: Path, backend: str, namespaces: Sequence[str]) -> list[str]:
    """The command that loads ``library`` alone and prints its registrations."""
    command = [python, "-m", "ptkit.runtime.registrations", str(library), "--backend", backend]
    for namespace in namespaces:
        command += ["--namespace", namespace]
    return command


def read_registrations(
    library: Path,
    backend: str,
    namespaces: Sequence[str],
    *,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    timeout: float = CHILD_TIMEOUT,
    lasting_copy: Path | None = None,
) -> Registrations | str:
    """What ``library`` registers, loaded alone in a child ``python``; a string when this
    torch cannot hold its backend (the reason). Raises ``RegistrationError``, whose
    command to reproduce names ``lasting_copy`` (the build's copy of a library installed
    into a temporary folder) when given."""
    command = child_command(python, library, backend, namespaces)
    reproduce = shlex.join(child_command(python, lasting_copy or library, backend, namespaces))
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else dict(env),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RegistrationError(
            f"loading {library.name} alone into torch did not finish in {timeout:.0f} s (a "
            f"library initialiser that waits forever?); run `{reproduce}` to see it again"
        ) from exc
    except OSError as exc:
        raise RegistrationError(f"cannot run {python}: {exc.strerror or exc}") from exc
    said = "\n".join(f"    {line}" for line in proc.stderr.strip().splitlines()[-12:])
    if proc.returncode < 0:
        number = -proc.returncode
        raise RegistrationError(
            f"loading {library.name} alone into torch killed the process with "
            f"{signal_name(number)} (signal {number}): its static initialisers or its "
            "TORCH_LIBRARY / STABLE_TORCH_LIBRARY blocks crash"
            + (f"; it said:\n{said}\n" if said else "; ")
            + f"reproduce it with `{reproduce}` (prefix `gdb --args` for a backtrace)"
        )
    if proc.returncode != 0:
        raise RegistrationError(
            f"loading {library.name} alone into torch failed (exit status {proc.returncode})"
            + (f":\n{said}\n" if said else "; ")
            + f"run `{reproduce}` to see it again"
        )
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise RegistrationError(
            f"`{reproduce}` printed no registrations (stdout: {proc.stdout.strip()[:200]!r})"
        ) from exc
    if "not_loaded" in answer:
        return str(answer["not_loaded"])
    try:
        return parse_registrations(answer.get("registrations"), library)
    except ManifestError as exc:
        raise RegistrationError(f"`{reproduce}` printed unreadable registrations: {exc}") from exc


def _listing(ops: Sequence[str]) -> str:
    return ", ".join(ops) if ops else "none"


def op_table(
    manifest: Manifest, registrations: Registrations, dtypes: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """The manifest's ``ops`` checked against (or, when it lists none, derived from) what
    the library registers; ``RegistrationError`` names both lists when they differ."""
    key = BACKENDS[manifest.backend].dispatch_key
    prefix = f"{manifest.namespace}::"
    registered = registrations.ops_with_kernel(key)
    own = sorted(op[len(prefix) :] for op in registered if op.startswith(prefix))
    foreign = [op for op in registered if not op.startswith(prefix)]
    where = f"{manifest.library} ({manifest.backend}, namespace {manifest.namespace})"
    if foreign:
        raise RegistrationError(
            f"{where} registers {key} kernels outside its namespace: {_listing(foreign)}; "
            f"a library serves one namespace: move them into {manifest.namespace}, or build "
            "them into a library of their own with that NAMESPACE"
        )
    if not manifest.ops:
        if not own:
            raise RegistrationError(
                f"{where} was built without OPS and registers no {key} kernel: "
                f"STABLE_TORCH_LIBRARY_IMPL({manifest.namespace}, {key}, m) (or "
                f"TORCH_LIBRARY_IMPL) must register its kernels, or give OPS"
            )
        if not dtypes:
            raise RegistrationError(
                f"{where} was built without OPS and without DTYPES: the dispatcher does not "
                "say which dtypes a kernel accepts; give DTYPES (float32, float16, bfloat16)"
            )
        return {op: tuple(dtypes) for op in own}
    declared = sorted(manifest.ops)
    if declared != own:
        missing = [op for op in declared if op not in own]
        extra = [op for op in own if op not in declared]
        parts = []
        if missing:
            parts.append(f"no {key} kernel for {_listing(missing)}")
        if extra:
            parts.append(f"undeclared {key} kernels for {_listing(extra)}")
        raise RegistrationError(
            f"{where}: OPS says {_listing(declared)}, but the library registers {key} "
            f"kernels for {_listing(own)} ({'; '.join(parts)}): make OPS the list the "
            "library registers, or leave OPS out to take it from the registrations"
        )
    return dict(manifest.ops)


def record(
    manifest_path: Path,
    dtypes: Sequence[str] = (),
    *,
    build_dir: Path | None = None,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
) -> str:
    """Read ``manifest_path``'s library's registrations, write them and the op table into
    the manifest, and return a line saying what was recorded. ``build_dir``: where the
    build left the same library (the install folder of a wheel build is temporary: an
    error's command to reproduce names the build's copy when there is one)."""
    try:
        manifest = parse_manifest_text(manifest_path.read_bytes(), manifest_path)
    except (OSError, ManifestError) as exc:
        raise RegistrationError(f"cannot read the manifest {manifest_path}: {exc}") from exc
    where = f"{manifest.library} ({manifest.backend})"
    if manifest.backend == "metal":
        if not manifest.ops:
            raise RegistrationError(
                f"{where}: Metal kernels are registered from Python, so there is no library to "
                "read the op table from: give OPS"
            )
        return f"{where}: Metal kernels register from Python: registrations not recorded"
    here = manifest_platform()
    if manifest.platform != here:
        if not manifest.ops:
            raise RegistrationError(
                f"{where} is built for {manifest.platform} and cannot be loaded on this "
                f"{here} machine to read its registrations: give OPS"
            )
        return f"{where} is built for {manifest.platform}: registrations not recorded on {here}"
    built = build_dir / manifest.library if build_dir is not None else None
    found = read_registrations(
        manifest.library_path,
        manifest.backend,
        [manifest.namespace],
        python=python,
        env=env,
        lasting_copy=built if built is not None and built.is_file() else None,
    )
    if isinstance(found, str):
        if not manifest.ops:
            raise RegistrationError(
                f"{where} cannot be loaded into the build Python's torch ({found}), so its "
                "op table cannot be read from its registrations: give OPS"
            )
        return f"{where}: registrations not recorded: {found}"
    ops = op_table(manifest, found, dtypes)
    document: dict[str, Any] = json.loads(manifest_path.read_text(encoding="utf-8"))
    document["ops"] = {op: list(types) for op, types in ops.items()}
    document["registrations"] = found.to_json()
    manifest_path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", "utf-8")
    key = BACKENDS[manifest.backend].dispatch_key
    defines = f"; defines {_listing(sorted(found.schemas))}" if found.schemas else ""
    holds = f"; holds namespace {', '.join(found.namespaces)}" if found.namespaces else ""
    return f"{where} registers {key} kernels for {_listing(sorted(ops))}{defines}{holds}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ptkit.release.registrations",
        description="Record what a native library registers in its manifest (install time).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    record_parser = commands.add_parser("record", help="load the library alone; write its manifest")
    record_parser.add_argument("manifest", type=Path)
    record_parser.add_argument(
        "--dtypes", default="", help="the library's DTYPES (a CMake list), for a derived op table"
    )
    record_parser.add_argument(
        "--build-dir", type=Path, help="the CMake folder that holds the library as built"
    )
    args = parser.parse_args(argv)
    dtypes = [d for d in args.dtypes.replace(";", " ").split() if d]
    try:
        print(record(args.manifest, dtypes, build_dir=args.build_dir))
    except RegistrationError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
