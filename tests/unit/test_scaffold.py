"""`ptkit new`: names, refusals, atomic writes, the files per backend, and the pieces a
scaffolded project relies on (the version provider, the matrix, the pipeline's package)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import make_wheel, python_env

from ptkit import scaffold
from ptkit.release import _version_provider, matrix
from ptkit.release.pipeline import wheel_package
from ptkit.scaffold import ScaffoldError, create_project, render, validate_name

PTKIT = Path(sys.executable).parent / "ptkit"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTKIT), *args],
        cwd=cwd,
        env=python_env(),
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


@pytest.mark.parametrize("name", ["ptkit", "torch", "tests"])
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
    with pytest.raises(ScaffoldError, match=r"no example op for backend.*rocm"):
        create_project("demo_ops", backends=["cpu", "rocm"], directory=tmp_path / "p")
    assert not (tmp_path / "p").exists()


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
    assert "python -m ptkit_cli index build" in workflow and "PYTHONPATH=src" not in workflow
    proc = _cli("matrix", "--check", "--source", str(root), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_ptkits_own_workflow_is_unchanged_by_the_generalisation() -> None:
    from support import REPO

    assert matrix.check_generated(REPO, matrix.load_plan(REPO)) == []


def test_the_version_provider_takes_the_projects_base_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = create_project("demo_ops", backends=["cpu", "cuda"], directory=tmp_path / "p")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PTKIT_VARIANT", "cu13")
    assert _version_provider.dynamic_metadata("version", {"base-version": "1.2.0"}) == "1.2.0+cu13"
    with pytest.raises(RuntimeError, match="add base-version"):
        _version_provider.dynamic_metadata("version", {})
    with pytest.raises(RuntimeError, match="unknown setting"):
        _version_provider.dynamic_metadata("version", {"base-version": "1.0", "typo": 1})
    with pytest.raises(RuntimeError, match="not a public PEP 440"):
        _version_provider.dynamic_metadata("version", {"base-version": "1.0+local"})


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
        "import sys, ptkit_cli\n"
        "sys.argv = ['ptkit', 'new', 'demo_ops', '--dir', sys.argv[1]]\n"
        "try:\n    ptkit_cli.main()\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print('TORCH_IMPORTED', 'torch' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "p")],
        env=python_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "TORCH_IMPORTED False" in proc.stdout
    assert (tmp_path / "p" / "src" / "demo_ops" / "__init__.py").is_file()
