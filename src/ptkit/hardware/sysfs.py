"""Reading sysfs and procfs under a root path, without ever raising.

Every path is taken relative to ``root`` (``/`` on a real machine, a recorded tree in
the tests). A missing file is an ordinary answer (``None``); a file that cannot be read
or holds something unexpected becomes a problem string naming the file, what was
expected and what was there.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

__all__ = ["PciDevice", "normalize_bus_id", "pci_devices", "read_hex", "read_text", "under"]

# sysfs and procfs files of interest are a few hundred bytes; a bigger one is garbage
# (or a device that never ends) and is cut here rather than read whole.
_READ_LIMIT = 64 * 1024
PCI_DEVICES = "sys/bus/pci/devices"


def under(root: Path, relative: str) -> Path:
    """``relative`` (an absolute system path without its leading ``/``) below ``root``."""
    return root / relative.lstrip("/")


def _shown(path: Path, root: Path) -> str:
    """The path as it is on the probed system (``/proc/…``), whatever the root."""
    try:
        return "/" + path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def read_text(path: Path, root: Path, problems: list[str]) -> str | None:
    """The file's text, None when it does not exist; unreadable -> None and a problem."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_READ_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{_shown(path, root)}: cannot be read ({exc.strerror or exc})")
        return None
    return data.decode("utf-8", errors="replace")


def read_hex(path: Path, root: Path, problems: list[str]) -> int | None:
    """A sysfs hex id (``0x10de``); None when absent or not a hex number (a problem)."""
    text = read_text(path, root, problems)
    if text is None:
        return None
    value = text.strip()
    try:
        if not value.lower().startswith("0x"):
            raise ValueError(value)
        return int(value, 16)
    except ValueError:
        problems.append(f"{_shown(path, root)}: expected a hex id like 0x10de, got {value[:40]!r}")
        return None


def _driver_name(device_dir: Path) -> str | None:
    """The bound driver: sysfs's ``driver`` is a link to ``…/bus/pci/drivers/<name>``."""
    link = device_dir / "driver"
    try:
        return Path(os.readlink(link)).name or None
    except OSError:  # absent (no driver bound) or not a link
        return None


@dataclasses.dataclass(frozen=True)
class PciDevice:
    bus_id: str
    """``0000:18:00.0``."""
    vendor: int
    device: int
    class_code: int
    """24 bits: base class, subclass, programming interface (``0x030200`` = 3D controller)."""
    driver: str | None

    @property
    def base_class(self) -> int:
        return self.class_code >> 16


def normalize_bus_id(bus_id: str) -> str:
    """``00000000:18:00.0`` (nvidia-smi, NVML) -> ``0000:18:00.0`` (sysfs), lower case."""
    text = bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if sep and rest.count(":") == 1 and len(domain) > 4:
        domain = domain[-4:]
    return f"{domain}{sep}{rest}"


def pci_devices(root: Path, problems: list[str]) -> list[PciDevice]:
    """Every PCI function sysfs lists, sorted by bus id; none when there is no sysfs
    (macOS, Windows, some containers), which is not a problem."""
    base = under(root, PCI_DEVICES)
    try:
        entries = sorted(base.iterdir(), key=lambda p: p.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(f"/{PCI_DEVICES}: cannot be listed ({exc.strerror or exc})")
        return []
    devices = []
    for entry in entries:
        vendor = read_hex(entry / "vendor", root, problems)
        device = read_hex(entry / "device", root, problems)
        class_code = read_hex(entry / "class", root, problems)
        if vendor is None or device is None or class_code is None:
            continue
        devices.append(
            PciDevice(normalize_bus_id(entry.name), vendor, device, class_code, _driver_name(entry))
        )
    return devices
