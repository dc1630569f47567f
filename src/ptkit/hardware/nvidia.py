"""NVIDIA GPUs and driver, without torch.

In order of trust:

1. NVML (``pynvml`` from ``nvidia-ml-py``, only when it is installed and only on the
   real root): driver version, the CUDA version it supports, each GPU's name, bus id and
   compute capability. Run in a thread with a timeout.
2. ``nvidia-smi --query-gpu=…`` (when ``commands``): the same per GPU; plain
   ``nvidia-smi``'s header gives the CUDA version.
3. Files: ``/proc/driver/nvidia/version`` (the kernel module's version; its presence
   means the driver is loaded), ``/proc/driver/nvidia/gpus/<bus>/information`` (the
   model name), and sysfs's PCI devices, whose device id gives the compute capability
   of the GPUs in ``KNOWN_GPUS``; the CUDA version then comes from the driver-branch table (``ptkit.backends.cuda``).

The PCI scan is the list of GPUs whatever answers: a GPU on the bus that NVML or
nvidia-smi does not list is recorded as a problem (excluded, or failed to initialise).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from ptkit.backends.cuda import cuda_version_for_driver
from ptkit.hardware.facts import NvidiaGpu
from ptkit.hardware.sysfs import PciDevice, normalize_bus_id, read_text, under
from ptkit.platforms.commands import run_command

__all__ = [
    "KNOWN_GPUS",
    "NVIDIA_VENDOR",
    "NvidiaFacts",
    "parse_driver_version",
    "probe_nvidia",
]

NVIDIA_VENDOR = 0x10DE
DRIVER_VERSION_FILE = "proc/driver/nvidia/version"
GPU_INFORMATION = "proc/driver/nvidia/gpus/{bus}/information"
SMI_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,name,pci.bus_id,compute_cap,driver_version",
    "--format=csv,noheader",
]

# PCI device id -> (name, compute capability), for when neither NVML nor nvidia-smi
# answers. Ids: the PCI ID Repository (pci.ids, vendor 10de) and NVIDIA's
# gpu-admin-tools (gpu/devid_names.py) for the Hopper parts; capabilities: NVIDIA's
# "CUDA GPUs" table (developer.nvidia.com/cuda-gpus). Only ids checked against those
# sources are listed: a missing one means "unknown", never a guess.
KNOWN_GPUS: dict[int, tuple[str, tuple[int, int]]] = {
    0x1E87: ("NVIDIA GeForce RTX 2080", (7, 5)),  # TU104 [GeForce RTX 2080]
    0x1EB8: ("NVIDIA Tesla T4", (7, 5)),  # TU104GL [Tesla T4]
    0x20B0: ("NVIDIA A100-SXM4-40GB", (8, 0)),  # GA100 [A100 SXM4 40GB]
    0x20B2: ("NVIDIA A100-SXM4-80GB", (8, 0)),  # GA100 [A100 SXM4 80GB]
    0x2684: ("NVIDIA GeForce RTX 4090", (8, 9)),  # AD102 [GeForce RTX 4090]
    0x2330: ("NVIDIA H100 80GB HBM3", (9, 0)),  # GH100 [H100 SXM5 80GB]
    0x2331: ("NVIDIA H100 PCIe", (9, 0)),  # GH100 [H100 PCIe]
    0x2335: ("NVIDIA H200", (9, 0)),  # GH100 [H200 SXM 141GB]
    0x233B: ("NVIDIA H200 NVL", (9, 0)),  # gpu-admin-tools: H200
    0x2901: ("NVIDIA B200", (10, 0)),  # GB100 [B200]
    0x2B85: ("NVIDIA GeForce RTX 5090", (12, 0)),  # GB202 [GeForce RTX 5090]
}

# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 …" (proprietary)
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build …"
_NVRM = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)\b")
_SMI_CUDA = re.compile(r"CUDA Version:\s*(\d+)\.(\d+)")
_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")
_CAPABILITY = re.compile(r"^(\d+)\.(\d+)$")


def parse_driver_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version``'s text, None if absent."""
    match = _NVRM.search(text)
    return match.group(1) if match else None


@dataclasses.dataclass(frozen=True)
class _Reported:
    """One GPU as NVML or nvidia-smi reports it."""

    index: int
    name: str
    bus_id: str | None
    device_id: int | None
    capability: tuple[int, int] | None


@dataclasses.dataclass(frozen=True)
class _Answer:
    source: str
    driver: str | None
    cuda: tuple[int, int] | None
    gpus: tuple[_Reported, ...]


@dataclasses.dataclass(frozen=True)
class NvidiaFacts:
    driver: str | None
    cuda_driver_version: tuple[int, int] | None
    cuda_driver_source: str | None
    gpus: tuple[NvidiaGpu, ...]


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _nvml_query(pynvml: ModuleType) -> _Answer:

    pynvml.nvmlInit()
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda_int = int(pynvml.nvmlSystemGetCudaDriverVersion())  # 13000 for 13.0
        gpus = []
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pci = pynvml.nvmlDeviceGetPciInfo(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                _Reported(
                    index=index,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    bus_id=normalize_bus_id(_text(pci.busId)),
                    device_id=int(pci.pciDeviceId) >> 16,  # device << 16 | vendor
                    capability=(int(major), int(minor)),
                )
            )
    finally:
        pynvml.nvmlShutdown()
    return _Answer("nvml", driver, (cuda_int // 1000, cuda_int % 1000 // 10), tuple(gpus))


def _nvml(timeout_s: float, problems: list[str]) -> _Answer | None:
    """NVML's answer, in a daemon thread so that a stuck driver cannot hang us."""
    try:
        # nvidia-ml-py, never a dependency: imported by name so that it stays optional.
        pynvml = importlib.import_module("pynvml")
    except Exception:  # not installed, or broken: NVML is optional
        return None
    result: list[_Answer] = []
    errors: list[str] = []

    def query() -> None:
        try:
            result.append(_nvml_query(pynvml))
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
            errors.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=query, name="ptkit-nvml", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        problems.append(f"NVML: no answer within {timeout_s:g} s")
        return None
    if errors:
        # No driver at all is the ordinary case on a machine without NVIDIA GPUs.
        if "LibraryNotFound" not in errors[0]:
            problems.append(f"NVML: {errors[0]}")
        return None
    return result[0] if result else None


def _parse_smi(output: str, problems: list[str]) -> _Answer | None:
    gpus = []
    driver = None
    for line in output.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit() or not _VERSION.match(fields[4]):
            problems.append(
                f"{' '.join(SMI_QUERY)}: expected 'index, name, bus id, capability, driver' "
                f"lines, got {line.strip()[:120]!r}"
            )
            return None
        index, name, bus_id, capability, driver = fields
        match = _CAPABILITY.match(capability)  # "[N/A]" from drivers without the field
        gpus.append(
            _Reported(
                index=int(index),
                name=name,
                bus_id=normalize_bus_id(bus_id) if bus_id.count(":") == 2 else None,
                device_id=None,
                capability=(int(match.group(1)), int(match.group(2))) if match else None,
            )
        )
    if not gpus:
        problems.append(f"{' '.join(SMI_QUERY)}: printed no GPU")
        return None
    return _Answer("nvidia-smi", driver, None, tuple(gpus))


def _smi(timeout_s: float, problems: list[str]) -> _Answer | None:
    query = run_command(SMI_QUERY, timeout_s)
    if query.problem:
        problems.append(query.problem)
    if not query.ok or query.output is None:
        return None
    answer = _parse_smi(query.output, problems)
    if answer is None:
        return None
    # The CUDA version is only in the plain report's header ("CUDA Version: 13.0").
    header = run_command(["nvidia-smi"], timeout_s)
    if header.problem:
        problems.append(header.problem)
    match = _SMI_CUDA.search(header.output or "") if header.ok else None
    cuda = (int(match.group(1)), int(match.group(2))) if match else None
    if header.ok and match is None:
        problems.append("nvidia-smi: no 'CUDA Version: X.Y' in its report header")
    return dataclasses.replace(answer, cuda=cuda)


def _model_name(root: Path, bus_id: str, problems: list[str]) -> str | None:
    """``Model:`` from the driver's per-GPU information file."""
    text = read_text(under(root, GPU_INFORMATION.format(bus=bus_id)), root, problems)
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Model" and value.strip():
            return value.strip()
    return None


def probe_nvidia(
    root: Path,
    pci: list[PciDevice],
    *,
    use_nvml: bool,
    commands: bool,
    timeout_s: float,
    problems: list[str],
) -> NvidiaFacts:
    """The NVIDIA driver and GPUs of the machine at ``root``."""
    on_bus = [d for d in pci if d.vendor == NVIDIA_VENDOR and d.base_class == 0x03]
    driver_text = read_text(under(root, DRIVER_VERSION_FILE), root, problems)
    kernel_driver = None
    if driver_text is not None:
        kernel_driver = parse_driver_version(driver_text)
        if kernel_driver is None:
            first = driver_text.strip().splitlines()[0][:120] if driver_text.strip() else ""
            problems.append(
                f"/{DRIVER_VERSION_FILE}: expected 'NVRM version: … Kernel Module  <version>', "
                f"got {first!r}"
            )

    answer = None
    # Only where a driver may be: NVML and nvidia-smi are slow to fail without one.
    if on_bus or kernel_driver or not pci:
        if use_nvml:
            answer = _nvml(timeout_s, problems)
        if answer is None and commands:
            answer = _smi(timeout_s, problems)

    driver = kernel_driver or (answer.driver if answer else None)
    if kernel_driver and answer and answer.driver and answer.driver != kernel_driver:
        problems.append(
            f"the NVIDIA kernel module is {kernel_driver} but {answer.source} reports "
            f"{answer.driver}: the user-space driver does not match the loaded module; "
            "reboot (or reload the nvidia module) after a driver upgrade"
        )
    cuda, cuda_source = (answer.cuda, answer.source) if answer and answer.cuda else (None, None)
    if cuda is None and driver is not None:
        cuda = cuda_version_for_driver(driver)
        cuda_source = "driver table" if cuda else None

    reported = {g.bus_id: g for g in answer.gpus} if answer else {}
    gpus: list[NvidiaGpu] = []
    for position, device in enumerate(on_bus):
        seen = reported.pop(device.bus_id, None)
        known = KNOWN_GPUS.get(device.device)
        if seen is not None and seen.capability is not None:
            capability, source = seen.capability, answer.source if answer else "unknown"
        elif known is not None:
            capability, source = known[1], "pci-id table"
        else:
            capability, source = None, "unknown"
        if answer is not None and seen is None:
            problems.append(
                f"{device.bus_id} (NVIDIA 0x{device.device:04x}) is on the PCI bus but "
                f"{answer.source} does not list it: the driver excluded it or failed to "
                "initialise it (see the kernel log, dmesg)"
            )
        name = (
            (seen.name if seen else None)
            or _model_name(root, device.bus_id, problems)
            or (known[0] if known else f"NVIDIA GPU 0x{device.device:04x}")
        )
        gpus.append(
            NvidiaGpu(
                index=seen.index if seen else position,
                name=name,
                pci_bus_id=device.bus_id,
                pci_device_id=device.device,
                compute_capability=capability,
                source=source,
            )
        )
    # GPUs the driver reports that sysfs does not show (Windows, no /sys in a container).
    for seen in reported.values():
        gpus.append(
            NvidiaGpu(
                index=seen.index,
                name=seen.name,
                pci_bus_id=seen.bus_id,
                pci_device_id=seen.device_id,
                compute_capability=seen.capability,
                source=answer.source if answer and seen.capability else "unknown",
            )
        )
    gpus.sort(key=lambda g: g.index)
    return NvidiaFacts(driver, cuda, cuda_source, tuple(gpus))
