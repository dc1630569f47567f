"""Issue 16, point 3: two libraries of one package that both define one op namespace
(tests/fixtures/projects/shapes_dup: a ``STABLE_TORCH_LIBRARY(shapes_dup, m)`` block in
each). Loading both kills a process (shown below with plain torch); ptkit refuses it at
build time (the audit names both libraries) and, where the build check was bypassed, at
load time, before ``dlopen``, with the reason: no crash."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from shapes_projects import copy_project, in_env, installed, ptkit_build

pytestmark = pytest.mark.integration

DECISIONS = """
import json, shapes_dup, ptkit.runtime as rt
print(json.dumps({d.library: [d.status.value, d.reason] for d in rt.load_decisions()}))
"""


@pytest.fixture(scope="module")
def build(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    work = tmp_path_factory.mktemp("shapes_dup")
    source = copy_project("shapes_dup", work)
    return ptkit_build(source, "cpu", work), work


@pytest.fixture(scope="module")
def python(build: tuple[subprocess.CompletedProcess[str], Path], toolkit_wheel: Path) -> Path:
    """The wheel of the build stage, which the audit then refused, installed anyway: the
    build check bypassed."""
    work = build[1]
    (wheel,) = sorted((work / "build" / "pipeline-cpu" / "wheel").glob("shapes_dup-*.whl"))
    return installed(wheel, toolkit_wheel, work / "venv")


def _native(python: Path) -> Path:
    proc = in_env(python, "import shapes_dup, os; print(os.path.dirname(shapes_dup.__file__))")
    return Path(proc.stdout.strip()) / "_native"


def test_the_audit_refuses_the_wheel_naming_both_libraries(
    build: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, work = build
    assert proc.returncode == 1
    err = " ".join(proc.stderr.split())
    assert "stage 'audit' failed for variant cpu" in err
    assert (
        "op namespace shapes_dup is defined by 2 libraries: libshapes_dup_first.so (cpu) has a "
        "STABLE_TORCH_LIBRARY / TORCH_LIBRARY(shapes_dup, m) block and the schemas of "
        "shapes_dup::negate; libshapes_dup_second.so (cpu) has a STABLE_TORCH_LIBRARY / "
        "TORCH_LIBRARY(shapes_dup, m) block and the schemas of shapes_dup::twice. Loading the "
        "second one aborts the process" in err
    ), err
    assert "STABLE_TORCH_LIBRARY_IMPL(<ns>, <dispatch key>, m)" in err
    assert not (work / "dist" / "cpu").exists() or not list((work / "dist" / "cpu").iterdir())


def test_plain_torch_crashes_on_the_second_library(python: Path) -> None:
    """Why the rule exists: the second block kills the process (SIGSEGV with torch 2.14)."""
    native = _native(python)
    proc = in_env(
        python,
        "import torch\n"
        f"torch.ops.load_library({str(native / 'libshapes_dup_first.so')!r})\n"
        f"torch.ops.load_library({str(native / 'libshapes_dup_second.so')!r})\n"
        "print('survived')",
    )
    assert proc.returncode < 0, proc.stdout + proc.stderr
    assert "survived" not in proc.stdout


def test_the_loader_refuses_the_second_library_before_loading_it(python: Path) -> None:
    proc = in_env(python, DECISIONS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    decisions = json.loads(proc.stdout)
    assert decisions["libshapes_dup_first.so"][0] == "loaded"
    status, reason = decisions["libshapes_dup_second.so"]
    assert status == "failed"
    assert reason.startswith(
        "refused before loading: libshapes_dup_second.so defines op namespace shapes_dup (a "
        "STABLE_TORCH_LIBRARY / TORCH_LIBRARY(shapes_dup, m) block and the schemas of "
        "shapes_dup::twice), which libshapes_dup_first.so (of shapes_dup, loaded) already "
        "defines in this process; a second definition of a namespace aborts the process. Fix: "
    ), reason


def test_a_second_package_defining_the_namespace_is_refused(python: Path) -> None:
    package = _native(python).parent
    again = package.parent / "shapes_dup_again"
    shutil.copytree(package, again)
    proc = in_env(
        python,
        "import json, shapes_dup, shapes_dup_again, ptkit.runtime as rt\n"
        "print(json.dumps([[d.library, d.status.value, d.reason] "
        "for d in rt.load_decisions('shapes_dup_again')]))",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = json.loads(proc.stdout)
    assert first[:2] == ["libshapes_dup_first.so", "failed"]
    assert "which libshapes_dup_first.so (of shapes_dup, loaded) already defines" in first[2]
    assert second[:2] == ["libshapes_dup_second.so", "failed"]


def test_a_namespace_defined_in_python_first_is_refused_too(python: Path) -> None:
    proc = in_env(
        python,
        "import torch\nLIBRARY = torch.library.Library('shapes_dup', 'DEF')\n" + DECISIONS,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    decisions = json.loads(proc.stdout)
    for library in ("libshapes_dup_first.so", "libshapes_dup_second.so"):
        status, reason = decisions[library]
        assert status == "failed"
        assert (
            f"refused before loading: {library} holds the TORCH_LIBRARY block of op namespace "
            "shapes_dup, which is already defined in this process outside ptkit's loader (in "
            "Python with torch.library" in reason
        ), reason
