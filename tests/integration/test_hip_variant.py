"""The rocm7.14 wheel, built here by Debian's hipcc (HIP 5.2) for gfx90a: what its
offload bundles hold, what it links, and how the loader treats it on this machine (a
CUDA build of torch, no AMD GPU). TheRock's ROCm 7.14 SDK is not reachable from here,
so `make test` overrides the recipe's targets with PTKIT_HIP_TARGETS=gfx90a."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from support import REPO, cmake_configure, fresh_venv, run

pytestmark = pytest.mark.integration


def test_rocm_wheel_is_tagged_and_holds_both_libraries(rocm_wheel: Path) -> None:
    _, version, _, tags = parse_wheel_filename(rocm_wheel.name)
    assert version.local == "rocm7.14"
    assert {(t.interpreter, t.abi) for t in tags} == {("py3", "none")}
    names = zipfile.ZipFile(rocm_wheel).namelist()
    native = sorted(n.split("/")[-1] for n in names if "/_native/" in n and not n.endswith("/"))
    assert native == [
        "libptkit_cpu.so",
        "libptkit_hip.so",
        "ptkit_cpu.manifest.json",
        "ptkit_hip.manifest.json",
    ]
    # torch's HIP runtime is used, never a second copy in the wheel.
    assert not [n for n in names if "libamdhip64" in n]


def test_inspect_lists_gfx90a_in_the_offload_bundles(rocm_wheel: Path) -> None:
    proc = run([sys.executable, "-m", "ptkit", "inspect", str(rocm_wheel), "--json"], cwd=Path("/"))
    reports = {r["library"]: r for r in json.loads(proc.stdout)}
    hip = reports["libptkit_hip.so"]
    assert hip["fatbin"] == {"gfx": ["gfx90a"]}
    assert hip["manifest"]["targets"] == {"gfx": ["gfx90a"]}
    assert hip["manifest"]["toolkit"]["name"] == "hip"
    assert hip["manifest"]["torch"]["target_version"] == "2.13"
    # Stable-ABI symbol scan, no libpython, no RPATH: the same audit as every library.
    assert hip["problems"] == []
    assert any(n.startswith("libamdhip64.so.") for n in hip["needed"])
    assert not any(
        n.startswith(("libtorch_cuda", "libtorch_hip", "libpython")) for n in hip["needed"]
    )
    text = run([sys.executable, "-m", "ptkit", "inspect", str(rocm_wheel)], cwd=Path("/")).stdout
    assert "offload bundle gfx: gfx90a" in text


LOAD_SCRIPT = r"""
import json, torch, ptkit.runtime, ptkit_ops
print(json.dumps({
    "decisions": {
        d.library: (d.status.value, d.reason) for d in ptkit.runtime.load_decisions("ptkit_ops")
    },
    "routes": [r.to_json() for r in ptkit.runtime.explain("ptkit_ops")],
    "rms": ptkit_ops.rms_norm(torch.ones(2, 8), torch.ones(8)).tolist(),
}))
"""


def test_hip_library_is_skipped_on_a_cuda_torch_and_the_cpu_library_still_loads(
    rocm_wheel: Path, tmp_path: Path
) -> None:
    python = fresh_venv(tmp_path / "venv", REPO / ".venv" / "bin" / "python")
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(rocm_wheel)])
    out = json.loads(run([str(python), "-c", LOAD_SCRIPT], cwd=tmp_path).stdout)
    status, reason = out["decisions"]["libptkit_hip.so"]
    assert status == "skipped"
    assert "is not a ROCm build" in reason
    assert out["decisions"]["libptkit_cpu.so"][0] == "loaded"
    cuda_rows = [r for r in out["routes"] if r["device_type"] == "cuda"]
    assert cuda_rows and {r["implementation"] for r in cuda_rows} == {"reference"}
    assert all("libptkit_hip.so skipped" in r["reason"] for r in cuda_rows)
    assert out["rms"] == [[pytest.approx(1.0, rel=1e-6)] * 8] * 2


def test_recipe_targets_this_compiler_lacks_fail_the_build_with_the_rocm_version_needed(
    tmp_path: Path,
) -> None:
    proc = cmake_configure(REPO, tmp_path, "-DPTKIT_VARIANT=rocm7.14")
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert (
        "ptkit_add_kernel_library(ptkit_hip): HIP target gfx942 needs ROCm >= 6.0; found HIP 5.2"
        in message
    )
    # The fix: the recipe's [toolkit] packages (TheRock's index), the override, optional.
    assert "Fix: install recipe rocm7.14's [toolkit] packages into the build Python" in message
    assert "pip install --index-url https://rocm.nightlies.amd.com/v2/gfx94X-dcgpu/" in message
    assert "or override the targets with PTKIT_HIP_TARGETS" in message
    assert "or mark gfx942 optional in the recipe (targets.hip-optional)" in message
    # Why, in the compiler's words.
    assert "ptkit: hipcc 5.2" in proc.stdout and "invalid target ID 'gfx942'" in proc.stdout
    report = json.loads((tmp_path / "ptkit-build-report.json").read_text())
    rows = {r["backend"]: r for r in report["backends"]}
    assert rows["hip"]["status"] == "failed" and "gfx942" in rows["hip"]["detail"]
    assert rows["cpu"]["status"] == "built"


def _fake_rocm_root(root: Path) -> Path:
    """A ROCm layout whose hipcc and runtime are Debian's (a stand-in for an SDK that is
    not reachable from here: TheRock's or /opt/rocm)."""
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    hipcc = root / "bin" / "hipcc"
    # Debian's hipcc finds its .pl beside it, and its clang under $ROCM_PATH: call it as is.
    hipcc.write_text('#!/bin/sh\nunset ROCM_PATH\nexec /usr/bin/hipcc "$@"\n')
    hipcc.chmod(0o755)
    runtime = sorted(Path("/usr/lib").glob("*/libamdhip64.so"))
    (root / "lib" / "libamdhip64.so").symlink_to(runtime[0])
    return root


def test_hip_toolchain_discovery_order_therock_then_rocm_path_then_system(tmp_path: Path) -> None:
    therock = _fake_rocm_root(tmp_path / "therock")
    rocm_path = _fake_rocm_root(tmp_path / "opt-rocm")
    tools = tmp_path / "tools"
    tools.mkdir()
    rocm_sdk = tools / "rocm-sdk"  # a fake of TheRock's command: only `path --root|--cmake`
    rocm_sdk.write_text(
        f'#!/bin/sh\n[ "$2" = --root ] && echo {therock} || echo {therock}/lib/cmake\n'
    )
    rocm_sdk.chmod(0o755)
    with_sdk, system = f"{tools}:/usr/bin:/bin", "/usr/bin:/bin"
    for build, env, expected in (
        (
            "a",
            {"PATH": with_sdk, "ROCM_PATH": str(rocm_path)},
            f"TheRock rocm-sdk {therock}/bin/hipcc",
        ),
        ("b", {"PATH": system, "ROCM_PATH": str(rocm_path)}, f"ROCM_PATH {rocm_path}/bin/hipcc"),
        ("c", {"PATH": system}, "PATH /usr/bin/hipcc"),
    ):
        env["PTKIT_HIP_TARGETS"] = "gfx90a"
        proc = cmake_configure(REPO, tmp_path / build, "-DPTKIT_VARIANT=rocm7.14", env=env)
        assert proc.returncode == 0, proc.stderr
        rows = {
            r["backend"]: r
            for r in json.loads((tmp_path / build / "ptkit-build-report.json").read_text())[
                "backends"
            ]
        }
        assert rows["hip"]["status"] == "built", (build, rows["hip"])
        assert expected in rows["hip"]["detail"], rows["hip"]["detail"]


def test_offload_audit_fails_when_the_manifest_claims_a_target_the_library_lacks(
    rocm_wheel: Path, tmp_path: Path
) -> None:
    """The check the build runs at install time (a lost target list must fail the build)."""
    with zipfile.ZipFile(rocm_wheel) as wheel:
        for name in wheel.namelist():
            if name.endswith(("libptkit_hip.so", "ptkit_hip.manifest.json")):
                (tmp_path / Path(name).name).write_bytes(wheel.read(name))
    manifest = tmp_path / "ptkit_hip.manifest.json"
    tool = [sys.executable, "-m", "ptkit.release.offload"]
    ok = subprocess.run(
        [*tool, "check", str(manifest)], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0 and "holds code objects for gfx90a" in ok.stdout
    data = json.loads(manifest.read_text())
    data["targets"]["gfx"] = ["gfx90a", "gfx942"]
    manifest.write_text(json.dumps(data))
    bad = subprocess.run(
        [*tool, "check", str(manifest)], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1
    assert (
        "AMD GPU code in libptkit_hip.so: ['gfx90a']; manifest says ['gfx90a', 'gfx942']"
        in bad.stderr
    )
    (tmp_path / "libptkit_hip.so").write_bytes(b"\x7fELF\x02\x01" + b"\0" * 10)
    broken = subprocess.run(
        [*tool, "check", str(manifest)], capture_output=True, text=True, check=False
    )
    assert broken.returncode == 2 and "no readable section table" in broken.stderr
