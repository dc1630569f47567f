"""Can ``torch.compile`` run here, and can Inductor generate code for the devices present?

``compile_support()`` answers from facts (Python version, free-threading, platform,
torch version, a C++ compiler, ``Python.h``, Triton, device types) rather than by
compiling, so that ``ptkit.compile``, the runtime profile and the doctor can decide
cheaply and say why. The facts default to this process; passing them explicitly
predicts the answer for another interpreter.

Whether torch.compile runs is torch's own decision, read from the installed torch
(``ptkit.degradation.torch_guards``: the ``if …: raise RuntimeError`` checks at the top
of ``torch.compile`` and in ``check_if_dynamo_supported``), never a table of one torch
release: a torch that lifts or adds a refusal changes the answer with no change here.
What torch does not check up front, Inductor needs at the first call: a C++ compiler
(``$CXX``, else ``g++``, ``clang++`` on macOS, ``cl`` on Windows, as
``torch._inductor.config.cpp.cxx``) and the running Python's ``Python.h`` for CPU
graphs, Triton for CUDA, ROCm and XPU graphs.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from ptkit.degradation.torch_guards import GuardFacts, TorchGuards, read_guards

__all__ = [
    "CompileFacts",
    "CompileSupport",
    "compile_support",
    "decide",
    "inductor_cxx",
    "installed_torch_root",
]


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
    # The C++ compiler Inductor would run (its path), or None; whether Python.h is there.
    cxx: str | None = None
    python_h: bool = True

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
            "cxx": self.cxx,
            "python_h": self.python_h,
        }


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
    # Inductor's CPU backend: C++ code, needing a C++ compiler and Python.h.
    cpu_codegen: bool = True
    cpu_reason: str = ""
    # Every one of torch's checks was read and evaluated: ``supported`` is torch's answer,
    # not a guess (where False, torch.compile itself has the last word).
    checks_read: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "supported": self.supported,
            "reason": self.reason,
            "gpu_codegen": self.gpu_codegen,
            "gpu_reason": self.gpu_reason,
            "cpu_codegen": self.cpu_codegen,
            "cpu_reason": self.cpu_reason,
            "checks_read": self.checks_read,
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
    torch_root: Path | None = None,
    cxx: str | Literal["find"] | None = "find",
    python_h: bool | None = None,
) -> CompileSupport:
    """Predict what ``torch.compile`` does with these facts; each optional one left out is
    read from this process (``ptkit.runtime.compile_support`` reads torch's too), and
    torch's checks from ``torch_root`` (default: the torch this Python would import,
    found without importing it). Nothing is compiled, so this is cheap enough to call per
    decision."""
    platform = platform if platform is not None else sys.platform
    facts = CompileFacts(
        python=_check_python(python) if python is not None else _this_python(),
        gil_disabled=gil_disabled if gil_disabled is not None else _this_gil_disabled(),
        torch_version=torch_version,
        platform=platform,
        triton_available=(
            triton_available
            if triton_available is not None
            else importlib.util.find_spec("triton") is not None
        ),
        device_types=device_types,
        cxx=inductor_cxx(platform) if cxx == "find" else cxx,
        python_h=python_h if python_h is not None else _python_h_here(),
    )
    root = torch_root if torch_root is not None else installed_torch_root()
    return decide(facts, read_guards(root) if root is not None else None)


def decide(facts: CompileFacts, guards: TorchGuards | None) -> CompileSupport:
    """torch's checks (``guards``, None where no torch could be read) and Inductor's
    prerequisites, applied to ``facts``."""
    torch_version = _parse_torch_version(facts.torch_version)
    where = f"Python {facts.python_label}, torch {facts.torch_version}, {facts.platform}"
    refusal: str | None = None
    if torch_version.release < (2, 0):
        refusal = "torch.compile does not exist before torch 2.0"
    elif guards is not None:
        hit = guards.refusal(GuardFacts(facts.python, facts.gil_disabled, facts.platform))
        if hit is not None:
            refusal = f"{hit.message} (torch's check at {hit.source}: {hit.condition})"
        elif any(m.endswith(":compile") for m in guards.missing):
            refusal = f"this torch ({guards.torch_root}) has no torch.compile"
    if refusal is not None:
        reason = f"{refusal} ({where})"
        return CompileSupport(
            False, reason, False, f"no code generation: {reason}", facts, False, reason
        )
    if guards is None:
        checked = "torch's own checks could not be read (no torch found without importing it)"
    else:
        checked = f"none of {guards.describe()} refuses"
        if guards.unreadable:
            checked += "; not evaluated: " + "; ".join(
                f"{u.source} ({u.condition}: {u.why})" for u in guards.unreadable
            )
    reason = f"torch.compile runs here ({where}): {checked}"
    gpu_codegen, gpu_reason = _gpu_codegen(facts)
    cpu_codegen, cpu_reason = _cpu_codegen(facts)
    read = guards is not None and not guards.unreadable and not guards.missing
    return CompileSupport(
        True, reason, gpu_codegen, gpu_reason, facts, cpu_codegen, cpu_reason, read
    )


def installed_torch_root() -> Path | None:
    """The folder of the torch this Python would import, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def inductor_cxx(platform: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The C++ compiler Inductor's CPU backend would run (``torch._inductor.config.cpp.cxx``:
    ``$CXX``, else ``g++``; ``clang++`` on macOS; ``cl`` on Windows), as a path, or None."""
    env = os.environ if environ is None else environ
    default = "cl" if platform == "win32" else "clang++" if platform == "darwin" else "g++"
    return shutil.which(env.get("CXX") or default, path=env.get("PATH"))


def _python_h_here() -> bool:
    include = sysconfig.get_paths().get("include")
    return include is not None and (Path(include) / "Python.h").is_file()


def _cpu_codegen(facts: CompileFacts) -> tuple[bool, str]:
    """CPU graphs: Inductor writes C++ and builds it as a Python extension at the first
    call; without a compiler it raises InvalidCxxCompiler, without Python.h CppCompileError."""
    missing = []
    if facts.cxx is None:
        missing.append(
            "a C++ compiler (Inductor runs $CXX, else g++ / clang++ on macOS / cl on Windows, "
            "and finds none here): install one, e.g. `apt install g++`, or set CXX"
        )
    if not facts.python_h:
        missing.append(
            "Python.h for this Python (Inductor builds its C++ as an extension of it): install "
            "the headers, e.g. `apt install python3-dev` or python.org's build"
        )
    if missing:
        return False, "Inductor cannot compile CPU graphs here: it needs " + "; and ".join(missing)
    return True, f"Inductor compiles CPU graphs to C++ with {facts.cxx}"


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
