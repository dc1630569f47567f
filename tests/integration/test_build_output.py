"""What the build stage's output must not hold, caught before the repair can hide it
(tests/fixtures/python_tied: a library linked to libpython, and one with Python's C API
undefined and a module init exported, as a setup.py-built _C.abi3.so has), and what the
repair changed, said as such: real `ptkit build`, real auditwheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO, python_env, run

from ptkit.recipes.model import load_recipe
from ptkit.release.pipeline import BuildError
from ptkit.release.pipeline.repair import repair_wheel
from ptkit.release.wheel_audit import audit_wheel

pytestmark = pytest.mark.integration

FIXTURE = REPO / "tests" / "fixtures" / "python_tied"
RECIPE = load_recipe("cpu", FIXTURE / "recipes")


def _ptkit_build(
    tmp_path: Path, source: Path = FIXTURE, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptkit", "build", "--source", str(source), "--variant", "cpu",
         "--dist", str(tmp_path / "dist"), "--build-root", str(tmp_path / "build")],
        capture_output=True, text=True, env=python_env(**env), timeout=900, check=False,
    )  # fmt: skip


def _pip_wheel(tmp_path: Path, source: Path = FIXTURE, **env: str) -> Path:
    """The unrepaired wheel, as stage 1 builds it (without stage 1's check)."""
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
         "-C", f"build-dir={tmp_path / 'skbuild'}", "-w", str(tmp_path / "wheel"), str(source)],
        env=python_env(**env))  # fmt: skip
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    return wheel


def test_a_library_linked_to_libpython_fails_the_build_stage_naming_it(tmp_path: Path) -> None:
    proc = _ptkit_build(tmp_path, TIED="libpython")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        "ptkit build: stage 'build' failed for variant cpu: 1 problem in "
        "tied-0.1.0-py3-none-linux_x86_64.whl: its libraries are tied to Python, found before "
        "the repair (which would drop libpython's DT_NEEDED and hide it)"
    )
    assert (
        "  - libtied_cpu.so links libpython3.11.so.1.0 (DT_NEEDED) for 1 symbol of Python's C "
        "API or torch's Python bindings (Py_IsInitialized): the wheel would run on one Python "
        "only, and auditwheel's repair drops the entry, which hides it. Fix: a kernel library "
        "links no Python" in proc.stderr
    )
    assert "[2/5] repair" not in proc.stdout  # stopped before the repair ran
    assert not (tmp_path / "dist").exists()


def test_pythons_c_api_and_a_module_init_fail_the_build_stage(tmp_path: Path) -> None:
    proc = _ptkit_build(tmp_path, TIED="module")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    problems = [line for line in proc.stderr.splitlines() if line.startswith("  - ")]
    assert [p.split(":")[0] for p in problems] == [
        "  - libtied_cpu.so needs 2 symbols of Python's C API or torch's Python bindings "
        "(PyModule_Create2, Py_IsInitialized)",
        "  - libtied_cpu.so exports PyInit_tied",
    ]
    assert "which torch.ops.load_library does not import" in problems[1]


def test_the_repair_stage_says_what_auditwheel_changed_and_why(tmp_path: Path) -> None:
    """A wheel built elsewhere (no stage 1 check): auditwheel removes libpython's DT_NEEDED
    and sets an RPATH; the repair stage says so instead of leaving a hash mismatch."""
    wheel = _pip_wheel(tmp_path, TIED="libpython")
    with pytest.raises(BuildError) as caught:
        repair_wheel(wheel, recipe=RECIPE, out_dir=tmp_path / "repaired")
    message = str(caught.value)
    assert message.startswith(
        "ptkit build: stage 'repair' failed for variant cpu: auditwheel changed 1 library after "
        "its manifest was written"
    )
    assert (
        "  - libtied_cpu.so: auditwheel removed DT_NEEDED libpython3.11.so.1.0; set RPATH "
        "$ORIGIN/../../tied.libs. Why: auditwheel removes libpython, which a manylinux wheel may "
        "not link: the library links Python." in message
    )
    # The repaired wheel it wrote, audited on its own: the marks say what the repair did.
    (repaired,) = (tmp_path / "repaired").glob("*.whl")
    problems = audit_wheel(repaired).problems
    assert any(
        p.startswith(
            "libtied_cpu.so changed after tied_cpu.manifest.json was written: "
            "auditwheel's repair changed it: it set RPATH $ORIGIN/../../tied.libs and "
            "grafted nothing"
        )
        for p in problems
    ), problems
    assert not any(": sha256 " in p for p in problems), problems
    assert any("Py_IsInitialized" in p for p in problems)


def test_a_grafted_library_is_named_with_the_rewrite(tmp_path: Path) -> None:
    """A kernel library linking a system library (libbz2): auditwheel grafts it and rewrites
    the DT_NEEDED; both the repair stage and the audit of its wheel say so."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    cmake = project / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace(
        'set(tie DEFINES TIED_MODULE LINK_LIBRARIES "-Wl,-z,undefs")',
        'set(tie LINK_LIBRARIES "-Wl,--no-as-needed" bz2)'))  # fmt: skip
    source = project / "tied.cpp"
    source.write_text(source.read_text().replace("(void)Py_IsInitialized();", ""))
    wheel = _pip_wheel(tmp_path, project, TIED="bz2")
    with zipfile.ZipFile(wheel) as archive:
        assert "tied/_native/libtied_cpu.so" in archive.namelist()
    with pytest.raises(BuildError) as caught:
        repair_wheel(wheel, recipe=RECIPE, out_dir=tmp_path / "repaired")
    message = str(caught.value)
    assert (
        "libtied_cpu.so: auditwheel removed DT_NEEDED libbz2.so.1.0; added DT_NEEDED libbz2-"
        in message
    )
    assert "grafted libbz2-" in message
    assert "Why: the library links one that is neither torch's nor the C/C++ runtime" in message
    (repaired,) = (tmp_path / "repaired").glob("*.whl")
    problems = audit_wheel(repaired).problems
    assert any("auditwheel's repair changed it: it grafted libbz2-" in p for p in problems), (
        problems
    )
