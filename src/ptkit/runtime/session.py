"""What the loader did in this process: each package's decisions and the switches read.

``import ptkit`` calls ``load_own_libraries`` once; a package built with ptkit calls
``load_package(__name__)`` from its ``__init__``. ``load_decisions()``, ``explain()`` and
``package_loads()`` read what they recorded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from ptkit.runtime.loader import LoadDecision, LoadStatus, TorchFacts, load_native_libraries
from ptkit.runtime.manifest import ManifestError, find_manifests, read_manifest
from ptkit.runtime.packages import (
    PackageLoad,
    PackageLoadError,
    native_dir_of,
    package_version,
    unsupported_reason,
)
from ptkit.runtime.routing import OpRoute, format_routes, routes
from ptkit.runtime.switches import RuntimeSwitches, configure_logging

logger = logging.getLogger("ptkit.runtime")

OWN_PACKAGE = "ptkit"

# Import name -> what load_package (or import ptkit) did, in load order.
_packages: dict[str, PackageLoad] = {}
_switches = RuntimeSwitches()
_switches_read = False
# One load at a time: a package imported from two threads loads its libraries once.
_lock = threading.RLock()


def _read_switches() -> RuntimeSwitches:
    """The environment switches, read once per process (by whichever load comes first)."""
    global _switches, _switches_read
    if not _switches_read:
        _switches = RuntimeSwitches.from_environ()
        configure_logging(_switches.log_level)
        _switches_read = True
    return _switches


def load_own_libraries(native_dir: Path, *, version: str | None = None) -> None:
    """Called once by ``import ptkit``."""
    with _lock:
        if OWN_PACKAGE in _packages:
            return
        switches = _read_switches()
        decisions = tuple(load_native_libraries(native_dir, switches=switches))
        _packages[OWN_PACKAGE] = PackageLoad(OWN_PACKAGE, version, native_dir, decisions)


def load_package(package: str, *, native_dir: Path | None = None) -> PackageLoad:
    """Load the native libraries of ``package`` (its import name) with ptkit's loader:
    the same manifest checks, switches and records as ptkit's own libraries.

    Call it from the package's ``__init__.py``: ``ptkit.runtime.load_package(__name__)``.
    The libraries are found in ``native_dir``, by default ``<package folder>/_native``
    (located without importing the package). A second call returns the recorded result.
    A library that cannot load here never raises: its ``LoadDecision`` says why, and
    ``explain()`` routes its ops to whatever else is registered (the package's reference).

    Raises ``PackageLoadError`` (a ``ValueError``) only for a programmer's mistake: a
    package that cannot be found, or no native folder.
    """
    with _lock:
        recorded = _packages.get(package)
        if recorded is not None:
            return recorded
        if native_dir is None:
            native_dir = native_dir_of(package)
        elif not Path(native_dir).is_dir():
            raise PackageLoadError(
                f"ptkit.runtime.load_package: expected native_dir to be the folder of "
                f"{package}'s libraries and manifests, got {native_dir} (not a folder); "
                "pass the folder the build installed them into, or leave native_dir out"
            )
        native_dir = Path(native_dir)
        switches = _read_switches()  # first: PTKIT_LOG applies to what is logged below
        manifests = find_manifests(native_dir)
        if not manifests:  # a build that installed nothing: say so once
            logger.warning(
                "ptkit: %s has no *.manifest.json in %s: no native library to load",
                package,
                native_dir,
            )
        decisions: list[LoadDecision] = []
        try:
            facts = TorchFacts.from_torch()
        except Exception as exc:  # torch's device queries failing must not fail the import
            reason = f"loader error: reading torch's facts failed: {exc!r}"
            decisions = [LoadDecision(path, LoadStatus.FAILED, reason) for path in manifests]
            for d in decisions:
                logger.warning("ptkit: %s %s: %s", d.library, d.status.value, d.reason)
            manifests = []
        for path in manifests:
            skipped = _not_loadable_for(package, path)
            if skipped is not None:
                decisions.append(skipped)
                continue
            decisions += load_native_libraries([path], facts=facts, switches=switches)
        load = PackageLoad(package, package_version(package), native_dir, tuple(decisions))
        _packages[package] = load
        return load


def _not_loadable_for(package: str, path: Path) -> LoadDecision | None:
    """A manifest ptkit's loader cannot serve for another package, recorded as skipped."""
    try:
        manifest = read_manifest(path)
    except ManifestError:
        return None  # the loader records it, in its own words
    reason = unsupported_reason(package, manifest)
    if reason is None:
        return None
    logger.info("ptkit: %s %s: %s", manifest.library, LoadStatus.SKIPPED.value, reason)
    return LoadDecision(path, LoadStatus.SKIPPED, reason, manifest)


def package_loads() -> list[PackageLoad]:
    """What was loaded for each package in this process (ptkit first), in load order."""
    with _lock:
        return list(_packages.values())


def load_decisions(package: str | None = None) -> list[LoadDecision]:
    """What the loader decided for each native library, in load order: every package's
    (ptkit's first), or only ``package``'s."""
    return [d for p in package_loads() if package is None or p.name == package for d in p.decisions]


def _safe_has_kernel(qualified_op: str, dispatch_key: str) -> bool:
    import torch

    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(qualified_op, dispatch_key))
    except RuntimeError:  # the op has no schema at all (its library did not load)
        return False


def _op_exists(qualified_op: str) -> bool:
    import torch

    return bool(torch._C._dispatch_has_kernel(qualified_op))


def _package_routes(
    load: PackageLoad, facts: TorchFacts, has_kernel: Callable[[str, str], bool]
) -> list[OpRoute]:
    """Routes of another package's ops: the ops and namespaces its manifests list."""
    rows: list[OpRoute] = []
    for namespace, ops in load.ops.items():
        decisions = [
            d for d in load.decisions if d.manifest is None or d.manifest.namespace == namespace
        ]
        for row in routes(list(ops), namespace, decisions, facts, _switches, None, has_kernel):
            if row.implementation == "reference" and not _op_exists(f"{namespace}::{row.op}"):
                # Nothing at all serves it: the package defines no reference for the op.
                row = OpRoute(
                    row.op,
                    row.device_type,
                    "missing",
                    None,
                    f"{namespace}::{row.op} is not registered ({row.reason}); "
                    f"{load.name} must define the op (a reference) or ship a library for it",
                    namespace,
                )
            rows.append(row)
    return rows


def explain(package: str | None = None) -> list[OpRoute]:
    """Per op and device type: ``native`` or ``reference`` (``missing`` when nothing
    serves another package's op), the library, and why; for every loaded package (ptkit
    first), or only ``package``'s ops."""
    from ptkit.runtime.metal import metal_kernels

    loads = [p for p in package_loads() if package is None or p.name == package]
    if not loads:
        return []
    facts = TorchFacts.from_torch()
    rows: list[OpRoute] = []
    for load in loads:
        if load.name == OWN_PACKAGE:
            from ptkit.ops import NAMESPACE, OPS

            fallbacks = {}
            metal = metal_kernels()
            if metal is not None and metal.failure is not None:
                fallbacks["mps"] = (
                    f"Metal kernels failed, the reference runs instead: {metal.failure}"
                )
            rows += routes(OPS, NAMESPACE, load.decisions, facts, _switches, fallbacks)
        else:
            rows += _package_routes(load, facts, _safe_has_kernel)
    return rows


def format_explain(package: str | None = None) -> str:
    """``explain()`` as a text table, with the switches' problems after it."""
    lines = [format_routes(explain(package))]
    lines += [f"warning: {p}" for p in _switches.problems]
    return "\n".join(lines)
