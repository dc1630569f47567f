"""What the loader did in this process: each package's decisions and the switches read.

A package built with ptkit calls ``load_package(__name__)`` from its ``__init__``
(``ptkit_ops`` does); ``load_decisions()``, ``explain()`` and ``package_loads()`` read
what was recorded. ``explain()`` asks torch's dispatcher what serves each op on each
device (a library ptkit loaded, a reference kernel, or nothing: ``ptkit.loading.routes``);
ops whose only definition is in a library that did not load get ptkit's stand-in
(``ptkit.runtime.unavailable``), so that the package still imports.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ptkit.loading.packages import PackageLoad, PackageLoadError, native_dir_of, package_version
from ptkit.loading.routes import OpRoute, OtherKernel, format_routes, routes
from ptkit.loading.rules import LoadDecision, LoadStatus, listed_manifests
from ptkit.loading.switches import process_switches
from ptkit.runtime.loader import MetalBinding, load_native_libraries, torch_facts
from ptkit.runtime.registrations import op_entry
from ptkit.runtime.unavailable import define_unavailable, is_stand_in

__all__ = ["explain", "format_explain", "load_decisions", "load_package", "package_loads"]

logger = logging.getLogger("ptkit.runtime")

# A package's sample inputs for one op: (dtype, device) -> the op's positional
# arguments, for the smoke stage's one run per declared dtype.
SampleInputs = Callable[[torch.dtype, str], Sequence[Any]]

# Import name -> what load_package did, in load order.
_packages: dict[str, PackageLoad] = {}
# Import name -> what its Metal binding returned (its ``failure`` says why the MPS
# kernels now run the reference).
_metal: dict[str, list[object]] = {}
# Import name -> the sample inputs it gave load_package (the smoke stage runs them).
_samples: dict[str, Mapping[str, SampleInputs]] = {}
# One load at a time: a package imported from two threads loads its libraries once.
_lock = threading.RLock()


def load_package(
    package: str,
    *,
    native_dir: Path | None = None,
    metal_binding: MetalBinding | None = None,
    ops: Mapping[str, Sequence[str]] | None = None,
    samples: Mapping[str, SampleInputs] | None = None,
) -> PackageLoad:
    """Load the native libraries of ``package`` (its import name) with ptkit's loader:
    the manifest checks, switches and records every ptkit-built package shares.

    Call it from the package's ``__init__.py``: ``ptkit.runtime.load_package(__name__)``.
    The libraries are found in ``native_dir``, by default ``<package folder>/_native``
    (located without importing the package). A second call returns the recorded result.
    A library that cannot load here never raises: its ``LoadDecision`` says why, and
    ``explain()`` routes its ops to whatever else is registered (the package's reference).

    ``metal_binding``: for a package that ships Metal kernels, a callable that registers
    them (given the ``.metal`` or ``.metallib`` file) as its ops' MPS implementations;
    what it returns may say, in a ``failure`` attribute, why they fell back.

    ``ops``: namespace -> the ops the package defines (in Python), so that ``explain()``
    lists them even where no manifest can be read.

    ``samples``: op name (``op`` or ``ns::op``) -> a function ``(dtype, device)`` returning
    the op's positional arguments; the smoke stage (``python -m ptkit.runtime.smoke``) runs
    each op's native kernel once per declared dtype with them. Without one, an op whose
    arguments are all tensors and that returns one tensor is run on guessed elementwise
    inputs; any other op is not run, and the smoke test says so.

    An op whose schema is defined only in a library that did not load (schemas in C++,
    with ``PTKIT_FORCE_REFERENCE=1`` …) is still defined, by ptkit, with a kernel that
    raises ``OpUnavailableError`` saying why and the fix: the package's import and its
    ``register_fake`` calls work, and ``PackageLoad.available(op)`` says which ops can run.

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
        switches = process_switches()
        manifests, unlisted = listed_manifests(native_dir)
        for d in unlisted:
            logger.warning("ptkit: %s %s: %s", d.library, d.status.value, d.reason)
        if not manifests and not unlisted:  # a build that installed nothing: say so once
            logger.warning(
                "ptkit: %s has no *.manifest.json in %s: no native library to load",
                package,
                native_dir,
            )
        bound: list[object] = []

        def bind(path: Path) -> object:
            assert metal_binding is not None
            result = metal_binding(path)
            bound.append(result)
            return result

        decisions: list[LoadDecision] = []
        try:
            facts = torch_facts()
        except Exception as exc:  # torch's device queries failing must not fail the import
            reason = f"loader error: reading torch's facts failed: {exc!r}"
            decisions = [LoadDecision(path, LoadStatus.FAILED, reason) for path in manifests]
            for d in decisions:
                logger.warning("ptkit: %s %s: %s", d.library, d.status.value, d.reason)
        else:
            decisions = load_native_libraries(
                manifests,
                facts=facts,
                switches=switches,
                metal_binding=bind if metal_binding is not None else None,
            )
        decisions = unlisted + decisions
        defined = {ns: tuple(names) for ns, names in (ops or {}).items()}
        load = PackageLoad(package, package_version(package), native_dir, tuple(decisions), defined)
        stand_ins = define_unavailable(package, decisions, switches)
        load = dataclasses.replace(load, unavailable_ops=_unavailable(load, stand_ins))
        for op, why in load.unavailable_ops.items():
            logger.info("ptkit: %s unavailable: %s", op, why)
        _packages[package] = load
        _metal[package] = bound
        _samples[package] = dict(samples or {})
        return load


def _unavailable(load: PackageLoad, stand_ins: Mapping[str, str]) -> dict[str, str]:
    """The package's ops that cannot be called: ptkit's stand-ins, and those nothing
    defines at all."""
    found = dict(stand_ins)
    for namespace, ops in load.ops.items():
        for op in ops:
            qualified = f"{namespace}::{op}"
            if qualified not in found and not _has_schema(qualified):
                found[qualified] = (
                    f"{qualified} is not defined: no library that loaded defines it and "
                    f"{load.name} defines no schema for it"
                )
    return found


def sample_inputs(package: str) -> Mapping[str, SampleInputs]:
    """The ``samples`` the package gave ``load_package`` (none: empty)."""
    with _lock:
        return _samples.get(package, {})


def package_loads() -> list[PackageLoad]:
    """What was loaded for each package in this process, in load order."""
    with _lock:
        return list(_packages.values())


def load_decisions(package: str | None = None) -> list[LoadDecision]:
    """What the loader decided for each native library, in load order: every package's,
    or only ``package``'s."""
    return [d for p in package_loads() if package is None or p.name == package for d in p.decisions]


def _has_kernel(qualified_op: str, dispatch_key: str) -> bool:
    # A stand-in's kernel is CompositeExplicitAutograd: a library's kernel of an exact key
    # (a CUDA library beside a CPU library that defined the schemas and did not load)
    # serves through the stand-in's schema, and is native.
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(qualified_op, dispatch_key))
    except RuntimeError:  # the op has no schema at all (its library did not load)
        return False


def _has_schema(qualified_op: str) -> bool:
    """Defined, and not by ptkit's stand-in (its real definition did not load)."""
    entry = op_entry(qualified_op)
    return entry is not None and entry.schema is not None and not is_stand_in(entry.defined_at)


# torch records a Python registration at the line that created its torch.library.Library.
_PYTHON_SOURCE = re.compile(r"\.pyw?:\d+$")


def is_python_registration(where: str) -> bool:
    """Whether a kernel the dispatcher says was "registered at ``where``" came from Python
    (a torch.library registration: a reference) rather than from a native library."""
    return bool(_PYTHON_SOURCE.search(where))


# The alias keys whose kernel serves every backend, in the dispatcher's order of preference.
_REFERENCE_KEYS = (
    "CompositeExplicitAutogradNonFunctional",
    "CompositeExplicitAutograd",
    "CompositeImplicitAutograd",
)


def _other_kernel(qualified_op: str, dispatch_key: str) -> OtherKernel | None:
    """What serves ``dispatch_key`` besides a library ptkit loaded: the dispatcher's dump
    of the op says which keys have kernels and where each was registered (ptkit's
    stand-in of an unavailable op serves nothing)."""
    entry = op_entry(qualified_op)
    if entry is None or entry.schema is None:
        return None
    where = entry.kernels.get(dispatch_key)
    if where is not None:
        if is_python_registration(where):
            return OtherKernel(
                "reference", f"reference: a {dispatch_key} kernel from Python ({where})"
            )
        return OtherKernel("native", f"registered at {where}")
    for alias in _REFERENCE_KEYS:
        where = entry.kernels.get(alias)
        if where is not None and not is_stand_in(where):
            return OtherKernel("reference", f"reference: its {alias} kernel ({where})")
    return None


def _metal_fallbacks(package: str) -> dict[str, str]:
    failures = [getattr(b, "failure", None) for b in _metal.get(package, [])]
    failure = next((f for f in failures if f), None)
    if failure is None:
        return {}
    return {"mps": f"Metal kernels failed, the reference runs instead: {failure}"}


def _package_routes(load: PackageLoad) -> list[OpRoute]:
    """Routes of a package's ops: the ops and namespaces its manifests list."""
    facts = torch_facts()
    rows: list[OpRoute] = []
    for namespace, ops in load.ops.items():
        decisions = [
            d for d in load.decisions if d.manifest is None or d.manifest.namespace == namespace
        ]
        rows += routes(
            list(ops),
            namespace,
            decisions,
            facts,
            process_switches(),
            _metal_fallbacks(load.name),
            has_kernel=_has_kernel,
            other_kernel=_other_kernel,
            has_schema=_has_schema,
        )
    return rows


def explain(package: str | None = None) -> list[OpRoute]:
    """Per op and device type: ``native``, ``reference`` or ``unavailable`` (nothing
    serves the op there), the library, and why (with the fix where nothing serves); for
    every loaded package, or only ``package``'s ops."""
    return [
        row
        for load in package_loads()
        if package is None or load.name == package
        for row in _package_routes(load)
    ]


def format_explain(package: str | None = None) -> str:
    """``explain()`` as a text table, with the switches' problems after it."""
    lines = [format_routes(explain(package))]
    lines += [f"warning: {p}" for p in process_switches().problems]
    return "\n".join(lines)
