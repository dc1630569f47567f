"""Inductor's GEMM autotuning backends worth enabling for a set of devices: a pure rule.

Standard library only, so that ``ptkit doctor`` applies it to probed devices without
importing torch; ``ptkit.runtime.profiling`` re-exports both names.
"""

from __future__ import annotations

import dataclasses

__all__ = ["GemmBackend", "recommend_gemm_backends"]


@dataclasses.dataclass(frozen=True)
class GemmBackend:
    """One of Inductor's ``max_autotune_gemm_backends`` choices."""

    name: str  # ATEN, TRITON, CUTLASS, CUTEDSL, NVGEMM, CK, CKTILE, CPP
    recommended: bool
    reason: str


def recommend_gemm_backends(
    *,
    cuda_capabilities: tuple[tuple[int, int], ...],
    rocm: bool,
    xpu: bool,
    triton: bool,
    cutlass_operators: bool,
    composable_kernel: bool,
) -> tuple[GemmBackend, ...]:
    """Inductor's GEMM backends for these devices, each recommended or not, with why.

    The names and their device rules are torch 2.14's (torch/_inductor/config.py,
    ``max_autotune_gemm_backends``; NVGEMM: ``use_nv_universal_gemm_template``).
    """
    nvidia = bool(cuda_capabilities) and not rocm
    gpu = nvidia or rocm or xpu
    rows = [GemmBackend("ATEN", True, "torch's own GEMMs: always a candidate")]
    if not gpu:
        rows.append(GemmBackend("TRITON", False, "no GPU: Triton templates generate GPU code"))
    elif not triton:
        rows.append(GemmBackend("TRITON", False, "triton is not installed"))
    else:
        rows.append(GemmBackend("TRITON", True, "Triton templates for the GPU"))
    if not nvidia:
        why = "AMD GPU: NVIDIA only" if rocm else "no NVIDIA GPU"
        rows.append(GemmBackend("NVGEMM", False, f"{why} (cutlass.operators kernels)"))
    elif not cutlass_operators:
        rows.append(
            GemmBackend(
                "NVGEMM",
                False,
                "cutlass.operators does not import: pip install nvidia-cutlass-operators",
            )
        )
    elif min(cuda_capabilities) < (9, 0):
        oldest = min(cuda_capabilities)
        rows.append(
            GemmBackend(
                "NVGEMM", False, f"a device is sm_{oldest[0]}{oldest[1]}; NVGEMM needs sm_90+"
            )
        )
    else:
        rows.append(
            GemmBackend("NVGEMM", True, "cutlass.operators imports and every GPU is sm_90+")
        )
    if not rocm:
        rows.append(GemmBackend("CK", False, "no AMD GPU (Composable Kernel)"))
    elif not composable_kernel:
        rows.append(GemmBackend("CK", False, "ck4inductor does not import"))
    else:
        rows.append(GemmBackend("CK", True, "Composable Kernel templates for AMD Instinct"))
    rows.append(
        GemmBackend("CPP", True, "C++ GEMM templates for CPU tensors")
        if not gpu
        else GemmBackend("CPP", False, "GPU machine: GEMMs run on the GPU")
    )
    return tuple(rows)
