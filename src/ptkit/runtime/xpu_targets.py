"""Does an XPU library's code run on an Intel GPU? AOT device families and the JIT fallback.

A SYCL library carries native code for the devices it was compiled ahead of time for
(``pvc``, ``bmg`` … the names ``icpx -fsycl-targets=spir64_gen -device`` takes) and,
with ``spir64``, SPIR-V that the driver compiles for any other Intel GPU at first use.
The device family is read from the PCI device id (``torch.xpu.get_device_properties``
``device_id``, or sysfs for ``ptkit select``), falling back to the marketing name.
"""

from __future__ import annotations

import dataclasses

__all__ = ["XpuCoverage", "xpu_coverage", "xpu_family"]

# PCI device-id ranges (inclusive) of each AOT family, from Intel's driver tables.
_FAMILY_IDS: tuple[tuple[str, int, int], ...] = (
    ("pvc", 0x0BD0, 0x0BDB),  # Data Center GPU Max (Ponte Vecchio)
    ("bmg", 0xE202, 0xE216),  # Arc B-series (Battlemage)
    ("dg2", 0x5690, 0x56C2),  # Arc A-series (Alchemist), Flex
    ("lnl", 0x6420, 0x64B0),  # Lunar Lake integrated Arc
    ("mtl", 0x7D40, 0x7DD5),  # Meteor Lake / Arrow Lake integrated Arc
)
_FAMILY_NAMES: tuple[tuple[str, str], ...] = (
    ("Max", "pvc"),
    ("Arc(TM) B", "bmg"),
    ("Arc(TM) A", "dg2"),
    ("Flex", "dg2"),
)


def xpu_family(name: str, device_id: int | None = None) -> str | None:
    """The AOT family (``pvc``, ``bmg``…) of a device, or None when unknown."""
    if device_id is not None:
        for family, low, high in _FAMILY_IDS:
            if low <= device_id <= high:
                return family
    for needle, family in _FAMILY_NAMES:
        if needle in name:
            return family
    return None


@dataclasses.dataclass(frozen=True)
class XpuCoverage:
    covered: bool
    how: str


def xpu_coverage(name: str, device_id: int | None, targets: tuple[str, ...]) -> XpuCoverage:
    """Whether the device can run a library whose manifest lists ``targets``."""
    family = xpu_family(name, device_id)
    if family is not None and family in targets:
        return XpuCoverage(True, f"AOT code for {family}")
    if "spir64" in targets:
        return XpuCoverage(
            True, f"SPIR-V (spir64), compiled by the driver at first use for {family or name}"
        )
    built = ", ".join(targets) or "no device"
    return XpuCoverage(
        False, f"{name} ({family or 'unknown family'}) is not covered: built for {built}"
    )
