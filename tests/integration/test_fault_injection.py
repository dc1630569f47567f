"""Break an installed ptkit-ops for real and check that it degrades, and says why.

The cpu wheel is installed once into a fresh venv (module fixture); each test copies
the installed ``ptkit_ops`` package into its own folder, damages the copy's ``_native/``
(a truncated or foreign library, a broken or stale manifest, a missing file), and
runs the venv's Python on it in a subprocess (PYTHONPATH puts the copy first). In
every case ``import ptkit_ops`` must succeed, the reference must serve the ops (bit
for bit), and ``load_decisions()`` / ``explain()`` must give the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import REPO, fresh_venv, python_env, run

from ptkit_ops import OPS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

LIBRARY = "libptkit_cpu.so"
MANIFEST = "ptkit_cpu.manifest.json"

# ELF header: e_ident[EI_CLASS] at 4, e_machine (little-endian u16) at 18.
E_MACHINE = 18
EM_X86_64, EM_AARCH64 = 62, 183

PROBE = r"""
import json
import torch
import ptkit.runtime
import ptkit_ops
from ptkit_ops import _library as lib

torch.manual_seed(0)
checks = {}
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(4, 64, dtype=dtype)
    w = torch.randn(64, dtype=dtype)
    weight = torch.randn(32, 64, dtype=dtype)
    bias = torch.randn(32, dtype=dtype)
    gated = torch.randn(4, 64, dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    checks[f"rms_norm/{name}"] = torch.equal(
        torch.ops.ptkit.rms_norm(x, w, 1e-6), lib.rms_norm_reference(x, w, 1e-6)
    )
    checks[f"fused_linear/{name}"] = torch.equal(
        torch.ops.ptkit.fused_linear(x, weight, bias, "gelu"),
        lib.fused_linear_reference(x, weight, bias, "gelu"),
    )
    checks[f"silu_and_mul/{name}"] = torch.equal(
        torch.ops.ptkit.silu_and_mul(gated), lib.silu_and_mul_reference(gated)
    )
print(json.dumps({
    "ptkit_ops": ptkit_ops.__file__,
    "matches_reference": checks,
    "decisions": [
        {"library": d.library, "status": d.status.value, "reason": d.reason}
        for d in ptkit.runtime.load_decisions("ptkit_ops")
    ],
    "cpu_routes": [r.to_json() for r in ptkit.runtime.explain("ptkit_ops") if r.device_type == "cpu"],
}))
"""


@dataclasses.dataclass(frozen=True)
class Installed:
    python: Path
    package: Path  # site-packages/ptkit_ops of the venv


@dataclasses.dataclass(frozen=True)
class Copy:
    """A private copy of the installed package, first on the probe's PYTHONPATH."""

    python: Path
    root: Path  # the folder holding ptkit_ops/

    @property
    def native(self) -> Path:
        return self.root / "ptkit_ops" / "_native"

    def probe(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), "-c", PROBE],
            env=python_env(PYTHONPATH=str(self.root)),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def probe_ok(self) -> dict[str, Any]:
        proc = self.probe()
        assert proc.returncode == 0, _describe_exit(proc)
        out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        assert Path(out["ptkit_ops"]).resolve().is_relative_to(self.root.resolve()), (
            f"the probe imported {out['ptkit_ops']}, not the damaged copy under {self.root}"
        )
        return out


def _describe_exit(proc: subprocess.CompletedProcess[str]) -> str:
    how = f"exit code {proc.returncode}"
    if proc.returncode < 0:
        how = f"killed by {signal.Signals(-proc.returncode).name}"
    return f"`import ptkit_ops` did not survive ({how})\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


@pytest.fixture(scope="module")
def installed(ptkit_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """One venv for the module (creating one takes ~10 s) with the cpu wheel in it."""
    venv = tmp_path_factory.mktemp("fault-venv") / "venv"
    python = fresh_venv(venv, REPO / ".venv" / "bin" / "python")
    # --ignore-installed: the base env (seen through the .pth file) may hold a ptkit-ops
    # of the same version, which pip would otherwise take as already installed. The
    # toolkit comes from the base env.
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed"]
    run([*pip, str(ptkit_wheel)])
    site = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    ).stdout.strip()
    package = Path(site) / "ptkit_ops"
    assert (package / "_native" / LIBRARY).is_file(), f"the wheel installed no {LIBRARY}"
    return Installed(python, package)


@pytest.fixture
def copy(installed: Installed, tmp_path: Path) -> Copy:
    root = tmp_path / "site"
    shutil.copytree(
        installed.package, root / "ptkit_ops", ignore=shutil.ignore_patterns("__pycache__")
    )
    return Copy(installed.python, root)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _edit_manifest(native: Path, **fields: Any) -> None:
    path = native / MANIFEST
    data = json.loads(path.read_text())
    for key, value in fields.items():
        if key == "torch_target_version":
            data["torch"]["target_version"] = value
        else:
            data[key] = value
    path.write_text(json.dumps(data, indent=2))


def _truncate(library: Path) -> None:
    data = library.read_bytes()
    library.write_bytes(data[: len(data) // 2])


def _foreign_architecture(library: Path) -> int:
    """Rewrite e_machine: the file is then, to the dynamic loader, a library for
    another CPU (no cross toolchain or multilib is needed). Returns the new value."""
    data = bytearray(library.read_bytes())
    assert data[:4] == b"\x7fELF", f"{library} is not an ELF file"
    current = int.from_bytes(data[E_MACHINE : E_MACHINE + 2], "little")
    foreign = EM_AARCH64 if current != EM_AARCH64 else EM_X86_64
    data[E_MACHINE : E_MACHINE + 2] = foreign.to_bytes(2, "little")
    library.write_bytes(bytes(data))
    return foreign


def _cpu_decision(out: dict[str, Any], library: str = LIBRARY) -> dict[str, str]:
    matching = [d for d in out["decisions"] if d["library"] == library]
    assert len(matching) == 1, f"expected one decision for {library}, got {out['decisions']}"
    return matching[0]


def _assert_reference_serves_cpu(out: dict[str, Any], reason_part: str | None = None) -> None:
    """The reference computed every op (bit-identical results), and explain() says so."""
    assert out["matches_reference"] and all(out["matches_reference"].values()), out[
        "matches_reference"
    ]
    routes = out["cpu_routes"]
    assert {r["op"] for r in routes} == set(OPS)
    for route in routes:
        assert route["implementation"] == "reference", route
        if reason_part is not None:
            assert reason_part in route["reason"], route


def test_undamaged_copy_loads_the_native_library(copy: Copy) -> None:
    """The control: without a fault the copy loads its library and explain() says native,
    so the faults below are what sends the ops to the reference."""
    out = copy.probe_ok()
    assert _cpu_decision(out)["status"] == "loaded"
    assert {r["implementation"] for r in out["cpu_routes"]} == {"native"}


def test_truncated_library_fails_its_sha256_check(copy: Copy) -> None:
    _truncate(copy.native / LIBRARY)
    out = copy.probe_ok()
    decision = _cpu_decision(out)
    assert decision["status"] == "failed"
    assert "does not match its manifest" in decision["reason"]
    assert "modified or truncated" in decision["reason"]
    _assert_reference_serves_cpu(out, "does not match its manifest")


def test_truncated_library_with_a_matching_manifest_fails_to_load(copy: Copy) -> None:
    library = copy.native / LIBRARY
    _truncate(library)
    _edit_manifest(copy.native, sha256=_sha256(library))
    out = copy.probe_ok()
    decision = _cpu_decision(out)
    assert decision["status"] == "failed"
    assert f"{LIBRARY} is truncated" in decision["reason"]
    _assert_reference_serves_cpu(out, f"{LIBRARY} is truncated")


def test_library_for_another_architecture_is_refused_before_dlopen(copy: Copy) -> None:
    library = copy.native / LIBRARY
    foreign = _foreign_architecture(library)
    _edit_manifest(copy.native, sha256=_sha256(library))  # its platform still says x86-64
    out = copy.probe_ok()
    decision = _cpu_decision(out)
    assert decision["status"] == "failed"
    names = {EM_AARCH64: "aarch64", EM_X86_64: "x86_64"}
    assert f"{LIBRARY} was built for {names[foreign]}; this machine is" in decision["reason"]
    _assert_reference_serves_cpu(out, "was built for")


def test_invalid_manifest_json(copy: Copy) -> None:
    (copy.native / MANIFEST).write_text('{"backend": "cpu", "library": ')
    out = copy.probe_ok()
    decision = _cpu_decision(out, MANIFEST)  # unreadable: only the file name is known
    assert decision["status"] == "failed"
    assert decision["reason"].startswith("unreadable manifest: ")
    assert "not valid JSON" in decision["reason"]
    _assert_reference_serves_cpu(out)


def test_invalid_manifest_json_is_named_by_explain(copy: Copy) -> None:
    (copy.native / MANIFEST).write_text('{"backend": "cpu", "library": ')
    _assert_reference_serves_cpu(copy.probe_ok(), MANIFEST)


def test_sha256_mismatch(copy: Copy) -> None:
    library = copy.native / LIBRARY
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    library.write_bytes(bytes(data))
    out = copy.probe_ok()
    decision = _cpu_decision(out)
    assert decision["status"] == "failed"
    assert "does not match its manifest" in decision["reason"]
    _assert_reference_serves_cpu(out, "does not match its manifest")


def test_manifest_needing_a_newer_torch_is_skipped(copy: Copy) -> None:
    _edit_manifest(copy.native, torch_target_version="2.99")
    out = copy.probe_ok()
    decision = _cpu_decision(out)
    assert decision["status"] == "skipped"
    assert "needs torch >= 2.99" in decision["reason"]
    _assert_reference_serves_cpu(out, "needs torch >= 2.99")


def test_missing_library_file(copy: Copy) -> None:
    (copy.native / LIBRARY).unlink()
    out = copy.probe_ok()
    decision = _cpu_decision(out)
    assert decision["status"] == "failed"
    assert f"library file {LIBRARY} is missing next to its manifest" in decision["reason"]
    _assert_reference_serves_cpu(out, "is missing next to its manifest")
