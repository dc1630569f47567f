"""The HIP backend: gfx target IDs and which code objects run on which AMD GPU.

The devices are fakes standing for absent hardware (target IDs of real products)."""

from __future__ import annotations

import pytest

from ptkit.backends import BACKENDS, Device, TargetError
from ptkit.backends.hip import parse_target_id

HIP = BACKENDS["hip"]


def hip_coverage(target_id, targets):  # type: ignore[no-untyped-def]
    return HIP.coverage(Device("cuda:0", target_id, target_id), {"gfx": targets})


@pytest.mark.parametrize(
    ("device", "targets", "covered", "how"),
    [
        ("gfx942:sramecc+:xnack-", ("gfx942",), True, "code object gfx942"),
        ("gfx942:sramecc+:xnack-", ("gfx942:xnack-",), True, "code object gfx942:xnack-"),
        ("gfx942:sramecc+:xnack-", ("gfx942:xnack+",), False, "not covered"),
        ("gfx950", ("gfx9-4-generic",), True, "generic code object gfx9-4-generic"),
        ("gfx90a:sramecc+:xnack-", ("gfx9-generic", "gfx9-4-generic"), False, "not covered"),
        ("gfx1201", ("gfx12-generic",), True, "generic"),
        ("gfx1030", ("gfx1100", "gfx11-generic"), False, "built for gfx1100, gfx11-generic"),
    ],
)
def test_hip_target_id_matching(
    device: str, targets: tuple[str, ...], covered: bool, how: str
) -> None:
    coverage = hip_coverage(device, targets)
    assert coverage.covered is covered
    assert how in coverage.how


def test_target_id_parse_rejects_garbage() -> None:
    assert parse_target_id("gfx90a:sramecc+:xnack-") == (
        "gfx90a",
        {"sramecc": True, "xnack": False},
    )
    with pytest.raises(TargetError, match="not an AMD GPU target ID"):
        parse_target_id("sm_90")
