"""The loader's decisions for HIP, XPU and Metal libraries, table-driven.

No AMD, Intel or Apple GPU exists on the machines that run this suite, so the
devices below are fakes standing for absent hardware: ``TorchFacts`` as a ROCm,
XPU or MPS build of torch would report them (target IDs, names and PCI ids of
real products).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ptkit.backends.hip import hip_coverage, parse_target_id
from ptkit.runtime.loader import TorchFacts, check_compatibility
from ptkit.loading.manifest import parse_manifest
from ptkit.loading.switches import RuntimeSwitches
from ptkit.backends.xpu import xpu_coverage, xpu_family

BASE = {
    "schema_version": 1,
    "package": "ptkit",
    "namespace": "ptkit",
    "dropped_targets": [],
    "torch": {"target_version": "2.13", "built_with": "2.14.1"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "sha256": "0" * 64,
}
HIP = parse_manifest(
    {
        **BASE,
        "library": "libptkit_hip.so",
        "backend": "hip",
        "variant": "rocm7.14",
        "toolkit": {"name": "hip", "version": "7.14.0"},
        "targets": {"gfx": ["gfx942", "gfx950", "gfx1100", "gfx1201"]},
    },
    Path("/pkg/_native/ptkit_hip.manifest.json"),
)
XPU = parse_manifest(
    {
        **BASE,
        "library": "libptkit_xpu.so",
        "backend": "xpu",
        "variant": "xpu",
        "toolkit": {"name": "oneapi", "version": "2025.1.0"},
        "targets": {"xpu": ["pvc", "bmg"]},
    },
    Path("/pkg/_native/ptkit_xpu.manifest.json"),
)
METAL = parse_manifest(
    {
        **BASE,
        "library": "ptkit_metal.metal",
        "backend": "metal",
        "variant": "metal",
        "toolkit": {"name": "metal", "version": "source"},
        "targets": {"metal": ["source"]},
        "platform": "darwin-arm64",
    },
    Path("/pkg/_native/ptkit_metal.manifest.json"),
)

CUDA_TORCH = TorchFacts("2.14.1+cu130", cuda="13.0", hip=None, has_xpu=False, has_mps=False)
ROCM_TORCH = TorchFacts("2.14.1+rocm7.14", cuda=None, hip="7.14.0", has_xpu=False, has_mps=False)
MI300X = dataclasses.replace(ROCM_TORCH, hip_devices=("gfx942:sramecc+:xnack-",) * 8)
MI250X = dataclasses.replace(ROCM_TORCH, hip_devices=("gfx90a:sramecc+:xnack-",))
RX7900 = dataclasses.replace(ROCM_TORCH, hip_devices=("gfx1100",))
ROCM6_MI300X = dataclasses.replace(MI300X, version="2.14.1+rocm6.4", hip="6.4.1")
XPU_TORCH = TorchFacts("2.14.1+xpu", cuda=None, hip=None, has_xpu=True, has_mps=False)
XPU_NO_DEVICE = XPU_TORCH
MAX_1550 = dataclasses.replace(
    XPU_TORCH, xpu_available=True, xpu_devices=(("Intel(R) Data Center GPU Max 1550", 0x0BD5),)
)
ARC_B580 = dataclasses.replace(
    XPU_TORCH, xpu_available=True, xpu_devices=(("Intel(R) Arc(TM) B580 Graphics", 0xE20B),)
)
ARC_A770 = dataclasses.replace(
    XPU_TORCH, xpu_available=True, xpu_devices=(("Intel(R) Arc(TM) A770 Graphics", 0x56A0),)
)
MAC_TORCH = TorchFacts("2.14.1", cuda=None, hip=None, has_xpu=False, has_mps=True)
MAC_M3 = dataclasses.replace(MAC_TORCH, mps_available=True)


@pytest.mark.parametrize(
    ("manifest", "facts", "platform", "expected"),
    [
        # HIP
        (HIP, CUDA_TORCH, "linux-x86_64", "torch 2.14.1+cu130 is not a ROCm build"),
        (HIP, ROCM_TORCH, "linux-x86_64", None),  # no GPU visible: loads, devices none
        (HIP, MI300X, "linux-x86_64", None),
        (HIP, RX7900, "linux-x86_64", None),
        (
            HIP,
            MI250X,
            "linux-x86_64",
            "cuda:0: gfx90a:sramecc+:xnack- is not covered: built for gfx942",
        ),
        (HIP, ROCM6_MI300X, "linux-x86_64", "the HIP major versions differ"),
        (
            dataclasses.replace(HIP, targets={"gfx": ("gfx11-generic",)}),
            dataclasses.replace(ROCM_TORCH, hip_devices=("gfx1101",)),
            "linux-x86_64",
            None,
        ),
        (
            dataclasses.replace(HIP, torch_target_version=(2, 13)),
            dataclasses.replace(MI300X, version="2.12.0+rocm7.14"),
            "linux-x86_64",
            "needs torch >= 2.13",
        ),
        # XPU
        (XPU, CUDA_TORCH, "linux-x86_64", "was built without XPU support"),
        (XPU, XPU_NO_DEVICE, "linux-x86_64", "no XPU device is available"),
        (XPU, MAX_1550, "linux-x86_64", None),
        (XPU, ARC_B580, "linux-x86_64", None),
        (
            XPU,
            ARC_A770,
            "linux-x86_64",
            "xpu:0: Intel(R) Arc(TM) A770 Graphics (dg2) is not covered",
        ),
        (
            dataclasses.replace(XPU, targets={"xpu": ("pvc", "bmg", "spir64")}),
            ARC_A770,
            "linux-x86_64",
            None,
        ),
        # Metal
        (METAL, CUDA_TORCH, "darwin-arm64", "was built without MPS support"),
        (METAL, MAC_TORCH, "darwin-arm64", "no MPS device is available"),
        (METAL, MAC_M3, "darwin-arm64", None),
        (METAL, MAC_M3, "linux-x86_64", "built for darwin-arm64, this machine is linux-x86_64"),
    ],
)
def test_accelerator_load_decisions(manifest, facts, platform, expected) -> None:  # type: ignore[no-untyped-def]
    reason = check_compatibility(manifest, facts, RuntimeSwitches(), platform)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


@pytest.mark.parametrize(
    ("device", "targets", "covered", "how"),
    [
        ("gfx942:sramecc+:xnack-", ("gfx942",), True, "code object gfx942"),
        ("gfx942:sramecc+:xnack-", ("gfx942:xnack-",), True, "code object gfx942:xnack-"),
        ("gfx942:sramecc+:xnack-", ("gfx942:xnack+",), False, "not covered"),
        ("gfx950", ("gfx9-4-generic",), True, "generic code object gfx9-4-generic"),
        ("gfx90a:sramecc+:xnack-", ("gfx9-generic", "gfx9-4-generic"), False, "not covered"),
        ("gfx1201", ("gfx12-generic",), True, "generic"),
        ("gfx1030", ("gfx1100", "gfx11-generic"), False, "built for gfx1100, gfx11-generic"),
    ],
)
def test_hip_target_id_matching(
    device: str, targets: tuple[str, ...], covered: bool, how: str
) -> None:
    coverage = hip_coverage(device, targets)
    assert coverage.covered is covered
    assert how in coverage.how


def test_target_id_parse_rejects_garbage() -> None:
    assert parse_target_id("gfx90a:sramecc+:xnack-") == (
        "gfx90a",
        {"sramecc": True, "xnack": False},
    )
    with pytest.raises(ValueError, match="not an AMD GPU target ID"):
        parse_target_id("sm_90")


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
