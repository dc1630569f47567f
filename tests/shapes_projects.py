"""Building and installing the ``shapes_*`` fixture projects (tests/fixtures/projects/):
``ptkit build --source`` of a copy, then a real ``pip install --no-deps`` of the wheel
and the toolkit into a fresh venv that sees a base environment's torch."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support import REPO, fresh_venv, python_env, run

FIXTURES = REPO / "tests" / "fixtures" / "projects"
VENV_BIN = Path(sys.executable).parent


def cuda_root() -> Path | None:
    """The CUDA 13.5 toolkit the checkout's bootstrap installed (.toolchains/cu13); None
    when there is none: ``ptkit build`` then finds (or installs) the recipe's toolkit in
    ptkit's toolchain cache itself."""
    roots = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*"))
    return roots[-1] if roots else None


def copy_project(name: str, work: Path) -> Path:
    source = work / name
    shutil.copytree(FIXTURES / name, source)
    return source


def ptkit_build(
    source: Path, variant: str, work: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """``ptkit build`` of ``source`` into ``work/dist`` (not checked: tests read failures)."""
    root = cuda_root() if variant == "cu13" else None
    extra = {"PTKIT_CUDA_ROOT": str(root)} if root is not None else {}
    return subprocess.run(
        [
            sys.executable, "-m", "ptkit", "build", "--source", str(source),
            "--variant", variant, "--dist", str(work / "dist"),
            "--build-root", str(work / "build"),
        ],
        env=python_env(**extra, **env),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )  # fmt: skip


def built_wheel(source: Path, variant: str, work: Path, **env: str) -> tuple[Path, str]:
    """The wheel of a successful build, and the build's output."""
    proc = ptkit_build(source, variant, work, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = sorted((work / "dist" / variant).glob("*.whl"))
    return wheel, proc.stdout


def installed(
    wheel: Path, toolkit_wheel: Path, venv: Path, base_python: Path | None = None
) -> Path:
    """A fresh venv over ``base_python``'s torch with the toolkit and ``wheel`` installed
    by pip; its python."""
    python = fresh_venv(venv, base_python or Path(sys.executable))
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(toolkit_wheel), str(wheel)])
    return python


def in_env(python: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` outside the source tree, without the caller's PTKIT_* switches."""
    return subprocess.run(
        [str(python), "-c", code],
        env=python_env(**env),
        cwd=Path("/"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
