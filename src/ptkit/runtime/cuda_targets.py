"""Does a CUDA library's code run on a device? SASS and PTX coverage rules.

- SASS ``sm_XY`` runs on devices of the same major X with minor >= Y (``sm_90`` on 9.0;
  ``sm_120`` on 12.0 and 12.1). ``sm_XYa`` (arch-specific features) runs on X.Y only.
  ``sm_XYf`` (family-specific) runs on the family, like plain SASS.
- PTX ``compute_XY`` is JIT-compiled by the driver for any device with capability
  >= X.Y, provided the driver understands the PTX of the toolkit that produced it
  (driver CUDA version >= toolkit version). ``compute_XYa`` PTX runs on X.Y only.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["CudaCoverage", "cuda_coverage", "describe_targets", "parse_cuda_target"]

_TARGET = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


@dataclasses.dataclass(frozen=True)
class CudaTarget:
    kind: str  # "sm" (SASS) or "compute" (PTX)
    major: int
    minor: int
    suffix: str  # "", "a" or "f"


def parse_cuda_target(name: str) -> CudaTarget:
    match = _TARGET.match(name)
    if match is None:
        raise ValueError(
            f"not a CUDA target: {name!r} (expected sm_90, sm_90a, sm_100f, compute_120)"
        )
    kind, major, minor, suffix = match.groups()
    return CudaTarget(kind, int(major), int(minor), suffix)


@dataclasses.dataclass(frozen=True)
class CudaCoverage:
    covered: bool
    how: str  # "SASS sm_90", "PTX compute_120 (JIT)" or why not


def _fmt(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def describe_targets(sass: tuple[str, ...], ptx: tuple[str, ...]) -> str:
    built = (
        f"built for {sass[0]}…{sass[-1]}"
        if len(sass) > 1
        else f"built for {', '.join(sass) or 'no SASS'}"
    )
    return f"{built}, PTX {', '.join(ptx) or 'none'}"


def cuda_coverage(
    capability: tuple[int, int],
    sass: tuple[str, ...],
    ptx: tuple[str, ...],
    driver_version: tuple[int, int] | None,
    toolkit_version: tuple[int, int],
) -> CudaCoverage:
    """Whether a device of ``capability`` can run a library with these targets."""
    major, minor = capability
    for name in sass:
        t = parse_cuda_target(name)
        exact = t.suffix == "a"
        if t.major == major and (t.minor == minor if exact else t.minor <= minor):
            return CudaCoverage(True, f"SASS {name}")
    jit_candidates = []
    for name in ptx:
        t = parse_cuda_target(name)
        exact = t.suffix == "a"
        if (t.major, t.minor) == capability or (not exact and (t.major, t.minor) < capability):
            jit_candidates.append(name)
    if jit_candidates:
        name = max(
            jit_candidates, key=lambda n: (parse_cuda_target(n).major, parse_cuda_target(n).minor)
        )
        if driver_version is None:
            return CudaCoverage(
                False,
                f"{_fmt(capability)} has no SASS here and the driver version is unknown, so PTX {name} JIT is not assumed",
            )
        if driver_version < toolkit_version:
            return CudaCoverage(
                False,
                f"{_fmt(capability)} needs a JIT of PTX {name}, made by CUDA {toolkit_version[0]}.{toolkit_version[1]}, "
                f"but the driver supports CUDA {driver_version[0]}.{driver_version[1]}; upgrade the NVIDIA driver",
            )
        return CudaCoverage(True, f"PTX {name} (JIT by the driver)")
    return CudaCoverage(False, f"{_fmt(capability)} is not covered: {describe_targets(sass, ptx)}")
