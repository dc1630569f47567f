"""AMD GPUs (ROCm): gfx target IDs and their matching rules.

A device reports its target ID (``torch.cuda.get_device_properties(i).gcnArchName``),
e.g. ``gfx90a:sramecc+:xnack-``. A code object runs on it when

- its processor is the device's and every feature it pins (``:xnack+``) has the
  device's setting; a code object that pins no feature runs with either setting;
- or it is a generic target (LLVM's ``gfx11-generic`` …) whose family holds the
  device's processor (needs a ROCm runtime that loads generic code objects, 6.4+).

Overrides: ``PTKIT_HIP_TARGETS`` (``gfx90a,gfx942``; commas, semicolons or spaces).
A ROCm torch registers HIP kernels under the CUDA dispatch key and device type.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from ptkit.backends.base import (
    NO_VERSIONS,
    Backend,
    Coverage,
    Device,
    TargetError,
    ToolkitCandidate,
    TorchBuild,
    Versions,
    on_path,
)
from ptkit.platforms.commands import run_command

__all__ = ["GENERIC_TARGETS", "HipBackend", "parse_target_id"]

# The one spelling of a gfx target in recipes and CMake requests.
_TARGET = re.compile(r"^gfx[0-9a-f]+(-[0-9]+)*(-generic)?(:[a-z]+[+-])*$")
# A device's or code object's target ID: processor, then feature settings.
_TARGET_ID = re.compile(r"^(gfx[0-9a-z-]+?)((?::[a-z]+[+-])*)$")

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
# Processors no generic target covers, also known to ptkit (PEP 825 catalogue).
_OTHER_PROCESSORS = frozenset({"gfx908", "gfx90a"})
# The oldest ROCm whose compiler builds each processor, for the build's error message.
_FIRST_ROCM: dict[str, str] = {
    "gfx90a": "4.5",
    "gfx942": "6.0",
    "gfx950": "7.0",
    "gfx1100": "5.5",
    "gfx1101": "5.5",
    "gfx1200": "6.4",
    "gfx1201": "6.4",
}


def parse_target_id(target_id: str) -> tuple[str, dict[str, bool]]:
    """``gfx90a:sramecc+:xnack-`` -> (``gfx90a``, {sramecc: True, xnack: False})."""
    match = _TARGET_ID.match(target_id.strip())
    if match is None:
        raise TargetError(
            f"not an AMD GPU target ID: {target_id!r} (expected gfx90a, gfx90a:xnack-)"
        )
    features = {f[:-1]: f[-1] == "+" for f in match.group(2).split(":") if f}
    return match.group(1), features


def therock_sdk(environ: Mapping[str, str]) -> Path | None:
    """TheRock's ``rocm-sdk`` command: beside this Python, else on PATH."""
    beside = Path(sys.executable).parent / "rocm-sdk"
    return beside if beside.is_file() else on_path("rocm-sdk", environ)


def therock_root(environ: Mapping[str, str], timeout_s: float = 30.0) -> Path | None:
    """``rocm-sdk path --root``: TheRock's ROCm tree, None without the SDK."""
    sdk = therock_sdk(environ)
    if sdk is None:
        return None
    result = run_command([str(sdk), "path", "--root"], timeout_s)
    lines = (result.output or "").strip().splitlines() if result.ok else []
    return Path(lines[-1]) if lines else None


class HipBackend(Backend):
    name = "hip"
    title = "HIP"
    device_type = "cuda"
    dispatch_key = "CUDA"
    device_kind = "amd"
    device_kind_title = "AMD GPU"
    target_field = "hip"
    target_example = "gfx942, gfx1100, gfx11-generic or gfx90a:xnack+"
    override_variable = "PTKIT_HIP_TARGETS"
    release_platforms = ("manylinux_2_28_x86_64",)
    runtime_libraries: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "linux": ("libtorch_hip.so", "libc10_hip.so", "libamdhip64.so.*")
    }
    toolkit_name = "hip"
    compiler_name = "hipcc"
    target_pattern = _TARGET.pattern
    toolkit_search = (
        "PTKIT_HIP_ROOT, then TheRock's rocm-sdk (beside the build Python or on PATH), "
        "ROCM_PATH, hipcc on PATH, /opt/rocm"
    )
    toolkit_fix = (
        "apt install hipcc (Debian's HIP), or set PTKIT_HIP_ROOT (or ROCM_PATH) to a ROCm "
        "root holding bin/hipcc"
    )
    processors = tuple(
        sorted({p for members in GENERIC_TARGETS.values() for p in members} | _OTHER_PROCESSORS)
    )

    def toolkit_candidates(
        self, environ: Mapping[str, str], search_paths: Sequence[str]
    ) -> tuple[ToolkitCandidate, ...]:
        """``PTKIT_HIP_ROOT``; else TheRock's SDK (``rocm-sdk path --root``, the rocm-sdk
        beside this Python or on PATH); ``ROCM_PATH``; hipcc on PATH; ``/opt/rocm``."""
        explicit = environ.get("PTKIT_HIP_ROOT", "").strip()
        if explicit:
            return (ToolkitCandidate(Path(explicit, "bin", "hipcc"), "PTKIT_HIP_ROOT", True),)
        found: list[ToolkitCandidate] = []
        root = therock_root(environ)
        if root is not None:
            found.append(ToolkitCandidate(root / "bin" / "hipcc", "TheRock rocm-sdk"))
        if environ.get("ROCM_PATH", "").strip():
            found.append(ToolkitCandidate(Path(environ["ROCM_PATH"], "bin", "hipcc"), "ROCM_PATH"))
        system = on_path("hipcc", environ)
        if system is not None:
            found.append(ToolkitCandidate(system.resolve(), "PATH"))
        found.append(ToolkitCandidate(Path("/opt/rocm/bin/hipcc"), "/opt/rocm"))
        return tuple(dict.fromkeys(found))

    def target_problem(self, target: str) -> str | None:
        if _TARGET.match(target):
            return None
        return f"{target!r} is not an AMD GPU target (expected {self.target_example})"

    def manifest_targets(self, targets: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return {"gfx": tuple(targets)}

    def missing_target_reason(self, target: str) -> str:
        first = _FIRST_ROCM.get(parse_target_id(target)[0])
        return f"needs ROCm >= {first}" if first else "needs a newer ROCm"

    def coverage(
        self, device: Device, targets: Mapping[str, Sequence[str]], versions: Versions = NO_VERSIONS
    ) -> Coverage:
        if device.arch is None:
            return Coverage(False, f"{device.label}: its gfx target is unknown")
        processor, device_features = parse_target_id(device.arch)
        built = tuple(targets.get("gfx", ()))
        for target in built:
            target_processor, target_features = parse_target_id(target)
            if target_processor == processor:
                clash = [
                    name
                    for name, wanted in target_features.items()
                    if name in device_features and device_features[name] != wanted
                ]
                if not clash:
                    return Coverage(True, f"code object {target}")
            elif processor in GENERIC_TARGETS.get(target_processor, frozenset()):
                return Coverage(True, f"generic code object {target}")
        return Coverage(
            False,
            f"{device.arch} is not covered: built for {', '.join(built) or 'no AMD GPU target'}",
        )

    def describe_targets(self, targets: Mapping[str, Sequence[str]]) -> str:
        return ", ".join(targets.get("gfx", ())) or "no AMD GPU target"

    def torch_runtime(self, torch: TorchBuild) -> str | None:
        return torch.hip

    def built_into(self, torch: TorchBuild) -> bool:
        return bool(torch.hip)

    def torch_absent_reason(self, torch: TorchBuild) -> str | None:
        return None if torch.hip else f"torch {torch.version} is not a ROCm build"

    def variant_properties(self, targets: Sequence[str], toolkit_version: str) -> list[str]:
        processors: set[str] = set()
        for name in targets:
            processor, _features = parse_target_id(name)
            processors |= GENERIC_TARGETS.get(processor, frozenset({processor}))
        return [f"amd :: gfx_arch :: {p}" for p in sorted(processors)]


BACKEND = HipBackend()
