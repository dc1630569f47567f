"""The CUDA backend: its targets, their coverage of each device, the override syntax,
the resolver's messages and the driver rule."""

from __future__ import annotations

import re

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


def test_sm60_requested_with_cuda13_is_named_as_removed_with_the_last_toolkit() -> None:
    """The fix is CUDA 12.9 (or dropping the target), never the toolkit in use."""
    resolution = CUDA.resolve(
        TargetRequest(("sm_60", "sm_90"), (), "PTKIT_CUDA_ARCHS"),
        NVCC_130,
        "nvcc 13.0",
        "install recipe cu13's toolkit into ptkit's toolchain cache",
    )
    assert resolution.error.startswith(
        "CUDA target sm_60 was removed in CUDA 13.0; CUDA 12.9 is the last toolkit that builds "
        "it; found nvcc 13.0"
    )
    assert (
        'Fix: build sm_60 with CUDA 12.9 (a variant whose recipe has [toolkit] version = "12.9"), '
        "or remove it from PTKIT_CUDA_ARCHS, or mark sm_60 optional" in resolution.error
    )
    assert "cu13's toolkit" not in resolution.error


@pytest.mark.parametrize(
    ("target", "removed"),
    [("sm_50", "13.0"), ("sm_61", "13.0"), ("sm_70", "13.0"), ("sm_72", "13.0"),
     ("sm_37", "12.0"), ("sm_30", "11.0")],
)  # fmt: skip
def test_maxwell_pascal_volta_and_kepler_are_named_as_removed(target: str, removed: str) -> None:
    reason = CUDA.missing_target_reason(target)
    assert reason.startswith(f"was removed in CUDA {removed}; CUDA ")
    assert CUDA.missing_target_reason("sm_75") != reason  # Turing: still built by CUDA 13


def test_sm101_is_named_as_renamed_to_sm110_in_a_recipe() -> None:
    resolution = CUDA.resolve(TargetRequest(("sm_101a",), (), "recipe"), NVCC_130, "nvcc 13.0")
    assert resolution.error.startswith(
        "CUDA target sm_101a was renamed sm_110a in CUDA 13.0 (CUDA 12.9 is the last toolkit "
        "that builds sm_101a)"
    )
    assert "Fix: remove sm_101a from the recipe's targets.cuda, or ask for sm_110a instead" in (
        resolution.error
    )


def test_torch_cuda_arch_list_replaces_the_recipes_targets_and_says_so() -> None:
    request = CUDA.requested_targets(
        ("sm_90", "sm_120"), ("sm_107",), {"TORCH_CUDA_ARCH_LIST": "8.0"}
    )
    assert request == TargetRequest(
        ("sm_80",),
        (),
        "TORCH_CUDA_ARCH_LIST",
        "TORCH_CUDA_ARCH_LIST='8.0' replaces the recipe's targets (sm_90 sm_120 sm_107); "
        "PTKIT_CUDA_ARCHS would win over it",
    )


def test_ptkit_cuda_archs_wins_over_torch_cuda_arch_list_and_says_so() -> None:
    request = CUDA.requested_targets(
        ("sm_90",), (), {"TORCH_CUDA_ARCH_LIST": "8.0", "PTKIT_CUDA_ARCHS": "12.0+PTX"}
    )
    assert (request.targets, request.source) == (("sm_120", "compute_120"), "PTKIT_CUDA_ARCHS")
    assert request.note == "PTKIT_CUDA_ARCHS wins over TORCH_CUDA_ARCH_LIST='8.0' (both are set)"


@pytest.mark.parametrize(
    ("value", "targets"),
    [
        ("8.0 8.6+PTX", ("sm_80", "sm_86", "compute_86")),
        ("Hopper", ("sm_90", "compute_90")),
        ("Ampere;9.0a", ("sm_80", "sm_86", "compute_86", "sm_90a")),
        ("Blackwell+Tegra", ("sm_110",)),
    ],
)
def test_torch_cuda_arch_list_style_strings_and_names(value: str, targets: tuple[str, ...]) -> None:
    assert CUDA.requested_targets((), (), {"TORCH_CUDA_ARCH_LIST": value}).targets == targets


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("native", "TORCH_CUDA_ARCH_LIST='native': 'native' (the GPUs of the machine that builds)"),
        ("8.0,9.0", "TORCH_CUDA_ARCH_LIST='8.0,9.0': separate the entries with ';' or spaces"),
        ("sm_80", "TORCH_CUDA_ARCH_LIST='sm_80': 'sm_80' is not a compute capability"),
    ],
)
def test_a_torch_cuda_arch_list_ptkit_cannot_read_is_refused_naming_it(
    value: str, message: str
) -> None:
    with pytest.raises(TargetError, match="^" + re.escape(message)):
        CUDA.requested_targets(("sm_90",), (), {"TORCH_CUDA_ARCH_LIST": value})


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
