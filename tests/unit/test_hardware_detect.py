"""``ptkit.hardware.detect`` against machine trees (tests/fixtures/machines, written from
the drivers' documented formats: see its README), broken files, and fake nvidia-smi
and NVML that hang, fail or print garbage. No torch, no GPU needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest

from ptkit.hardware import AmdGpu, AppleGpu, IntelGpu, PlatformFacts, detect
from ptkit.hardware.amd import gfx_target
from ptkit.hardware.nvidia import SMI_QUERY, cuda_version_for_driver, parse_driver_version

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "machines"
LINUX = PlatformFacts("Linux", "x86_64")
QUERY = " ".join(SMI_QUERY)


def machine(root: Path | str, **kwargs: object):
    path = FIXTURES / root if isinstance(root, str) else root
    options: dict[str, object] = {"commands": False, "platform_facts": LINUX}
    options.update(kwargs)
    return detect(path, **options)  # type: ignore[arg-type]


def copy_of(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target, symlinks=True)
    return target


def nvidia_rows(m) -> list[tuple[object, ...]]:
    return [
        (g.index, g.name, g.pci_bus_id, g.pci_device_id, g.compute_capability, g.source)
        for g in m.nvidia
    ]


# --- the recorded machines --------------------------------------------------------------


def test_h200_two_gpus_driver_and_capability_from_files() -> None:
    m = machine("h200")
    assert (m.nvidia_driver, m.cuda_driver_version, m.cuda_driver_source) == (
        "580.65.06",
        (13, 0),
        "driver table",
    )
    assert nvidia_rows(m) == [
        (0, "NVIDIA H200", "0000:18:00.0", 0x2335, (9, 0), "pci-id table"),
        (1, "NVIDIA H200", "0000:2a:00.0", 0x2335, (9, 0), "pci-id table"),
    ]
    assert m.nvidia[0].arch == "sm_90"
    # The BMC's ASPEED VGA is a display device, not a GPU of interest.
    assert (m.amd, m.intel, m.apple, m.problems) == ((), (), (), ())


def test_rtx4090_proprietary_module_and_its_audio_function_is_not_a_gpu() -> None:
    m = machine("rtx4090")
    assert m.nvidia_driver == "580.82.07"
    assert nvidia_rows(m) == [
        (0, "NVIDIA GeForce RTX 4090", "0000:01:00.0", 0x2684, (8, 9), "pci-id table")
    ]
    assert m.problems == ()


def test_t4_name_comes_from_the_driver_information_file() -> None:
    m = machine("t4")
    # "Tesla T4" is the information file's Model; the id table says "NVIDIA Tesla T4".
    assert nvidia_rows(m) == [(0, "Tesla T4", "0000:00:1e.0", 0x1EB8, (7, 5), "pci-id table")]


def test_mi300x_gpu_nodes_from_kfd_and_the_cpu_node_is_skipped() -> None:
    m = machine("mi300x")
    assert m.amd == (
        AmdGpu(1, "AMD Instinct MI300X", "gfx942", "0000:0c:00.0", 0x74A1),
        AmdGpu(2, "AMD Instinct MI300X", "gfx942", "0000:22:00.0", 0x74A1),
    )
    assert (m.nvidia, m.nvidia_driver, m.intel, m.problems) == ((), None, (), ())


def test_arc_b580_family_and_driver_and_bridges_are_not_gpus() -> None:
    m = machine("arc_b580")
    assert m.intel == (IntelGpu("0000:03:00.0", 0xE20B, "Intel Arc B580 Graphics", "bmg", "xe"),)
    assert (m.nvidia, m.amd, m.problems) == ((), (), ())


def test_no_gpu_machine() -> None:
    m = machine("no_gpu")
    assert (m.nvidia, m.amd, m.intel, m.apple, m.problems) == ((), (), (), (), ())
    assert not m.has_gpu
    assert (m.nvidia_driver, m.cuda_driver_version) == (None, None)


def test_a_root_without_proc_or_sys_is_no_gpu_and_no_problem(tmp_path: Path) -> None:
    m = machine(tmp_path)
    assert not m.has_gpu and m.problems == ()


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (PlatformFacts("Darwin", "arm64", chip="Apple M2 Pro"), (AppleGpu("Apple M2 Pro"),)),
        (PlatformFacts("Darwin", "arm64"), (AppleGpu("Apple silicon (arm64)"),)),
        (PlatformFacts("Darwin", "x86_64"), ()),  # an Intel Mac: no MPS wheel of torch
        (PlatformFacts("Linux", "aarch64"), ()),
    ],
)
def test_apple_silicon_from_the_platform(
    facts: PlatformFacts, expected: tuple[AppleGpu, ...]
) -> None:
    assert machine("no_gpu", platform_facts=facts).apple == expected


def test_machine_json() -> None:
    data = machine("h200").to_json()
    assert data["nvidia_driver"] == "580.65.06"
    assert data["cuda_driver_version"] == "13.0"
    assert data["nvidia"][0] == {
        "index": 0,
        "name": "NVIDIA H200",
        "pci_bus_id": "0000:18:00.0",
        "pci_device_id": "0x2335",
        "compute_capability": [9, 0],
        "arch": "sm_90",
        "source": "pci-id table",
    }
    assert machine("mi300x").to_json()["amd"][1]["gfx_target"] == "gfx942"
    assert machine("arc_b580").to_json()["intel"][0]["pci_device_id"] == "0xe20b"


# --- the decoding rules -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "target"),
    [
        (90402, "gfx942"),
        (90010, "gfx90a"),
        (110000, "gfx1100"),
        (120001, "gfx1201"),
        (110501, "gfx1151"),
        (90500, "gfx950"),
        (0, None),
        (91700, None),  # minor 17 is not a hex digit
    ],
)
def test_gfx_target_version_decoding(version: int, target: str | None) -> None:
    assert gfx_target(version) == target


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (x)  Sun Jul 27 06:54:38 UTC 2025\n",
            "580.65.06",
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.223.02  Sat Oct  7 15:39:11 UTC 2023\n",
            "470.223.02",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  595.84  Release Build\n",
            "595.84",
        ),
        ("hello\n", None),
    ],
)
def test_driver_version_parsing(text: str, version: str | None) -> None:
    assert parse_driver_version(text) == version


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.65.06", (13, 0)),
        ("595.84", (13, 0)),  # newer than the table: its newest row, a lower bound
        ("575.57.08", (12, 9)),
        ("565.57.01", (12, 6)),  # between rows: the lower one
        ("535.183.01", (12, 2)),
        ("525.60.13", (12, 0)),
        ("470.223.02", (11, 4)),
        ("440.33", None),
        ("garbage", None),
    ],
)
def test_cuda_version_from_the_driver_table(driver: str, cuda: tuple[int, int] | None) -> None:
    assert cuda_version_for_driver(driver) == cuda


# --- broken and unusual trees: problems, never exceptions ---------------------------------


def test_garbage_driver_version_file(tmp_path: Path) -> None:
    root = copy_of("h200", tmp_path)
    (root / "proc/driver/nvidia/version").write_bytes(b"not a version\x00\xff\n")
    m = machine(root)
    assert (m.nvidia_driver, m.cuda_driver_version, m.cuda_driver_source) == (None, None, None)
    assert m.problems == (
        "/proc/driver/nvidia/version: expected 'NVRM version: … Kernel Module  <version>', "
        "got 'not a version\\x00\ufffd'",
    )
    assert len(m.nvidia) == 2  # the GPUs are still found on the PCI bus


def test_garbage_pci_id_skips_that_device_only(tmp_path: Path) -> None:
    root = copy_of("h200", tmp_path)
    (root / "sys/bus/pci/devices/0000:18:00.0/device").write_text("0xZZZZ\n")
    m = machine(root)
    assert [g.pci_bus_id for g in m.nvidia] == ["0000:2a:00.0"]
    assert m.problems == (
        "/sys/bus/pci/devices/0000:18:00.0/device: expected a hex id like 0x10de, got '0xZZZZ'",
    )


def test_unreadable_pci_file_is_a_problem(tmp_path: Path) -> None:
    root = copy_of("rtx4090", tmp_path)
    vendor = root / "sys/bus/pci/devices/0000:01:00.0/vendor"
    vendor.unlink()
    vendor.mkdir()  # reading a directory fails with EISDIR, whoever runs the test
    m = machine(root)
    assert m.nvidia == ()
    assert m.problems == (
        "/sys/bus/pci/devices/0000:01:00.0/vendor: cannot be read (Is a directory)",
    )


def test_gpu_missing_from_the_id_table_has_no_capability(tmp_path: Path) -> None:
    root = copy_of("t4", tmp_path)
    (root / "sys/bus/pci/devices/0000:00:1e.0/device").write_text("0x1db4\n")  # V100 PCIe
    m = machine(root)
    assert nvidia_rows(m) == [(0, "Tesla T4", "0000:00:1e.0", 0x1DB4, None, "unknown")]
    assert m.problems == ()


def test_gpu_without_a_loaded_driver(tmp_path: Path) -> None:
    root = copy_of("h200", tmp_path)
    shutil.rmtree(root / "proc")
    m = machine(root)
    assert (m.nvidia_driver, m.cuda_driver_version) == (None, None)
    assert nvidia_rows(m)[0] == (0, "NVIDIA H200", "0000:18:00.0", 0x2335, (9, 0), "pci-id table")


def test_garbage_kfd_properties(tmp_path: Path) -> None:
    root = copy_of("mi300x", tmp_path)
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "1/properties").write_text("hello world\n")
    props = nodes / "2/properties"
    props.write_text(
        props.read_text().replace("gfx_target_version 90402", "gfx_target_version 91700")
    )
    m = machine(root)
    assert m.amd == ()
    assert m.problems == (
        "/sys/class/kfd/kfd/topology/nodes/1/properties: expected a 'gfx_target_version <n>' "
        "line, got 'hello world'",
        "/sys/class/kfd/kfd/topology/nodes/2/properties: gfx_target_version 91700 is not a "
        "GFX version (expected e.g. 90402 for gfx942)",
        "0000:0c:00.0 (AMD 0x74a1) is on the PCI bus but the KFD topology "
        "(/sys/class/kfd/kfd/topology/nodes) lists no GPU: the amdgpu driver is not loaded "
        "(or not built with KFD)",
        "0000:22:00.0 (AMD 0x74a1) is on the PCI bus but the KFD topology "
        "(/sys/class/kfd/kfd/topology/nodes) lists no GPU: the amdgpu driver is not loaded "
        "(or not built with KFD)",
    )


def test_intel_gpu_without_a_bound_driver(tmp_path: Path) -> None:
    root = copy_of("arc_b580", tmp_path)
    (root / "sys/bus/pci/devices/0000:03:00.0/driver").unlink()
    assert machine(root).intel[0].driver is None


# --- nvidia-smi: real subprocesses, a fake on PATH ----------------------------------------

RECORDED_QUERY = (
    "0, NVIDIA H200, 00000000:18:00.0, 9.0, 580.65.06\n"
    "1, NVIDIA H200, 00000000:2A:00.0, 9.0, 580.65.06\n"
)
# The head of nvidia-smi's report in its documented layout (not captured here).
RECORDED_REPORT = """\
Mon Nov 30 02:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.65.06              Driver Version: 580.65.06      CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
"""


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def smi_answering(query: str, report: str) -> str:
    return (
        f'if [ "$1" = "{SMI_QUERY[1]}" ]; then\n'
        f"cat <<'EOF'\n{query}EOF\nexit 0\nfi\n"
        f"cat <<'EOF'\n{report}EOF\n"
    )


needs_posix_shell = pytest.mark.skipif(os.name != "posix", reason="fake nvidia-smi is /bin/sh")


@needs_posix_shell
def test_nvidia_smi_recorded_output_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path, monkeypatch, smi_answering(RECORDED_QUERY, RECORDED_REPORT))
    m = machine("h200", commands=True)
    assert nvidia_rows(m) == [
        (0, "NVIDIA H200", "0000:18:00.0", 0x2335, (9, 0), "nvidia-smi"),
        (1, "NVIDIA H200", "0000:2a:00.0", 0x2335, (9, 0), "nvidia-smi"),
    ]
    assert (m.cuda_driver_version, m.cuda_driver_source) == ((13, 0), "nvidia-smi")
    assert m.problems == ()


@needs_posix_shell
def test_nvidia_smi_that_hangs_is_killed_at_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path, monkeypatch, "sleep 60\n")
    start = time.monotonic()
    m = machine("h200", commands=True, timeout_s=0.5)
    elapsed = time.monotonic() - start
    assert elapsed < 5, f"detect() took {elapsed:.1f} s with a 0.5 s timeout"
    assert m.problems == (f"{QUERY}: no answer within 0.5 s (killed)",)
    # The files still answer.
    assert [g.source for g in m.nvidia] == ["pci-id table", "pci-id table"]
    assert m.cuda_driver_source == "driver table"


@needs_posix_shell
@pytest.mark.parametrize("timeout_s", [float("nan"), float("inf"), -1.0, 0.0])
def test_a_timeout_that_is_not_a_number_of_seconds_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout_s: float
) -> None:
    """NaN would wait forever (subprocess compares with it), inf overflows: not a hang."""
    fake_smi(tmp_path, monkeypatch, "sleep 60\n")
    start = time.monotonic()
    m = machine("h200", commands=True, timeout_s=timeout_s)
    assert time.monotonic() - start < 5
    assert m.problems == (
        f"{QUERY}: not run: the timeout {timeout_s!r} is not a number of seconds > 0",
    )


@needs_posix_shell
def test_nvidia_smi_printing_garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "echo 'lorem ipsum dolor'\n")
    m = machine("h200", commands=True)
    assert m.problems == (
        f"{QUERY}: expected 'index, name, bus id, capability, driver' lines, got 'lorem ipsum dolor'",
    )
    assert [g.source for g in m.nvidia] == ["pci-id table", "pci-id table"]


@needs_posix_shell
def test_nvidia_smi_flooding_output_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "yes garbage\n")
    m = machine("h200", commands=True, timeout_s=10)
    assert m.problems == (f"{QUERY}: printed more than 256 KiB (killed)",)


@needs_posix_shell
def test_nvidia_smi_failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(
        tmp_path,
        monkeypatch,
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
        "exit 9\n",
    )
    m = machine("h200", commands=True)
    assert m.problems == (
        f"{QUERY}: exit status 9: NVIDIA-SMI has failed because it couldn't communicate "
        "with the NVIDIA driver.",
    )


@needs_posix_shell
def test_nvidia_smi_missing_a_gpu_and_a_mismatched_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_gpu = "0, NVIDIA H200, 00000000:18:00.0, 9.0, 575.57.08\n"
    fake_smi(tmp_path, monkeypatch, smi_answering(one_gpu, RECORDED_REPORT))
    m = machine("h200", commands=True)
    assert m.nvidia_driver == "580.65.06"  # the loaded kernel module wins
    assert [g.source for g in m.nvidia] == ["nvidia-smi", "pci-id table"]
    assert m.problems == (
        "the NVIDIA kernel module is 580.65.06 but nvidia-smi reports 575.57.08: the "
        "user-space driver does not match the loaded module; reboot (or reload the nvidia "
        "module) after a driver upgrade",
        "0000:2a:00.0 (NVIDIA 0x2335) is on the PCI bus but nvidia-smi does not list it: the "
        "driver excluded it or failed to initialise it (see the kernel log, dmesg)",
    )


def test_commands_off_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    fake_smi(tmp_path, monkeypatch, f"touch {marker}\n")
    machine("h200", commands=False)
    assert not marker.exists()


# --- NVML: a fake pynvml module -----------------------------------------------------------


class NVMLError_DriverNotLoaded(Exception):  # pynvml's own spelling
    pass


def fake_pynvml(init: object = None) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    pci = [("00000000:18:00.0", 0x233510DE), ("00000000:2A:00.0", 0x233510DE)]

    def nvml_init() -> None:
        if callable(init):
            init()

    module.nvmlInit = nvml_init  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    module.nvmlSystemGetDriverVersion = lambda: "580.65.06"  # type: ignore[attr-defined]
    module.nvmlSystemGetCudaDriverVersion = lambda: 13000  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    module.nvmlDeviceGetName = lambda h: b"NVIDIA H200"  # type: ignore[attr-defined]
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(  # type: ignore[attr-defined]
        busId=pci[h][0].encode(), pciDeviceId=pci[h][1]
    )
    module.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)  # type: ignore[attr-defined]
    return module


def test_nvml_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    m = machine("h200", nvml=True)
    assert nvidia_rows(m) == [
        (0, "NVIDIA H200", "0000:18:00.0", 0x2335, (9, 0), "nvml"),
        (1, "NVIDIA H200", "0000:2a:00.0", 0x2335, (9, 0), "nvml"),
    ]
    assert (m.nvidia_driver, m.cuda_driver_version, m.cuda_driver_source) == (
        "580.65.06",
        (13, 0),
        "nvml",
    )
    assert m.problems == ()


def test_nvml_that_hangs_is_abandoned_at_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init=lambda: release.wait(30)))
    start = time.monotonic()
    try:
        m = machine("h200", nvml=True, timeout_s=0.3)
    finally:
        release.set()
    assert time.monotonic() - start < 5
    assert m.problems == ("NVML: no answer within 0.3 s",)
    assert [g.source for g in m.nvidia] == ["pci-id table", "pci-id table"]


def test_nvml_error_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise NVMLError_DriverNotLoaded("Driver Not Loaded")

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init=fail))
    m = machine("h200", nvml=True)
    assert m.problems == ("NVML: NVMLError_DriverNotLoaded: Driver Not Loaded",)


def test_nvml_is_not_asked_for_another_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    assert {g.source for g in machine("h200").nvidia} == {"pci-id table"}


# --- no torch ---------------------------------------------------------------------------------


def test_probes_and_selection_import_without_torch() -> None:
    """With torch made unimportable, the probes and ``ptkit select`` still import and run."""
    code = textwrap.dedent(
        """
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError(f"{name} is blocked by this test")
                return None

        sys.meta_path.insert(0, NoTorch())
        import ptkit.hardware, ptkit.selection
        machine = ptkit.hardware.detect(commands=False)
        ptkit.selection.select_variant(
            machine,
            ptkit.selection.load_all_recipes(ptkit.selection.recipes_dir()),
            index_url=None,
            environ={},
        )
        print("ok")
        """
    )
    src = Path(__file__).resolve().parents[2] / "src"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(src)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
