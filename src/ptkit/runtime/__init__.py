"""ptkit inside a running torch: manifest-checked loading of native libraries, explanations,
and graceful degradation (``compiling``, ``graphs``, ``distributed``). The only part of
the toolkit that imports torch (``docs/architecture.md``); the rules it applies live in
``ptkit.loading`` and ``ptkit.degradation``, which the doctor uses without torch.

``explain()`` answers "which implementation serves this op on this device, and
why"; ``load_decisions()`` lists what the loader did with each native library;
``profile()`` adds compile support, graph capture, the distributed backend and the
Inductor GEMM backends; ``apply_profile()`` applies the GEMM recommendation.

Packages built with ptkit load their own libraries with the same loader: their
``__init__.py`` calls ``load_package(__name__)`` (libraries and manifests in
``<package>/_native/``), and their distribution declares them in the ``ptkit.packages``
entry-point group, which ``installed_packages()`` and ``ptkit doctor`` read.
``explain()`` and ``load_decisions()`` then cover every loaded package.

Stability: ``API_VERSION`` is an int, bumped only by a breaking change to the names in
``__all__`` below: a removed or renamed name, a removed or reordered parameter, a
parameter without a default added, a removed field or attribute. Within one
``API_VERSION`` these names keep working (new keyword parameters with defaults, new
fields, new ``LoadStatus`` or ``implementation`` values may be added). Every other name
(the submodules, anything starting with ``_``, ``ptkit.runtime.loader.TorchFacts`` …) is
private: it may change in any release. Downstream code can check
``ptkit.runtime.API_VERSION == 1``. ``tests/unit/test_runtime_api.py`` pins the surface.

The names below are imported on first use (``import ptkit.runtime`` costs nothing; the
names that need torch import it when first used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ptkit.loading.switches import process_switches

if TYPE_CHECKING:
    from ptkit.degradation.compile_rules import CompileSupport
    from ptkit.loading.manifest import Manifest, ManifestError, read_manifest
    from ptkit.loading.packages import (
        OpUnavailableError,
        PackageLoad,
        PackageLoadError,
        installed_packages,
    )
    from ptkit.loading.routes import OpRoute
    from ptkit.loading.rules import LoadDecision, LoadStatus
    from ptkit.loading.switches import RuntimeSwitches
    from ptkit.runtime.compiling import compile_support
    from ptkit.runtime.profiling import RuntimeProfile, apply_profile, profile
    from ptkit.runtime.session import (
        explain,
        format_explain,
        load_decisions,
        load_package,
        package_loads,
    )

# The version of the public API below: bumped only by a breaking change (see the docstring).
API_VERSION = 1

# The environment switches are read, and PTKIT_LOG applied, once per process, here.
process_switches()

# Public name -> the module that defines it.
_EXPORTS = {
    "CompileSupport": "ptkit.degradation.compile_rules",
    "LoadDecision": "ptkit.loading.rules",
    "LoadStatus": "ptkit.loading.rules",
    "Manifest": "ptkit.loading.manifest",
    "ManifestError": "ptkit.loading.manifest",
    "OpRoute": "ptkit.loading.routes",
    "OpUnavailableError": "ptkit.loading.packages",
    "PackageLoad": "ptkit.loading.packages",
    "PackageLoadError": "ptkit.loading.packages",
    "RuntimeProfile": "ptkit.runtime.profiling",
    "RuntimeSwitches": "ptkit.loading.switches",
    "apply_profile": "ptkit.runtime.profiling",
    "compile_support": "ptkit.runtime.compiling",
    "explain": "ptkit.runtime.session",
    "format_explain": "ptkit.runtime.session",
    "installed_packages": "ptkit.loading.packages",
    "load_decisions": "ptkit.runtime.session",
    "load_package": "ptkit.runtime.session",
    "package_loads": "ptkit.runtime.session",
    "profile": "ptkit.runtime.profiling",
    "read_manifest": "ptkit.loading.manifest",
}

__all__ = [
    "API_VERSION",
    "CompileSupport",
    "LoadDecision",
    "LoadStatus",
    "Manifest",
    "ManifestError",
    "OpRoute",
    "OpUnavailableError",
    "PackageLoad",
    "PackageLoadError",
    "RuntimeProfile",
    "RuntimeSwitches",
    "apply_profile",
    "compile_support",
    "explain",
    "format_explain",
    "installed_packages",
    "load_decisions",
    "load_package",
    "package_loads",
    "profile",
    "read_manifest",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ptkit.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
