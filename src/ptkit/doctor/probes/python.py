"""The running interpreter: version, free-threaded build, GIL state."""

from __future__ import annotations

import platform
import sys
import sysconfig

from ptkit.doctor.model import PythonFacts

__all__ = ["probe_python"]


def probe_python() -> PythonFacts:
    # Py_GIL_DISABLED is the build flag (3.13t, 3.15t); the GIL can still be on at run
    # time (PYTHON_GIL=1, or an extension that does not declare free-threading support).
    free_threaded = sysconfig.get_config_var("Py_GIL_DISABLED") == 1
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)  # 3.13+
    gil_enabled = bool(is_gil_enabled()) if is_gil_enabled is not None else None
    return PythonFacts(
        version=platform.python_version(),
        implementation=sys.implementation.name,
        executable=sys.executable,
        free_threaded=free_threaded,
        gil_enabled=gil_enabled,
    )
