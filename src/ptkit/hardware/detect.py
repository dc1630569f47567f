"""``detect()``: the machine's accelerators, from files under a root path and, on the
real machine, NVML and a few commands with timeouts. Never imports torch, never raises
because of what it reads, never waits past its timeouts."""

from __future__ import annotations

from pathlib import Path

from ptkit.hardware.amd import probe_amd
from ptkit.hardware.facts import AppleGpu, Machine, PlatformFacts
from ptkit.hardware.intel import probe_intel
from ptkit.hardware.nvidia import probe_nvidia
from ptkit.hardware.sysfs import pci_devices
from ptkit.platforms.commands import run_command

__all__ = ["detect"]


def _apple(
    facts: PlatformFacts, *, ask_sysctl: bool, timeout_s: float, problems: list[str]
) -> tuple[AppleGpu, ...]:
    """Apple silicon has an MPS GPU; an Intel Mac's GPU is not one torch supports."""
    if facts.system != "Darwin" or facts.machine != "arm64":
        return ()
    chip = facts.chip
    if chip is None and ask_sysctl:
        result = run_command(["sysctl", "-n", "machdep.cpu.brand_string"], timeout_s)
        if result.problem:
            problems.append(result.problem)
        if result.ok and result.output and result.output.strip():
            chip = result.output.strip().splitlines()[0][:80]
    return (AppleGpu(chip or "Apple silicon (arm64)"),)


def detect(
    root: Path = Path("/"),
    *,
    commands: bool = True,
    timeout_s: float = 3.0,
    platform_facts: PlatformFacts | None = None,
    nvml: bool | None = None,
) -> Machine:
    """What accelerators the machine at ``root`` has.

    ``root``: where ``/proc`` and ``/sys`` are read from (a recorded tree in tests).
    ``commands``: whether to run nvidia-smi (and sysctl on macOS); each run is killed
    after ``timeout_s`` seconds. ``platform_facts``: the OS and CPU architecture
    (default: this machine's). ``nvml``: whether to ask NVML (default: only when
    ``root`` is ``/``, since NVML describes the running machine, whatever the root).
    Whatever goes wrong is recorded in ``Machine.problems``.
    """
    problems: list[str] = []
    real_root = root == Path("/")
    facts = platform_facts or PlatformFacts.current()
    pci = pci_devices(root, problems)
    nvidia = probe_nvidia(
        root,
        pci,
        use_nvml=real_root if nvml is None else nvml,
        commands=commands,
        timeout_s=timeout_s,
        problems=problems,
    )
    amd = probe_amd(root, pci, problems)
    intel = probe_intel(pci)
    apple = _apple(
        facts,
        ask_sysctl=commands and platform_facts is None,
        timeout_s=timeout_s,
        problems=problems,
    )
    return Machine(
        system=facts.system,
        machine=facts.machine,
        nvidia_driver=nvidia.driver,
        cuda_driver_version=nvidia.cuda_driver_version,
        cuda_driver_source=nvidia.cuda_driver_source,
        nvidia=nvidia.gpus,
        amd=amd,
        intel=intel,
        apple=apple,
        problems=tuple(dict.fromkeys(problems)),  # once each, in order
    )
