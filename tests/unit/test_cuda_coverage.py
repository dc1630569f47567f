"""The CUDA load rule, case by case: which devices a cu13 library runs on, and why not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ptkit.backends.cuda import cuda_coverage, parse_cuda_target
from ptkit.runtime.loader import TorchFacts, check_compatibility
from ptkit.loading.manifest import parse_manifest
from ptkit.loading.switches import RuntimeSwitches

SASS = ("sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120")
PTX = ("compute_120",)
TOOLKIT = (13, 5)
NEW_DRIVER = (13, 5)
OLD_DRIVER = (13, 0)


@pytest.mark.parametrize(
    ("capability", "driver", "covered", "how"),
    [
        (
            (7, 5),
            NEW_DRIVER,
            False,
            "sm_75 is not covered: built for sm_90…sm_120, PTX compute_120",
        ),
        (
            (8, 9),
            NEW_DRIVER,
            False,
            "sm_89 is not covered: built for sm_90…sm_120, PTX compute_120",
        ),
        ((9, 0), NEW_DRIVER, True, "SASS sm_90"),
        ((10, 0), OLD_DRIVER, True, "SASS sm_100"),
        ((10, 3), NEW_DRIVER, True, "SASS sm_100"),  # first match of the family with minor <= 3
        ((10, 7), NEW_DRIVER, True, "SASS sm_100"),
        ((11, 0), NEW_DRIVER, True, "SASS sm_110"),
        ((12, 0), NEW_DRIVER, True, "SASS sm_120"),
        ((12, 1), NEW_DRIVER, True, "SASS sm_120"),
        ((13, 0), NEW_DRIVER, True, "PTX compute_120 (JIT by the driver)"),
        (
            (13, 0),
            OLD_DRIVER,
            False,
            "but the driver supports CUDA 13.0; upgrade the NVIDIA driver",
        ),
        ((13, 0), None, False, "the driver version is unknown"),
    ],
)
def test_default_cu13_targets(capability, driver, covered, how) -> None:
    result = cuda_coverage(capability, SASS, PTX, driver, TOOLKIT)
    assert result.covered is covered
    assert how in result.how


def test_arch_specific_sass_runs_only_on_its_own_arch() -> None:
    assert cuda_coverage((9, 0), ("sm_90a",), (), NEW_DRIVER, TOOLKIT).covered
    assert not cuda_coverage((10, 0), ("sm_90a",), (), NEW_DRIVER, TOOLKIT).covered
    assert not cuda_coverage((10, 3), ("sm_100a",), (), NEW_DRIVER, TOOLKIT).covered
    assert cuda_coverage((10, 3), ("sm_100f",), (), NEW_DRIVER, TOOLKIT).covered
    assert not cuda_coverage((10, 0), (), ("compute_90a",), NEW_DRIVER, TOOLKIT).covered


def test_newer_sass_minor_does_not_run_on_an_older_device() -> None:
    assert not cuda_coverage((10, 0), ("sm_103",), (), NEW_DRIVER, TOOLKIT).covered


def test_target_names_are_parsed_strictly() -> None:
    assert parse_cuda_target("sm_107") == parse_cuda_target("sm_107")
    assert parse_cuda_target("sm_120f").suffix == "f"
    with pytest.raises(ValueError, match="not a CUDA target"):
        parse_cuda_target("sm90")


CUDA_MANIFEST = {
    "schema_version": 1,
    "package": "ptkit",
    "namespace": "ptkit",
    "library": "libptkit_cuda.so",
    "backend": "cuda",
    "variant": "cu13",
    "toolkit": {"name": "cuda", "version": "13.5.37"},
    "targets": {"sass": list(SASS), "ptx": list(PTX)},
    "dropped_targets": [],
    "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "sha256": "0" * 64,
}
CUDA_TORCH = TorchFacts("2.14.1+cu130", cuda="13.0", hip=None, has_xpu=False, has_mps=False)


@pytest.mark.parametrize(
    ("devices", "driver", "torch_cuda", "expected"),
    [
        ((), None, "13.0", None),  # no GPU: loads (host code only); CUDA tensors cannot exist
        (((9, 0),), (13, 0), "13.0", None),
        (((9, 0), (12, 1)), (13, 5), "13.0", None),
        (((9, 0), (7, 5)), (13, 5), "13.0", "cuda:1: sm_75 is not covered"),
        (
            ((8, 9),),
            (13, 5),
            "13.0",
            "cuda:0: sm_89 is not covered: built for sm_90…sm_120, PTX compute_120",
        ),
        (((9, 0),), (13, 0), "12.8", "built with CUDA 13.5.37, torch 2.14.1+cu130 uses CUDA 12.8"),
    ],
)
def test_cuda_library_load_decision(devices, driver, torch_cuda, expected) -> None:
    facts = dataclasses.replace(
        CUDA_TORCH, cuda=torch_cuda, cuda_devices=devices, cuda_driver=driver
    )
    manifest = parse_manifest(CUDA_MANIFEST, Path("/p/ptkit_cuda.manifest.json"))
    reason = check_compatibility(manifest, facts, RuntimeSwitches(), "linux-x86_64")
    if expected is None:
        assert reason is None
    else:
        assert reason is not None
        assert expected in reason


def test_cuda_library_needs_a_cuda_torch() -> None:
    facts = TorchFacts("2.13.0+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
    manifest = parse_manifest(CUDA_MANIFEST, Path("/p/ptkit_cuda.manifest.json"))
    reason = check_compatibility(manifest, facts, RuntimeSwitches(), "linux-x86_64")
    assert reason == "torch 2.13.0+cpu is not a CUDA build; the cuda library needs one"
