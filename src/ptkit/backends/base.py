"""The interface every backend module fills in, and the records it answers with.

A backend is what one kind of native code needs, said once: its names (recipe,
manifest, torch device type, dispatch key, hardware kind), how its targets are written
and checked, how a build override is read from the environment, how requested targets
are resolved against what a compiler can build, whether a library's targets cover a
device, the runtime-major rule, the torch and vendor libraries a wheel must not carry,
and its PEP 825 variant properties. The loader, ``ptkit select``, the doctor, the index,
the wheel audit, the release matrix and CMake (through ``python -m ptkit.backends``)
ask these objects; none keeps its own copy of a rule.

Standard library only: CMake runs this package with any Python >= 3.10.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Protocol

from ptkit.backends.toolchain_cache import cached_toolchains, toolchains_dir

__all__ = [
    "Backend",
    "Coverage",
    "Device",
    "Resolution",
    "TargetError",
    "TargetRequest",
    "ToolkitCandidate",
    "TorchBuild",
    "Versions",
    "version_pair",
]

_VERSION_PAIR = re.compile(r"(\d+)\.(\d+)")


def version_pair(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of the first ``X.Y`` in ``text``: ``2.14.1+cu130`` -> (2, 14),
    ``cuda 13.5.37`` -> (13, 5); None when there is none. The one parser of versions
    for the loader, ``ptkit select`` and the doctor."""
    match = _VERSION_PAIR.search(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


class TargetError(ValueError):
    """A target or a target override that cannot be used; the message names where it
    came from (the variable, the recipe field), what was expected and the fix."""


@dataclasses.dataclass(frozen=True)
class Coverage:
    """Whether a library's code runs on one device, and how (or why not)."""

    covered: bool
    how: str


@dataclasses.dataclass(frozen=True)
class Device:
    """One accelerator as the backend rules see it, whether torch reported it (the
    loader: ``cuda:0``) or the OS probes did (``ptkit select``, the doctor: ``nvidia:0``)."""

    label: str
    name: str
    arch: str | None
    """In the backend's own spelling: ``sm_90``, ``gfx942:sramecc+:xnack-``; None: unknown."""
    pci_device_id: int | None = None


@dataclasses.dataclass(frozen=True)
class Versions:
    """What CUDA's PTX rule needs beside the device: the version of the toolkit that made
    the code and the CUDA version the driver supports (None: unknown)."""

    toolkit: tuple[int, int] | None = None
    driver: tuple[int, int] | None = None


NO_VERSIONS = Versions()


@dataclasses.dataclass(frozen=True)
class TargetRequest:
    """The targets a build asks for, after the environment's override."""

    targets: tuple[str, ...]
    optional: tuple[str, ...]
    source: str
    """``recipe`` (or the CMake call's TARGETS), or the override variable that set them."""
    note: str = ""
    """What the build should say about where they came from (an override that replaced
    the recipe's targets, one variable that won over another); "" for nothing to say."""


@dataclasses.dataclass(frozen=True)
class Resolution:
    """Requested targets against what the compiler builds: what is built, what optional
    targets were dropped, or the error (with the fix) that stops the build."""

    built: tuple[str, ...]
    dropped: tuple[str, ...]
    error: str = ""


@dataclasses.dataclass(frozen=True)
class ToolkitCandidate:
    """A place a backend's toolkit may be, in the order the build tries them."""

    compiler: Path
    """The compiler (``<root>/bin/nvcc``, ``hipcc``, ``icpx``); it may not exist."""
    source: str
    """Why it is looked at: the variable that names it, ``pip``, ``PATH`` …"""
    explicit: bool = False
    """Named by the user (a variable): the build takes it or fails, never another one."""

    @property
    def root(self) -> Path:
        """The toolkit root: the folder above the compiler's ``bin/``."""
        return self.compiler.parent.parent


class TorchBuild(Protocol):
    """What the rules need to know about a torch build (the loader's ``TorchFacts``)."""

    @property
    def version(self) -> str: ...
    @property
    def cuda(self) -> str | None: ...
    @property
    def hip(self) -> str | None: ...
    @property
    def has_xpu(self) -> bool: ...
    @property
    def xpu_available(self) -> bool: ...
    @property
    def has_mps(self) -> bool: ...
    @property
    def mps_available(self) -> bool: ...


def on_path(name: str, environ: Mapping[str, str]) -> Path | None:
    """``name`` on the PATH of ``environ``."""
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    return Path(found) if found else None


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """`` (did you mean 'cu13'?)`` for the closest of ``known``, else ``""``."""
    close = difflib.get_close_matches(value, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Backend:
    """The defaults are the CPU's: no device, no targets, no runtime of its own."""

    name: ClassVar[str]
    """The recipe's and the manifest's spelling: ``cpu``, ``cuda``, ``hip``, ``xpu``, ``metal``."""
    title: ClassVar[str]
    """For messages: ``CUDA``, ``ROCm/HIP`` …"""
    device_type: ClassVar[str]
    """The torch device type its kernels serve (``cuda`` for HIP too: ROCm torch says cuda)."""
    dispatch_key: ClassVar[str]
    """The dispatcher key its kernels register at (``CUDA`` for HIP too)."""
    device_kind: ClassVar[str | None] = None
    """The hardware probes' kind of device it serves (``nvidia``, ``amd``, ``intel``,
    ``apple``); None: it serves the CPU."""
    device_kind_title: ClassVar[str] = ""
    """``NVIDIA GPU`` …"""
    target_field: ClassVar[str | None] = None
    """The recipe's ``[targets]`` list of this backend (``cuda``: ``targets.cuda`` and
    ``targets.cuda-optional``); None: it has no device targets."""
    target_example: ClassVar[str] = ""
    """What a target looks like, for messages: ``sm_90, sm_90a, sm_100f or compute_120``."""
    override_variable: ClassVar[str | None] = None
    """The environment variable that replaces a build's requested targets."""
    release_platforms: ClassVar[tuple[str, ...]] = ()
    """The release platforms (``ptkit.platforms``) its code and torch's builds exist for."""
    runtime_libraries: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """OS (``linux``, ``macos``, ``windows``) -> the libraries of torch and of the GPU
    runtime that its native code links (patterns): they come with the user's torch, so
    the repair leaves them out of the wheel and the audit allows them."""
    toolkit_name: ClassVar[str] = ""
    """The manifest's ``toolkit.name`` when built with its toolkit (``cuda``, ``hip``)."""
    compiler_name: ClassVar[str] = ""
    """The device compiler the build runs (``nvcc``, ``hipcc``, ``icpx``); "" for none."""
    target_pattern: ClassVar[str | None] = None
    """A regular expression every target matches, for the recipes' JSON schema (editors
    check with it); ``target_problem`` is the check itself."""
    toolkit_search: ClassVar[str] = ""
    """Where ``toolkit_candidates`` looks, in order, for the no-toolkit message."""
    toolkit_fix: ClassVar[str] = ""
    """How else to provide the toolkit (a variable, a system package), for that message."""
    cached_toolkits: ClassVar[bool] = False
    """Whether ptkit installs this backend's recipe toolkits (their ``[toolkit] packages``
    from PyPI) into its toolchain cache (``ptkit toolchain install``) and finds them there
    (``toolkit_candidates``): CUDA's nvcc is a pip package that runs from any folder."""

    # --- toolkit discovery ------------------------------------------------------------

    def toolkit_candidates(
        self, environ: Mapping[str, str], search_paths: Sequence[str]
    ) -> tuple[ToolkitCandidate, ...]:
        """Where the build looks for the compiler, in order (CMake takes the first that
        exists; the doctor lists them all). ``search_paths``: the build Python's
        ``sys.path`` (pip-installed toolkits live there), a toolchain cache's first."""
        return ()

    def find_toolkit(
        self, environ: Mapping[str, str], search_paths: Sequence[str]
    ) -> ToolkitCandidate | None:
        """The toolkit the build uses: an explicitly named one (existing or not, so the
        build reports it), else the first candidate whose compiler exists."""
        for candidate in self.toolkit_candidates(environ, search_paths):
            if candidate.explicit or candidate.compiler.is_file():
                return candidate
        return None

    def toolkit_missing(
        self, candidates: Sequence[ToolkitCandidate], install_hint: str = ""
    ) -> str:
        """Why no toolkit was found and how to get one: where the search looked
        (``candidates``, the ones that do not exist) and the fix, ``install_hint`` first
        (the recipe's ``pip install …`` of its ``[toolkit] packages``, given by the caller
        that read the recipe)."""
        looked = "; ".join(f"{c.compiler} ({c.source}) does not exist" for c in candidates)
        fixes = [f for f in (install_hint, self.toolkit_fix) if f]
        return (
            f"{self.compiler_name or self.title} not found (searched {self.toolkit_search}"
            f"{': ' + looked if looked else ''}). Fix: {', or '.join(fixes) or 'install it'}"
        )

    def pip_compilers(self, site_packages: Path) -> list[Path]:
        """The compilers a pip-installed toolkit put into ``site_packages`` (the recipes'
        ``[toolkit] packages``), newest first; [] for a backend that has none there."""
        return []

    def cached_toolkit_paths(self, environ: Mapping[str, str]) -> list[str]:
        """The site-packages of this backend's toolchains in ptkit's toolchain cache
        (:mod:`ptkit.backends.toolchain_cache`), newest version first; [] for a backend
        whose toolkits are not cached there."""
        if not self.cached_toolkits:
            return []
        paths = (t.site_packages for t in cached_toolchains(environ, backend=self.name))
        return [str(p) for p in paths if p is not None]

    def toolkit_place(self, site_packages: Path, environ: Mapping[str, str]) -> str:
        """``ptkit toolchain cache`` for a site-packages inside it, else ``pip``: how a
        candidate's source is said."""
        if site_packages.is_relative_to(toolchains_dir(environ)):
            return "ptkit toolchain cache"
        return "pip"

    def release_toolkit_environment(
        self, site_packages: str, toolkit_version: str
    ) -> dict[str, str]:
        """What a release build needs to find the recipe's pip toolkit (``[toolkit]
        packages``) installed into a venv whose site-packages is ``site_packages``; {} where
        the build finds it unaided (or the backend has no pip toolkit)."""
        return {}

    # --- targets --------------------------------------------------------------------------

    def target_problem(self, target: str) -> str | None:
        """Why ``target`` is not one of this backend's targets, or None."""
        return f"{self.name} has no device targets, got {target!r}"

    def check_targets(self, targets: Sequence[str], where: str) -> None:
        """``TargetError`` naming ``where`` (a recipe field, a variable) for the first bad one."""
        for target in targets:
            problem = self.target_problem(target)
            if problem:
                raise TargetError(f"{where}: {problem}")

    def manifest_targets(self, targets: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The manifest's ``targets`` table for a library built for ``targets``."""
        return {self.name: tuple(targets)} if targets else {}

    def parse_override(self, value: str) -> tuple[str, ...]:
        """The targets an override variable's value asks for; ``TargetError`` when it is not
        understood. The default: target names separated by commas, semicolons or spaces."""
        items = tuple(t for t in re.split(r"[\s,;]+", value.strip()) if t)
        self.check_targets(items, f"{self.override_variable}={value!r}")
        if not items:
            raise TargetError(f"{self.override_variable}={value!r} names no target")
        return items

    def requested_targets(
        self,
        targets: Sequence[str],
        optional: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> TargetRequest:
        """``targets`` and ``optional`` (a recipe's, or a CMake call's), unless the
        override variable is set: then its targets, none optional."""
        value = (environ or {}).get(self.override_variable or "", "").strip()
        if self.override_variable and value:
            return TargetRequest(self.parse_override(value), (), self.override_variable)
        return TargetRequest(tuple(targets), tuple(optional), "recipe")

    def resolve(
        self,
        request: TargetRequest,
        supported: Iterable[str],
        compiler: str,
        toolkit_fix: str = "",
    ) -> Resolution:
        """The one resolver: each requested target the compiler lacks fails the build with
        the toolkit that has it (``minimum_toolkit``) and the fix, unless it is optional:
        then it is dropped (the manifest records the drop). ``supported``: what the
        compiler says it builds (``supports`` decides a/f variants and the like);
        ``compiler``: ``nvcc 13.5.37 at /path`` for messages."""
        have = set(supported)
        built: list[str] = []
        dropped: list[str] = []
        for target in (*request.targets, *request.optional):
            problem = self.target_problem(target)
            if problem:
                return Resolution((), (), f"{request.source}: {problem}")
            if self.supports(target, have):
                built.append(target)
                continue
            if target in request.optional and target not in request.targets:
                dropped.append(target)
                continue
            fix = [f"mark {target} optional in the recipe (targets.{self.target_field}-optional)"]
            if request.source != "recipe":
                fix.insert(0, f"remove it from {request.source}")
            own_fix = self.missing_target_fix(target, request.source) or toolkit_fix
            if own_fix:
                fix.insert(0, own_fix)
            return Resolution(
                (),
                (),
                f"{self.title} target {target} {self.missing_target_reason(target)}; found "
                f"{compiler} (it builds: {' '.join(sorted(have, key=self.sort_key)) or 'nothing'}). "
                f"Fix: {', or '.join(fix)}.",
            )
        if not built:
            asked = " ".join((*request.targets, *request.optional))
            return Resolution((), tuple(dropped), f"no {self.title} target left to build ({asked})")
        return Resolution(tuple(built), tuple(dropped))

    def sort_key(self, target: str) -> tuple[int, int, str]:
        """The order targets are listed in (CUDA: SASS before PTX, by capability)."""
        return (0, 0, target)

    def supports(self, target: str, supported: set[str]) -> bool:
        """Whether a compiler that lists ``supported`` builds ``target``."""
        return target in supported

    def missing_target_reason(self, target: str) -> str:
        """``needs CUDA >= 13.5`` or ``was removed after CUDA 12.9``: why a compiler lacks it."""
        return "is not built by this compiler"

    def missing_target_fix(self, target: str, source: str) -> str:
        """The fix for a missing ``target`` asked by ``source`` when it is not the toolkit
        fix every missing target gets (a target removed from the toolkit: another toolkit,
        or drop it); "" for that fix."""
        return ""

    # --- devices ----------------------------------------------------------------------------

    def coverage(
        self, device: Device, targets: Mapping[str, Sequence[str]], versions: Versions = NO_VERSIONS
    ) -> Coverage:
        """Whether a library with the manifest ``targets`` runs on ``device``."""
        return Coverage(True, f"{self.title} kernels")

    def describe_targets(self, targets: Mapping[str, Sequence[str]]) -> str:
        """The manifest's targets for humans: ``sm_90…sm_120, PTX compute_120``."""
        listed = [t for values in targets.values() for t in values]
        return ", ".join(listed) or "no device targets"

    # --- torch and its runtime ------------------------------------------------------------

    def torch_runtime(self, torch: TorchBuild) -> str | None:
        """The version of this backend's runtime that torch was built with (``13.0``)."""
        return None

    def built_into(self, torch: TorchBuild) -> bool:
        """Whether this torch build has the backend at all (devices aside): whether its
        device type exists there."""
        return True

    def torch_absent_reason(self, torch: TorchBuild) -> str | None:
        """Why this torch cannot run the backend's kernels at all, or None."""
        return None

    def runtime_problem(self, built_with: str, torch: TorchBuild) -> str | None:
        """The runtime-major rule: a library built with toolkit ``built_with`` links the
        runtime's major soname (``libcudart.so.13``), so it loads only beside a torch built
        with the same major. None where it holds (or the backend has no such runtime)."""
        if not self.toolkit_name:
            return None
        runtime = self.torch_runtime(torch) or ""
        built, runs = version_pair(built_with), version_pair(runtime)
        if built is None or runs is None or built[0] != runs[0]:
            return (
                f"built with {self.title} {built_with or '?'}, torch {torch.version} uses "
                f"{self.title} {runtime or 'none'}: the {self.title} major versions differ; "
                "install the matching variant"
            )
        return None

    # --- the index ------------------------------------------------------------------------

    def variant_properties(self, targets: Sequence[str], toolkit_version: str) -> list[str]:
        """PEP 825 variant properties (``namespace :: feature :: value``) of a variant whose
        recipe lists ``targets``; [] for a variant that needs none (it is the null variant)."""
        return []
