"""The choice: which variant fits a machine, and why.

Policy over two inputs: the machine's facts (``ptkit.hardware.detect``, shared with the
doctor) and the variant recipes. The device list and labels are
``ptkit.hardware.probed_devices``; every rule about a device is its backend's
(``ptkit.backends``: the device kind a backend serves, ``coverage``, CUDA's
``driver_problem``), the same ones the loader applies, so ``select`` and the loader
cannot disagree about a device.

1. ``PTKIT_VARIANT`` names a recipe: that variant, whatever was detected (an unknown
   name is an error with a did-you-mean). The detected choice is still reported.
2. One kind of accelerator decides, the first present of NVIDIA, AMD, Intel (an Intel
   GPU counts only when it has an XPU family PyTorch supports), Apple: a wheel carries
   one GPU backend, and a discrete NVIDIA or AMD GPU is the one worth a GPU build.
3. Among the variants of that backend released for this platform (newest toolkit
   first), the first whose targets cover every such device, and, for CUDA, whose
   toolkit major the driver supports (CUDA 13.x needs driver >= 580).
4. No GPU, or no variant that covers every device: the cpu variant, with the reason.

A build override (``PTKIT_CUDA_ARCHS`` …) does not change the choice: it applies to
local builds, not to published wheels. A bad one is the same error the build gives.

Then, for a torch-mode variant, which of its builds fits this environment's torch, and
the torch pin of the commands (:mod:`ptkit.selection.torch_build`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ptkit.backends import BACKENDS, TargetError, Versions, backend_for_device_kind, version_pair
from ptkit.backends.base import did_you_mean
from ptkit.backends.cuda import driver_problem
from ptkit.hardware.detect import detect
from ptkit.hardware.devices import ProbedDevice, probed_devices
from ptkit.hardware.facts import IntelGpu, Machine, NvidiaGpu, PlatformFacts
from ptkit.platforms import release_platform_for
from ptkit.recipes.model import Recipe, RecipeError
from ptkit.recipes.torch_builds import installed_torch
from ptkit.selection.commands import install_commands
from ptkit.selection.recipes import OPS_DISTRIBUTION, SelectionError, load_all_recipes, recipes_dir
from ptkit.selection.result import DeviceReport, Selection, VariantCoverage
from ptkit.selection.torch_build import choose_torch_build

__all__ = ["ENV_VARIANT", "select", "select_variant", "wheel_platform"]

ENV_VARIANT = "PTKIT_VARIANT"

# Accelerator kinds in the order they decide (see the module docstring): the backend
# table's order.
_KINDS = tuple(b.device_kind for b in BACKENDS.values() if b.device_kind)


def wheel_platform(system: str, machine: str) -> str | None:
    """The release platform (recipes' ``[release] platforms``) of an OS and CPU."""
    release = release_platform_for(system, machine)
    return release.name if release else None


# --- coverage ---------------------------------------------------------------------------


def _driver_problem(recipe: Recipe, machine: Machine) -> str | None:
    toolkit = version_pair(recipe.toolkit.version)
    if toolkit is None:
        return f"the {recipe.name} recipe names no CUDA toolkit version ([toolkit] version)"
    return driver_problem(
        recipe.name, toolkit[0], machine.nvidia_driver, machine.cuda_driver_version
    )


def _coverage(recipe: Recipe, probed: ProbedDevice, machine: Machine) -> VariantCoverage:
    """The backend's coverage rule (the loader's), with the recipe's targets (its
    optional ones left out: the build may drop them) as a library's manifest lists them;
    then what else keeps the device from running them (the driver)."""
    gpu = probed.gpu
    backend = BACKENDS[recipe.backend]
    if isinstance(gpu, NvidiaGpu) and gpu.compute_capability is None:
        pci_id = "?" if gpu.pci_device_id is None else f"0x{gpu.pci_device_id:04x}"
        covered, how = (
            False,
            f"its compute capability is unknown (PCI id {pci_id} is not in ptkit's table "
            "and neither NVML nor nvidia-smi answered)",
        )
    else:
        field = backend.target_field
        targets = getattr(recipe.targets, field) if field else ()
        versions = Versions(version_pair(recipe.toolkit.version), machine.cuda_driver_version)
        result = backend.coverage(probed.device, backend.manifest_targets(targets), versions)
        covered, how = result.covered, result.how
    problems = [] if covered else [how]
    if backend.name == "cuda":
        driver = _driver_problem(recipe, machine)
        if driver:
            problems.append(driver)
    if isinstance(gpu, IntelGpu) and covered and gpu.driver is None:
        problems.append(
            "no kernel driver is bound to it: load the xe (or i915) driver, then run "
            "ptkit select again"
        )
    if problems:
        return VariantCoverage(recipe.name, False, "; ".join(problems))
    return VariantCoverage(recipe.name, True, how)


# --- the detected choice --------------------------------------------------------------------


def _released_for(recipe: Recipe, platform: str | None) -> bool:
    """A recipe without ``[release]`` is a local build: not limited to platforms."""
    if recipe.release is None or platform is None:
        return True
    return platform in recipe.release.platforms


def _newest_first(recipe: Recipe) -> tuple[int, int, str]:
    major, minor = version_pair(recipe.toolkit.version) or (0, 0)
    return (-major, -minor, recipe.name)


def _cpu_recipe(recipes: Mapping[str, Recipe]) -> Recipe:
    for recipe in recipes.values():
        if recipe.backend == "cpu":
            return recipe
    raise SelectionError(
        f"ptkit select: no cpu variant among the recipes ({', '.join(sorted(recipes))}); "
        "the cpu variant is the one every machine can install: add recipes/cpu.toml"
    )


def _decide(
    devices: tuple[ProbedDevice, ...],
    reports: Mapping[str, Mapping[str, VariantCoverage]],
    recipes: Mapping[str, Recipe],
    platform: str | None,
    machine: Machine,
) -> tuple[str, str, tuple[str, ...], str | None]:
    """The detected choice: (variant, reason, notes, the deciding kind of device or None)."""
    cpu = _cpu_recipe(recipes).name
    counted = [d for d in devices if not d.unsupported]
    kind = next((k for k in _KINDS if any(d.kind == k for d in counted)), None)
    if kind is None:
        return cpu, "no GPU that a ptkit GPU variant serves was found", (), None
    deciding = [d for d in counted if d.kind == kind]
    backend = backend_for_device_kind(kind)
    what = backend.device_kind_title
    of_backend = sorted(
        (r for r in recipes.values() if r.backend == backend.name), key=_newest_first
    )
    candidates = [r for r in of_backend if _released_for(r, platform)]
    if not candidates:
        released = ", ".join(r.name for r in of_backend) or "none"
        return (
            cpu,
            f"no {backend.name} variant is released for {platform or 'this platform'} "
            f"(variants of that backend: {released}); {cpu} runs everywhere",
            (),
            kind,
        )
    misses = []
    for recipe in candidates:
        uncovered = [d for d in deciding if not reports[d.label][recipe.name].covered]
        if not uncovered:
            hows = "; ".join(f"{d.label} {reports[d.label][recipe.name].how}" for d in deciding)
            return recipe.name, f"{recipe.name} covers every {what}: {hows}", (), kind
        misses += [
            f"{recipe.name} does not cover {d.label} ({d.device.name}): "
            f"{reports[d.label][recipe.name].how}"
            for d in uncovered
        ]
    # A GPU build of torch still uses the GPU, ptkit-ops through its reference
    # implementation; not worth saying when the driver is too old for that torch.
    gpu_torch = candidates[0].torch_index_url
    if backend.name == "cuda" and _driver_problem(candidates[0], machine) is not None:
        gpu_torch = ""
    notes = (
        (
            f"with the {cpu} variant, a GPU build of torch still runs on the GPU (ptkit's ops "
            f"through their reference implementation): install torch from {gpu_torch} "
            "instead of the CPU build if that build supports this GPU",
        )
        if gpu_torch
        else ()
    )
    reason = (
        f"no {backend.name} variant covers every {what}: " + "; ".join(misses) + f"; "
        f"recommending {cpu}, which runs everywhere"
    )
    return cpu, reason, notes, kind


# --- overrides --------------------------------------------------------------------------


def _variant_override(environ: Mapping[str, str], recipes: Mapping[str, Recipe]) -> str | None:
    value = environ.get(ENV_VARIANT, "").strip()
    if not value:
        return None
    if value not in recipes:
        raise SelectionError(
            f"ptkit select: {ENV_VARIANT}={value!r} is not a variant"
            f"{did_you_mean(value, recipes)}; expected one of {', '.join(sorted(recipes))}: "
            f"set {ENV_VARIANT} to one of them, or unset it to choose from the detected "
            "hardware"
        )
    return value


def _build_override_notes(environ: Mapping[str, str]) -> list[str]:
    """A note per build override that is set (the backend's own parser reads it, so a
    bad value is the build's error); ``SelectionError`` for a bad one."""
    notes = []
    for backend in BACKENDS.values():
        variable = backend.override_variable
        if variable is None:
            continue
        try:
            request = backend.requested_targets((), (), environ)
        except TargetError as exc:
            raise SelectionError(f"ptkit select: {exc}") from exc
        if request.source != "recipe":  # the backend's variable, or one it honours
            notes.append(
                f"{request.source}={environ[request.source].strip()!r} ({' '.join(request.targets)}) "
                "applies to local builds (ptkit build, pip install from source), not to "
                "the published wheels ptkit select chooses from"
                + (f"; {request.note}" if request.note else "")
            )
    return notes


# --- the answer -------------------------------------------------------------------------


def select_variant(
    machine: Machine,
    recipes: Mapping[str, Recipe],
    *,
    index_url: str | None,
    environ: Mapping[str, str] | None = None,
    torch: str | None = None,
    distribution: str = OPS_DISTRIBUTION,
) -> Selection:
    """The variant for ``machine`` among ``recipes`` (``load_all_recipes``), and its
    build for ``torch`` (the environment's torch version; None: no torch).

    ``index_url``: the ptkit index root (``<root>/<index-path>/simple`` per variant);
    None leaves the commands out. ``environ``: where ``PTKIT_VARIANT`` and the build
    overrides are read (default ``os.environ``). ``distribution``: what the recipes
    build (ptkit-ops'). Raises ``SelectionError`` for an unknown variant, a bad build
    override, a bad index URL or recipes without a cpu variant."""
    environ = os.environ if environ is None else environ
    override = _variant_override(environ, recipes)
    build_notes = _build_override_notes(environ)
    platform = wheel_platform(machine.system, machine.machine)
    devices = probed_devices(machine)
    reports: dict[str, dict[str, VariantCoverage]] = {}
    for device in devices:
        backend = backend_for_device_kind(device.kind).name
        reports[device.label] = {
            recipe.name: _coverage(recipe, device, machine)
            for recipe in sorted(recipes.values(), key=_newest_first)
            if recipe.backend == backend
        }
    detected, detected_reason, detected_notes, kind = _decide(
        devices, reports, recipes, platform, machine
    )

    # The detected choice's notes are about that choice: not repeated under an override.
    notes = list(detected_notes) if override is None else []
    if platform is None:
        notes.append(
            f"ptkit releases no wheels for {machine.system} {machine.machine}: build from "
            "source (the recipes' platforms are manylinux_2_28 x86_64/aarch64, macOS arm64, "
            "Windows x86_64)"
        )
    variant, source, reason = detected, "detected", detected_reason
    if override is not None:
        variant, source = override, ENV_VARIANT
        reason = f"{ENV_VARIANT}={override} (detected: {detected}, {detected_reason})"
        if not _released_for(recipes[override], platform):
            notes.append(
                f"{override} is not released for {platform}: no wheel will be found for it"
            )
        uncovered = [
            f"{label} ({cov.how})"
            for label, by_variant in reports.items()
            for name, cov in by_variant.items()
            if name == override and not cov.covered
        ]
        if uncovered:
            notes.append(
                f"{override} does not cover " + "; ".join(uncovered) + ": ptkit's ops run "
                "their reference implementation there"
            )
    notes += build_notes

    report_list = []
    for device in devices:
        counted = not device.unsupported and device.kind == kind
        note = f"{device.unsupported}: not counted" if device.unsupported else ""
        if not device.unsupported and not counted and kind is not None:
            note = (
                f"a ptkit wheel carries one GPU backend; the "
                f"{backend_for_device_kind(kind).device_kind_title}s decide here: "
                "not counted"
            )
        report_list.append(
            DeviceReport(
                label=device.label,
                kind=device.kind,
                name=device.device.name,
                arch=device.device.arch,
                counted=counted,
                note=note,
                coverage=tuple(reports[device.label].values()),
            )
        )

    chosen = recipes[variant]
    torch_choice = choose_torch_build(chosen, torch)
    if torch_choice.note:
        notes.append(torch_choice.note)
    simple, commands = (None, None)
    if index_url is not None:
        simple, commands = install_commands(
            index_url, chosen, distribution=distribution, torch_pin=torch_choice.pin
        )
    return Selection(
        variant=variant,
        backend=chosen.backend,
        source=source,
        reason=reason,
        devices=tuple(report_list),
        machine=machine,
        platform=platform,
        variant_index_url=simple,
        torch_index_url=chosen.torch_index_url or None,
        commands=commands,
        notes=tuple(notes),
        distribution=distribution,
        build=torch_choice.build.local_version,
        torch=torch,
    )


def select(
    root: Path = Path("/"),
    *,
    index_url: str | None,
    environ: Mapping[str, str] | None = None,
    recipes_directory: Path | None = None,
    commands: bool = True,
    timeout_s: float = 3.0,
    platform_facts: PlatformFacts | None = None,
    torch: str | None = None,
    distribution: str = OPS_DISTRIBUTION,
) -> Selection:
    """``detect()`` then ``select_variant()`` with the recipes of ``recipes_dir()``:
    what ``ptkit select`` runs (the arguments are ``detect()``'s and
    ``select_variant()``'s; ``torch`` None: this environment's, read from its metadata)."""
    directory = recipes_directory or recipes_dir()
    try:
        recipes = load_all_recipes(directory)
    except RecipeError as exc:
        raise SelectionError(f"ptkit select: {exc}") from exc
    machine = detect(root, commands=commands, timeout_s=timeout_s, platform_facts=platform_facts)
    return select_variant(
        machine,
        recipes,
        index_url=index_url,
        environ=environ,
        torch=torch if torch is not None else installed_torch(),
        distribution=distribution,
    )
