"""AMD GPUs from the KFD topology (``/sys/class/kfd/kfd/topology/nodes/<n>/``), without
torch or ROCm.

Each node's ``properties`` file holds ``key value`` lines as the amdkfd driver prints
them (``gfx_target_version 90402``, ``vendor_id 4098``, ``device_id 29857``,
``location_id 6400``, ``domain 0``…). ``gfx_target_version`` packs the GFX IP version
as major * 10000 + minor * 100 + stepping, the minor and stepping written in hex in the
target name: 90402 -> gfx942, 90010 -> gfx90a, 110000 -> gfx1100. CPU nodes have 0.
The ``name`` file holds the ASIC name (``ip discovery`` on IP-discovery parts such as
MI300X, so a small PCI-id table names those).
"""

from __future__ import annotations

from pathlib import Path

from ptkit.hardware.facts import AmdGpu
from ptkit.hardware.sysfs import PciDevice, read_text, under

__all__ = ["AMD_VENDOR", "KFD_NODES", "gfx_target", "probe_amd"]

AMD_VENDOR = 0x1002
KFD_NODES = "sys/class/kfd/kfd/topology/nodes"

# PCI device id -> product name, from the PCI ID Repository (pci.ids, vendor 1002),
# for parts whose KFD name is "ip discovery".
_NAMES: dict[int, str] = {
    0x74A1: "AMD Instinct MI300X",  # Aqua Vanjaram [Instinct MI300X]
    0x74A5: "AMD Instinct MI325X",  # Aqua Vanjaram [Instinct MI325X]
}


def gfx_target(version: int) -> str | None:
    """``90402`` -> ``gfx942``; None for 0 (a CPU node) or an impossible value."""
    major, minor, stepping = version // 10000, version // 100 % 100, version % 100
    if major == 0 or minor > 0xF or stepping > 0xF:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def _properties(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and value.strip().lstrip("-").isdigit():
            values[key] = int(value.strip())
    return values


def _bus_id(domain: int, location: int) -> str:
    """KFD's ``location_id`` is the PCI bus, device and function: bus << 8 | devfn."""
    return f"{domain:04x}:{location >> 8 & 0xFF:02x}:{location >> 3 & 0x1F:02x}.{location & 7}"


def _node_number(path: Path) -> int:
    return int(path.name) if path.name.isdigit() else 1 << 30


def probe_amd(root: Path, pci: list[PciDevice], problems: list[str]) -> tuple[AmdGpu, ...]:
    """The AMD GPUs KFD lists; an AMD GPU on the PCI bus without KFD is a problem."""
    base = under(root, KFD_NODES)
    try:
        nodes = sorted((p for p in base.iterdir() if p.name.isdigit()), key=_node_number)
    except FileNotFoundError:
        nodes = []
    except OSError as exc:
        problems.append(f"/{KFD_NODES}: cannot be listed ({exc.strerror or exc})")
        nodes = []
    gpus = []
    for node in nodes:
        text = read_text(node / "properties", root, problems)
        if text is None:
            continue
        props = _properties(text)
        version = props.get("gfx_target_version")
        if version is None:
            problems.append(
                f"/{KFD_NODES}/{node.name}/properties: expected a 'gfx_target_version <n>' "
                f"line, got {text.strip()[:80]!r}"
            )
            continue
        if version == 0:  # a CPU node
            continue
        target = gfx_target(version)
        if target is None:
            problems.append(
                f"/{KFD_NODES}/{node.name}/properties: gfx_target_version {version} is not "
                "a GFX version (expected e.g. 90402 for gfx942)"
            )
            continue
        device_id = props.get("device_id")
        kfd_name = (read_text(node / "name", root, problems) or "").strip()
        name = (
            kfd_name
            if kfd_name and kfd_name != "ip discovery"
            else _NAMES.get(device_id or -1, f"AMD GPU {target}")
        )
        location = props.get("location_id")
        gpus.append(
            AmdGpu(
                node=int(node.name),
                name=name,
                gfx_target=target,
                pci_bus_id=None if location is None else _bus_id(props.get("domain", 0), location),
                pci_device_id=device_id,
            )
        )
    if not gpus:
        for device in pci:
            if device.vendor == AMD_VENDOR and device.base_class in (0x03, 0x12):
                problems.append(
                    f"{device.bus_id} (AMD 0x{device.device:04x}) is on the PCI bus but the "
                    f"KFD topology (/{KFD_NODES}) lists no GPU: the amdgpu driver is not "
                    "loaded (or not built with KFD)"
                )
    return tuple(gpus)
