"""The doctor's data: the facts its probes gather and the findings its checks make.

Flow: ``probes`` gather ``Facts`` (each probe isolated, with a timeout: a probe that
hangs or raises leaves its field ``None`` and a line in ``probe_problems``) → ``checks``
(each declared with the facts it needs, ``ptkit.doctor.checks.base``; a check whose
facts are missing is skipped, never crashed) make findings → ``report`` renders text or
JSON.

Everything here is standard library only and valid on CPython 3.10: the doctor must run
where torch is missing or broken, on any Python ptkit supports.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from ptkit.hardware import Machine

__all__ = [
    "SCHEMA_VERSION",
    "Facts",
    "LibraryFacts",
    "OsFacts",
    "PackageFacts",
    "ProfileFacts",
    "PythonFacts",
    "RouteFacts",
    "Severity",
    "SmokeFacts",
    "SmokePackage",
    "SmokeRow",
    "ToolchainFacts",
    "TorchInstall",
]

# Bumped when a field of the JSON report changes meaning or disappears (adding is free).
SCHEMA_VERSION = 1


class Severity(str, enum.Enum):
    ERROR = "error"  # something will not work: fix it
    WARNING = "warning"  # works, but slower or not as intended (e.g. the reference serves)
    INFO = "info"  # worth knowing; never changes the exit code


@dataclasses.dataclass(frozen=True)
class PythonFacts:
    version: str  # "3.11.7"
    implementation: str  # "cpython"
    executable: str
    free_threaded: bool  # built with Py_GIL_DISABLED (3.13t, 3.15t …)
    gil_enabled: bool | None  # sys._is_gil_enabled() at run time; None before 3.13


@dataclasses.dataclass(frozen=True)
class OsFacts:
    system: str  # "Linux", "Darwin", "Windows"
    machine: str  # "x86_64", "arm64" …
    release: str  # the kernel / OS release
    name: str | None  # /etc/os-release PRETTY_NAME, "macOS 15.1", "Windows 11"
    libc: str | None  # "glibc 2.36", "musl 1.2.5"; None off Linux
    manylinux: str | None  # the newest manylinux tag this machine accepts: manylinux_2_36_x86_64


@dataclasses.dataclass(frozen=True)
class TorchInstall:
    """torch as read from its installed files and metadata, without importing it."""

    location: str | None  # the torch package folder; None: torch is not installed
    version: str | None  # "2.14.1+cu130"
    cuda: str | None  # torch.version.cuda as its version.py records it ("13.0")
    hip: str | None  # torch.version.hip ("7.14.…"), None for non-ROCm builds
    xpu: bool  # built with XPU support
    cxx11_abi: bool | None  # _GLIBCXX_USE_CXX11_ABI of the build
    compile_supported: bool | None  # ptkit.degradation.compile_rules' verdict for this Python
    compile_reason: str | None
    cuda_runtimes: tuple[
        str, ...
    ]  # every libcudart.so.* in torch's and nvidia's folders and on LD_LIBRARY_PATH
    problems: tuple[str, ...]  # e.g. "torch/version.py is missing: a broken or fake torch"
    # Inductor's CPU backend here (a C++ compiler, Python.h): compile_rules' verdict.
    compile_cpu_codegen: bool | None = None
    compile_cpu_reason: str | None = None


@dataclasses.dataclass(frozen=True)
class LibraryFacts:
    """One native library of an installed package: its manifest and the loader's verdict."""

    library: str
    backend: str
    variant: str
    targets: dict[str, tuple[str, ...]]  # manifest targets: sass/ptx, gfx, xpu, isa
    toolkit: str | None  # "cuda 13.5.37"
    torch_built_with: str | None
    torch_target: str | None
    status: str  # "loaded" / "skipped" / "failed": what the loader would decide here
    reason: str


@dataclasses.dataclass(frozen=True)
class RouteFacts:
    op: str
    device_type: str  # cpu, cuda, xpu, mps
    implementation: str  # "native", "reference" or "unavailable" (ptkit.loading.routes)
    library: str | None
    reason: str


@dataclasses.dataclass(frozen=True)
class PackageFacts:
    """An installed package that ships ptkit-built libraries (ptkit-ops, and others): one
    of the ``ptkit.packages`` entry-point group."""

    name: str  # the import name: ptkit_ops
    version: str
    variant: str | None
    location: str
    libraries: tuple[LibraryFacts, ...]
    routes: tuple[RouteFacts, ...]
    distribution: str | None = None  # what pip calls it (ptkit-ops); None: not installed


@dataclasses.dataclass(frozen=True)
class ProfileFacts:
    graph_capture: str  # "CUDA graphs", "XPU graphs", "eager (…why)"
    distributed_backend: str  # "nccl", "xccl", "gloo" … with the reason
    gemm_backends: tuple[str, ...]  # Inductor GEMM backends worth enabling
    notes: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ToolchainFacts:
    """One build tool for ``ptkit doctor --build``."""

    name: str  # cmake, ninja, nvcc, rocm-sdk, hipcc, icpx, xcrun metal
    path: str | None  # None: not found
    version: str | None
    targets: tuple[str, ...]  # what it can compile for (sm_90 …, gfx942 …)
    could_build: str  # "the cu13 variant: sm_90 … sm_120", or why not
    problem: str | None


@dataclasses.dataclass(frozen=True)
class SmokeRow:
    op: str
    device: str
    dtype: str
    implementation: str
    max_error: float | None
    seconds: float
    ok: bool
    problem: str | None


@dataclasses.dataclass(frozen=True)
class SmokePackage:
    """``--smoke``: the load checks of one package (``ptkit.runtime.smoke.check_loading``)."""

    name: str
    kernels_checked: int  # op kernels found registered at their backend's dispatch key
    problems: tuple[str, ...]  # why the package does not work as installed


@dataclasses.dataclass(frozen=True)
class SmokeFacts:
    """``--smoke``: a child process imports torch and every package of the
    ``ptkit.packages`` group, checks how each loaded, and runs ptkit-ops' ops against
    their references."""

    torch_imported: bool
    error: str | None  # the child's last line when the import or the run failed
    seconds: float
    rows: tuple[SmokeRow, ...]
    # Optional, added with the smoke runner: what the child saw after importing torch and
    # ptkit (None when it did not get that far).
    torch_version: str | None = None
    import_seconds: float | None = None  # `import torch` alone, in the child
    gil_enabled: bool | None = None  # sys._is_gil_enabled() after the imports; None < 3.13
    packages: tuple[SmokePackage, ...] = ()


@dataclasses.dataclass(frozen=True)
class Facts:
    """Everything the probes found. A field is None when its probe failed or was not run
    (``toolchains`` without --build, ``smoke`` without --smoke); ``probe_problems`` says
    why for the failed ones."""

    python: PythonFacts | None = None
    os: OsFacts | None = None
    torch: TorchInstall | None = None
    machine: Machine | None = None
    distributions: dict[str, str] | None = (
        None  # installed name -> version (rocm, nvidia-*, torch …)
    )
    packages: tuple[PackageFacts, ...] | None = None
    profile: ProfileFacts | None = None
    toolchains: tuple[ToolchainFacts, ...] | None = None
    smoke: SmokeFacts | None = None
    index_url: str | None = None
    """``PTKIT_INDEX_URL`` as set when the doctor ran (the root of ptkit's index: fixes that
    install a ptkit-ops variant name it); None when unset."""
    probe_problems: dict[str, str] = dataclasses.field(default_factory=dict)
    probe_seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if value is None or isinstance(value, (str, int, float, bool)):
                return value
            if hasattr(value, "to_json"):
                return value.to_json()
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, dict):
                return {str(k): plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            if isinstance(value, enum.Enum):
                return value.value
            return str(value)

        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
