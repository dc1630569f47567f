"""Packages that use ptkit: their records, their discovery, their native folders.

A package built with ptkit's CMake functions installs its libraries and their manifests
into ``<package>/_native/`` and declares itself in the ``ptkit.packages`` entry-point
group (``[project.entry-points."ptkit.packages"] mypkg = "mypkg"``); its ``__init__``
calls ``ptkit.runtime.load_package(__name__)``. ``installed_packages()`` lists every such
package without importing any of them (``ptkit doctor`` reads the same list).

Standard library only (plus the loader's record types): entry points are read
from ``*.dist-info/entry_points.txt`` on ``sys.path`` directly, because
``importlib.metadata`` costs tens of milliseconds to import and scan, the direct read
about 2 ms. The session state (what was loaded in this process) lives in ``session.py``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptkit.loading.manifest import Manifest
from ptkit.loading.rules import LoadDecision, LoadStatus

__all__ = [
    "ENTRY_POINT_GROUP",
    "NATIVE_FOLDER",
    "OpUnavailableError",
    "PackageEntry",
    "PackageLoad",
    "PackageLoadError",
    "discover_packages",
    "installed_packages",
    "locate_package",
    "native_dir_of",
    "op_table",
    "package_version",
]

# The entry-point group a package that ships ptkit-built libraries declares itself in.
ENTRY_POINT_GROUP = "ptkit.packages"
# Where a package keeps its native libraries and their manifests (ptkit/_native/).
NATIVE_FOLDER = "_native"

_SEPARATORS = re.compile(r"[-_.]+")


class PackageLoadError(ValueError):
    """A programmer's mistake in ``load_package``: an unknown package or no native folder.

    A library that cannot load here is never an error: its decision records why."""


class OpUnavailableError(RuntimeError):
    """An op was called whose only definition is in a native library that did not load
    (a switch turned it off, or it cannot run here); the message names the op, why and
    the fix. ``PackageLoad.available()`` says it before the call."""


@dataclasses.dataclass(frozen=True)
class PackageLoad:
    """What ``load_package`` did for one package (ptkit itself included)."""

    name: str  # the import name ("mypkg")
    version: str | None  # the installed distribution's version; None when not installed
    native_dir: Path
    decisions: tuple[LoadDecision, ...]
    # namespace -> ops the package defines itself (load_package's ``ops``): listed by
    # explain() even when no manifest names them (a damaged install).
    defined_ops: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # Qualified op ("ns::op") -> why calling it raises OpUnavailableError: its only
    # definition is in a library that did not load, or nothing defines it.
    unavailable_ops: dict[str, str] = dataclasses.field(default_factory=dict)

    def available(self, op: str) -> bool:
        """Whether ``op`` ("ns::op", or "op" in the package's only namespace) can be
        called: defined, and not only by a library that did not load. Register fakes and
        autograd formulas only for available ops (``explain()`` says which device serves
        it)."""
        if "::" not in op:
            namespaces = list(self.ops)
            if len(namespaces) != 1:
                raise ValueError(
                    f"PackageLoad.available: expected a qualified op name (ns::{op}): "
                    f"{self.name} has the namespaces {', '.join(namespaces) or 'none'}"
                )
            op = f"{namespaces[0]}::{op}"
        return op not in self.unavailable_ops

    def loaded(self, backend: str | None = None) -> bool:
        """Whether a library (of ``backend``: ``cpu``, ``cuda``, ``hip``, ``xpu``,
        ``metal``; None: any) loaded."""
        return any(
            d.status is LoadStatus.LOADED and (backend is None or d.backend == backend)
            for d in self.decisions
        )

    @property
    def ops(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """namespace -> op -> dtypes, from every readable manifest (loaded or not), and the
        ops the package defines (no dtypes known for those a manifest does not list)."""
        manifests = [d.manifest for d in self.decisions if d.manifest is not None]
        return op_table(manifests, self.defined_ops)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "native_dir": str(self.native_dir),
            "libraries": [
                {
                    "manifest": str(d.manifest_path),
                    "library": d.library,
                    "backend": d.backend,
                    "status": d.status.value,
                    "reason": d.reason,
                    "details": dict(d.details),
                }
                for d in self.decisions
            ],
            "ops": {ns: {op: list(t) for op, t in ops.items()} for ns, ops in self.ops.items()},
            "unavailable_ops": dict(self.unavailable_ops),
        }


def op_table(
    manifests: Sequence[Manifest], defined: Mapping[str, Sequence[str]] | None = None
) -> dict[str, dict[str, tuple[str, ...]]]:
    """A package's ops: namespace -> op -> dtypes, from its manifests' op tables, the ops
    its libraries define or serve with kernels (recorded registrations: schemas in C++
    are listed even where no library of this install has their kernel), and ``defined``
    (the ops the package defines in Python; no dtypes known for those)."""
    table: dict[str, dict[str, tuple[str, ...]]] = {
        namespace: dict.fromkeys(ops, ()) for namespace, ops in (defined or {}).items()
    }
    for manifest in manifests:
        ops = table.setdefault(manifest.namespace, {})
        for op, dtypes in manifest.ops.items():
            ops[op] = tuple(dict.fromkeys((*ops.get(op, ()), *dtypes)))
        registrations = manifest.registrations
        recorded = () if registrations is None else (*registrations.schemas, *registrations.kernels)
        prefix = f"{manifest.namespace}::"
        for qualified in recorded:
            if qualified.startswith(prefix):
                ops.setdefault(qualified[len(prefix) :], ())
    return table


@dataclasses.dataclass(frozen=True)
class PackageEntry:
    """One ``ptkit.packages`` entry point of an installed distribution."""

    name: str  # the entry point's name
    module: str  # its value: the import name of the package holding _native/
    distribution: str  # the distribution that declares it (PEP 503-normalised)
    version: str
    dist_info: Path


def _normalize(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()


def _entries_in(text: str, group: str) -> list[tuple[str, str]]:
    """(name, module) of each entry point of ``group`` in an ``entry_points.txt``."""
    found: list[tuple[str, str]] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section != group or "=" not in line:
            continue
        name, _, value = line.partition("=")
        # "module", "module:attr" or "module:attr [extra]": the module is what we need.
        module = value.split("[", 1)[0].split(":", 1)[0].strip()
        if name.strip() and module:
            found.append((name.strip(), module))
    return found


def discover_packages(
    paths: Sequence[str] | None = None, group: str = ENTRY_POINT_GROUP
) -> tuple[PackageEntry, ...]:
    """Every entry point of ``group`` in the ``*.dist-info`` folders on ``paths``
    (default ``sys.path``), without importing anything. As for imports, the first
    distribution of a name on the path wins, and so does the first entry of a name."""
    seen_dists: set[str] = set()
    entries: dict[str, PackageEntry] = {}
    for entry in sys.path if paths is None else paths:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # a zip, a missing folder
            continue
        for folder in names:
            if not folder.endswith(".dist-info"):
                continue
            dist, sep, version = folder[: -len(".dist-info")].partition("-")
            if not sep or not dist:
                continue
            dist = _normalize(dist)
            if dist in seen_dists:
                continue  # shadowed by an earlier path entry
            seen_dists.add(dist)
            # os.path and open(), not pathlib: ~80 distributions, every millisecond counts.
            dist_info = os.path.join(entry or ".", folder)
            try:
                with open(os.path.join(dist_info, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            for name, module in _entries_in(text, group):
                if name not in entries:
                    entries[name] = PackageEntry(name, module, dist, version, Path(dist_info))
    return tuple(entries.values())


def installed_packages(paths: Sequence[str] | None = None) -> dict[str, str]:
    """Every installed package that uses ptkit: entry-point name -> import name, from the
    ``ptkit.packages`` entry-point group (ptkit-ops declares ``ptkit_ops``), in path
    order. Nothing is imported."""
    return {e.name: e.module for e in discover_packages(paths)}


def locate_package(module: str) -> Path | None:
    """A package's folder without running its ``__init__`` (nor its parents' for a dotted
    name: ``ptkit``'s imports torch); None when it is not importable or not a package."""
    if module in sys.modules:
        spec = getattr(sys.modules[module], "__spec__", None)
        locations = getattr(spec, "submodule_search_locations", None)
        return Path(next(iter(locations))) if locations else None
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        folder = Path(base, *rest.split(".")) if rest else Path(base)
        if folder.is_dir():
            return folder
    return None


def native_dir_of(package: str) -> Path:
    """``<package folder>/_native``; ``PackageLoadError`` (with the fix) when the package
    cannot be found or has no such folder."""
    where = "ptkit.runtime.load_package"
    if not isinstance(package, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", package):
        raise PackageLoadError(
            f"{where}: expected the import name of a package (e.g. load_package(__name__) in "
            f"its __init__.py), got {package!r}"
        )
    folder = locate_package(package)
    if folder is None:
        raise PackageLoadError(
            f"{where}: expected an importable package named {package!r}, found none on the "
            f"path of {sys.executable} (or it is a single module, not a package); install it, "
            "or call load_package(__name__) from the package's own __init__.py"
        )
    native = folder / NATIVE_FOLDER
    if not native.is_dir():
        raise PackageLoadError(
            f"{where}: {package} has no native folder: expected {native} with the libraries "
            "and their *.manifest.json files, found none; install them there with "
            f"ptkit_add_kernel_library(... INSTALL_DIR {package.replace('.', '/')}/"
            f"{NATIVE_FOLDER}) in its CMakeLists.txt, or pass native_dir="
        )
    return native


def package_version(package: str, paths: Sequence[str] | None = None) -> str | None:
    """The installed version of the distribution that holds ``package``: the one that
    declares it in ``ptkit.packages``, else the distribution of the same name beside it;
    None for a package that is not installed (a source tree)."""
    for entry in discover_packages(paths):
        if entry.module == package:
            return entry.version
    folder = locate_package(package)
    if folder is None:
        return None
    wanted = _normalize(package.partition(".")[0])
    top = folder.parents[package.count(".")] if "." in package else folder
    try:
        names = sorted(os.listdir(top.parent))
    except OSError:
        return None
    for name in names:
        if name.endswith(".dist-info"):
            dist, sep, version = name[: -len(".dist-info")].partition("-")
            if sep and _normalize(dist) == wanted and version:
                return version
    return None
