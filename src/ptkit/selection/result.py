"""What ``ptkit select`` answers: the chosen variant, each device and what covers it, the
install commands; ``to_json()`` is the ``--json`` document (``schema_version`` 1)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ptkit.hardware.facts import Machine
from ptkit.selection.commands import InstallCommands

__all__ = ["SCHEMA_VERSION", "DeviceReport", "Selection", "VariantCoverage"]

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class VariantCoverage:
    """Whether one variant's code runs on one device, and how (or why not)."""

    variant: str
    covered: bool
    how: str


@dataclasses.dataclass(frozen=True)
class DeviceReport:
    label: str
    """``nvidia:0``, ``amd:1`` (KFD node), ``intel:0``, ``apple:0``: not torch's indexes."""
    kind: str
    name: str
    arch: str | None
    """``sm_90``, ``gfx942``, ``bmg``; None when unknown."""
    counted: bool
    """Whether it took part in the choice (see ``note`` when not)."""
    note: str
    coverage: tuple[VariantCoverage, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.label,
            "kind": self.kind,
            "name": self.name,
            "arch": self.arch,
            "counted": self.counted,
            "note": self.note,
            "variants": {c.variant: {"covered": c.covered, "how": c.how} for c in self.coverage},
        }


@dataclasses.dataclass(frozen=True)
class Selection:
    variant: str
    backend: str
    source: str
    """``detected`` or ``PTKIT_VARIANT``."""
    reason: str
    devices: tuple[DeviceReport, ...]
    machine: Machine
    platform: str | None
    variant_index_url: str | None
    """``<index>/<index-path>/simple``; None without an index URL."""
    torch_index_url: str | None
    commands: InstallCommands | None
    """None without an index URL (there is no published default to assume)."""
    notes: tuple[str, ...]
    distribution: str = "ptkit-ops"
    """What the commands install."""
    build: str = ""
    """The chosen build's local label: the variant's (``cu13``), or a torch-mode
    variant's build for the environment's torch (``cpu.torch2.13``)."""
    torch: str | None = None
    """The torch the build was chosen for (the environment's); None: none."""

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "variant": self.variant,
            "distribution": self.distribution,
            "build": self.build,
            "torch": self.torch,
            "backend": self.backend,
            "source": self.source,
            "reason": self.reason,
            "platform": self.platform,
            "devices": [d.to_json() for d in self.devices],
            "variant_index_url": self.variant_index_url,
            "torch_index_url": self.torch_index_url,
            "commands": None
            if self.commands is None
            else {"pip": self.commands.pip, "uv": self.commands.uv},
            "notes": list(self.notes),
            "machine": self.machine.to_json(),
        }
