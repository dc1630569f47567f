"""Finding the tools the stages run (pip's, this environment's, PATH's) and running them."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ptkit.release.pipeline.errors import BuildError

__all__ = ["find_tool", "run_tool", "tools_path"]


def _executable(path: Path) -> str | None:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def find_tool(name: str, package: str | None = None) -> str | None:
    """A tool from this Python's environment (.venv/bin), else the one pip installed with
    ``package`` wherever that package is importable from (a venv that sees another's
    site-packages through a .pth file), else PATH."""
    found = _executable(Path(sys.executable).parent / name)
    if found is None and package is not None:
        try:
            files = importlib.metadata.distribution(package).files or []
        except importlib.metadata.PackageNotFoundError:
            files = []
        for entry in files:
            if entry.name == name and entry.parent.name in ("bin", "Scripts"):
                found = found or _executable(Path(str(entry.locate())).resolve())
    return found or shutil.which(name)


def tools_path(*tools: str) -> str:
    """PATH with the tools' folders first: auditwheel runs patchelf from PATH."""
    folders = [str(Path(t).parent) for t in tools]
    return os.pathsep.join([*dict.fromkeys(folders), os.environ.get("PATH", "")])


def run_tool(
    stage: str,
    variant: str,
    command: Sequence[str],
    env: Mapping[str, str],
    fix: str,
    *,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """Run ``command``; a failure to start, a timeout or a non-zero exit is a
    :class:`BuildError` of ``stage`` with the end of the output."""
    try:
        proc = subprocess.run(
            list(command),
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(stage, variant, f"{command[0]} could not run: {exc}", fix) from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise BuildError(
            stage,
            variant,
            f"`{' '.join(map(str, command[:2]))} …` exited with {proc.returncode}",
            fix,
            details=tail,
        )
    return proc
