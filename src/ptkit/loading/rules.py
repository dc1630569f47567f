"""The loader's rules: may this library load here? Decided without torch and without
loading anything, so ``ptkit doctor`` gives the same verdict from facts it read off disk.

For each manifest, in order:

1. not switched off (``PTKIT_FORCE_REFERENCE``, ``PTKIT_DISABLE_NATIVE``);
2. built for this platform (``linux-x86_64`` …, ``ptkit.platforms``), and this CPU has
   the ISA levels the library requires (``REQUIRES_ISA``: ``ptkit.platforms`` reads what
   the CPU has);
3. this torch has the backend, the backend's runtime-major rule holds (a CUDA or HIP
   library loads only beside a torch built with the same major), and every visible
   device is covered by the library's targets (the backend's ``coverage``);
4. the torch ABI (``ptkit.torch_abi``): a stable-ABI library needs the same major
   version and torch >= its target version; a ``torch``-mode one (the classic C++ API)
   the torch major.minor it was built with, and the same C++ ABI;
5. the library file exists, its sha256 matches the manifest, and it is a complete
   library for this machine (the platform's ``library_problem``: ``dlopen`` of a
   truncated file can kill the process).

``ptkit.runtime.loader`` applies rule 6 (the load itself) where these pass.
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path

from ptkit.backends import Device, Versions, get_backend, version_pair
from ptkit.loading.manifest import (
    MANIFEST_SUFFIX,
    Manifest,
    ManifestError,
    file_sha256,
    find_manifests,
    kernel_libraries,
)
from ptkit.loading.record import recorded_sha256
from ptkit.loading.switches import RuntimeSwitches
from ptkit.platforms import CpuFacts, Platform, current_platform, manifest_platform, this_cpu

__all__ = [
    "LoadDecision",
    "LoadStatus",
    "TorchFacts",
    "check_compatibility",
    "decide_without_loading",
    "device_details",
    "listed_manifests",
    "torch_devices",
]


class LoadStatus(str, enum.Enum):
    LOADED = "loaded"
    SKIPPED = "skipped"  # the library cannot or should not run here: the reference serves
    FAILED = "failed"  # it should have loaded and did not: a broken install


@dataclasses.dataclass(frozen=True)
class LoadDecision:
    """What the loader did with one manifest, and why."""

    manifest_path: Path
    status: LoadStatus
    reason: str
    manifest: Manifest | None = None
    # Facts learned after loading (e.g. the CPU ISA level in use).
    details: tuple[tuple[str, str], ...] = ()

    @property
    def backend(self) -> str | None:
        return self.manifest.backend if self.manifest else None

    @property
    def library(self) -> str:
        return self.manifest.library if self.manifest else self.manifest_path.name


@dataclasses.dataclass(frozen=True)
class TorchFacts:
    """What the loader needs to know about the running torch and its devices
    (``ptkit.runtime.loader.torch_facts()`` asks torch; the doctor reads torch's files)."""

    version: str
    cuda: str | None
    hip: str | None
    has_xpu: bool
    has_mps: bool
    # Compute capability of each visible CUDA device, and the driver's CUDA version.
    cuda_devices: tuple[tuple[int, int], ...] = ()
    cuda_driver: tuple[int, int] | None = None
    # gfx target ID of each visible AMD GPU (gcnArchName, e.g. "gfx942:sramecc+:xnack-").
    hip_devices: tuple[str, ...] = ()
    # torch.xpu.is_available(), and (name, PCI device id) of each XPU device.
    xpu_available: bool = False
    xpu_devices: tuple[tuple[str, int | None], ...] = ()
    # torch.backends.mps.is_available(): an Apple GPU this torch can use.
    mps_available: bool = False
    # torch._C._GLIBCXX_USE_CXX11_ABI (libstdc++ builds); None: unknown or not applicable.
    cxx11_abi: bool | None = None

    @property
    def major_minor(self) -> tuple[int, int]:
        return version_pair(self.version) or (0, 0)  # an unreadable version compares lowest


def torch_devices(backend: str, facts: TorchFacts) -> tuple[Device, ...]:
    """The visible devices a library of ``backend`` would run on, as torch labels them."""
    if backend == "cuda":
        return tuple(
            Device(f"cuda:{i}", f"sm_{cc[0]}{cc[1]}", f"sm_{cc[0]}{cc[1]}")
            for i, cc in enumerate(facts.cuda_devices)
        )
    if backend == "hip":
        return tuple(Device(f"cuda:{i}", gfx, gfx) for i, gfx in enumerate(facts.hip_devices))
    if backend == "xpu":
        return tuple(
            Device(f"xpu:{i}", name, None, device_id)
            for i, (name, device_id) in enumerate(facts.xpu_devices)
        )
    return ()


def _versions(manifest: Manifest, facts: TorchFacts) -> Versions:
    return Versions(version_pair(manifest.toolkit.get("version", "")), facts.cuda_driver)


def _coverage_problem(manifest: Manifest, facts: TorchFacts) -> str | None:
    """Every visible device of the backend runs the library's targets."""
    backend = get_backend(manifest.backend)
    versions = _versions(manifest, facts)
    for device in torch_devices(manifest.backend, facts):
        coverage = backend.coverage(device, manifest.targets, versions)
        if not coverage.covered:
            return f"{device.label}: {coverage.how}"
    return None


def _required_isa_problem(manifest: Manifest, cpu: CpuFacts | None) -> str | None:
    """Rule 2's CPU half: the ISA levels the library requires, against this CPU."""
    if not manifest.requires_isa:
        return None
    platform = current_platform()
    if platform is None:
        return (
            f"requires the CPU ISA level {', '.join(manifest.requires_isa)} and ptkit cannot "
            "read this system's CPU features; not loaded"
        )
    return platform.required_isa_problem(manifest.requires_isa, cpu or this_cpu())


def _torch_abi_problem(manifest: Manifest, facts: TorchFacts) -> str | None:
    """Rule 4: the torch this library binds to (``manifest.torch_abi``) against this one."""
    running = facts.major_minor
    if manifest.torch_abi == "torch":
        built = version_pair(manifest.torch_built_with) or (0, 0)
        if running != built:
            return (
                f"built for torch {built[0]}.{built[1]} (classic C++ ABI); this is torch "
                f"{running[0]}.{running[1]}: install the build for torch {running[0]}.{running[1]} "
                "from the index, or rebuild"
            )
        cxx11 = manifest.torch_cxx11_abi
        if cxx11 is not None and facts.cxx11_abi is not None and cxx11 != facts.cxx11_abi:
            return (
                f"built with _GLIBCXX_USE_CXX11_ABI={int(cxx11)} (classic C++ ABI), torch "
                f"{facts.version} uses _GLIBCXX_USE_CXX11_ABI={int(facts.cxx11_abi)}: its C++ "
                "symbols differ; install the build for this torch, or rebuild against it"
            )
        return None
    target = manifest.torch_target_version
    if running[0] != target[0]:
        return (
            f"built for the torch {target[0]}.x stable ABI, torch {facts.version} is a "
            "different major version; install the release built for it"
        )
    if running < target:
        return (
            f"needs torch >= {manifest.torch_target_version_str} (stable ABI target), found "
            f"{facts.version}; upgrade torch"
        )
    return None


def check_compatibility(
    manifest: Manifest,
    facts: TorchFacts,
    switches: RuntimeSwitches,
    this_platform: str | None = None,
    cpu: CpuFacts | None = None,
) -> str | None:
    """Rules 1-4: the reason the library must not be loaded here, or None. ``cpu``: this
    machine's CPU (``ptkit.platforms.this_cpu()`` when not given)."""
    disabled = switches.disabled_reason(manifest.backend)
    if disabled:
        return disabled
    this_platform = this_platform or manifest_platform()
    if manifest.platform != this_platform:
        return f"built for {manifest.platform}, this machine is {this_platform}"
    lacking = _required_isa_problem(manifest, cpu)
    if lacking:
        return lacking
    backend = get_backend(manifest.backend)
    absent = backend.torch_absent_reason(facts)
    if absent:
        return f"{absent}; the {manifest.backend} library needs one"
    runtime = backend.runtime_problem(manifest.toolkit.get("version", ""), facts)
    if runtime:
        return runtime
    uncovered = _coverage_problem(manifest, facts)
    if uncovered:
        return uncovered
    return _torch_abi_problem(manifest, facts)


def listed_manifests(
    native_dir: Path, platform: Platform | None = None
) -> tuple[list[Path], list[LoadDecision]]:
    """The manifests of a native folder, or none and the FAILED decisions of what is
    wrong: one naming the folder when it cannot be listed, else one for each kernel
    library of ``platform`` (default: this machine's; its file names) that is there with
    no manifest at all. The loader, the session and the doctor say the same."""
    platform = platform or current_platform()
    try:
        manifests = find_manifests(native_dir)
        if manifests or platform is None:
            return manifests, []
        orphans = kernel_libraries(native_dir, platform)
    except ManifestError as exc:
        return [], [LoadDecision(native_dir, LoadStatus.FAILED, str(exc))]
    return [], [
        LoadDecision(library, LoadStatus.FAILED, _no_manifest_reason(library, platform))
        for library in orphans
    ]


def _no_manifest_reason(library: Path, platform: Platform) -> str:
    """Why a kernel library found without any manifest beside it is not loaded."""
    target = platform.kernel_library_target(library.name) or library.stem
    return (
        f"a kernel library with no manifest beside it (no {target}{MANIFEST_SUFFIX} in "
        f"{library.parent.name}/): ptkit loads only a library its manifest describes, so it "
        "is not loaded; reinstall the package (pip install --force-reinstall --no-deps "
        "<package>), or install the library with ptkit_install_kernel_library, which "
        "writes both"
    )


def device_details(manifest: Manifest, facts: TorchFacts) -> list[tuple[str, str]]:
    """How each device of the backend runs the library, for explain()."""
    backend = get_backend(manifest.backend)
    devices = torch_devices(manifest.backend, facts)
    details: list[tuple[str, str]] = []
    if manifest.backend in ("cuda", "hip") and not devices:
        details.append(("devices", f"no {backend.device_kind_title} visible"))
    versions = _versions(manifest, facts)
    for device in devices:
        details.append((device.label, backend.coverage(device, manifest.targets, versions).how))
    if manifest.backend == "metal":
        compiled = "compiled at first use" if manifest.library.endswith(".metal") else "metallib"
        details.append(("kernels", compiled))
    return details


def _integrity_problem(manifest: Manifest) -> str | None:
    """Rule 5: the library is the one its manifest names, and the manifest the one the
    installer wrote."""
    path = manifest.library_path
    try:
        if not path.is_file():
            return (
                f"library file {path.name} is missing next to its manifest; reinstall the package"
            )
        actual = file_sha256(path)
        if actual != manifest.sha256:
            return (
                f"{path.name} does not match its manifest (sha256 {actual[:12]}…, expected "
                f"{manifest.sha256[:12]}…); the file was modified or truncated: reinstall the "
                "package"
            )
        recorded = recorded_sha256(manifest.path.parent).get(manifest.path.name)
        if recorded is not None and file_sha256(manifest.path) != recorded:
            return (
                f"{manifest.path.name} was changed after it was installed (its sha256 is not "
                "the one in the package's RECORD), so what it claims cannot be trusted: "
                "reinstall the package (pip install --force-reinstall --no-deps <package>)"
            )
        if manifest.backend == "metal":
            return None  # Metal kernels are sources or a metallib, not a shared library
        platform = current_platform()
        return platform.library_problem(path) if platform else None
    except OSError as exc:  # unreadable by this user, or gone while being read
        return (
            f"cannot read {path}: {exc.strerror or exc}; make it readable by this user "
            "(chmod a+r) or reinstall the package"
        )


def decide_without_loading(
    manifest: Manifest,
    facts: TorchFacts,
    switches: RuntimeSwitches,
    this_platform: str | None = None,
    cpu: CpuFacts | None = None,
) -> LoadDecision:
    """Rules 1-5 for one manifest, without loading anything (and without torch): SKIPPED
    or FAILED with the reason, or LOADED meaning "would load" (rule 6 not tried).

    The loader runs rule 6 after this; ``ptkit doctor`` stops here, with facts it read
    from torch's files and the probed devices, so both give the same verdict."""
    reason = check_compatibility(manifest, facts, switches, this_platform, cpu)
    if reason:
        return LoadDecision(manifest.path, LoadStatus.SKIPPED, reason, manifest)
    problem = _integrity_problem(manifest)
    if problem:
        return LoadDecision(manifest.path, LoadStatus.FAILED, problem, manifest)
    if manifest.torch_abi == "torch":
        binding = f"classic C++ ABI, torch {manifest.torch_target_version_str} only"
    else:
        binding = f"stable ABI target {manifest.torch_target_version_str}"
    reason = f"{manifest.variant} variant, built with torch {manifest.torch_built_with}, {binding}"
    if manifest.requires_isa:
        reason += f", requires CPU ISA {', '.join(manifest.requires_isa)}"
    details = tuple(device_details(manifest, facts))
    return LoadDecision(manifest.path, LoadStatus.LOADED, reason, manifest, details)
