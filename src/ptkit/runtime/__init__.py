"""ptkit's runtime: manifest-checked loading of native libraries, and explanations.

``explain()`` answers "which implementation serves this op on this device, and
why"; ``load_decisions()`` lists what the loader did with each native library;
``profile()`` adds compile support, graph capture, the distributed backend and the
Inductor GEMM backends; ``apply_profile()`` applies the GEMM recommendation.
"""

from __future__ import annotations

from pathlib import Path

from ptkit.runtime.compile_support import CompileSupport, compile_support
from ptkit.runtime.explain import OpRoute, format_routes, routes
from ptkit.runtime.loader import LoadDecision, LoadStatus, TorchFacts, load_native_libraries
from ptkit.runtime.manifest import Manifest, ManifestError, read_manifest
from ptkit.runtime.switches import RuntimeSwitches, configure_logging

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

_decisions: list[LoadDecision] = []
_switches = RuntimeSwitches()


def _load_own_libraries(native_dir: Path) -> None:
    """Called once by ``import ptkit``."""
    global _switches
    _switches = RuntimeSwitches.from_environ()
    configure_logging(_switches.log_level)
    _decisions.extend(load_native_libraries(native_dir, switches=_switches))


def load_decisions() -> list[LoadDecision]:
    """What the loader decided for each native library, in load order."""
    return list(_decisions)


def explain() -> list[OpRoute]:
    """Per op and device type: ``native`` or ``reference``, the library, and why."""
    from ptkit.ops import NAMESPACE, OPS
    from ptkit.runtime.metal import metal_kernels

    fallbacks = {}
    metal = metal_kernels()
    if metal is not None and metal.failure is not None:
        fallbacks["mps"] = f"Metal kernels failed, the reference runs instead: {metal.failure}"
    return routes(OPS, NAMESPACE, _decisions, TorchFacts.from_torch(), _switches, fallbacks)


def format_explain() -> str:
    """``explain()`` as a text table, with the switches' problems and failed loads after it."""
    lines = [format_routes(explain())]
    lines += [f"warning: {p}" for p in _switches.problems]
    return "\n".join(lines)


# Imported last: the profile uses explain() above.
from ptkit.runtime.profile import RuntimeProfile, apply_profile, profile  # noqa: E402
