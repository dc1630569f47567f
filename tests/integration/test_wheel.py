"""The built cpu wheel of ptkit-ops: its tag, metadata and contents, the release audit on
it, the native library's links and symbols, and one wheel serving two torch versions
(with the toolkit wheel it depends on)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from support import REPO, fresh_venv, run, run_op_tests

from ptkit.release.elf_audit import audit_elf
from ptkit.release.wheel_audit import audit_wheel

pytestmark = pytest.mark.integration

NATIVE = "ptkit_ops/_native"


@pytest.fixture(scope="module")
def toolkit_wheel() -> Path:
    """The toolkit wheel: $PTKIT_TEST_TOOLKIT_WHEEL (set by `make test`) or dist/toolkit/'s."""
    given = os.environ.get("PTKIT_TEST_TOOLKIT_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "toolkit").glob("ptkit-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no toolkit wheel to test: run `make toolkit` (make test does)")
    return wheels[-1].resolve()


def _read(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


def test_wheel_tag_version_and_requirements(ptkit_wheel: Path) -> None:
    name, version, _build, tags = parse_wheel_filename(ptkit_wheel.name)
    assert name == "ptkit-ops"
    assert version.local == "cpu"
    assert {(t.interpreter, t.abi) for t in tags} == {("py3", "none")}
    assert all(t.platform.startswith("linux_") or "manylinux" in t.platform for t in tags)
    meta = Parser().parsestr(_read(ptkit_wheel, ".dist-info/METADATA").decode())
    assert set(meta.get_all("Requires-Dist")) == {"torch>=2.10", "ptkit<0.2,>=0.1.0"}
    assert meta["Requires-Python"] == ">=3.10"
    wheel_info = Parser().parsestr(_read(ptkit_wheel, ".dist-info/WHEEL").decode())
    assert wheel_info["Root-Is-Purelib"] == "false"


def test_wheel_holds_library_and_matching_manifest(ptkit_wheel: Path) -> None:
    lib = _read(ptkit_wheel, f"{NATIVE}/libptkit_cpu.so")
    manifest = json.loads(_read(ptkit_wheel, f"{NATIVE}/ptkit_cpu.manifest.json"))
    assert manifest["sha256"] == hashlib.sha256(lib).hexdigest()
    assert manifest["library"] == "libptkit_cpu.so"
    assert (manifest["package"], manifest["variant"]) == ("ptkit_ops", "cpu")
    assert manifest["toolkit"]["name"] and manifest["toolkit"]["version"]
    assert manifest["torch"]["built_with"].startswith("2.")


def test_the_built_wheel_passes_the_release_audit(ptkit_wheel: Path) -> None:
    result = audit_wheel(ptkit_wheel)
    assert result.problems == (), result.format()
    (library,) = result.libraries
    assert library.name == "libptkit_cpu.so"
    assert "libtorch_cpu.so" in library.needed
    assert set(library.highest_versions) >= {"GLIBC", "GLIBCXX"}


def _retagged(wheel: Path, folder: Path, tag: str) -> Path:
    """The wheel's native files in a wheel tagged ``tag`` (name and WHEEL alike)."""
    name = wheel.name.rsplit("-", 1)[0] + f"-{tag}.whl"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(folder / name, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".dist-info/WHEEL"):
                text = data.decode()
                data = "".join(
                    f"Tag: py3-none-{tag}\n" if line.startswith("Tag:") else line
                    for line in text.splitlines(keepends=True)
                ).encode()
            dst.writestr(info, data)
    return folder / name


def test_a_build_on_this_glibc_is_not_manylinux_2_28(ptkit_wheel: Path, tmp_path: Path) -> None:
    """Built here (glibc 2.36, GCC 12): GLIBC_2.34 and newer GLIBCXX than manylinux_2_28
    allows, so only the release's manylinux image makes the recipe's tag."""
    wheel = _retagged(ptkit_wheel, tmp_path, f"manylinux_2_28_{platform.machine()}")
    problems = audit_wheel(wheel).problems
    assert problems
    assert all("does not allow" in p and "manylinux image" in p for p in problems), problems
    assert any("GLIBC_2.34" in p for p in problems)


def test_library_is_stable_abi_only(ptkit_wheel: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libptkit_cpu.so"
    lib.write_bytes(_read(ptkit_wheel, f"{NATIVE}/libptkit_cpu.so"))
    audit = audit_elf(lib)
    assert audit.problems == []
    assert not any(n.startswith(("libpython", "libtorch_python")) for n in audit.needed)
    assert "libtorch_cpu.so" in audit.needed
    assert audit.rpath == ()  # libtorch comes from the process that imported torch
    assert any(s.startswith("aoti_torch_") for s in audit.undefined)


def test_audit_flags_unstable_torch_symbols(tmp_path: Path) -> None:
    """The audit is not vacuous: a library built against torch's C++ API fails it."""
    torch_python = Path(__import__("torch").__file__).parent / "lib" / "libtorch_python.so"
    problems = audit_elf(torch_python).problems
    assert any("outside the stable ABI" in p for p in problems)


CHECK_SCRIPT = r"""
import json, torch, ptkit, ptkit_ops
decisions = [(d.library, d.status.value, dict(d.details)) for d in ptkit.runtime.load_decisions("ptkit_ops")]
errors = {}
torch.manual_seed(0)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = torch.randn(5, 1, 257).to(dtype); w = torch.randn(257).to(dtype)
    W = (torch.randn(33, 257) / 16).to(dtype); b = torch.randn(33).to(dtype)
    g = torch.randn(7, 130).to(dtype)
    pairs = {
        "rms_norm": (ptkit_ops.rms_norm(x, w), ptkit_ops.rms_norm_reference(x, w)),
        "fused_linear": (ptkit_ops.fused_linear(x, W, b, "silu"), ptkit_ops.fused_linear_reference(x, W, b, "silu")),
        "silu_and_mul": (ptkit_ops.silu_and_mul(g), ptkit_ops.silu_and_mul_reference(g)),
    }
    for op, (a, r) in pairs.items():
        errors[f"{op}/{dtype}"] = (a.float() - r.float()).abs().max().item() / max(r.float().abs().max().item(), 1.0)
routes = {r.op: r.implementation for r in ptkit.runtime.explain("ptkit_ops") if r.device_type == "cpu"}
print(json.dumps({"torch": torch.__version__, "ptkit": ptkit.__version__, "ptkit_ops": ptkit_ops.__version__,
                  "decisions": decisions, "routes": routes, "errors": errors}))
"""


@pytest.mark.parametrize(
    ("base_env", "torch_version"), [(".venv", "2.14.1"), (".venv-torch213", "2.13.0")]
)
def test_one_wheel_runs_on_two_torch_versions(
    ptkit_wheel: Path,
    toolkit_wheel: Path,
    tmp_path: Path,
    base_env: str,
    torch_version: str,
) -> None:
    base_python = REPO / base_env / "bin" / "python"
    if not base_python.exists():
        pytest.fail(f"{base_env} is missing: run scripts/bootstrap (make test does)")
    python = fresh_venv(tmp_path / "venv", base_python)
    # Both wheels from their files, nothing downloaded: torch comes from the base env, and
    # the toolkit's command-line dependency (click) is not needed to load the ops (the base
    # env of torch 2.13 has none). Resolving ptkit-ops -> ptkit from an index is
    # tests/integration/test_index_install.py's.
    run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            str(toolkit_wheel),
            str(ptkit_wheel),
        ]
    )
    out = json.loads(run([str(python), "-c", CHECK_SCRIPT], cwd=tmp_path).stdout)
    assert out["torch"].startswith(torch_version)
    assert (out["ptkit_ops"], out["ptkit"]) == ("0.1.0+cpu", "0.1.0")
    assert out["decisions"][0][:2] == ["libptkit_cpu.so", "loaded"]
    assert out["routes"] == {
        "rms_norm": "native",
        "fused_linear": "native",
        "silu_and_mul": "native",
    }
    worst = max(out["errors"].values())
    assert worst < 2e-2, out["errors"]
    # And the op test suite itself, native against reference, under this torch.
    run_op_tests(python)
