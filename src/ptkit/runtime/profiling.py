"""The runtime profile: what this machine and this torch can do, in one object.

``profile()`` gathers, without initialising anything heavy: the devices, whether
``torch.compile`` works here (and why not), which graph capture ``ptkit.graphs``
would use, the distributed backend ``ptkit.distributed`` would pick, the Inductor
GEMM autotuning backends worth enabling, and the op table of ``explain()``.
``apply_profile()`` sets the recommended GEMM backends in Inductor's config, and
only those.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import platform
import sys
from typing import Any

import torch

from ptkit.degradation.compile_rules import CompileSupport
from ptkit.degradation.gemm_choice import GemmBackend, recommend_gemm_backends
from ptkit.loading.routes import OpRoute, format_routes
from ptkit.runtime.compiling import compile_support

__all__ = [
    "Device",
    "GemmBackend",
    "RuntimeProfile",
    "apply_profile",
    "profile",
    "recommend_gemm_backends",
]


@dataclasses.dataclass(frozen=True)
class Device:
    type: str  # cpu, cuda (also ROCm), xpu, mps
    index: int
    name: str
    arch: str  # sm_90, gfx942:sramecc+:xnack-, the CPU ISA …


@dataclasses.dataclass(frozen=True)
class RuntimeProfile:
    python: str
    torch: str
    platform: str
    devices: tuple[Device, ...]
    compile: CompileSupport
    graphs: dict[str, str]  # mode, reason
    distributed: dict[str, Any]
    gemm_backends: tuple[GemmBackend, ...]
    ops: tuple[OpRoute, ...]

    @property
    def recommended_gemm_backends(self) -> str:
        """The value ``apply_profile`` writes to ``max_autotune_gemm_backends``."""
        return ",".join(b.name for b in self.gemm_backends if b.recommended)

    def to_json(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "torch": self.torch,
            "platform": self.platform,
            "devices": [dataclasses.asdict(d) for d in self.devices],
            "compile": self.compile.to_json(),
            "graphs": dict(self.graphs),
            "distributed": self.distributed,
            "gemm_backends": [dataclasses.asdict(b) for b in self.gemm_backends],
            "recommended_gemm_backends": self.recommended_gemm_backends,
            "ops": [r.to_json() for r in self.ops],
        }

    def format(self) -> str:
        lines = [
            f"python {self.python}, torch {self.torch}, {self.platform}",
            "devices: "
            + ", ".join(f"{d.type}:{d.index} {d.name} ({d.arch})" for d in self.devices),
            f"torch.compile: {'yes' if self.compile.supported else 'no'} ({self.compile.reason})",
            f"graph capture: {self.graphs['mode']} ({self.graphs['reason']})",
            f"distributed: {self.distributed['backend']} ({self.distributed['reason']})",
            "inductor GEMM backends:",
        ]
        lines += [
            f"  {'+' if b.recommended else '-'} {b.name:<8} {b.reason}" for b in self.gemm_backends
        ]
        lines += ["ops:", format_routes(list(self.ops))]
        return "\n".join(lines)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails to import
        return False


def _devices() -> tuple[Device, ...]:
    devices = [Device("cpu", 0, platform.processor() or platform.machine(), platform.machine())]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            arch = str(props.gcnArchName) if torch.version.hip else f"sm_{props.major}{props.minor}"
            devices.append(Device("cuda", i, str(props.name), arch))
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        for i in range(torch.xpu.device_count()):
            xpu = torch.xpu.get_device_properties(i)
            devices.append(Device("xpu", i, str(xpu.name), str(getattr(xpu, "device_id", ""))))
    if torch.backends.mps.is_available():
        devices.append(Device("mps", 0, "Apple GPU", platform.machine()))
    return tuple(devices)


def profile() -> RuntimeProfile:
    """The profile of this process's machine and torch (cheap: nothing is compiled)."""
    from ptkit.runtime.distributed import distributed_backend_plan
    from ptkit.runtime.graphs import capture_plan
    from ptkit.runtime.session import explain

    devices = _devices()
    capabilities = tuple(
        torch.cuda.get_device_capability(d.index)
        for d in devices
        if d.type == "cuda" and not torch.version.hip
    )
    mode, reason = capture_plan()
    gil_enabled = getattr(sys, "_is_gil_enabled", lambda: True)()  # 3.13+: free-threaded builds
    return RuntimeProfile(
        python=platform.python_version() + ("" if gil_enabled else "t"),
        torch=torch.__version__,
        platform=f"{platform.system()}-{platform.machine()}".lower(),
        devices=devices,
        compile=compile_support(),
        graphs={"mode": mode, "reason": reason},
        distributed=distributed_backend_plan().to_json(),
        gemm_backends=recommend_gemm_backends(
            cuda_capabilities=capabilities,
            rocm=bool(torch.version.hip) and any(d.type == "cuda" for d in devices),
            xpu=any(d.type == "xpu" for d in devices),
            triton=_importable("triton"),
            cutlass_operators=_importable("cutlass.operators"),
            composable_kernel=_importable("ck4inductor"),
        ),
        ops=tuple(explain()),
    )


def apply_profile(runtime_profile: RuntimeProfile | None = None) -> str:
    """Set Inductor's ``max_autotune_gemm_backends`` to the profile's recommendation, and
    no other option; return the value set."""
    import torch._inductor.config as inductor_config

    chosen = (runtime_profile or profile()).recommended_gemm_backends
    inductor_config.max_autotune_gemm_backends = chosen
    return chosen
