"""Whether a ``ptkit`` command shows the traceback of its own failure, or one line.

``PTKIT_DEBUG=1`` asks for tracebacks, from any command (``PTKIT_DOCTOR_DEBUG``, the
doctor's older name, still works). The command line's boundary (``ptkit.cli.failures``)
and the doctor read it here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["DEBUG_ALIASES", "DEBUG_ENV", "debug_enabled"]

DEBUG_ENV = "PTKIT_DEBUG"
"""``1``: any command shows the traceback of its failure instead of one line."""
DEBUG_ALIASES = ("PTKIT_DOCTOR_DEBUG",)
"""Older names of ``PTKIT_DEBUG`` that still work (``PTKIT_DOCTOR_DEBUG``: the doctor's)."""


def debug_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``PTKIT_DEBUG`` (or an alias) is set to anything but empty or ``0``."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip() not in ("", "0") for name in (DEBUG_ENV, *DEBUG_ALIASES))
