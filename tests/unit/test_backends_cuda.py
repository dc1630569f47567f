"""The CUDA backend: its targets, their coverage of each device, the override syntax,
the resolver's messages and the driver rule."""

from __future__ import annotations

import pytest

from ptkit.backends import BACKENDS, Device, TargetError, TargetRequest, Versions
from ptkit.backends.cuda import driver_problem, min_driver_branch, parse_cuda_target

CUDA = BACKENDS["cuda"]

SASS = ("sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120")
PTX = ("compute_120",)
TOOLKIT = (13, 5)
NEW_DRIVER = (13, 5)
OLD_DRIVER = (13, 0)


def cuda_coverage(capability, sass, ptx, driver, toolkit):  # type: ignore[no-untyped-def]
    """The backend's coverage of one device of ``capability`` (a fake: no GPU here)."""
    device = Device("cuda:0", "a GPU", f"sm_{capability[0]}{capability[1]}")
    return CUDA.coverage(device, {"sass": sass, "ptx": ptx}, Versions(toolkit, driver))


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
    with pytest.raises(TargetError, match="not a CUDA target"):
        parse_cuda_target("sm90")


@pytest.mark.parametrize(
    ("value", "targets"),
    [
        ("9.0", ("sm_90",)),
        ("9.0;10.0+PTX;9.0a", ("sm_90", "sm_100", "compute_100", "sm_90a")),
        (" 12.0f  12.1 ", ("sm_120f", "sm_121")),
    ],
)
def test_override_is_read_in_torch_cuda_arch_list_style(value: str, targets: tuple) -> None:
    request = CUDA.requested_targets(("sm_80",), ("sm_86",), {"PTKIT_CUDA_ARCHS": value})
    assert request == TargetRequest(targets, (), "PTKIT_CUDA_ARCHS")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "9.0;bogus;12.0+PTX",
            "PTKIT_CUDA_ARCHS='9.0;bogus;12.0+PTX': 'bogus' is not a compute capability "
            "(expected entries like 9.0, 10.0a, 12.0f or 12.0+PTX)",
        ),
        (
            "9.0,10.0",
            "PTKIT_CUDA_ARCHS='9.0,10.0': separate the entries with ';' or spaces, as "
            "TORCH_CUDA_ARCH_LIST does (9.0;10.0), not ','",
        ),
        (";;", "PTKIT_CUDA_ARCHS=';;': names no compute capability"),
    ],
)
def test_a_bad_override_is_one_clear_error(value: str, message: str) -> None:
    with pytest.raises(TargetError) as info:
        CUDA.requested_targets(("sm_90",), (), {"PTKIT_CUDA_ARCHS": value})
    assert str(info.value) == message


def test_without_an_override_the_recipe_targets_stand() -> None:
    request = CUDA.requested_targets(("sm_90", "compute_120"), ("sm_107",), {})
    assert request == TargetRequest(("sm_90", "compute_120"), ("sm_107",), "recipe")


NVCC_130 = {"sm_75", "sm_80", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "compute_120"}


def test_resolve_builds_a_and_f_variants_of_listed_bases() -> None:
    request = TargetRequest(("sm_90a", "sm_100f", "compute_120"), (), "recipe")
    resolution = CUDA.resolve(request, NVCC_130, "nvcc 13.0")
    assert resolution.built == ("sm_90a", "sm_100f", "compute_120")
    assert resolution.error == ""
    assert CUDA.manifest_targets(resolution.built) == {
        "sass": ("sm_90a", "sm_100f"),
        "ptx": ("compute_120",),
    }


def test_resolve_drops_an_optional_target_and_fails_on_a_required_one() -> None:
    dropped = CUDA.resolve(TargetRequest(("sm_90",), ("sm_107",), "recipe"), NVCC_130, "nvcc 13.0")
    assert (dropped.built, dropped.dropped) == (("sm_90",), ("sm_107",))
    failed = CUDA.resolve(
        TargetRequest(("sm_90", "sm_107"), (), "recipe"),
        NVCC_130,
        "nvcc 13.0 at /usr/bin/nvcc",
        "pip install 'nvidia-cuda-nvcc==13.5.*'",
    )
    assert failed.built == ()
    assert failed.error.startswith(
        "CUDA target sm_107 needs CUDA >= 13.5; found nvcc 13.0 at /usr/bin/nvcc"
    )
    assert "Fix: pip install 'nvidia-cuda-nvcc==13.5.*', or mark sm_107 optional" in failed.error


def test_a_removed_arch_names_the_last_toolkit_that_built_it() -> None:
    resolution = CUDA.resolve(
        TargetRequest(("sm_60", "sm_90"), (), "PTKIT_CUDA_ARCHS"), NVCC_130, "nvcc 13.0"
    )
    assert "sm_60 was removed from newer toolkits (the last CUDA that builds it is 12.9)" in (
        resolution.error
    )
    assert "remove it from PTKIT_CUDA_ARCHS" in resolution.error


@pytest.mark.parametrize(
    ("driver", "driver_cuda", "problem"),
    [
        ("580.65.06", (13, 0), None),
        ("590.10", (13, 1), None),
        (
            "575.51",
            (12, 9),
            "NVIDIA driver 575.51 supports CUDA 12.9; cu13 (CUDA 13.x) needs driver >= 580: "
            "upgrade the NVIDIA driver",
        ),
        (None, None, "no NVIDIA driver is loaded"),
        ("580.65.06", None, "the CUDA version of NVIDIA driver 580.65.06 is unknown"),
    ],
)
def test_driver_rule(driver: str | None, driver_cuda: tuple | None, problem: str | None) -> None:
    found = driver_problem("cu13", 13, driver, driver_cuda)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
    assert min_driver_branch(13) == 580
    assert min_driver_branch(12) == 525
