"""Installed packages that ship ptkit-built libraries: their manifests, and what the
loader would decide for each here, with the loader's own rules.

``import ptkit`` decides from ``TorchFacts.from_torch()``; the doctor builds the same
facts from torch's files (``TorchInstall``) and the probed devices (``Machine``), then
runs ``ptkit.runtime.loader.decide_without_loading`` (rules 1-5: switches, platform,
backend and devices, stable ABI, file integrity) and ``ptkit.loading.routes.routes``
with the dispatcher's answer predicted from those decisions. Nothing is loaded and torch
is not imported. ``LoadStatus.LOADED`` here means "would load".

The packages are those of the ``ptkit.packages`` entry-point group (ptkit-ops declares
``ptkit_ops``; ``ptkit.loading.packages.discover_packages``: the
``*.dist-info/entry_points.txt`` files on the path, read directly, about 2 ms), each
located without importing it; ``probe_packages(packages=…)`` takes any ``name -> package
folder`` map instead. Which devices torch would see follows CUDA's driver rule
(``ptkit.backends.cuda.driver_problem``), as ``ptkit select`` and PTK201 apply it, and
the probed machine's platform for the rest (its MPS rule, ``Platform.mps_support``; its
kernel library names, for a library found with no manifest).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from pathlib import Path

from ptkit.backends import backends_for_device_type, version_pair
from ptkit.backends.cuda import driver_problem
from ptkit.doctor.model import LibraryFacts, PackageFacts, RouteFacts, TorchInstall
from ptkit.hardware.facts import Machine
from ptkit.loading import namespaces
from ptkit.loading.manifest import Manifest, ManifestError, read_manifest
from ptkit.loading.packages import (
    NATIVE_FOLDER,
    discover_packages,
    locate_package,
    op_table,
    package_version,
)
from ptkit.loading.routes import predicted_has_kernel, routes
from ptkit.loading.rules import (
    LoadDecision,
    LoadStatus,
    TorchFacts,
    decide_without_loading,
    listed_manifests,
)
from ptkit.loading.switches import RuntimeSwitches
from ptkit.platforms import Platform, current_platform, manifest_platform, platform_for_system
from ptkit.platforms.base import MpsSupport

__all__ = [
    "NATIVE_FOLDER",
    "library_facts",
    "locate_package",
    "probe_package",
    "probe_packages",
    "torch_facts_from",
]

# The backends whose libraries serve the devices torch calls cuda (CUDA's and HIP's).
_TORCH_CUDA_BACKENDS = frozenset(b.name for b in backends_for_device_type("cuda"))


def _platform_of(machine: Machine | None) -> Platform | None:
    """The platform module of the probed machine (this one's without a probe)."""
    return platform_for_system(machine.system) if machine is not None else current_platform()


def torch_facts_from(
    torch: TorchInstall, machine: Machine | None, *, macos_version: str | None = None
) -> tuple[TorchFacts, tuple[str, ...]] | None:
    """The facts ``ptkit.runtime.loader.torch_facts()`` would return in a process that imports this
    torch on this machine, and notes on what could not be predicted; None when torch's
    version is unknown (torch missing or broken: ``import ptkit`` fails before any
    library loads). ``macos_version``: the OS version for the MPS rule (default
    ``platform.mac_ver()``'s, empty off macOS)."""
    if torch.location is None or torch.version is None:
        return None
    notes: list[str] = []
    cuda_devices: tuple[tuple[int, int], ...] = ()
    cuda_driver = None
    hip_devices: tuple[str, ...] = ()
    xpu_devices: tuple[tuple[str, int | None], ...] = ()
    arch = machine.machine if machine else platform.machine()
    cuda = version_pair(torch.cuda)
    if machine is not None and cuda is not None and machine.nvidia:
        have = machine.cuda_driver_version
        too_old = driver_problem(f"torch {torch.version}", cuda[0], machine.nvidia_driver, have)
        if too_old:
            # torch.cuda.is_available() is False: torch sees no device.
            notes.append(f"{too_old}: torch would see no CUDA device")
        else:
            cuda_driver = have
            known = [g for g in machine.nvidia if g.compute_capability is not None]
            cuda_devices = tuple(g.compute_capability for g in known if g.compute_capability)
            unknown = len(machine.nvidia) - len(known)
            if unknown:
                notes.append(
                    f"{unknown} NVIDIA GPU(s) with an unknown compute capability were not "
                    "checked against the libraries"
                )
    if machine is not None and torch.hip and machine.amd:
        # KFD lists one node per GPU (or partition); torch sees the same devices.
        hip_devices = tuple(g.gfx_target for g in machine.amd)
    if machine is not None and torch.xpu:
        usable = [g for g in machine.intel if g.family and g.driver]
        xpu_devices = tuple((g.name, g.pci_device_id) for g in usable)
    # The MPS rule is the platform's (macOS: arm64, an Apple GPU, torch's minimum macOS).
    os_platform = _platform_of(machine)
    mps = (
        os_platform.mps_support(
            arch,
            apple_gpu=bool(machine is not None and machine.apple),
            os_version=macos_version if macos_version is not None else platform.mac_ver()[0],
        )
        if os_platform is not None
        else MpsSupport(False, False, "ptkit has no platform module for this OS")
    )
    facts = TorchFacts(
        version=torch.version,
        cuda=torch.cuda,
        hip=torch.hip,
        has_xpu=torch.xpu,
        has_mps=mps.built,
        cuda_devices=cuda_devices,
        cuda_driver=cuda_driver,
        hip_devices=hip_devices,
        xpu_available=bool(xpu_devices),
        xpu_devices=xpu_devices,
        mps_available=mps.available,
        cxx11_abi=torch.cxx11_abi,
    )
    return facts, tuple(notes)


def _toolkit(manifest: Manifest) -> str | None:
    text = f"{manifest.toolkit.get('name', '')} {manifest.toolkit.get('version', '')}".strip()
    return text or None


def library_facts(decision: LoadDecision) -> LibraryFacts:
    manifest = decision.manifest
    details = "".join(f", {k} {v}" for k, v in decision.details)
    if manifest is None:
        return LibraryFacts(
            library=decision.manifest_path.name,
            backend="unknown",
            variant="unknown",
            targets={},
            toolkit=None,
            torch_built_with=None,
            torch_target=None,
            status=decision.status.value,
            reason=decision.reason,
        )
    return LibraryFacts(
        library=manifest.library,
        backend=manifest.backend,
        variant=manifest.variant,
        targets=dict(manifest.targets),
        toolkit=_toolkit(manifest),
        torch_built_with=manifest.torch_built_with or None,
        torch_target=manifest.torch_target_version_str,
        status=decision.status.value,
        reason=decision.reason + details,
    )


def _refuse_conflicts(decisions: list[LoadDecision]) -> list[LoadDecision]:
    """The loader's refusal of a library that defines a namespace or registers a kernel
    an earlier one of the package already does, applied to the predicted loads."""
    claims = namespaces.Claims()
    checked = []
    for decision in decisions:
        manifest = decision.manifest
        if decision.status is LoadStatus.LOADED and manifest is not None:
            conflict = claims.conflict(manifest)
            if conflict is not None:
                decision = LoadDecision(
                    decision.manifest_path, LoadStatus.FAILED, conflict, manifest
                )
            else:
                claims.record(manifest)
        checked.append(decision)
    return checked


def probe_package(
    name: str,
    location: Path,
    *,
    torch: TorchInstall,
    machine: Machine | None,
    switches: RuntimeSwitches,
    this_platform: str,
    version: str | None = None,
    distribution: str | None = None,
) -> PackageFacts:
    """One package: each manifest in ``<location>/_native`` and the loader's verdict.
    ``version``, ``distribution``: the installed distribution's (else the version is
    read beside the package)."""
    paths, decisions = listed_manifests(location / NATIVE_FOLDER, _platform_of(machine))
    manifests: list[Manifest] = []
    predicted = torch_facts_from(torch, machine)
    for path in paths:
        try:
            manifest = read_manifest(path)
        except ManifestError as exc:  # the loader's words for the same failure
            decisions.append(LoadDecision(path, LoadStatus.FAILED, f"unreadable manifest: {exc}"))
            continue
        manifests.append(manifest)
        if predicted is None:
            why = (
                "torch is not installed"
                if torch.location is None
                else f"torch at {torch.location} is broken (no version)"
            )
            decisions.append(
                LoadDecision(
                    path,
                    LoadStatus.SKIPPED,
                    f"{why}: import {name} fails before any library loads; install torch",
                    manifest,
                )
            )
            continue
        facts, notes = predicted
        decision = decide_without_loading(manifest, facts, switches, this_platform)
        if notes and manifest.backend in _TORCH_CUDA_BACKENDS:
            decision = LoadDecision(
                decision.manifest_path,
                decision.status,
                decision.reason + " (" + "; ".join(notes) + ")",
                decision.manifest,
                decision.details,
            )
        decisions.append(decision)
    decisions = _refuse_conflicts(decisions)
    route_rows: list[RouteFacts] = []
    if predicted is not None and manifests:
        facts = predicted[0]
        # Per namespace (a package normally has one), as explain() does.
        for namespace, table in op_table(manifests).items():
            ops = list(table)
            in_namespace = [
                d for d in decisions if d.manifest is None or d.manifest.namespace == namespace
            ]
            for row in routes(
                ops,
                namespace,
                in_namespace,
                facts,
                switches,
                has_kernel=predicted_has_kernel(namespace, in_namespace),
            ):
                route_rows.append(
                    RouteFacts(row.op, row.device_type, row.implementation, row.library, row.reason)
                )
    if version is None:
        version = package_version(name) or "unknown"  # the loader's lookup of the dist-info
    label = version.partition("+")[2] or None
    variants = sorted({m.variant for m in manifests})
    variant = variants[0] if len(variants) == 1 else label
    return PackageFacts(
        name=name,
        version=version,
        variant=variant,
        location=str(location),
        libraries=tuple(library_facts(d) for d in decisions),
        routes=tuple(route_rows),
        distribution=distribution,
    )


def probe_packages(
    *,
    torch: TorchInstall,
    machine: Machine | None,
    environ: Mapping[str, str] | None = None,
    packages: Mapping[str, Path] | None = None,
    names: Sequence[str] | None = None,
    paths: Sequence[str] | None = None,
) -> tuple[PackageFacts, ...]:
    """Every package that ships ptkit manifests: ``packages`` (name -> folder), else each
    of ``names`` found on the path without importing it, else every package of the
    ``ptkit.packages`` entry-point group on ``paths`` (default ``sys.path``). A declared
    package that cannot be found is left out."""
    switches = RuntimeSwitches.from_environ(environ)
    this_platform = (
        f"{machine.system}-{machine.machine}".lower()
        if machine is not None
        else manifest_platform()
    )
    versions: dict[str, str] = {}
    distributions: dict[str, str] = {}
    if packages is None:
        if names is None:
            entries = discover_packages(paths)
            versions = {e.module: e.version for e in entries}
            distributions = {e.module: e.distribution for e in entries}
            modules = list(dict.fromkeys(e.module for e in entries))
        else:
            modules = list(names)
        found = {n: locate_package(n) for n in modules}
        packages = {n: p for n, p in found.items() if p is not None}
    return tuple(
        probe_package(
            name,
            location,
            torch=torch,
            machine=machine,
            switches=switches,
            this_platform=this_platform,
            version=versions.get(name),
            distribution=distributions.get(name),
        )
        for name, location in packages.items()
    )
