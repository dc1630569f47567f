"""The built wheel: its tag, metadata and contents, the native library's links and
symbols, and one wheel serving two torch versions."""

from __future__ import annotations

import hashlib
import json
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from support import REPO, fresh_venv, run, run_op_tests

from ptkit.release.audit import audit_elf

pytestmark = pytest.mark.integration


def _read(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


def test_wheel_tag_version_and_requirements(ptkit_wheel: Path) -> None:
    name, version, _build, tags = parse_wheel_filename(ptkit_wheel.name)
    assert name == "ptkit"
    assert version.local == "cpu"
    assert {(t.interpreter, t.abi) for t in tags} == {("py3", "none")}
    assert all(t.platform.startswith("linux_") or "manylinux" in t.platform for t in tags)
    meta = Parser().parsestr(_read(ptkit_wheel, ".dist-info/METADATA").decode())
    assert "torch>=2.10" in meta.get_all("Requires-Dist")
    assert meta["Requires-Python"] == ">=3.10"
    wheel_info = Parser().parsestr(_read(ptkit_wheel, ".dist-info/WHEEL").decode())
    assert wheel_info["Root-Is-Purelib"] == "false"


def test_wheel_holds_library_and_matching_manifest(ptkit_wheel: Path) -> None:
    lib = _read(ptkit_wheel, "ptkit/_native/libptkit_cpu.so")
    manifest = json.loads(_read(ptkit_wheel, "ptkit/_native/ptkit_cpu.manifest.json"))
    assert manifest["sha256"] == hashlib.sha256(lib).hexdigest()
    assert manifest["library"] == "libptkit_cpu.so"
    assert manifest["toolkit"]["name"] and manifest["toolkit"]["version"]
    assert manifest["torch"]["built_with"].startswith("2.")


def test_library_is_stable_abi_only(ptkit_wheel: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libptkit_cpu.so"
    lib.write_bytes(_read(ptkit_wheel, "ptkit/_native/libptkit_cpu.so"))
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
import json, torch, ptkit
decisions = [(d.library, d.status.value, dict(d.details)) for d in ptkit.runtime.load_decisions()]
errors = {}
torch.manual_seed(0)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = torch.randn(5, 1, 257).to(dtype); w = torch.randn(257).to(dtype)
    W = (torch.randn(33, 257) / 16).to(dtype); b = torch.randn(33).to(dtype)
    g = torch.randn(7, 130).to(dtype)
    pairs = {
        "rms_norm": (ptkit.ops.rms_norm(x, w), ptkit.ops.rms_norm_reference(x, w)),
        "fused_linear": (ptkit.ops.fused_linear(x, W, b, "silu"), ptkit.ops.fused_linear_reference(x, W, b, "silu")),
        "silu_and_mul": (ptkit.ops.silu_and_mul(g), ptkit.ops.silu_and_mul_reference(g)),
    }
    for op, (a, r) in pairs.items():
        errors[f"{op}/{dtype}"] = (a.float() - r.float()).abs().max().item() / max(r.float().abs().max().item(), 1.0)
routes = {r.op: r.implementation for r in ptkit.runtime.explain() if r.device_type == "cpu"}
print(json.dumps({"torch": torch.__version__, "ptkit": ptkit.__version__, "decisions": decisions,
                  "routes": routes, "errors": errors}))
"""


@pytest.mark.parametrize(
    ("base_env", "torch_version"), [(".venv", "2.14.1"), (".venv-torch213", "2.13.0")]
)
def test_one_wheel_runs_on_two_torch_versions(
    ptkit_wheel: Path, tmp_path: Path, base_env: str, torch_version: str
) -> None:
    base_python = REPO / base_env / "bin" / "python"
    if not base_python.exists():
        pytest.fail(f"{base_env} is missing: run scripts/bootstrap (make test does)")
    python = fresh_venv(tmp_path / "venv", base_python)
    # A real install with dependency resolution: torch>=2.10 is satisfied by the base env.
    run([str(python), "-m", "pip", "install", "-q", str(ptkit_wheel)])
    out = json.loads(run([str(python), "-c", CHECK_SCRIPT], cwd=tmp_path).stdout)
    assert out["torch"].startswith(torch_version)
    assert out["ptkit"] == "0.1.0+cpu"
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
