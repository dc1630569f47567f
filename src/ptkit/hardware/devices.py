"""A machine's accelerators as the backends' rules take them: one ``ProbedDevice`` each,
with the label that ``ptkit select`` and the doctor print (``nvidia:0``, ``amd:1``,
``intel:0``, ``apple:0``) and the ``ptkit.backends.Device`` that ``Backend.coverage``
reads. One list for both, so they cannot label or count a device differently."""

from __future__ import annotations

import dataclasses

from ptkit.backends import Device
from ptkit.hardware.facts import AmdGpu, AppleGpu, IntelGpu, Machine, NvidiaGpu

__all__ = ["Gpu", "ProbedDevice", "probed_devices"]

Gpu = NvidiaGpu | AmdGpu | IntelGpu | AppleGpu


@dataclasses.dataclass(frozen=True)
class ProbedDevice:
    kind: str
    """The hardware kind (``nvidia``, ``amd``, ``intel``, ``apple``): a backend's ``device_kind``."""
    device: Device
    """Label, name, arch (``sm_90``, ``gfx942``, ``bmg``; None: unknown) and PCI device id."""
    gpu: Gpu
    """The probe's record, for what only that kind has (an Intel GPU's bound driver …)."""
    unsupported: str = ""
    """Why torch's backend for this kind cannot use the device at all ("" when it can)."""

    @property
    def label(self) -> str:
        """``nvidia:0`` (the NVML/nvidia-smi index), ``amd:1`` (the KFD node), ``intel:0``,
        ``apple:0`` (probe order): the OS's numbering, not torch's device indexes."""
        return self.device.label

    def describe(self) -> str:
        """``NVIDIA H200, sm_90``, or the name alone when the arch is unknown."""
        return f"{self.device.name}, {self.device.arch}" if self.device.arch else self.device.name


def _intel_unsupported(gpu: IntelGpu) -> str:
    if gpu.family:
        return ""
    return (
        f"PCI id 0x{gpu.pci_device_id:04x} is not an Intel GPU family PyTorch's XPU build "
        "supports (Arc, Data Center GPU Max, Core Ultra graphics)"
    )


def probed_devices(machine: Machine) -> tuple[ProbedDevice, ...]:
    """Every accelerator of ``machine``, NVIDIA first, then AMD, Intel, Apple."""
    devices = [
        ProbedDevice("nvidia", Device(f"nvidia:{g.index}", g.name, g.arch, g.pci_device_id), g)
        for g in machine.nvidia
    ]
    devices += [
        ProbedDevice("amd", Device(f"amd:{g.node}", g.name, g.gfx_target, g.pci_device_id), g)
        for g in machine.amd
    ]
    devices += [
        ProbedDevice(
            "intel",
            Device(f"intel:{i}", g.name, g.family, g.pci_device_id),
            g,
            _intel_unsupported(g),
        )
        for i, g in enumerate(machine.intel)
    ]
    devices += [
        ProbedDevice("apple", Device(f"apple:{i}", g.chip, None), g)
        for i, g in enumerate(machine.apple)
    ]
    return tuple(devices)
