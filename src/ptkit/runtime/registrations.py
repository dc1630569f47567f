"""What one native library registers with torch's dispatcher, read by loading it alone.

``python -m ptkit.runtime.registrations <library> --backend <b> [--namespace <ns>]``
loads the library into this process's torch (nothing else of the package) and prints
one JSON object: ``{"registrations": {...}}`` (the manifest's ``registrations`` block:
``ptkit.loading.manifest.Registrations``), or ``{"not_loaded": "<why>"}`` when this torch
cannot hold the backend (a HIP library beside a CUDA torch). Before it loads the library
it says so on stderr (``ptkit: loading <path>``), so a crash names what crashed.

It runs in a child process: ``ptkit.release.registrations`` runs it at install time (a
library that kills its process fails the install, not the build tool), and the smoke
stage runs it for a library that cannot load in the smoke environment (a CUDA library
on a machine without a GPU). The dispatcher's own dump of each op (``_dispatch_dump``)
is read before and after the load: what changed is what the library registered.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from ptkit.backends import BACKENDS
from ptkit.loading.manifest import Registrations
from ptkit.platforms import Platform
from ptkit.runtime.library_folders import add_library_folders

__all__ = ["OpEntry", "dispatcher_entries", "holds_namespace", "main", "op_entry", "read_library"]

# "CPU: registered at ./cpp/ops.cpp:129 :: (none) [ boxed ]", and the alias keys:
# "CompositeExplicitAutograd[alias]: registered at mypkg/__init__.py:30 :: …".
_KERNEL_LINE = re.compile(r"^(?P<key>\w+)(?:\[alias\])?: registered at (?P<where>.*?)(?: :: .*)?$")
# The dump's other "registered at" line is the schema's ("debug: registered at …").
_NOT_A_KEY = {"debug"}
_SCHEMA_LINE = re.compile(r"^schema: (?P<schema>.*)$")
_HOLDS_NAMESPACE = "Only a single TORCH_LIBRARY can be used to register the namespace"


@dataclasses.dataclass(frozen=True)
class OpEntry:
    """One op as the dispatcher dumps it: its schema (None: kernels without a schema),
    and each dispatch key with a kernel -> where it was registered."""

    schema: str | None
    kernels: dict[str, str]
    # Where the schema was defined ("ops.cpp:12", "mypkg/__init__.py:5"), when known.
    defined_at: str | None = None


def parse_dump(text: str) -> OpEntry:
    """An op's ``torch._C._dispatch_dump`` text. Only the active kernel of each key is
    read (an overridden one is dumped as ``<key> (inactive): …``)."""
    schema = None
    defined_at = None
    kernels: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("debug: registered at "):
            defined_at = line[len("debug: registered at ") :].strip()
            continue
        found = _SCHEMA_LINE.match(line)
        if found:
            value = found.group("schema").strip()
            schema = None if value == "(none)" else value
            continue
        kernel = _KERNEL_LINE.match(line)
        if kernel and kernel.group("key") not in _NOT_A_KEY:
            kernels.setdefault(kernel.group("key"), kernel.group("where"))
    return OpEntry(schema, kernels, defined_at if schema is not None else None)


def op_entry(qualified_op: str) -> OpEntry | None:
    """What the dispatcher holds for ``qualified_op`` now; None when it knows no such op."""
    try:
        return parse_dump(torch._C._dispatch_dump(qualified_op))
    except RuntimeError:
        return None


def dispatcher_entries() -> dict[str, OpEntry]:
    """Every op the dispatcher knows (about 3600 in torch 2.14: 60 ms)."""
    return {name: parse_dump(torch._C._dispatch_dump(name)) for name in _all_op_names()}


def _all_op_names() -> list[str]:
    names: list[str] = torch._C._dispatch_get_all_op_names()
    return names


def holds_namespace(namespace: str) -> bool:
    """Whether a TORCH_LIBRARY block of ``namespace`` exists in this process: torch
    refuses a second one, so one is tried and, when torch accepts it, released again."""
    try:
        probe = torch._C._dispatch_library("DEF", namespace, "", "<ptkit namespace probe>", 0)
    except RuntimeError as exc:
        if _HOLDS_NAMESPACE in str(exc):
            return True
        raise
    probe.reset()
    return False


def changes(
    before: dict[str, OpEntry], after: dict[str, OpEntry], namespaces: list[str]
) -> Registrations:
    """What appeared between two snapshots: the schemas defined, each op's new kernel
    keys, and which of the namespaces involved (and ``namespaces``) are now held."""
    schemas: dict[str, str] = {}
    kernels: dict[str, tuple[str, ...]] = {}
    for name, entry in sorted(after.items()):
        old = before.get(name, OpEntry(None, {}))
        if entry.schema is not None and old.schema is None:
            schemas[name] = entry.schema
        added = tuple(k for k, where in entry.kernels.items() if old.kernels.get(k) != where)
        if added:
            kernels[name] = added
    involved = [*namespaces, *(op.partition("::")[0] for op in (*schemas, *kernels))]
    held = tuple(ns for ns in dict.fromkeys(involved) if ns != "aten" and holds_namespace(ns))
    return Registrations(held, schemas, kernels)


def read_library(
    library: Path, namespaces: list[str], platform: Platform | None = None
) -> Registrations:
    """Load ``library`` into this process and return what it registered, after adding
    the folders ``platform`` (default: this machine's) says its imports need, as the
    loader does (Windows: torch's DLLs)."""
    before = dispatcher_entries()
    add_library_folders(
        library, platform, announce=lambda line: print(line, file=sys.stderr, flush=True)
    )
    print(f"ptkit: loading {library}", file=sys.stderr, flush=True)
    load: Callable[[str], None] = torch.ops.load_library  # untyped in torch
    load(str(library))
    print(f"ptkit: loaded {library}", file=sys.stderr, flush=True)
    return changes(before, dispatcher_entries(), namespaces)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ptkit.runtime.registrations",
        description="Load one native library alone and print what it registers (JSON).",
    )
    parser.add_argument("library", type=Path)
    parser.add_argument("--backend", required=True, choices=sorted(BACKENDS))
    parser.add_argument("--namespace", action="append", default=[], help="namespace to check")
    args = parser.parse_args(argv)
    from ptkit.runtime.loader import torch_facts

    backend = BACKENDS[args.backend]
    facts = torch_facts()
    if not backend.built_into(facts):
        absent = backend.torch_absent_reason(facts) or f"torch {torch.__version__} lacks it"
        print(json.dumps({"not_loaded": f"a {backend.title} library: {absent}"}))
        return 0
    try:
        registrations = read_library(args.library.resolve(), args.namespace)
    except (OSError, RuntimeError) as exc:  # dlopen's error, or a registration's
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"ptkit: loading {args.library} failed: {first}", file=sys.stderr)
        return 1
    print(json.dumps({"registrations": registrations.to_json()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
