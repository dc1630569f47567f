"""``ptkit.hardware.devices``: a machine's accelerators as the backends' rules take them,
with the labels ``ptkit select`` and the doctor both print (recorded machine trees)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ptkit.backends import Device
from ptkit.hardware import IntelGpu, PlatformFacts, detect, probed_devices

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "machines"
LINUX = PlatformFacts("Linux", "x86_64")


def devices_of(name: str, facts: PlatformFacts = LINUX) -> list[tuple[str, str, Device, str]]:
    machine = detect(MACHINES / name, commands=False, platform_facts=facts, nvml=False)
    return [(d.kind, d.label, d.device, d.unsupported) for d in probed_devices(machine)]


def test_nvidia_gpus_by_index_with_their_sass_target() -> None:
    assert devices_of("h200") == [
        ("nvidia", "nvidia:0", Device("nvidia:0", "NVIDIA H200", "sm_90", 0x2335), ""),
        ("nvidia", "nvidia:1", Device("nvidia:1", "NVIDIA H200", "sm_90", 0x2335), ""),
    ]


def test_amd_gpus_by_kfd_node() -> None:
    assert [(label, device.arch) for _, label, device, _ in devices_of("mi300x")] == [
        ("amd:1", "gfx942"),
        ("amd:2", "gfx942"),
    ]


def test_intel_gpus_by_family_and_one_of_no_xpu_family_is_unsupported() -> None:
    ((kind, label, device, unsupported),) = devices_of("arc_b580")
    assert (kind, label, device.arch, unsupported) == ("intel", "intel:0", "bmg", "")
    machine = detect(MACHINES / "arc_b580", commands=False, platform_facts=LINUX)
    uhd = IntelGpu("0000:00:02.0", 0xA780, "Intel GPU 0xa780", None, "i915")
    (probed,) = probed_devices(dataclasses.replace(machine, intel=(uhd,)))
    assert probed.unsupported.startswith(
        "PCI id 0xa780 is not an Intel GPU family PyTorch's XPU build supports"
    )
    assert probed.describe() == "Intel GPU 0xa780"


def test_apple_silicon_and_no_gpu() -> None:
    ((kind, label, device, _),) = devices_of("no_gpu", PlatformFacts("Darwin", "arm64", "Apple M3"))
    assert (kind, label, device) == ("apple", "apple:0", Device("apple:0", "Apple M3", None))
    assert devices_of("no_gpu") == []
