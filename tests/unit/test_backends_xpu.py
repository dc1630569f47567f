"""The XPU backend: Intel GPU families from PCI ids or names, AOT code and the SPIR-V
fallback. The devices are fakes standing for absent hardware (names and PCI ids of
real products)."""

from __future__ import annotations

import pytest

from ptkit.backends import BACKENDS, Device
from ptkit.backends.xpu import xpu_family

XPU = BACKENDS["xpu"]


def xpu_coverage(name, device_id, targets):  # type: ignore[no-untyped-def]
    return XPU.coverage(Device("xpu:0", name, None, device_id), {"xpu": targets})


@pytest.mark.parametrize(
    ("name", "device_id", "family"),
    [
        ("Intel(R) Data Center GPU Max 1100", 0x0BDA, "pvc"),
        ("Intel(R) Arc(TM) B580 Graphics", 0xE20B, "bmg"),
        ("Intel(R) Arc(TM) B570 Graphics", None, "bmg"),
        ("Intel(R) Arc(TM) A770 Graphics", 0x56A0, "dg2"),
        ("Intel(R) UHD Graphics 770", 0x4680, None),
    ],
)
def test_xpu_family_from_pci_id_or_name(
    name: str, device_id: int | None, family: str | None
) -> None:
    assert xpu_family(name, device_id) == family


def test_xpu_without_family_runs_only_with_spir64() -> None:
    uhd = ("Intel(R) UHD Graphics 770", 0x4680)
    assert not xpu_coverage(*uhd, ("pvc", "bmg")).covered
    assert "SPIR-V" in xpu_coverage(*uhd, ("pvc", "bmg", "spir64")).how
