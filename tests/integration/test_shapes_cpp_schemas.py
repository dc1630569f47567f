"""Issue 16, shape (b): a stable-ABI project whose schemas are defined in C++
(``STABLE_TORCH_LIBRARY``), with no reference implementation and no ``OPS`` in its
CMakeLists (tests/fixtures/projects/shapes_cpp).

Built for real by ``ptkit build --source`` (cpu, and cu13 for the CUDA index), installed
by pip into a fresh venv and from a ptkit index by pip and uv: the
manifest's op table comes from what the library registers; ``explain()`` says native on
CPU and unavailable (with the reason) on CUDA; ``PTKIT_FORCE_REFERENCE=1`` and
``PTKIT_DISABLE_NATIVE=cpu`` leave the import working and say why the ops are
unavailable, and a call raises ``OpUnavailableError`` naming the op, the switch and the
fix; the smoke stage runs each declared dtype and fails when one is not accepted; an
``OPS`` list that disagrees with the registrations fails the build naming both lists; a
library that kills the process when loaded fails the install step, and the smoke stage,
with the signal, the library and a command that reproduces it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fresh_python import install_from_index, serve_index, torch_env
from shapes_projects import built_wheel, copy_project, in_env, installed, ptkit_build
from support import python_env, run

from ptkit.recipes.model import load_recipe
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.smoke import smoke_test

pytestmark = pytest.mark.integration

EXPLAIN = """
import json, torch, shapes_cpp, ptkit.runtime as rt
out = {"routes": {f"{r.op}/{r.device_type}": [r.implementation, r.reason] for r in rt.explain("shapes_cpp")},
       "unavailable": shapes_cpp.LOAD.unavailable_ops,
       "available": shapes_cpp.LOAD.available("square"),
       "decisions": [[d.library, d.status.value, d.reason] for d in rt.load_decisions("shapes_cpp")]}
try:
    out["call"] = ["ok", shapes_cpp.square(torch.tensor([3.0])).tolist()]
except Exception as exc:
    out["call"] = [type(exc).__name__, str(exc), isinstance(exc, rt.OpUnavailableError)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shapes_cpp")


@pytest.fixture(scope="module")
def build(work: Path) -> tuple[Path, str, Path]:
    source = copy_project("shapes_cpp", work)
    wheel, output = built_wheel(source, "cpu", work)
    return wheel, output, source


@pytest.fixture(scope="module")
def python(build: tuple[Path, str, Path], toolkit_wheel: Path, work: Path) -> Path:
    return installed(build[0], toolkit_wheel, work / "venv")


def _explain(python: Path, **env: str) -> dict[str, object]:
    proc = in_env(python, EXPLAIN, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    return out


def test_the_op_table_comes_from_what_the_library_registers(build: tuple[Path, str, Path]) -> None:
    wheel, output, _ = build
    with zipfile.ZipFile(wheel) as archive:
        manifest = json.loads(archive.read("shapes_cpp/_native/shapes_cpp_cpu.manifest.json"))
    assert manifest["ops"] == {"muladd": ["float32"], "square": ["float32"]}
    assert manifest["registrations"] == {
        "namespaces": ["shapes_cpp"],
        "schemas": {
            "shapes_cpp::muladd": "shapes_cpp::muladd(Tensor a, Tensor b, float c) -> Tensor",
            "shapes_cpp::square": "shapes_cpp::square(Tensor x) -> Tensor",
        },
        "kernels": {"shapes_cpp::muladd": ["CPU"], "shapes_cpp::square": ["CPU"]},
    }
    assert (
        "ptkit: libshapes_cpp_cpu.so (cpu) registers CPU kernels for muladd, square; defines "
        "shapes_cpp::muladd, shapes_cpp::square; holds namespace shapes_cpp" in output
    )


def test_the_smoke_stage_runs_each_declared_dtype(build: tuple[Path, str, Path]) -> None:
    output = build[1]
    assert "[4/5] smoke ok" in output
    # muladd takes a float: the package's samples; square takes a tensor: a safe guess.
    assert "shapes_cpp::muladd         ran on CPU: float32 (its samples)" in output
    assert "shapes_cpp::square         ran on CPU: float32 (guessed elementwise inputs)" in output


def test_explain_is_native_on_cpu_and_unavailable_on_cuda(python: Path) -> None:
    out = _explain(python)
    routes = out["routes"]
    assert isinstance(routes, dict)
    assert routes["square/cpu"][0] == "native"
    assert routes["square/cpu"][1].startswith("libshapes_cpp_cpu.so loaded: cpu variant")
    # This torch has CUDA (no device here): nothing serves CUDA tensors, and no
    # "reference" is claimed where none is registered.
    assert routes["square/cuda"] == [
        "unavailable",
        "shapes_cpp::square has no CUDA kernel: libshapes_cpp_cpu.so defines it and registers "
        "it for CPU only; the package has no reference for it, so nothing serves CUDA tensors",
    ]
    assert out["call"] == ["ok", [9.0]]
    assert (out["unavailable"], out["available"]) == ({}, True)


@pytest.mark.parametrize(
    ("switch", "value", "reason", "fix"),
    [
        (
            "PTKIT_FORCE_REFERENCE",
            "1",
            "native code switched off by PTKIT_FORCE_REFERENCE=1",
            "unset PTKIT_FORCE_REFERENCE (or set it to 0)",
        ),
        (
            "PTKIT_DISABLE_NATIVE",
            "cpu",
            "native cpu code switched off by PTKIT_DISABLE_NATIVE",
            "take cpu out of PTKIT_DISABLE_NATIVE",
        ),
    ],
)
def test_a_switch_leaves_the_import_working_and_names_the_unavailable_ops(
    python: Path, switch: str, value: str, reason: str, fix: str
) -> None:
    # The package registers fake kernels for its ops at import: they exist (ptkit's
    # stand-ins), so the import works although the library defining them is off.
    out = _explain(python, **{switch: value})
    routes = out["routes"]
    assert isinstance(routes, dict)
    for key in ("square/cpu", "square/cuda", "muladd/cpu"):
        implementation, why = routes[key]
        assert implementation == "unavailable"
        op = key.split("/")[0]
        assert why.startswith(
            f"shapes_cpp::{op} is defined only in libshapes_cpp_cpu.so, not loaded: {reason};"
        ), why
        assert why.endswith(f"Fix: {fix}")
    assert out["available"] is False
    unavailable = out["unavailable"]
    assert isinstance(unavailable, dict) and set(unavailable) == {
        "shapes_cpp::muladd",
        "shapes_cpp::square",
    }
    error, message, is_ptkit_error = out["call"]
    assert (error, is_ptkit_error) == ("OpUnavailableError", True)
    assert message.startswith(
        "shapes_cpp::square is unavailable: it is defined only in libshapes_cpp_cpu.so, which "
        f"was not loaded ({reason}), and shapes_cpp has no reference implementation for it. "
        f"Fix: {fix}"
    )
    assert "does not exist" not in message


def test_the_packages_own_tests_pass(python: Path, build: tuple[Path, str, Path]) -> None:
    source = build[2]
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")],
        cwd=source.parent,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PTKIT_", "PYTHONPATH"))},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_a_declared_dtype_the_kernel_refuses_fails_the_smoke_stage(work: Path) -> None:
    source = copy_project("shapes_cpp", work / "dtypes")
    proc = ptkit_build(source, "cpu", work / "dtypes", SHAPES_CPP_DTYPES="float32;float16")
    assert proc.returncode == 1
    err = proc.stderr
    assert "stage 'smoke' failed for variant cpu" in err
    assert (
        "FAILED: shapes_cpp::square: libshapes_cpp_cpu.so declares float16, but its CPU kernel "
        "raised on guessed elementwise inputs: RuntimeError: shapes_cpp.square: expected "
        "float32, the only dtype this kernel accepts" in err
    ), err
    assert "FAILED: shapes_cpp::muladd: libshapes_cpp_cpu.so declares float16, but its CPU " in err
    assert "take float16 out of DTYPES, or make the kernel accept it" in err


def test_ops_that_disagree_with_the_registrations_fail_the_build_naming_both(work: Path) -> None:
    source = copy_project("shapes_cpp", work / "ops")
    cmake = source / "CMakeLists.txt"
    cmake.write_text(
        cmake.read_text().replace("SOURCES csrc/ops.cpp", "SOURCES csrc/ops.cpp OPS square cube")
    )
    proc = ptkit_build(source, "cpu", work / "ops")
    assert proc.returncode == 1
    log = (work / "ops" / "build" / "pipeline-cpu" / "wheel" / "build.log").read_text()
    text = " ".join(log.split())  # CMake wraps its messages
    assert (
        "libshapes_cpp_cpu.so (cpu, namespace shapes_cpp): OPS says cube, square, but the "
        "library registers CPU kernels for muladd, square (no CPU kernel for cube; undeclared "
        "CPU kernels for muladd): make OPS the list the library registers, or leave OPS out "
        "to take it from the registrations" in text
    ), text[-3000:]


def test_an_installed_manifest_that_declares_more_fails_the_smoke_test(
    build: tuple[Path, str, Path], toolkit_wheel: Path, work: Path
) -> None:
    python = installed(build[0], toolkit_wheel, work / "edited")
    site = in_env(python, "import shapes_cpp, os; print(os.path.dirname(shapes_cpp.__file__))")
    manifest = Path(site.stdout.strip(), "_native", "shapes_cpp_cpu.manifest.json")
    data = json.loads(manifest.read_text())
    data["ops"]["cube"] = ["float32"]  # the manifest's sha256 is the library's: still loads
    manifest.write_text(json.dumps(data))
    # As if the wheel had shipped this manifest: its RECORD entry says so (else the loader
    # refuses a manifest edited after install, test_weak_diagnoses.py).
    (record,) = manifest.parents[2].glob("shapes_cpp-*.dist-info/RECORD")
    digest = base64.urlsafe_b64encode(hashlib.sha256(manifest.read_bytes()).digest())
    entry = "shapes_cpp/_native/shapes_cpp_cpu.manifest.json"
    record.write_text("".join(
        f"{entry},sha256={digest.rstrip(b'=').decode()},{manifest.stat().st_size}\n"
        if line.startswith(entry + ",") else line
        for line in record.read_text().splitlines(keepends=True)
    ))  # fmt: skip
    proc = in_env(
        python, "from ptkit.runtime.smoke import main; raise SystemExit(main(['shapes_cpp']))"
    )
    assert proc.returncode == 1
    assert (
        "FAILED: libshapes_cpp_cpu.so loaded but registered no CPU kernel for shapes_cpp::cube"
        in proc.stderr
    )
    assert "its recorded registrations disagree: libshapes_cpp_cpu.so (cpu, namespace " in (
        proc.stderr
    )


def test_a_library_that_crashes_when_loaded_fails_the_install_step(work: Path) -> None:
    source = copy_project("shapes_cpp", work / "crash")
    proc = ptkit_build(source, "cpu", work / "crash", SHAPES_CPP_CRASH_AT_LOAD="1")
    assert proc.returncode == 1
    log = (work / "crash" / "build" / "pipeline-cpu" / "wheel" / "build.log").read_text()
    text = " ".join(log.split())
    assert (
        "loading libshapes_cpp_cpu.so alone into torch killed the process with SIGSEGV "
        "(signal 11)" in text
    ), text[-3000:]
    # The command names the build folder's copy (the install folder was temporary), and it
    # does reproduce the crash.
    built = work / "crash" / "build" / "cmake-cpu" / "libshapes_cpp_cpu.so"
    command = (
        f"{sys.executable} -m ptkit.runtime.registrations {built} --backend cpu "
        "--namespace shapes_cpp"
    )
    assert f"reproduce it with `{command}`" in text
    again = subprocess.run(
        command.split(),
        env={**os.environ, "SHAPES_CPP_CRASH_AT_LOAD": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == -11, again.stderr
    assert f"ptkit: loading {built}" in again.stderr


def test_a_smoke_child_killed_by_a_signal_is_named_with_its_library(
    build: tuple[Path, str, Path], work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel, _, source = build
    recipe = load_recipe("cpu", source / "recipes")
    venv = work / "smoke-venv"
    monkeypatch.setenv("SHAPES_CPP_CRASH_AT_LOAD", "1")  # the wheel's library now crashes
    with pytest.raises(BuildError) as failure:
        smoke_test(wheel, recipe=recipe, project=source, venv_dir=venv)
    message = str(failure.value)
    library = next(venv.glob("lib/python*/site-packages/shapes_cpp/_native/libshapes_cpp_cpu.so"))
    # sh reports the killed python as exit status 139 (128 + 11); a shell that execs its
    # last command passes on the signal itself.
    assert "`python -m ptkit.runtime.smoke shapes_cpp` was killed by SIGSEGV (" in message
    assert f"signal 11) in a fresh environment, while loading {library}" in message, message
    # Python's own traceback of the crash is in the output (PYTHONFAULTHANDLER=1).
    assert "Fatal Python error: Segmentation fault" in message
    command = message.split("reproduce it with `", 1)[1].split("` (the wheel stays", 1)[0]
    again = subprocess.run(
        command, shell=True, capture_output=True, text=True, timeout=300, check=False
    )
    assert again.returncode in (139, -11), again.stdout + again.stderr
    assert f"ptkit: loading {library}" in again.stderr


REFERENCE_AFTER = """
import json, torch, shapes_cpp, ptkit.runtime as rt
# A reference registered after load_package for an op whose schema is in C++.
torch.library.impl("shapes_cpp::square", "CompositeExplicitAutograd", lambda x: x * x)
rows = {f"{r.op}/{r.device_type}": [r.implementation, r.reason] for r in rt.explain("shapes_cpp")}
print(json.dumps({"rows": rows, "square": shapes_cpp.square(torch.tensor([3.0])).tolist()}))
"""


@pytest.mark.parametrize("force", ["0", "1"])
def test_a_python_reference_for_a_cpp_schema_serves_where_no_kernel_does(
    python: Path, force: str
) -> None:
    proc = in_env(python, REFERENCE_AFTER, PTKIT_FORCE_REFERENCE=force)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["square"] == [9.0]
    rows = out["rows"]
    assert rows["square/cuda"][0] == "reference"
    assert "reference: its CompositeExplicitAutograd kernel (" in rows["square/cuda"][1]
    # With the library loaded its CPU kernel serves; forced off, the reference does (it
    # replaced ptkit's stand-in), while muladd stays unavailable.
    assert rows["square/cpu"][0] == ("native" if force == "0" else "reference")
    assert rows["muladd/cpu"][0] == ("native" if force == "0" else "unavailable")


@pytest.fixture(scope="module")
def index_url(build: tuple[Path, str, Path], toolkit_wheel: Path, work: Path) -> Iterator[str]:
    """The cpu wheel and a cu13 build (the same CPU library, for the CUDA index) in a
    ptkit index on 127.0.0.1."""
    source = build[2]
    cu13, _ = built_wheel(source, "cu13", work / "cu13")
    yield from serve_index([build[0], cu13], toolkit_wheel, source / "recipes", work / "index")


@pytest.mark.parametrize(("installer", "variant"), [("pip", "cpu"), ("uv", "cu13")])
def test_installed_from_the_index_its_own_tests_pass_and_the_doctor_lists_it(
    index_url: str, build: tuple[Path, str, Path], tmp_path: Path, installer: str, variant: str
) -> None:
    python = torch_env(tmp_path / "env", "2.14")
    said = install_from_index(installer, python, "shapes-cpp", f"{index_url}/{variant}/simple")
    assert f"0.3.0+{variant}" in said, said
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
         str(build[2] / "tests")],
        cwd="/", capture_output=True, text=True, timeout=600, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PTKIT_", "PYTHONPATH"))},
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout + tests.stderr
    explain = run([str(python), "-m", "ptkit", "explain"], env=python_env(), cwd=Path("/")).stdout
    assert "libshapes_cpp_cpu.so loaded" in " ".join(explain.split()), explain
    doctor = run([str(python), "-m", "ptkit", "doctor"], env=python_env(), cwd=Path("/")).stdout
    assert f"shapes_cpp 0.3.0+{variant}" in doctor, doctor
