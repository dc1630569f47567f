"""Which build of the chosen variant fits this environment's torch, and the torch pin
its install commands carry.

A stable variant has one build, for every torch: no pin. A torch-mode variant
(``abi = "torch"``) has one per torch minor of its ``[torch] versions``
(:mod:`ptkit.recipes.torch_builds`), each requiring exactly its minor:

- torch installed, of a listed minor: that minor's build, and the commands pin the
  installed torch (``torch==2.13.0+cpu``), because pip and uv, with PyPI among their
  indexes, would otherwise upgrade torch to take the newest build;
- torch installed, of a minor with no build: the newest build, pinned to its minor
  (``torch==2.14.*``): the install replaces torch, and the note says so, with the way to
  keep it (build that minor from source);
- no torch: the newest build and its minor's torch (``torch==2.14.*``).
"""

from __future__ import annotations

import dataclasses

from ptkit.recipes.model import Recipe
from ptkit.recipes.torch_builds import TorchBuild, TorchMinor, recipe_builds

__all__ = ["TorchChoice", "choose_torch_build"]


@dataclasses.dataclass(frozen=True)
class TorchChoice:
    build: TorchBuild
    """The build the commands install."""
    torch: str | None
    """The torch the choice was made for (this environment's, or ``--torch``); None: none."""
    pin: str | None
    """The torch requirement the commands carry (``torch==2.13.0+cpu``); None: stable."""
    note: str
    """Why this build and this pin ("" for a stable variant)."""


def choose_torch_build(recipe: Recipe, torch: str | None) -> TorchChoice:
    """The build of ``recipe`` for an environment whose torch is ``torch`` (a version,
    ``2.13.0+cpu``; None: no torch), see the module docstring."""
    builds = recipe_builds(recipe)
    if recipe.abi != "torch":
        return TorchChoice(builds[0], torch, None, "")
    listed = ", ".join(str(b.torch) for b in builds)
    newest = builds[-1]
    assert newest.torch is not None  # a torch-mode recipe's builds are per torch minor
    mode = f"{recipe.name} is built per torch minor (abi = 'torch': {listed})"
    minor = TorchMinor.parse(torch) if torch else None
    for build in builds:
        if minor is not None and build.torch == minor:
            return TorchChoice(
                build,
                torch,
                f"torch=={torch}",
                f"{mode}: torch {torch} here takes the build for torch {minor} "
                f"(+{build.local_version}); the commands keep this torch (torch=={torch}): "
                "with PyPI among the indexes, pip and uv would otherwise upgrade torch to "
                "take the newest build",
            )
    pin = f"torch=={newest.torch}.*"
    if torch is None:
        why = (
            f"{mode}: there is no torch here, so the commands install the newest build "
            f"(+{newest.local_version}) with torch {newest.torch}"
        )
    else:
        why = (
            f"{mode}, not for torch {minor or torch}, which is installed here: the commands "
            f"install the build for torch {newest.torch} (+{newest.local_version}) and "
            f"replace torch {torch} with torch {newest.torch}; to keep torch {torch}, build "
            f"it from source (add its minor to [torch] versions, then ptkit build --torch "
            f"{minor or '<minor>'})"
        )
    return TorchChoice(newest, torch, pin, why)
