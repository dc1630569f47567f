"""Manifest-checked loading of native kernel libraries.

For each manifest the loader decides, *before* ``dlopen``, whether the library can
run here, and records the decision with its reason. Rules, in order:

1. not switched off (``PTKIT_FORCE_REFERENCE``, ``PTKIT_DISABLE_NATIVE``);
2. built for this platform (``linux-x86_64`` …);
3. this torch has the backend and its devices can run the code:
   - CUDA: a CUDA build of torch with the same CUDA major, and every visible GPU covered
     by the library's SASS or PTX (``cuda_targets.py``);
   - HIP: a ROCm build of torch (``torch.version.hip``) with the same HIP major, and every
     visible GPU's gfx target ID matched exactly or by a generic target (``hip_targets.py``);
   - XPU: ``torch.xpu.is_available()``, and every device's family built ahead of time or
     SPIR-V for the driver's JIT (``xpu_targets.py``);
   - Metal: an MPS device (``torch.backends.mps.is_available()``);
4. torch's stable ABI: same major version, and torch >= the library's target version;
5. the library file exists, its sha256 matches the manifest, and it is a complete ELF
   library for this machine (``elf_check.py``: ``dlopen`` of a truncated file can kill
   the process);
6. ``torch.ops.load_library`` succeeds (Metal: the MPS kernels are registered; they are
   compiled at first use, and a compile failure falls back to the reference).

Nothing here raises into ``import ptkit``: every failure becomes a recorded decision.
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import logging
import platform
from collections.abc import Callable, Iterable
from pathlib import Path

from ptkit.runtime.cuda_targets import cuda_coverage
from ptkit.runtime.elf_check import elf_problem
from ptkit.runtime.hip_targets import hip_coverage
from ptkit.runtime.manifest import (
    Manifest,
    ManifestError,
    file_sha256,
    find_manifests,
    read_manifest,
    version_pair,
)
from ptkit.runtime.switches import RuntimeSwitches
from ptkit.runtime.xpu_targets import xpu_coverage

__all__ = [
    "LoadDecision",
    "LoadStatus",
    "TorchFacts",
    "check_compatibility",
    "decide_without_loading",
    "load_native_libraries",
    "machine_platform",
]

logger = logging.getLogger("ptkit.runtime")


def _load_library(path: str) -> None:
    # torch is imported here, not at module level: `ptkit doctor` applies these rules to
    # facts it read from torch's files, in a process that must not import torch.
    import torch

    load: Callable[[str], None] = torch.ops.load_library  # untyped in torch; its signature
    load(path)


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
    """What the loader needs to know about the running torch and its devices."""

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

    @property
    def major_minor(self) -> tuple[int, int]:
        return _version_pair(self.version)

    @classmethod
    def from_torch(cls) -> TorchFacts:
        import torch

        devices: tuple[tuple[int, int], ...] = ()
        hip_devices: tuple[str, ...] = ()
        driver = None
        hip = getattr(torch.version, "hip", None)
        if torch.version.cuda and torch.cuda.is_available():
            devices = tuple(
                torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())
            )
            # cudaDriverGetVersion: e.g. 13050 for CUDA 13.5 (private in torch, hence getattr)
            get_driver = getattr(torch._C, "_cuda_getDriverVersion", None)
            raw = int(get_driver()) if get_driver is not None else 0
            driver = (raw // 1000, raw % 1000 // 10) if raw > 0 else None
        elif hip and torch.cuda.is_available():
            hip_devices = tuple(
                str(torch.cuda.get_device_properties(i).gcnArchName)
                for i in range(torch.cuda.device_count())
            )
        has_xpu = hasattr(torch, "xpu") and torch.xpu._is_compiled()
        xpu_available = has_xpu and torch.xpu.is_available()
        xpu_devices: tuple[tuple[str, int | None], ...] = ()
        if xpu_available:
            props = [torch.xpu.get_device_properties(i) for i in range(torch.xpu.device_count())]
            xpu_devices = tuple((str(p.name), getattr(p, "device_id", None)) for p in props)
        has_mps = torch.backends.mps.is_built()
        return cls(
            version=torch.__version__,
            cuda=torch.version.cuda,
            hip=hip,
            has_xpu=has_xpu,
            has_mps=has_mps,
            cuda_devices=devices,
            cuda_driver=driver,
            hip_devices=hip_devices,
            xpu_available=xpu_available,
            xpu_devices=xpu_devices,
            mps_available=has_mps and torch.backends.mps.is_available(),
        )

    def backend_absent_reason(self, backend: str) -> str | None:
        if backend == "cpu":
            return None
        if backend == "cuda" and not self.cuda:
            kind = f"a ROCm build (HIP {self.hip})" if self.hip else "not a CUDA build"
            return f"torch {self.version} is {kind}"
        if backend == "hip" and not self.hip:
            return f"torch {self.version} is not a ROCm build"
        if backend == "xpu" and not self.has_xpu:
            return f"torch {self.version} was built without XPU support"
        if backend == "xpu" and not self.xpu_available:
            return "no XPU device is available (torch.xpu.is_available() is False)"
        if backend == "metal" and not self.has_mps:
            return f"torch {self.version} was built without MPS support"
        if backend == "metal" and not self.mps_available:
            return (
                "no MPS device is available (an Apple-silicon Mac with macOS 14 or later is needed)"
            )
        return None


def machine_platform() -> str:
    """``<system>-<processor>`` in the manifest's spelling (CMake's, lower case)."""
    return f"{platform.system()}-{platform.machine()}".lower()


def check_compatibility(
    manifest: Manifest,
    facts: TorchFacts,
    switches: RuntimeSwitches,
    this_platform: str,
) -> str | None:
    """Rules 1-4: the reason the library must not be loaded here, or None."""
    disabled = switches.disabled_reason(manifest.backend)
    if disabled:
        return disabled
    if manifest.platform != this_platform:
        return f"built for {manifest.platform}, this machine is {this_platform}"
    absent = facts.backend_absent_reason(manifest.backend)
    if absent:
        return f"{absent}; the {manifest.backend} library needs one"
    device_problem = _DEVICE_RULES.get(manifest.backend, _no_device_problem)(manifest, facts)
    if device_problem:
        return device_problem
    target = manifest.torch_target_version
    running = facts.major_minor
    if running[0] != target[0]:
        return (
            f"built for the torch {target[0]}.x stable ABI, torch {facts.version} is a "
            "different major version; install the ptkit release for it"
        )
    if running < target:
        return (
            f"needs torch >= {manifest.torch_target_version_str} (stable ABI target), found "
            f"{facts.version}; upgrade torch"
        )
    return None


def _version_pair(text: str) -> tuple[int, int]:
    return version_pair(text) or (0, 0)  # an unreadable version compares lowest


def _runtime_major_problem(
    kind: str, manifest: Manifest, facts: TorchFacts, torch_has: str
) -> str | None:
    """The library links the runtime's major soname (libcudart.so.13, libamdhip64.so.7):
    it loads only beside a torch built with the same major."""
    built = manifest.toolkit.get("version", "")
    if _version_pair(built)[0] != _version_pair(torch_has)[0]:
        return (
            f"built with {kind} {built}, torch {facts.version} uses {kind} {torch_has}: the "
            f"{kind} major versions differ; install the matching ptkit variant"
        )
    return None


def _cuda_problem(manifest: Manifest, facts: TorchFacts) -> str | None:
    """CUDA of the same major as torch's, and every visible device covered."""
    mismatch = _runtime_major_problem("CUDA", manifest, facts, facts.cuda or "")
    if mismatch:
        return mismatch
    toolkit = _version_pair(manifest.toolkit.get("version", ""))
    sass = manifest.targets.get("sass", ())
    ptx = manifest.targets.get("ptx", ())
    for index, capability in enumerate(facts.cuda_devices):
        coverage = cuda_coverage(capability, sass, ptx, facts.cuda_driver, toolkit)
        if not coverage.covered:
            return f"cuda:{index}: {coverage.how}"
    return None


def _hip_problem(manifest: Manifest, facts: TorchFacts) -> str | None:
    """HIP of the same major as torch's, and every visible GPU covered."""
    mismatch = _runtime_major_problem("HIP", manifest, facts, facts.hip or "")
    if mismatch:
        return mismatch
    gfx = manifest.targets.get("gfx", ())
    for index, target_id in enumerate(facts.hip_devices):
        coverage = hip_coverage(target_id, gfx)
        if not coverage.covered:
            return f"cuda:{index}: {coverage.how}"
    return None


def _xpu_problem(manifest: Manifest, facts: TorchFacts) -> str | None:
    targets = manifest.targets.get("xpu", ())
    for index, (name, device_id) in enumerate(facts.xpu_devices):
        coverage = xpu_coverage(name, device_id, targets)
        if not coverage.covered:
            return f"xpu:{index}: {coverage.how}"
    return None


def _no_device_problem(manifest: Manifest, facts: TorchFacts) -> str | None:
    return None


_DEVICE_RULES: dict[str, Callable[[Manifest, TorchFacts], str | None]] = {
    "cuda": _cuda_problem,
    "hip": _hip_problem,
    "xpu": _xpu_problem,
}


def _device_details(manifest: Manifest, facts: TorchFacts) -> list[tuple[str, str]]:
    """How each device of the backend runs the loaded library, for explain()."""
    details: list[tuple[str, str]] = []
    if manifest.backend == "cuda":
        if not facts.cuda_devices:
            details.append(("devices", "no CUDA device visible"))
        toolkit = _version_pair(manifest.toolkit.get("version", ""))
        sass, ptx = manifest.targets.get("sass", ()), manifest.targets.get("ptx", ())
        for index, capability in enumerate(facts.cuda_devices):
            how = cuda_coverage(capability, sass, ptx, facts.cuda_driver, toolkit).how
            details.append((f"cuda:{index}", how))
    elif manifest.backend == "hip":
        if not facts.hip_devices:
            details.append(("devices", "no AMD GPU visible"))
        for index, target_id in enumerate(facts.hip_devices):
            details.append(
                (f"cuda:{index}", hip_coverage(target_id, manifest.targets.get("gfx", ())).how)
            )
    elif manifest.backend == "xpu":
        for index, (name, device_id) in enumerate(facts.xpu_devices):
            how = xpu_coverage(name, device_id, manifest.targets.get("xpu", ())).how
            details.append((f"xpu:{index}", how))
    elif manifest.backend == "metal":
        details.append(
            (
                "kernels",
                "compiled at first use" if manifest.library.endswith(".metal") else "metallib",
            )
        )
    return details


def _load(manifest: Manifest) -> None:
    """Rule 6: make the library's kernels known to the dispatcher."""
    if manifest.backend == "metal":
        # Metal kernels are not a shared library: MPS implementations are registered in
        # Python and compile the shipped source (or metallib) at first use.
        from ptkit.runtime.metal import register_metal_kernels

        register_metal_kernels(manifest.library_path)
        return
    _load_library(str(manifest.library_path))


def _integrity_problem(manifest: Manifest) -> str | None:
    """Rule 5."""
    path = manifest.library_path
    if not path.is_file():
        return f"library file {path.name} is missing next to its manifest; reinstall the package"
    actual = file_sha256(path)
    if actual != manifest.sha256:
        return (
            f"{path.name} does not match its manifest (sha256 {actual[:12]}…, expected "
            f"{manifest.sha256[:12]}…); the file was modified or truncated: reinstall the package"
        )
    if manifest.backend != "metal" and platform.system() == "Linux":
        return elf_problem(path)
    return None


def _cpu_isa(path: Path) -> str | None:
    # CPU libraries export ptkit_cpu_isa(); dlopen of a loaded library returns the same handle.
    try:
        fn = ctypes.CDLL(str(path)).ptkit_cpu_isa
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_char_p
    value = fn()
    return value.decode() if isinstance(value, bytes) else None


def decide_without_loading(
    manifest: Manifest, facts: TorchFacts, switches: RuntimeSwitches, this_platform: str
) -> LoadDecision:
    """Rules 1-5 for one manifest, without loading anything (and without torch): SKIPPED
    or FAILED with the reason, or LOADED meaning "would load" (rule 6 not tried).

    The loader runs rule 6 after this; ``ptkit doctor`` stops here, with facts it read
    from torch's files and the probed devices, so both give the same verdict."""
    reason = check_compatibility(manifest, facts, switches, this_platform)
    if reason:
        return LoadDecision(manifest.path, LoadStatus.SKIPPED, reason, manifest)
    problem = _integrity_problem(manifest)
    if problem:
        return LoadDecision(manifest.path, LoadStatus.FAILED, problem, manifest)
    reason = (
        f"{manifest.variant} variant, built with torch {manifest.torch_built_with}, "
        f"stable ABI target {manifest.torch_target_version_str}"
    )
    details = tuple(_device_details(manifest, facts))
    return LoadDecision(manifest.path, LoadStatus.LOADED, reason, manifest, details)


def _decide_and_load(
    path: Path, facts: TorchFacts, switches: RuntimeSwitches, this_platform: str
) -> LoadDecision:
    try:
        manifest = read_manifest(path)
    except ManifestError as exc:
        return LoadDecision(path, LoadStatus.FAILED, f"unreadable manifest: {exc}")
    decision = decide_without_loading(manifest, facts, switches, this_platform)
    if decision.status is not LoadStatus.LOADED:
        return decision
    try:
        _load(manifest)
    except Exception as exc:  # OSError from dlopen, RuntimeError from registration
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return LoadDecision(path, LoadStatus.FAILED, f"loading failed: {first_line}", manifest)
    details: list[tuple[str, str]] = []
    if manifest.backend == "cpu":
        isa = _cpu_isa(manifest.library_path)
        if isa:
            details.append(("isa", isa))
    details += decision.details
    return dataclasses.replace(decision, details=tuple(details))


def load_native_libraries(
    manifests: Iterable[Path] | Path,
    *,
    facts: TorchFacts | None = None,
    switches: RuntimeSwitches | None = None,
) -> list[LoadDecision]:
    """Decide and load every manifest given (or found in a native folder); never raises."""
    paths = find_manifests(manifests) if isinstance(manifests, Path) else list(manifests)
    facts = facts or TorchFacts.from_torch()
    switches = switches or RuntimeSwitches.from_environ()
    this_platform = machine_platform()
    decisions = []
    for path in paths:
        try:
            decision = _decide_and_load(path, facts, switches, this_platform)
        except Exception as exc:  # a loader bug must not break the import either
            decision = LoadDecision(path, LoadStatus.FAILED, f"loader error: {exc!r}")
        log = logger.warning if decision.status is LoadStatus.FAILED else logger.info
        log("ptkit: %s %s: %s", decision.library, decision.status.value, decision.reason)
        decisions.append(decision)
    return decisions
