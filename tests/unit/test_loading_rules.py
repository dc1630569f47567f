"""The loader's rules (``ptkit.loading.rules``), case by case: no file is loaded.

No NVIDIA, AMD, Intel or Apple GPU exists on the machines that run this suite, so the
devices below are fakes standing for absent hardware: ``TorchFacts`` as a CUDA, ROCm,
XPU or MPS build of torch would report them (capabilities, target IDs, names and PCI ids
of real products).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ptkit.loading.manifest import parse_manifest
from ptkit.loading.rules import TorchFacts, check_compatibility
from ptkit.loading.switches import RuntimeSwitches
from ptkit.platforms import CpuFacts

GOOD = {
    "schema_version": 1,
    "package": "ptkit",
    "namespace": "ptkit",
    "library": "libptkit_cpu.so",
    "backend": "cpu",
    "variant": "cpu",
    "toolkit": {"name": "gnu", "version": "12.2.0"},
    "targets": {"isa": ["x86-64-v3", "default"]},
    "dropped_targets": [],
    "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "sha256": "0" * 64,
}
P = Path("/pkg/_native/ptkit_cpu.manifest.json")
SASS = ("sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120")
PTX = ("compute_120",)

TORCH_214_CUDA = TorchFacts("2.14.1+cu130", cuda="13.0", hip=None, has_xpu=False, has_mps=False)
TORCH_213_CPU = TorchFacts("2.13.0+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
TORCH_29 = TorchFacts("2.9.1", cuda=None, hip=None, has_xpu=False, has_mps=False)
TORCH_ROCM = TorchFacts("2.14.1+rocm7.14", cuda=None, hip="7.14", has_xpu=False, has_mps=False)
NO_SWITCHES = RuntimeSwitches()


def _manifest(**changes: object):  # type: ignore[no-untyped-def]
    return dataclasses.replace(parse_manifest(GOOD, P), **changes)


@pytest.mark.parametrize(
    ("manifest_changes", "facts", "switches", "expected"),
    [
        ({}, TORCH_214_CUDA, NO_SWITCHES, None),
        ({}, TORCH_213_CPU, NO_SWITCHES, None),
        (
            {},
            TORCH_29,
            NO_SWITCHES,
            "needs torch >= 2.10 (stable ABI target), found 2.9.1; upgrade torch",
        ),
        (
            {"torch_target_version": (3, 0)},
            TORCH_214_CUDA,
            NO_SWITCHES,
            "built for the torch 3.x stable ABI",
        ),
        (
            {"platform": "linux-aarch64"},
            TORCH_214_CUDA,
            NO_SWITCHES,
            "built for linux-aarch64, this machine is linux-x86_64",
        ),
        (
            {"backend": "cuda"},
            TORCH_213_CPU,
            NO_SWITCHES,
            "torch 2.13.0+cpu is not a CUDA build; the cuda library needs one",
        ),
        ({"backend": "cuda"}, TORCH_ROCM, NO_SWITCHES, "is a ROCm build (HIP 7.14)"),
        ({"backend": "hip"}, TORCH_214_CUDA, NO_SWITCHES, "torch 2.14.1+cu130 is not a ROCm build"),
        (
            {"backend": "hip", "toolkit": {"name": "hip", "version": "7.14.0"}},
            TORCH_ROCM,
            NO_SWITCHES,
            None,
        ),
        ({"backend": "xpu"}, TORCH_214_CUDA, NO_SWITCHES, "was built without XPU support"),
        ({"backend": "metal"}, TORCH_214_CUDA, NO_SWITCHES, "was built without MPS support"),
        (
            {},
            TORCH_214_CUDA,
            RuntimeSwitches(frozenset({"cpu"})),
            "switched off by PTKIT_DISABLE_NATIVE",
        ),
        (
            {},
            TORCH_214_CUDA,
            RuntimeSwitches(force_reference=True),
            "switched off by PTKIT_FORCE_REFERENCE=1",
        ),
    ],
)
def test_compatibility_rules(manifest_changes, facts, switches, expected) -> None:  # type: ignore[no-untyped-def]
    reason = check_compatibility(_manifest(**manifest_changes), facts, switches, "linux-x86_64")
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


BASE = {
    "schema_version": 1,
    "package": "ptkit",
    "namespace": "ptkit",
    "dropped_targets": [],
    "torch": {"target_version": "2.13", "built_with": "2.14.1"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "sha256": "0" * 64,
}
HIP = parse_manifest(
    {
        **BASE,
        "library": "libptkit_hip.so",
        "backend": "hip",
        "variant": "rocm7.14",
        "toolkit": {"name": "hip", "version": "7.14.0"},
        "targets": {"gfx": ["gfx942", "gfx950", "gfx1100", "gfx1201"]},
    },
    Path("/pkg/_native/ptkit_hip.manifest.json"),
)
XPU = parse_manifest(
    {
        **BASE,
        "library": "libptkit_xpu.so",
        "backend": "xpu",
        "variant": "xpu",
        "toolkit": {"name": "oneapi", "version": "2025.1.0"},
        "targets": {"xpu": ["pvc", "bmg"]},
    },
    Path("/pkg/_native/ptkit_xpu.manifest.json"),
)
METAL = parse_manifest(
    {
        **BASE,
        "library": "ptkit_metal.metal",
        "backend": "metal",
        "variant": "metal",
        "toolkit": {"name": "metal", "version": "source"},
        "targets": {"metal": ["source"]},
        "platform": "darwin-arm64",
    },
    Path("/pkg/_native/ptkit_metal.manifest.json"),
)

CUDA_TORCH = TorchFacts("2.14.1+cu130", cuda="13.0", hip=None, has_xpu=False, has_mps=False)
ROCM_TORCH = TorchFacts("2.14.1+rocm7.14", cuda=None, hip="7.14.0", has_xpu=False, has_mps=False)
MI300X = dataclasses.replace(ROCM_TORCH, hip_devices=("gfx942:sramecc+:xnack-",) * 8)
MI250X = dataclasses.replace(ROCM_TORCH, hip_devices=("gfx90a:sramecc+:xnack-",))
RX7900 = dataclasses.replace(ROCM_TORCH, hip_devices=("gfx1100",))
ROCM6_MI300X = dataclasses.replace(MI300X, version="2.14.1+rocm6.4", hip="6.4.1")
XPU_TORCH = TorchFacts("2.14.1+xpu", cuda=None, hip=None, has_xpu=True, has_mps=False)
XPU_NO_DEVICE = XPU_TORCH
MAX_1550 = dataclasses.replace(
    XPU_TORCH, xpu_available=True, xpu_devices=(("Intel(R) Data Center GPU Max 1550", 0x0BD5),)
)
ARC_B580 = dataclasses.replace(
    XPU_TORCH, xpu_available=True, xpu_devices=(("Intel(R) Arc(TM) B580 Graphics", 0xE20B),)
)
ARC_A770 = dataclasses.replace(
    XPU_TORCH, xpu_available=True, xpu_devices=(("Intel(R) Arc(TM) A770 Graphics", 0x56A0),)
)
MAC_TORCH = TorchFacts("2.14.1", cuda=None, hip=None, has_xpu=False, has_mps=True)
MAC_M3 = dataclasses.replace(MAC_TORCH, mps_available=True)


@pytest.mark.parametrize(
    ("manifest", "facts", "platform", "expected"),
    [
        # HIP
        (HIP, CUDA_TORCH, "linux-x86_64", "torch 2.14.1+cu130 is not a ROCm build"),
        (HIP, ROCM_TORCH, "linux-x86_64", None),  # no GPU visible: loads, devices none
        (HIP, MI300X, "linux-x86_64", None),
        (HIP, RX7900, "linux-x86_64", None),
        (
            HIP,
            MI250X,
            "linux-x86_64",
            "cuda:0: gfx90a:sramecc+:xnack- is not covered: built for gfx942",
        ),
        (HIP, ROCM6_MI300X, "linux-x86_64", "the HIP major versions differ"),
        (
            dataclasses.replace(HIP, targets={"gfx": ("gfx11-generic",)}),
            dataclasses.replace(ROCM_TORCH, hip_devices=("gfx1101",)),
            "linux-x86_64",
            None,
        ),
        (
            dataclasses.replace(HIP, torch_target_version=(2, 13)),
            dataclasses.replace(MI300X, version="2.12.0+rocm7.14"),
            "linux-x86_64",
            "needs torch >= 2.13",
        ),
        # XPU
        (XPU, CUDA_TORCH, "linux-x86_64", "was built without XPU support"),
        (XPU, XPU_NO_DEVICE, "linux-x86_64", "no XPU device is available"),
        (XPU, MAX_1550, "linux-x86_64", None),
        (XPU, ARC_B580, "linux-x86_64", None),
        (
            XPU,
            ARC_A770,
            "linux-x86_64",
            "xpu:0: Intel(R) Arc(TM) A770 Graphics (dg2) is not covered",
        ),
        (
            dataclasses.replace(XPU, targets={"xpu": ("pvc", "bmg", "spir64")}),
            ARC_A770,
            "linux-x86_64",
            None,
        ),
        # Metal
        (METAL, CUDA_TORCH, "darwin-arm64", "was built without MPS support"),
        (METAL, MAC_TORCH, "darwin-arm64", "no MPS device is available"),
        (METAL, MAC_M3, "darwin-arm64", None),
        (METAL, MAC_M3, "linux-x86_64", "built for darwin-arm64, this machine is linux-x86_64"),
    ],
)
def test_accelerator_load_decisions(manifest, facts, platform, expected) -> None:  # type: ignore[no-untyped-def]
    reason = check_compatibility(manifest, facts, RuntimeSwitches(), platform)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


CUDA_MANIFEST = {
    "schema_version": 1,
    "package": "ptkit",
    "namespace": "ptkit",
    "library": "libptkit_cuda.so",
    "backend": "cuda",
    "variant": "cu13",
    "toolkit": {"name": "cuda", "version": "13.5.37"},
    "targets": {"sass": list(SASS), "ptx": list(PTX)},
    "dropped_targets": [],
    "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "sha256": "0" * 64,
}


@pytest.mark.parametrize(
    ("devices", "driver", "torch_cuda", "expected"),
    [
        ((), None, "13.0", None),  # no GPU: loads (host code only); CUDA tensors cannot exist
        (((9, 0),), (13, 0), "13.0", None),
        (((9, 0), (12, 1)), (13, 5), "13.0", None),
        (((9, 0), (7, 5)), (13, 5), "13.0", "cuda:1: sm_75 is not covered"),
        (
            ((8, 9),),
            (13, 5),
            "13.0",
            "cuda:0: sm_89 is not covered: built for sm_90…sm_120, PTX compute_120",
        ),
        (((9, 0),), (13, 0), "12.8", "built with CUDA 13.5.37, torch 2.14.1+cu130 uses CUDA 12.8"),
    ],
)
def test_cuda_library_load_decision(devices, driver, torch_cuda, expected) -> None:
    facts = dataclasses.replace(
        CUDA_TORCH, cuda=torch_cuda, cuda_devices=devices, cuda_driver=driver
    )
    manifest = parse_manifest(CUDA_MANIFEST, Path("/p/ptkit_cuda.manifest.json"))
    reason = check_compatibility(manifest, facts, RuntimeSwitches(), "linux-x86_64")
    if expected is None:
        assert reason is None
    else:
        assert reason is not None
        assert expected in reason


def test_cuda_library_needs_a_cuda_torch() -> None:
    facts = TorchFacts("2.13.0+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
    manifest = parse_manifest(CUDA_MANIFEST, Path("/p/ptkit_cuda.manifest.json"))
    reason = check_compatibility(manifest, facts, RuntimeSwitches(), "linux-x86_64")
    assert reason == "torch 2.13.0+cpu is not a CUDA build; the cuda library needs one"


# --- the torch ABI mode (ptkit.torch_abi) and the CPU ISA a library requires -----------

CLASSIC = {**GOOD, "torch": {"target_version": "2.14", "built_with": "2.14.1+cu130", "abi": "torch", "cxx11_abi": True}}  # fmt: skip
TORCH_214_CPU = TorchFacts("2.14.0+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
SAPPHIRE_RAPIDS = CpuFacts(
    "x86_64",
    frozenset(
        [
            "avx",
            "avx2",
            "fma",
            "f16c",
            "bmi1",
            "bmi2",
            "abm",
            "movbe",
            "xsave",
            "cx16",
            "lahf_lm",
            "popcnt",
            "pni",
            "sse4_1",
            "sse4_2",
            "ssse3",
            "avx512f",
            "avx512bw",
            "avx512cd",
            "avx512dq",
            "avx512vl",
            "avx512_bf16",
            "amx_tile",
            "amx_bf16",
        ]
    ),
    "/proc/cpuinfo",
)
ICE_LAKE = CpuFacts("x86_64", SAPPHIRE_RAPIDS.features - {"amx_tile", "amx_bf16"}, "/proc/cpuinfo")  # type: ignore[operator]


def test_a_torch_mode_library_loads_into_its_torch_minor_only() -> None:
    classic = parse_manifest(CLASSIC, P)
    assert (classic.torch_abi, classic.torch_cxx11_abi) == ("torch", True)
    assert check_compatibility(classic, TORCH_214_CUDA, NO_SWITCHES, "linux-x86_64") is None
    # Another patch release or another build of the same minor: the same C++ API.
    assert check_compatibility(classic, TORCH_214_CPU, NO_SWITCHES, "linux-x86_64") is None
    assert check_compatibility(classic, TORCH_213_CPU, NO_SWITCHES, "linux-x86_64") == (
        "built for torch 2.14 (classic C++ ABI); this is torch 2.13: install the build for "
        "torch 2.13 from the index, or rebuild"
    )


def test_a_torch_mode_library_is_not_loaded_into_a_newer_torch_either() -> None:
    """The stable rule would take any newer torch; the classic C++ API promises nothing."""
    built_213 = {"target_version": "2.13", "built_with": "2.13.0+cpu", "abi": "torch"}
    classic = parse_manifest({**CLASSIC, "torch": built_213}, P)
    assert "built for torch 2.13 (classic C++ ABI); this is torch 2.14" in (
        check_compatibility(classic, TORCH_214_CUDA, NO_SWITCHES, "linux-x86_64") or ""
    )


def test_a_torch_mode_library_needs_the_same_cxx11_abi() -> None:
    classic = parse_manifest(CLASSIC, P)
    old_abi = dataclasses.replace(TORCH_214_CUDA, cxx11_abi=False)
    assert check_compatibility(classic, old_abi, NO_SWITCHES, "linux-x86_64") == (
        "built with _GLIBCXX_USE_CXX11_ABI=1 (classic C++ ABI), torch 2.14.1+cu130 uses "
        "_GLIBCXX_USE_CXX11_ABI=0: its C++ symbols differ; install the build for this torch, "
        "or rebuild against it"
    )
    # Unknown on either side (a torch that does not say): the minor decides.
    unknown = dataclasses.replace(TORCH_214_CUDA, cxx11_abi=None)
    assert check_compatibility(classic, unknown, NO_SWITCHES, "linux-x86_64") is None


def test_the_loaded_reason_says_which_abi(tmp_path: Path) -> None:
    """Rules 1-5 pass for a library file that matches its manifest (this Python's own
    executable stands in for an ELF file of this machine)."""
    import shutil
    import sys

    from ptkit.loading.manifest import file_sha256
    from ptkit.loading.rules import LoadStatus, decide_without_loading
    from ptkit.platforms import manifest_platform

    library = tmp_path / "libptkit_cpu.so"
    shutil.copy(Path(sys.executable).resolve(), library)
    here = {"platform": manifest_platform(), "sha256": file_sha256(library)}
    path = tmp_path / "ptkit_cpu.manifest.json"
    stable = decide_without_loading(
        parse_manifest({**GOOD, **here}, path), TORCH_214_CUDA, NO_SWITCHES
    )
    classic = decide_without_loading(
        parse_manifest({**CLASSIC, **here}, path), TORCH_214_CUDA, NO_SWITCHES
    )
    assert stable.status is classic.status is LoadStatus.LOADED, (stable.reason, classic.reason)
    assert stable.reason == "cpu variant, built with torch 2.14.1+cu130, stable ABI target 2.10"
    assert classic.reason == (
        "cpu variant, built with torch 2.14.1+cu130, classic C++ ABI, torch 2.14 only"
    )


@pytest.mark.parametrize(
    ("requires", "cpu", "expected"),
    [
        ((), ICE_LAKE, None),
        (("x86-64-v4", "avx512-bf16"), ICE_LAKE, None),
        (("amx-bf16",), SAPPHIRE_RAPIDS, None),
        (
            ("avx512-bf16", "amx-bf16"),
            ICE_LAKE,
            "requires the CPU ISA level amx-bf16 (REQUIRES_ISA), which this CPU lacks (no "
            "amx_tile, amx_bf16 in /proc/cpuinfo; Intel Sapphire Rapids or newer (Xeon) have "
            "it): run on such a CPU, or ship a build without REQUIRES_ISA amx-bf16 for this one",
        ),
        (
            ("avx512-bf16",),
            CpuFacts("x86_64", None, "ptkit does not read the CPU's features on macos yet"),
            "requires the CPU ISA level avx512-bf16 and ptkit does not read the CPU's features "
            "on macos yet, so whether this CPU has it is unknown",
        ),
        (
            ("sve",),
            ICE_LAKE,
            "REQUIRES_ISA sve: not a CPU ISA level of x86_64; known: x86-64-v2",
        ),
    ],
)
def test_a_library_that_requires_an_isa_level_is_skipped_on_a_cpu_without_it(
    requires: tuple[str, ...], cpu: CpuFacts, expected: str | None
) -> None:
    manifest = _manifest(requires_isa=requires)
    reason = check_compatibility(manifest, TORCH_214_CUDA, NO_SWITCHES, "linux-x86_64", cpu)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


def test_this_machines_cpu_is_read_when_none_is_given() -> None:
    """The loader passes no CpuFacts: ptkit.platforms reads this machine's (Linux: cpuinfo)."""
    from ptkit.platforms import this_cpu

    cpu = this_cpu()
    manifest = _manifest(requires_isa=("x86-64-v2",))
    expected = check_compatibility(manifest, TORCH_214_CUDA, NO_SWITCHES, "linux-x86_64", cpu)
    assert check_compatibility(manifest, TORCH_214_CUDA, NO_SWITCHES, "linux-x86_64") == expected
