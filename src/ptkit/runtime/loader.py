"""Loading native kernel libraries into the running torch.

``ptkit.loading.rules`` decides, before ``dlopen`` and without torch, whether each
library can run here (rules 1-5); this module asks torch for the facts those rules need
(``torch_facts``) and applies rule 6: ``torch.ops.load_library`` succeeds (Metal: the
package's binding registers the MPS kernels; they are compiled at first use, and a
compile failure falls back to the reference). Nothing here raises into an import:
every failure becomes a recorded decision.

Before ``dlopen`` it also refuses a library that would define an op namespace (or an op)
already defined in this process (``ptkit.loading.namespaces``: torch aborts the process
on a second definition), by another library it loaded or outside ptkit (Python code,
``torch.ops.load_library``). Just before a load it adds the folders the platform says
the library's imports need (Windows: torch's ``lib`` and the library's own, with
``os.add_dll_directory``: ``ptkit.runtime.library_folders``). With ``PTKIT_LOAD_TRACE=1``
each load (and each folder added) is announced on stderr before it happens, so a library
that kills the process is named.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from ptkit.loading import namespaces
from ptkit.loading.manifest import Manifest, ManifestError, read_manifest
from ptkit.loading.rules import (
    LoadDecision,
    LoadStatus,
    TorchFacts,
    decide_without_loading,
    listed_manifests,
)
from ptkit.loading.switches import RuntimeSwitches
from ptkit.platforms import Platform
from ptkit.runtime.library_folders import add_library_folders
from ptkit.runtime.registrations import holds_namespace, op_entry

__all__ = ["MetalBinding", "load_native_libraries", "torch_facts"]

logger = logging.getLogger("ptkit.runtime")

# A package's Metal binding: given the shipped .metal / .metallib, it registers the MPS
# implementations of the package's ops (Metal kernels are no shared library).
MetalBinding = Callable[[Path], object]

# Namespace -> the library this process loaded that defines it ("libx_cpu.so of mypkg"),
# for every package: a second definer is refused before it is loaded.
_claims = namespaces.Claims()  # what this process's loaded libraries define and register
_claims_lock = threading.Lock()


def torch_facts() -> TorchFacts:
    """The running torch's build and visible devices."""
    devices: tuple[tuple[int, int], ...] = ()
    hip_devices: tuple[str, ...] = ()
    driver = None
    hip = getattr(torch.version, "hip", None)
    if torch.version.cuda and torch.cuda.is_available():
        devices = tuple(
            torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())
        )
        # cudaDriverGetVersion: e.g. 13050 for CUDA 13.5 (private in torch, hence getattr)
        get_driver = getattr(torch._C, "_cuda_getDriverVersion", None)
        raw = int(get_driver()) if get_driver is not None else 0
        driver = (raw // 1000, raw % 1000 // 10) if raw > 0 else None
    elif hip and torch.cuda.is_available():
        hip_devices = tuple(
            str(torch.cuda.get_device_properties(i).gcnArchName)
            for i in range(torch.cuda.device_count())
        )
    has_xpu = hasattr(torch, "xpu") and torch.xpu._is_compiled()
    xpu_available = has_xpu and torch.xpu.is_available()
    xpu_devices: tuple[tuple[str, int | None], ...] = ()
    if xpu_available:
        props = [torch.xpu.get_device_properties(i) for i in range(torch.xpu.device_count())]
        xpu_devices = tuple((str(p.name), getattr(p, "device_id", None)) for p in props)
    has_mps = torch.backends.mps.is_built()
    return TorchFacts(
        version=torch.__version__,
        cuda=torch.version.cuda,
        hip=hip,
        has_xpu=has_xpu,
        has_mps=has_mps,
        cuda_devices=devices,
        cuda_driver=driver,
        hip_devices=hip_devices,
        xpu_available=xpu_available,
        xpu_devices=xpu_devices,
        mps_available=has_mps and torch.backends.mps.is_available(),
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    )


def _cpu_isa(path: Path) -> tuple[str | None, str]:
    """The level a CPU library runs, and why it passed over a better one it holds (the OS
    refused it: empty when none). CPU libraries export ptkit_cpu_isa(), and those built
    since the amx-bf16 level ptkit_cpu_isa_note(); dlopen of a loaded library returns the
    same handle."""
    try:
        library = ctypes.CDLL(str(path))
    except OSError:
        return None, ""
    values: list[str | None] = []
    for name in ("ptkit_cpu_isa", "ptkit_cpu_isa_note"):
        fn = getattr(library, name, None)
        if fn is None:
            values.append(None)
            continue
        fn.restype = ctypes.c_char_p
        value = fn()
        values.append(value.decode(errors="replace") if isinstance(value, bytes) else None)
    return values[0], values[1] or ""


def _isa_cap_note(cap: str, chosen: str, manifest: Manifest) -> str:
    """Why the level in use is not the one PTKIT_CPU_ISA names."""
    built = manifest.targets.get("isa", ())
    if cap not in built:
        return (
            f"PTKIT_CPU_ISA={cap} was not built (built: {', '.join(built) or 'none'}): "
            f"{chosen}, the best level below it that this CPU runs"
        )
    return f"PTKIT_CPU_ISA={cap}: this CPU does not run it; {chosen}, the best level below it"


def _decide_and_load(
    path: Path,
    facts: TorchFacts,
    switches: RuntimeSwitches,
    metal_binding: MetalBinding | None,
    platform: Platform | None = None,
) -> LoadDecision:
    try:
        manifest = read_manifest(path)
    except ManifestError as exc:
        return LoadDecision(path, LoadStatus.FAILED, f"unreadable manifest: {exc}")
    if manifest.backend == "metal" and metal_binding is None:
        reason = (
            f"{manifest.package} passes no metal_binding to ptkit.runtime.load_package: Metal "
            "kernels are bound to the package's ops in Python, so nothing can register them"
        )
        return LoadDecision(path, LoadStatus.SKIPPED, reason, manifest)
    decision = decide_without_loading(manifest, facts, switches)
    if decision.status is not LoadStatus.LOADED:
        return decision
    with _claims_lock:
        conflict = _claims.conflict(manifest) or _defined_elsewhere(manifest)
    if conflict is not None:
        return LoadDecision(path, LoadStatus.FAILED, conflict, manifest)
    if manifest.backend != "metal":  # Metal kernels are no library the OS loads
        add_library_folders(
            manifest.library_path, platform, announce=lambda line: _trace(switches, line)
        )
    _trace(switches, f"ptkit: loading {manifest.library_path}")
    try:
        if manifest.backend == "metal":
            assert metal_binding is not None
            metal_binding(manifest.library_path)
        else:
            load: Callable[[str], None] = torch.ops.load_library  # untyped in torch
            load(str(manifest.library_path))
    except Exception as exc:  # OSError from dlopen, RuntimeError from registration
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _trace(switches, f"ptkit: loading {manifest.library_path} failed: {first_line}")
        return LoadDecision(path, LoadStatus.FAILED, f"loading failed: {first_line}", manifest)
    _trace(switches, f"ptkit: loaded {manifest.library_path}")
    with _claims_lock:
        _claims.record(manifest)
    details: list[tuple[str, str]] = []
    if manifest.backend == "cpu":
        isa, passed_over = _cpu_isa(manifest.library_path)
        if isa:
            details.append(("isa", isa))
            if passed_over:
                details.append(("isa note", passed_over))
            if switches.cpu_isa_cap is not None and switches.cpu_isa_cap != isa:
                details.append(("isa cap", _isa_cap_note(switches.cpu_isa_cap, isa, manifest)))
    details += decision.details
    return dataclasses.replace(decision, details=tuple(details))


def _trace(switches: RuntimeSwitches, line: str) -> None:
    """PTKIT_LOAD_TRACE: a line on stderr, flushed before the next step can crash."""
    if switches.load_trace:
        print(line, file=sys.stderr, flush=True)


def _defined_elsewhere(manifest: Manifest) -> str | None:
    """A namespace block or an op the library would define that already exists in this
    process, defined outside ptkit's loader: the dispatcher is asked."""
    registrations = manifest.registrations
    if registrations is None:
        return None
    where = (
        "in this process outside ptkit's loader (in Python with torch.library, or by a "
        "library loaded with torch.ops.load_library)"
    )
    for namespace in registrations.namespaces:
        if holds_namespace(namespace):
            return (
                f"refused before loading: {manifest.library} holds the TORCH_LIBRARY block of "
                f"op namespace {namespace}, which is already defined {where}; a second block "
                f"of a namespace aborts the process. Fix: {namespaces.FIX}"
            )
    for op in registrations.schemas:
        entry = op_entry(op)
        if entry is not None and entry.schema is not None:
            return (
                f"refused before loading: {manifest.library} defines {op}, which is already "
                f"defined {where}; a second definition of an op aborts the process. Fix: "
                "define each op once: in the library (no torch.library define for it) or in "
                "Python (no def in the library)"
            )
    return None


def load_native_libraries(
    manifests: Iterable[Path] | Path,
    *,
    facts: TorchFacts | None = None,
    switches: RuntimeSwitches | None = None,
    metal_binding: MetalBinding | None = None,
    platform: Platform | None = None,
) -> list[LoadDecision]:
    """Decide and load every manifest given (or found in a native folder); never raises.
    ``platform``: the OS whose loading steps apply (library names, the DLL folders);
    default this machine's (a test gives another's)."""
    decisions: list[LoadDecision] = []
    if isinstance(manifests, Path):
        paths, decisions = listed_manifests(manifests, platform)
    else:
        paths = list(manifests)
    facts = facts or torch_facts()
    switches = switches or RuntimeSwitches.from_environ()
    for path in paths:
        try:
            decision = _decide_and_load(path, facts, switches, metal_binding, platform)
        except Exception as exc:  # a loader bug must not break the import either
            decision = LoadDecision(path, LoadStatus.FAILED, f"loader error: {exc!r}")
        log = logger.warning if decision.status is LoadStatus.FAILED else logger.info
        log("ptkit: %s %s: %s", decision.library, decision.status.value, decision.reason)
        decisions.append(decision)
    return decisions
