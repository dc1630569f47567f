"""Manifest parsing: every field checked, every problem naming the file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from ptkit.loading.manifest import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    parse_manifest,
    read_manifest,
)

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
    "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130", "abi": "stable"},
    "platform": "linux-x86_64",
    "ops": {"rms_norm": ["float32"]},
    "requires_isa": [],
    "sha256": "0" * 64,
}
P = Path("/pkg/_native/ptkit_cpu.manifest.json")
CLASSIC = {
    **GOOD,
    "torch": {"target_version": "2.14", "built_with": "2.14.1+cu130", "abi": "torch", "cxx11_abi": True},
    "requires_isa": ["avx512-bf16"],
}  # fmt: skip
# Written before torch.abi and requires_isa existed: a stable library that requires nothing.
OLD = {
    **{k: v for k, v in GOOD.items() if k != "requires_isa"},
    "torch": {"target_version": "2.10", "built_with": "2.14.1+cu130"},
}
SCHEMA = json.loads(
    (Path(__file__).parents[2] / "src/ptkit/loading/manifest.schema.json").read_text()
)


def test_good_manifest_parses() -> None:
    m = parse_manifest(GOOD, P)
    assert m.torch_target_version == (2, 10)
    assert m.library_path == Path("/pkg/_native/libptkit_cpu.so")
    assert m.to_json() == GOOD


def test_a_torch_mode_manifest_records_what_it_binds_to() -> None:
    m = parse_manifest(CLASSIC, P)
    assert (m.torch_abi, m.torch_built_with, m.torch_cxx11_abi) == ("torch", "2.14.1+cu130", True)
    assert m.requires_isa == ("avx512-bf16",)
    assert m.to_json() == CLASSIC


def test_a_manifest_older_than_the_abi_field_reads_as_stable() -> None:
    m = parse_manifest(OLD, P)
    assert (m.torch_abi, m.torch_cxx11_abi, m.requires_isa) == ("stable", None, ())
    assert m.to_json() == GOOD


@pytest.mark.parametrize("document", [GOOD, CLASSIC, OLD], ids=["stable", "torch", "old"])
def test_the_schema_takes_what_the_parser_takes(document: dict) -> None:
    import jsonschema

    jsonschema.validate(document, SCHEMA)
    jsonschema.validate(parse_manifest(document, P).to_json(), SCHEMA)


def test_the_schema_and_the_parser_name_the_same_fields() -> None:
    """Every field the schema allows is one to_json writes, and the other way round."""
    registrations = {"namespaces": ["demo"], "schemas": {}, "kernels": {"demo::op": ["CPU"]}}
    written = parse_manifest({**CLASSIC, "registrations": registrations}, P).to_json()
    assert written["registrations"] == registrations
    assert set(SCHEMA["properties"]) == set(written)
    assert set(SCHEMA["properties"]["torch"]["properties"]) == set(written["torch"])


BAD_BINDINGS = [
    ({"torch": {**CLASSIC["torch"], "abi": "classic"}}, "torch.abi must be one of stable, torch"),
    ({"torch": {**CLASSIC["torch"], "cxx11_abi": 1}}, "torch.cxx11_abi must be true or false"),
    (
        {"torch": {"target_version": "2.14", "built_with": "", "abi": "torch"}},
        "torch.built_with must be the torch version of an ABI torch build",
    ),
    ({"requires_isa": "avx512-bf16"}, "requires_isa must be a list of strings"),
]


@pytest.mark.parametrize(("change", "message"), BAD_BINDINGS)
def test_a_bad_binding_is_refused_by_both(change: dict, message: str) -> None:
    import jsonschema

    document = {**CLASSIC, **change}
    with pytest.raises(ManifestError, match=message):
        parse_manifest(document, P)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


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


# --- hostile files: every one a ManifestError naming the file, none a hang or a blow-up ---


def _read_within(path: Path, seconds: float = 5.0) -> str:
    """read_manifest's error, from a thread that must finish in time (a FIFO would hang)."""
    result: list[str] = []

    def run() -> None:
        try:
            read_manifest(path)
            result.append("read")
        except ManifestError as exc:
            result.append(str(exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"read_manifest({path}) hangs"
    return result[0]


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "ptkit_cpu.manifest.json"
    os.mkfifo(fifo)
    assert _read_within(fifo) == f"{fifo}: cannot read: is a FIFO, not a regular file"


def test_a_link_to_a_device_is_refused_not_read(tmp_path: Path) -> None:
    link = tmp_path / "ptkit_cpu.manifest.json"
    link.symlink_to("/dev/zero")
    assert _read_within(link) == f"{link}: cannot read: is a device, not a regular file"


def test_a_huge_file_is_refused_after_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "ptkit_cpu.manifest.json"
    with big.open("wb") as f:
        f.truncate(MAX_MANIFEST_BYTES * 64)  # sparse: 64 MiB of zeros, no disk used
    assert _read_within(big) == (
        f"{big}: cannot read: is larger than {MAX_MANIFEST_BYTES} bytes, more than it can be"
    )


def test_deep_nesting_is_refused_before_parsing(tmp_path: Path) -> None:
    deep = tmp_path / "ptkit_cpu.manifest.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested more than 16 levels deep" in _read_within(deep)


def test_invalid_utf8_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "ptkit_cpu.manifest.json"
    bad.write_bytes(json.dumps(GOOD).encode()[:20] + b"\xff\xfe" + b"}")
    assert _read_within(bad) == f"{bad}: not UTF-8 text (byte 20); rebuild the library"


def test_a_folder_named_like_a_manifest_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ptkit_cpu.manifest.json"
    folder.mkdir()
    message = _read_within(folder)
    assert message.startswith(f"{folder}: cannot read: ")


def test_a_good_file_still_reads(tmp_path: Path) -> None:
    good = tmp_path / "ptkit_cpu.manifest.json"
    good.write_text(json.dumps(GOOD))
    assert read_manifest(good).library == "libptkit_cpu.so"
