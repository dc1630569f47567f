"""ptkit.cross: what a cross build's environment and toolchain file say (the build itself
runs in tests/integration/test_cross_build.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptkit.cross import CROSS_TARGETS, CrossBuild, CrossError, prepare_cross_build, write_toolchain


def test_every_cross_target_is_a_release_platform() -> None:
    from ptkit.platforms import RELEASE_PLATFORMS

    assert sorted(CROSS_TARGETS) == ["macosx_arm64", "win_amd64"]
    for name, target in CROSS_TARGETS.items():
        assert (
            RELEASE_PLATFORMS[name].os == {"Darwin": "macos", "Windows": "windows"}[target.system]
        )


@pytest.mark.parametrize(
    ("platform", "minimum", "tag", "lines"),
    [
        (
            "macosx_arm64",
            "14.0",
            "macosx_14_0_arm64",
            [
                "set(CMAKE_SYSTEM_NAME Darwin)",
                'set(CMAKE_OSX_DEPLOYMENT_TARGET "14.0" CACHE STRING "")',
            ],
        ),
        (
            "win_amd64",
            None,
            "win_amd64",
            ["set(CMAKE_SYSTEM_NAME Windows)", "set(CMAKE_SYSTEM_PROCESSOR AMD64)"],
        ),
    ],
)
def test_toolchain_and_environment(
    tmp_path: Path, platform: str, minimum: str | None, tag: str, lines: list[str]
) -> None:
    target = CROSS_TARGETS[platform]
    toolchain = write_toolchain(target, tmp_path, minimum)
    text = toolchain.read_text(encoding="utf-8").splitlines()
    assert "set(PTKIT_COMPILER_ID Zig)" in text
    for line in lines:
        assert line in text
    build = CrossBuild(target, tmp_path / "torch", toolchain, minimum)
    assert build.wheel_tag == tag
    env = build.environment()
    assert env["CMAKE_TOOLCHAIN_FILE"] == str(toolchain)
    assert env["PTKIT_TARGET_TORCH"] == str(tmp_path / "torch")
    assert ("MACOSX_DEPLOYMENT_TARGET" in env) == (minimum is not None)
    # The compiler commands CMake calls are real scripts that run zig for the target.
    script = (tmp_path / "zig-c++").read_text(encoding="utf-8")
    assert f"'-m' 'ziglang' 'c++' '-target' '{target.zig_target}" in script


def test_zig_command_compiles_for_the_target(tmp_path: Path) -> None:
    pytest.importorskip("ziglang", reason="zig (PyPI ziglang) is in requirements/dev.txt")
    write_toolchain(CROSS_TARGETS["win_amd64"], tmp_path, None, python=sys.executable)
    source = tmp_path / "a.c"
    source.write_text("int f(void) { return 1; }\n", encoding="utf-8")
    subprocess.run(
        [str(tmp_path / "zig-cc"), "-c", str(source), "-o", str(tmp_path / "a.obj")],
        check=True,
        timeout=300,
    )
    assert (tmp_path / "a.obj").read_bytes()[:2] == b"\x64\x86"  # IMAGE_FILE_MACHINE_AMD64


def test_torch_wheels_of_any_minimum_macos_serve_the_macos_target() -> None:
    assert CROSS_TARGETS["macosx_arm64"].torch_tag == "macosx_14_0_arm64"
    assert CROSS_TARGETS["macosx_arm64"].torch_wheels == "macosx_*_arm64"
    assert CROSS_TARGETS["win_amd64"].torch_wheels == "win_amd64"


def test_unknown_platform_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(CrossError, match=r"--platform 'macosx_x86_64'.*macosx_arm64, win_amd64"):
        prepare_cross_build("macosx_x86_64", tmp_path)


def test_a_target_torch_without_a_minimum_macos_is_refused(tmp_path: Path) -> None:
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    (tmp_path / "torch" / "lib" / "libtorch_cpu.dylib").write_bytes(b"not a dylib")
    with pytest.raises(CrossError, match="cannot read the minimum macOS"):
        prepare_cross_build(
            "macosx_arm64", tmp_path, environ={"PTKIT_TARGET_TORCH": str(tmp_path / "torch")}
        )
