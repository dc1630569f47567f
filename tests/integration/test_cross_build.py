"""`ptkit build --platform macosx_arm64 | win_amd64`: ptkit-ops' cpu wheel cross-built on
this Linux machine with zig against the target's own torch (downloaded once into ptkit's
cache), audited as a Mach-O or PE wheel and shown by `ptkit inspect`. Compile and link
proofs as wheels (repair and smoke are skipped, and say so). The Windows library's ops do
run: under Wine (Debian's wine 8, installed by scripts/bootstrap), against torch's own
torch_cpu.dll and the Microsoft runtime DLLs of PyPI's msvc-runtime wheel, through a small
host program (tests/cpp/wine_host.cpp, built by zig) that does what `import ptkit_ops`
does with torch's stable C ABI; their outputs are compared with this machine's native
ptkit_ops on the same inputs. No Windows CPython can be had here.

With zig's cache cold (a fresh machine), zig first builds each target's libc++ and C runtime
(minutes on two cores); plus the first download of torch's macOS and Windows wheels (~250 MB)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from fresh_python import downloaded
from support import (
    REPO,
    assert_matches,
    copy_working_tree,
    cpu_lacks,
    linear_error_bound,
    rms_norm_error_bound,
    silu_error_bound,
    skip_if_bootstrap_left_out,
)

from ptkit.cross import prepare_cross_build
from ptkit.release import pipeline
from ptkit.release.pipeline import PipelineResult
from ptkit.release.wheel_audit import audit_wheel

# The first test waits for the module's two builds: 13 min on a quiet 2-core Zen 1 with zig's
# cache cold (zig builds the targets' libc++ and C runtimes first), past the suite's 900 s
# beside another worker.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]

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
    return {platform: _cross_build("cpu", platform, source, out) for platform in EXPECTED}


def _cross_build(
    variant: str, platform: str, source: Path, out: Path
) -> tuple[PipelineResult, str]:
    """``ptkit build --variant <variant> --platform <platform>`` of ``source`` into ``out``,
    with what it printed."""
    lines: list[str] = []
    result = pipeline.run_pipeline(
        variant,
        repo=source,
        dist=out / "dist",
        build_root=out / "build",
        compiler_cache="none",
        echo=lines.append,
        cross_platform=platform,
    )
    return result, "\n".join(lines)


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
    """zig's dialect (-mcpu=x86_64_v3 …) builds every x86-64 copy the recipe names; the
    macOS arm64 build has the NEON baseline and the BF16 level (Apple M2 and later)."""
    assert "isa amx-bf16, avx512-bf16, x86-64-v4, x86-64-v3, default" in built["win_amd64"][1]
    assert "isa neon-bf16, default (" in built["macosx_arm64"][1]


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


def test_the_metal_variants_macos_wheel_ships_its_metal_sources(
    tmp_path: Path,
) -> None:
    """The metal variant cross-built for macOS: its CPU dylib, and the Metal kernels as
    sources (no xcrun metal here: torch compiles them at first use), audited."""
    source = copy_working_tree(tmp_path / "source")
    result, log = _cross_build("metal", "macosx_arm64", source, tmp_path)
    assert result.wheel.name == "ptkit_ops-0.1.0+metal-py3-none-macosx_14_0_arm64.whl"
    with zipfile.ZipFile(result.wheel) as archive:
        native = sorted(n for n in archive.namelist() if "/_native/" in n)
        metal = json.loads(archive.read("ptkit_ops/_native/ptkit_metal.manifest.json"))
    assert native == [
        "ptkit_ops/_native/libptkit_cpu.dylib",
        "ptkit_ops/_native/ptkit_cpu.manifest.json",
        "ptkit_ops/_native/ptkit_metal.manifest.json",
        "ptkit_ops/_native/ptkit_metal.metal",
    ]
    assert metal["backend"] == "metal" and metal["platform"] == "darwin-arm64"
    assert "sources shipped, compiled at first use by torch.mps.compile_shader" in log
    assert audit_wheel(result.wheel).problems == ()


# --- the Windows library's ops under Wine -------------------------------------------------

HOST = REPO / "tests" / "cpp" / "wine_host.cpp"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# What the environment of a Windows program needs under Wine, and why:
WINE_ENV = {
    "WINEDEBUG": "-all",
    # libiomp5md's thread-affinity setup fails under Wine and aborts torch_cpu's first
    # parallel region.
    "KMP_AFFINITY": "disabled",
    # Linux gives a process the AMX tile registers only when it asks (arch_prctl
    # ARCH_REQ_XCOMP_PERM); Windows asks for every process, Wine does not, so oneDNN's
    # AMX kernels (torch's bf16 matmul, fused_linear's large-m path) would stop on an
    # illegal instruction on an AMX CPU. AVX-512 is the most it may use here.
    "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
}


@dataclass
class WineCase:
    op: str
    arguments: dict[str, str]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


def _tensor(fields: list[str]) -> tuple[str, torch.Tensor]:
    """``<role> <dtype> <ndim> <sizes…> <hex>`` of the host's output."""
    role, dtype, ndim = fields[0], DTYPES[fields[1]], int(fields[2])
    sizes = [int(f) for f in fields[3 : 3 + ndim]]
    data = bytearray.fromhex(fields[3 + ndim]) if len(fields) > 3 + ndim else bytearray()
    return role, torch.frombuffer(data, dtype=dtype).reshape(sizes).clone()


def _read_host_output(path: Path) -> tuple[str, list[WineCase]]:
    isa, cases, done = "", {}, None
    for line in path.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        fields = rest.split(" ")
        if kind == "isa":
            isa = rest
        elif kind == "case":
            arguments = dict(f.split("=", 1) for f in fields[2:])
            cases[int(fields[0])] = WineCase(fields[1], arguments)
        elif kind == "tensor":
            role, tensor = _tensor(fields[1:])
            cases[int(fields[0])].tensors[role] = tensor
        elif kind == "done":
            done = int(rest)
    assert done == len(cases), f"the host stopped early: {len(cases)} cases, done={done}"
    return isa, list(cases.values())


@pytest.fixture(scope="module")
def wine_folder(
    built: dict[str, tuple[PipelineResult, str]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A folder holding the host program, ptkit_cpu.dll from the cross wheel, torch's DLLs
    (linked) and the Microsoft runtime DLLs, with a Wine prefix of its own."""
    if shutil.which("wine") is None:
        skip_if_bootstrap_left_out("wine")  # left to this file's turn
        pytest.fail("wine is not installed: scripts/bootstrap installs it (apt-get install wine)")
    folder = tmp_path_factory.mktemp("wine")
    torch_dir = prepare_cross_build("win_amd64", folder / "build", echo=lambda _: None).torch
    runtime = downloaded(
        REPO / "build" / "msvc-runtime",
        ["msvc-runtime"],
        ["--no-deps", "--only-binary=:all:", "--platform", "win_amd64", "--python-version", "3.11"],
    )
    run_dir = folder / "run"
    run_dir.mkdir()
    for dll in (torch_dir / "lib").glob("*.dll"):
        (run_dir / dll.name).symlink_to(dll)
    (wheel,) = runtime.glob("msvc_runtime-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if re.search(r"\.data/data/Scripts/[^/]+\.dll$", name):
                (run_dir / Path(name).name).write_bytes(archive.read(name))
    result, _ = built["win_amd64"]
    with zipfile.ZipFile(result.wheel) as archive:
        for name in ("ptkit_cpu.dll", "ptkit_cpu.manifest.json"):
            (run_dir / name).write_bytes(archive.read(f"ptkit_ops/_native/{name}"))
    manifest = json.loads((run_dir / "ptkit_cpu.manifest.json").read_text())
    major, minor = (int(p) for p in manifest["torch"]["target_version"].split(".")[:2])
    from ptkit_ops._library import SCHEMAS

    (run_dir / "schemas.txt").write_text("\n".join(SCHEMAS.values()) + "\n")
    # The Release flags of the cross build (-O3): zig then reuses the libc++ it built for
    # the DLL instead of building another (about 100 s on two cores).
    compile_host = subprocess.run(
        [
            sys.executable, "-m", "ziglang", "c++", "-target", "x86_64-windows-gnu",
            "-std=c++17", "-O3", "-DNDEBUG", "-DTORCH_STABLE_ONLY",
            f"-DTORCH_TARGET_VERSION=0x{major:02x}{minor:02x}000000000000ULL",
            f"-I{torch_dir / 'include'}", str(HOST), f"-L{torch_dir / 'lib'}",
            "-ltorch_cpu", "-lc10", "-o", str(run_dir / "wine_host.exe"),
        ],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert compile_host.returncode == 0, compile_host.stderr
    return run_dir


def _wine(run_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **WINE_ENV, "WINEPREFIX": str(run_dir.parent / "prefix"), **env}
    return subprocess.run(
        ["wine", "wine_host.exe", "ptkit_cpu.dll", "schemas.txt", *args],
        cwd=run_dir,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize("isa", ["auto", "default"])
def test_windows_ops_under_wine_match_this_machines_native_ops(wine_folder: Path, isa: str) -> None:
    """Every op, dtype, activation and the GEMV and large-m paths of fused_linear: the
    Windows DLL's outputs against this machine's native ptkit_ops on the same inputs."""
    import ptkit_ops

    out = wine_folder / f"out-{isa}.txt"
    env = {} if isa == "auto" else {"PTKIT_CPU_ISA": isa}
    proc = _wine(wine_folder, out.name, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chosen, cases = _read_host_output(out)
    # The DLL picks its kernels by cpuid itself (zig's __builtin_cpu_supports is a stub),
    # never amx-bf16 under Wine: Windows' list of enabled XSAVE features, as Wine gives it,
    # has no tile state (Linux grants it only to a process that asks, and Wine does not).
    if isa == "auto":
        runnable = ("avx512-bf16", "x86-64-v4", "x86-64-v3")
        assert chosen == next((lv for lv in runnable if not cpu_lacks(lv)), "default")
    else:
        assert chosen == "default"
    seen = set()
    for case in cases:
        t = case.tensors
        dtype = t["x"].dtype
        seen.add((case.op, dtype))
        if case.op == "rms_norm":
            expected = ptkit_ops.rms_norm(t["x"], t["weight"], float(case.arguments["eps"]))
            bound = rms_norm_error_bound(expected)
        elif case.op == "silu_and_mul":
            expected = ptkit_ops.silu_and_mul(t["x"])
            bound = silu_error_bound(expected)
        else:
            bias = t.get("bias")
            activation = case.arguments["activation"]
            expected = ptkit_ops.fused_linear(t["x"], t["weight"], bias, activation)
            bound = linear_error_bound(t["x"], t["weight"], bias)
            if activation != "none":  # the activation's own polynomial, as silu's
                bound = bound + silu_error_bound(expected)
        assert_matches(t["out"], expected, dtype, bound=bound)
    assert len(cases) == 99
    assert seen == {
        (op, d) for op in ("rms_norm", "silu_and_mul", "fused_linear") for d in DTYPES.values()
    }
    print(f"\nWine, {chosen}: {len(cases)} cases match this machine's native ops")


def test_the_windows_error_path_with_zigs_runtime_ends_the_process(wine_folder: Path) -> None:
    """What this toolchain cannot do, pinned so that a change is seen: the kernel's
    argument check throws a C++ exception of zig's libc++abi, which torch's MSVC-built
    dispatcher (its catch of every exception is MSVC's, /EHsc) does not recognise, so the
    exception finds no handler and the process ends. With MSVC building the DLL (the
    release's Windows job) the exception is MSVC's and torch turns it into a Python
    RuntimeError: the wheel's smoke test checks that there (its native error path)."""
    proc = _wine(wine_folder, "unused.txt", "error")
    assert proc.returncode != 0
    assert (
        "libc++abi: terminating due to uncaught exception of type std::runtime_error: "
        "ptkit.rms_norm: expected x of dtype float32, float16 or bfloat16, got int64"
    ) in proc.stderr, proc.stderr
