"""PTK2xx: drivers and devices. The rules are the backends' (``ptkit.backends``): CUDA's
driver rule, the device kind each backend serves, whether a library's targets cover a
device; the devices and their labels are ``ptkit.hardware.probed_devices``' (what
``ptkit select`` prints)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ptkit.backends import Versions, backend_for_device_kind, version_pair
from ptkit.backends.cuda import driver_problem, min_driver_branch
from ptkit.doctor.checks.advice import PYTORCH_INSTALL, package_fix
from ptkit.doctor.checks.base import Problem, check
from ptkit.doctor.checks.packages import package_label
from ptkit.doctor.checks.torch_python import torch_label
from ptkit.doctor.model import LibraryFacts, PackageFacts, Severity, TorchInstall
from ptkit.hardware.devices import ProbedDevice, probed_devices
from ptkit.hardware.facts import Machine


@check(
    "PTK201",
    "nvidia-driver-too-old",
    Severity.ERROR,
    summary="the NVIDIA driver is missing or older than torch's CUDA needs",
    fix="install or upgrade the NVIDIA driver to the branch torch's CUDA needs, or install "
    f"a torch built for the CUDA the driver supports ({PYTORCH_INSTALL})",
)
def driver_too_old(torch: TorchInstall, machine: Machine) -> Iterator[Problem]:
    cuda = version_pair(torch.cuda)
    if torch.location is None or cuda is None or not machine.nvidia:
        return
    problem = driver_problem(
        torch_label(torch),
        cuda[0],
        machine.nvidia_driver,
        machine.cuda_driver_version,
    )
    if problem is None:
        return
    branch = min_driver_branch(cuda[0])
    driver = f"the NVIDIA driver >= {branch}" if branch else f"a driver for CUDA {cuda[0]}.x"
    have = machine.cuda_driver_version
    other_torch = f"a torch built for CUDA {have[0]}.x" if have else "a CPU build of torch"
    yield Problem(
        f"{problem} (for the {len(machine.nvidia)} NVIDIA GPU(s) here, from "
        f"{machine.cuda_driver_source or 'no driver'}): torch.cuda.is_available() is False",
        f"install {driver} (then reboot or load the nvidia module), or install {other_torch} "
        f"({PYTORCH_INSTALL})",
    )


def _coverage(
    probed: ProbedDevice, libraries: Sequence[LibraryFacts], machine: Machine
) -> str | None:
    """Why none of ``libraries`` runs on the device (the backends' coverage rule, the
    loader's), or None when one does or it cannot be known (an NVIDIA GPU of unknown
    compute capability: PTK902 shows why)."""
    backend = backend_for_device_kind(probed.kind)
    mine = [lib for lib in libraries if lib.backend == backend.name]
    if not mine:
        return f"it has no {backend.title} library"
    if probed.device.arch is None and backend.target_field is not None:
        return None
    hows = []
    for lib in mine:
        versions = Versions(version_pair(lib.toolkit), machine.cuda_driver_version)
        result = backend.coverage(probed.device, lib.targets, versions)
        if result.covered:
            return None
        hows.append(f"{lib.library}: {result.how}")
    return "; ".join(hows)


@check(
    "PTK202",
    "device-not-covered",
    Severity.WARNING,
    summary="a GPU that an installed package's libraries do not cover (their targets, the "
    "loader's rules)",
    fix="install the package's variant built for this GPU (for ptkit-ops: the one "
    "`ptkit select` names)",
)
def device_not_covered(machine: Machine, packages: Sequence[PackageFacts]) -> Iterator[Problem]:
    # Only devices torch's backend can use count (an Intel GPU of no XPU family does not).
    devices = [d for d in probed_devices(machine) if not d.unsupported]
    for package in packages:
        if not package.libraries:
            continue  # PTK301 says so; no native code means nothing to cover
        # One finding per package and reason, listing the devices it applies to.
        uncovered: dict[str, list[str]] = {}
        for probed in devices:
            why = _coverage(probed, package.libraries, machine)
            if why is not None:
                uncovered.setdefault(why, []).append(f"{probed.label} ({probed.describe()})")
        for why, labels in uncovered.items():
            yield Problem(
                f"{', '.join(labels)} not covered by the installed {package_label(package)} "
                f"({why}): its ops run their reference implementation there",
                package_fix(package, machine, "this GPU"),
            )
