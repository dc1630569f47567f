"""``ptkit.loading.routes`` for every project shape, without torch: which implementation
serves each (op, device type), and the reason where nothing does. The dispatcher's
answers are given as functions, as ``ptkit doctor`` gives its predictions (and the
runtime torch's); ``tests/integration/test_shapes_*.py`` ask the real dispatcher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptkit.loading.manifest import parse_manifest
from ptkit.loading.routes import (
    OtherKernel,
    enable_fix,
    predicted_has_kernel,
    predicted_has_schema,
    routes,
)
from ptkit.loading.rules import LoadDecision, LoadStatus, TorchFacts
from ptkit.loading.switches import RuntimeSwitches

# A CUDA build of torch (no device needed): rows for cpu and cuda.
TORCH = TorchFacts("2.14.1+cu130", cuda="13.0", hip=None, has_xpu=False, has_mps=False)
SCHEMAS = {
    "x::scale": "x::scale(Tensor t, float a) -> Tensor",
    "x::gelu": "x::gelu(Tensor t) -> Tensor",
}


def _decision(
    library: str, backend: str, status: LoadStatus, reason: str, **block: Any
) -> LoadDecision:
    data = {
        "schema_version": 1, "package": "x", "namespace": "x", "library": library,
        "backend": backend, "variant": "cu13", "toolkit": {}, "targets": {},
        "dropped_targets": [], "torch": {"target_version": "2.10", "built_with": "2.14.1"},
        "platform": "linux-x86_64", "ops": block.pop("ops"), "sha256": "0" * 64,
    }  # fmt: skip
    if block:
        data["registrations"] = {"namespaces": [], "schemas": {}, "kernels": {}, **block}
    path = Path(f"/x/_native/{library}.manifest.json")
    return LoadDecision(path, status, reason, parse_manifest(data, path))


def _cpu(status: LoadStatus = LoadStatus.LOADED, reason: str = "cu13 variant") -> LoadDecision:
    return _decision(
        "libx_cpu.so", "cpu", status, reason, ops={"scale": ["float32"]},
        namespaces=["x"], schemas=SCHEMAS, kernels={"x::scale": ["CPU"]},
    )  # fmt: skip


def _cuda(status: LoadStatus = LoadStatus.LOADED, reason: str = "cu13 variant") -> LoadDecision:
    return _decision(
        "libx_cuda.so", "cuda", status, reason, ops={"scale": ["float32"], "gelu": ["float32"]},
        kernels={"x::scale": ["CUDA"], "x::gelu": ["CUDA"]},
    )  # fmt: skip


def _predicted(
    decisions: list[LoadDecision], switches: RuntimeSwitches | None = None
) -> dict[str, tuple[str, str]]:
    rows = routes(
        ["scale", "gelu"], "x", decisions, TORCH, switches or RuntimeSwitches(),
        has_kernel=predicted_has_kernel("x", decisions),
    )  # fmt: skip
    return {f"{r.op}/{r.device_type}": (r.implementation, r.reason) for r in rows}


def test_a_cuda_only_op_with_schemas_in_cpp_is_unavailable_on_cpu() -> None:
    rows = _predicted([_cpu(), _cuda()])
    assert rows["scale/cpu"][0] == rows["scale/cuda"][0] == rows["gelu/cuda"][0] == "native"
    assert rows["gelu/cpu"] == (
        "unavailable",
        "x::gelu has no CPU kernel: libx_cpu.so defines it; libx_cuda.so registers it for CUDA "
        "only; the package has no reference for it, so nothing serves CPU tensors",
    )


def test_without_the_gpu_library_the_reason_says_which_variant_to_install() -> None:
    rows = _predicted([_cpu()])
    assert rows["gelu/cuda"] == (
        "unavailable",
        "x::gelu has no CUDA kernel: libx_cpu.so defines it; the package has no reference for "
        "it, so nothing serves CUDA tensors (no native cuda or hip library in this install "
        "(variant cu13); install the variant for this accelerator from its index)",
    )
    assert rows["scale/cuda"][1].startswith(
        "x::scale has no CUDA kernel: libx_cpu.so defines it and registers it for CPU only;"
    )


def test_a_skipped_gpu_library_is_named_with_its_reason() -> None:
    rows = _predicted([_cpu(), _cuda(LoadStatus.SKIPPED, "no NVIDIA GPU that sm_90 runs on")])
    assert rows["gelu/cuda"] == (
        "unavailable",
        "x::gelu has no CUDA kernel: libx_cpu.so defines it; libx_cuda.so registers it for CUDA "
        "(skipped here: no NVIDIA GPU that sm_90 runs on); the package has no reference for it, "
        "so nothing serves CUDA tensors",
    )


def test_a_switched_off_defining_library_makes_its_ops_unavailable_with_the_fix() -> None:
    switches = RuntimeSwitches.from_environ({"PTKIT_FORCE_REFERENCE": "1"})
    reason = "native code switched off by PTKIT_FORCE_REFERENCE=1"
    rows = _predicted(
        [_cpu(LoadStatus.SKIPPED, reason), _cuda(LoadStatus.SKIPPED, reason)], switches
    )
    assert set(rows.values()) == {
        (
            "unavailable",
            f"x::{op} is defined only in libx_cpu.so, not loaded: {reason}; the package has no "
            f"reference for it, so nothing serves {key} tensors. Fix: unset "
            "PTKIT_FORCE_REFERENCE (or set it to 0)",
        )
        for op in ("scale", "gelu")
        for key in ("CPU", "CUDA")
    }


def test_schemas_defined_in_python_are_predicted_to_have_the_reference() -> None:
    """ptkit's own shape: the manifests record kernels only, the schemas are Python's."""
    kernels_only = _decision(
        "libx_cpu.so", "cpu", LoadStatus.SKIPPED, "native cpu code switched off by "
        "PTKIT_DISABLE_NATIVE", ops={"scale": ["float32"]}, kernels={"x::scale": ["CPU"]},
    )  # fmt: skip
    rows = _predicted([kernels_only])
    assert rows["scale/cpu"] == (
        "reference",
        "libx_cpu.so skipped: native cpu code switched off by PTKIT_DISABLE_NATIVE",
    )
    assert predicted_has_schema([kernels_only])("x::scale")


def test_the_dispatchers_answers_decide_reference_or_native() -> None:
    """As the runtime asks torch: a kernel from Python, a composite kernel, a kernel from
    a library loaded outside ptkit, and nothing at all."""
    decisions = [_cpu()]
    others = {
        ("x::gelu", "CPU"): OtherKernel("reference", "reference: a CPU kernel from Python (x/ref.py:3)"),
        ("x::gelu", "CUDA"): OtherKernel("reference", "reference: its CompositeExplicitAutograd kernel (x/ref.py:3)"),
        ("x::scale", "CUDA"): OtherKernel("native", "registered at other.cpp:9"),
    }  # fmt: skip
    exact = {("x::scale", "CPU"), ("x::gelu", "CPU"), ("x::scale", "CUDA")}
    rows = routes(
        ["scale", "gelu", "nothing"], "x", decisions, TORCH, RuntimeSwitches(),
        has_kernel=lambda op, key: (op, key) in exact,
        other_kernel=lambda op, key: others.get((op, key)),
        has_schema=lambda op: op != "x::nothing",
    )  # fmt: skip
    got = {f"{r.op}/{r.device_type}": (r.implementation, r.library, r.reason) for r in rows}
    assert got["scale/cpu"][:2] == ("native", "libx_cpu.so")
    assert got["gelu/cpu"] == (
        "reference",
        None,
        "libx_cpu.so is loaded but was built without gelu (its manifest lists scale); reference: "
        "a CPU kernel from Python (x/ref.py:3)",
    )
    assert got["gelu/cuda"][0] == "reference"
    assert got["gelu/cuda"][2].endswith(
        "reference: its CompositeExplicitAutograd kernel (x/ref.py:3)"
    )
    assert got["scale/cuda"] == (
        "native",
        None,
        "a CUDA kernel registered outside ptkit's loader; registered at other.cpp:9",
    )
    assert got["nothing/cpu"][0] == "unavailable"
    assert got["nothing/cpu"][2].startswith("x::nothing is not registered (")


def test_the_fix_for_a_library_that_did_not_load() -> None:
    off = RuntimeSwitches.from_environ({"PTKIT_DISABLE_NATIVE": "cuda"})
    assert (
        enable_fix(_cuda(LoadStatus.SKIPPED, "off"), off) == "take cuda out of PTKIT_DISABLE_NATIVE"
    )
    assert enable_fix(_cpu(LoadStatus.FAILED, "sha256 differs"), off).startswith("reinstall")
    refused = _cpu(LoadStatus.FAILED, "refused before loading: … Fix: define it once")
    assert enable_fix(refused, off) == "see the reason above"
    assert enable_fix(_cuda(LoadStatus.SKIPPED, "no GPU"), RuntimeSwitches()).startswith(
        "install the package's build for this machine"
    )
