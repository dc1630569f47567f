"""Stage 4, smoke: the wheel installed into a fresh environment and its release test run.

The environment sees this one's packages (torch, pip) and the ptkit toolkit that runs
the build through a ``.pth`` file, so nothing is downloaded; the wheel is installed with
``--no-deps``, and the recipe's ``[release] test-command`` runs there as cibuildwheel
runs it (``python`` is the fresh environment's). A recipe without one gets ``python -m
ptkit.runtime.smoke <package>``. The package is the wheel's own (the folder holding
``_native/``), so another project built with ptkit is smoke-tested the same way.

The command runs with ``PTKIT_LOAD_TRACE=1`` (the loader says which library it is about
to load) and ``PYTHONFAULTHANDLER=1`` (Python's traceback on a crash): a child that dies
by a signal is reported with the signal's name, the library being loaded at the time,
and the command that reproduces it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import parse_wheel_filename

import ptkit
from ptkit.recipes.model import Recipe
from ptkit.release.pipeline._tools import run_tool
from ptkit.release.pipeline.errors import BuildError

__all__ = ["SmokeResult", "fresh_venv", "smoke_command", "smoke_test", "wheel_package"]

_NATIVE_MANIFEST = re.compile(r"^[^/]+/_native/[^/]+\.manifest\.json$")
# The loader's PTKIT_LOAD_TRACE lines (ptkit.runtime.loader).
_TRACE = re.compile(r"^ptkit: (loading|loaded) (\S+)")


@dataclasses.dataclass(frozen=True)
class SmokeResult:
    command: str
    """What ran (a shell command line)."""
    output: str
    """Its standard output."""


def _purelib(python: Path | str) -> str:
    proc = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout.strip()


def _site_dirs(python: Path | str) -> list[str]:
    """The folders ``site`` puts on ``python``'s path: its site-packages and what its .pth
    files add (torch in another folder, a base that is itself such a venv), in order.
    They are what ``python`` has beyond ``python -S`` (the .pth files in a folder that a
    .pth file added are not read, so the new venv is given each folder itself)."""
    code = "import sys; print('\\n'.join(sys.path))"
    paths = []
    for flags in ([], ["-S"]):
        proc = subprocess.run(
            [str(python), *flags, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        paths.append([line for line in proc.stdout.splitlines() if line])
    without_site = set(paths[1])
    return list(dict.fromkeys(p for p in paths[0] if p not in without_site))


def fresh_venv(
    path: Path, base_python: Path | str = sys.executable, extra_paths: Sequence[str] = ()
) -> Path:
    """A new venv at ``path`` that sees ``base_python``'s packages (torch, pip) and
    ``extra_paths`` through a ``.pth`` file, as tests/support.fresh_venv makes them:
    nothing is downloaded, and the venv's own site-packages (the wheel under test) comes
    first on sys.path."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    Path(_purelib(python), "_base_env.pth").write_text(
        "".join(f"{d}\n" for d in dict.fromkeys([*extra_paths, *_site_dirs(base_python)]))
    )
    return python


def _child_env() -> dict[str, str]:
    """The user's environment without ptkit's switches and PYTHONPATH: the wheel as shipped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    env.pop("PYTHONPATH", None)
    return env


def wheel_package(wheel: Path) -> str:
    """The import package a wheel ships its native libraries in: the top-level folder
    holding ``_native/*.manifest.json`` (``ptkit_ops`` for ptkit's own ops), else the
    distribution's name with ``_`` for ``-``."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = sorted({n.split("/", 1)[0] for n in names if _NATIVE_MANIFEST.match(n)})
    if len(tops) == 1:
        return tops[0]
    return str(parse_wheel_filename(wheel.name)[0]).replace("-", "_")


def _toolkit_path() -> str:
    """The folder holding the ptkit package that runs this build (site-packages, or a
    source tree's src/): the smoke environment imports the same toolkit."""
    return str(Path(ptkit.__file__).resolve().parents[1])


def smoke_command(recipe: Recipe, package: str, version: str, project: Path) -> str:
    """What the smoke stage runs (a shell command, ``python`` on PATH being the fresh
    environment's): the recipe's release test, as cibuildwheel runs it, else the generic
    smoke test of a ptkit-built package."""
    if recipe.release is not None:
        # cibuildwheel's placeholders: both are the project folder for a root pyproject.
        folder = shlex.quote(str(project))
        return recipe.release.test_command.replace("{project}", folder).replace("{package}", folder)
    return shlex.join(["python", "-m", "ptkit.runtime.smoke", package, "--expect-version", version])


def _signal_of(returncode: int) -> str | None:
    """The signal that killed the command: a negative code (the process itself), or
    128 + n from the shell that ran it (sh reports a killed child so)."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number <= 0:
        return None
    try:
        name = signal.Signals(number).name
    except ValueError:
        return None
    how = f"exit status {returncode}: " if returncode > 0 else ""
    return f"{name} ({how}signal {number})"


def _crash_site(stderr: str) -> str:
    """Which library the loader was loading when the process died, from its trace."""
    loading: str | None = None
    last: str | None = None
    for line in stderr.splitlines():
        found = _TRACE.match(line.strip())
        if found is None:
            continue
        what, library = found.groups()
        last = library
        loading = library if what == "loading" and " failed: " not in line else None
    if loading is not None:
        return f"while loading {loading} (the loader's last line: ptkit: loading {loading})"
    if last is not None:
        return f"after the loader was done with {last} (not while loading a library)"
    return "before ptkit's loader loaded any library (at import, or in the test itself)"


def smoke_test(
    wheel: Path,
    *,
    recipe: Recipe,
    project: Path,
    venv_dir: Path,
    base_python: Path | str = sys.executable,
) -> SmokeResult:
    """Install ``wheel`` into a fresh venv at ``venv_dir`` and run the smoke command there."""
    variant = recipe.name
    package = wheel_package(wheel)
    version = str(parse_wheel_filename(wheel.name)[1])
    command = smoke_command(recipe, package, version, project)
    fix = f"run `{command}` after installing the wheel to see it again"
    shutil.rmtree(venv_dir, ignore_errors=True)
    try:
        python = fresh_venv(venv_dir, base_python, [_toolkit_path()])
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(
            "smoke", variant, f"cannot create a venv at {venv_dir}: {exc}", fix
        ) from exc
    env = _child_env()
    # --force-reinstall: the base environment may hold the same version (pip would
    # call it satisfied); pip leaves that copy alone, it is outside this venv.
    run_tool(
        "smoke",
        variant,
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--force-reinstall", str(wheel)],
        env,
        "the wheel does not install: check its METADATA and tags",
    )  # fmt: skip
    if not Path(_purelib(python), package, "__init__.py").is_file():
        raise BuildError(
            "smoke", variant, f"pip did not install {package} into {venv_dir}", "check pip's output"
        )
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv_dir)
    env["PTKIT_LOAD_TRACE"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    proc = subprocess.run(
        command,
        shell=True,
        env=env,
        cwd=venv_dir,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    died = _signal_of(proc.returncode)
    if died is not None:
        raise BuildError(
            "smoke",
            variant,
            f"`{command}` was killed by {died} in a fresh environment, {_crash_site(proc.stderr)}",
            "reproduce it with "
            f"`cd {shlex.quote(str(venv_dir))} && PATH={shlex.quote(str(python.parent))}:$PATH "
            f"PTKIT_LOAD_TRACE=1 PYTHONFAULTHANDLER=1 {command}` (the wheel stays installed "
            "there); a library that crashes when loaded alone is found by "
            "`python -m ptkit.runtime.registrations <library> --backend <backend>`",
            details=(proc.stdout + proc.stderr).strip(),
        )
    if proc.returncode != 0:
        raise BuildError(
            "smoke",
            variant,
            f"`{command}` failed in a fresh environment",
            "the load decisions and checks above say what; `ptkit explain` after installing "
            "the wheel shows the loader's reasons",
            details=(proc.stdout + proc.stderr).strip(),
        )
    return SmokeResult(command, proc.stdout.strip())
