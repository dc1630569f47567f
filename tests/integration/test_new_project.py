"""The proof that ptkit is a toolkit for other projects: `ptkit new` scaffolds a project
into a temporary folder, `ptkit build` makes its cpu and cu13 wheels (build, repair,
audit, smoke), the cpu wheel goes into a fresh venv, the project's own tests pass there,
and `ptkit doctor` lists it with its library.

Everything runs through the real console script (`.venv/bin/ptkit`), in subprocesses,
with no path to ptkit's CMake package: scikit-build-core finds it through ptkit's
`cmake.root` entry point. The CUDA toolkit is the repository's `.toolchains/cu13`
(PTKIT_CUDA_ROOT), as a downstream developer would point at theirs. One scaffold and
one build per variant serve the module; the compiler cache lives in build/ (with
CCACHE_BASEDIR on the temporary project) so a rerun compiles nothing again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO, python_env, run

from ptkit.recipes.model import load_recipe
from ptkit.release.pipeline import fresh_venv

pytestmark = pytest.mark.integration

NAME = "demo_kernels"
PTKIT = Path(sys.executable).parent / "ptkit"
TIMES: dict[str, float] = {}


def _timed(step: str, command: list[str], **kwargs: object) -> str:
    started = time.monotonic()
    proc = run(command, **kwargs)  # type: ignore[arg-type]
    TIMES[step] = time.monotonic() - started
    return proc.stdout + proc.stderr


def _cuda_root() -> Path:
    roots = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu13"))
    if not roots:
        pytest.fail("no CUDA 13 toolkit in .toolchains/cu13: run scripts/bootstrap")
    return roots[-1]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("new") / NAME
    _timed(
        "ptkit new",
        [str(PTKIT), "new", NAME, "--backends", "cpu,cuda", "--dir", str(root)],
        env=python_env(),
        cwd=root.parent,
    )
    yield root
    if TIMES:
        print(
            "\nptkit new project, step times: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in TIMES.items())
        )


def _build(project: Path, variant: str, **env: str) -> str:
    cache = {
        "CCACHE_DIR": str(REPO / "build" / "ccache-new-project"),
        "CCACHE_BASEDIR": str(project),
        "CCACHE_NOHASHDIR": "1",
    }
    return _timed(
        f"build {variant}",
        [str(PTKIT), "build", "--variant", variant, "--source", str(project), "--dist",
         str(project / "dist")],
        env=python_env(**cache, **env),
        cwd=project,
        timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cpu_build(project: Path) -> str:
    return _build(project, "cpu")


@pytest.fixture(scope="module")
def cu13_build(project: Path) -> str:
    return _build(project, "cu13", PTKIT_CUDA_ROOT=str(_cuda_root()))


def _wheel(project: Path, variant: str) -> Path:
    wheels = sorted((project / "dist" / variant).glob(f"{NAME}-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv_python(project: Path, cpu_build: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv that sees .venv's torch, ptkit and pytest, with the cpu wheel in it."""
    started = time.monotonic()
    # Without pip of its own (ensurepip costs ~8 s): .venv's pip installs into it.
    python = fresh_venv(tmp_path_factory.mktemp("venv") / "v", Path(sys.executable))
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(_wheel(project, "cpu"))]
    )  # fmt: skip
    TIMES["fresh venv + install"] = time.monotonic() - started
    return python


def test_the_scaffold_has_every_piece(project: Path) -> None:
    for path in (
        "pyproject.toml",
        "CMakeLists.txt",
        "README.md",
        "Makefile",
        ".gitignore",
        f"src/{NAME}/__init__.py",
        "csrc/cpu/ops.cpp",
        "csrc/cuda/ops.cpp",
        "csrc/cuda/kernels.cu",
        "recipes/cpu.toml",
        "recipes/cu13.toml",
        "recipes/recipe.schema.json",
        "tests/test_ops.py",
        "ci/cibuildwheel/cpu.toml",
        "ci/cibuildwheel/cu13.toml",
        ".github/workflows/release.yml",
    ):
        assert (project / path).is_file(), path
    pyproject = (project / "pyproject.toml").read_text()
    assert '[project.entry-points."ptkit.packages"]' in pyproject
    assert 'provider = "ptkit.release.version_provider"' in pyproject
    # The toolkit only: nobody's kernels (no ptkit-ops) come with the project.
    assert 'dependencies = ["ptkit>=0.1.0,<0.2", "torch>=2.10"]' in pyproject
    assert "ptkit-ops" not in pyproject and "ptkit_ops" not in pyproject
    cmake = (project / "CMakeLists.txt").read_text()
    assert "ptkit_DIR" not in cmake and "find_package(ptkit CONFIG REQUIRED)" in cmake
    assert "make demo" in (project / "README.md").read_text()
    out = _timed(
        "matrix --check",
        [str(PTKIT), "matrix", "--check", "--source", str(project)],
        env=python_env(),
    )
    assert "generated files are up to date" in out


@pytest.mark.parametrize("variant", ["cpu", "cu13"])
def test_each_wheel_passes_every_stage(
    variant: str, project: Path, cpu_build: str, cu13_build: str
) -> None:
    out = {"cpu": cpu_build, "cu13": cu13_build}[variant]
    for stage in ("[1/5] build ok", "[2/5] repair ok", "[3/5] audit ok", "[4/5] smoke ok"):
        assert stage in out, out
    assert f"{NAME} smoke test passed" in out
    wheel = _wheel(project, variant)
    assert wheel.name.startswith(f"{NAME}-0.1.0+{variant}-py3-none-manylinux_")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    libraries = sorted(n for n in names if n.endswith(".so"))
    expected = [f"{NAME}/_native/lib{NAME}_cpu.so"]
    if variant == "cu13":
        expected.append(f"{NAME}/_native/lib{NAME}_cuda.so")
    assert libraries == sorted(expected)


def test_the_cu13_fatbinary_holds_the_recipes_targets(project: Path, cu13_build: str) -> None:
    """The build's own audit lists the GPU code cuobjdump finds; it must be the recipe's."""
    targets = load_recipe("cu13", project / "recipes").targets.cuda
    line = next(line for line in cu13_build.splitlines() if f"lib{NAME}_cuda.so: links" in line)
    assert line.rstrip().endswith(f"GPU code {', '.join(targets)}"), line
    assert "libcudart.so.13" in line and "libtorch_cuda.so" in line
    with zipfile.ZipFile(_wheel(project, "cu13")) as z:
        manifest = json.loads(z.read(f"{NAME}/_native/{NAME}_cuda.manifest.json"))
    assert manifest["package"] == NAME and manifest["namespace"] == NAME
    sass = [t for t in targets if t.startswith("sm_")]
    ptx = [t for t in targets if t.startswith("compute_")]
    assert manifest["targets"] == {"sass": sass, "ptx": ptx}


def test_the_projects_own_tests_pass_against_the_installed_cpu_wheel(
    project: Path, venv_python: Path
) -> None:
    out = _timed(
        "project tests",
        [str(venv_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests"],
        env=python_env(),
        cwd=project,
    )
    assert " passed" in out and "failed" not in out, out
    assert "test_the_native_cpu_library_loaded" not in out  # not skipped either


def test_doctor_lists_the_package_with_its_library(venv_python: Path) -> None:
    started = time.monotonic()
    # The doctor exits 1 when it finds problems (this machine has some): read its JSON.
    proc = subprocess.run(
        [str(venv_python), "-m", "ptkit", "doctor", "--json"],
        env=python_env(),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    TIMES["ptkit doctor"] = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr
    packages = {p["name"]: p for p in json.loads(proc.stdout)["facts"]["packages"]}
    assert NAME in packages, f"ptkit doctor lists only {sorted(packages)}"
    package = packages[NAME]
    assert package["version"] == "0.1.0+cpu"
    assert os.path.realpath(package["location"]).startswith(
        os.path.realpath(venv_python.parent.parent)
    )
    assert [(lib["library"], lib["status"]) for lib in package["libraries"]] == [
        (f"lib{NAME}_cpu.so", "loaded")
    ]
    routes = {(r["op"], r["device_type"]): r["implementation"] for r in package["routes"]}
    assert routes[("scale_add", "cpu")] == "native"
