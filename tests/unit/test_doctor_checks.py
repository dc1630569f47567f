"""``ptkit doctor``'s checks, report and JSON: hand-made ``Facts`` in, findings out.

Each check is shown to fire, to stay quiet on a healthy environment, and to be skipped
(not crashed) when a fact it needs is missing. The report is rendered with and without
colour, and the JSON document is validated against ``report.schema.json``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shlex
from collections.abc import Iterator

import jsonschema
import pytest

from ptkit.doctor import exit_code_for, run_doctor
from ptkit.doctor.checks import (
    CHECKS,
    Problem,
    UnknownCheckError,
    check,
    resolve_ids,
    run_checks,
)
from ptkit.doctor.model import (
    Facts,
    LibraryFacts,
    OsFacts,
    PackageFacts,
    ProfileFacts,
    PythonFacts,
    RouteFacts,
    Severity,
    SmokeFacts,
    SmokePackage,
    SmokeRow,
    ToolchainFacts,
    TorchInstall,
)
from ptkit.doctor.report import SCHEMA_PATH, json_document, render_text, use_colour
from ptkit.hardware import AmdGpu, AppleGpu, IntelGpu, Machine, NvidiaGpu

PYTHON = PythonFacts("3.11.7", "cpython", "/usr/bin/python3.11", False, None)
OS = OsFacts(
    "Linux",
    "x86_64",
    "6.1.0-28-amd64",
    "Debian GNU/Linux 12",
    "glibc 2.36",
    "manylinux_2_36_x86_64",
)
TORCH_CU = TorchInstall(
    location="/venv/site-packages/torch",
    version="2.14.1+cu130",
    cuda="13.0",
    hip=None,
    xpu=False,
    cxx11_abi=True,
    compile_supported=True,
    compile_reason="CPython 3.11.7 with torch 2.14.1: supported",
    cuda_runtimes=("/venv/site-packages/nvidia/cu13/lib/libcudart.so.13",),
    problems=(),
)
TORCH_CPU = dataclasses.replace(TORCH_CU, version="2.14.1+cpu", cuda=None, cuda_runtimes=())
TORCH_ROCM = dataclasses.replace(TORCH_CU, version="2.14.1+rocm7.14", cuda=None, hip="7.14.0")
NO_TORCH = TorchInstall(None, None, None, None, False, None, None, None, (), ())
NO_GPU = Machine("Linux", "x86_64", None, None, None)
H200 = NvidiaGpu(0, "NVIDIA H200", "0000:18:00.0", 0x2335, (9, 0), "pci-id table")
H200_MACHINE = Machine(
    "Linux",
    "x86_64",
    "580.65.06",
    (13, 0),
    "driver table",
    nvidia=(H200, dataclasses.replace(H200, index=1, pci_bus_id="0000:2a:00.0")),
)
RTX4090_MACHINE = dataclasses.replace(
    H200_MACHINE,
    nvidia=(NvidiaGpu(0, "NVIDIA GeForce RTX 4090", None, 0x2684, (8, 9), "pci-id table"),),
)
MI300X_MACHINE = Machine(
    "Linux",
    "x86_64",
    None,
    None,
    None,
    amd=(AmdGpu(1, "MI300X", "gfx942", "0000:0c:00.0", 0x74A1),),
)
ARC_MACHINE = Machine(
    "Linux",
    "x86_64",
    None,
    None,
    None,
    intel=(IntelGpu("0000:03:00.0", 0xE20B, "Intel Arc B580", "bmg", "xe"),),
)
APPLE_MACHINE = Machine("Darwin", "arm64", None, None, None, apple=(AppleGpu("Apple M2 Pro"),))


def cpu_library(**changes: object) -> LibraryFacts:
    lib = LibraryFacts(
        library="libptkit_cpu.so",
        backend="cpu",
        variant="cpu",
        targets={"isa": ("x86-64-v3", "default")},
        toolkit="gnu 12.2.0",
        torch_built_with="2.14.1+cu130",
        torch_target="2.10",
        status="loaded",
        reason="x86-64-v3 kernels",
    )
    return dataclasses.replace(lib, **changes)  # type: ignore[arg-type]


CUDA_LIB = cpu_library(
    library="libptkit_cuda.so",
    backend="cuda",
    variant="cu13",
    targets={
        "sass": ("sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120"),
        "ptx": ("compute_120",),
    },
    toolkit="cuda 13.5.37",
)
HIP_LIB = cpu_library(
    library="libptkit_hip.so",
    backend="hip",
    variant="rocm7.14",
    targets={"gfx": ("gfx942", "gfx950")},
    toolkit="rocm 7.14.0",
)


def ptkit_package(*libraries: LibraryFacts, variant: str = "cpu") -> PackageFacts:
    routes = tuple(
        RouteFacts(op, "cpu", "native", "libptkit_cpu.so", "loaded")
        for op in ("rms_norm", "fused_linear", "silu_and_mul")
    )
    return PackageFacts(
        "ptkit_ops",
        f"0.1.0+{variant}",
        variant,
        "/venv/site-packages/ptkit_ops",
        libraries,
        routes,
        distribution="ptkit-ops",
    )


CPU_PTKIT = ptkit_package(cpu_library())
CU13_PTKIT = ptkit_package(cpu_library(variant="cu13"), CUDA_LIB, variant="cu13")
PROFILE = ProfileFacts("eager (no CUDA or XPU device)", "gloo (CPU only)", (), ())

HEALTHY = Facts(
    python=PYTHON,
    os=OS,
    torch=TORCH_CU,
    machine=NO_GPU,
    distributions={"torch": "2.14.1+cu130", "click": "8.1.7"},
    packages=(CPU_PTKIT,),
    profile=PROFILE,
    probe_seconds={"python": 0.001, "torch": 0.01},
)

SMOKE_OK = SmokeFacts(
    torch_imported=True,
    error=None,
    seconds=2.5,
    rows=(SmokeRow("rms_norm", "cpu", "float32", "native", 0.0, 1e-5, True, None),),
    torch_version="2.14.1+cu130",
    import_seconds=1.5,
    packages=(SmokePackage("ptkit_ops", 3, ()),),
)


def facts(**changes: object) -> Facts:
    return dataclasses.replace(HEALTHY, **changes)  # type: ignore[arg-type]


def ids(f: Facts, **kwargs: object) -> list[str]:
    findings, _ = run_checks(f, **kwargs)  # type: ignore[arg-type]
    return sorted(finding.id for finding in findings)


def only(f: Facts, check: str) -> list[str]:
    """The messages of one check's findings (``--select`` it)."""
    findings, skipped = run_checks(f, select=[check])
    assert not skipped, skipped
    assert all(x.message and x.fix and "\n" not in x.message + x.fix for x in findings)
    return [x.message for x in findings]


# --- the registry ------------------------------------------------------------------------


def test_ids_are_stable_unique_and_grouped():
    seen = [c.id for c in CHECKS]
    assert seen == sorted(set(seen))
    assert len({c.name for c in CHECKS}) == len(CHECKS)
    for declared in CHECKS:
        assert re.fullmatch(r"PTK[12349]\d\d", declared.id), declared.id
        assert re.fullmatch(r"[a-z0-9-]+", declared.name)
        facts_fields = {f.name for f in dataclasses.fields(Facts)}
        assert set(declared.needs) | set(declared.uses) <= facts_fields
        assert declared.summary and declared.fix
        assert "\n" not in declared.summary + declared.fix


def test_a_check_is_declared_with_its_facts_by_name():
    @check("PTK199", "example", Severity.INFO, summary="an example", fix="nothing")
    def example(torch: TorchInstall, python: PythonFacts | None = None) -> Iterator[Problem]:
        yield Problem(f"{torch.version} on {python.version if python else '?'}")

    assert (example.needs, example.uses) == (("torch",), ("python",))
    assert example.missing(Facts()) == "torch"
    (finding,) = example.run(HEALTHY)
    assert (finding.id, finding.severity, finding.fix) == ("PTK199", Severity.INFO, "nothing")
    assert finding.message == "2.14.1+cu130 on 3.11.7"
    with pytest.raises(TypeError, match="parameter 'facts' is not a fact"):
        check("PTK198", "bad", Severity.INFO, summary="s", fix="f")(lambda facts: ())


def test_a_healthy_environment_has_no_findings():
    findings, skipped = run_checks(HEALTHY)
    assert findings == []
    assert {check for check, _ in skipped} == {"PTK103", "PTK108", "PTK305", "PTK306", "PTK307"}
    assert all(missing == "smoke" for _, missing in skipped)
    assert exit_code_for(findings) == 0


def test_every_check_is_skipped_not_crashed_without_facts():
    findings, skipped = run_checks(Facts())
    assert findings == []
    # probe_problems is always there (empty when every probe worked).
    needing = {c.id: c.needs[0] for c in CHECKS if c.needs and c.needs[0] != "probe_problems"}
    assert dict(skipped) == needing


def test_select_and_ignore_by_id_name_and_comma_list():
    assert resolve_ids(["ptk101, torch-broken", "PTK202"]) == ("PTK101", "PTK102", "PTK202")
    f = facts(torch=NO_TORCH, machine=H200_MACHINE)
    assert ids(f) == ["PTK101", "PTK202", "PTK308"]
    assert ids(f, select=["PTK101"]) == ["PTK101"]
    assert "PTK101" not in ids(f, ignore=["torch-missing"])
    _, skipped = run_checks(Facts(), select=["PTK104"])
    assert skipped == [("PTK104", "torch")]


@pytest.mark.parametrize(
    ("given", "suggestion"), [("PTK2020", "PTK202"), ("torch-mising", "torch-missing")]
)
def test_unknown_ids_are_an_error_with_did_you_mean(given, suggestion):
    with pytest.raises(UnknownCheckError) as info:
        run_checks(HEALTHY, select=[given])
    message = str(info.value)
    assert f"did you mean {suggestion}?" in message
    assert "PTK101" in message and "PTK902" in message  # the valid ones are listed
    with pytest.raises(UnknownCheckError):
        run_checks(HEALTHY, ignore=["PTK999"])


# --- 1xx ----------------------------------------------------------------------------------


def test_torch_missing():
    assert only(facts(torch=NO_TORCH), "PTK101") == [
        "torch is not installed for /usr/bin/python3.11: the packages built with ptkit need "
        "it (their import fails)"
    ]
    assert only(HEALTHY, "PTK101") == []
    # Without torch, the checks about torch's build stay quiet (PTK202 and PTK308 are
    # about ptkit-ops).
    assert ids(facts(torch=NO_TORCH, machine=H200_MACHINE)) == ["PTK101", "PTK202", "PTK308"]


def test_torch_broken():
    broken = dataclasses.replace(
        TORCH_CU, version=None, problems=("torch/version.py is missing: a broken or fake torch",)
    )
    (message,) = only(facts(torch=broken), "PTK102")
    assert "/venv/site-packages/torch looks broken" in message and "version.py" in message
    assert only(HEALTHY, "PTK102") == []


def test_torch_import_fails_in_the_smoke_child():
    failed = SmokeFacts(False, "import torch: RuntimeError: this torch is broken", 0.2, ())
    (message,) = only(facts(smoke=failed), "PTK103")
    assert "RuntimeError: this torch is broken" in message
    assert only(facts(smoke=SMOKE_OK), "PTK103") == []


def test_torch_cpu_build_on_an_nvidia_machine():
    (message,) = only(facts(torch=TORCH_CPU, machine=H200_MACHINE), "PTK104")
    assert "2.14.1+cpu is a CPU build" in message and "2 NVIDIA GPU(s) (NVIDIA H200)" in message
    findings, _ = run_checks(facts(torch=TORCH_CPU, machine=H200_MACHINE), select=["PTK104"])
    assert "download.pytorch.org/whl/cu130" in findings[0].fix  # ptkit select's torch index
    assert only(facts(machine=H200_MACHINE), "PTK104") == []  # a CUDA torch
    assert only(facts(torch=TORCH_CPU), "PTK104") == []  # no GPU


def test_torch_without_rocm_on_an_amd_machine():
    (message,) = only(facts(torch=TORCH_CPU, machine=MI300X_MACHINE), "PTK105")
    assert "MI300X (gfx942)" in message and "CPU build, not a ROCm build" in message
    assert only(facts(torch=TORCH_ROCM, machine=MI300X_MACHINE), "PTK105") == []


def test_torch_compile_unavailable():
    refused = dataclasses.replace(
        TORCH_CU, compile_supported=False, compile_reason="Python 3.15 is not supported"
    )
    (message,) = only(facts(torch=refused), "PTK106")
    assert "Python 3.15 is not supported" in message
    assert only(HEALTHY, "PTK106") == []
    unknown = dataclasses.replace(TORCH_CU, compile_supported=None)
    assert only(facts(torch=unknown), "PTK106") == []


def test_free_threaded_python_with_the_gil_re_enabled():
    ft = PythonFacts("3.14.0", "cpython", "/usr/bin/python3.14t", True, True)
    (message,) = only(facts(python=ft), "PTK107")
    assert "free-threaded but the GIL is enabled" in message
    assert only(facts(python=dataclasses.replace(ft, gil_enabled=False)), "PTK107") == []
    assert only(HEALTHY, "PTK107") == []  # a GIL build: nothing to say


def test_the_gil_re_enabled_by_importing_torch():
    ft = PythonFacts("3.14.0", "cpython", "/usr/bin/python3.14t", True, False)
    smoke = dataclasses.replace(SMOKE_OK, gil_enabled=True)
    assert len(only(facts(python=ft, smoke=smoke), "PTK108")) == 1
    assert only(facts(python=ft, smoke=SMOKE_OK), "PTK108") == []
    assert only(facts(python=PYTHON, smoke=smoke), "PTK108") == []


# --- 2xx ----------------------------------------------------------------------------------


def test_nvidia_driver_older_than_torchs_cuda():
    old = dataclasses.replace(H200_MACHINE, nvidia_driver="570.86.10", cuda_driver_version=(12, 8))
    (message,) = only(facts(machine=old), "PTK201")
    # ptkit.backends.cuda.driver_problem's words, as ptkit select says them for cu13.
    assert message == (
        "NVIDIA driver 570.86.10 supports CUDA 12.8; torch 2.14.1+cu130 (CUDA 13.x) needs "
        "driver >= 580: upgrade the NVIDIA driver (for the 2 NVIDIA GPU(s) here, from "
        "driver table): torch.cuda.is_available() is False"
    )
    findings, _ = run_checks(facts(machine=old), select=["PTK201"])
    assert findings[0].fix.startswith("install the NVIDIA driver >= 580")
    assert "or install a torch built for CUDA 12.x" in findings[0].fix
    assert only(facts(machine=H200_MACHINE), "PTK201") == []  # 580 supports 13.0
    # 13.0 driver, a 13.x torch: minor-version compatibility
    newer = dataclasses.replace(TORCH_CU, cuda="13.2")
    assert only(facts(torch=newer, machine=H200_MACHINE), "PTK201") == []
    no_driver = dataclasses.replace(H200_MACHINE, nvidia_driver=None, cuda_driver_version=None)
    (message,) = only(facts(machine=no_driver), "PTK201")
    assert "no NVIDIA driver is loaded" in message


def test_device_not_covered_by_the_installed_cpu_variant():
    (message,) = only(facts(machine=H200_MACHINE), "PTK202")
    assert message.startswith("nvidia:0 (NVIDIA H200, sm_90), nvidia:1 (NVIDIA H200, sm_90)")
    assert "ptkit_ops 0.1.0+cpu, variant cpu (it has no CUDA library)" in message
    findings, _ = run_checks(facts(machine=H200_MACHINE), select=["PTK202"])
    assert "install the cu13 variant of ptkit-ops" in findings[0].fix  # what ptkit select names
    other = dataclasses.replace(CPU_PTKIT, name="mykernels", distribution="my-kernels")
    findings, _ = run_checks(facts(machine=H200_MACHINE, packages=(other,)), select=["PTK202"])
    assert findings[0].fix == "install the build of my-kernels made for this GPU"


def test_device_coverage_uses_the_manifest_targets():
    # cu13 covers sm_90 by SASS; sm_89 (RTX 4090) is not covered by SASS nor PTX compute_120.
    assert only(facts(machine=H200_MACHINE, packages=(CU13_PTKIT,)), "PTK202") == []
    (message,) = only(facts(machine=RTX4090_MACHINE, packages=(CU13_PTKIT,)), "PTK202")
    assert "sm_89 is not covered: built for sm_90" in message
    rocm = ptkit_package(cpu_library(), HIP_LIB, variant="rocm7.14")
    assert only(facts(machine=MI300X_MACHINE, packages=(rocm,)), "PTK202") == []
    gfx90a = dataclasses.replace(MI300X_MACHINE, amd=(AmdGpu(1, "MI250X", "gfx90a", None, None),))
    assert len(only(facts(machine=gfx90a, packages=(rocm,)), "PTK202")) == 1
    assert len(only(facts(machine=ARC_MACHINE), "PTK202")) == 1
    assert len(only(facts(machine=APPLE_MACHINE), "PTK202")) == 1
    unknown_cc = dataclasses.replace(
        H200_MACHINE, nvidia=(dataclasses.replace(H200, compute_capability=None),)
    )
    assert only(facts(machine=unknown_cc, packages=(CU13_PTKIT,)), "PTK202") == []


# --- 3xx ----------------------------------------------------------------------------------


def test_a_package_without_a_native_library():
    bare = ptkit_package()
    (message,) = only(facts(packages=(bare,)), "PTK301")
    assert "ptkit_ops 0.1.0+cpu, variant cpu at /venv/site-packages/ptkit_ops has no" in message
    assert "(no *.manifest.json in ptkit_ops/_native/)" in message
    findings, _ = run_checks(facts(packages=(bare,)), select=["PTK301"])
    assert findings[0].fix.startswith("install the cpu variant of ptkit-ops, which `ptkit select`")
    # Any package, not only ptkit-ops.
    other = dataclasses.replace(bare, name="mykernels", distribution="my-kernels")
    findings, _ = run_checks(facts(packages=(other,)), select=["PTK301"])
    assert findings[0].fix.startswith("install a built wheel of my-kernels")
    assert only(HEALTHY, "PTK301") == []


def test_variant_does_not_match_torchs_backend():
    (message,) = only(facts(torch=TORCH_ROCM, packages=(CU13_PTKIT,)), "PTK302")
    assert "libptkit_cuda.so is a CUDA library but torch 2.14.1+rocm7.14 is a ROCm build" in (
        message
    )
    old_cuda = dataclasses.replace(TORCH_CU, version="2.14.1+cu128", cuda="12.8")
    (message,) = only(facts(torch=old_cuda, packages=(CU13_PTKIT,)), "PTK302")
    # The loader's runtime-major rule (Backend.runtime_problem), in its words.
    assert "libptkit_cuda.so was built with CUDA 13.5.37, torch 2.14.1+cu128 uses CUDA 12.8" in (
        message
    )
    assert only(facts(packages=(CU13_PTKIT,)), "PTK302") == []
    assert only(facts(torch=TORCH_ROCM), "PTK302") == []  # the cpu variant fits any torch


def test_a_library_the_loader_would_fail():
    bad = cpu_library(status="failed", reason="sha256 of libptkit_cpu.so is 12ab…, expected 34cd…")
    (message,) = only(facts(packages=(ptkit_package(bad),)), "PTK303")
    assert "would fail libptkit_cpu.so (cpu): sha256" in message
    findings, _ = run_checks(facts(packages=(ptkit_package(bad),)), select=["PTK303"])
    assert "pip install --force-reinstall --no-deps 'ptkit-ops==0.1.0+cpu'" in findings[0].fix
    assert only(HEALTHY, "PTK303") == []


def test_a_skipped_library_is_information():
    skipped = cpu_library(status="skipped", reason="PTKIT_DISABLE_NATIVE=cpu")
    findings, _ = run_checks(facts(packages=(ptkit_package(skipped),)), select=["PTK304"])
    assert [f.severity for f in findings] == [Severity.INFO]
    assert exit_code_for(findings) == 0
    # Without torch every library is skipped: PTK101 says it once.
    assert only(facts(torch=NO_TORCH, packages=(ptkit_package(skipped),)), "PTK304") == []


def test_smoke_mismatch_and_failure():
    bad_row = SmokeRow("rms_norm", "cuda:0", "bfloat16", "native", 0.5, 1e-5, False, "allowed 0.03")
    smoke = dataclasses.replace(SMOKE_OK, rows=(*SMOKE_OK.rows, bad_row))
    (message,) = only(facts(smoke=smoke), "PTK305")
    assert "rms_norm on cuda:0 (bfloat16, native)" in message and "0.5" in message
    assert only(facts(smoke=SMOKE_OK), "PTK305") == []
    failed = dataclasses.replace(SMOKE_OK, error="ModuleNotFoundError: No module named 'ptkit_ops'")
    (message,) = only(facts(smoke=failed), "PTK306")
    assert "No module named 'ptkit_ops'" in message
    # torch itself failed: PTK103, not PTK306
    not_imported = SmokeFacts(False, "import torch: ImportError: x", 0.1, ())
    assert only(facts(smoke=not_imported), "PTK306") == []


def test_smoke_load_check_problems_are_findings():
    broken = SmokePackage("mykernels", 0, ("the CPU library did not load: see its decision above",))
    smoke = dataclasses.replace(SMOKE_OK, packages=(SmokePackage("ptkit_ops", 3, ()), broken))
    (message,) = only(facts(smoke=smoke), "PTK307")
    assert message == "--smoke: mykernels: the CPU library did not load: see its decision above"
    findings, _ = run_checks(facts(smoke=smoke), select=["PTK307"])
    assert "python -m ptkit.runtime.smoke mykernels" in findings[0].fix
    assert only(facts(smoke=SMOKE_OK), "PTK307") == []


def _select_answer(machine: Machine, index_url: str | None = None):  # type: ignore[no-untyped-def]
    """What `ptkit select` answers for ``machine`` (its own code, not the doctor's)."""
    from ptkit.selection import load_all_recipes, recipes_dir, select_variant

    return select_variant(machine, load_all_recipes(recipes_dir()), index_url=index_url, environ={})


def test_a_cu13_wheel_on_a_machine_without_a_gpu_is_a_warning_with_the_command():
    (finding,) = run_checks(facts(packages=(CU13_PTKIT,)), select=["PTK308"])[0]
    assert finding.severity is Severity.WARNING and finding.check.name == "variant-not-recommended"
    answer = _select_answer(NO_GPU)
    assert answer.variant == "cpu"  # the doctor repeats select's answer
    assert finding.message == (
        "ptkit_ops 0.1.0+cu13, variant cu13 is installed, but `ptkit select` recommends the "
        f"cpu variant for this machine: {answer.reason}"
    )
    assert finding.fix == (
        "replace it with the cpu variant: pip install --no-deps ptkit-ops==0.1.0+cpu "
        "--index-url '<ptkit index>/cpu/simple' (<ptkit index>: the root of ptkit's index; "
        "with PTKIT_INDEX_URL set the doctor fills it in)"
    )


def test_the_variant_command_uses_the_index_url_as_select_does():
    url = "https://ptkit.example.org/index"
    (finding,) = run_checks(facts(packages=(CU13_PTKIT,), index_url=url), select=["PTK308"])[0]
    command = finding.fix.partition(": ")[2]
    argv = shlex.split(command)
    assert argv[:4] == ["pip", "install", "--no-deps", "ptkit-ops==0.1.0+cpu"]
    assert argv[4:] == ["--index-url", _select_answer(NO_GPU, url).variant_index_url]
    # A PTKIT_INDEX_URL that is not a URL: the placeholder, not a crash.
    (finding,) = run_checks(facts(packages=(CU13_PTKIT,), index_url="nope"), select=["PTK308"])[0]
    assert "'<ptkit index>/cpu/simple'" in finding.fix


def test_the_cpu_wheel_on_an_h200_names_the_cuda_variant():
    (message,) = only(facts(machine=H200_MACHINE), "PTK308")
    assert _select_answer(H200_MACHINE).variant == "cu13"
    assert "variant cpu is installed, but `ptkit select` recommends the cu13 variant" in message
    findings, _ = run_checks(facts(machine=H200_MACHINE), select=["PTK308"])
    assert "ptkit-ops==0.1.0+cu13 --index-url '<ptkit index>/cu13/simple'" in findings[0].fix


def test_the_recommended_variant_or_another_package_is_no_finding():
    assert only(HEALTHY, "PTK308") == []  # cpu on a machine without a GPU
    cu13_on_h200 = facts(machine=H200_MACHINE, packages=(CU13_PTKIT,))
    assert only(cu13_on_h200, "PTK308") == []
    other = dataclasses.replace(CU13_PTKIT, name="mykernels", distribution="my-kernels")
    assert only(facts(packages=(other,)), "PTK308") == []  # select knows ptkit-ops' variants only
    unknown = dataclasses.replace(CU13_PTKIT, variant=None)
    assert only(facts(packages=(unknown,)), "PTK308") == []  # no variant to compare (PTK301)
    _, skipped = run_checks(facts(machine=None, packages=(CU13_PTKIT,)), select=["PTK308"])
    assert skipped == [("PTK308", "machine")]


# --- 4xx ----------------------------------------------------------------------------------


def test_two_libcudart():
    two = dataclasses.replace(
        TORCH_CU,
        cuda_runtimes=(
            "/venv/site-packages/nvidia/cu13/lib/libcudart.so.13",
            "/usr/local/cuda-12.8/lib64/libcudart.so.12",
        ),
    )
    findings, _ = run_checks(facts(torch=two), select=["PTK401"])
    (finding,) = findings
    assert finding.severity is Severity.ERROR  # different majors
    assert "CUDA 12, 13" in finding.message and "LD_LIBRARY_PATH" in finding.fix
    same = dataclasses.replace(
        TORCH_CU,
        cuda_runtimes=(
            "/venv/site-packages/nvidia/cu13/lib/libcudart.so.13",
            "/opt/cuda-13.0/lib64/libcudart.so.13",
        ),
    )
    findings, _ = run_checks(facts(torch=same), select=["PTK401"])
    assert [f.severity for f in findings] == [Severity.WARNING]
    # Links of one copy in one folder are one runtime.
    links = dataclasses.replace(
        TORCH_CU,
        cuda_runtimes=(
            "/x/nvidia/cu13/lib/libcudart.so.13",
            "/x/nvidia/cu13/lib/libcudart.so.13.0.96",
        ),
    )
    assert only(facts(torch=links), "PTK401") == []


def test_rocm_placeholder_from_pypi():
    (message,) = only(facts(distributions={"rocm": "0.1.0", "torch": "2.14.1"}), "PTK402")
    assert "placeholder" in message
    assert len(only(facts(distributions={"ROCm": "0.1.0"}), "PTK402")) == 1
    assert only(facts(distributions={"rocm": "7.14.0"}), "PTK402") == []
    assert only(HEALTHY, "PTK402") == []


# --- 9xx ----------------------------------------------------------------------------------


def test_a_failed_probe_is_a_finding_with_a_fix():
    f = facts(torch=None, probe_problems={"torch": "no answer within 3 s (killed)"})
    findings, skipped = run_checks(f)
    (finding,) = [x for x in findings if x.id == "PTK901"]
    assert "torch probe failed: no answer within 3 s" in finding.message
    assert "--timeout" in finding.fix
    assert ("PTK101", "torch") in skipped


def test_a_hanging_or_garbage_nvidia_smi_is_a_finding():
    hung = dataclasses.replace(
        H200_MACHINE,
        problems=(
            "nvidia-smi --query-gpu=index,name,pci.bus_id,compute_cap,driver_version "
            "--format=csv,noheader: no answer within 3 s (killed)",
        ),
    )
    findings, _ = run_checks(facts(machine=hung), select=["PTK902"])
    assert "hangs" in findings[0].fix and "dmesg" in findings[0].fix
    garbage = dataclasses.replace(
        H200_MACHINE, problems=("nvidia-smi --query-gpu=…: expected 'index, …' lines, got 'xx'",)
    )
    findings, _ = run_checks(facts(machine=garbage), select=["PTK902"])
    assert "garbage" in findings[0].fix


# --- run_doctor and exit codes ------------------------------------------------------------


def test_exit_codes():
    assert run_doctor(collect=lambda **_: HEALTHY).exit_code == 0
    result = run_doctor(collect=lambda **_: facts(torch=NO_TORCH))
    assert result.exit_code == 1 and [f.id for f in result.findings] == ["PTK101"]
    # warnings count as problems; info does not
    assert (
        run_doctor(collect=lambda **_: facts(torch=TORCH_CPU, machine=H200_MACHINE)).exit_code == 1
    )
    skipped = cpu_library(status="skipped", reason="disabled")
    info_only = facts(packages=(ptkit_package(skipped),))
    assert run_doctor(collect=lambda **_: info_only).exit_code == 0
    # --ignore accepts a warning
    ignored = run_doctor(
        collect=lambda **_: facts(torch=TORCH_CPU, machine=H200_MACHINE),
        ignore=["PTK104", "PTK202", "PTK308"],
    )
    assert ignored.exit_code == 0


@pytest.mark.parametrize("switch", ["PTKIT_DEBUG", "PTKIT_DOCTOR_DEBUG"])
def test_a_doctor_bug_is_exit_code_2_with_one_line(monkeypatch, switch):
    monkeypatch.delenv("PTKIT_DEBUG", raising=False)
    monkeypatch.delenv("PTKIT_DOCTOR_DEBUG", raising=False)

    def broken(**_: object) -> Facts:
        raise KeyError("probe table")

    result = run_doctor(collect=broken)
    assert result.exit_code == 2
    assert result.error is not None and "\n" not in result.error
    assert "internal error while collecting the facts: KeyError" in result.error
    assert "bug in ptkit doctor" in result.error and "`PTKIT_DEBUG=1 ptkit doctor`" in result.error
    # PTKIT_DEBUG, and the doctor's older name for it, show the traceback instead.
    with pytest.raises(KeyError):
        run_doctor(collect=broken, environ={switch: "1"})
    assert run_doctor(collect=broken, environ={switch: "0"}).exit_code == 2


@pytest.mark.parametrize("name", ["timeout_s", "smoke_timeout_s"])
@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 0.0])
def test_a_timeout_that_is_not_a_number_of_seconds_is_the_callers_error(name, seconds):
    with pytest.raises(ValueError, match=f"run_doctor: {name} must be a finite number"):
        run_doctor(collect=lambda **_: HEALTHY, **{name: seconds})


def test_run_doctor_adds_the_smoke_run():
    result = run_doctor(collect=lambda **_: HEALTHY, smoke=True, run_smoke=lambda _t: SMOKE_OK)
    assert result.facts is not None and result.facts.smoke == SMOKE_OK
    assert result.exit_code == 0


# --- the report ---------------------------------------------------------------------------

FULL = facts(
    torch=TORCH_CPU,
    machine=H200_MACHINE,
    toolchains=(ToolchainFacts("nvcc", "/x/nvcc", "13.5", ("sm_90",), "the cu13 variant", None),),
    smoke=SMOKE_OK,
)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color():
    assert use_colour(Tty(), {}) is True
    assert use_colour(Tty(), {"NO_COLOR": "1"}) is False
    assert use_colour(Tty(), {"NO_COLOR": ""}) is True  # no-color.org: set and non-empty
    assert use_colour(io.StringIO(), {}) is False


def test_the_text_report_has_every_section():
    findings, skipped = run_checks(FULL)
    text = render_text(FULL, findings, skipped, exit_code_for(findings), version="0.1.0+cpu")
    for title in (
        "Python",
        "OS",
        "torch",
        "Accelerators",
        "Packages built with ptkit",
        "Runtime profile",
        "Toolchains (--build)",
        "Smoke (--smoke, in a child process)",
        "Findings",
    ):
        assert f"\n{title}\n" in text, title
    assert "nvidia:0  NVIDIA H200  sm_90" in text
    assert "libptkit_cpu.so [cpu] loaded" in text and "isa x86-64-v3,default" in text
    assert "warning PTK104 torch-cpu-build-on-nvidia-gpu" in text
    assert "  ptkit_ops: load checks ok (3 op kernels registered)\n" in text
    assert "fix: " in text
    assert "exit code 1" in text
    assert "\033[" not in text
    assert text.isascii()


def test_the_coloured_report_styles_severities():
    findings, skipped = run_checks(FULL)
    text = render_text(FULL, findings, skipped, 1, version="0.1.0", colour=True)
    assert "\033[33mwarning\033[0m" in text
    assert re.sub(r"\033\[[0-9;]*m", "", text).replace("…", "...") == render_text(
        FULL, findings, skipped, 1, version="0.1.0"
    )


def test_the_report_survives_missing_facts():
    f = Facts(probe_problems={"torch": "no answer within 3 s (killed)"})
    findings, skipped = run_checks(f)
    text = render_text(f, findings, skipped, exit_code_for(findings), version="0.1.0")
    assert "(not known: no answer within 3 s (killed))" in text
    assert "check(s) skipped" in text


# --- the JSON document --------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    "case",
    [
        HEALTHY,
        FULL,
        Facts(),
        facts(torch=NO_TORCH, machine=MI300X_MACHINE),
        facts(machine=ARC_MACHINE),
    ],
)
def test_the_json_document_matches_its_schema(validator, case):
    findings, skipped = run_checks(case)
    document = json_document(case, findings, skipped, exit_code_for(findings), version="0.1.0")
    document = json.loads(json.dumps(document))  # what --json prints
    validator.validate(document)
    assert document["schema_version"] == 1
    assert document["exit_code"] == exit_code_for(findings)


def test_the_schema_rejects_what_it_should(validator):
    findings, skipped = run_checks(FULL)
    good = json.loads(json.dumps(json_document(FULL, findings, skipped, 1, version="0.1.0")))
    bad = json.loads(json.dumps(good))
    bad["findings"][0]["severity"] = "fatal"
    assert not validator.is_valid(bad)
    bad = json.loads(json.dumps(good))
    bad["schema_version"] = 2
    assert not validator.is_valid(bad)
    bad = json.loads(json.dumps(good))
    bad["error"] = "x"  # an error only with exit code 2
    assert not validator.is_valid(bad)
    failed = json.loads(json.dumps(json_document(None, [], [], 2, version="0.1.0", error="bug")))
    validator.validate(failed)
