"""Environment switches read by the runtime (the one list: README.md, "Environment").

| variable | effect |
|---|---|
| ``PTKIT_DISABLE_NATIVE`` | comma list of backends (``cpu,cuda``…) whose native libraries are not loaded |
| ``PTKIT_FORCE_REFERENCE`` | ``1``: load no native library; every op runs the reference |
| ``PTKIT_LOG`` | ``debug``, ``info``, ``warning`` (default), ``error`` or ``off``: what ptkit logs to stderr |
| ``PTKIT_CPU_ISA`` | caps the CPU kernels' instruction-set level (``default``, ``x86-64-v3``…): the best level built, run by this CPU and not above the cap |
| ``PTKIT_LOAD_TRACE`` | ``1``: say on stderr which library is about to load, and that it loaded (``ptkit build``'s smoke stage sets it, so a load that kills the process is named) |
| ``PTKIT_VARIANT`` | build time only: the recipe to build (``recipes/<variant>.toml``) |

They are read once per process (``process_switches``), when ``ptkit.runtime`` is first
imported (a package's ``load_package``, ``ptkit.compile`` …). A value that is not
understood is ignored and reported by ``explain()``; it never fails the import.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping

from ptkit.backends import BACKENDS
from ptkit.platforms.base import known_isa_levels

__all__ = ["LOG_LEVELS", "RuntimeSwitches", "configure_logging", "process_switches"]

_TRUE = {"1", "true", "yes", "on"}
# PTKIT_LOG values and the logging level of the "ptkit" logger; None: nothing at all.
LOG_LEVELS: dict[str, int | None] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": None,
}


@dataclasses.dataclass(frozen=True)
class RuntimeSwitches:
    disabled_backends: frozenset[str] = frozenset()
    force_reference: bool = False
    log_level: str = "warning"
    # Values that were not understood, reported by explain() instead of failing the import.
    problems: tuple[str, ...] = ()
    # PTKIT_CPU_ISA, lower case, when it names a known level: the CPU kernels' cap.
    cpu_isa_cap: str | None = None
    # PTKIT_LOAD_TRACE=1: each load is announced on stderr before it happens.
    load_trace: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RuntimeSwitches:
        env = os.environ if environ is None else environ
        problems: list[str] = []
        disabled: set[str] = set()
        for item in env.get("PTKIT_DISABLE_NATIVE", "").split(","):
            name = item.strip().lower()
            if not name:
                continue
            if name == "all":
                disabled.update(BACKENDS)
            elif name in BACKENDS:
                disabled.add(name)
            else:
                problems.append(
                    f"PTKIT_DISABLE_NATIVE: unknown backend {name!r} "
                    f"(expected a comma list of {', '.join(BACKENDS)} or 'all'); ignored"
                )
        force = env.get("PTKIT_FORCE_REFERENCE", "").strip().lower()
        if force not in _TRUE | {"", "0", "false", "no", "off"}:
            problems.append(f"PTKIT_FORCE_REFERENCE: expected 1 or 0, got {force!r}; treated as 0")
        log_level = env.get("PTKIT_LOG", "").strip().lower() or "warning"
        if log_level not in LOG_LEVELS:
            problems.append(
                f"PTKIT_LOG: expected one of {', '.join(LOG_LEVELS)}, got {log_level!r}; "
                "using warning"
            )
            log_level = "warning"
        cap = env.get("PTKIT_CPU_ISA", "").strip().lower() or None
        if cap is not None and cap not in known_isa_levels():
            problems.append(
                f"PTKIT_CPU_ISA: unknown level {cap!r} (expected one of "
                f"{', '.join(known_isa_levels())}); ignored: the CPU kernels take the best "
                "level this CPU runs"
            )
            cap = None
        trace = env.get("PTKIT_LOAD_TRACE", "").strip().lower()
        if trace not in _TRUE | {"", "0", "false", "no", "off"}:
            problems.append(f"PTKIT_LOAD_TRACE: expected 1 or 0, got {trace!r}; treated as 0")
        return cls(
            frozenset(disabled), force in _TRUE, log_level, tuple(problems), cap, trace in _TRUE
        )

    def disabled_reason(self, backend: str) -> str | None:
        if self.force_reference:
            return "native code switched off by PTKIT_FORCE_REFERENCE=1"
        if backend in self.disabled_backends:
            return f"native {backend} code switched off by PTKIT_DISABLE_NATIVE"
        return None

    def enable_fix(self, backend: str) -> str | None:
        """How to switch ``backend``'s native code back on; None when it is not off."""
        if self.force_reference:
            return "unset PTKIT_FORCE_REFERENCE (or set it to 0)"
        if backend in self.disabled_backends:
            return f"take {backend} out of PTKIT_DISABLE_NATIVE"
        return None


def configure_logging(level_name: str) -> None:
    """Apply PTKIT_LOG to the ``ptkit`` logger: one stderr handler of ptkit's own, so that
    the loader's decisions show without configuring logging in the application."""
    logger = logging.getLogger("ptkit")
    for handler in [h for h in logger.handlers if getattr(h, "ptkit_handler", False)]:
        logger.removeHandler(handler)
    level = LOG_LEVELS[level_name]
    if level is None:
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False
        return
    handler = logging.StreamHandler()
    handler.ptkit_handler = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    # The application's own handlers (if any) still see the records; ours prints them once.
    logger.propagate = False


@functools.cache
def process_switches() -> RuntimeSwitches:
    """The switches of this process, read from its environment once (by the first load or
    the first use of ``ptkit.runtime``), with ``PTKIT_LOG`` applied."""
    switches = RuntimeSwitches.from_environ()
    configure_logging(switches.log_level)
    return switches
