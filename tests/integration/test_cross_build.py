"""`ptkit build --platform macosx_arm64 | win_amd64`: ptkit-ops' cpu wheel cross-built on
this Linux machine with zig against the target's own torch (downloaded once into ptkit's
cache), audited as a Mach-O or PE wheel and shown by `ptkit inspect`. Compile and link
proofs: nothing of them runs here (repair and smoke are skipped, and say so).

About 2.5 minutes per platform on two cores (zig's configure checks are most of it), plus
the first download of torch's macOS and Windows wheels (~250 MB)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest
from support import copy_working_tree

from ptkit.release import pipeline
from ptkit.release.pipeline import PipelineResult
from ptkit.release.wheel_audit import audit_wheel

pytestmark = pytest.mark.integration

pytest.importorskip("ziglang", reason="zig (PyPI ziglang, requirements/dev.txt) cross-compiles")

EXPECTED = {
    # platform: (wheel tag, library, what it must link, the manifest's platform)
    "macosx_arm64": (
        "macosx_14_0_arm64",
        "libptkit_cpu.dylib",
        "@rpath/libtorch_cpu.dylib",
        "darwin-arm64",
    ),
    "win_amd64": ("win_amd64", "ptkit_cpu.dll", "torch_cpu.dll", "windows-amd64"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[PipelineResult, str]]:
    source = copy_working_tree(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("cross")
    results: dict[str, tuple[PipelineResult, str]] = {}
    for platform in EXPECTED:
        lines: list[str] = []
        result = pipeline.run_pipeline(
            "cpu",
            repo=source,
            dist=out / "dist",
            build_root=out / "build",
            compiler_cache="none",
            echo=lines.append,
            cross_platform=platform,
        )
        results[platform] = (result, "\n".join(lines))
    return results


@pytest.mark.parametrize("platform", list(EXPECTED))
def test_cross_wheel_has_the_platform_tag_library_and_manifest(
    built: dict[str, tuple[PipelineResult, str]], platform: str
) -> None:
    result, log = built[platform]
    tag, library, _, manifest_platform = EXPECTED[platform]
    assert result.wheel.name.endswith(f"-py3-none-{tag}.whl")
    with zipfile.ZipFile(result.wheel) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("ptkit_ops/_native/ptkit_cpu.manifest.json"))
    assert f"ptkit_ops/_native/{library}" in names
    assert manifest["platform"] == manifest_platform
    # Repair and smoke do not pretend: they say why nothing ran.
    assert "repair ok" in log and "skipped: a cross build for another OS" in log
    assert f"skipped: {tag} code cannot run on this machine" in log


@pytest.mark.parametrize("platform", list(EXPECTED))
def test_cross_wheel_passes_its_formats_audit(
    built: dict[str, tuple[PipelineResult, str]], platform: str
) -> None:
    result, _ = built[platform]
    _, library, link, _ = EXPECTED[platform]
    audit = audit_wheel(result.wheel)
    assert audit.problems == ()
    (only,) = audit.libraries
    assert only.name == library
    assert link in only.needed
    assert only.binary_format == {"macosx_arm64": "Mach-O", "win_amd64": "PE"}[platform]
    if platform == "macosx_arm64":
        assert only.minimum_os == "14.0" and only.architectures == ("arm64",)
    else:
        assert only.architectures == ("AMD64",)
        assert not any(n.lower().startswith("python") for n in only.needed)


def test_windows_cross_build_has_the_x86_64_v3_kernels(
    built: dict[str, tuple[PipelineResult, str]],
) -> None:
    """zig's dialect (-mcpu=x86_64_v3) builds the AVX2 copy; the macOS arm64 build has the
    baseline only (no Arm levels yet)."""
    assert "isa x86-64-v3, default" in built["win_amd64"][1]
    assert "isa default (" in built["macosx_arm64"][1]


@pytest.mark.parametrize("platform", list(EXPECTED))
def test_inspect_shows_the_cross_wheels_links(
    built: dict[str, tuple[PipelineResult, str]], platform: str
) -> None:
    result, _ = built[platform]
    _, library, link, _ = EXPECTED[platform]
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "inspect", str(result.wheel)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert library in proc.stdout and link in proc.stdout
