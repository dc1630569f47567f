"""The wheels one recipe builds per platform, and how each is named and pinned.

A ``stable`` recipe (``[variant] abi``, the default) builds one wheel: version
``<base>+<local-version>`` (``0.1.0+cpu``), with the project's own torch requirement
(``torch>=2.10``): the LibTorch stable ABI serves every torch from its target on.

A ``torch``-mode recipe builds one wheel per torch minor of ``[torch] versions``, each
against that torch's C++ API: version ``<base>+<local-version>.torch<major>.<minor>``
(``0.1.0+cpu.torch2.14``), requiring exactly that minor (``torch>=2.14,<2.15``).

Why this name and this pin:

- Installers select by requirement. From one variant's index (``ptkit.index`` files
  every build of a variant on its page), into an environment that holds torch 2.13,
  the torch 2.14 build's ``torch>=2.14,<2.15`` cannot be met without changing torch, so
  pip and uv take the torch 2.13 build — as long as no index they read offers torch
  2.14. With PyPI as an extra index they would rather upgrade torch to take the newest
  build, which is why ``ptkit select`` pins the installed torch in its commands.
- The label stays one PEP 440 local label of the variant, so the index and
  ``ptkit inspect`` read the variant and the torch minor from the version alone.
  Local segments compare as numbers when they are digits, so ``cpu.torch2.9`` <
  ``cpu.torch2.10`` < ``cpu.torch3.0``: without torch in the environment the installer
  takes the newest build and the newest torch it allows. (``torch29`` would sort after
  ``torch210``: strings compare by character.)
- The platform tag stays ``py3-none-<platform>``: a torch-mode library links torch's
  C++ libraries, never libpython, so one wheel still serves every CPython.

Standard library only: the version provider imports it inside scikit-build-core.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re

from ptkit.recipes.model import Recipe

__all__ = [
    "TorchBuild",
    "TorchBuildError",
    "TorchMinor",
    "build_for_environment",
    "build_for_label",
    "build_for_torch",
    "installed_torch",
    "recipe_builds",
    "recipe_torch_minors",
    "split_label",
]

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")
_TORCH_SEGMENT = re.compile(r"^(?P<variant>.+)\.torch(?P<major>\d+)\.(?P<minor>\d+)$")


class TorchBuildError(ValueError):
    """A torch-mode build asked for a torch the recipe does not list, or none at all;
    the message names the recipe, what it lists, what was found and the fix."""


@dataclasses.dataclass(frozen=True, order=True)
class TorchMinor:
    """A torch ``major.minor``: what a torch-mode wheel is built for and pinned to."""

    major: int
    minor: int

    @classmethod
    def parse(cls, version: str) -> TorchMinor | None:
        """``2.14`` of ``"2.14"``, ``"2.14.1+cu130"``, ``"2.14.0a0+git…"``; None for text
        that does not start with two numbers."""
        match = _VERSION.match(version)
        return cls(int(match.group(1)), int(match.group(2))) if match else None

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def label(self) -> str:
        """The local-label segments that name it: ``torch2.14``."""
        return f"torch{self.major}.{self.minor}"

    @property
    def requirement(self) -> str:
        """The wheel's torch requirement: ``torch>=2.14,<2.15`` (any patch release, no
        pre-release of the next minor)."""
        return f"torch>={self},<{self.major}.{self.minor + 1}"


@dataclasses.dataclass(frozen=True)
class TorchBuild:
    """One wheel of a recipe per platform: stable (``torch`` None) or for one torch minor."""

    recipe: Recipe
    torch: TorchMinor | None

    @property
    def local_version(self) -> str:
        """``cpu`` (stable) or ``cpu.torch2.14``: the label after ``+``."""
        base = self.recipe.local_version
        return base if self.torch is None else f"{base}.{self.torch.label}"

    @property
    def torch_requirement(self) -> str | None:
        """``torch>=2.14,<2.15`` for a torch-mode build; None: the project's own."""
        return None if self.torch is None else self.torch.requirement

    @property
    def title(self) -> str:
        """``cpu``, ``cpu for torch 2.14``: for messages and the release plan."""
        return (
            self.recipe.name if self.torch is None else f"{self.recipe.name} for torch {self.torch}"
        )


def installed_torch() -> str | None:
    """The version of the torch distribution this Python sees (``2.14.1+cu130``), read
    from its metadata (torch is not imported), or None."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def recipe_torch_minors(recipe: Recipe) -> tuple[TorchMinor, ...]:
    """The torch minors of a torch-mode recipe, oldest first (the parser checked them)."""
    minors = (TorchMinor.parse(v) for v in recipe.torch.versions)
    return tuple(sorted(m for m in minors if m is not None))


def recipe_builds(recipe: Recipe) -> tuple[TorchBuild, ...]:
    """Every build of ``recipe`` per platform: one for a stable recipe, one per torch
    minor (oldest first) for a torch-mode one."""
    if recipe.abi != "torch":
        return (TorchBuild(recipe, None),)
    return tuple(TorchBuild(recipe, minor) for minor in recipe_torch_minors(recipe))


def _listed(recipe: Recipe) -> str:
    return ", ".join(str(m) for m in recipe_torch_minors(recipe))


def build_for_torch(recipe: Recipe, torch: TorchMinor | None, source: str) -> TorchBuild:
    """The build of ``recipe`` for ``torch`` (None: the stable one); ``TorchBuildError``
    when a stable recipe is asked for a torch minor, or a torch-mode one for a minor it
    does not list. ``source`` names the recipe file in the message."""
    if recipe.abi != "torch":
        if torch is not None:
            raise TorchBuildError(
                f"{source} is a stable-ABI recipe (abi = {recipe.abi!r}): its one wheel serves "
                f"every torch from its target on, so there is no build for torch {torch}; "
                "build without --torch, or set abi = 'torch' and [torch] versions in the recipe"
            )
        return TorchBuild(recipe, None)
    if torch is None:
        raise TorchBuildError(
            f"{source} is a torch-mode recipe (abi = 'torch'): each wheel is built for one "
            f"torch minor of [torch] versions ({_listed(recipe)}); say which (--torch "
            f"{_listed(recipe).split(', ')[-1]})"
        )
    if torch not in recipe_torch_minors(recipe):
        raise TorchBuildError(
            f"{source} builds for torch {_listed(recipe)} ([torch] versions), not torch "
            f"{torch}: build for one of those, or add {str(torch)!r} to [torch] versions"
        )
    return TorchBuild(recipe, torch)


def build_for_environment(
    recipe: Recipe, installed_torch: str | None, requested: str | None, source: str
) -> TorchBuild:
    """The build that this environment makes of ``recipe``: stable, or for the torch
    minor installed here (``installed_torch``, its version; None: not installed), which
    must be the one ``requested`` (``$PTKIT_TORCH`` or ``--torch``, when given) and one
    the recipe lists. ``TorchBuildError`` says which of those fails and the fix."""
    wanted = None
    if requested:
        wanted = TorchMinor.parse(requested)
        if wanted is None or str(wanted) != requested.strip():
            raise TorchBuildError(
                f"the torch minor to build for must look like 2.14, got {requested!r}"
            )
    if recipe.abi != "torch":
        return build_for_torch(recipe, wanted, source)
    if installed_torch is None:
        raise TorchBuildError(
            f"{source} is a torch-mode recipe, built against the torch of the build "
            f"Python, and this Python has no torch: install one of torch {_listed(recipe)} "
            "into it, or build with a Python that has one (ptkit build --torch X.Y finds or "
            "installs one)"
        )
    found = TorchMinor.parse(installed_torch)
    if found is None:
        raise TorchBuildError(
            f"the build Python's torch has the version {installed_torch!r}, which names no "
            "torch minor: reinstall torch"
        )
    if wanted is not None and found != wanted:
        raise TorchBuildError(
            f"the build is for torch {wanted} but the build Python has torch "
            f"{installed_torch}: build with a Python whose torch is {wanted} (ptkit build "
            f"--torch {wanted} finds or installs one)"
        )
    return build_for_torch(recipe, found, source)


def split_label(label: str) -> tuple[str, TorchMinor | None]:
    """``("cpu", 2.14)`` of ``cpu.torch2.14``; ``("cpu", None)`` of ``cpu``."""
    match = _TORCH_SEGMENT.match(label)
    if match is None:
        return label, None
    return match.group("variant"), TorchMinor(int(match.group("major")), int(match.group("minor")))


def build_for_label(recipe: Recipe, label: str) -> TorchBuild | None:
    """The build of ``recipe`` whose version has the local ``label``, or None when no
    build of it is labelled so (another variant's label, a torch minor it does not list)."""
    for build in recipe_builds(recipe):
        if build.local_version == label:
            return build
    return None
