"""The release plan: variant x platform (x torch minor) x CPython, from the recipes and
pyproject.toml.

Pure functions: the plan is computed and printed without running anything (``ptkit
matrix``, ``--json``), as cibuildwheel's ``--print-build-identifiers`` does.

Each recipe's ``[release]`` table names the platforms its wheel is built for
(:data:`ptkit.platforms.RELEASE_PLATFORMS`: runner, cibuildwheel's names, wheel tag).
The wheel is ``py3-none-<platform>`` (no libpython), so each job builds one wheel, with
the first CPython, and cibuildwheel reuses it for every later CPython and tests it there
(``find_compatible_wheel`` in cibuildwheel's ``util/packaging.py``, called before each
build step in ``platforms/*.py``). A stable recipe has one job per platform; a
torch-mode one (``abi = "torch"``) one per platform and torch minor of its ``[torch]
versions`` (:mod:`ptkit.recipes.torch_builds`), each with a cibuildwheel file of its own
(``ci/cibuildwheel/<variant>-torch2.13.toml``) that installs that torch before the build
and tests with it.

A tree that holds the toolkit's source too (ptkit's own: ``toolkit/pyproject.toml``
builds the ``ptkit`` distribution) has its wheel in the plan: pure Python, built once,
installed into every test environment (the ops depend on it) and served by every
variant's index. Another project gets ``ptkit`` from the package index.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

from ptkit._version import __version__
from ptkit.platforms import PLATFORMS, RELEASE_PLATFORMS, ReleasePlatform
from ptkit.recipes.model import Recipe, RecipeError, load_recipe, recipe_path
from ptkit.recipes.torch_builds import TorchBuild, recipe_builds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "CIBW_DIR",
    "PYTHONS",
    "TOOLKIT_DIST",
    "Job",
    "MatrixError",
    "Plan",
    "Toolkit",
    "config_name",
    "format_plan",
    "load_plan",
    "plan_json",
]

# Every CPython a wheel is tested on: 3.10-3.15 and free-threaded 3.15t (cibuildwheel
# also knows cp314t, which the release leaves out).
PYTHONS = ("cp310", "cp311", "cp312", "cp313", "cp314", "cp315", "cp315t")
CIBW_DIR = Path("ci/cibuildwheel")
# Where the toolkit wheel is built (Makefile's `make toolkit` too) and found again.
TOOLKIT_DIST = "dist/toolkit"
_TOOLKIT_PROJECT = "ptkit"


class MatrixError(ValueError):
    """The recipes cannot make a release plan; the message lists every problem."""


def config_name(build: TorchBuild) -> str:
    """``cpu`` (a stable build), ``cpu-torch2.13``: the build's cibuildwheel file and jobs."""
    if build.torch is None:
        return build.recipe.name
    return f"{build.recipe.name}-{build.torch.label}"


@dataclasses.dataclass(frozen=True)
class Job:
    """One (variant, platform, build): one wheel, built once, tested on every CPython."""

    variant: str
    platform: ReleasePlatform
    wheel: str
    """The wheel's file name (the version is this ptkit's; CI builds the tagged one)."""
    identifiers: tuple[str, ...]
    """cibuildwheel's build identifiers, in build order: the first builds, all test."""
    torch: str | None = None
    """The torch minor of a torch-mode build (``2.13``); None: the stable build."""
    name: str = ""
    """``cpu``, ``cpu-torch2.13``: its cibuildwheel file's name (the variant's by default)."""

    @property
    def config_file(self) -> str:
        return (CIBW_DIR / f"{self.name or self.variant}.toml").as_posix()

    def cibuildwheel_args(self) -> list[str]:
        """What the workflow (and the tests) pass to cibuildwheel for this job."""
        spec = self.platform
        return ["--platform", spec.os, "--archs", spec.arch, "--config-file", self.config_file]


@dataclasses.dataclass(frozen=True)
class Toolkit:
    """The toolkit wheel, when the tree builds it too."""

    source: str
    """Its project folder, relative to the root (``toolkit``)."""
    wheel: str
    """``ptkit-0.1.0-py3-none-any.whl``."""

    def build_command(self) -> str:
        return f"python -m pip wheel --no-deps -w {TOOLKIT_DIST} {self.source}/"


@dataclasses.dataclass(frozen=True)
class Plan:
    recipes: tuple[Recipe, ...]
    jobs: tuple[Job, ...]
    project: str = "ptkit-ops"
    """The distribution the wheels are of (``[project] name`` in pyproject.toml)."""
    version: str = __version__
    """Its version without the local label."""
    toolkit: Toolkit | None = None
    """The toolkit wheel this tree builds (ptkit's own), else None: ``ptkit`` from PyPI."""
    build_requires: tuple[str, ...] = ()
    """pyproject.toml's ``[build-system] requires``: what a torch-mode build installs
    into the build Python itself (it builds without isolation, with its torch pinned)."""

    def builds(self) -> tuple[TorchBuild, ...]:
        """Every build of every recipe: one each for a stable recipe, one per torch minor
        for a torch-mode one (each has a cibuildwheel file)."""
        return tuple(b for r in self.recipes for b in recipe_builds(r))


def _missing_release(recipe: Recipe, repo: Path) -> list[str]:
    """A recipe without ``[release]`` builds locally but has no place in the plan: say so,
    rather than leave a variant out of the release unnoticed."""
    if recipe.release is not None:
        return []
    return [
        f"{recipe_path(recipe.name, repo / 'recipes')}: no [release] table; add one with "
        "platforms = [...] (the platforms its backend runs on) and "
        'test-command = "python -m ptkit.runtime.smoke <package>"'
    ]


def _uninstallable_toolkit(recipe: Recipe, repo: Path) -> list[str]:
    """``[toolkit] packages`` for a release platform that has no toolkit venv (macOS): the
    generated configuration could not install them, so the build would miss them."""
    if not recipe.toolkit.packages:
        return []
    return [
        f"{recipe_path(recipe.name, repo / 'recipes')}: [toolkit] packages cannot be "
        f"installed for the {name} release: ptkit.platforms.{platform.os} has no toolkit "
        "venv (toolkit_dir); release it on another platform or drop the packages"
        for name in release_platforms(recipe)
        for platform in [RELEASE_PLATFORMS[name]]
        if not PLATFORMS[platform.os].toolkit_dir
    ]


def _pyproject(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        return data
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"ptkit matrix: {path} is not valid TOML: {exc}") from exc


def _project(repo: Path) -> tuple[str, str]:
    """(distribution, version without label) from ``repo/pyproject.toml``: the ``[project]``
    name, and the ``base-version`` of ptkit's version provider (``"ptkit"``: the toolkit's
    version, as ptkit-ops releases in lockstep) or a static ``version``."""
    path = repo / "pyproject.toml"
    if not path.is_file():
        raise MatrixError(
            f"ptkit matrix: no pyproject.toml in {repo}: run it from the project root or "
            "pass --source"
        )
    data = _pyproject(path)
    project = data.get("project", {})
    name = project.get("name")
    if not isinstance(name, str) or not name:
        raise MatrixError(f"ptkit matrix: {path} has no [project] name")
    provider = data.get("tool", {}).get("scikit-build", {}).get("metadata", {}).get("version", {})
    version = provider.get("base-version") or project.get("version")
    if not isinstance(version, str) or not version:
        raise MatrixError(
            f"ptkit matrix: {path} gives {name} no version: set base-version under "
            "[tool.scikit-build.metadata.version] (ptkit new writes it)"
        )
    return name, __version__ if version == "ptkit" else version


def _toolkit(repo: Path) -> Toolkit | None:
    """The toolkit's project in this tree (``toolkit/pyproject.toml`` naming ``ptkit``)."""
    path = repo / "toolkit" / "pyproject.toml"
    if not path.is_file() or _pyproject(path).get("project", {}).get("name") != _TOOLKIT_PROJECT:
        return None
    return Toolkit("toolkit", f"{_TOOLKIT_PROJECT}-{__version__}-py3-none-any.whl")


def load_plan(repo: Path) -> Plan:
    """Every recipe in ``repo/recipes`` and its jobs; ``MatrixError`` lists all problems."""
    recipes_dir = repo / "recipes"
    variants = sorted(p.stem for p in recipes_dir.glob("*.toml"))
    if not variants:
        raise MatrixError(
            f"ptkit matrix: no recipes in {recipes_dir} (expected recipes/<variant>.toml); "
            "run it from the project root or pass --source"
        )
    problems: list[str] = []
    recipes: list[Recipe] = []
    for variant in variants:
        try:
            recipe = load_recipe(variant, recipes_dir)
        except RecipeError as exc:
            problems.append(str(exc))
            continue
        problems += _missing_release(recipe, repo) + _uninstallable_toolkit(recipe, repo)
        recipes.append(recipe)
    if problems:
        raise MatrixError("ptkit matrix: invalid recipes:\n  " + "\n  ".join(problems))
    project, version = _project(repo)
    jobs = tuple(
        _job(build, RELEASE_PLATFORMS[p], project, version)
        for recipe in recipes
        for build in recipe_builds(recipe)
        for p in release_platforms(recipe)
    )
    requires = _pyproject(repo / "pyproject.toml").get("build-system", {}).get("requires", [])
    return Plan(
        tuple(recipes),
        jobs,
        project,
        version,
        _toolkit(repo),
        tuple(str(r) for r in requires),
    )


def release_platforms(recipe: Recipe) -> tuple[str, ...]:
    """The recipe's release platforms, by name (``[release] platforms``)."""
    return recipe.release.platforms if recipe.release else ()


def _job(build: TorchBuild, platform: ReleasePlatform, project: str, base_version: str) -> Job:
    version = f"{base_version}+{build.local_version}"
    return Job(
        variant=build.recipe.name,
        platform=platform,
        wheel=f"{re.sub(r'[-_.]+', '_', project)}-{version}-py3-none-{platform.wheel_tag}.whl",
        identifiers=tuple(f"{python}-{platform.identifier}" for python in PYTHONS),
        torch=str(build.torch) if build.torch is not None else None,
        name=config_name(build),
    )


def format_plan(plan: Plan) -> str:
    """The plan for a person: the toolkit, then per (variant, platform) the one build and
    every test."""
    tests = sum(len(job.identifiers) for job in plan.jobs)
    per = (
        "variant x platform x torch minor"
        if any(job.torch for job in plan.jobs)
        else "variant x platform"
    )
    lines = [
        f"{plan.project} release plan: {len(plan.recipes)} variants, {len(plan.jobs)} wheels "
        f"(one py3-none wheel per {per}), {tests} test runs",
        "Each wheel is built once, with the first CPython; cibuildwheel then reuses it for each",
        "later CPython (find_compatible_wheel: a py3-none wheel fits any CPython 3 of its",
        "platform) and tests it there.",
    ]
    if plan.toolkit is not None:
        lines += [
            f"The toolkit {plan.toolkit.wheel} is built once ({plan.toolkit.build_command()}),",
            "installed into every test environment and served by every variant's index.",
        ]
    for job in plan.jobs:
        command = " ".join(["cibuildwheel", *job.cibuildwheel_args()])
        torch = f" x torch {job.torch}" if job.torch else ""
        lines += [
            "",
            f"{job.variant} x {job.platform.name}{torch}  [{job.platform.runner}: {command}]",
            f"  build once: {job.identifiers[0]} -> {job.wheel}",
            f"  test on:    {' '.join(job.identifiers)}",
        ]
    return "\n".join(lines)


def plan_json(plan: Plan) -> dict[str, Any]:
    toolkit = plan.toolkit
    return {
        "project": plan.project,
        "version": plan.version,
        "pythons": list(PYTHONS),
        "toolkit": (
            {"source": toolkit.source, "wheel": toolkit.wheel, "build": toolkit.build_command()}
            if toolkit
            else None
        ),
        "jobs": [
            {
                "variant": job.variant,
                "torch": job.torch,
                "config_file": job.config_file,
                "platform": job.platform.name,
                "runner": job.platform.runner,
                "cibuildwheel": job.cibuildwheel_args(),
                "build": job.identifiers[0],
                "wheel": job.wheel,
                "test": list(job.identifiers),
            }
            for job in plan.jobs
        ],
    }
