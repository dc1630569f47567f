"""Issue 16, shape (c): a CUDA op set with one CPU op (tests/fixtures/projects/shapes_cuda).
The CPU library defines every schema and the CPU kernel of ``scale``; the CUDA library
(compiled by nvcc 13.5 for sm_90 only) registers the CUDA kernels of all three; there
is no reference, and no ``OPS`` in the CMakeLists.

Built for cpu and cu13 by ``ptkit build --source``, installed from a ptkit index (cpu by
pip, cu13 by uv):
both pass the smoke stage (no "every op runs natively on CPU"); ``explain()`` says native,
or unavailable with the reason, per (op, device); ``PTKIT_DISABLE_NATIVE=cpu`` keeps the
import and the CUDA kernels, and says the CPU ones are off; a library that cannot load
in the smoke environment gets registration checks only, said so; ``ptkit doctor`` lists
the package and its unavailable ops without importing torch. This machine has no GPU:
the CUDA kernels are compiled, audited and registered, never run.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fresh_python import install_from_index, serve_index, torch_env
from shapes_projects import built_wheel, copy_project, in_env, installed
from support import REPO

pytestmark = pytest.mark.integration

EXPLAIN = """
import json, torch, shapes_cuda, ptkit.runtime as rt
out = {"routes": {f"{r.op}/{r.device_type}": [r.implementation, r.library, r.reason] for r in rt.explain("shapes_cuda")},
       "decisions": {d.library: [d.status.value, d.reason] for d in rt.load_decisions("shapes_cuda")},
       "unavailable": shapes_cuda.LOAD.unavailable_ops}
try:
    out["scale_cpu"] = ["ok", shapes_cuda.scale(torch.tensor([2.0]), 3.0).tolist()]
except Exception as exc:
    out["scale_cpu"] = [type(exc).__name__, str(exc)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shapes_cuda")


@pytest.fixture(scope="module")
def source(work: Path) -> Path:
    return copy_project("shapes_cuda", work)


@pytest.fixture(scope="module")
def builds(source: Path, work: Path) -> dict[str, tuple[Path, str]]:
    return {variant: built_wheel(source, variant, work) for variant in ("cpu", "cu13")}


@pytest.fixture(scope="module")
def pythons(
    builds: dict[str, tuple[Path, str]], toolkit_wheel: Path, source: Path, work: Path
) -> Iterator[dict[str, Path]]:
    """Both wheels in a ptkit index on 127.0.0.1: the cpu one installed by pip, the cu13 one
    by uv, each into a venv that holds torch 2.14 and nothing of ptkit."""
    wheels = [wheel for wheel, _ in builds.values()]
    for url in serve_index(wheels, toolkit_wheel, source / "recipes", work / "index"):
        envs = {}
        for variant, installer in (("cpu", "pip"), ("cu13", "uv")):
            python = torch_env(work / f"venv-{variant}", "2.14")
            said = install_from_index(installer, python, "shapes-cuda", f"{url}/{variant}/simple")
            assert f"0.2.0+{variant}" in said, said
            envs[variant] = python
        yield envs


def _explain(python: Path, **env: str) -> dict[str, dict[str, list[str]]]:
    proc = in_env(python, EXPLAIN, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, dict[str, list[str]]] = json.loads(proc.stdout)
    return out


def _manifest(wheel: Path, library: str) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as archive:
        data: dict[str, object] = json.loads(
            archive.read(f"shapes_cuda/_native/{library}.manifest.json")
        )
    return data


def test_each_librarys_op_table_is_what_it_registers(builds: dict[str, tuple[Path, str]]) -> None:
    wheel = builds["cu13"][0]
    cpu = _manifest(wheel, "shapes_cuda_cpu")
    cuda = _manifest(wheel, "shapes_cuda_cuda")
    assert cpu["ops"] == {"scale": ["float32"]}
    assert cpu["registrations"] == {
        "namespaces": ["shapes_cuda"],
        "schemas": {
            "shapes_cuda::gelu_fast": "shapes_cuda::gelu_fast(Tensor x) -> Tensor",
            "shapes_cuda::relu_squared": "shapes_cuda::relu_squared(Tensor x) -> Tensor",
            "shapes_cuda::scale": "shapes_cuda::scale(Tensor x, float alpha) -> Tensor",
        },
        "kernels": {"shapes_cuda::scale": ["CPU"]},
    }
    # The CUDA library, loaded alone at install time (no GPU needed): kernels, no schemas.
    assert cuda["ops"] == {op: ["float32"] for op in ("gelu_fast", "relu_squared", "scale")}
    assert cuda["registrations"] == {
        "namespaces": [],
        "schemas": {},
        "kernels": {
            f"shapes_cuda::{op}": ["CUDA"] for op in ("gelu_fast", "relu_squared", "scale")
        },
    }
    assert cuda["targets"] == {"sass": ["sm_90"], "ptx": []}


def test_both_variants_pass_the_smoke_stage(builds: dict[str, tuple[Path, str]]) -> None:
    cpu_output, cu13_output = builds["cpu"][1], builds["cu13"][1]
    for output in (cpu_output, cu13_output):
        assert "[4/5] smoke ok" in output
        assert "shapes_cuda::scale         ran on CPU: float32 (its samples)" in output
    assert (
        "libshapes_cuda_cuda.so     registration checks only: the smoke test runs CPU kernels, "
        "its CUDA kernels are not run" in cu13_output
    )
    assert "[3/5] audit ok" in cu13_output and "GPU code sm_90" in cu13_output


def test_explain_on_the_cpu_variant(pythons: dict[str, Path]) -> None:
    routes = _explain(pythons["cpu"])["routes"]
    assert routes["scale/cpu"][0] == "native"
    assert routes["gelu_fast/cpu"] == [
        "unavailable",
        None,
        "shapes_cuda::gelu_fast has no CPU kernel: libshapes_cuda_cpu.so defines it; the "
        "package has no reference for it, so nothing serves CPU tensors",
    ]
    assert routes["gelu_fast/cuda"][2] == (
        "shapes_cuda::gelu_fast has no CUDA kernel: libshapes_cuda_cpu.so defines it; the "
        "package has no reference for it, so nothing serves CUDA tensors (no native cuda or "
        "hip library in this install (variant cpu); install the variant for this accelerator "
        "from its index)"
    )
    assert routes["scale/cuda"][2].startswith(
        "shapes_cuda::scale has no CUDA kernel: libshapes_cuda_cpu.so defines it and registers "
        "it for CPU only;"
    )


def test_explain_on_the_cu13_variant(pythons: dict[str, Path]) -> None:
    out = _explain(pythons["cu13"])
    routes = out["routes"]
    for op in ("scale", "gelu_fast", "relu_squared"):
        assert routes[f"{op}/cuda"][:2] == ["native", "libshapes_cuda_cuda.so"]
    assert routes["scale/cpu"][:2] == ["native", "libshapes_cuda_cpu.so"]
    assert routes["relu_squared/cpu"] == [
        "unavailable",
        None,
        "shapes_cuda::relu_squared has no CPU kernel: libshapes_cuda_cpu.so defines it; "
        "libshapes_cuda_cuda.so registers it for CUDA only; the package has no reference for "
        "it, so nothing serves CPU tensors",
    ]
    assert out["scale_cpu"] == ["ok", [6.0]]


def test_disabling_the_cpu_library_keeps_the_import_and_the_cuda_kernels(
    pythons: dict[str, Path],
) -> None:
    out = _explain(pythons["cu13"], PTKIT_DISABLE_NATIVE="cpu")
    assert out["decisions"]["libshapes_cuda_cpu.so"] == [
        "skipped",
        "native cpu code switched off by PTKIT_DISABLE_NATIVE",
    ]
    assert out["decisions"]["libshapes_cuda_cuda.so"][0] == "loaded"
    routes = out["routes"]
    # The schemas are ptkit's stand-ins now; the CUDA library's kernels still serve.
    assert routes["gelu_fast/cuda"][:2] == ["native", "libshapes_cuda_cuda.so"]
    assert routes["scale/cpu"] == [
        "unavailable",
        None,
        "shapes_cuda::scale is defined only in libshapes_cuda_cpu.so, not loaded: native cpu "
        "code switched off by PTKIT_DISABLE_NATIVE; the package has no reference for it, so "
        "nothing serves CPU tensors. Fix: take cpu out of PTKIT_DISABLE_NATIVE",
    ]
    error, message = out["scale_cpu"]
    assert error == "OpUnavailableError"
    assert message.startswith(
        "shapes_cuda::scale is unavailable: it is defined only in libshapes_cuda_cpu.so, which "
        "was not loaded (native cpu code switched off by PTKIT_DISABLE_NATIVE)"
    )
    assert set(out["unavailable"]) == {
        "shapes_cuda::gelu_fast",
        "shapes_cuda::relu_squared",
        "shapes_cuda::scale",
    }


def test_a_gpu_library_that_cannot_load_gets_registration_checks_only(
    pythons: dict[str, Path],
) -> None:
    # Switched off here, so the smoke test loads it alone in a child process instead.
    proc = in_env(
        pythons["cu13"],
        "from ptkit.runtime.smoke import main; raise SystemExit(main(['shapes_cuda']))",
        PTKIT_DISABLE_NATIVE="cuda",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "libshapes_cuda_cuda.so     registration checks only (native cuda code switched off by "
        "PTKIT_DISABLE_NATIVE): kernels not run; loaded alone, it registers the declared ops "
        "(gelu_fast, relu_squared, scale)" in proc.stdout
    )


def test_the_cu13_wheel_on_a_cpu_only_torch_213(
    builds: dict[str, tuple[Path, str]], toolkit_wheel: Path, work: Path
) -> None:
    base = REPO / ".venv-torch213" / "bin" / "python"
    if not base.exists():
        pytest.fail(".venv-torch213 is missing: run scripts/bootstrap (make test does)")
    python = installed(builds["cu13"][0], toolkit_wheel, work / "venv-213", base)
    proc = in_env(
        python, "from ptkit.runtime.smoke import main; raise SystemExit(main(['shapes_cuda']))"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch 2.13.0+cpu" in proc.stdout
    assert "libshapes_cuda_cuda.so     registration checks only (" in proc.stdout
    assert "kernels not run; registrations as recorded (not loadable here: a CUDA library: " in (
        proc.stdout
    )


@pytest.mark.parametrize("variant", ["cpu", "cu13"])
def test_the_packages_own_tests_pass(variant: str, pythons: dict[str, Path], source: Path) -> None:
    proc = subprocess.run(
        [
            str(pythons[variant]),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(source / "tests"),
        ],
        cwd=source.parent,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PTKIT_", "PYTHONPATH"))},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed, 1 skipped" in proc.stdout


def test_the_doctor_lists_the_package_and_its_unavailable_ops(pythons: dict[str, Path]) -> None:
    proc = in_env(
        pythons["cu13"],
        "import sys, ptkit.cli; sys.argv = ['ptkit', 'doctor', '--json']; ptkit.cli.main()",
    )
    document = json.loads(proc.stdout)
    packages = {p["name"]: p for p in document["facts"]["packages"]}
    routes = {
        (r["op"], r["device_type"]): r["implementation"] for r in packages["shapes_cuda"]["routes"]
    }
    assert routes[("gelu_fast", "cpu")] == "unavailable"
    assert routes[("gelu_fast", "cuda")] == "native"
    assert routes[("scale", "cpu")] == "native"
    unavailable = [f for f in document["findings"] if f["check"] == "PTK309"]
    assert any(
        f["message"].startswith(
            "shapes_cuda 0.2.0+cu13, variant cu13: gelu_fast has no "
            "implementation on cpu: shapes_cuda::gelu_fast has no CPU kernel"
        )
        for f in unavailable
    ), unavailable
