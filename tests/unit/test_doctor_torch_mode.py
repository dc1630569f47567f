"""PTK109: the doctor says, without importing torch, when an installed torch-mode build
(one wheel per torch minor, ``+cpu.torch2.14``) is for another torch than this one.

Hand-made facts in, findings out; the real installs and the doctor run against them are
in tests/integration/test_torch_mode_release.py."""

from __future__ import annotations

import dataclasses

from ptkit.doctor.checks import run_checks
from ptkit.doctor.model import Facts, LibraryFacts, PackageFacts, TorchInstall

TORCH_213 = TorchInstall(
    location="/venv/site-packages/torch",
    version="2.13.0+cpu",
    cuda=None,
    hip=None,
    xpu=False,
    cxx11_abi=True,
    compile_supported=True,
    compile_reason="supported",
    cuda_runtimes=(),
    problems=(),
)
LIBRARY = LibraryFacts(
    library="libtorchmode_ops_cpu.so",
    backend="cpu",
    variant="cpu",
    targets={"isa": ("default",)},
    toolkit="gnu 12.2.0",
    torch_built_with="2.14.1+cu130",
    torch_target="2.10",
    status="skipped",
    reason="built for torch 2.14 (torch's C++ API); this is torch 2.13",
)


def package(version: str, *libraries: LibraryFacts) -> PackageFacts:
    return PackageFacts(
        "torchmode_ops",
        version,
        "cpu",
        "/venv/site-packages/torchmode_ops",
        libraries,
        (),
        distribution="torchmode-ops",
    )


def findings(*packages: PackageFacts, torch: TorchInstall = TORCH_213) -> list[tuple[str, str]]:
    found, skipped = run_checks(Facts(torch=torch, packages=packages), select=["PTK109"])
    assert not skipped
    return [(f.message, f.fix) for f in found]


def test_a_build_for_another_torch_minor_is_an_error_with_the_build_to_install() -> None:
    ((message, fix),) = findings(package("0.3.0+cpu.torch2.14", LIBRARY))
    assert message == (
        "torchmode-ops 0.3.0+cpu.torch2.14 is the build for torch 2.14, built with torch "
        "2.14.1+cu130 (it requires torch>=2.14,<2.15), but this is torch 2.13.0+cpu: the "
        "loader skips libtorchmode_ops_cpu.so: built for torch 2.14 (torch's C++ API); this "
        "is torch 2.13"
    )
    assert fix.startswith(
        "install its build for torch 2.13: pip install --force-reinstall --no-deps "
        "'torchmode-ops==0.3.0+cpu.torch2.13' --index-url <its index>/cpu/simple"
    )
    assert fix.endswith("or go back to torch 2.14: pip install 'torch==2.14.*'")


def test_the_loaders_decision_is_reported_as_it_is() -> None:
    loaded = dataclasses.replace(LIBRARY, status="loaded", reason="default kernels")
    ((message, _),) = findings(package("0.3.0+cpu.torch2.14", loaded))
    assert message.endswith("but this is torch 2.13.0+cpu: its libraries still load here")


def test_the_build_for_this_torch_and_stable_builds_are_fine() -> None:
    assert findings(package("0.3.0+cpu.torch2.13", LIBRARY)) == []
    assert findings(package("0.1.0+cpu", LIBRARY)) == []
    assert findings(package("0.1.0", LIBRARY)) == []


def test_without_torch_the_check_leaves_it_to_ptk101() -> None:
    no_torch = dataclasses.replace(TORCH_213, location=None, version=None)
    assert findings(package("0.3.0+cpu.torch2.14", LIBRARY), torch=no_torch) == []
