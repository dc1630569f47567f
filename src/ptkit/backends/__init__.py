"""The backends: one module each (``cpu``, ``cuda``, ``hip``, ``xpu``, ``metal``), behind
one interface (``ptkit.backends.base.Backend``), listed in one table.

Everything that depends on the kind of native code asks this table: the recipe parser
(target syntax), the loader (coverage, runtime-major rule, torch's support), ``ptkit
select`` and the doctor (device kinds, coverage, the driver rule), the index (variant
properties), the repair and the audit (torch's and the vendor's libraries), the release
matrix, and CMake through ``python -m ptkit.backends`` (overrides and target resolution).
Standard library only.
"""

from __future__ import annotations

from ptkit.backends import cpu, cuda, hip, metal, xpu
from ptkit.backends.base import (
    Backend,
    Coverage,
    Device,
    Resolution,
    TargetError,
    TargetRequest,
    Versions,
    did_you_mean,
    version_pair,
)

__all__ = [
    "BACKENDS",
    "Backend",
    "Coverage",
    "Device",
    "Resolution",
    "TargetError",
    "TargetRequest",
    "UnknownBackendError",
    "Versions",
    "backend_for_device_kind",
    "backends_for_device_type",
    "get_backend",
    "version_pair",
]

# The table, in the order device kinds decide a variant (``ptkit select``): NVIDIA, AMD,
# Intel, Apple; the CPU first because every variant carries it.
BACKENDS: dict[str, Backend] = {
    module.BACKEND.name: module.BACKEND for module in (cpu, cuda, hip, xpu, metal)
}


class UnknownBackendError(ValueError):
    """A backend name that is not in ``BACKENDS``; the message lists them."""


def get_backend(name: str) -> Backend:
    """The backend called ``name``; ``UnknownBackendError`` with a did-you-mean."""
    backend = BACKENDS.get(name)
    if backend is None:
        raise UnknownBackendError(
            f"unknown backend {name!r}{did_you_mean(name, BACKENDS)}; expected one of "
            f"{', '.join(BACKENDS)}"
        )
    return backend


def backend_for_device_kind(kind: str) -> Backend:
    """The backend serving a kind of device the hardware probes find (``nvidia`` -> cuda)."""
    for backend in BACKENDS.values():
        if backend.device_kind == kind:
            return backend
    raise UnknownBackendError(f"no backend serves {kind!r} devices")


def backends_for_device_type(device_type: str) -> tuple[Backend, ...]:
    """The backends whose kernels serve a torch device type (``cuda``: CUDA and HIP)."""
    return tuple(b for b in BACKENDS.values() if b.device_type == device_type)
