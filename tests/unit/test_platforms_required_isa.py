"""The CPU ISA levels a whole library may require (REQUIRES_ISA, ptkit.platforms): their
compiler flags (the psABI levels' come from the ISA_SOURCES table), what this CPU has
(Linux: /proc/cpuinfo) and the command CMake asks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptkit.platforms import PLATFORMS, CpuFacts, this_cpu
from ptkit.platforms.base import isa_levels
from ptkit.platforms.linux import cpuinfo_features, cpuinfo_fields
from ptkit.platforms.required_isa import missing_cpu_flags, required_isa, required_isa_levels

REPO = Path(__file__).resolve().parents[2]
LINUX = PLATFORMS["linux"]


def test_the_run_time_levels_take_their_flags_from_the_isa_sources_table() -> None:
    table = {level.name: level.flags for level in isa_levels("x86_64")}
    for name in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
        assert required_isa(name, "x86_64").flags == table[name]
    for name in ("avx512-bf16", "amx-bf16"):
        # MSVC builds no run-time copy of them, but compiles a library that requires one.
        assert required_isa(name, "x86_64").flags == {**table[name], "msvc": ("/arch:AVX512",)}
    assert (
        required_isa("neon-bf16", "aarch64").flags
        == {level.name: level.flags for level in isa_levels("aarch64")}["neon-bf16"]
    )
    assert required_isa("x86-64-v4", "amd64").cpu_flags[-1] == "avx512vl"


def test_feature_levels_say_what_the_cpu_must_report_and_the_flags() -> None:
    bf16 = required_isa("avx512-bf16", "x86_64")
    assert bf16.cpu_flags == (*required_isa("x86-64-v4", "x86_64").cpu_flags, "avx512_bf16")
    assert bf16.flags["gnu"] == ("-march=x86-64-v4", "-mavx512bf16", "-mtune=generic")
    amx = required_isa("amx-bf16", "x86_64").cpu_flags
    assert amx == (*bf16.cpu_flags, "amx_tile", "amx_bf16")
    assert set(required_isa_levels("aarch64")) == {
        "neon-bf16", "dotprod", "bf16", "i8mm", "sve", "sve2",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "processor", "message"),
    [
        ("avx512bf16", "x86_64", "REQUIRES_ISA avx512bf16: not a CPU ISA level of x86_64 (did you mean 'avx512-bf16'?); known: x86-64-v2"),
        ("sve", "x86_64", "REQUIRES_ISA sve: not a CPU ISA level of x86_64; known:"),
        ("sve", "riscv64", "REQUIRES_ISA sve: ptkit knows no CPU ISA levels for processor 'riscv64'"),
    ],
)  # fmt: skip
def test_an_unknown_level_names_the_known_ones(name: str, processor: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):  # fmt: skip
        required_isa(name, processor)


def test_cpuinfo_is_read_for_x86_flags_and_arm_features(tmp_path: Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512_bf16\n\nprocessor\t: 1\n")
    assert cpuinfo_features(x86) == (frozenset({"fpu", "sse", "avx2", "avx512_bf16"}), str(x86))
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve bf16\n")
    features, _ = cpuinfo_features(arm)
    assert features is not None and missing_cpu_flags(
        required_isa("sve2", "aarch64"), features
    ) == ("sve2",)
    assert cpuinfo_features(tmp_path / "none")[0] is None
    empty = tmp_path / "empty"
    empty.write_text("processor\t: 0\n")
    assert cpuinfo_features(empty) == (None, f"{empty} has no flags or Features line")


def test_cpuinfo_fields_are_the_first_processors_and_the_read_is_bounded(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    second = "processor\t: 1\nvendor_id\t: GenuineIntel\n" + "x" * 100_000 + "\n"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\n" + second
    )
    assert cpuinfo_fields(cpuinfo) == {
        "processor": "0", "vendor_id": "AuthenticAMD", "model name": "AMD EPYC"
    }  # fmt: skip
    assert cpuinfo_fields(tmp_path / "none") == {}
    # A flags line past the first 64 KiB is not read: the first processor's comes first.
    late = tmp_path / "late"
    late.write_text("processor\t: 0\n" + "x" * 70_000 + "\nflags\t: avx2\n")
    assert cpuinfo_features(late)[0] is None


def test_this_cpu_is_read_from_this_machine() -> None:
    cpu = this_cpu()
    if sys.platform == "linux":
        assert cpu.source == "/proc/cpuinfo" and cpu.features
        assert cpu.features == cpuinfo_features(Path("/proc/cpuinfo"))[0]
    else:
        assert cpu.features is None


def test_an_unknown_cpu_runs_nothing_that_requires_a_level() -> None:
    unknown = CpuFacts("x86_64", None, "ptkit does not read the CPU's features on windows yet")
    problem = LINUX.required_isa_problem(["avx512-bf16"], unknown)
    assert problem is not None and "could die of an illegal instruction" in problem


def test_cmake_gets_the_flags_of_every_level_once() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit.platforms", "requires-isa", "x86_64", "GNU",
         "avx512-bf16", "avx512-vnni"],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    assert proc.stdout.splitlines() == [
        "LEVELS=avx512-bf16;avx512-vnni",
        "FLAGS=-march=x86-64-v4;-mavx512bf16;-mtune=generic;-mavx512f;-mavx512vl;-mavx512vnni",
    ]
    bad = subprocess.run(
        [sys.executable, "-m", "ptkit.platforms", "requires-isa", "x86_64", "MSVC", "amx"],
        capture_output=True, text=True, check=False, env={"PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.startswith("ptkit: REQUIRES_ISA amx: not a CPU ISA")
