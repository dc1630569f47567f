"""Can ``torch.compile`` run here, and can Inductor generate code for the GPUs present?

``compile_support()`` answers from facts (Python version, free-threading, torch version,
Triton, device types) rather than by compiling, so that ``ptkit.compile`` and the
runtime profile can decide cheaply and say why. The facts default to this process;
passing them explicitly predicts the answer for another interpreter.

The rules are torch 2.14's own (``torch.compile`` in ``torch/__init__.py`` and
``check_if_dynamo_supported`` in ``torch/_dynamo/eval_frame.py``) and live in one
table, ``_REFUSALS``, below. torch 2.14 refuses no platform: on Linux, Windows and
macOS, Inductor compiles CPU graphs to C++ (a C++ compiler is needed at the first call,
which is not a rule torch checks up front). Older torch releases were stricter (torch 2.1 refused
Windows and Python 3.12, for example); those historical ceilings are not modelled:
ptkit needs torch >= 2.10, and tests/unit/test_compile_support.py checks the table
against the torch that is installed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

from packaging.version import InvalidVersion, Version

__all__ = ["CompileFacts", "CompileSupport", "compile_support", "decide"]


@dataclasses.dataclass(frozen=True)
class CompileFacts:
    """What the rules look at, for this process or for an interpreter described by hand."""

    python: tuple[int, int, int]
    gil_disabled: bool
    torch_version: str
    platform: str
    triton_available: bool
    # "cpu" first, then the accelerator device types that have a device ("cuda" also on ROCm).
    device_types: tuple[str, ...]

    @property
    def python_label(self) -> str:
        """``3.13.3t`` style: the ``t`` marks a free-threaded build, as python.org does."""
        return ".".join(map(str, self.python)) + ("t" if self.gil_disabled else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "python": self.python_label,
            "gil_disabled": self.gil_disabled,
            "torch": self.torch_version,
            "platform": self.platform,
            "triton_available": self.triton_available,
            "device_types": list(self.device_types),
        }


@dataclasses.dataclass(frozen=True)
class _Refusal:
    """One of torch's reasons to refuse ``torch.compile``; ``message`` quotes torch."""

    applies: Callable[[CompileFacts, Version], bool]
    message: str


# torch's refusals, in the order torch checks them. The first that applies decides.
_REFUSALS: tuple[_Refusal, ...] = (
    # torch.compile appeared in torch 2.0 (torch 1.x has no such function at all).
    _Refusal(
        lambda facts, torch_version: torch_version.release < (2, 0),
        "torch.compile does not exist before torch 2.0",
    ),
    # torch/__init__.py, compile():
    #     if sys.version_info >= (3, 15):
    #         raise RuntimeError("torch.compile is not supported on Python 3.15+")
    # (check_if_dynamo_supported says "Python 3.15+ not yet supported for torch.compile".)
    _Refusal(
        lambda facts, torch_version: facts.python >= (3, 15),
        "torch.compile is not supported on Python 3.15+",
    ),
    # torch/__init__.py, compile(), and torch/_dynamo/eval_frame.py, check_if_dynamo_supported():
    #     elif sysconfig.get_config_var("Py_GIL_DISABLED") == 1 and sys.version_info < (3, 13, 3):
    #         raise RuntimeError("torch.compile is not supported on Python < 3.13.3 built with GIL disabled. ...")
    _Refusal(
        lambda facts, torch_version: facts.gil_disabled and facts.python < (3, 13, 3),
        "torch.compile is not supported on Python < 3.13.3 built with GIL disabled. "
        "Please use Python 3.13.3+.",
    ),
)

# How Inductor generates code per device type when torch.compile runs at all. CPU: C++
# (with OpenMP), on Linux, Windows and macOS alike, no Triton needed. CUDA and ROCm (both
# device type "cuda") and XPU: Triton kernels; without Triton, Inductor raises
# torch._inductor.exc.TritonMissing: "Cannot find a working triton installation. Either
# the package is not installed or it is too old." MPS: Metal shaders, no Triton.
_GPU_CODEGEN: dict[str, str] = {"cuda": "triton", "xpu": "triton", "mps": "metal"}
_TRITON_MISSING = (
    "Cannot find a working triton installation. "
    "Either the package is not installed or it is too old."
)


@dataclasses.dataclass(frozen=True)
class CompileSupport:
    """Whether ``torch.compile`` can run (``supported``) and whether Inductor can generate
    code for the GPUs present (``gpu_codegen``), each with its reason, always filled."""

    supported: bool
    reason: str
    gpu_codegen: bool
    gpu_reason: str
    facts: CompileFacts

    def to_json(self) -> dict[str, Any]:
        return {
            "supported": self.supported,
            "reason": self.reason,
            "gpu_codegen": self.gpu_codegen,
            "gpu_reason": self.gpu_reason,
            "facts": self.facts.to_json(),
        }


def compile_support(
    *,
    torch_version: str,
    device_types: tuple[str, ...],
    python: tuple[int, int, int] | None = None,
    gil_disabled: bool | None = None,
    platform: str | None = None,
    triton_available: bool | None = None,
) -> CompileSupport:
    """Predict what ``torch.compile`` does with these facts; each optional one left out is
    read from this process (``ptkit.runtime.compile_support`` reads torch's too). Nothing
    is compiled, so this is cheap enough to call per decision."""
    facts = CompileFacts(
        python=_check_python(python) if python is not None else _this_python(),
        gil_disabled=gil_disabled if gil_disabled is not None else _this_gil_disabled(),
        torch_version=torch_version,
        platform=platform if platform is not None else sys.platform,
        triton_available=(
            triton_available
            if triton_available is not None
            else importlib.util.find_spec("triton") is not None
        ),
        device_types=device_types,
    )
    return decide(facts)


def decide(facts: CompileFacts) -> CompileSupport:
    """Apply ``_REFUSALS`` and ``_GPU_CODEGEN`` to ``facts``."""
    torch_version = _parse_torch_version(facts.torch_version)
    where = f"Python {facts.python_label}, torch {facts.torch_version}, {facts.platform}"
    for refusal in _REFUSALS:
        if refusal.applies(facts, torch_version):
            reason = f"{refusal.message} ({where})"
            return CompileSupport(False, reason, False, f"no code generation: {reason}", facts)
    reason = (
        f"torch.compile runs here ({where}): none of torch's refusals applies "
        "(Python 3.15+; free-threaded Python before 3.13.3; torch before 2.0); "
        "Inductor generates C++ for CPU graphs, without Triton"
    )
    gpu_codegen, gpu_reason = _gpu_codegen(facts)
    return CompileSupport(True, reason, gpu_codegen, gpu_reason, facts)


def _gpu_codegen(facts: CompileFacts) -> tuple[bool, str]:
    """GPU graphs need Triton on CUDA, ROCm and XPU: without it torch.compile still runs
    (CPU graphs work) but Inductor fails on the first GPU graph."""
    gpus = [t for t in facts.device_types if t in _GPU_CODEGEN]
    if not gpus:
        return False, "no GPU device present (cuda, xpu or mps): only CPU graphs are compiled"
    missing = [t for t in gpus if _GPU_CODEGEN[t] == "triton" and not facts.triton_available]
    if missing:
        return False, (
            f"{', '.join(missing)} graphs need Triton, which is not installed: Inductor would "
            f"raise TritonMissing ({_TRITON_MISSING!r}); CPU graphs still compile"
        )
    how = ", ".join(
        f"{t}: {'Triton kernels' if _GPU_CODEGEN[t] == 'triton' else 'Metal shaders'}" for t in gpus
    )
    return True, f"Inductor generates GPU code ({how})"


def _check_python(python: tuple[int, int, int]) -> tuple[int, int, int]:
    if len(python) != 3 or not all(isinstance(p, int) for p in python):
        raise ValueError(
            "ptkit.runtime.compile_support: python must be (major, minor, micro) integers, "
            f"e.g. (3, 13, 3); got {python!r}"
        )
    return python


def _parse_torch_version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(
            "ptkit.runtime.compile_support: torch_version must be a PEP 440 version such as "
            f"'2.14.1+cu130'; got {text!r}"
        ) from None


def _this_python() -> tuple[int, int, int]:
    major, minor, micro = sys.version_info[:3]
    return (major, minor, micro)


def _this_gil_disabled() -> bool:
    """The build flag torch tests, not whether the GIL is on right now (PYTHON_GIL=1 can
    re-enable it on a free-threaded build, and torch still refuses)."""
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED") == 1)
