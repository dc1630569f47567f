"""ptkit's runtime: manifest-checked loading of native libraries, and explanations.

``explain()`` answers "which implementation serves this op on this device, and
why"; ``load_decisions()`` lists what the loader did with each native library;
``profile()`` adds compile support, graph capture, the distributed backend and the
Inductor GEMM backends; ``apply_profile()`` applies the GEMM recommendation.

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
    from ptkit.runtime.profiling import RuntimeProfile, apply_profile, profile
    from ptkit.runtime.routing import OpRoute
    from ptkit.runtime.session import explain, format_explain, load_decisions
    from ptkit.runtime.switches import RuntimeSwitches

# Public name -> the module under ptkit.runtime that defines it.
_EXPORTS = {
    "CompileSupport": "compile_checks",
    "LoadDecision": "loader",
    "LoadStatus": "loader",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "OpRoute": "routing",
    "RuntimeProfile": "profiling",
    "RuntimeSwitches": "switches",
    "apply_profile": "profiling",
    "compile_support": "compile_checks",
    "explain": "session",
    "format_explain": "session",
    "load_decisions": "session",
    "profile": "profiling",
    "read_manifest": "manifest",
}

__all__ = [
    "CompileSupport",
    "LoadDecision",
    "LoadStatus",
    "Manifest",
    "ManifestError",
    "OpRoute",
    "RuntimeProfile",
    "RuntimeSwitches",
    "apply_profile",
    "compile_support",
    "explain",
    "format_explain",
    "load_decisions",
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
