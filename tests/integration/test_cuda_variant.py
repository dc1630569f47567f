"""The cu13 wheel of ptkit-ops, built here from the pip CUDA 13.5 toolkit: what its
fatbinary holds, what it links, and how it loads on this machine (a CUDA torch, no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from support import REPO, fresh_venv, run, run_op_tests

from ptkit.recipes.model import load_recipe
from ptkit_ops import OPS

pytestmark = pytest.mark.integration

CUOBJDUMP = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*/bin/cuobjdump"))


def test_cu13_wheel_is_tagged_and_holds_both_libraries(cu13_wheel: Path) -> None:
    _, version, _, tags = parse_wheel_filename(cu13_wheel.name)
    assert version.local == "cu13"
    assert {(t.interpreter, t.abi) for t in tags} == {("py3", "none")}
    names = zipfile.ZipFile(cu13_wheel).namelist()
    native = sorted(n.split("/")[-1] for n in names if "/_native/" in n and not n.endswith("/"))
    assert native == [
        "libptkit_cpu.so",
        "libptkit_cuda.so",
        "ptkit_cpu.manifest.json",
        "ptkit_cuda.manifest.json",
    ]
    # torch's CUDA runtime is used, never a second copy in the wheel.
    assert not [n for n in names if "libcudart" in n]


def test_inspect_shows_every_requested_target_in_the_fatbinary(cu13_wheel: Path) -> None:
    if not CUOBJDUMP:
        pytest.fail("cuobjdump is missing: run scripts/bootstrap (make test does)")
    proc = run(
        [
            sys.executable,
            "-m",
            "ptkit",
            "inspect",
            str(cu13_wheel),
            "--json",
            "--cuobjdump",
            str(CUOBJDUMP[-1]),
        ],
        cwd=Path("/"),
    )
    reports = {r["library"]: r for r in json.loads(proc.stdout)}
    cuda = reports["libptkit_cuda.so"]
    recipe = load_recipe("cu13", REPO / "recipes")
    wanted_sass = [t for t in recipe.targets.cuda if t.startswith("sm_")]
    wanted_ptx = [t for t in recipe.targets.cuda if t.startswith("compute_")]
    assert cuda["fatbin"] == {"sass": wanted_sass, "ptx": wanted_ptx}
    assert cuda["manifest"]["targets"] == {"sass": wanted_sass, "ptx": wanted_ptx}
    assert cuda["manifest"]["toolkit"]["version"].startswith(recipe.toolkit.version)
    assert cuda["problems"] == []
    assert "libcudart.so.13" in cuda["needed"] and "libtorch_cuda.so" in cuda["needed"]
    assert not any(n.startswith(("libpython", "libtorch_python")) for n in cuda["needed"])
    assert reports["libptkit_cpu.so"]["problems"] == []
    text = run(
        [
            sys.executable,
            "-m",
            "ptkit",
            "inspect",
            str(cu13_wheel),
            "--cuobjdump",
            str(CUOBJDUMP[-1]),
        ],
        cwd=Path("/"),
    ).stdout
    assert "fatbinary SASS: sm_90, sm_100, sm_103, sm_107, sm_110, sm_120" in text
    assert "fatbinary PTX: compute_120" in text


LOAD_SCRIPT = r"""
import json, torch, ptkit, ptkit_ops
print(json.dumps({
    "cuda_available": torch.cuda.is_available(),
    "decisions": [(d.library, d.status.value, d.reason, dict(d.details)) for d in ptkit.runtime.load_decisions("ptkit_ops")],
    "routes": [r.to_json() for r in ptkit.runtime.explain("ptkit_ops")],
}))
"""


def test_cu13_wheel_loads_on_this_cpu_machine_and_cpu_results_are_unchanged(
    cu13_wheel: Path, tmp_path: Path
) -> None:
    python = fresh_venv(tmp_path / "venv", REPO / ".venv" / "bin" / "python")
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(cu13_wheel)])
    out = json.loads(run([str(python), "-c", LOAD_SCRIPT], cwd=tmp_path).stdout)
    assert out["cuda_available"] is False
    decisions = {d[0]: d for d in out["decisions"]}
    assert decisions["libptkit_cuda.so"][1] == "loaded"
    assert decisions["libptkit_cuda.so"][3] == {"devices": "no NVIDIA GPU visible"}
    assert decisions["libptkit_cpu.so"][1] == "loaded"
    cuda_rows = [r for r in out["routes"] if r["device_type"] == "cuda"]
    # The CUDA library serves every op, out= included (docs/using.md).
    implementations = {r["op"]: r["implementation"] for r in cuda_rows}
    assert implementations == dict.fromkeys(OPS, "native")
    assert all("no NVIDIA GPU visible" in r["reason"] for r in cuda_rows), cuda_rows
    # The CPU kernels of the cu13 wheel against the reference: the op test suite.
    run_op_tests(python)


def test_the_gemv_shape_sweep_builds_and_without_a_gpu_says_where_to_run_it(
    tmp_path: Path,
) -> None:
    """benchmarks/cuda_gemv_shapes.cu, which scripts/device-check runs on the GPU machine,
    compiles against the shipped kernels (it includes cuda/kernels/kernels.cu) with the
    cu13 toolkit; here, without a GPU, it stops with the reason instead of timing nothing."""
    binary = tmp_path / "cuda_gemv_shapes"
    run(["make", "-s", "gemv-shapes", f"GEMV_SHAPES={binary}"], cwd=REPO)
    proc = subprocess.run([binary], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc
    assert proc.stderr == "cuda_gemv_shapes: no CUDA device visible: run it on a GPU machine\n"
    assert proc.stdout == ""
