"""ptkit's runtime: manifest-checked loading of native libraries, and explanations.

``explain()`` answers "which implementation serves this op on this device, and
why"; ``load_decisions()`` lists what the loader did with each native library;
``profile()`` adds compile support, graph capture, the distributed backend and the
Inductor GEMM backends; ``apply_profile()`` applies the GEMM recommendation.

Packages built with ptkit load their own libraries with the same loader: their
``__init__.py`` calls ``load_package(__name__)`` (libraries and manifests in
``<package>/_native/``), and their distribution declares them in the ``ptkit.packages``
entry-point group, which ``installed_packages()`` and ``ptkit doctor`` read.
``explain()`` and ``load_decisions()`` then cover every loaded package, ptkit first.

Stability: ``API_VERSION`` is an int, bumped only by a breaking change to the names in
``__all__`` below: a removed or renamed name, a removed or reordered parameter, a
parameter without a default added, a removed field or attribute. Within one
``API_VERSION`` these names keep working (new keyword parameters with defaults, new
fields, new ``LoadStatus`` or ``implementation`` values may be added). Every other name
(the submodules, anything starting with ``_``, ``ptkit.runtime.loader.TorchFacts`` …) is
private: it may change in any release. Downstream code can check
``ptkit.runtime.API_VERSION == 1``. ``tests/unit/test_runtime_api.py`` pins the surface.

The names below are imported on first use (their modules are named differently, so that
importing a module never replaces a function of the same name on this package): the loader's rule modules
(``cuda_targets``, ``hip_targets``, ``xpu_targets``, ``manifest``) are standard-library
only, and ``ptkit select`` and ``ptkit doctor`` import them without importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptkit.runtime.compile_checks import CompileSupport, compile_support
    from ptkit.runtime.loader import LoadDecision, LoadStatus
    from ptkit.runtime.manifest import Manifest, ManifestError, read_manifest
    from ptkit.runtime.packages import PackageLoad, PackageLoadError, installed_packages
    from ptkit.runtime.profiling import RuntimeProfile, apply_profile, profile
    from ptkit.runtime.routing import OpRoute
    from ptkit.runtime.session import (
        explain,
        format_explain,
        load_decisions,
        load_package,
        package_loads,
    )
    from ptkit.runtime.switches import RuntimeSwitches

# The version of the public API below: bumped only by a breaking change (see the docstring).
API_VERSION = 1

# Public name -> the module under ptkit.runtime that defines it.
_EXPORTS = {
    "CompileSupport": "compile_checks",
    "LoadDecision": "loader",
    "LoadStatus": "loader",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "OpRoute": "routing",
    "PackageLoad": "packages",
    "PackageLoadError": "packages",
    "RuntimeProfile": "profiling",
    "RuntimeSwitches": "switches",
    "apply_profile": "profiling",
    "compile_support": "compile_checks",
    "explain": "session",
    "format_explain": "session",
    "installed_packages": "packages",
    "load_decisions": "session",
    "load_package": "session",
    "package_loads": "session",
    "profile": "profiling",
    "read_manifest": "manifest",
}

__all__ = [
    "API_VERSION",
    "CompileSupport",
    "LoadDecision",
    "LoadStatus",
    "Manifest",
    "ManifestError",
    "OpRoute",
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
    value = getattr(importlib.import_module(f"ptkit.runtime.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
