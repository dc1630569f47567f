"""``ptkit build``: build one variant's wheel here, the way the release pipeline does.

Stages so far: build (scikit-build-core through pip, the variant's backend required)
and the build report (what each backend did). The wheel is written to a scratch
folder and moved into ``dist/<variant>/`` only when every stage passed, so ``dist/``
never holds a partial or failed build.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ptkit.build.recipes import RecipeError, load_recipe

__all__ = ["BuildError", "BuildReportRow", "build_variant", "format_report", "read_report"]

REPORT_FILE = "ptkit-build-report.json"


class BuildError(RuntimeError):
    """A stage failed; the message names the stage, the cause and the fix."""


@dataclasses.dataclass(frozen=True)
class BuildReportRow:
    backend: str
    status: str  # built, skipped or failed
    detail: str


def read_report(build_dir: Path) -> list[BuildReportRow]:
    """The rows CMake wrote at the end of configure (cmake/ptkit-report.cmake)."""
    path = build_dir / REPORT_FILE
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [BuildReportRow(r["backend"], r["status"], r["detail"]) for r in data["backends"]]


def format_report(rows: list[BuildReportRow]) -> str:
    lines = [f"  {'backend':<8} {'status':<8} detail"]
    lines += [f"  {r.backend:<8} {r.status:<8} {r.detail}" for r in rows]
    return "\n".join(lines)


def _toolkit_env(repo: Path, variant: str) -> dict[str, str]:
    """The variant's pip toolkit from .toolchains/<variant> (scripts/bootstrap installs it)."""
    roots = sorted(repo.glob(f".toolchains/{variant}/lib/python*/site-packages/nvidia/cu*"))
    return {"PTKIT_CUDA_ROOT": str(roots[-1])} if roots else {}


def build_variant(
    variant: str,
    *,
    repo: Path,
    dist: Path,
    require_backend: bool = True,
    echo: Callable[[str], None] = print,
) -> Path:
    """Build ``variant``'s wheel from ``repo`` into ``dist/<variant>/``; return its path."""
    try:
        load_recipe(variant, repo / "recipes")
    except RecipeError as exc:
        raise BuildError(f"ptkit build: recipe: {exc}") from exc
    build_dir = repo / "build" / f"cmake-{variant}"
    scratch = repo / "build" / f"wheel-tmp-{variant}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    (build_dir / REPORT_FILE).unlink(missing_ok=True)

    require = "ON" if require_backend else "OFF"
    command = [
        sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
        "-C", f"build-dir={build_dir}",
        "-C", f"cmake.define.PTKIT_REQUIRE_BACKEND={require}",
        "-w", str(scratch), str(repo),
    ]  # fmt: skip
    env = {**os.environ, "PTKIT_VARIANT": variant, **_toolkit_env(repo, variant)}
    echo(f"[build] {variant}: scikit-build-core (CMake, backend required: {require_backend})")
    started = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    rows = read_report(build_dir)
    if rows:
        echo(f"[report] {variant}:\n{format_report(rows)}")
    wheels = sorted(scratch.glob("ptkit-*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        failed = [r for r in rows if r.status == "failed"]
        cause = failed[0].detail if failed else "see the output above"
        shutil.rmtree(scratch, ignore_errors=True)
        raise BuildError(
            f"ptkit build: stage 'build' failed for variant {variant}: {cause}\n{tail}\n"
            f"Nothing was written to {dist / variant}."
        )
    target = dist / variant
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("ptkit-*.whl"):
        old.unlink()
    final = target / wheels[0].name
    # Copied next to its final name first, then renamed: a reader of dist/ sees the whole
    # wheel or none, even when dist/ is on another file system.
    partial = target / f".{wheels[0].name}.part"
    shutil.move(wheels[0], partial)
    os.replace(partial, final)
    shutil.rmtree(scratch, ignore_errors=True)
    echo(
        f"[done] {final} ({final.stat().st_size / 1e6:.2f} MB, {time.monotonic() - started:.0f} s)"
    )
    return final
