"""What the index needs to know about one wheel, read from the wheel itself.

The variant comes from inside the wheel: the ``variant`` of its native libraries'
manifests (``<package>/_native/*.manifest.json``), else the local label of the version
in its METADATA (without a torch-mode build's torch minor: ``cpu`` of ``cpu.torch2.14``).
A torch-mode build's wheel must require exactly the torch minor its label names
(``torch>=2.14,<2.15``): one that claims more would be installed beside any torch. A pure-Python wheel (``*-none-any``) with neither, such as the toolkit
``ptkit-0.1.0-py3-none-any.whl``, is *universal*: it belongs to every variant's index
(``pip install ptkit-ops --index-url <root>/cpu/simple`` finds ``ptkit`` beside it). The
file name must agree with the METADATA (name, version) and the WHEEL file (tags); a
wheel that contradicts itself is refused, as are archives with entries that would escape
the install folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import stat
import zipfile
import zlib
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ptkit.loading.manifest import MAX_MANIFEST_BYTES, file_sha256
from ptkit.recipes.torch_builds import split_label

__all__ = ["IndexBuildError", "IndexedWheel", "inspect_wheel", "valid_variant_name"]

# A variant or index path becomes a folder name and a URL segment.
_VARIANT = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")


class IndexBuildError(ValueError):
    """A wheel or an option that ``ptkit index`` refuses; nothing has been written."""


def valid_variant_name(name: str) -> bool:
    return bool(_VARIANT.match(name)) and ".." not in name


@dataclasses.dataclass(frozen=True)
class IndexedWheel:
    path: Path
    filename: str
    project: NormalizedName
    version: Version
    tags: frozenset[Tag]
    requires_python: str | None
    metadata: bytes  # the METADATA file, served as <filename>.metadata (PEP 658)
    sha256: str
    size: int
    variant: str | None
    """None: universal, in every variant's index."""
    variant_source: str
    """``manifest ptkit_ops/_native/ptkit_ops_cuda.manifest.json``, ``version label`` or
    ``universal: pure Python, no manifest, no version label``."""

    @property
    def metadata_sha256(self) -> str:
        return hashlib.sha256(self.metadata).hexdigest()

    @property
    def universal(self) -> bool:
        return self.variant is None


def _version_or_none(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _refuse(path: Path, problem: str) -> IndexBuildError:
    return IndexBuildError(f"ptkit index build: {path}: {problem}")


# What the index reads from a wheel, at most: a METADATA of a large project is ~100 KB.
_MAX_METADATA_BYTES = 4 << 20
_MAX_WHEEL_FILE_BYTES = 64 << 10
_DRIVE = re.compile(r"^[A-Za-z]:")


def _check_entries(path: Path, entries: list[zipfile.ZipInfo]) -> None:
    """Refuse entries an installer would write outside the install folder, twice, or as
    something other than a file or a folder (installers disagree on which copy of a
    duplicated name wins, and pip writes a symlink entry's target as the file's bytes)."""
    seen: set[str] = set()
    for info in entries:
        name = info.filename
        pure = PurePosixPath(name)
        if (
            pure.is_absolute()
            or ".." in pure.parts
            or "\\" in name
            or name.startswith("/")
            or _DRIVE.match(name)
        ):
            raise _refuse(
                path,
                f"the archive entry {name!r} would be written outside the install folder; "
                "a wheel's entries are relative paths without '..' or a drive. Rebuild the wheel.",
            )
        if name in seen:
            raise _refuse(
                path,
                f"the archive holds {name!r} twice; installers disagree on which copy wins. "
                "Rebuild the wheel.",
            )
        seen.add(name)
        kind_bits = stat.S_IFMT(info.external_attr >> 16)  # 0: no type recorded (a file)
        if kind_bits not in (0, stat.S_IFREG, stat.S_IFDIR):
            mode = info.external_attr >> 16
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "a device or other special file"
            raise _refuse(
                path,
                f"the archive entry {name!r} is {kind}, not a file; a wheel holds files only. "
                "Rebuild the wheel.",
            )


def _read_entry(path: Path, archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """One entry, at most ``limit`` bytes: refused from its declared size before it is
    inflated, and read with a cap in case the declared size lies."""
    info = archive.getinfo(name)
    too_big = (
        f"{name} inflates to more than {limit} bytes ({info.file_size} declared from "
        f"{info.compress_size} compressed); not a wheel ptkit indexes"
    )
    if info.file_size > limit:
        raise _refuse(path, too_big)
    with archive.open(info) as entry:
        data = entry.read(limit + 1)
    if len(data) > limit:
        raise _refuse(path, too_big)
    return data


def _dist_info(path: Path, names: list[str], name: str, version: Version) -> str:
    folders = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(folders) != 1:
        raise _refuse(
            path,
            f"expected exactly one .dist-info folder, found {sorted(folders) or 'none'}",
        )
    folder = folders.pop()
    stem = folder[: -len(".dist-info")]
    dist_name, _, dist_version = stem.rpartition("-")
    if (
        canonicalize_name(dist_name) != canonicalize_name(name)
        or _version_or_none(dist_version) != version
    ):
        raise _refuse(
            path,
            f"its metadata folder {folder} does not match the file name "
            f"({name} {version}); the file was renamed after it was built",
        )
    return folder


def _manifest_variants(path: Path, archive: zipfile.ZipFile, names: list[str]) -> dict[str, str]:
    """The ``variant`` of each native library's manifest; a manifest that cannot be read is
    refused (the loader would refuse the library it describes)."""
    variants: dict[str, str] = {}
    for name in names:
        if not name.endswith(".manifest.json") or "/_native/" not in f"/{name}":
            continue
        try:
            data = json.loads(_read_entry(path, archive, name, MAX_MANIFEST_BYTES))
        except (ValueError, RecursionError) as error:  # JSON, UTF-8, nesting
            problem = "nested too deeply" if isinstance(error, RecursionError) else error
            raise _refuse(path, f"its manifest {name} is not valid JSON ({problem})") from None
        if isinstance(data, dict) and isinstance(data.get("variant"), str):
            variants[name] = data["variant"]
        else:
            raise _refuse(path, f'its manifest {name} names no variant (a "variant" string)')
    return variants


def _torch_pin_problem(version: Version, requires: list[str]) -> str | None:
    """Why a torch-mode build's wheel (its label names a torch minor) does not require
    exactly that minor; None when it does, or when it is no such build."""
    minor = split_label(str(version.local))[1] if version.local else None
    if minor is None:
        return None
    pins = []
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "torch":
            pins.append(requirement.specifier)
    if pins == [SpecifierSet(minor.requirement.removeprefix("torch"))]:
        return None
    found = ", ".join(f"torch{p}" for p in pins) or "no torch"
    return (
        f"its version {version} names a build for torch {minor}, but it requires {found}, "
        f"not {minor.requirement}: installers would put it beside another torch, where it "
        "does not load. Rebuild it with ptkit build --torch (ptkit's version provider writes "
        "the pin)"
    )


def inspect_wheel(path: Path) -> IndexedWheel:
    """Read and cross-check one wheel; raises ``IndexBuildError`` with the fix."""
    filename = path.name
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as error:
        raise _refuse(
            path,
            f"not a wheel file name ({error}); expected "
            "<name>-<version>-<python>-<abi>-<platform>.whl as built by pip or cibuildwheel",
        ) from None
    if not path.is_file():
        raise _refuse(path, "no such file")
    try:
        with zipfile.ZipFile(path) as archive:
            _check_entries(path, archive.infolist())
            names = archive.namelist()
            folder = _dist_info(path, names, name, version)
            try:
                metadata = _read_entry(path, archive, f"{folder}/METADATA", _MAX_METADATA_BYTES)
                wheel_file = _read_entry(
                    path, archive, f"{folder}/WHEEL", _MAX_WHEEL_FILE_BYTES
                ).decode("utf-8", "replace")
            except KeyError as error:
                raise _refuse(path, f"{error.args[0]} is missing; not a valid wheel") from None
            manifests = _manifest_variants(path, archive, names)
    except zipfile.BadZipFile as error:
        raise _refuse(path, f"not a zip archive ({error}); was the download cut short?") from None
    except (zlib.error, EOFError, NotImplementedError) as error:
        raise _refuse(
            path, f"the archive is damaged ({error}); was the download cut short? Rebuild it"
        ) from None

    headers = HeaderParser().parsestr(metadata.decode("utf-8", "replace"))
    meta_name, meta_version = headers.get("Name"), headers.get("Version")
    if meta_name is None or canonicalize_name(meta_name) != name:
        raise _refuse(path, f"its METADATA names the project {meta_name!r}, the file name {name!r}")
    if meta_version is None or _version_or_none(meta_version) != version:
        raise _refuse(
            path, f"its METADATA says version {meta_version!r}, the file name says {version}"
        )
    declared = {
        Tag(*line.split(":", 1)[1].strip().split("-"))
        for line in wheel_file.splitlines()
        if line.startswith("Tag:") and line.count("-") == 2
    }
    if declared != set(tags):
        raise _refuse(
            path,
            f"its WHEEL file declares the tags {sorted(map(str, declared))}, the file name "
            f"{sorted(map(str, tags))}; retag it with `wheel tags` rather than renaming it",
        )

    distinct = set(manifests.values())
    variant: str | None
    if len(distinct) > 1:
        raise _refuse(path, f"its native libraries' manifests name different variants: {manifests}")
    if distinct:
        manifest_name, variant = next(iter(manifests.items()))
        source = f"manifest {manifest_name}"
    elif version.local:
        variant, source = split_label(str(version.local))[0], "version label"
    elif all(tag.platform == "any" for tag in tags):
        variant, source = None, "universal: pure Python, no manifest, no version label"
    else:
        raise _refuse(
            path,
            "its variant is unknown: no ptkit manifest (<package>/_native/*.manifest.json), "
            "no local version label (+cpu, +cu13 …), and platform tags, so it is no pure "
            "wheel for every index either; build it with ptkit build",
        )
    problem = _torch_pin_problem(version, headers.get_all("Requires-Dist") or [])
    if problem is not None:
        raise _refuse(path, problem)
    if variant is not None and not valid_variant_name(variant):
        raise _refuse(
            path,
            f"its variant {variant!r} is not a safe folder name "
            "(lower-case letters, digits, '.', '_', '+', '-'; no '..')",
        )
    return IndexedWheel(
        path=path,
        filename=filename,
        project=name,
        version=version,
        tags=frozenset(tags),
        requires_python=headers.get("Requires-Python"),
        metadata=metadata,
        sha256=file_sha256(path),
        size=path.stat().st_size,
        variant=variant,
        variant_source=source,
    )
