"""TORCH_CUDA_ARCH_LIST honoured below PTKIT_CUDA_ARCHS, and removed architectures named as
removed: the same answer from the tool CMake asks (python -m ptkit.backends), the
doctor's --build row (could_build) and ptkit select, since all three ask ptkit.backends.cuda.
No GPU and no nvcc: the compiler's list is the one nvcc 13.5 prints (a fake standing for
the absent toolkit; tests/integration/test_cuda_build.py runs the real one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ptkit.backends import BACKENDS
from ptkit.doctor.probes.toolchains import could_build
from ptkit.hardware import PlatformFacts, detect
from ptkit.recipes.model import load_recipe
from ptkit.selection import load_all_recipes, select_variant

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
CUDA = BACKENDS["cuda"]
CU13 = load_recipe("cu13", REPO / "recipes")
NVCC_135 = [
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_88",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_103",
    "sm_107",
    "sm_110",
    "sm_120",
    "sm_121",
    "compute_120",
]
REMOVED = "CUDA target sm_60 was removed in CUDA 13.0; CUDA 12.9 is the last toolkit that builds it"


def _tool(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith(("CUDA_ARCHS", "ARCH_LIST"))}
    return subprocess.run(
        [sys.executable, "-m", "ptkit.backends", *args],
        env={**clean, "PYTHONPATH": str(REPO / "src"), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _lines(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in proc.stdout.splitlines())


def test_cmake_and_the_doctor_name_sm60_as_removed_in_the_same_words() -> None:
    env = {"PTKIT_CUDA_ARCHS": "6.0;9.0"}
    request = _lines(_tool("request", "cuda", "--targets=sm_90", **env))
    cmake = _lines(
        _tool(
            "resolve", "cuda", f"--targets={request['TARGETS']}", f"--source={request['SOURCE']}",
            f"--supported={';'.join(NVCC_135)}", "--compiler=nvcc 13.5.37",
        )
    )  # fmt: skip
    assert cmake["ERROR"].startswith(f"{REMOVED}; found nvcc 13.5.37")
    doctor = could_build(CUDA, CU13, NVCC_135, "nvcc 13.5.37", env)
    assert doctor == f"cu13: nothing: {cmake['ERROR']}"
    assert "or remove it from PTKIT_CUDA_ARCHS" in doctor
    assert "needs a newer CUDA toolkit" not in doctor


def test_torch_cuda_arch_list_is_the_request_of_cmake_the_doctor_and_select() -> None:
    env = {"TORCH_CUDA_ARCH_LIST": "8.0"}
    request = _lines(_tool("request", "cuda", "--targets=sm_90;sm_120", **env))
    assert (request["TARGETS"], request["SOURCE"]) == ("sm_80", "TORCH_CUDA_ARCH_LIST")
    assert request["NOTE"] == (
        "TORCH_CUDA_ARCH_LIST='8.0' replaces the recipe's targets (sm_90 sm_120); "
        "PTKIT_CUDA_ARCHS would win over it"
    )
    assert could_build(CUDA, CU13, NVCC_135, "nvcc 13.5.37", env) == (
        "cu13: sm_80 (from TORCH_CUDA_ARCH_LIST)"
    )
    machine = detect(TESTS / "fixtures" / "machines" / "h200", commands=False,
                     platform_facts=PlatformFacts("Linux", "x86_64"))  # fmt: skip
    selected = select_variant(
        machine, load_all_recipes(REPO / "recipes"), index_url=None, environ=env
    )
    assert selected.variant == "cu13"  # the published wheels are what they are
    assert selected.notes[0].startswith(
        "TORCH_CUDA_ARCH_LIST='8.0' (sm_80) applies to local builds (ptkit build, pip install "
        "from source), not to the published wheels ptkit select chooses from; "
        "TORCH_CUDA_ARCH_LIST='8.0' replaces the recipe's targets"
    )


def test_both_set_ptkit_cuda_archs_wins_and_every_one_says_so() -> None:
    env = {"TORCH_CUDA_ARCH_LIST": "8.0", "PTKIT_CUDA_ARCHS": "9.0"}
    request = _lines(_tool("request", "cuda", "--targets=sm_120", **env))
    assert (request["TARGETS"], request["SOURCE"]) == ("sm_90", "PTKIT_CUDA_ARCHS")
    assert request["NOTE"] == "PTKIT_CUDA_ARCHS wins over TORCH_CUDA_ARCH_LIST='8.0' (both are set)"
    assert (
        could_build(CUDA, CU13, NVCC_135, "nvcc 13.5.37", env)
        == "cu13: sm_90 (from PTKIT_CUDA_ARCHS)"
    )


def test_a_torch_cuda_arch_list_ptkit_cannot_read_stops_the_build_naming_it() -> None:
    proc = _tool("request", "cuda", "--targets=sm_90", TORCH_CUDA_ARCH_LIST="native")
    assert proc.returncode == 1
    assert proc.stderr.startswith("ptkit: TORCH_CUDA_ARCH_LIST='native': 'native' (the GPUs")
