"""What accelerators a machine has, found without importing torch.

``detect()`` reads sysfs/procfs (under a root path, so tests read recorded trees),
NVML when ``nvidia-ml-py`` is installed, and ``nvidia-smi`` with a timeout. It returns a
``Machine`` of frozen facts; anything it could not read is a problem string on it,
never an exception. ``ptkit select`` (``ptkit.selection``) decides a variant from these
facts; the doctor reports them. Standard library only.

Modules: ``facts`` (the records), ``sysfs`` (reads that never raise, the PCI scan),
``nvidia``, ``amd``, ``intel`` (one probe each; commands run through
``ptkit.platforms.commands``, with timeouts), ``detect`` (all of them, plus Apple silicon
from the platform), ``devices`` (the found accelerators as the backends' rules take
them, with their labels).
"""

from __future__ import annotations

from ptkit.hardware.detect import detect
from ptkit.hardware.devices import ProbedDevice, probed_devices
from ptkit.hardware.facts import AmdGpu, AppleGpu, IntelGpu, Machine, NvidiaGpu, PlatformFacts

__all__ = [
    "AmdGpu",
    "AppleGpu",
    "IntelGpu",
    "Machine",
    "NvidiaGpu",
    "PlatformFacts",
    "ProbedDevice",
    "detect",
    "probed_devices",
]
