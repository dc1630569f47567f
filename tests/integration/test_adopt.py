"""`ptkit adopt` end to end, on copies of the two fixture projects written for it:
tests/fixtures/projects/adopt_setup_py (a classic setup.py extension: CppExtension +
CUDAExtension, TORCH_LIBRARY, at::Tensor) and tests/fixtures/projects/adopt_kernel_builder
(a kernel-builder build.toml layout: CUDA kernels and one CPU op, schemas in C++).

Each copy is adopted by the installed toolkit's `ptkit adopt`, then built with
`ptkit build --source <copy>` for cpu and cu13 (the pip CUDA toolkit of .toolchains as
PTKIT_CUDA_ROOT; one cu13 build per fixture), the setup.py one in the torch mode for
torch 2.14 (.venv) and torch 2.13 (a venv on .venv-torch213 with ptkit[build]). The cpu
wheels go into an index (`ptkit index build`) served on 127.0.0.1; pip and uv install
from it, each getting the build for the environment's torch, and the fixture's own
tests then run on CPU in that environment; `ptkit doctor` and `ptkit explain` name the
package there.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fresh_python import install_from_index, serve_index, torch_env
from support import REPO, python_env, run

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
FIXTURES = REPO / "tests" / "fixtures" / "projects"
PIP_CUDA = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*"))
TIMES: dict[str, float] = {}


def _timed(what: str, cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    proc = run(cmd, **kwargs)  # type: ignore[arg-type]
    TIMES[what] = time.monotonic() - started
    print(f"\n{what}: {TIMES[what]:.0f} s")
    return proc


def _adopted(name: str, root: Path) -> tuple[Path, str]:
    source = root / name
    shutil.copytree(FIXTURES / name, source)
    proc = run([str(VENV_BIN / "ptkit"), "adopt", str(source)], env=python_env())
    return source, proc.stdout


def _build(python: Path, source: Path, variant: str, work: Path, what: str, **env: str) -> Path:
    """`ptkit build` of ``source`` with ``python``'s ptkit and torch; the wheel."""
    _timed(
        what,
        [str(python), "-m", "ptkit", "build", "--source", str(source), "--variant", variant,
         "--dist", str(work / "dist"), "--build-root", str(work / "build")],
        env=python_env(PATH=f"{python.parent}:/usr/local/bin:/usr/bin:/bin", **env),
        timeout=1200,
    )  # fmt: skip
    (wheel,) = (work / "dist" / variant).glob("*.whl")
    return wheel


def _cuda_root() -> str:
    if not PIP_CUDA:
        pytest.fail(
            "no pip CUDA toolkit in .toolchains/cu13: run scripts/bootstrap (make test does)"
        )
    return str(PIP_CUDA[-1])


@pytest.fixture(scope="module")
def setup_py(tmp_path_factory: pytest.TempPathFactory, torch213: Path) -> dict[str, object]:
    root = tmp_path_factory.mktemp("adopt_setup_py")
    source, report = _adopted("adopt_setup_py", root)
    this = Path(sys.executable)
    wheels = {
        "cpu.torch2.14": _build(this, source, "cpu", root / "cpu214", "setup.py: cpu, torch 2.14"),
        "cpu.torch2.13": _build(torch213, source, "cpu", root / "cpu213", "setup.py: cpu, torch 2.13"),
        "cu13.torch2.14": _build(
            this, source, "cu13", root / "cu13", "setup.py: cu13, torch 2.14",
            PTKIT_CUDA_ROOT=_cuda_root(),
        ),
    }  # fmt: skip
    return {"source": source, "report": report, "wheels": wheels, "root": root}


@pytest.fixture(scope="module")
def kernel_builder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("adopt_kernel_builder")
    source, report = _adopted("adopt_kernel_builder", root)
    this = Path(sys.executable)
    wheels = {
        "cpu.torch2.14": _build(this, source, "cpu", root / "cpu", "build.toml: cpu"),
        "cu13.torch2.14": _build(
            this, source, "cu13", root / "cu13", "build.toml: cu13", PTKIT_CUDA_ROOT=_cuda_root()
        ),
    }
    return {"source": source, "report": report, "wheels": wheels, "root": root}


@pytest.fixture(scope="module")
def setup_py_index(
    setup_py: dict[str, object], toolkit_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    wheels = list(setup_py["wheels"].values())  # type: ignore[attr-defined]
    source: Path = setup_py["source"]  # type: ignore[assignment]
    yield from serve_index(
        wheels, toolkit_wheel, source / "recipes", tmp_path_factory.mktemp("idx1")
    )


@pytest.fixture(scope="module")
def kernel_builder_index(
    kernel_builder: dict[str, object], toolkit_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    wheels = list(kernel_builder["wheels"].values())  # type: ignore[attr-defined]
    source: Path = kernel_builder["source"]  # type: ignore[assignment]
    yield from serve_index(
        wheels, toolkit_wheel, source / "recipes", tmp_path_factory.mktemp("idx2")
    )


def _own_tests(python: Path, source: Path) -> str:
    """The fixture's own tests against the installed package (run from /, so that the
    copy's package folder is not the one imported)."""
    proc = run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
         str(source / "tests")],
        env=python_env(CUDA_VISIBLE_DEVICES=""), cwd=Path("/"),
    )  # fmt: skip
    return proc.stdout


def _wheel_names(wheels: dict[str, Path]) -> dict[str, str]:
    return {label: wheel.name for label, wheel in wheels.items()}


# --- setup.py --------------------------------------------------------------------------


def test_setup_py_adopt_reports_what_it_could_not_translate(setup_py: dict[str, object]) -> None:
    report = str(setup_py["report"])
    assert "ABI torch (the classic C++ API: one wheel per torch minor)" in report
    assert "NOT translated (3): fix these by hand:" in report
    for what in ("-std=c++17", "extra_link_args=['-Wl,--as-needed']", "py_limited_api=True"):
        assert f"  - adopt_setup_py._C: {what}\n    fix: " in report


def test_setup_py_builds_one_wheel_per_torch_minor_and_a_cu13_one(
    setup_py: dict[str, object],
) -> None:
    names = _wheel_names(setup_py["wheels"])  # type: ignore[arg-type]
    for label, name in names.items():
        assert re.fullmatch(
            rf"adopt_setup_py-0\.2\.0\+{re.escape(label)}-py3-none-manylinux_2_\d+_x86_64\.whl",
            name,
        ), name
    with zipfile.ZipFile(setup_py["wheels"]["cu13.torch2.14"]) as archive:  # type: ignore[index]
        native = sorted(n for n in archive.namelist() if "/_native/" in n)
        manifest = json.loads(
            archive.read("adopt_setup_py/_native/adopt_setup_py_cuda.manifest.json")
        )
    assert "adopt_setup_py/_native/libadopt_setup_py_cpu.so" in native
    assert "adopt_setup_py/_native/libadopt_setup_py_cuda.so" in native
    assert manifest["torch"]["abi"] == "torch" and manifest["torch"]["target_version"] == "2.14"
    assert manifest["targets"] == {"ptx": [], "sass": ["sm_90"]}  # setup.py's -gencode


@pytest.mark.parametrize(
    ("installer", "torch_minor", "variant"),
    # Each installer, variant and torch minor at least once (two of four; the other two
    # pairings passed in earlier make test runs and are left out for CI time).
    [("uv", "2.13", "cpu"), ("pip", "2.14", "cu13")],
)
def test_setup_py_installs_from_the_index_and_passes_its_own_tests(
    setup_py_index: str, tmp_path: Path, installer: str, torch_minor: str, variant: str
) -> None:
    """Each variant's page of the index, each installer; the cu13 wheel on this machine
    without a GPU: its CPU library serves the tests, its CUDA library is there too."""
    python = torch_env(tmp_path / "env", torch_minor)
    said = install_from_index(
        installer, python, "adopt-setup-py", f"{setup_py_index}/{variant}/simple"
    )
    build = f"0.2.0+{variant}.torch{torch_minor}"
    assert f"adopt-setup-py{'==' if installer == 'uv' else '-'}{build}" in said, said
    assert "4 passed" in _own_tests(python, FIXTURES / "adopt_setup_py")
    explain = run([str(python), "-m", "ptkit", "explain"], env=python_env(), cwd=Path("/")).stdout
    assert "adopt_setup_py" in explain and "libadopt_setup_py_cpu.so" in explain
    assert re.search(r"libadopt_setup_py_cpu\.so\s+loaded", explain), explain
    if variant == "cu13":
        assert "libadopt_setup_py_cuda.so" in explain, explain
    doctor = run([str(python), "-m", "ptkit", "doctor"], env=python_env(), cwd=Path("/")).stdout
    assert "adopt_setup_py" in doctor, doctor


# --- kernel-builder ----------------------------------------------------------------------


def test_kernel_builder_adopt_edits_the_glue_only(kernel_builder: dict[str, object]) -> None:
    report = str(kernel_builder["report"])
    assert "torch-ext/registration.h: kernel-builder's glue" in report
    assert "NOT translated: nothing" in report
    source: Path = kernel_builder["source"]  # type: ignore[assignment]
    for kernel in ("activation/activation.cu", "activation_cpu/activation_cpu.cpp"):
        assert (source / kernel).read_bytes() == (
            FIXTURES / "adopt_kernel_builder" / kernel
        ).read_bytes()


def test_kernel_builder_builds_a_library_per_variant(kernel_builder: dict[str, object]) -> None:
    wheels: dict[str, Path] = kernel_builder["wheels"]  # type: ignore[assignment]
    for label, wheel in wheels.items():
        assert re.fullmatch(
            rf"adopt_kernel_builder-0\.1\.0\+{re.escape(label)}-py3-none-manylinux_2_\d+_x86_64\.whl",
            wheel.name,
        ), wheel.name
        with zipfile.ZipFile(wheel) as archive:
            libraries = sorted(n for n in archive.namelist() if n.endswith(".so"))
        backend = "cuda" if label.startswith("cu13") else "cpu"
        assert libraries == [f"adopt_kernel_builder/_native/libadopt_kernel_builder_{backend}.so"]


def test_kernel_builder_cu13_installs_and_says_its_cpu_op_has_no_kernel_there(
    kernel_builder_index: str, tmp_path: Path
) -> None:
    """kernel-builder builds one backend per variant (the binding's #if blocks), and so
    does the adoption: the cu13 wheel, installed by uv, defines every schema and serves
    the CUDA kernels only, and its CPU op says so instead of computing anything."""
    python = torch_env(tmp_path / "env", "2.14")
    said = install_from_index(
        "uv", python, "adopt_kernel_builder", f"{kernel_builder_index}/cu13/simple"
    )
    assert "0.1.0+cu13.torch2.14" in said, said
    check = (
        "import torch, adopt_kernel_builder as k\n"
        "print(k.ops.gelu_tanh.default._schema.name)\n"
        "try:\n    k.silu_and_mul(torch.empty(2, 3), torch.randn(2, 6))\n"
        "except NotImplementedError as e:\n    print('no CPU kernel:', str(e).splitlines()[0])\n"
    )
    out = run([str(python), "-c", check], env=python_env(), cwd=Path("/")).stdout
    assert out.startswith("adopt_kernel_builder::gelu_tanh\nno CPU kernel: "), out
    explain = run([str(python), "-m", "ptkit", "explain"], env=python_env(), cwd=Path("/")).stdout
    assert re.search(r"libadopt_kernel_builder_cuda\.so\s+loaded", explain), explain


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_kernel_builder_installs_from_the_index_and_passes_its_own_tests(
    kernel_builder_index: str, tmp_path: Path, installer: str
) -> None:
    python = torch_env(tmp_path / "env", "2.14")
    said = install_from_index(
        installer, python, "adopt_kernel_builder", f"{kernel_builder_index}/cpu/simple"
    )
    assert "0.1.0+cpu.torch2.14" in said
    out = _own_tests(python, FIXTURES / "adopt_kernel_builder")
    assert "3 passed, 1 skipped" in out, out
    explain = run([str(python), "-m", "ptkit", "explain"], env=python_env(), cwd=Path("/")).stdout
    assert re.search(r"libadopt_kernel_builder_cpu\.so\s+loaded", explain), explain
    doctor = run([str(python), "-m", "ptkit", "doctor"], env=python_env(), cwd=Path("/")).stdout
    assert "adopt_kernel_builder" in doctor, doctor
