"""What the loader did in this process: its decisions and the switches it read.

``import ptkit`` calls ``load_own_libraries`` once; ``explain()`` and
``load_decisions()`` read what it recorded.
"""

from __future__ import annotations

from pathlib import Path

from ptkit.runtime.loader import LoadDecision, TorchFacts, load_native_libraries
from ptkit.runtime.routing import OpRoute, format_routes, routes
from ptkit.runtime.switches import RuntimeSwitches, configure_logging

_decisions: list[LoadDecision] = []
_switches = RuntimeSwitches()


def load_own_libraries(native_dir: Path) -> None:
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
