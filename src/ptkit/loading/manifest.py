"""Native library manifests: parsed and checked without importing or loading anything.

The JSON schema beside this file documents the format; this parser enforces the
same rules with the standard library only (jsonschema is not a runtime dependency;
the test suite checks the two agree).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from ptkit.backends import BACKENDS
from ptkit.loading.files import read_regular_file
from ptkit.platforms import Platform
from ptkit.torch_abi import ABI_MODES, DEFAULT_ABI

__all__ = [
    "MANIFEST_SUFFIX",
    "Manifest",
    "ManifestError",
    "Registrations",
    "file_sha256",
    "find_manifests",
    "kernel_libraries",
    "parse_manifest_text",
    "read_manifest",
]

MANIFEST_SUFFIX = ".manifest.json"
SCHEMA_VERSION = 1

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TARGET_VERSION = re.compile(r"^([0-9]+)\.([0-9]+)$")
_TORCH_VERSION = re.compile(r"^[0-9]+\.[0-9]+")


class ManifestError(ValueError):
    """A manifest that cannot be trusted; the message names the file and the problem."""


@dataclasses.dataclass(frozen=True)
class Registrations:
    """What the library really registers with torch's dispatcher, recorded at install time
    by loading it alone into a fresh torch (``ptkit.release.registrations``)."""

    # Namespaces whose one TORCH_LIBRARY / STABLE_TORCH_LIBRARY block the library holds:
    # a second such block of a namespace in one process aborts it.
    namespaces: tuple[str, ...]
    # Qualified op ("ns::op") -> its schema, for the ops whose schemas the library defines.
    schemas: dict[str, str]
    # Qualified op -> the dispatch keys it registers kernels for ("CPU", "CUDA", "Meta",
    # "CompositeExplicitAutograd" …).
    kernels: dict[str, tuple[str, ...]]

    @property
    def defined_namespaces(self) -> tuple[str, ...]:
        """The namespaces it defines schemas in, or holds the block of."""
        found = [*self.namespaces, *(op.partition("::")[0] for op in self.schemas)]
        return tuple(dict.fromkeys(found))

    def ops_with_kernel(self, dispatch_key: str) -> tuple[str, ...]:
        """The qualified ops it registers a ``dispatch_key`` kernel for, sorted."""
        return tuple(sorted(op for op, keys in self.kernels.items() if dispatch_key in keys))

    def to_json(self) -> dict[str, Any]:
        return {
            "namespaces": list(self.namespaces),
            "schemas": dict(self.schemas),
            "kernels": {op: list(keys) for op, keys in self.kernels.items()},
        }


@dataclasses.dataclass(frozen=True)
class Manifest:
    path: Path
    package: str
    namespace: str
    library: str
    backend: str
    variant: str
    toolkit: dict[str, str]
    targets: dict[str, tuple[str, ...]]
    dropped_targets: tuple[str, ...]
    torch_target_version: tuple[int, int]
    torch_built_with: str
    platform: str
    ops: dict[str, tuple[str, ...]]
    sha256: str
    # Optional: manifests written before ptkit recorded registrations have none.
    registrations: Registrations | None = None
    # How the library binds to torch (ptkit.torch_abi): "stable", or "torch" (the classic
    # C++ API: it loads into torch_built_with's minor only, with the same C++ ABI).
    torch_abi: str = DEFAULT_ABI
    # _GLIBCXX_USE_CXX11_ABI of the torch it was built with (torch mode, libstdc++ only).
    torch_cxx11_abi: bool | None = None
    # CPU ISA levels the whole library is compiled for (REQUIRES_ISA): it loads only on a
    # CPU that has them (ptkit.platforms.required_isa).
    requires_isa: tuple[str, ...] = ()

    @property
    def library_path(self) -> Path:
        return self.path.parent / self.library

    @property
    def torch_target_version_str(self) -> str:
        return "{}.{}".format(*self.torch_target_version)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "package": self.package,
            "namespace": self.namespace,
            "library": self.library,
            "backend": self.backend,
            "variant": self.variant,
            "toolkit": dict(self.toolkit),
            "targets": {k: list(v) for k, v in self.targets.items()},
            "dropped_targets": list(self.dropped_targets),
            "torch": _torch_json(self),
            "platform": self.platform,
            "ops": {k: list(v) for k, v in self.ops.items()},
            "requires_isa": list(self.requires_isa),
            "sha256": self.sha256,
            **_registrations_json(self.registrations),
        }


# --- the ABI mode and the CPU requirements (schema: torch.abi, torch.cxx11_abi,
# requires_isa); a manifest written before they existed is a stable one that requires
# nothing -------------------------------------------------------------------------------


def _torch_json(manifest: Manifest) -> dict[str, Any]:
    torch: dict[str, Any] = {
        "target_version": manifest.torch_target_version_str,
        "built_with": manifest.torch_built_with,
        "abi": manifest.torch_abi,
    }
    if manifest.torch_cxx11_abi is not None:
        torch["cxx11_abi"] = manifest.torch_cxx11_abi
    return torch


def _parse_torch_binding(
    data: dict[str, Any], torch_info: dict[str, Any], path: Path
) -> dict[str, Any]:
    """``torch_abi``, ``torch_cxx11_abi`` and ``requires_isa`` of a manifest."""
    abi = torch_info.get("abi", DEFAULT_ABI)
    if abi not in ABI_MODES:
        raise ManifestError(f"{path}: torch.abi must be one of {', '.join(ABI_MODES)}, got {abi!r}")
    cxx11 = torch_info.get("cxx11_abi")
    if cxx11 is not None and not isinstance(cxx11, bool):
        raise ManifestError(f"{path}: torch.cxx11_abi must be true or false, got {cxx11!r}")
    built_with = torch_info.get("built_with", "")
    if abi == "torch" and not (isinstance(built_with, str) and _TORCH_VERSION.match(built_with)):
        raise ManifestError(
            f"{path}: torch.built_with must be the torch version of an ABI torch build "
            f"(2.14.1+cu130), got {built_with!r}"
        )
    requires = _str_list(data.get("requires_isa", []), "requires_isa", path)
    return {"torch_abi": abi, "torch_cxx11_abi": cxx11, "requires_isa": requires}


def _require(data: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    if key not in data:
        raise ManifestError(f"{path}: missing required field {key!r}")
    value = data[key]
    # bool is an int subclass; a JSON true is never a valid number here.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(
            f"{path}: field {key!r} must be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _str_list(value: Any, what: str, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{path}: {what} must be a list of strings, got {value!r}")
    return tuple(value)


_QUALIFIED_OP = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_.]*$")


def _registrations_json(registrations: Registrations | None) -> dict[str, Any]:
    return {} if registrations is None else {"registrations": registrations.to_json()}


def parse_registrations(value: Any, path: Path) -> Registrations:
    """The optional ``registrations`` block, every problem a ``ManifestError``."""
    where = f"{path}: registrations"
    if not isinstance(value, dict):
        raise ManifestError(f"{where} must be an object, got {type(value).__name__}")
    unknown = sorted(set(value) - {"namespaces", "schemas", "kernels"})
    if unknown:
        raise ManifestError(f"{where} has unknown fields {', '.join(unknown)}")
    for field in ("namespaces", "schemas", "kernels"):
        if field not in value:
            raise ManifestError(f"{where} is missing {field!r}")
    schemas = value["schemas"]
    kernels = value["kernels"]
    if not isinstance(schemas, dict) or not all(isinstance(v, str) for v in schemas.values()):
        raise ManifestError(f"{where}.schemas must map ops to schema strings, got {schemas!r}")
    if not isinstance(kernels, dict):
        raise ManifestError(f"{where}.kernels must map ops to dispatch keys, got {kernels!r}")
    for op in (*schemas, *kernels):
        if not _QUALIFIED_OP.match(op):
            raise ManifestError(f"{where}: expected a qualified op name (ns::op), got {op!r}")
    return Registrations(
        namespaces=_str_list(value["namespaces"], "registrations.namespaces", path),
        schemas={str(k): v for k, v in schemas.items()},
        kernels={
            str(k): _str_list(v, f"registrations.kernels.{k}", path) for k, v in kernels.items()
        },
    )


def parse_manifest(data: Any, path: Path) -> Manifest:
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a JSON object, got {type(data).__name__}")
    version = _require(data, "schema_version", int, path)
    if version != SCHEMA_VERSION:
        raise ManifestError(
            f"{path}: schema_version {version} is not supported by this ptkit "
            f"(it reads version {SCHEMA_VERSION}); upgrade ptkit or rebuild the library"
        )
    library = _require(data, "library", str, path)
    if not library or "/" in library or "\\" in library or library in (".", ".."):
        raise ManifestError(f"{path}: library must be a plain file name, got {library!r}")
    backend = _require(data, "backend", str, path)
    if backend not in BACKENDS:
        raise ManifestError(
            f"{path}: backend must be one of {', '.join(BACKENDS)}, got {backend!r}"
        )
    torch_info = _require(data, "torch", dict, path)
    target = torch_info.get("target_version")
    match = _TARGET_VERSION.match(target) if isinstance(target, str) else None
    if match is None:
        raise ManifestError(f"{path}: torch.target_version must look like '2.10', got {target!r}")
    sha256 = _require(data, "sha256", str, path)
    if not _SHA256.match(sha256):
        raise ManifestError(f"{path}: sha256 must be 64 lower-case hex digits, got {sha256!r}")
    ops = _require(data, "ops", dict, path)
    targets = _require(data, "targets", dict, path)
    toolkit = _require(data, "toolkit", dict, path)
    return Manifest(
        path=path,
        package=_require(data, "package", str, path),
        namespace=_require(data, "namespace", str, path),
        library=library,
        backend=backend,
        variant=_require(data, "variant", str, path),
        toolkit={str(k): str(v) for k, v in toolkit.items()},
        targets={str(k): _str_list(v, f"targets.{k}", path) for k, v in targets.items()},
        dropped_targets=_str_list(
            _require(data, "dropped_targets", list, path), "dropped_targets", path
        ),
        torch_target_version=(int(match.group(1)), int(match.group(2))),
        torch_built_with=str(torch_info.get("built_with", "")),
        platform=_require(data, "platform", str, path),
        ops={str(k): _str_list(v, f"ops.{k}", path) for k, v in ops.items()},
        sha256=sha256,
        registrations=(
            parse_registrations(data["registrations"], path) if "registrations" in data else None
        ),
        **_parse_torch_binding(data, torch_info, path),
    )


# A manifest is a few kilobytes; its tables nest three deep.
MAX_MANIFEST_BYTES = 1 << 20
MAX_MANIFEST_DEPTH = 16


def _nesting_depth(text: str) -> int:
    """The deepest nesting of JSON arrays and objects in ``text`` (strings skipped), found
    before parsing: the parser recurses once per level."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_manifest_text(data: bytes, path: Path) -> Manifest:
    """A manifest from its bytes (a file, a wheel entry), every problem a ``ManifestError``
    naming ``path``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{path}: not UTF-8 text (byte {exc.start}); rebuild the library"
        ) from exc
    if _nesting_depth(text) > MAX_MANIFEST_DEPTH:
        raise ManifestError(
            f"{path}: nested more than {MAX_MANIFEST_DEPTH} levels deep; a manifest nests 4: "
            "rebuild the library"
        )
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON: {exc}") from exc
    return parse_manifest(document, path)


def read_manifest(path: Path) -> Manifest:
    """Read one manifest, safely (a regular file of at most ``MAX_MANIFEST_BYTES``); raise
    ``ManifestError`` naming the file and the problem."""
    try:
        data = read_regular_file(path, MAX_MANIFEST_BYTES)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse_manifest_text(data, path)


def _native_folder_names(native_dir: Path) -> list[str]:
    """The file names in a native folder (none when there is no folder); ``ManifestError``
    naming a folder that exists but cannot be listed: an unreadable folder is not an
    empty one."""
    try:
        return os.listdir(native_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise ManifestError(
            f"{native_dir}: cannot list the folder of native libraries: "
            f"{exc.strerror or exc}; make it readable (chmod a+rx) or reinstall the package"
        ) from exc


def find_manifests(native_dir: Path) -> list[Path]:
    """Manifests in a package's native folder, in a stable order (none when there is no
    folder). A folder that exists but cannot be listed raises ``ManifestError`` naming it."""
    names = _native_folder_names(native_dir)
    return sorted(native_dir / name for name in names if name.endswith(MANIFEST_SUFFIX))


def kernel_libraries(native_dir: Path, platform: Platform) -> list[Path]:
    """The kernel libraries of ``platform`` in a native folder, found by the names that
    platform gives them (``libptkit_cpu.so``, ``libptkit_cpu.dylib``, ``ptkit_cpu.dll``:
    ``Platform.kernel_library_target``), in a stable order; another OS's libraries,
    manifests and Metal sources are not among them. Raises like :func:`find_manifests`."""
    names = _native_folder_names(native_dir)
    return sorted(
        native_dir / name
        for name in names
        if platform.kernel_library_target(name) is not None and (native_dir / name).is_file()
    )


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB blocks (libraries and wheels can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
