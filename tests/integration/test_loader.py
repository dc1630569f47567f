"""The loader's decisions on real files, and the environment switches in real subprocesses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import child_python, python_env

import ptkit
import ptkit_ops
from ptkit.runtime import LoadStatus
from ptkit.runtime.loader import load_native_libraries

NATIVE = Path(ptkit_ops.__file__).resolve().parent / "_native"
MANIFEST = NATIVE / "ptkit_cpu.manifest.json"


@pytest.fixture
def native_copy(tmp_path: Path) -> Path:
    """A copy of the installed CPU library and its manifest, to damage."""
    for f in (MANIFEST, NATIVE / "libptkit_cpu.so"):
        shutil.copy2(f, tmp_path / f.name)
    return tmp_path / MANIFEST.name


def _edit_manifest(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for p in parents:
            node = node[p]
        node[leaf] = value
    path.write_text(json.dumps(data))


def _decide(manifest: Path) -> ptkit.runtime.LoadDecision:
    (decision,) = load_native_libraries([manifest])
    return decision


def test_installed_manifest_validates_against_the_schema() -> None:
    import jsonschema

    schema = json.loads(
        (Path(ptkit.__file__).parent / "loading" / "manifest.schema.json").read_text()
    )
    data = json.loads(MANIFEST.read_text())
    jsonschema.validate(data, schema)
    assert data["backend"] == "cpu" and data["variant"] == "cpu"
    assert data["torch"]["target_version"] == "2.10"
    assert set(data["ops"]) == set(ptkit_ops.OPS)
    assert all(d == ["float32", "float16", "bfloat16"] for d in data["ops"].values())
    assert "default" in data["targets"]["isa"]


def test_truncated_library_is_refused_before_dlopen(native_copy: Path) -> None:
    lib = native_copy.with_name("libptkit_cpu.so")
    lib.write_bytes(lib.read_bytes()[:4096])
    d = _decide(native_copy)
    assert d.status is LoadStatus.FAILED
    assert "does not match its manifest" in d.reason and "reinstall" in d.reason


def test_missing_library_is_reported(native_copy: Path) -> None:
    native_copy.with_name("libptkit_cpu.so").unlink()
    d = _decide(native_copy)
    assert d.status is LoadStatus.FAILED and "is missing next to its manifest" in d.reason


def test_invalid_manifest_json_is_reported(native_copy: Path) -> None:
    native_copy.write_text("{ not json")
    d = _decide(native_copy)
    assert d.status is LoadStatus.FAILED and "not valid JSON" in d.reason


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"torch__target_version": "2.99"}, "needs torch >= 2.99 (stable ABI target), found 2."),
        ({"torch__target_version": "3.0"}, "built for the torch 3.x stable ABI"),
        ({"platform": "darwin-arm64"}, "built for darwin-arm64, this machine is linux-"),
        ({"backend": "hip"}, "is not a ROCm build; the hip library needs one"),
    ],
)
def test_incompatible_manifest_is_skipped_with_reason(
    native_copy: Path, changes: dict, expected: str
) -> None:
    _edit_manifest(native_copy, **changes)
    d = _decide(native_copy)
    assert d.status is LoadStatus.SKIPPED
    assert expected in d.reason


EXPLAIN = (
    "import json, torch, ptkit, ptkit_ops\n"
    "x = torch.randn(3, 64); w = torch.randn(64)\n"
    "torch.testing.assert_close(ptkit_ops.rms_norm(x, w), ptkit_ops.rms_norm_reference(x, w))\n"
    "print(json.dumps({'decisions': [(d.library, d.status.value, d.reason) for d in ptkit.runtime.load_decisions()],"
    " 'routes': [r.to_json() for r in ptkit.runtime.explain()], 'text': ptkit.runtime.format_explain()}))\n"
)


def _explain(**env: str) -> dict:
    return json.loads(child_python(EXPLAIN, env=python_env(**env)).stdout)


def test_disable_native_cpu_switches_to_reference_visibly() -> None:
    out = _explain(PTKIT_DISABLE_NATIVE="cpu")
    assert out["decisions"] == [
        ["libptkit_cpu.so", "skipped", "native cpu code switched off by PTKIT_DISABLE_NATIVE"]
    ]
    cpu = [r for r in out["routes"] if r["device_type"] == "cpu"]
    assert {r["implementation"] for r in cpu} == {"reference"}
    assert all("PTKIT_DISABLE_NATIVE" in r["reason"] for r in cpu)


def test_disable_native_for_another_backend_keeps_cpu_native() -> None:
    out = _explain(PTKIT_DISABLE_NATIVE="cuda,xpu")
    assert {r["implementation"] for r in out["routes"] if r["device_type"] == "cpu"} == {"native"}


def test_force_reference_switches_everything_off() -> None:
    out = _explain(PTKIT_FORCE_REFERENCE="1")
    assert {r["implementation"] for r in out["routes"]} == {"reference"}
    assert "PTKIT_FORCE_REFERENCE=1" in out["text"]


def test_unknown_switch_value_is_reported_not_fatal() -> None:
    out = _explain(PTKIT_DISABLE_NATIVE="cpx")
    assert "PTKIT_DISABLE_NATIVE: unknown backend 'cpx'" in out["text"]
    assert {r["implementation"] for r in out["routes"] if r["device_type"] == "cpu"} == {"native"}


def test_import_survives_a_truncated_installed_library(tmp_path: Path) -> None:
    """A damaged install: `import ptkit_ops` still works, the reference serves, explain() says why."""
    package = tmp_path / "ptkit_ops"
    shutil.copytree(Path(ptkit_ops.__file__).parent, package)
    lib = package / "_native" / "libptkit_cpu.so"
    lib.write_bytes(lib.read_bytes()[:1000])
    out = json.loads(child_python(EXPLAIN, env=python_env(PYTHONPATH=str(tmp_path))).stdout)
    assert out["decisions"][0][1] == "failed"
    assert "does not match its manifest" in out["decisions"][0][2]
    cpu = [r for r in out["routes"] if r["device_type"] == "cpu"]
    assert {r["implementation"] for r in cpu} == {"reference"}


def test_ptkit_log_levels_show_or_hide_the_loaders_decisions() -> None:
    info = child_python("import ptkit_ops", env=python_env(PTKIT_LOG="info"))
    assert "ptkit.runtime INFO: ptkit: libptkit_cpu.so loaded:" in info.stderr
    default = child_python("import ptkit_ops", env=python_env())
    assert "libptkit_cpu.so loaded" not in default.stderr


def test_ptkit_log_off_silences_even_a_failed_load(tmp_path: Path) -> None:
    package = tmp_path / "ptkit_ops"
    shutil.copytree(Path(ptkit_ops.__file__).parent, package)
    (package / "_native" / "libptkit_cpu.so").unlink()
    loud = child_python("import ptkit_ops", env=python_env(PYTHONPATH=str(tmp_path)))
    assert "ptkit.runtime WARNING: ptkit: ptkit_cpu.manifest.json failed" in loud.stderr or (
        "libptkit_cpu.so failed" in loud.stderr
    )
    quiet = child_python(
        "import ptkit_ops", env=python_env(PYTHONPATH=str(tmp_path), PTKIT_LOG="off")
    )
    assert quiet.stderr == ""


def test_unknown_log_level_is_reported_not_fatal() -> None:
    out = _explain(PTKIT_LOG="chatty")
    assert (
        "PTKIT_LOG: expected one of debug, info, warning, error, off, got 'chatty'" in out["text"]
    )
