"""Apple GPUs (Metal, through torch's MPS device).

Metal kernels are not a shared library: a package ships ``.metal`` sources (compiled by
``torch.mps.compile_shader`` at first use) or a ``.metallib``, and binds them to its ops
in Python (``ptkit.runtime.load_package(..., metal_binding=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ptkit.backends.base import NO_VERSIONS, Backend, Coverage, Device, TorchBuild, Versions
from ptkit.platforms.macos import TORCH_MINIMUM_MACOS

__all__ = ["MetalBackend"]


class MetalBackend(Backend):
    name = "metal"
    title = "Metal"
    device_type = "mps"
    dispatch_key = "MPS"
    device_kind = "apple"
    device_kind_title = "Apple GPU"
    release_platforms = ("macosx_arm64",)

    def coverage(
        self, device: Device, targets: Mapping[str, Sequence[str]], versions: Versions = NO_VERSIONS
    ) -> Coverage:
        return Coverage(True, "Metal kernels through MPS")

    def built_into(self, torch: TorchBuild) -> bool:
        return torch.has_mps

    def torch_absent_reason(self, torch: TorchBuild) -> str | None:
        if not torch.has_mps:
            return f"torch {torch.version} was built without MPS support"
        if not torch.mps_available:
            return (
                "no MPS device is available (an Apple-silicon Mac with macOS "
                f"{TORCH_MINIMUM_MACOS} or later is needed)"
            )
        return None


BACKEND = MetalBackend()
