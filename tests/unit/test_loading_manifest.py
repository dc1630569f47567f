"""Manifest parsing: every field checked, every problem naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptkit.loading.manifest import ManifestError, parse_manifest

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
