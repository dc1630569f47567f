"""One op namespace, one defining library; one (op, backend), one kernel library.

Two libraries that both define schemas in one namespace (a ``STABLE_TORCH_LIBRARY(ns, m)``
or ``TORCH_LIBRARY(ns, m)`` block in each, or ``def``s of one namespace in both) abort the
process at the second load: torch refuses the second block (or the second definition of
an op) from a static initialiser, where nothing can catch it. The manifests' recorded
registrations (``Manifest.registrations``) say which namespaces each library defines,
so the rule is applied before anything is loaded: the release audit refuses a wheel
whose libraries both define one (``duplicate_definitions``), and the loader refuses the
second library in a process (``definition_conflict``) with the reason, never a crash.

A library that only registers kernels (``STABLE_TORCH_LIBRARY_IMPL(ns, CUDA, m)``)
defines nothing: any number of those share a namespace. Manifests without recorded
registrations (built by an older ptkit) are not checked.

Two libraries of one backend that register kernels for one op do not crash: the one
loaded last silently replaces the other's kernels (torch only warns). That is a stale or
misbuilt install, so the second is refused too (``kernel_overlap``), naming both.
``Claims`` holds what the loaded libraries define and register: the loader keeps one
for the process, the doctor one per package, so both refuse the same library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from ptkit.loading.manifest import Manifest

__all__ = [
    "FIX",
    "Claims",
    "definition_conflict",
    "duplicate_definitions",
    "kernel_overlap",
    "namespace_definers",
]

FIX = (
    "define the namespace's schemas in one library (of a CPU and a GPU library, the CPU "
    "one: every variant ships it) with STABLE_TORCH_LIBRARY, and only register kernels in "
    "the others with STABLE_TORCH_LIBRARY_IMPL(<ns>, <dispatch key>, m); or define them "
    "in Python"
)


def namespace_definers(manifests: Iterable[Manifest]) -> dict[str, list[Manifest]]:
    """Namespace -> the libraries that define schemas in it (or hold its block)."""
    definers: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        if manifest.registrations is None:
            continue
        for namespace in manifest.registrations.defined_namespaces:
            definers.setdefault(namespace, []).append(manifest)
    return definers


def _what(manifest: Manifest, namespace: str) -> str:
    """How ``manifest``'s library defines ``namespace``: its block, or its schemas."""
    assert manifest.registrations is not None
    ops = sorted(op for op in manifest.registrations.schemas if op.startswith(f"{namespace}::"))
    parts = []
    if namespace in manifest.registrations.namespaces:
        parts.append(f"a STABLE_TORCH_LIBRARY / TORCH_LIBRARY({namespace}, m) block")
    if ops:
        shown = ", ".join(ops[:4]) + (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
        parts.append(f"the schemas of {shown}")
    return " and ".join(parts)


def duplicate_definitions(manifests: Iterable[Manifest]) -> list[str]:
    """The release audit's problems: each namespace more than one library of the wheel
    defines, naming every one of them and what each defines."""
    problems = []
    for namespace, definers in sorted(namespace_definers(manifests).items()):
        if len(definers) < 2:
            continue
        each = "; ".join(f"{m.library} ({m.backend}) has {_what(m, namespace)}" for m in definers)
        problems.append(
            f"op namespace {namespace} is defined by {len(definers)} libraries: {each}. "
            "Loading the second one aborts the process (torch allows one definition of a "
            f"namespace); fix: {FIX}"
        )
    return problems


def definition_conflict(manifest: Manifest, owners: Mapping[str, str]) -> str | None:
    """Why the loader refuses ``manifest``'s library, given ``owners`` (namespace -> the
    library that already defines it in this process); None when nothing conflicts."""
    if manifest.registrations is None:
        return None
    for namespace in manifest.registrations.defined_namespaces:
        owner = owners.get(namespace)
        if owner is not None:
            return (
                f"refused before loading: {manifest.library} defines op namespace {namespace} "
                f"({_what(manifest, namespace)}), which {owner} already defines in this "
                "process; a second definition of a namespace aborts the process. "
                f"Fix: {FIX}"
            )
    return None


def _kernels(manifest: Manifest) -> list[tuple[str, str]]:
    """(qualified op, backend) for each op the library serves."""
    return [(f"{manifest.namespace}::{op}", manifest.backend) for op in sorted(manifest.ops)]


def kernel_overlap(manifest: Manifest, owners: Mapping[tuple[str, str], str]) -> str | None:
    """Why the loader refuses ``manifest``'s library, given ``owners`` ((op, backend) ->
    the library that already registers that kernel in this process); None when none."""
    for op, backend in _kernels(manifest):
        owner = owners.get((op, backend))
        if owner is not None:
            return (
                f"refused before loading: {manifest.library} registers {backend} kernels for "
                f"{op}, which {owner} already registers; the one loaded last "
                "would silently replace the other's. Fix: one library per backend serves an "
                f"op: if {manifest.library} is a stale file, reinstall the package "
                "(pip install --force-reinstall --no-deps <package>), else merge the two "
                "libraries' sources"
            )
    return None


@dataclasses.dataclass
class Claims:
    """What the libraries loaded so far define (namespace -> library) and register
    ((op, backend) -> library)."""

    namespaces: dict[str, str] = dataclasses.field(default_factory=dict)
    kernels: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)

    def conflict(self, manifest: Manifest) -> str | None:
        return definition_conflict(manifest, self.namespaces) or kernel_overlap(
            manifest, self.kernels
        )

    def record(self, manifest: Manifest) -> None:
        """``manifest``'s library is loaded (the doctor: would be; its reasons are the
        loader's words)."""
        owner = f"{manifest.library} (of {manifest.package}, loaded)"
        if manifest.registrations is not None:
            for namespace in manifest.registrations.defined_namespaces:
                self.namespaces.setdefault(namespace, owner)
        for key in _kernels(manifest):
            self.kernels.setdefault(key, owner)
