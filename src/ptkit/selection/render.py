"""``ptkit select``'s human report: each device and what covers it, the choice, the
commands, and what the probes could not read."""

from __future__ import annotations

from ptkit.hardware.facts import Machine
from ptkit.selection.result import Selection

__all__ = ["render_text"]


def _machine_line(machine: Machine) -> str:
    parts = [f"{machine.system} {machine.machine}"]
    if machine.nvidia_driver or machine.cuda_driver_version:
        cuda = machine.cuda_driver_version
        cuda_text = (
            f"CUDA {cuda[0]}.{cuda[1]} from {machine.cuda_driver_source}"
            if cuda
            else "CUDA version unknown"
        )
        parts.append(f"NVIDIA driver {machine.nvidia_driver or 'unknown'} ({cuda_text})")
    return "; ".join(parts)


def render_text(selection: Selection) -> str:
    lines = [f"Machine: {_machine_line(selection.machine)}"]
    if selection.devices:
        lines.append("Devices:")
        for device in selection.devices:
            arch = f"  {device.arch}" if device.arch else ""
            lines.append(f"  {device.label}  {device.name}{arch}")
            if device.note:
                lines.append(f"      ({device.note})")
            for cov in device.coverage:
                lines.append(
                    f"      {cov.variant}: {'covered' if cov.covered else 'not covered'}, {cov.how}"
                )
    else:
        lines.append("Devices: no GPU found")
    lines.append(f"Variant: {selection.variant} ({selection.source})")
    lines.append(f"  {selection.reason}")
    if selection.build and selection.build != selection.variant:
        lines.append(f"Build: {selection.distribution} +{selection.build}")
    for note in selection.notes:
        lines.append(f"  note: {note}")
    if selection.commands is None:
        lines.append(
            "Install: pass --index-url <ptkit index> (or set PTKIT_INDEX_URL) to print the "
            f"pip and uv commands for {selection.variant}"
        )
    else:
        lines.append("Install with uv (takes each package from the first index that has it):")
        lines.append(f"  {selection.commands.uv}")
        lines.append("Install with pip (merges the indexes, takes the highest version):")
        lines.append(f"  {selection.commands.pip}")
    if selection.machine.problems:
        lines.append("Problems while probing:")
        lines.extend(f"  - {problem}" for problem in selection.machine.problems)
    return "\n".join(lines) + "\n"
