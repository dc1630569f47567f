"""The CPU: every variant carries a CPU library; it runs on every machine.

Its targets are instruction-set levels dispatched at run time (``default`` is the
baseline); which levels exist, and the compiler flags of each, are the platform's
business (``ptkit.platforms``), not a device's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ptkit.backends.base import Backend

__all__ = ["CpuBackend"]


class CpuBackend(Backend):
    name = "cpu"
    title = "CPU"
    device_type = "cpu"
    dispatch_key = "CPU"
    release_platforms = (
        "manylinux_2_28_x86_64",
        "manylinux_2_28_aarch64",
        "macosx_arm64",
        "win_amd64",
    )
    runtime_libraries: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "linux": ("libtorch.so", "libtorch_cpu.so", "libc10.so"),
        "macos": ("libtorch.dylib", "libtorch_cpu.dylib", "libc10.dylib"),
        "windows": ("torch.dll", "torch_cpu.dll", "c10.dll"),
    }

    def manifest_targets(self, targets: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return {"isa": tuple(targets)}


BACKEND = CpuBackend()
