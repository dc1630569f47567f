"""Stage 1, build: scikit-build-core through pip, in ``<build root>/cmake-<variant>``.

The variant's backend is required (``PTKIT_REQUIRE_BACKEND=ON``: never a CPU-only wheel
under a GPU variant's name unless asked), CMake reports what each backend did
(``ptkit-build-report.json``, printed as a table), the compiler cache's launchers and
statistics come from :mod:`ptkit.release.pipeline.compiler_cache`, and a cuda variant's
toolkit from :mod:`ptkit.release.pipeline.cuda_toolkit`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from ptkit.recipes.model import Recipe
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.compiler_cache import CompilerCache, find_compiler_cache, version_of
from ptkit.release.pipeline.errors import BuildError

__all__ = ["REPORT_FILE", "BuildReportRow", "BuiltWheel", "build_wheel", "format_report"]

REPORT_FILE = "ptkit-build-report.json"


@dataclasses.dataclass(frozen=True)
class BuildReportRow:
    backend: str
    status: str  # built, skipped or failed
    detail: str


@dataclasses.dataclass(frozen=True)
class BuiltWheel:
    wheel: Path
    report: list[BuildReportRow]
    cache: str  # "sccache: 3 hits, 9 misses", or why there is none
    log: Path


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


def _pip_wheel_command(
    repo: Path,
    build_dir: Path,
    out_dir: Path,
    require_backend: bool,
    cache: CompilerCache | None,
) -> list[str]:
    require = "ON" if require_backend else "OFF"
    # An empty launcher clears one a previous build left in the CMake cache.
    launchers = (
        cache.cmake_defines()
        if cache is not None
        else [
            "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=",
            "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=",
        ]
    )
    command = [
        sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
        "-C", f"build-dir={build_dir}",
        "-C", f"cmake.define.PTKIT_REQUIRE_BACKEND={require}",
    ]  # fmt: skip
    for define in launchers:
        command += ["-C", define]
    return [*command, "-w", str(out_dir), str(repo)]


def _compiler_cache(
    recipe: Recipe, nvcc: Path | None, build_root: Path, choice: str
) -> CompilerCache | None:
    """The compiler cache for this build, told which nvcc it would wrap."""
    nvcc_version = version_of([str(nvcc), "--version"]) if nvcc and choice != "none" else None
    try:
        return find_compiler_cache(build_root, choice=choice, nvcc=nvcc_version)
    except LookupError as exc:
        raise BuildError(
            "build", recipe.name, str(exc), "install it, or pass --compiler-cache auto or none"
        ) from exc


def build_wheel(
    recipe: Recipe,
    *,
    repo: Path,
    build_root: Path,
    out_dir: Path,
    require_backend: bool = True,
    compiler_cache: str = "auto",
    env: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> BuiltWheel:
    """``pip wheel`` the project ``repo`` for ``recipe``'s variant into ``out_dir``.

    ``compiler_cache`` is one of ``compiler_cache.CACHE_CHOICES``.
    """
    variant = recipe.name
    build_dir = build_root / f"cmake-{variant}"
    out_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / REPORT_FILE).unlink(missing_ok=True)
    toolkit = cuda_toolkit.find_cuda_toolkit(repo, recipe)
    cache = _compiler_cache(
        recipe, toolkit.compiler if toolkit else None, build_root, compiler_cache
    )
    full_env = {
        **os.environ,
        **(env or {}),
        "PTKIT_VARIANT": variant,
        **cuda_toolkit.toolkit_environment(toolkit),
        **(cache.env if cache else {}),
    }
    before = None
    if cache is not None:
        cache.start()
        before = cache.stats()
    command = _pip_wheel_command(repo, build_dir, out_dir, require_backend, cache)
    try:
        proc = subprocess.run(command, env=full_env, capture_output=True, text=True, check=False)
        summary = cache.summary(before) if cache is not None else "no compiler cache"
    finally:
        if cache is not None:
            cache.stop()
    log = out_dir / "build.log"
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    rows = read_report(build_dir)
    if rows:
        echo(f"      build report ({variant}):\n{format_report(rows)}")
    wheels = sorted(out_dir.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        failed = [r for r in rows if r.status == "failed"]
        cause = failed[0].detail if failed else f"pip wheel exited with {proc.returncode}"
        fix = (
            "the build report's row above ends with the fix"
            if failed
            else "the end of the build log is above"
        )
        raise BuildError("build", variant, cause, f"{fix}; the whole log: {log}", details=tail)
    return BuiltWheel(wheels[0], rows, summary, log)
