"""Stage 1, build: scikit-build-core through pip, in ``<build root>/cmake-<variant>``.

While it runs, what it is doing is shown as it happens (:mod:`ptkit.progress`): the
build backend's phases (``*** Configuring CMake...``), ptkit's CMake messages and the
compiler's ``[n/N]`` lines from Ninja, each with the elapsed time; pip's whole output goes
to ``build.log`` beside the wheel.

The variant's backend is required (``PTKIT_REQUIRE_BACKEND=ON``: never a CPU-only wheel
under a GPU variant's name unless asked), CMake reports what each backend did
(``ptkit-build-report.json``, printed as a table), the compiler cache's launchers and
statistics come from :mod:`ptkit.release.pipeline.compiler_cache`, and a cuda variant's
toolkit from :mod:`ptkit.release.pipeline.cuda_toolkit`.

The wheel pip wrote is checked before any repair can hide what it holds
(:mod:`ptkit.release.build_output`): a library tied to Python (libpython linked, Python's
C API needed, a module init exported) fails this stage, naming it. A failed compile whose
cause is the torch ABI (a classic header in a stable-ABI library, torch/extension.h) is
said in ptkit's words (:func:`ptkit.torch_abi.compile_error_cause`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

import click

from ptkit.progress import Steps
from ptkit.recipes.model import Recipe
from ptkit.release.build_output import python_ties
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.compiler_cache import CompilerCache, find_compiler_cache, version_of
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import install_command
from ptkit.torch_abi import compile_error_cause

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


# Ninja's status line, written when a part is done: "[12/40] Building CXX object …".
_NINJA_PART = re.compile(r"^\s*\[(\d+)/(\d+)\]\s+(.*\S)")
# scikit-build-core's phases ("*** Configuring CMake...") and ptkit's CMake messages
# ("-- ptkit: torch 2.14.1 …"); the build report is printed from its JSON file after.
_BACKEND_PHASE = re.compile(r"^\s*\*\*\* (.*\S)")
_PTKIT_MESSAGE = re.compile(r"^\s*-- (ptkit: (?!.*build report).*\S)")
# The echos that write to standard output: a terminal there gets the live display.
_STDOUT_ECHOS: tuple[Callable[..., object], ...] = (print, click.echo)


def show_line(line: str, steps: Steps) -> None:
    """One line of pip's output, shown when it says how far the build is."""
    part = _NINJA_PART.match(line)
    if part:
        steps.part_done(int(part.group(1)), int(part.group(2)), part.group(3))
        return
    phase = _BACKEND_PHASE.match(line) or _PTKIT_MESSAGE.match(line)
    if phase:
        steps.phase(phase.group(1))


def _lines_while_running(stream: IO[str], tick: Callable[[], None]) -> Iterator[str]:
    """The lines of ``stream`` as they come; ``tick`` about every second in between.

    A thread reads (it blocks on the pipe), so waiting works the same on every OS."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            tick()
            continue
        if line is None:
            return
        yield line


def run_streaming(
    command: Sequence[str], env: Mapping[str, str], log: Path, steps: Steps
) -> tuple[int, str]:
    """Run ``command`` with its output (stdout and stderr, in order) written to ``log``
    line by line and shown through ``steps``; returns the exit code and the output."""
    kept: list[str] = []
    with (
        log.open("w", encoding="utf-8") as out,
        subprocess.Popen(
            list(command),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors="replace",
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in _lines_while_running(proc.stdout, steps.tick):
            out.write(line)
            out.flush()
            kept.append(line)
            show_line(line, steps)
        code = proc.wait()
    return code, "".join(kept)


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
    log = out_dir / "build.log"
    live = echo in _STDOUT_ECHOS
    try:
        with Steps(f"build {variant}", echo, live=live) as steps:
            returncode, output = run_streaming(command, full_env, log, steps)
        summary = cache.summary(before) if cache is not None else "no compiler cache"
    finally:
        if cache is not None:
            cache.stop()
    rows = read_report(build_dir)
    if rows:
        echo(f"      build report ({variant}):\n{format_report(rows)}")
    wheels = sorted(out_dir.glob("*.whl"))
    if returncode != 0 or len(wheels) != 1:
        tail = "\n".join(output.strip().splitlines()[-25:])
        failed = [r for r in rows if r.status == "failed"]
        abi_cause = compile_error_cause(output)
        if failed:
            cause, fix = failed[0].detail, "the build report's row above ends with the fix"
        elif abi_cause:
            cause, fix = abi_cause, "the compiler's message is at the end of the build log, above"
        else:
            cause, fix = f"pip wheel exited with {returncode}", "the end of the build log is above"
        raise BuildError("build", variant, cause, f"{fix}; the whole log: {log}", details=tail)
    _check_build_output(wheels[0], variant)
    return BuiltWheel(wheels[0], rows, summary, log)


def _check_build_output(wheel: Path, variant: str) -> None:
    """The unrepaired wheel's libraries tie nothing to Python (see the module docstring)."""
    try:
        problems = python_ties(wheel)
    except ImportError as exc:  # pyelftools: the prerequisites check names it first
        raise BuildError(
            "build", variant, f"cannot check the built libraries: {exc}", install_command()
        ) from exc
    if problems:
        count = len(problems)
        raise BuildError(
            "build",
            variant,
            f"{count} problem{'s' if count > 1 else ''} in {wheel.name}: its libraries are tied "
            "to Python, found before the repair (which would drop libpython's DT_NEEDED and "
            "hide it)",
            "each problem above ends with its fix",
            details="\n".join(f"  - {p}" for p in problems),
        )
