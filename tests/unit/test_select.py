"""``ptkit.selection``: the variant for each recorded machine (tests/fixtures/machines),
with the repository's recipes, the reasons, the override and the install commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptkit import selection
from ptkit.hardware import IntelGpu, Machine, NvidiaGpu, PlatformFacts, detect
from ptkit.selection import (
    SelectionError,
    VariantCoverage,
    load_all_recipes,
    recipes_dir,
    render_text,
    select,
    select_variant,
)

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures" / "machines"
RECIPES = TESTS.parent / "recipes"
SRC = TESTS.parent / "src"
INDEX = "https://ptkit.example/index"
LINUX = PlatformFacts("Linux", "x86_64")
CU13_TARGETS = "built for sm_90…sm_120, PTX compute_120"


def choose(
    root: str | Path,
    *,
    env: dict[str, str] | None = None,
    facts: PlatformFacts = LINUX,
    index_url: str | None = INDEX,
) -> selection.Selection:
    path = FIXTURES / root if isinstance(root, str) else root
    machine = detect(path, commands=False, platform_facts=facts)
    return select_variant(
        machine, load_all_recipes(RECIPES), index_url=index_url, environ=env or {}
    )


def copy_of(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target, symlinks=True)
    return target


def coverage(result: selection.Selection) -> dict[str, tuple[VariantCoverage, ...]]:
    return {d.label: d.coverage for d in result.devices}


# --- one machine each ---------------------------------------------------------------------


def test_h200_gets_cu13_through_sass_sm90() -> None:
    result = choose("h200")
    assert (result.variant, result.backend, result.source) == ("cu13", "cuda", "detected")
    assert coverage(result) == {
        "nvidia:0": (VariantCoverage("cu13", True, "SASS sm_90"),),
        "nvidia:1": (VariantCoverage("cu13", True, "SASS sm_90"),),
    }
    assert result.reason == (
        "cu13 covers every NVIDIA GPU: nvidia:0 SASS sm_90; nvidia:1 SASS sm_90"
    )
    assert result.notes == ()


def test_rtx4090_sm89_is_not_in_cu13_so_cpu_with_the_reason() -> None:
    result = choose("rtx4090")
    how = f"sm_89 is not covered: {CU13_TARGETS}"
    assert coverage(result) == {"nvidia:0": (VariantCoverage("cu13", False, how),)}
    assert result.variant == "cpu"
    assert result.reason == (
        "no cuda variant covers every NVIDIA GPU: cu13 does not cover nvidia:0 "
        f"(NVIDIA GeForce RTX 4090): {how}; recommending cpu, which runs everywhere"
    )
    # The driver is new enough, so a CUDA torch would still use the GPU.
    assert result.notes == (
        "with the cpu variant, a GPU build of torch still runs on the GPU (ptkit's ops "
        "through their reference implementation): install torch from "
        "https://download.pytorch.org/whl/cu130 instead of the CPU build if that build "
        "supports this GPU",
    )


def test_t4_sm75_with_cu13_recommends_cpu() -> None:
    result = choose("t4")
    assert result.variant == "cpu"
    assert coverage(result)["nvidia:0"] == (
        VariantCoverage("cu13", False, f"sm_75 is not covered: {CU13_TARGETS}"),
    )


def test_old_driver_recommends_cpu_with_the_driver_to_install(tmp_path: Path) -> None:
    root = copy_of("h200", tmp_path)
    (root / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"
    )
    result = choose(root)
    how = (
        "NVIDIA driver 535.183.01 supports CUDA 12.2; cu13 (CUDA 13.x) needs driver >= 580: "
        "upgrade the NVIDIA driver"
    )
    assert coverage(result)["nvidia:0"] == (VariantCoverage("cu13", False, how),)
    assert result.variant == "cpu"
    assert f"cu13 does not cover nvidia:0 (NVIDIA H200): {how}" in result.reason
    assert result.notes == ()  # no CUDA 13 torch for that driver either


def test_gpu_without_a_loaded_driver_recommends_cpu(tmp_path: Path) -> None:
    root = copy_of("h200", tmp_path)
    shutil.rmtree(root / "proc")
    result = choose(root)
    assert result.variant == "cpu"
    assert coverage(result)["nvidia:0"] == (
        VariantCoverage(
            "cu13",
            False,
            "no NVIDIA driver is loaded (no /proc/driver/nvidia/version, no NVML or "
            "nvidia-smi answer); cu13 needs driver >= 580: install it",
        ),
    )


def test_unknown_capability_is_not_assumed(tmp_path: Path) -> None:
    root = copy_of("t4", tmp_path)
    (root / "sys/bus/pci/devices/0000:00:1e.0/device").write_text("0x1db4\n")
    result = choose(root)
    assert result.variant == "cpu"
    assert coverage(result)["nvidia:0"] == (
        VariantCoverage(
            "cu13",
            False,
            "its compute capability is unknown (PCI id 0x1db4 is not in ptkit's table and "
            "neither NVML nor nvidia-smi answered)",
        ),
    )


def test_mi300x_gets_rocm() -> None:
    result = choose("mi300x")
    assert (result.variant, result.backend) == ("rocm7.14", "hip")
    assert coverage(result) == {
        "amd:1": (VariantCoverage("rocm7.14", True, "code object gfx942"),),
        "amd:2": (VariantCoverage("rocm7.14", True, "code object gfx942"),),
    }


def test_mi300x_on_aarch64_has_no_rocm_wheel() -> None:
    result = choose("mi300x", facts=PlatformFacts("Linux", "aarch64"))
    assert result.variant == "cpu"
    assert result.reason == (
        "no hip variant is released for manylinux_2_28_aarch64 (variants of that backend: "
        "rocm7.14); cpu runs everywhere"
    )


def test_arc_b580_gets_xpu() -> None:
    result = choose("arc_b580")
    assert (result.variant, result.backend) == ("xpu", "xpu")
    assert coverage(result) == {"intel:0": (VariantCoverage("xpu", True, "AOT code for bmg"),)}


def test_arc_without_a_driver_recommends_cpu(tmp_path: Path) -> None:
    root = copy_of("arc_b580", tmp_path)
    (root / "sys/bus/pci/devices/0000:03:00.0/driver").unlink()
    result = choose(root)
    assert result.variant == "cpu"
    assert coverage(result)["intel:0"] == (
        VariantCoverage(
            "xpu",
            False,
            "no kernel driver is bound to it: load the xe (or i915) driver, then run ptkit "
            "select again",
        ),
    )


def test_no_gpu_gets_cpu() -> None:
    result = choose("no_gpu")
    assert (result.variant, result.devices, result.notes) == ("cpu", (), ())
    assert result.reason == "no GPU that a ptkit GPU variant serves was found"


def test_apple_silicon_gets_metal_with_torch_from_pypi() -> None:
    result = choose("no_gpu", facts=PlatformFacts("Darwin", "arm64", chip="Apple M3"))
    assert (result.variant, result.platform) == ("metal", "macosx_arm64")
    assert coverage(result) == {
        "apple:0": (VariantCoverage("metal", True, "Metal kernels through MPS"),)
    }
    assert result.commands is not None
    assert result.commands.uv == f"uv pip install ptkit-ops --index {INDEX}/metal/simple"
    assert result.commands.pip == (
        f"pip install ptkit-ops --index-url {INDEX}/metal/simple "
        "--extra-index-url https://pypi.org/simple"
    )


def h200_machine(**changes: object) -> Machine:
    base = Machine(
        system="Linux",
        machine="x86_64",
        nvidia_driver="580.65.06",
        cuda_driver_version=(13, 0),
        cuda_driver_source="nvml",
        nvidia=(NvidiaGpu(0, "NVIDIA H200", "0000:18:00.0", 0x2335, (9, 0), "nvml"),),
    )
    return Machine(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_nvidia_decides_over_an_integrated_intel_gpu() -> None:
    laptop = h200_machine(
        intel=(IntelGpu("0000:00:02.0", 0x7D55, "Intel GPU 0x7d55", "mtl", "i915"),)
    )
    result = select_variant(laptop, load_all_recipes(RECIPES), index_url=None, environ={})
    assert result.variant == "cu13"
    intel = next(d for d in result.devices if d.kind == "intel")
    assert (intel.counted, intel.note) == (
        False,
        "a ptkit wheel carries one GPU backend; the NVIDIA GPUs decide here: not counted",
    )


def test_intel_gpu_without_an_xpu_family_is_not_counted() -> None:
    uhd = Machine(
        system="Linux",
        machine="x86_64",
        nvidia_driver=None,
        cuda_driver_version=None,
        cuda_driver_source=None,
        intel=(IntelGpu("0000:00:02.0", 0xA780, "Intel GPU 0xa780", None, "i915"),),
    )
    result = select_variant(uhd, load_all_recipes(RECIPES), index_url=None, environ={})
    assert result.variant == "cpu"
    assert result.devices[0].counted is False
    assert result.devices[0].note.startswith("PCI id 0xa780 is not an Intel GPU family")


def test_ptx_jit_needs_a_driver_for_the_toolkit() -> None:
    """A capability past every SASS family (13.0): PTX compute_120 from CUDA 13.5 needs
    a driver that supports CUDA 13.5 (the loader's rule, through cuda_coverage)."""
    future = NvidiaGpu(0, "future", None, None, (13, 0), "nvml")
    recipes = load_all_recipes(RECIPES)
    old = select_variant(h200_machine(nvidia=(future,)), recipes, index_url=None, environ={})
    assert old.variant == "cpu"
    assert "made by CUDA 13.5, but the driver supports CUDA 13.0" in old.devices[0].coverage[0].how
    new = select_variant(
        h200_machine(nvidia=(future,), cuda_driver_version=(13, 5)),
        recipes,
        index_url=None,
        environ={},
    )
    assert (new.variant, new.devices[0].coverage[0].how) == (
        "cu13",
        "PTX compute_120 (JIT by the driver)",
    )


# --- the override -----------------------------------------------------------------------------


def test_ptkit_variant_overrides_and_keeps_the_detected_choice() -> None:
    result = choose("h200", env={"PTKIT_VARIANT": "cpu"})
    assert (result.variant, result.source) == ("cpu", "PTKIT_VARIANT")
    assert result.reason.startswith("PTKIT_VARIANT=cpu (detected: cu13, cu13 covers every")
    assert result.commands is not None
    assert f"{INDEX}/cpu/simple" in result.commands.uv


def test_override_that_does_not_cover_the_gpu_says_so() -> None:
    result = choose("rtx4090", env={"PTKIT_VARIANT": "cu13"})
    assert result.variant == "cu13"
    assert result.notes == (
        f"cu13 does not cover nvidia:0 (sm_89 is not covered: {CU13_TARGETS}): ptkit's ops "
        "run their reference implementation there",
    )


def test_override_not_released_for_the_platform_says_so() -> None:
    result = choose("no_gpu", env={"PTKIT_VARIANT": "metal"})
    assert result.notes == (
        "metal is not released for manylinux_2_28_x86_64: no wheel will be found for it",
    )


def test_unknown_override_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(SelectionError) as info:
        choose("h200", env={"PTKIT_VARIANT": "cu12"})
    assert str(info.value) == (
        "ptkit select: PTKIT_VARIANT='cu12' is not a variant (did you mean 'cu13'?); "
        "expected one of cpu, cu13, metal, rocm7.14, xpu: set PTKIT_VARIANT to one of them, "
        "or unset it to choose from the detected hardware"
    )


def test_empty_override_is_no_override() -> None:
    assert choose("h200", env={"PTKIT_VARIANT": " "}).source == "detected"


# --- commands -------------------------------------------------------------------------------


def test_commands_use_the_variant_index_path_and_the_torch_index() -> None:
    result = choose("h200", index_url=INDEX + "/")
    assert result.variant_index_url == f"{INDEX}/cu13/simple"
    assert result.torch_index_url == "https://download.pytorch.org/whl/cu130"
    assert result.commands is not None
    # uv: the first index that has a package wins, so ptkit's index comes first,
    # PyTorch's second, PyPI (uv's default index) last.
    assert result.commands.uv == (
        f"uv pip install ptkit-ops --index {INDEX}/cu13/simple "
        "--index https://download.pytorch.org/whl/cu130"
    )
    assert result.commands.pip == (
        f"pip install ptkit-ops --index-url {INDEX}/cu13/simple "
        "--extra-index-url https://download.pytorch.org/whl/cu130 "
        "--extra-index-url https://pypi.org/simple"
    )


@pytest.mark.parametrize(
    ("fixture", "path", "torch_index"),
    [
        ("mi300x", "rocm7.14", "https://download.pytorch.org/whl/rocm7.14"),
        ("arc_b580", "xpu", "https://download.pytorch.org/whl/xpu"),
        ("no_gpu", "cpu", "https://download.pytorch.org/whl/cpu"),
        ("rtx4090", "cpu", "https://download.pytorch.org/whl/cpu"),
    ],
)
def test_each_variant_gets_its_own_index(fixture: str, path: str, torch_index: str) -> None:
    commands = choose(fixture).commands
    assert commands is not None
    assert (
        commands.uv
        == f"uv pip install ptkit-ops --index {INDEX}/{path}/simple --index {torch_index}"
    )


def test_no_index_url_means_no_commands() -> None:
    result = choose("h200", index_url=None)
    assert (result.commands, result.variant_index_url) == (None, None)
    assert "pass --index-url <ptkit index> (or set PTKIT_INDEX_URL)" in render_text(result)


def test_a_bad_index_url_is_an_error() -> None:
    with pytest.raises(SelectionError, match=r"^ptkit select: the ptkit index URL must be an"):
        choose("h200", index_url="ptkit.example/index")


# --- output -----------------------------------------------------------------------------------


def test_json_shape() -> None:
    data = choose("rtx4090").to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["schema_version"] == 1
    assert sorted(data) == [
        "backend",
        "build",
        "commands",
        "devices",
        "distribution",
        "machine",
        "notes",
        "platform",
        "reason",
        "schema_version",
        "source",
        "torch",
        "torch_index_url",
        "variant",
        "variant_index_url",
    ]
    assert (data["variant"], data["source"], data["platform"]) == (
        "cpu",
        "detected",
        "manylinux_2_28_x86_64",
    )
    assert data["devices"] == [
        {
            "device": "nvidia:0",
            "kind": "nvidia",
            "name": "NVIDIA GeForce RTX 4090",
            "arch": "sm_89",
            "counted": True,
            "note": "",
            "variants": {
                "cu13": {"covered": False, "how": f"sm_89 is not covered: {CU13_TARGETS}"}
            },
        }
    ]
    assert data["commands"]["uv"].startswith(f"uv pip install ptkit-ops --index {INDEX}/cpu/simple")
    assert data["machine"]["nvidia_driver"] == "580.82.07"


def test_text_report() -> None:
    text = render_text(choose("h200"))
    assert text.splitlines() == [
        "Machine: Linux x86_64; NVIDIA driver 580.65.06 (CUDA 13.0 from driver table)",
        "Devices:",
        "  nvidia:0  NVIDIA H200  sm_90",
        "      cu13: covered, SASS sm_90",
        "  nvidia:1  NVIDIA H200  sm_90",
        "      cu13: covered, SASS sm_90",
        "Variant: cu13 (detected)",
        "  cu13 covers every NVIDIA GPU: nvidia:0 SASS sm_90; nvidia:1 SASS sm_90",
        "Install with uv (takes each package from the first index that has it):",
        f"  uv pip install ptkit-ops --index {INDEX}/cu13/simple --index "
        "https://download.pytorch.org/whl/cu130",
        "Install with pip (merges the indexes, takes the highest version):",
        f"  pip install ptkit-ops --index-url {INDEX}/cu13/simple --extra-index-url "
        "https://download.pytorch.org/whl/cu130 --extra-index-url https://pypi.org/simple",
    ]


def test_text_report_lists_probe_problems(tmp_path: Path) -> None:
    root = copy_of("h200", tmp_path)
    (root / "proc/driver/nvidia/version").write_text("garbage\n")
    text = render_text(choose(root))
    assert text.endswith(
        "Problems while probing:\n"
        "  - /proc/driver/nvidia/version: expected 'NVRM version: … Kernel Module  "
        "<version>', got 'garbage'\n"
    )


# --- recipes at run time ----------------------------------------------------------------


def test_recipes_dir_is_the_toolkits_copy_of_the_ops_recipes() -> None:
    # ptkit/_recipes: in the source tree a link to recipes/, in the toolkit wheel a copy.
    assert recipes_dir().parent.name == "ptkit"
    assert recipes_dir().name == "_recipes"
    assert sorted(load_all_recipes(recipes_dir())) == sorted(load_all_recipes(RECIPES))


def test_load_all_recipes_of_an_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(SelectionError, match=r"no recipes in .*expected <variant>\.toml"):
        load_all_recipes(tmp_path)


def test_select_end_to_end() -> None:
    result = select(
        FIXTURES / "mi300x",
        index_url=INDEX,
        environ={},
        recipes_directory=RECIPES,
        commands=False,
        platform_facts=LINUX,
    )
    assert result.variant == "rocm7.14"


# --- build overrides ------------------------------------------------------------------------

BAD_CUDA_ARCHS = {
    "9.0;bogus;12.0+PTX": "PTKIT_CUDA_ARCHS='9.0;bogus;12.0+PTX': 'bogus' is not a compute "
    "capability (expected entries like 9.0, 10.0a, 12.0f or 12.0+PTX)",
    "9.0,10.0": "PTKIT_CUDA_ARCHS='9.0,10.0': separate the entries with ';' or spaces, as "
    "TORCH_CUDA_ARCH_LIST does (9.0;10.0), not ','",
}


@pytest.mark.parametrize("value", sorted(BAD_CUDA_ARCHS))
def test_a_bad_cuda_override_is_the_error_cmake_gives(value: str) -> None:
    """CMake asks ``python -m ptkit.backends request cuda`` for the build's targets; select
    refuses the same value with the same words (the CLI: exit 2, one line)."""
    with pytest.raises(SelectionError) as info:
        choose("h200", env={"PTKIT_CUDA_ARCHS": value})
    assert str(info.value) == f"ptkit select: {BAD_CUDA_ARCHS[value]}"
    cmake_tool = subprocess.run(
        [sys.executable, "-m", "ptkit.backends", "request", "cuda", "--targets", "sm_90"],
        env={**os.environ, "PYTHONPATH": str(SRC), "PTKIT_CUDA_ARCHS": value},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cmake_tool.returncode == 1
    assert cmake_tool.stderr.strip() == f"ptkit: {BAD_CUDA_ARCHS[value]}"


def test_a_valid_cuda_override_is_a_note_about_local_builds() -> None:
    result = choose("h200", env={"PTKIT_CUDA_ARCHS": "9.0;12.0+PTX"})
    assert result.variant == "cu13"  # the published wheels are what they are
    assert result.notes == (
        "PTKIT_CUDA_ARCHS='9.0;12.0+PTX' (sm_90 sm_120 compute_120) applies to local builds "
        "(ptkit build, pip install from source), not to the published wheels ptkit select "
        "chooses from",
    )


# --- torch-mode variants: the build for the environment's torch --------------------------

TORCH_MODE = TESTS / "fixtures" / "projects" / "torchmode_ops"


def choose_torch_build(torch: str | None, *, index_url: str | None = INDEX) -> selection.Selection:
    machine = detect(FIXTURES / "no_gpu", commands=False, platform_facts=LINUX)
    return select_variant(
        machine,
        load_all_recipes(TORCH_MODE / "recipes"),
        index_url=index_url,
        environ={},
        torch=torch,
        distribution="torchmode-ops",
    )


def test_a_torch_mode_variant_gets_the_build_of_the_installed_torch_and_keeps_it() -> None:
    result = choose_torch_build("2.13.0+cpu")
    assert (result.variant, result.build, result.torch) == ("cpu", "cpu.torch2.13", "2.13.0+cpu")
    assert result.commands is not None
    # The installed torch is pinned: with PyPI among the indexes both installers would
    # otherwise upgrade torch to 2.14 to take the newest build.
    assert result.commands.pip == (
        f"pip install torchmode-ops torch==2.13.0+cpu --index-url {INDEX}/cpu/simple "
        "--extra-index-url https://download.pytorch.org/whl/cpu "
        "--extra-index-url https://pypi.org/simple"
    )
    assert result.commands.uv == (
        f"uv pip install torchmode-ops torch==2.13.0+cpu --index {INDEX}/cpu/simple "
        "--index https://download.pytorch.org/whl/cpu"
    )
    (note,) = result.notes
    assert "cpu is built per torch minor (abi = 'torch': 2.13, 2.14)" in note
    assert "torch 2.13.0+cpu here takes the build for torch 2.13 (+cpu.torch2.13)" in note
    text = render_text(result)
    assert "Build: torchmode-ops +cpu.torch2.13\n" in text
    assert result.to_json()["build"] == "cpu.torch2.13"


def test_a_torch_without_a_build_is_replaced_and_the_note_says_so() -> None:
    result = choose_torch_build("2.12.1")
    assert result.build == "cpu.torch2.14"
    assert result.commands is not None and " 'torch==2.14.*' " in result.commands.pip
    (note,) = result.notes
    assert "not for torch 2.12, which is installed here" in note
    assert "replace torch 2.12.1 with torch 2.14" in note
    assert "ptkit build --torch 2.12" in note


def test_no_torch_gets_the_newest_build_and_its_torch() -> None:
    result = choose_torch_build(None)
    assert result.build == "cpu.torch2.14"
    assert result.commands is not None and result.commands.uv.startswith(
        "uv pip install torchmode-ops 'torch==2.14.*' "
    )
    assert "there is no torch here" in result.notes[0]


def test_a_stable_variant_pins_no_torch() -> None:
    result = choose("no_gpu")
    assert (result.build, result.notes) == ("cpu", ())
    assert result.commands is not None and "torch==" not in result.commands.pip
    assert "Build:" not in render_text(result)


def test_select_source_and_torch_from_the_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "select", "--source", str(TORCH_MODE), "--torch",
         "2.14.1", "--index-url", INDEX, "--json", "--root", str(FIXTURES / "no_gpu")],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["distribution"], data["build"]) == ("torchmode-ops", "cpu.torch2.14")
    assert data["commands"]["pip"].startswith("pip install torchmode-ops torch==2.14.1 ")
    bad = subprocess.run(
        [sys.executable, "-m", "ptkit", "select", "--torch", "latest"],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "ptkit select: --torch 'latest' is not a torch version" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_replace_command_pins_a_torch_builds_label() -> None:
    recipe = load_all_recipes(TORCH_MODE / "recipes")["cpu"]
    command = selection.replace_command(
        INDEX, recipe, "0.3.0+cpu.torch2.14", distribution="torchmode-ops", label="cpu.torch2.13"
    )
    assert command == (
        f"pip install --no-deps torchmode-ops==0.3.0+cpu.torch2.13 --index-url {INDEX}/cpu/simple"
    )
