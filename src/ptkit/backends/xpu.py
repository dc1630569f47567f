"""Intel GPUs (XPU, SYCL): AOT device families and the SPIR-V fallback.

A SYCL library carries native code for the devices it was compiled ahead of time for
(``pvc``, ``bmg`` … the names ``icpx -fsycl-targets=spir64_gen -device`` takes) and,
with ``spir64``, SPIR-V that the driver compiles for any other Intel GPU at first use.
The device family is read from the PCI device id (``torch.xpu.get_device_properties``
``device_id``, or sysfs for ``ptkit select``), falling back to the marketing name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from ptkit.backends.base import (
    NO_VERSIONS,
    Backend,
    Coverage,
    Device,
    TargetError,
    ToolkitCandidate,
    TorchBuild,
    Versions,
    on_path,
)

__all__ = ["DEVICE_IPS", "XpuBackend", "xpu_family"]

_TARGET = re.compile(r"^[a-z][a-z0-9_.-]*$")
_JIT_TARGET = "spir64"

# PCI device-id ranges (inclusive) of each AOT family, from Intel's driver tables
# (Linux include/drm/intel/pciids.h, INTEL_<family>_IDS).
_FAMILY_IDS: tuple[tuple[str, int, int], ...] = (
    ("pvc", 0x0BD0, 0x0BDB),  # Data Center GPU Max (Ponte Vecchio)
    ("bmg", 0xE202, 0xE216),  # Arc B-series (Battlemage)
    ("dg2", 0x5690, 0x56C2),  # Arc A-series (Alchemist), Flex
    ("lnl", 0x6420, 0x64B0),  # Lunar Lake integrated Arc
    ("mtl", 0x7D40, 0x7DD5),  # Meteor Lake / Arrow Lake integrated Arc
    ("ptl", 0xB080, 0xB0B0),  # Panther Lake integrated Arc (INTEL_PTL_IDS)
)
_FAMILY_NAMES: tuple[tuple[str, str], ...] = (
    ("Max", "pvc"),
    ("Arc(TM) B", "bmg"),
    ("Arc(TM) A", "dg2"),
    ("Flex", "dg2"),
)
# AOT device name (ocloc's -device) -> GT GMDID ("device IP"), as `ocloc ids` prints and
# Intel's variant provider reports (devices sharing a base platform also report the base
# platform's id, so the base id is enough).
DEVICE_IPS: dict[str, str] = {
    "pvc": "12.60.7",  # Data Center GPU Max (Ponte Vecchio)
    "dg2": "12.55.8",  # Arc A-series, Flex (Alchemist)
    "mtl": "12.70.4",  # Meteor Lake / Arrow Lake integrated
    "bmg": "20.1.0",  # Arc B-series (Battlemage)
    "lnl": "20.4.4",  # Lunar Lake integrated
    "ptl": "30.0.4",  # Panther Lake integrated
}


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


class XpuBackend(Backend):
    name = "xpu"
    title = "XPU"
    device_type = "xpu"
    dispatch_key = "XPU"
    device_kind = "intel"
    device_kind_title = "Intel GPU"
    target_field = "xpu"
    target_example = "pvc, bmg or spir64"
    release_platforms = ("manylinux_2_28_x86_64", "win_amd64")
    runtime_libraries: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "linux": ("libtorch_xpu.so", "libc10_xpu.so", "libsycl.so.*"),
        "windows": ("torch_xpu.dll", "c10_xpu.dll", "sycl*.dll"),
    }

    compiler_name = "icpx"
    target_pattern = _TARGET.pattern
    toolkit_search = "PTKIT_ICPX, then CMPLR_ROOT, ONEAPI_ROOT, /opt/intel/oneapi, PATH"
    toolkit_fix = (
        "install oneAPI's DPC++ compiler (apt intel-oneapi-compiler-dpcpp-cpp) and `source "
        "/opt/intel/oneapi/setvars.sh`, or set PTKIT_ICPX to icpx"
    )

    def toolkit_candidates(
        self, environ: Mapping[str, str], search_paths: Sequence[str]
    ) -> tuple[ToolkitCandidate, ...]:
        """``PTKIT_ICPX`` (the compiler itself); else ``CMPLR_ROOT``, ``ONEAPI_ROOT``,
        ``/opt/intel/oneapi``, PATH."""
        explicit = environ.get("PTKIT_ICPX", "").strip()
        if explicit:
            return (ToolkitCandidate(Path(explicit), "PTKIT_ICPX", True),)
        found: list[ToolkitCandidate] = []
        if environ.get("CMPLR_ROOT", "").strip():
            found.append(ToolkitCandidate(Path(environ["CMPLR_ROOT"], "bin", "icpx"), "CMPLR_ROOT"))
        if environ.get("ONEAPI_ROOT", "").strip():
            oneapi = Path(environ["ONEAPI_ROOT"], "compiler", "latest", "bin", "icpx")
            found.append(ToolkitCandidate(oneapi, "ONEAPI_ROOT"))
        default = Path("/opt/intel/oneapi/compiler/latest/bin/icpx")
        found.append(ToolkitCandidate(default, "/opt/intel/oneapi"))
        system = on_path("icpx", environ)
        if system is not None:
            found.append(ToolkitCandidate(system, "PATH"))
        return tuple(dict.fromkeys(found))

    def target_problem(self, target: str) -> str | None:
        if _TARGET.match(target):
            return None
        return f"{target!r} is not an Intel GPU device name (expected {self.target_example})"

    def coverage(
        self, device: Device, targets: Mapping[str, Sequence[str]], versions: Versions = NO_VERSIONS
    ) -> Coverage:
        built = tuple(targets.get("xpu", ()))
        family = device.arch or xpu_family(device.name, device.pci_device_id)
        if family is not None and family in built:
            return Coverage(True, f"AOT code for {family}")
        if _JIT_TARGET in built:
            return Coverage(
                True,
                f"SPIR-V (spir64), compiled by the driver at first use for {family or device.name}",
            )
        return Coverage(
            False,
            f"{device.name} ({family or 'unknown family'}) is not covered: built for "
            f"{', '.join(built) or 'no device'}",
        )

    def built_into(self, torch: TorchBuild) -> bool:
        return torch.has_xpu

    def torch_absent_reason(self, torch: TorchBuild) -> str | None:
        if not torch.has_xpu:
            return f"torch {torch.version} was built without XPU support"
        if not torch.xpu_available:
            return "no XPU device is available (torch.xpu.is_available() is False)"
        return None

    def variant_properties(self, targets: Sequence[str], toolkit_version: str) -> list[str]:
        ips: set[str] = set()
        for device in targets:
            if device == _JIT_TARGET:
                continue
            if device not in DEVICE_IPS:
                raise TargetError(
                    f"no Intel device IP (GMDID) is known for the AOT device {device!r} (known: "
                    f"{', '.join(sorted(DEVICE_IPS))}); add it to DEVICE_IPS in "
                    "src/ptkit/backends/xpu.py (`ocloc ids <device>` prints it)"
                )
            ips.add(DEVICE_IPS[device])
        return [f"intel :: device_ip :: {ip}" for ip in sorted(ips)]


BACKEND = XpuBackend()
