"""Intel GPUs from sysfs's PCI devices (vendor 0x8086, display class), without torch.

The family (``bmg``, ``pvc``…) comes from the PCI device id through the same table the
runtime loader uses (``ptkit.backends.xpu.xpu_family``); the bound kernel
driver (``xe``, ``i915``) from the device's ``driver`` link.
"""

from __future__ import annotations

from ptkit.backends.xpu import xpu_family
from ptkit.hardware.facts import IntelGpu
from ptkit.hardware.sysfs import PciDevice

__all__ = ["INTEL_VENDOR", "probe_intel"]

INTEL_VENDOR = 0x8086

# PCI device id -> product name, from the PCI ID Repository (pci.ids, vendor 8086).
_NAMES: dict[int, str] = {
    0xE20B: "Intel Arc B580 Graphics",  # Battlemage G21 [Arc B580]
    0xE20C: "Intel Arc B570 Graphics",  # Battlemage G21 [Arc B570]
}


def probe_intel(pci: list[PciDevice]) -> tuple[IntelGpu, ...]:
    gpus = []
    for device in pci:
        if device.vendor != INTEL_VENDOR or device.base_class != 0x03:
            continue
        name = _NAMES.get(device.device, f"Intel GPU 0x{device.device:04x}")
        gpus.append(
            IntelGpu(
                pci_bus_id=device.bus_id,
                pci_device_id=device.device,
                name=name,
                family=xpu_family(name, device.device),
                driver=device.driver,
            )
        )
    return tuple(gpus)
