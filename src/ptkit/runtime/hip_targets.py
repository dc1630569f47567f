"""Does a HIP library's code run on an AMD GPU? gfx target-ID matching rules.

A device reports its target ID (``torch.cuda.get_device_properties(i).gcnArchName``),
e.g. ``gfx90a:sramecc+:xnack-``. A code object runs on it when

- its processor is the device's and every feature it pins (``:xnack+``) has the
  device's setting; a code object that pins no feature runs with either setting;
- or it is a generic target (LLVM's ``gfx11-generic`` …) whose family holds the
  device's processor (needs a ROCm runtime that loads generic code objects, 6.4+).
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["GENERIC_TARGETS", "HipCoverage", "hip_coverage", "parse_target_id"]

# LLVM's generic processors and the processors each one runs on (AMDGPUUsage).
GENERIC_TARGETS: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset({f"gfx103{i}" for i in range(7)}),
    "gfx11-generic": frozenset(
        {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}
    ),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}

_TARGET_ID = re.compile(r"^(gfx[0-9a-z-]+?)((?::[a-z]+[+-])*)$")


def parse_target_id(target_id: str) -> tuple[str, dict[str, bool]]:
    """``gfx90a:sramecc+:xnack-`` -> (``gfx90a``, {sramecc: True, xnack: False})."""
    match = _TARGET_ID.match(target_id.strip())
    if match is None:
        raise ValueError(
            f"not an AMD GPU target ID: {target_id!r} (expected gfx90a, gfx90a:xnack-)"
        )
    features = {f[:-1]: f[-1] == "+" for f in match.group(2).split(":") if f}
    return match.group(1), features


@dataclasses.dataclass(frozen=True)
class HipCoverage:
    covered: bool
    how: str  # "code object gfx90a", "generic code object gfx11-generic" or why not


def hip_coverage(device_target_id: str, targets: tuple[str, ...]) -> HipCoverage:
    """Whether a device with this target ID can run a library built for ``targets``."""
    processor, device_features = parse_target_id(device_target_id)
    for target in targets:
        target_processor, target_features = parse_target_id(target)
        if target_processor == processor:
            clash = [
                f"{name}{'+' if wanted else '-'}"
                for name, wanted in target_features.items()
                if name in device_features and device_features[name] != wanted
            ]
            if not clash:
                return HipCoverage(True, f"code object {target}")
        elif processor in GENERIC_TARGETS.get(target_processor, frozenset()):
            return HipCoverage(True, f"generic code object {target}")
    built = ", ".join(targets) or "no AMD GPU target"
    return HipCoverage(False, f"{device_target_id} is not covered: built for {built}")
