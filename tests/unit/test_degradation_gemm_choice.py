"""Inductor GEMM backend recommendations per machine, table-driven. The GPUs are
facts passed in (fakes of absent hardware); the backend names and their device rules
are torch 2.14's."""

from __future__ import annotations

import pytest

from ptkit.runtime.profiling import recommend_gemm_backends

NONE: dict[str, object] = {
    "cuda_capabilities": (),
    "rocm": False,
    "xpu": False,
    "triton": False,
    "cutlass_operators": False,
    "composable_kernel": False,
}


def _recommended(**facts: object) -> tuple[str, dict[str, str]]:
    rows = recommend_gemm_backends(**{**NONE, **facts})  # type: ignore[arg-type]
    return ",".join(r.name for r in rows if r.recommended), {r.name: r.reason for r in rows}


@pytest.mark.parametrize(
    ("facts", "expected", "why"),
    [
        ({}, "ATEN,CPP", {"NVGEMM": "no NVIDIA GPU", "TRITON": "no GPU"}),
        (
            {"cuda_capabilities": ((9, 0),), "triton": True, "cutlass_operators": True},
            "ATEN,TRITON,NVGEMM",
            {"NVGEMM": "every GPU is sm_90+"},
        ),
        (
            {"cuda_capabilities": ((9, 0), (8, 0)), "triton": True, "cutlass_operators": True},
            "ATEN,TRITON",
            {"NVGEMM": "a device is sm_80; NVGEMM needs sm_90+"},
        ),
        (
            {"cuda_capabilities": ((10, 0),), "triton": True},
            "ATEN,TRITON",
            {"NVGEMM": "pip install nvidia-cutlass-operators"},
        ),
        ({"cuda_capabilities": ((12, 0),)}, "ATEN", {"TRITON": "triton is not installed"}),
        (
            {"rocm": True, "triton": True, "composable_kernel": True},
            "ATEN,TRITON,CK",
            {"NVGEMM": "AMD GPU: NVIDIA only"},
        ),
        ({"xpu": True, "triton": True}, "ATEN,TRITON", {"CK": "no AMD GPU"}),
    ],
)
def test_recommended_backends(facts: dict[str, object], expected: str, why: dict[str, str]) -> None:
    chosen, reasons = _recommended(**facts)
    assert chosen == expected
    for name, text in why.items():
        assert text in reasons[name]
