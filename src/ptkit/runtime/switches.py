"""Environment switches read by the runtime (documented in README.md, "Environment").

| variable | effect |
|---|---|
| ``PTKIT_DISABLE_NATIVE`` | comma list of backends (``cpu,cuda``…) whose native libraries are not loaded |
| ``PTKIT_FORCE_REFERENCE`` | ``1``: load no native library; every op runs the reference |
| ``PTKIT_CPU_ISA`` | caps the CPU kernels' instruction-set level (``default``, ``x86-64-v3``…) |

They are read once, when ``ptkit`` is imported.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from ptkit.runtime.manifest import BACKENDS

__all__ = ["RuntimeSwitches"]

_TRUE = {"1", "true", "yes", "on"}


@dataclasses.dataclass(frozen=True)
class RuntimeSwitches:
    disabled_backends: frozenset[str] = frozenset()
    force_reference: bool = False
    # Values that were not understood, reported by explain() instead of failing the import.
    problems: tuple[str, ...] = ()

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
        return cls(frozenset(disabled), force in _TRUE, tuple(problems))

    def disabled_reason(self, backend: str) -> str | None:
        if self.force_reference:
            return "native code switched off by PTKIT_FORCE_REFERENCE=1"
        if backend in self.disabled_backends:
            return f"native {backend} code switched off by PTKIT_DISABLE_NATIVE"
        return None
