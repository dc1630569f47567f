"""NVIDIA GPUs: CUDA targets, their coverage rules, the toolkit and the driver.

Targets: ``sm_XY`` is SASS (``a``: arch-specific, ``f``: family-specific variants) and
``compute_XY`` is PTX. Coverage:

- SASS ``sm_XY`` runs on devices of the same major X with minor >= Y (``sm_90`` on 9.0;
  ``sm_120`` on 12.0 and 12.1). ``sm_XYa`` runs on X.Y only. ``sm_XYf`` runs on the
  family, like plain SASS.
- PTX ``compute_XY`` is JIT-compiled by the driver for any device with capability
  >= X.Y, provided the driver understands the PTX of the toolkit that produced it
  (driver CUDA version >= toolkit version). ``compute_XYa`` PTX runs on X.Y only.

Overrides: ``PTKIT_CUDA_ARCHS`` in ``TORCH_CUDA_ARCH_LIST`` style (``9.0;10.0+PTX;9.0a``,
entries separated by ``;`` or spaces, or architecture names such as ``Hopper``), replacing
a build's targets; ``TORCH_CUDA_ARCH_LIST`` itself (what setup.py builds read) does the
same when ``PTKIT_CUDA_ARCHS`` is not set, and the build says which one it used.

Removed targets are named as removed, with the last toolkit that builds them (CUDA 13.0
removed offline compilation for compute capabilities below 7.5 and renamed sm_101 to
sm_110), so that the fix is the right toolkit, not the one in use.

Drivers: a CUDA X.y runtime needs a driver of the branch that first supported X.0
(CUDA's minor-version compatibility), ``DRIVER_CUDA`` below.
"""

from __future__ import annotations

import dataclasses
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
    TargetRequest,
    ToolkitCandidate,
    TorchBuild,
    Versions,
    on_path,
    version_pair,
)

__all__ = [
    "DRIVER_CUDA",
    "TORCH_ARCH_LIST_VARIABLE",
    "CudaBackend",
    "CudaTarget",
    "cuda_version_for_driver",
    "driver_problem",
    "min_driver_branch",
    "parse_arch_list",
    "parse_cuda_target",
    "sass_target",
]

# The one spelling of a CUDA target (recipes, manifests, CMake's requests, nvcc's lists).
_TARGET = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")
# One entry of a TORCH_CUDA_ARCH_LIST-style string: 9.0, 10.0a, 12.0f, 12.0+PTX.
_ARCH_ENTRY = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")

# The oldest toolkit that builds each compute capability (CUDA release notes).
_FIRST_TOOLKIT: dict[int, str] = {
    90: "11.8",
    100: "12.8",
    101: "12.8",
    103: "12.9",
    107: "13.5",
    110: "13.0",
    120: "12.8",
    121: "12.9",
}
# Compute capabilities a toolkit no longer builds: the release that removed them and the
# last one that builds them (CUDA release notes: 13.0 removed offline compilation below
# 7.5, i.e. Maxwell, Pascal and Volta; 12.0 removed Kepler's 3.5 and 3.7; 11.0 3.0/3.2).
_REMOVED: tuple[tuple[range, str, str], ...] = (
    (range(50, 75), "13.0", "12.9"),
    (range(35, 38), "12.0", "11.8"),
    (range(30, 33), "11.0", "10.2"),
)
# Renamed: CUDA 13.0 calls Thor's capability 11.0 (sm_110); up to CUDA 12.9 it was sm_101.
_RENAMED: dict[int, tuple[int, str, str]] = {101: (110, "13.0", "12.9")}

# torch's own variable for the same thing (torch.utils.cpp_extension reads it): honoured
# when PTKIT_CUDA_ARCHS is not set, never silently ignored.
TORCH_ARCH_LIST_VARIABLE = "TORCH_CUDA_ARCH_LIST"
# The architecture names TORCH_CUDA_ARCH_LIST accepts, as the compute capabilities of the
# family's GPUs, PTX of the newest (as torch expands them).
_NAMED_ARCHITECTURES: dict[str, str] = {
    "Kepler": "3.5+PTX",
    "Kepler+Tesla": "3.7",
    "Maxwell": "5.0;5.2+PTX",
    "Maxwell+Tegra": "5.3",
    "Pascal": "6.0;6.1+PTX",
    "Volta": "7.0+PTX",
    "Volta+Tegra": "7.2",
    "Turing": "7.5+PTX",
    "Ampere": "8.0;8.6+PTX",
    "Ampere+Tegra": "8.7",
    "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX",
    "Blackwell": "10.0;10.3;12.0;12.1+PTX",
    "Blackwell+Tegra": "11.0",
    "Rubin": "10.7+PTX",
}

# Driver branch -> the newest CUDA version its drivers support, newest first: the
# minimum Linux driver of each CUDA toolkit release (CUDA Toolkit release notes, table
# "CUDA Toolkit and Corresponding Driver Versions"; 13.0 GA needs >= 580.65.06, 12.8
# >= 570.26 …). A branch between two rows gets the lower row, and one newer than the
# first row gets the first row: a lower bound, never more than the driver supports.
# NVML and nvidia-smi give the exact value and are asked first.
DRIVER_CUDA: tuple[tuple[int, tuple[int, int]], ...] = (
    (580, (13, 0)),
    (575, (12, 9)),
    (570, (12, 8)),
    (560, (12, 6)),
    (555, (12, 5)),
    (550, (12, 4)),
    (545, (12, 3)),
    (535, (12, 2)),
    (530, (12, 1)),
    (525, (12, 0)),
    (520, (11, 8)),
    (515, (11, 7)),
    (510, (11, 6)),
    (495, (11, 5)),
    (470, (11, 4)),
    (465, (11, 3)),
    (460, (11, 2)),
    (455, (11, 1)),
    (450, (11, 0)),
)


@dataclasses.dataclass(frozen=True)
class CudaTarget:
    kind: str  # "sm" (SASS) or "compute" (PTX)
    major: int
    minor: int
    suffix: str  # "", "a" or "f"

    @property
    def capability(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def base(self) -> str:
        """Without the a/f suffix: what ``nvcc --list-gpu-code`` lists."""
        return f"{self.kind}_{self.major}{self.minor}"


def parse_cuda_target(name: str) -> CudaTarget:
    match = _TARGET.match(name)
    if match is None:
        raise TargetError(
            f"not a CUDA target: {name!r} (expected sm_90, sm_90a, sm_100f or compute_120)"
        )
    kind, major, minor, suffix = match.groups()
    return CudaTarget(kind, int(major), int(minor), suffix)


def _moved(target: CudaTarget) -> tuple[str, str] | None:
    """Why a removed or renamed target is missing from a newer toolkit, and the fix; None
    for one that is not (it needs a newer toolkit instead)."""
    cc = target.major * 10 + target.minor
    name = f"{target.kind}_{cc}{target.suffix}"
    for capabilities, removed_in, last in _REMOVED:
        if cc in capabilities:
            return (
                f"was removed in CUDA {removed_in}; CUDA {last} is the last toolkit that builds it",
                f"build {name} with CUDA {last} (a variant whose recipe has [toolkit] version "
                f'= "{last}")',
            )
    if cc in _RENAMED:
        new, renamed_in, last = _RENAMED[cc]
        new_name = f"{target.kind}_{new}{target.suffix}"
        return (
            f"was renamed {new_name} in CUDA {renamed_in} (CUDA {last} is the last toolkit that "
            f"builds {name})",
            f"ask for {new_name} instead (the same GPUs)",
        )
    return None


def parse_arch_list(value: str, variable: str) -> tuple[str, ...]:
    """The targets of a ``TORCH_CUDA_ARCH_LIST``-style string (``9.0;10.0+PTX;9.0a``,
    ``8.0 8.6``, ``Hopper``): ``sm_90``, ``sm_100``, ``compute_100``, ``sm_90a``.
    ``TargetError`` naming ``variable`` for anything else."""
    where = f"{variable}={value!r}"
    if "," in value:
        raise TargetError(
            f"{where}: separate the entries with ';' or spaces, as TORCH_CUDA_ARCH_LIST "
            "does (9.0;10.0), not ','"
        )
    targets: list[str] = []
    for item in re.split(r"[;\s]+", value.strip()):
        if not item:
            continue
        if item == "native":
            raise TargetError(
                f"{where}: 'native' (the GPUs of the machine that builds) names no target a "
                "wheel is built for; write their compute capabilities (nvidia-smi "
                "--query-gpu=compute_cap), e.g. 9.0"
            )
        for entry in _NAMED_ARCHITECTURES.get(item, item).split(";"):
            match = _ARCH_ENTRY.match(entry)
            if match is None:
                raise TargetError(
                    f"{where}: {item!r} is not a compute capability (expected entries like "
                    "9.0, 10.0a, 12.0f or 12.0+PTX)"
                )
            cc = f"{match.group(1)}{match.group(2)}{match.group(3)}"
            targets.append(f"sm_{cc}")
            if match.group(4):
                targets.append(f"compute_{cc}")
    if not targets:
        raise TargetError(f"{where}: names no compute capability")
    return tuple(dict.fromkeys(targets))


def _arch(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def cuda_version_for_driver(version: str) -> tuple[int, int] | None:
    """The CUDA version a driver supports at least (``DRIVER_CUDA``); None before 450."""
    try:
        branch = int(version.split(".")[0])
    except ValueError:
        return None
    for first, cuda in DRIVER_CUDA:
        if branch >= first:
            return cuda
    return None


def min_driver_branch(cuda_major: int) -> int | None:
    """The oldest driver branch that supports CUDA ``cuda_major``.0 (13 -> 580): CUDA's
    minor-version compatibility lets every 13.x runtime run on a 13.0 driver."""
    branches = [branch for branch, cuda in DRIVER_CUDA if cuda[0] == cuda_major]
    return min(branches) if branches else None


def driver_problem(
    needs: str, cuda_major: int, driver: str | None, driver_cuda: tuple[int, int] | None
) -> str | None:
    """The driver rule, for ``select`` (a variant's toolkit) and the doctor (torch's CUDA):
    why the driver (version ``driver``, supporting CUDA ``driver_cuda``) cannot run CUDA
    ``cuda_major``.x code, or None. ``needs`` names what needs it (``cu13``, ``torch …``)."""
    branch = min_driver_branch(cuda_major)
    need = f"driver >= {branch}" if branch else f"a driver for CUDA {cuda_major}.x"
    if driver is None and driver_cuda is None:
        return (
            f"no NVIDIA driver is loaded (no /proc/driver/nvidia/version, no NVML or "
            f"nvidia-smi answer); {needs} needs {need}: install it"
        )
    if driver_cuda is None:
        return f"the CUDA version of NVIDIA driver {driver} is unknown; {needs} needs {need}"
    if driver_cuda < (cuda_major, 0):
        return (
            f"NVIDIA driver {driver or '?'} supports CUDA {driver_cuda[0]}.{driver_cuda[1]}; "
            f"{needs} (CUDA {cuda_major}.x) needs {need}: upgrade the NVIDIA driver"
        )
    return None


class CudaBackend(Backend):
    name = "cuda"
    title = "CUDA"
    device_type = "cuda"
    dispatch_key = "CUDA"
    device_kind = "nvidia"
    device_kind_title = "NVIDIA GPU"
    target_field = "cuda"
    target_example = "sm_90, sm_90a, sm_100f or compute_120"
    override_variable = "PTKIT_CUDA_ARCHS"
    release_platforms = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")
    runtime_libraries: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "linux": ("libtorch_cuda.so", "libc10_cuda.so", "libcudart.so.*"),
        "windows": ("torch_cuda.dll", "c10_cuda.dll", "cudart64_*.dll"),
    }
    toolkit_name = "cuda"
    compiler_name = "nvcc"
    target_pattern = _TARGET.pattern
    toolkit_search = (
        "PTKIT_CUDA_ROOT, then pip's nvidia/cu*/bin/nvcc on the build Python's path, then "
        "ptkit's toolchain cache (ptkit toolchain install), then nvcc on PATH with "
        "PTKIT_CUDA_USE_SYSTEM=1"
    )
    toolkit_fix = (
        "set PTKIT_CUDA_ROOT to a CUDA toolkit (the folder holding bin/nvcc), or "
        "PTKIT_CUDA_USE_SYSTEM=1 (CMake: -DPTKIT_CUDA_USE_SYSTEM=ON) for the system's nvcc"
    )
    cached_toolkits = True

    def toolkit_candidates(
        self, environ: Mapping[str, str], search_paths: Sequence[str]
    ) -> tuple[ToolkitCandidate, ...]:
        """``PTKIT_CUDA_ROOT``; else pip's ``nvidia/cu<major>/bin/nvcc`` (``nvidia-cuda-nvcc``,
        the recipes' toolkit) on the search paths, then in ptkit's toolchain cache
        (:mod:`ptkit.backends.toolchain_cache`), newest first; the system CUDA (nvcc on
        PATH) only with ``PTKIT_CUDA_USE_SYSTEM=1``: a system toolkit is usually older
        than the recipe's and lacks its newest targets."""
        explicit = environ.get("PTKIT_CUDA_ROOT", "").strip()
        if explicit:
            return (ToolkitCandidate(Path(explicit, "bin", "nvcc"), "PTKIT_CUDA_ROOT", True),)
        # One candidate per compiler: a cached toolchain may be on the search paths too
        # (ptkit build puts the recipe's own first).
        found: dict[Path, ToolkitCandidate] = {}
        for entry in [*search_paths, *self.cached_toolkit_paths(environ)]:
            site = Path(entry or ".").absolute()
            source = f"{self.toolkit_place(site, environ)} ({site})"
            for nvcc in self.pip_compilers(site):
                found.setdefault(nvcc, ToolkitCandidate(nvcc, source))
        if environ.get("PTKIT_CUDA_USE_SYSTEM", "").strip() not in ("", "0", "OFF", "off"):
            system = on_path("nvcc", environ)
            if system is not None:
                nvcc = system.resolve()
                found.setdefault(nvcc, ToolkitCandidate(nvcc, "system (PTKIT_CUDA_USE_SYSTEM)"))
        return tuple(found.values())

    def pip_compilers(self, site_packages: Path) -> list[Path]:
        """``nvidia/cu<major>/bin/nvcc`` (``nvidia-cuda-nvcc`` installs there), newest first."""
        return sorted(site_packages.glob("nvidia/cu*/bin/nvcc"), reverse=True)

    def release_toolkit_environment(
        self, site_packages: str, toolkit_version: str
    ) -> dict[str, str]:
        """``PTKIT_CUDA_ROOT`` at pip's ``nvidia/cu<major>`` (``nvidia-cuda-nvcc`` installs
        there) in a venv that is not the build's: the candidates above search the build's
        Python only."""
        major = toolkit_version.split(".")[0]
        return {"PTKIT_CUDA_ROOT": f"{site_packages}/nvidia/cu{major}"}

    def target_problem(self, target: str) -> str | None:
        if _TARGET.match(target):
            return None
        return f"{target!r} is not a CUDA target (expected {self.target_example})"

    def manifest_targets(self, targets: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return {
            "sass": tuple(t for t in targets if t.startswith("sm_")),
            "ptx": tuple(t for t in targets if t.startswith("compute_")),
        }

    def parse_override(self, value: str) -> tuple[str, ...]:
        """``9.0;10.0+PTX;9.0a`` -> sm_90, sm_100, compute_100, sm_90a."""
        return parse_arch_list(value, self.override_variable or "")

    def requested_targets(
        self,
        targets: Sequence[str],
        optional: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> TargetRequest:
        """``PTKIT_CUDA_ARCHS`` when set (it wins over ``TORCH_CUDA_ARCH_LIST``, and the
        note says so), else ``TORCH_CUDA_ARCH_LIST`` (the note says it replaced the
        recipe's targets), else the recipe's."""
        environ = environ or {}
        torch_list = environ.get(TORCH_ARCH_LIST_VARIABLE, "").strip()
        request = super().requested_targets(targets, optional, environ)
        if not torch_list:
            return request
        if request.source == self.override_variable:
            note = (
                f"{self.override_variable} wins over {TORCH_ARCH_LIST_VARIABLE}={torch_list!r} "
                "(both are set)"
            )
            return dataclasses.replace(request, note=note)
        asked = parse_arch_list(torch_list, TORCH_ARCH_LIST_VARIABLE)
        replaced = " ".join((*targets, *optional)) or "none"
        note = (
            f"{TORCH_ARCH_LIST_VARIABLE}={torch_list!r} replaces the recipe's targets ({replaced}); "
            f"{self.override_variable} would win over it"
        )
        return TargetRequest(asked, (), TORCH_ARCH_LIST_VARIABLE, note)

    def missing_target_fix(self, target: str, source: str) -> str:
        # A removed or renamed target needs another toolkit or another name, never the
        # toolkit in use.
        moved = _moved(parse_cuda_target(target))
        if moved is None:
            return ""
        if source == "recipe":
            return f"remove {target} from the recipe's targets.cuda, or {moved[1]}"
        return moved[1]

    def supports(self, target: str, supported: set[str]) -> bool:
        # nvcc lists base targets; an a/f variant exists wherever its base does.
        return parse_cuda_target(target).base in supported

    def missing_target_reason(self, target: str) -> str:
        parsed = parse_cuda_target(target)
        moved = _moved(parsed)
        if moved is not None:
            return moved[0]
        first = _FIRST_TOOLKIT.get(parsed.major * 10 + parsed.minor)
        return f"needs CUDA >= {first}" if first else "needs a newer CUDA toolkit"

    def coverage(
        self, device: Device, targets: Mapping[str, Sequence[str]], versions: Versions = NO_VERSIONS
    ) -> Coverage:
        if device.arch is None:
            return Coverage(False, f"{device.label}: its compute capability is unknown")
        capability = parse_cuda_target(device.arch).capability
        sass, ptx = tuple(targets.get("sass", ())), tuple(targets.get("ptx", ()))
        for name in sass:
            t = parse_cuda_target(name)
            exact = t.suffix == "a"
            if t.major == capability[0] and (
                t.minor == capability[1] if exact else t.minor <= capability[1]
            ):
                return Coverage(True, f"SASS {name}")
        ptx_targets = [parse_cuda_target(name) for name in ptx]
        jit = [
            t
            for t in ptx_targets
            if t.capability == capability or (t.suffix != "a" and t.capability < capability)
        ]
        if not jit:
            return Coverage(
                False, f"{_arch(capability)} is not covered: {self.describe_targets(targets)}"
            )
        best = max(jit, key=lambda t: t.capability)
        name = f"compute_{best.major}{best.minor}{best.suffix}"
        if versions.driver is None:
            return Coverage(
                False,
                f"{_arch(capability)} has no SASS here and the driver version is unknown, so "
                f"PTX {name} JIT is not assumed",
            )
        toolkit = versions.toolkit or (0, 0)
        if versions.driver < toolkit:
            return Coverage(
                False,
                f"{_arch(capability)} needs a JIT of PTX {name}, made by CUDA "
                f"{toolkit[0]}.{toolkit[1]}, but the driver supports CUDA "
                f"{versions.driver[0]}.{versions.driver[1]}; upgrade the NVIDIA driver",
            )
        return Coverage(True, f"PTX {name} (JIT by the driver)")

    def describe_targets(self, targets: Mapping[str, Sequence[str]]) -> str:
        sass, ptx = tuple(targets.get("sass", ())), tuple(targets.get("ptx", ()))
        built = (
            f"built for {sass[0]}…{sass[-1]}"
            if len(sass) > 1
            else f"built for {', '.join(sass) or 'no SASS'}"
        )
        return f"{built}, PTX {', '.join(ptx) or 'none'}"

    def sort_key(self, target: str) -> tuple[int, int, str]:
        """SASS before PTX, each by compute capability (sm_90 < sm_100)."""
        t = parse_cuda_target(target)
        return (0 if t.kind == "sm" else 1, t.major * 10 + t.minor, target)

    def listed_targets(self, text: str) -> tuple[str, ...]:
        """The targets in ``nvcc --list-gpu-code`` / ``--list-gpu-arch`` output, sorted."""
        found = {word for word in text.split() if _TARGET.match(word)}
        return tuple(sorted(found, key=self.sort_key))

    def torch_runtime(self, torch: TorchBuild) -> str | None:
        return torch.cuda

    def built_into(self, torch: TorchBuild) -> bool:
        return bool(torch.cuda)

    def torch_absent_reason(self, torch: TorchBuild) -> str | None:
        if torch.cuda:
            return None
        kind = f"a ROCm build (HIP {torch.hip})" if torch.hip else "not a CUDA build"
        return f"torch {torch.version} is {kind}"

    def variant_properties(self, targets: Sequence[str], toolkit_version: str) -> list[str]:
        major = version_pair(toolkit_version + ".0")
        if major is None:
            raise TargetError(
                f"[toolkit] version must be the CUDA version (13.5), got {toolkit_version!r}"
            )
        properties = [f"nvidia :: cuda_version_lower_bound :: {major[0]}"]
        for name in targets:
            t = parse_cuda_target(name)
            kind = "real" if t.kind == "sm" else "virtual"
            properties.append(f"nvidia :: sm_arch :: {t.major}{t.minor}_{kind}")
        return sorted(set(properties))


BACKEND = CudaBackend()


def sass_target(capability: tuple[int, int]) -> str:
    """``sm_90`` for compute capability 9.0: the SASS target of a device, in the spelling
    of recipes and manifests (what a probed GPU's ``arch`` is)."""
    return f"sm_{capability[0]}{capability[1]}"
