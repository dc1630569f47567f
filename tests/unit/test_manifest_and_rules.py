"""Manifest parsing and the loader's compatibility rules, case by case (no files loaded)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ptkit.runtime.loader import TorchFacts, check_compatibility
from ptkit.loading.manifest import ManifestError, parse_manifest
from ptkit.loading.switches import RuntimeSwitches

GOOD = {
    "schema_version": 1,
    "package": "ptkit",
    "namespace": "ptkit",
    "library": "libptkit_cpu.so",
    "backend": "cpu",
    "variant": "cpu",
    "toolkit": {"name": "gnu", "version": "12.2.0"},
    "targets": {"isa": ["x86-64-v3", "default"]},
    "dropped_targets": [],
    "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "sha256": "0" * 64,
}
P = Path("/pkg/_native/ptkit_cpu.manifest.json")


def test_good_manifest_parses() -> None:
    m = parse_manifest(GOOD, P)
    assert m.torch_target_version == (2, 10)
    assert m.library_path == Path("/pkg/_native/libptkit_cpu.so")
    assert m.to_json() == GOOD


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": 2}, "schema_version 2 is not supported"),
        ({"library": "../evil.so"}, "library must be a plain file name"),
        ({"backend": "opencl"}, "backend must be one of"),
        ({"sha256": "abc"}, "sha256 must be 64 lower-case hex digits"),
        ({"torch": {"target_version": "2"}}, "torch.target_version must look like '2.10'"),
        ({"ops": []}, "field 'ops' must be dict"),
        ({"schema_version": True}, "field 'schema_version' must be int"),
    ],
)
def test_bad_manifest_names_file_and_problem(change: dict, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as info:
        parse_manifest({**GOOD, **change}, P)
    assert str(P) in str(info.value)


def test_missing_field_is_named() -> None:
    data = dict(GOOD)
    del data["ops"]
    with pytest.raises(ManifestError, match="missing required field 'ops'"):
        parse_manifest(data, P)


TORCH_214_CUDA = TorchFacts("2.14.1+cu130", cuda="13.0", hip=None, has_xpu=False, has_mps=False)
TORCH_213_CPU = TorchFacts("2.13.0+cpu", cuda=None, hip=None, has_xpu=False, has_mps=False)
TORCH_29 = TorchFacts("2.9.1", cuda=None, hip=None, has_xpu=False, has_mps=False)
TORCH_ROCM = TorchFacts("2.14.1+rocm7.14", cuda=None, hip="7.14", has_xpu=False, has_mps=False)
NO_SWITCHES = RuntimeSwitches()


def _manifest(**changes: object):  # type: ignore[no-untyped-def]
    return dataclasses.replace(parse_manifest(GOOD, P), **changes)


@pytest.mark.parametrize(
    ("manifest_changes", "facts", "switches", "expected"),
    [
        ({}, TORCH_214_CUDA, NO_SWITCHES, None),
        ({}, TORCH_213_CPU, NO_SWITCHES, None),
        (
            {},
            TORCH_29,
            NO_SWITCHES,
            "needs torch >= 2.10 (stable ABI target), found 2.9.1; upgrade torch",
        ),
        (
            {"torch_target_version": (3, 0)},
            TORCH_214_CUDA,
            NO_SWITCHES,
            "built for the torch 3.x stable ABI",
        ),
        (
            {"platform": "linux-aarch64"},
            TORCH_214_CUDA,
            NO_SWITCHES,
            "built for linux-aarch64, this machine is linux-x86_64",
        ),
        (
            {"backend": "cuda"},
            TORCH_213_CPU,
            NO_SWITCHES,
            "torch 2.13.0+cpu is not a CUDA build; the cuda library needs one",
        ),
        ({"backend": "cuda"}, TORCH_ROCM, NO_SWITCHES, "is a ROCm build (HIP 7.14)"),
        ({"backend": "hip"}, TORCH_214_CUDA, NO_SWITCHES, "torch 2.14.1+cu130 is not a ROCm build"),
        (
            {"backend": "hip", "toolkit": {"name": "hip", "version": "7.14.0"}},
            TORCH_ROCM,
            NO_SWITCHES,
            None,
        ),
        ({"backend": "xpu"}, TORCH_214_CUDA, NO_SWITCHES, "was built without XPU support"),
        ({"backend": "metal"}, TORCH_214_CUDA, NO_SWITCHES, "was built without MPS support"),
        (
            {},
            TORCH_214_CUDA,
            RuntimeSwitches(frozenset({"cpu"})),
            "switched off by PTKIT_DISABLE_NATIVE",
        ),
        (
            {},
            TORCH_214_CUDA,
            RuntimeSwitches(force_reference=True),
            "switched off by PTKIT_FORCE_REFERENCE=1",
        ),
    ],
)
def test_compatibility_rules(manifest_changes, facts, switches, expected) -> None:  # type: ignore[no-untyped-def]
    reason = check_compatibility(_manifest(**manifest_changes), facts, switches, "linux-x86_64")
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_switches_parse_comma_lists_and_report_unknown_values() -> None:
    s = RuntimeSwitches.from_environ(
        {"PTKIT_DISABLE_NATIVE": " CPU, cuda ,, nope", "PTKIT_FORCE_REFERENCE": "maybe"}
    )
    assert s.disabled_backends == {"cpu", "cuda"}
    assert not s.force_reference
    assert any("unknown backend 'nope'" in p for p in s.problems)
    assert any("PTKIT_FORCE_REFERENCE: expected 1 or 0, got 'maybe'" in p for p in s.problems)
    assert RuntimeSwitches.from_environ({"PTKIT_DISABLE_NATIVE": "all"}).disabled_backends >= {
        "cpu",
        "cuda",
        "hip",
    }
    assert RuntimeSwitches.from_environ({"PTKIT_FORCE_REFERENCE": "1"}).force_reference
