"""The facts ``detect()`` records about a machine's accelerators: plain frozen records.

No policy lives here (which variant fits is ``ptkit.selection``'s business), so the
doctor can show the same facts. ``to_json()`` gives each record as JSON-ready data:
PCI ids as ``"0x2335"`` (the sysfs spelling), a compute capability as ``[9, 0]``.
"""

from __future__ import annotations

import dataclasses
import platform
from typing import Any

from ptkit.backends.cuda import sass_target

__all__ = ["AmdGpu", "AppleGpu", "IntelGpu", "Machine", "NvidiaGpu", "PlatformFacts"]


def _hex(value: int | None) -> str | None:
    return None if value is None else f"0x{value:04x}"


@dataclasses.dataclass(frozen=True)
class NvidiaGpu:
    """One NVIDIA GPU."""

    index: int
    """nvidia-smi/NVML's index when one of them answered, else the PCI order."""
    name: str
    pci_bus_id: str | None
    """``0000:18:00.0`` (lower case, four-digit domain, as sysfs spells it)."""
    pci_device_id: int | None
    compute_capability: tuple[int, int] | None
    source: str
    """Where the capability came from: ``nvml``, ``nvidia-smi``, ``pci-id table`` or ``unknown``."""

    @property
    def arch(self) -> str | None:
        """``sm_90`` for capability 9.0."""
        cc = self.compute_capability
        return None if cc is None else sass_target(cc)

    def to_json(self) -> dict[str, Any]:
        cc = self.compute_capability
        return {
            "index": self.index,
            "name": self.name,
            "pci_bus_id": self.pci_bus_id,
            "pci_device_id": _hex(self.pci_device_id),
            "compute_capability": None if cc is None else list(cc),
            "arch": self.arch,
            "source": self.source,
        }


@dataclasses.dataclass(frozen=True)
class AmdGpu:
    """One AMD GPU, as the KFD topology lists it (one node per GPU or partition)."""

    node: int
    """The KFD topology node number (node 0 is usually the CPU)."""
    name: str
    gfx_target: str
    """``gfx942``: the processor part of the target ID; KFD does not say xnack/sramecc."""
    pci_bus_id: str | None
    pci_device_id: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "name": self.name,
            "gfx_target": self.gfx_target,
            "pci_bus_id": self.pci_bus_id,
            "pci_device_id": _hex(self.pci_device_id),
        }


@dataclasses.dataclass(frozen=True)
class IntelGpu:
    """One Intel GPU (PCI display device of vendor 0x8086)."""

    pci_bus_id: str
    pci_device_id: int
    name: str
    family: str | None
    """The AOT family from ``ptkit.backends.xpu.xpu_family`` (``bmg``, ``pvc``…)."""
    driver: str | None
    """The kernel driver bound to it (``xe``, ``i915``), None when none is."""

    def to_json(self) -> dict[str, Any]:
        return {
            "pci_bus_id": self.pci_bus_id,
            "pci_device_id": _hex(self.pci_device_id),
            "name": self.name,
            "family": self.family,
            "driver": self.driver,
        }


@dataclasses.dataclass(frozen=True)
class AppleGpu:
    """The GPU of an Apple silicon Mac (MPS)."""

    chip: str
    """``Apple M2 Pro`` when sysctl said so, else ``Apple silicon (arm64)``."""

    def to_json(self) -> dict[str, Any]:
        return {"chip": self.chip}


@dataclasses.dataclass(frozen=True)
class PlatformFacts:
    """What ``platform`` says about the running system; tests inject their own."""

    system: str
    """``Linux``, ``Darwin``, ``Windows`` (``platform.system()``)."""
    machine: str
    """``x86_64``, ``aarch64``, ``arm64``, ``AMD64`` (``platform.machine()``)."""
    chip: str | None = None
    """Apple's chip name, when known without running anything."""

    @classmethod
    def current(cls) -> PlatformFacts:
        return cls(system=platform.system(), machine=platform.machine())


@dataclasses.dataclass(frozen=True)
class Machine:
    """Everything ``detect()`` found; ``problems`` says what it could not read, and why."""

    system: str
    machine: str
    nvidia_driver: str | None
    """The NVIDIA kernel driver's version (``580.65.06``), None when no driver is loaded."""
    cuda_driver_version: tuple[int, int] | None
    """The newest CUDA version the driver supports (``(13, 0)`` for driver 580)."""
    cuda_driver_source: str | None
    """``nvml``, ``nvidia-smi`` or ``driver table`` (a lower bound: see ``nvidia.py``)."""
    nvidia: tuple[NvidiaGpu, ...] = ()
    amd: tuple[AmdGpu, ...] = ()
    intel: tuple[IntelGpu, ...] = ()
    apple: tuple[AppleGpu, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def has_gpu(self) -> bool:
        return bool(self.nvidia or self.amd or self.intel or self.apple)

    def to_json(self) -> dict[str, Any]:
        cuda = self.cuda_driver_version
        return {
            "system": self.system,
            "machine": self.machine,
            "nvidia_driver": self.nvidia_driver,
            "cuda_driver_version": None if cuda is None else f"{cuda[0]}.{cuda[1]}",
            "cuda_driver_source": self.cuda_driver_source,
            "nvidia": [gpu.to_json() for gpu in self.nvidia],
            "amd": [gpu.to_json() for gpu in self.amd],
            "intel": [gpu.to_json() for gpu in self.intel],
            "apple": [gpu.to_json() for gpu in self.apple],
            "problems": list(self.problems),
        }
