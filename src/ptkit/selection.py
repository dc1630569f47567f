"""``ptkit select``: which variant fits this machine, why, and the commands to install it.

This is policy over two inputs: the machine's facts (``ptkit.hardware.detect``, shared
with the doctor, which needs no recipes) and the variant recipes. It lives beside
``ptkit.hardware`` rather than in it so the probes stay a layer of plain facts. The
coverage rules are the runtime loader's own (``cuda_coverage``, ``hip_coverage``,
``xpu_coverage``): ``select`` and the loader cannot disagree about a device.

The choice:

1. ``PTKIT_VARIANT`` names a recipe: that variant, whatever was detected (an unknown
   name is an error with a did-you-mean). The detected choice is still reported.
2. One kind of accelerator decides, the first present of NVIDIA, AMD, Intel (an Intel
   GPU counts only when it has an XPU family PyTorch supports), Apple: a wheel carries
   one GPU backend, and a discrete NVIDIA or AMD GPU is the one worth a GPU build.
3. Among the variants of that backend released for this platform (newest toolkit
   first), the first whose targets cover every such device, and, for CUDA, whose
   toolkit major the driver supports (``DRIVER_CUDA``: CUDA 13.x needs driver >= 580).
4. No GPU, or no variant that covers every device: the cpu variant, with the reason.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ptkit.backends import BACKENDS, Device, backend_for_device_kind, version_pair
from ptkit.backends.cuda import driver_problem
from ptkit.hardware.detect import detect
from ptkit.hardware.facts import AmdGpu, AppleGpu, IntelGpu, Machine, NvidiaGpu, PlatformFacts
from ptkit.platforms import release_platform_for
from ptkit.recipes.model import Recipe, RecipeError, load_recipes

__all__ = [
    "ENV_VARIANT",
    "SCHEMA_VERSION",
    "Coverage",
    "DeviceReport",
    "InstallCommands",
    "Selection",
    "SelectionError",
    "install_commands",
    "load_all_recipes",
    "recipes_dir",
    "render_text",
    "select",
    "select_variant",
    "wheel_platform",
]

SCHEMA_VERSION = 1
ENV_VARIANT = "PTKIT_VARIANT"
PYPI = "https://pypi.org/simple"

# Accelerator kinds in the order they decide (see the module docstring): the backend
# table's order.
_KINDS = tuple(b.device_kind for b in BACKENDS.values() if b.device_kind)


class SelectionError(ValueError):
    """``ptkit select`` cannot answer: a bad override, index URL or recipe folder."""


def recipes_dir() -> Path:
    """ptkit-ops' recipes, shipped in the toolkit as ``ptkit/_recipes/`` (in the source
    tree a link to ``recipes/``)."""
    return Path(__file__).resolve().parent / "_recipes"


def load_all_recipes(directory: Path) -> dict[str, Recipe]:
    """Every ``<variant>.toml`` in ``directory``, by name; a broken one raises
    ``RecipeError`` (a packaging bug, never something to guess around)."""
    recipes = load_recipes(directory)
    if not recipes:
        raise SelectionError(
            f"ptkit select: no recipes in {directory} (expected <variant>.toml files); "
            "reinstall ptkit, or run from a source checkout that has recipes/"
        )
    return recipes


def wheel_platform(system: str, machine: str) -> str | None:
    """The release platform (recipes' ``[release] platforms``) of an OS and CPU."""
    release = release_platform_for(system, machine)
    return release.name if release else None


@dataclasses.dataclass(frozen=True)
class Coverage:
    """Whether one variant's code runs on one device, and how (or why not)."""

    variant: str
    covered: bool
    how: str


@dataclasses.dataclass(frozen=True)
class DeviceReport:
    label: str
    """``nvidia:0``, ``amd:1`` (KFD node), ``intel:0``, ``apple:0``: not torch's indexes."""
    kind: str
    name: str
    arch: str | None
    """``sm_90``, ``gfx942``, ``bmg``; None when unknown."""
    counted: bool
    """Whether it took part in the choice (see ``note`` when not)."""
    note: str
    coverage: tuple[Coverage, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.label,
            "kind": self.kind,
            "name": self.name,
            "arch": self.arch,
            "counted": self.counted,
            "note": self.note,
            "variants": {c.variant: {"covered": c.covered, "how": c.how} for c in self.coverage},
        }


@dataclasses.dataclass(frozen=True)
class InstallCommands:
    pip: str
    """pip merges every index and takes the highest version of each package."""
    uv: str
    """uv takes each package from the first index that has it (``--index`` order)."""


@dataclasses.dataclass(frozen=True)
class Selection:
    variant: str
    backend: str
    source: str
    """``detected`` or ``PTKIT_VARIANT``."""
    reason: str
    devices: tuple[DeviceReport, ...]
    machine: Machine
    platform: str | None
    variant_index_url: str | None
    """``<index>/<index-path>/simple``; None without an index URL."""
    torch_index_url: str | None
    commands: InstallCommands | None
    """None without an index URL (there is no published default to assume)."""
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "variant": self.variant,
            "backend": self.backend,
            "source": self.source,
            "reason": self.reason,
            "platform": self.platform,
            "devices": [d.to_json() for d in self.devices],
            "variant_index_url": self.variant_index_url,
            "torch_index_url": self.torch_index_url,
            "commands": None
            if self.commands is None
            else {"pip": self.commands.pip, "uv": self.commands.uv},
            "notes": list(self.notes),
            "machine": self.machine.to_json(),
        }


# --- coverage, per backend ----------------------------------------------------------


def _driver_problem(recipe: Recipe, machine: Machine) -> str | None:
    toolkit = version_pair(recipe.toolkit.version)
    if toolkit is None:
        return f"the {recipe.name} recipe names no CUDA toolkit version ([toolkit] version)"
    return driver_problem(
        recipe.name, toolkit[0], machine.nvidia_driver, machine.cuda_driver_version
    )


def _coverage(recipe: Recipe, device: _Device, machine: Machine) -> Coverage:
    """The backend's own coverage rule (the loader's), with the recipe's targets (its
    optional ones left out: the build may drop them) as a library's manifest lists them."""
    gpu = device.gpu
    backend = BACKENDS[recipe.backend]
    if isinstance(gpu, NvidiaGpu) and gpu.compute_capability is None:
        pci_id = "?" if gpu.pci_device_id is None else f"0x{gpu.pci_device_id:04x}"
        result = Coverage(
            recipe.name,
            False,
            f"its compute capability is unknown (PCI id {pci_id} is not in ptkit's table "
            "and neither NVML nor nvidia-smi answered)",
        )
    else:
        field = backend.target_field
        targets = getattr(recipe.targets, field) if field else ()
        covered = backend.coverage(
            Device(device.label, device.name, device.arch, getattr(gpu, "pci_device_id", None)),
            backend.manifest_targets(targets),
            toolkit_version=version_pair(recipe.toolkit.version),
            driver_version=machine.cuda_driver_version,
        )
        result = Coverage(recipe.name, covered.covered, covered.how)
    problems = [] if result.covered else [result.how]
    if backend.name == "cuda":
        driver = _driver_problem(recipe, machine)
        if driver:
            problems.append(driver)
    if isinstance(gpu, IntelGpu) and result.covered and gpu.driver is None:
        problems.append(
            "no kernel driver is bound to it: load the xe (or i915) driver, then run "
            "ptkit select again"
        )
    if problems:
        return Coverage(recipe.name, False, "; ".join(problems))
    return result


# --- devices and candidates -----------------------------------------------------------

_Gpu = NvidiaGpu | AmdGpu | IntelGpu | AppleGpu


@dataclasses.dataclass(frozen=True)
class _Device:
    label: str
    kind: str
    name: str
    arch: str | None
    gpu: _Gpu
    supported: bool
    note: str


def _devices(machine: Machine) -> list[_Device]:
    devices = [
        _Device(f"nvidia:{g.index}", "nvidia", g.name, g.arch, g, True, "") for g in machine.nvidia
    ]
    devices += [
        _Device(f"amd:{g.node}", "amd", g.name, g.gfx_target, g, True, "") for g in machine.amd
    ]
    for position, gpu in enumerate(machine.intel):
        note = (
            ""
            if gpu.family
            else f"PCI id 0x{gpu.pci_device_id:04x} is not an Intel GPU family PyTorch's XPU "
            "build supports (Arc, Data Center GPU Max, Core Ultra graphics): not counted"
        )
        devices.append(
            _Device(f"intel:{position}", "intel", gpu.name, gpu.family, gpu, bool(gpu.family), note)
        )
    devices += [
        _Device(f"apple:{i}", "apple", g.chip, None, g, True, "")
        for i, g in enumerate(machine.apple)
    ]
    return devices


def _released_for(recipe: Recipe, platform: str | None) -> bool:
    """A recipe without ``[release]`` is a local build: not limited to platforms."""
    if recipe.release is None or platform is None:
        return True
    return platform in recipe.release.platforms


def _newest_first(recipe: Recipe) -> tuple[int, int, str]:
    major, minor = version_pair(recipe.toolkit.version) or (0, 0)
    return (-major, -minor, recipe.name)


@dataclasses.dataclass(frozen=True)
class _Decision:
    variant: str
    reason: str
    notes: tuple[str, ...]


def _cpu_recipe(recipes: Mapping[str, Recipe]) -> Recipe:
    for recipe in recipes.values():
        if recipe.backend == "cpu":
            return recipe
    raise SelectionError(
        f"ptkit select: no cpu variant among the recipes ({', '.join(sorted(recipes))}); "
        "the cpu variant is the one every machine can install: add recipes/cpu.toml"
    )


def _decide(
    devices: list[_Device],
    reports: dict[str, dict[str, Coverage]],
    recipes: Mapping[str, Recipe],
    platform: str | None,
    machine: Machine,
) -> tuple[_Decision, str | None]:
    """The detected choice, and the deciding kind of device (None without a GPU)."""
    cpu = _cpu_recipe(recipes).name
    counted = [d for d in devices if d.supported]
    kind = next((k for k in _KINDS if any(d.kind == k for d in counted)), None)
    if kind is None:
        return _Decision(cpu, "no GPU that a ptkit GPU variant serves was found", ()), None
    deciding = [d for d in counted if d.kind == kind]
    backend = backend_for_device_kind(kind).name
    what = backend_for_device_kind(kind).device_kind_title
    of_backend = sorted((r for r in recipes.values() if r.backend == backend), key=_newest_first)
    candidates = [r for r in of_backend if _released_for(r, platform)]
    if not candidates:
        released = ", ".join(r.name for r in of_backend) or "none"
        return (
            _Decision(
                cpu,
                f"no {backend} variant is released for {platform or 'this platform'} "
                f"(variants of that backend: {released}); {cpu} runs everywhere",
                (),
            ),
            kind,
        )
    misses = []
    for recipe in candidates:
        uncovered = [d for d in deciding if not reports[d.label][recipe.name].covered]
        if not uncovered:
            hows = "; ".join(f"{d.label} {reports[d.label][recipe.name].how}" for d in deciding)
            return _Decision(recipe.name, f"{recipe.name} covers every {what}: {hows}", ()), kind
        misses += [
            f"{recipe.name} does not cover {d.label} ({d.name}): "
            f"{reports[d.label][recipe.name].how}"
            for d in uncovered
        ]
    # A GPU build of torch still uses the GPU, ptkit's ops through their reference
    # implementation; not worth saying when the driver is too old for that torch.
    gpu_torch = candidates[0].torch_index_url
    if backend == "cuda" and _driver_problem(candidates[0], machine) is not None:
        gpu_torch = ""
    note = (
        f"with the {cpu} variant, a GPU build of torch still runs on the GPU (ptkit's ops "
        f"through their reference implementation): install torch from {gpu_torch} instead "
        "of the CPU build if that build supports this GPU"
        if gpu_torch
        else ""
    )
    return (
        _Decision(
            cpu,
            f"no {backend} variant covers every {what}: " + "; ".join(misses) + f"; "
            f"recommending {cpu}, which runs everywhere",
            (note,) if note else (),
        ),
        kind,
    )


# --- commands ---------------------------------------------------------------------


def _check_index_url(index_url: str) -> str:
    url = index_url.strip().rstrip("/")
    if not re.match(r"^(https?|file)://\S+$", url):
        raise SelectionError(
            f"ptkit select: the ptkit index URL must be an http(s):// or file:// URL (the "
            f"folder that holds <variant>/simple/), got {index_url!r}; pass --index-url or "
            "set PTKIT_INDEX_URL"
        )
    return url


def install_commands(index_url: str, recipe: Recipe) -> tuple[str, InstallCommands]:
    """The variant's simple index and the pip and uv commands that install from it.

    pip has no index priority: it merges ``--index-url`` and every ``--extra-index-url``
    and takes the highest version. PyPI is listed too, for ptkit's own dependencies
    (click, packaging), which the PyTorch index need not carry. uv asks its indexes in
    order and takes each package from the first that has it (``--index``, earlier first;
    PyPI, the default index, last), so ptkit comes from ptkit's index and torch from
    PyTorch's whatever PyPI holds."""
    simple = f"{_check_index_url(index_url)}/{recipe.index_path}/simple"
    torch = recipe.torch_index_url.rstrip("/") if recipe.torch_index_url else None
    extra = [torch] if torch and torch != PYPI else []
    pip = ["pip", "install", "ptkit", "--index-url", simple]
    for url in [*extra, PYPI]:
        pip += ["--extra-index-url", url]
    uv = ["uv", "pip", "install", "ptkit", "--index", simple]
    for url in extra:
        uv += ["--index", url]
    return simple, InstallCommands(shlex.join(pip), shlex.join(uv))


# --- the choice ------------------------------------------------------------------------


def _override(environ: Mapping[str, str], recipes: Mapping[str, Recipe]) -> str | None:
    value = environ.get(ENV_VARIANT, "").strip()
    if not value:
        return None
    if value not in recipes:
        close = difflib.get_close_matches(value, sorted(recipes), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SelectionError(
            f"ptkit select: {ENV_VARIANT}={value!r} is not a variant{hint}; expected one of "
            f"{', '.join(sorted(recipes))}: set {ENV_VARIANT} to one of them, or unset it to "
            "choose from the detected hardware"
        )
    return value


def select_variant(
    machine: Machine,
    recipes: Mapping[str, Recipe],
    *,
    index_url: str | None,
    environ: Mapping[str, str] | None = None,
) -> Selection:
    """The variant for ``machine`` among ``recipes`` (``load_all_recipes``).

    ``index_url``: the ptkit index root (``<root>/<index-path>/simple`` per variant);
    None leaves the commands out. ``environ``: where ``PTKIT_VARIANT`` is read
    (default ``os.environ``). Raises ``SelectionError`` for an unknown override, a bad
    index URL or recipes without a cpu variant."""
    environ = os.environ if environ is None else environ
    override = _override(environ, recipes)
    platform = wheel_platform(machine.system, machine.machine)
    devices = _devices(machine)
    reports: dict[str, dict[str, Coverage]] = {}
    for device in devices:
        backend = backend_for_device_kind(device.kind).name
        reports[device.label] = {
            recipe.name: _coverage(recipe, device, machine)
            for recipe in sorted(recipes.values(), key=_newest_first)
            if recipe.backend == backend
        }
    decision, kind = _decide(devices, reports, recipes, platform, machine)

    # The detected choice's notes are about that choice: not repeated under an override.
    notes = list(decision.notes) if override is None else []
    if platform is None:
        notes.append(
            f"ptkit releases no wheels for {machine.system} {machine.machine}: build from "
            "source (the recipes' platforms are manylinux_2_28 x86_64/aarch64, macOS arm64, "
            "Windows x86_64)"
        )
    variant, source, reason = decision.variant, "detected", decision.reason
    if override is not None:
        variant, source = override, ENV_VARIANT
        reason = f"{ENV_VARIANT}={override} (detected: {decision.variant}, {decision.reason})"
        recipe = recipes[override]
        if not _released_for(recipe, platform):
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

    report_list = []
    for device in devices:
        counted = device.supported and device.kind == kind
        note = device.note
        if device.supported and not counted and kind is not None:
            note = (
                f"a ptkit wheel carries one GPU backend; the "
                f"{backend_for_device_kind(kind).device_kind_title}s decide here: "
                "not counted"
            )
        report_list.append(
            DeviceReport(
                label=device.label,
                kind=device.kind,
                name=device.name,
                arch=device.arch,
                counted=counted,
                note=note,
                coverage=tuple(reports[device.label].values()),
            )
        )

    chosen = recipes[variant]
    simple, commands = (None, None)
    if index_url is not None:
        simple, commands = install_commands(index_url, chosen)
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
) -> Selection:
    """``detect()`` then ``select_variant()`` with the recipes of ``recipes_dir()``:
    what ``ptkit select`` runs (the arguments are ``detect()``'s and
    ``select_variant()``'s)."""
    directory = recipes_directory or recipes_dir()
    try:
        recipes = load_all_recipes(directory)
    except RecipeError as exc:
        raise SelectionError(f"ptkit select: {exc}") from exc
    machine = detect(root, commands=commands, timeout_s=timeout_s, platform_facts=platform_facts)
    return select_variant(machine, recipes, index_url=index_url, environ=environ)


# --- the report -------------------------------------------------------------------------


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
    """The human report: each device and what covers it, the choice, the commands."""
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
