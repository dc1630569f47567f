"""The runtime profile (``ptkit.runtime.profile()``) predicted without torch: graph
capture, the distributed backend and Inductor's GEMM backends, from torch's files and
the probed devices, with the same rules (``distributed_choice``, ``gemm_choice``)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from ptkit.degradation.distributed_choice import choose_backends
from ptkit.degradation.gemm_choice import recommend_gemm_backends
from ptkit.doctor.model import ProfileFacts, TorchInstall
from ptkit.doctor.probes.packages import torch_facts_from
from ptkit.hardware.facts import Machine

__all__ = ["predicted_backends", "probe_profile"]


def _top_level(name: str, paths: Sequence[str] | None) -> bool:
    """Whether a top-level module is installed; find_spec of a top-level name does not
    run it (a dotted name would import its parents, so never pass one)."""
    try:
        if paths is None:
            return importlib.util.find_spec(name) is not None
        return importlib.machinery.PathFinder.find_spec(name, list(paths)) is not None
    except (ImportError, ValueError):
        return False


def _cutlass_operators(paths: Sequence[str] | None) -> bool:
    """``cutlass.operators`` without importing ``cutlass``: its folder or module file."""
    try:
        spec = (
            importlib.util.find_spec("cutlass")
            if paths is None
            else importlib.machinery.PathFinder.find_spec("cutlass", list(paths))
        )
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    for folder in spec.submodule_search_locations or ():
        base = Path(folder)
        if (base / "operators").is_dir() or (base / "operators.py").is_file():
            return True
    return False


def predicted_backends(torch: TorchInstall, system: str) -> set[str]:
    """The ``torch.distributed`` backends this torch build has, from its files:
    gloo on every platform torch ships distributed for; nccl in Linux CUDA and ROCm
    builds; nccl2 where distributed_c10d registers it (torch >= 2.14, with NCCL); xccl
    in Linux XPU builds."""
    if torch.location is None:
        return set()
    backends = {"gloo"}
    location = Path(torch.location)
    if system == "Linux" and (torch.cuda or torch.hip):
        backends.add("nccl")
        try:
            c10d = (location / "distributed" / "distributed_c10d.py").read_text(
                encoding="utf-8", errors="replace"
            )
        except OSError:
            c10d = ""
        if '"nccl2"' in c10d:
            backends.add("nccl2")
    if system == "Linux" and torch.xpu:
        backends.add("xccl")
    return backends


def probe_profile(
    torch: TorchInstall,
    machine: Machine | None,
    *,
    paths: Sequence[str] | None = None,
) -> ProfileFacts:
    notes: list[str] = []
    predicted = torch_facts_from(torch, machine)
    if predicted is None:
        why = "torch is not installed" if torch.location is None else "torch is broken"
        return ProfileFacts(
            graph_capture=f"eager ({why})",
            distributed_backend=f"none ({why})",
            gemm_backends=(),
            notes=(f"{why}: no profile; install torch",),
        )
    facts, _ = predicted
    location = Path(torch.location or ".")
    system = machine.system if machine else ""
    # Graph capture, as ptkit.graphs.capture_plan() decides for the first accelerator.
    if facts.cuda_devices or facts.hip_devices:
        if (location / "cuda" / "graphs.py").is_file():
            what = f"HIP graphs (ROCm {facts.hip})" if facts.hip else "CUDA graphs"
            graph = f"{what} via torch.cuda.CUDAGraph"
        else:
            graph = f"eager (torch {facts.version} has no torch.cuda.CUDAGraph)"
    elif facts.xpu_available:
        if (location / "xpu" / "graphs.py").is_file():
            graph = "XPU graphs via torch.xpu.XPUGraph"
        else:
            graph = f"eager (torch {facts.version} has no torch.xpu.XPUGraph)"
    elif facts.mps_available:
        graph = "eager (MPS has no graph capture in torch; ptkit.graphs runs fn eagerly)"
    elif machine is not None and machine.has_gpu:
        graph = (
            f"eager (torch {facts.version} cannot use this machine's GPU: "
            + ("a CPU build" if not (facts.cuda or facts.hip or facts.has_xpu) else "see packages")
            + ")"
        )
    else:
        graph = "eager (no CUDA, ROCm or XPU device: graphs need one)"
    # Distributed: the pure choice, fed the visible device types and the built backends.
    device_types = []
    if facts.cuda_devices or facts.hip_devices:
        device_types.append("cuda")
    if facts.xpu_available:
        device_types.append("xpu")
    built = predicted_backends(torch, system)
    candidates = choose_backends(
        device_types, built.__contains__, rocm=bool(facts.hip), torch_version=facts.version
    )
    first = next((c for c in candidates if c.available), None)
    if first is None:
        names = ", ".join(c.backend for c in candidates)
        distributed = f"none (none of {names} is built into torch {facts.version})"
    else:
        distributed = f"{first.backend} ({first.reason})"
    notes.append(
        "distributed candidates: "
        + ", ".join(f"{c.backend}{'' if c.available else ' (not built in)'}" for c in candidates)
        + "; built-in backends predicted from torch's files"
    )
    # GEMM backends: the rule of ptkit.runtime.profile(), with the probed devices.
    rows = recommend_gemm_backends(
        cuda_capabilities=facts.cuda_devices,
        rocm=bool(facts.hip) and bool(facts.hip_devices),
        xpu=facts.xpu_available,
        triton=_top_level("triton", paths),
        cutlass_operators=_cutlass_operators(paths),
        composable_kernel=_top_level("ck4inductor", paths),
    )
    notes += [f"GEMM {row.name}: {row.reason}" for row in rows if not row.recommended]
    return ProfileFacts(
        graph_capture=graph,
        distributed_backend=distributed,
        gemm_backends=tuple(row.name for row in rows if row.recommended),
        notes=tuple(notes),
    )
