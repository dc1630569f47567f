"""PTK309: the doctor lists an installed package's ops that nothing serves on a device
type (its routes, predicted without torch by ``ptkit.loading.routes``)."""

from __future__ import annotations

from ptkit.doctor.checks import run_checks
from ptkit.doctor.model import Facts, PackageFacts, RouteFacts, Severity

WHY = (
    "x::gelu has no CPU kernel: libx_cpu.so defines it; libx_cuda.so registers it for CUDA "
    "only; the package has no reference for it, so nothing serves CPU tensors"
)


def _package(*routes: RouteFacts) -> PackageFacts:
    return PackageFacts("x", "1.0+cu13", "cu13", "/site/x", (), routes, "x")


def test_unavailable_ops_are_listed_once_per_op_with_their_reason() -> None:
    package = _package(
        RouteFacts("gelu", "cpu", "unavailable", None, WHY),
        RouteFacts("gelu", "cuda", "native", "libx_cuda.so", "loaded"),
        RouteFacts("scale", "cpu", "native", "libx_cpu.so", "loaded"),
        RouteFacts("relu", "cpu", "unavailable", None, "x::relu …"),
        RouteFacts("relu", "xpu", "unavailable", None, "x::relu on xpu …"),
    )
    findings, _ = run_checks(Facts(packages=(package,)), select=["PTK309"])
    assert [(f.id, f.severity) for f in findings] == [("PTK309", Severity.INFO)] * 2
    assert findings[0].message == (
        f"x 1.0+cu13, variant cu13: gelu has no implementation on cpu: {WHY}"
    )
    assert (
        findings[1].message
        == "x 1.0+cu13, variant cu13: relu has no implementation on cpu, xpu: x::relu …"
    )


def test_a_package_whose_ops_are_all_served_has_no_finding() -> None:
    package = _package(RouteFacts("scale", "cpu", "reference", None, "its reference"))
    assert run_checks(Facts(packages=(package,)), select=["PTK309"])[0] == []
