"""What a library registers, in its manifest (``registrations``), and the rules written
on it once: the op table derived or checked (``ptkit.release.registrations.op_table``),
one defining library per namespace (``ptkit.loading.namespaces``). No library is
loaded here: tests/integration/test_shapes_*.py build and load real ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptkit.loading import namespaces
from ptkit.loading.manifest import (
    ManifestError,
    Registrations,
    parse_manifest,
    parse_manifest_text,
)
from ptkit.platforms import manifest_platform
from ptkit.release.registrations import (
    RegistrationError,
    child_command,
    op_table,
    record,
    signal_name,
)

P = Path("/pkg/_native/x_cpu.manifest.json")
SCHEMA = Path(__file__).resolve().parents[2] / "src" / "ptkit" / "loading" / "manifest.schema.json"


def _document(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "package": "x",
        "namespace": "x",
        "library": "libx_cpu.so",
        "backend": "cpu",
        "variant": "cpu",
        "toolkit": {"name": "gnu", "version": "12.2.0"},
        "targets": {"isa": ["default"]},
        "dropped_targets": [],
        "torch": {"target_version": "2.10", "built_with": "2.14.1"},
        "platform": manifest_platform(),
        "ops": {"a": ["float32"]},
        "sha256": "0" * 64,
    }
    data.update(changes)
    return data


def _registrations(
    kernels: dict[str, list[str]],
    schemas: dict[str, str] | None = None,
    held: list[str] | None = None,
) -> dict[str, Any]:
    return {"namespaces": held or [], "schemas": schemas or {}, "kernels": kernels}


def _manifest(library: str = "libx_cpu.so", backend: str = "cpu", **changes: Any):  # type: ignore[no-untyped-def]
    return parse_manifest(_document(library=library, backend=backend, **changes), P)


# --- the manifest field ------------------------------------------------------------------


def test_a_manifest_without_registrations_stays_valid() -> None:
    manifest = parse_manifest(_document(), P)
    assert manifest.registrations is None
    assert "registrations" not in manifest.to_json()


def test_registrations_round_trip_and_answer_questions() -> None:
    block = _registrations(
        {"x::a": ["CPU", "Meta"], "x::b": ["CUDA"]}, {"x::a": "x::a(Tensor t) -> Tensor"}, ["x"]
    )
    manifest = parse_manifest(_document(registrations=block), P)
    registrations = manifest.registrations
    assert registrations == Registrations(
        ("x",), {"x::a": "x::a(Tensor t) -> Tensor"}, {"x::a": ("CPU", "Meta"), "x::b": ("CUDA",)}
    )
    assert registrations.ops_with_kernel("CPU") == ("x::a",)
    assert registrations.defined_namespaces == ("x",)
    assert manifest.to_json()["registrations"] == block


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ([], "registrations must be an object, got list"),
        ({"namespaces": [], "schemas": {}}, "registrations is missing 'kernels'"),
        ({**_registrations({}), "extra": 1}, "registrations has unknown fields extra"),
        (_registrations({"a": ["CPU"]}), "expected a qualified op name (ns::op), got 'a'"),
        (_registrations({"x::a": "CPU"}), "registrations.kernels.x::a must be a list of strings"),
        ({**_registrations({}), "schemas": {"x::a": 1}}, "schemas must map ops to schema strings"),
    ],
)
def test_a_bad_registrations_block_is_a_manifest_error(block: Any, message: str) -> None:
    with pytest.raises(ManifestError, match="registrations") as info:
        parse_manifest(_document(registrations=block), P)
    assert message in str(info.value)


def test_the_json_schema_agrees_with_the_parser() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    good = _document(registrations=_registrations({"x::a": ["CPU"]}, {"x::a": "x::a() -> ()"}))
    jsonschema.validate(good, schema)
    parse_manifest(good, P)
    bad = _document(registrations=_registrations({"a": ["CPU"]}))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    with pytest.raises(ManifestError):
        parse_manifest(bad, P)


def test_a_manifest_with_registrations_is_within_the_nesting_limit() -> None:
    text = json.dumps(_document(registrations=_registrations({"x::a": ["CPU"]}))).encode()
    assert parse_manifest_text(text, P).registrations is not None


# --- the op table, written once ------------------------------------------------------------


def test_without_ops_the_table_is_every_op_with_a_kernel_of_the_backends_key() -> None:
    manifest = _manifest(ops={})
    registrations = Registrations(
        ("x",), {}, {"x::b": ("CPU",), "x::a": ("CPU", "Meta"), "x::only_meta": ("Meta",)}
    )
    assert op_table(manifest, registrations, ["float32", "bfloat16"]) == {
        "a": ("float32", "bfloat16"),
        "b": ("float32", "bfloat16"),
    }


def test_declared_ops_must_be_what_the_library_registers() -> None:
    manifest = _manifest(ops={"a": ["float32"], "gone": ["float32"]})
    registrations = Registrations((), {}, {"x::a": ("CPU",), "x::extra": ("CPU",)})
    with pytest.raises(RegistrationError) as info:
        op_table(manifest, registrations, [])
    assert str(info.value) == (
        "libx_cpu.so (cpu, namespace x): OPS says a, gone, but the library registers CPU "
        "kernels for a, extra (no CPU kernel for gone; undeclared CPU kernels for extra): make "
        "OPS the list the library registers, or leave OPS out to take it from the registrations"
    )
    agreeing = _manifest(ops={"a": ["float32"]})
    assert op_table(agreeing, Registrations((), {}, {"x::a": ("CPU",)}), []) == {"a": ("float32",)}


@pytest.mark.parametrize(
    ("ops", "kernels", "dtypes", "message"),
    [
        ({}, {}, ["float32"], "was built without OPS and registers no CPU kernel"),
        ({}, {"x::a": ("CPU",)}, [], "was built without OPS and without DTYPES"),
        (
            {"a": ["float32"]},
            {"x::a": ("CPU",), "y::b": ("CPU",)},
            [],
            "outside its namespace: y::b",
        ),
    ],
)
def test_op_table_errors_name_the_fix(
    ops: dict[str, list[str]], kernels: dict[str, tuple[str, ...]], dtypes: list[str], message: str
) -> None:
    with pytest.raises(RegistrationError, match=r"libx_cpu\.so") as info:
        op_table(_manifest(ops=ops), Registrations((), {}, kernels), dtypes)
    assert message in str(info.value)


def test_record_leaves_a_library_it_cannot_load_here_with_its_declared_ops(tmp_path: Path) -> None:
    other = "linux-aarch64" if manifest_platform() != "linux-aarch64" else "linux-x86_64"
    path = tmp_path / "x_cpu.manifest.json"
    path.write_text(json.dumps(_document(platform=other)))
    assert record(path) == (
        f"libx_cpu.so (cpu) is built for {other}: registrations not recorded on "
        f"{manifest_platform()}"
    )
    assert "registrations" not in json.loads(path.read_text())
    path.write_text(json.dumps(_document(platform=other, ops={})))
    with pytest.raises(RegistrationError, match=r"cannot be loaded on this .* give OPS"):
        record(path)


def test_record_of_metal_kernels_needs_ops(tmp_path: Path) -> None:
    path = tmp_path / "x_metal.manifest.json"
    path.write_text(json.dumps(_document(backend="metal", library="x.metal", ops={})))
    with pytest.raises(RegistrationError, match="Metal kernels are registered from Python"):
        record(path)


def test_the_child_command_and_signal_names() -> None:
    assert child_command("py", Path("/l/libx.so"), "cuda", ["x"]) == [
        "py", "-m", "ptkit.runtime.registrations", "/l/libx.so", "--backend", "cuda",
        "--namespace", "x",
    ]  # fmt: skip
    assert (signal_name(11), signal_name(6), signal_name(200)) == (
        "SIGSEGV",
        "SIGABRT",
        "signal 200",
    )


# --- one defining library per namespace --------------------------------------------------


def _definer(library: str, backend: str, held: list[str], schemas: dict[str, str]):  # type: ignore[no-untyped-def]
    return _manifest(library, backend, registrations=_registrations({}, schemas, held))


def test_two_libraries_defining_one_namespace_are_named_by_the_audit() -> None:
    cpu = _definer("libx_cpu.so", "cpu", ["x"], {"x::a": "x::a(Tensor t) -> Tensor"})
    cuda = _definer("libx_cuda.so", "cuda", ["x"], {"x::b": "x::b(Tensor t) -> Tensor"})
    kernels_only = _manifest("libx_hip.so", "hip", registrations=_registrations({"x::a": ["CUDA"]}))
    old = _manifest("libold.so")  # no registrations: not checked
    (problem,) = namespaces.duplicate_definitions([cpu, cuda, kernels_only, old])
    assert problem.startswith(
        "op namespace x is defined by 2 libraries: libx_cpu.so (cpu) has a STABLE_TORCH_LIBRARY "
        "/ TORCH_LIBRARY(x, m) block and the schemas of x::a; libx_cuda.so (cuda) has a "
        "STABLE_TORCH_LIBRARY / TORCH_LIBRARY(x, m) block and the schemas of x::b. Loading the "
        "second one aborts the process"
    )
    assert problem.endswith(f"fix: {namespaces.FIX}")
    assert namespaces.duplicate_definitions([cpu, kernels_only, old]) == []


def test_fragments_of_one_namespace_in_two_libraries_count_as_two_definers() -> None:
    first = _definer("libx_a.so", "cpu", [], {"x::a": "x::a() -> ()"})
    second = _definer("libx_b.so", "cpu", [], {"x::b": "x::b() -> ()"})
    (problem,) = namespaces.duplicate_definitions([first, second])
    assert "libx_a.so (cpu) has the schemas of x::a; libx_b.so (cpu) has the schemas of x::b" in (
        problem
    )


def test_the_loader_refuses_a_second_definer_naming_the_first() -> None:
    second = _definer("libx_cuda.so", "cuda", ["x"], {})
    assert namespaces.definition_conflict(second, {}) is None
    reason = namespaces.definition_conflict(second, {"x": "libx_cpu.so (of x, loaded)"})
    assert reason is not None and reason.startswith(
        "refused before loading: libx_cuda.so defines op namespace x (a STABLE_TORCH_LIBRARY / "
        "TORCH_LIBRARY(x, m) block), which libx_cpu.so (of x, loaded) already defines in this "
        "process; a second definition of a namespace aborts the process. Fix: "
    )
    assert namespaces.definition_conflict(_manifest(), {"x": "anything"}) is None


def test_a_second_kernel_library_for_an_op_and_backend_is_refused_naming_the_first() -> None:
    first, stale = _manifest(), _manifest("libx_cpu_old.so")
    claims = namespaces.Claims()
    assert claims.conflict(first) is None
    claims.record(first)
    reason = claims.conflict(stale)
    assert reason is not None and reason.startswith(
        "refused before loading: libx_cpu_old.so registers cpu kernels for x::a, which "
        "libx_cpu.so (of x, loaded) already registers"
    )
    # Another backend's kernels for the same op are what a GPU library is for.
    assert claims.conflict(_manifest("libx_cuda.so", backend="cuda")) is None


def test_the_installers_record_is_read_for_the_native_folder_only(tmp_path: Path) -> None:
    import base64
    import hashlib

    from ptkit.loading.record import recorded_sha256

    native = tmp_path / "x" / "_native"
    native.mkdir(parents=True)
    digest = hashlib.sha256(b"{}").digest()
    b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    dist_info = tmp_path / "x-0.1.0+cpu.dist-info"
    dist_info.mkdir()
    (dist_info / "RECORD").write_text(
        f"x/_native/x_cpu.manifest.json,sha256={b64},2\n"
        f"x/_native/sub/other.json,sha256={b64},2\n"
        f"x/__init__.py,sha256={b64},2\n"
        "x-0.1.0+cpu.dist-info/RECORD,,\n"
    )
    assert recorded_sha256(native) == {"x_cpu.manifest.json": digest.hex()}
    assert recorded_sha256(tmp_path / "y" / "_native") == {}  # no distribution of that name
