"""The platform table: library names, release platforms, wheel tags, ISA levels."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptkit.platforms import (
    PLATFORMS,
    RELEASE_PLATFORMS,
    current_platform,
    manifest_platform,
    release_platform_for,
)
from ptkit.platforms.__main__ import main as platforms_main
from ptkit.platforms.elf import elf_problem


def test_one_module_per_platform_in_one_table() -> None:
    assert list(PLATFORMS) == ["linux", "macos", "windows"]
    for name, platform in PLATFORMS.items():
        assert type(platform).__module__ == f"ptkit.platforms.{name}"


@pytest.mark.parametrize(
    ("platform", "library", "native", "not_native"),
    [
        ("linux", "libptkit_cpu.so", "lib/libfoo.so.1", "ptkit_cpu.dll"),
        ("macos", "libptkit_cpu.dylib", "libfoo.dylib", "libfoo.so.1"),
        ("windows", "ptkit_cpu.dll", "foo.pyd", "libfoo.dylib"),
    ],
)
def test_library_file_names(platform: str, library: str, native: str, not_native: str) -> None:
    p = PLATFORMS[platform]
    assert p.library_file("ptkit_cpu") == library
    assert p.is_native_library(native)
    assert not p.is_native_library(not_native)


@pytest.mark.parametrize(
    ("system", "machine", "release"),
    [
        ("Linux", "x86_64", "manylinux_2_28_x86_64"),
        ("Linux", "aarch64", "manylinux_2_28_aarch64"),
        ("Darwin", "arm64", "macosx_arm64"),
        ("Windows", "AMD64", "win_amd64"),
        ("Darwin", "x86_64", None),
        ("FreeBSD", "amd64", None),
    ],
)
def test_release_platform_of_a_machine(system: str, machine: str, release: str | None) -> None:
    found = release_platform_for(system, machine)
    assert (found.name if found else None) == release


def test_release_platforms_carry_what_the_release_needs() -> None:
    assert list(RELEASE_PLATFORMS) == [
        "manylinux_2_28_x86_64",
        "manylinux_2_28_aarch64",
        "macosx_arm64",
        "win_amd64",
    ]
    for release in RELEASE_PLATFORMS.values():
        assert release.os in PLATFORMS
        assert release.runner and release.identifier and release.wheel_tag
    assert RELEASE_PLATFORMS["manylinux_2_28_x86_64"].image_option == "manylinux-x86_64-image"


def test_repair_commands_leave_out_what_they_are_given() -> None:
    linux = PLATFORMS["linux"].repair_command(["libtorch*.so", "libcudart.so.*"])
    assert linux.startswith("auditwheel repair --only-plat ")
    assert "--exclude 'libtorch*.so' --exclude 'libcudart.so.*'" in linux
    assert "{wheel}" in PLATFORMS["macos"].repair_command(["libtorch.dylib"])
    assert "delvewheel repair --exclude torch.dll" in PLATFORMS["windows"].repair_command(
        ["torch.dll"]
    )


def test_isa_levels_per_processor_and_dialect() -> None:
    levels = PLATFORMS["linux"].isa_levels("x86_64")
    assert [level.name for level in levels] == [
        "amx-bf16", "avx512-bf16", "x86-64-v4", "x86-64-v3", "x86-64-v2", "default",
    ]  # fmt: skip
    v3 = levels[3]
    assert v3.flags["gnu"] == ("-march=x86-64-v3", "-mtune=generic")
    assert v3.flags["msvc"] == ("/arch:AVX2",)
    assert levels[0].flags["gnu"][:2] == ("-march=x86-64-v4", "-mavx512bf16")
    assert [level.name for level in PLATFORMS["linux"].isa_levels("aarch64")] == [
        "neon-bf16",
        "default",
    ]


def test_msvc_builds_no_copy_of_the_levels_its_portable_kernels_cannot_use() -> None:
    """MSVC compiles the kernels' portable path, which has no bf16 dot products or tiles:
    a copy for those levels would be x86-64-v4's again under another name."""
    builds, skipped = PLATFORMS["windows"].isa_builds(
        ["amx-bf16", "avx512-bf16", "x86-64-v4"], "AMD64", "MSVC"
    )
    assert [name for name, _ in builds] == ["x86-64-v4", "default"]
    assert skipped == ("amx-bf16", "avx512-bf16")
    zig, _ = PLATFORMS["windows"].isa_builds(["amx-bf16", "x86-64-v3"], "AMD64", "Zig")
    assert zig[0] == ("amx-bf16", ("-mcpu=x86_64_v4+avx512bf16+amx_tile+amx_bf16",))


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ("Linux", ["TYPE=MODULE", "PREFIX=lib", "SUFFIX=.so"]),
        # macOS's MODULE is a bundle (-bundle): a kernel library is a SHARED dylib.
        ("Darwin", ["TYPE=SHARED", "PREFIX=lib", "SUFFIX=.dylib"]),
        ("Windows", ["TYPE=MODULE", "PREFIX=", "SUFFIX=.dll"]),
    ],
)
def test_library_command_tells_cmake_the_file(
    system: str, expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert platforms_main(["library", system]) == 0
    assert capsys.readouterr().out.split() == expected


def test_zig_dialect_has_its_own_cpu_flags(capsys: pytest.CaptureFixture[str]) -> None:
    windows = PLATFORMS["windows"]
    assert windows.compiler_dialect("Zig") == "zig"
    assert windows.compiler_dialect("MSVC") == "msvc"
    assert windows.compiler_dialect("Clang") == "gnu"
    builds, skipped = windows.isa_builds(["x86-64-v3"], "AMD64", "Zig")
    assert builds == (("x86-64-v3", ("-mcpu=x86_64_v3",)), ("default", ()))
    assert skipped == ()
    # A feature level's single -m flags are clang's, which zig passes on.
    assert platforms_main(["requires-isa", "AMD64", "Zig", "avx512-vnni"]) == 0
    assert "FLAGS=-mavx512f;-mavx512vl;-mavx512vnni" in capsys.readouterr().out
    # A level of the run-time table has its own zig spelling.
    assert platforms_main(["requires-isa", "AMD64", "Zig", "avx512-bf16"]) == 0
    assert "FLAGS=-mcpu=x86_64_v4+avx512bf16" in capsys.readouterr().out
    # An Arm level spelled with -march has no zig spelling: refused, not passed on.
    assert platforms_main(["requires-isa", "aarch64", "Zig", "dotprod"]) == 1
    assert "no flags for the zig compiler dialect" in capsys.readouterr().err


def test_macos_deployment_target_follows_torch() -> None:
    macos = PLATFORMS["macos"]
    assert macos.build_environment["MACOSX_DEPLOYMENT_TARGET"] == "14.0"
    assert RELEASE_PLATFORMS["macosx_arm64"].wheel_tag == "macosx_14_0_arm64"


def test_this_machine() -> None:
    assert current_platform() is PLATFORMS["linux"]
    assert manifest_platform() in ("linux-x86_64", "linux-aarch64")


def test_elf_check_catches_truncation_and_foreign_files(tmp_path: Path) -> None:
    import sys

    real = Path(sys.executable).resolve()
    assert elf_problem(real) is None
    truncated = tmp_path / "lib.so"
    truncated.write_bytes(real.read_bytes()[:200])
    assert "truncated" in (elf_problem(truncated) or "")
    text = tmp_path / "text.so"
    text.write_text("not a library")
    assert elf_problem(text) == "text.so is not an ELF shared library"
