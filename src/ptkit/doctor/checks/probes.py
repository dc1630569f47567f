"""PTK9xx: the doctor's own probes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ptkit.doctor.checks.base import Problem, check
from ptkit.doctor.model import Severity
from ptkit.hardware.facts import Machine


def _problem_fix(problem: str) -> str:
    text = problem.lower()
    if "nvidia-smi" in text and ("no answer" in text or "timed out" in text):
        return (
            "nvidia-smi hangs: the driver or a GPU is stuck; check `dmesg`, reset the GPU "
            "(nvidia-smi -r) or reboot; the doctor used /proc and PCI ids instead"
        )
    if "nvidia-smi" in text:
        return (
            "nvidia-smi answers garbage: check `command -v nvidia-smi` (a wrapper or stale "
            "copy on PATH?) and reinstall the NVIDIA driver utilities"
        )
    if "nvml" in text:
        return "NVML failed: reinstall nvidia-ml-py or the NVIDIA driver; check `dmesg`"
    if "no answer" in text or "timed out" in text or "timeout" in text:
        return "a probe hung: rerun with a larger --timeout, and find what blocks it"
    if "does not list it" in text or "dmesg" in text:
        return "see the kernel log (dmesg) for why the driver left the GPU out"
    return "look at the named file or command; rerun with PTKIT_DEBUG=1 for details"


@check(
    "PTK901",
    "probe-failed",
    Severity.WARNING,
    summary="one of the doctor's probes failed or timed out",
    fix="rerun with a larger --timeout if it timed out; rerun with PTKIT_DEBUG=1 for details",
)
def probe_failed(probe_problems: Mapping[str, str]) -> Iterator[Problem]:
    for name, problem in sorted(probe_problems.items()):
        yield Problem(
            f"the doctor's {name} probe failed: {problem}; its facts are missing and the "
            "checks that need them were skipped",
            _problem_fix(f"{name} {problem}"),
        )


@check(
    "PTK902",
    "hardware-probe-problem",
    Severity.WARNING,
    summary="the accelerator probes hit a problem (nvidia-smi hung or printed garbage …)",
    fix="look at the named file or command; rerun with PTKIT_DEBUG=1 for details",
)
def hardware_problem(machine: Machine) -> Iterator[Problem]:
    for problem in machine.problems:
        yield Problem(f"accelerator probe: {problem}", _problem_fix(problem))
