"""`ptkit new` (ptkit.scaffold): names, refusals, atomic writes, the files per backend, and
the pieces a scaffolded project relies on (the toolkit requirement, the version provider,
the recipes' smoke command, the matrix, the pipeline's package). From the source tree:
the command runs as `python -m ptkit` with src/ on the path."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from support import make_wheel, python_env

from ptkit import scaffold
from ptkit.recipes.model import load_recipe
from ptkit.release import matrix, version_provider
from ptkit.release.pipeline import wheel_package
from ptkit.scaffold import (
    ScaffoldError,
    create_project,
    parse_backends,
    ptkit_requirement,
    render,
    validate_name,
)

SRC = Path(__file__).resolve().parents[2] / "src"


def _env() -> dict[str, str]:
    return python_env(PYTHONPATH=str(SRC))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptkit", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("My-Kernels", "my_kernels"),
        ("1fast", "ext_1fast"),
        ("fast.ops", "fast_ops"),
        ("class", "my_kernels"),
        ("", "my_kernels"),
    ],
)
def test_a_bad_name_is_refused_with_a_fix(name: str, suggestion: str) -> None:
    with pytest.raises(ScaffoldError, match=f"for example: ptkit new {suggestion}$"):
        validate_name(name)


@pytest.mark.parametrize("name", ["ptkit", "ptkit_ops", "torch", "tests"])
def test_a_taken_name_is_refused(name: str) -> None:
    with pytest.raises(ScaffoldError, match=f"is taken.*ptkit new {name}_kernels"):
        validate_name(name)


def test_the_command_refuses_a_bad_name_and_writes_nothing(tmp_path: Path) -> None:
    proc = _cli("new", "My-Kernels", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ptkit new my_kernels" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_non_empty_folder_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "proj"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    proc = _cli("new", "demo_ops", "--dir", str(target), cwd=tmp_path)
    assert proc.returncode == 1
    assert "is not empty; nothing was written" in proc.stderr
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]  # no staging folder left


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ScaffoldError, match=r"no example op for backend.*rocm.*BACKEND hip\|xpu\|metal"
    ):
        create_project("demo_ops", backends=["cpu", "rocm"], directory=tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_a_misspelt_backend_gets_the_likely_one() -> None:
    with pytest.raises(ScaffoldError, match=r"backend\(s\) cdua \(did you mean 'cuda'\?\);"):
        parse_backends("cpu,cdua")


def test_a_failure_midway_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(root: Path) -> list[str]:
        raise OSError("disk full")

    monkeypatch.setattr(scaffold, "_generate_release_files", broken)
    with pytest.raises(OSError, match="disk full"):
        create_project("demo_ops", directory=tmp_path / "p")
    assert list(tmp_path.iterdir()) == []


def test_blocks_are_kept_only_for_chosen_backends() -> None:
    text = "a {{name}}\n{{#cuda}}\ncuda line\n{{/cuda}}\nend{{#cuda}} (gpu){{/cuda}}\n"
    assert render(text, {"name": "x"}, ["cpu"]) == "a x\nend\n"
    assert render(text, {"name": "x"}, ["cpu", "cuda"]) == "a x\ncuda line\nend (gpu)\n"


def test_a_cpu_project_has_no_cuda_and_its_generated_files_are_current(tmp_path: Path) -> None:
    root, files = create_project("demo_ops", directory=tmp_path / "demo_ops")
    assert "csrc/cpu/ops.cpp" in files and "src/demo_ops/__init__.py" in files
    assert not any("cuda" in f or "cu13" in f for f in files), files
    assert {
        ".github/workflows/release.yml",
        "ci/cibuildwheel/cpu.toml",
        "recipes/recipe.schema.json",
    } <= set(files)
    cmake = (root / "CMakeLists.txt").read_text()
    assert "find_package(ptkit CONFIG REQUIRED)" in cmake and "cuda" not in cmake
    generated = {p.as_posix() for p in matrix.generate(matrix.load_plan(root))}
    written = "".join((root / f).read_text() for f in files if f not in generated)
    assert "{{" not in written and "}}" not in written
    assert oct(root.stat().st_mode & 0o777) != oct(0o700)
    plan = matrix.load_plan(root)
    assert matrix.check_generated(root, plan) == []
    assert plan.project == "demo_ops"
    assert plan.jobs[0].wheel.startswith("demo_ops-0.1.0+cpu-py3-none-")
    workflow = (root / ".github/workflows/release.yml").read_text()
    assert "index build" in workflow and "PYTHONPATH=src" not in workflow
    proc = _cli("matrix", "--check", "--source", str(root), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_the_project_depends_on_the_toolkit_only(tmp_path: Path) -> None:
    """No kernels of anybody: ptkit (the toolkit) and torch; the version provider with the
    project's own base version; the smoke command of ptkit's runtime; `python -m ptkit`."""
    root, _ = create_project("demo_ops", backends=["cpu", "cuda"], directory=tmp_path / "p")
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == ["ptkit>=0.1.0,<0.2", "torch>=2.10"]
    assert pyproject["build-system"]["requires"] == [
        "scikit-build-core>=1.1",
        "ptkit>=0.1.0,<0.2",
        "torch>=2.10",
    ]
    assert pyproject["tool"]["scikit-build"]["metadata"]["version"] == {
        "provider": "ptkit.release.version_provider",
        "base-version": "0.1.0",
    }
    for variant in ("cpu", "cu13"):
        recipe = load_recipe(variant, root / "recipes")
        assert recipe.release is not None
        assert recipe.release.test_command == "python -m ptkit.runtime.smoke demo_ops"
    assert "PTKIT   := $(PYTHON) -m ptkit\n" in (root / "Makefile").read_text()
    cmake = (root / "CMakeLists.txt").read_text()
    assert (
        "TARGETS ${PTKIT_RECIPE_TARGETS} OPTIONAL_TARGETS ${PTKIT_RECIPE_OPTIONAL_TARGETS}" in cmake
    )


@pytest.mark.parametrize(
    ("version", "requirement"),
    [("0.1.0", "ptkit>=0.1.0,<0.2"), ("0.9.3", "ptkit>=0.9.3,<0.10"), ("1.4.0", "ptkit>=1.4.0,<2")],
)
def test_the_toolkit_requirement_follows_the_cmake_version_rule(
    version: str, requirement: str
) -> None:
    assert ptkit_requirement(version) == requirement


def test_the_version_provider_takes_the_projects_base_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = create_project("demo_ops", backends=["cpu", "cuda"], directory=tmp_path / "p")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PTKIT_VARIANT", "cu13")
    assert version_provider.dynamic_metadata("version", {"base-version": "1.2.0"}) == "1.2.0+cu13"
    with pytest.raises(RuntimeError, match="add base-version"):
        version_provider.dynamic_metadata("version", {})
    with pytest.raises(RuntimeError, match="unknown setting"):
        version_provider.dynamic_metadata("version", {"base-version": "1.0", "typo": 1})
    with pytest.raises(RuntimeError, match="not a public PEP 440"):
        version_provider.dynamic_metadata("version", {"base-version": "1.0+local"})


def test_the_pipeline_smoke_tests_the_wheels_own_package(tmp_path: Path) -> None:
    manifest = {"demo_ops/_native/libdemo_ops_cpu.manifest.json": b"{}"}
    wheel = make_wheel(tmp_path, "demo-ops", "0.1.0+cpu", extra=manifest)
    assert wheel_package(wheel) == "demo_ops"
    plain = make_wheel(tmp_path / "plain", "other-pkg", "1.0")
    with zipfile.ZipFile(plain) as z:
        assert not any("_native" in n for n in z.namelist())
    assert wheel_package(plain) == "other_pkg"


def test_the_templates_ship_in_the_installed_package() -> None:
    templates = Path(scaffold.__file__).parent / "templates"
    assert (templates / "package" / "__init__.py.tmpl").is_file()
    assert (templates / "csrc" / "cuda" / "kernels.cu.tmpl").is_file()


def test_ptkit_new_does_not_import_torch(tmp_path: Path) -> None:
    probe = (
        "import sys, ptkit.cli\n"
        "sys.argv = ['ptkit', 'new', 'demo_ops', '--dir', sys.argv[1]]\n"
        "try:\n    ptkit.cli.main()\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print('TORCH_IMPORTED', 'torch' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "p")],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "TORCH_IMPORTED False" in proc.stdout
    assert (tmp_path / "p" / "src" / "demo_ops" / "__init__.py").is_file()
