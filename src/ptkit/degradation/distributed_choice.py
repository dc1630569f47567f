"""Which ``torch.distributed`` backends to try, best first, for the visible devices: a
pure rule.

Standard library only: ``ptkit doctor`` applies it to probed devices without importing
torch; ``ptkit.distributed`` re-exports ``BackendChoice`` and ``choose_backends`` and
initialises the chosen backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

__all__ = ["NO_GPU", "BackendChoice", "choose_backends", "safe_is_available"]

NO_GPU = "no GPU is visible (no CUDA, ROCm or XPU device)"


@dataclasses.dataclass(frozen=True)
class BackendChoice:
    """One candidate backend, in the order it would be tried, and why it is there."""

    backend: str
    reason: str
    # False: this torch does not have the backend built in; it is listed, never tried.
    available: bool = True

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def choose_backends(
    device_types: Collection[str],
    is_available: Callable[[str], bool],
    *,
    rocm: bool = False,
    torch_version: str | None = None,
) -> list[BackendChoice]:
    """The backends to try, best first, each with the reason it is a candidate.

    ``device_types``: the accelerator device types with at least one visible device
    (torch's spelling: ``"cuda"``, ``"xpu"``; ``"cpu"`` and others are ignored).
    ``is_available``: whether torch has a backend built in
    (``torch.distributed.is_backend_available``). ``rocm``: torch is a ROCm build, so
    its ``"cuda"`` devices are AMD GPUs. ``torch_version``: named in the reason of a
    backend that is not built in. Pure: the unit tests feed it every situation, and
    ``ptkit doctor`` feeds it the probed devices without importing torch.

    A backend that is built in is not necessarily usable (torch 2.14's CUDA wheels
    register ``nccl`` and ``nccl2`` on machines without a GPU), which is why the
    device types, not ``is_available``, decide which accelerator backends are listed.
    """
    wanted: list[tuple[str, str]]
    if "cuda" in device_types and rocm:
        wanted = [
            ("nccl", "AMD GPU visible: nccl is RCCL on ROCm, the backend for GPU tensors"),
            ("gloo", "fallback: gloo runs collectives on CPU and GPU tensors"),
        ]
    elif "cuda" in device_types:
        wanted = [
            ("nccl2", "NVIDIA GPU visible: nccl2 is NCCL on torch's torchcomms engine"),
            ("nccl", "NVIDIA GPU visible: nccl is torch's backend for CUDA tensors"),
            ("gloo", "fallback: gloo runs collectives on CPU and CUDA tensors"),
        ]
    elif "xpu" in device_types:
        wanted = [
            ("xccl", "Intel GPU visible: xccl (oneCCL) is torch's backend for XPU tensors"),
            ("gloo", "fallback: gloo runs collectives on CPU tensors"),
        ]
    else:
        wanted = [("gloo", f"{NO_GPU}: gloo is torch's backend for CPU tensors")]
    choices = []
    for backend, reason in wanted:
        if safe_is_available(is_available, backend):
            choices.append(BackendChoice(backend, reason))
        else:
            which = f"torch {torch_version}" if torch_version else "this torch"
            absent = f"not built into {which} (is_backend_available is False)"
            choices.append(BackendChoice(backend, absent, available=False))
    return choices


def safe_is_available(is_available: Callable[[str], bool], backend: str) -> bool:
    """``is_backend_available`` of an unknown name may raise on some torch builds;
    for the plan that simply means "not available"."""
    try:
        return bool(is_available(backend))
    except (RuntimeError, ValueError, KeyError):
        return False
