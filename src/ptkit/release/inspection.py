"""``ptkit inspect``: what a wheel or a native library really contains.

For each native library: its manifest, what it links (ELF: DT_NEEDED and RPATH; Mach-O:
LC_LOAD_DYLIB, LC_RPATH, LC_ID_DYLIB, the minimum macOS and the architectures; PE: the
imported DLLs and the machine), the release audit's rules of its format
(:func:`ptkit.release.wheel_audit.audit_native_library`: the ones every format shares,
:mod:`ptkit.release.linkage`, and the format's own against the wheel's tag; a lone file
has no tag, so its minimum OS, machine and symbol versions go unchecked), and the GPU code
inside compared with the manifest: SASS/PTX of the CUDA fatbinary (``cuobjdump``), gfx
code objects of the HIP offload bundles. The platform of a wheel's tag says which files
are its native libraries, as in the release audit (:mod:`ptkit.release.wheel_audit`); a
lone file is known by its magic number, else by its name.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ptkit.loading.manifest import MANIFEST_SUFFIX, ManifestError, read_manifest
from ptkit.platforms import MAGIC_LENGTH, PLATFORMS, Platform, platform_for_binary
from ptkit.release.elf_audit import (
    ManylinuxPolicy,
    audit_elf,
    is_manylinux,
    load_manylinux_policy,
)
from ptkit.release.fatbin import find_cuobjdump, list_cuda_targets
from ptkit.release.offload import OffloadError, list_hip_targets
from ptkit.release.wheel_audit import (
    audit_native_library,
    by_arch,
    not_audited,
    wheel_platform,
)
from ptkit.torch_abi import DEFAULT_ABI

__all__ = ["LibraryReport", "inspect_path", "reports_json"]


@dataclasses.dataclass
class LibraryReport:
    library: str
    manifest: dict[str, Any] | None
    needed: list[str]
    """DT_NEEDED, LC_LOAD_DYLIB, the imported DLLs."""
    rpath: list[str]
    """DT_RPATH/DT_RUNPATH, LC_RPATH (PE has none)."""
    problems: list[str]
    fatbin: dict[str, list[str]] | None
    binary_format: str = "ELF"
    install_name: str = ""
    """Mach-O: LC_ID_DYLIB."""
    minimum_os: str = ""
    """Mach-O: the oldest macOS it loads on (LC_BUILD_VERSION minos)."""
    architectures: list[str] = dataclasses.field(default_factory=list)
    """Mach-O: its slices; PE: its machine."""
    imports: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """PE: DLL -> the symbols imported from it by name."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def format(self) -> str:
        lines = [f"{self.library}"]
        if self.manifest:
            m = self.manifest
            lines.append(
                f"  manifest: {m['backend']} / variant {m['variant']} / {m['toolkit']['name']} "
                f"{m['toolkit']['version']} / torch target {m['torch']['target_version']}, built with "
                f"{m['torch']['built_with']} / ABI {_abi_text(m['torch'])}"
            )
            for kind, targets in m["targets"].items():
                lines.append(f"  targets.{kind}: {', '.join(targets) or '-'}")
            if m["dropped_targets"]:
                lines.append(f"  dropped (optional): {', '.join(m['dropped_targets'])}")
        lines += self._link_lines()
        if self.fatbin is not None and "gfx" in self.fatbin:
            lines.append(f"  offload bundle gfx: {', '.join(self.fatbin['gfx']) or '-'}")
        elif self.fatbin is not None:
            lines.append(f"  fatbinary SASS: {', '.join(self.fatbin['sass']) or '-'}")
            lines.append(f"  fatbinary PTX: {', '.join(self.fatbin['ptx']) or '-'}")
        lines += [f"  PROBLEM: {p}" for p in self.problems] or ["  audit: ok"]
        return "\n".join(lines)

    def _link_lines(self) -> list[str]:
        """What it links, in its format's words."""
        if self.binary_format == "Mach-O":
            return [
                f"  LC_ID_DYLIB: {self.install_name or '(none)'}",
                f"  LC_LOAD_DYLIB: {', '.join(self.needed) or '(none)'}",
                f"  LC_RPATH: {', '.join(self.rpath) or '(none)'}",
                f"  minimum macOS: {self.minimum_os or '(not said)'}",
                f"  architectures: {', '.join(self.architectures) or '-'}",
            ]
        if self.binary_format == "PE":
            imports = [
                f"{dll} ({len(names)} symbol{'' if len(names) == 1 else 's'})"
                for dll, names in self.imports.items()
            ]
            return [
                f"  imports: {', '.join(imports) or '(none)'}",
                f"  machine: {', '.join(self.architectures) or '-'}",
            ]
        return [
            f"  DT_NEEDED: {', '.join(self.needed)}",
            f"  RPATH: {', '.join(self.rpath) or '(none)'}",
        ]


@dataclasses.dataclass(frozen=True)
class _Native:
    """The native libraries to report on, and the platform whose format they are."""

    platform: Platform | None
    libraries: list[Path]
    problems: list[str]
    tags: tuple[str, ...] = ()
    """The wheel's platform tags (a lone file has none: its tag rules are skipped)."""
    policy: ManylinuxPolicy | None = None
    """auditwheel's table, for a manylinux wheel's symbol versions."""


def _library_platform(path: Path) -> Platform | None:
    """The platform of a lone library file: by its magic number (a Python module of macOS
    is a Mach-O ``.so``), else by its name."""
    with path.open("rb") as f:
        by_bytes = platform_for_binary(f.read(MAGIC_LENGTH))
    if by_bytes is not None:
        return by_bytes
    return next((p for p in PLATFORMS.values() if p.is_native_library(path.name)), None)


@contextmanager
def _native_files(path: Path) -> Iterator[_Native]:
    """The native libraries of a wheel (extracted; the platform of its tag decides which
    files they are) or the library itself."""
    if path.suffix != ".whl":
        platform = _library_platform(path)
        problems = [] if platform else [f"{path.name} is no native library ptkit knows"]
        yield _Native(platform, [path], problems)
        return
    try:
        tags = tuple(sorted({t.platform for t in parse_wheel_filename(path.name)[3]}))
    except InvalidWheelFilename:
        tags = ()
    platform, problems = wheel_platform(path.name, tags)
    policy = None
    if platform is not None and platform.binary_format == "ELF" and any(map(is_manylinux, tags)):
        try:
            policy = load_manylinux_policy()
        except FileNotFoundError as exc:  # as the release audit says it
            problems.append(f"the manylinux symbol versions cannot be checked: {exc}")
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(path) as wheel:
        native = [n for n in wheel.namelist() if platform and platform.is_native_library(n)]
        manifests = [n for n in wheel.namelist() if n.endswith(MANIFEST_SUFFIX)]
        for name in [*native, *manifests]:
            wheel.extract(name, tmp)
        yield _Native(platform, sorted(Path(tmp, n) for n in native), problems, tags, policy)


def _report(library: Path, native: _Native, cuobjdump: str | None) -> LibraryReport:
    platform = native.platform
    manifest_data = None
    problems = list(native.problems)
    for path in sorted(library.parent.glob(f"*{MANIFEST_SUFFIX}")):
        try:
            manifest = read_manifest(path)
        except ManifestError as exc:
            problems.append(str(exc))
            continue
        if manifest.library == library.name:
            manifest_data = manifest.to_json()
    if manifest_data is None:
        problems.append(f"no manifest next to {library.name}: the loader will not load it")
    if platform is None:
        return LibraryReport(library.name, manifest_data, [], [], problems, None)
    abi = manifest_data["torch"].get("abi", "stable") if manifest_data else "stable"
    report = _read_library(library, platform, abi)
    if isinstance(report, str):
        problems.append(report)
        return LibraryReport(
            library.name, manifest_data, [], [], problems, None, platform.binary_format
        )
    # The release audit's rules of the format (the shared ones, links, search path, and the
    # tag's symbol versions, minimum OS, architecture or machine), so that "audit: ok"
    # here is what the audit of the wheel would say of the library.
    backend = manifest_data["backend"] if manifest_data else None
    _, format_problems, _ = audit_native_library(
        library, platform, native.tags, backend=backend, abi=abi, policy=native.policy
    )
    problems += format_problems
    fatbin = None
    if manifest_data and manifest_data["backend"] == "cuda":
        tool = find_cuobjdump(cuobjdump)
        if tool is None:
            from ptkit.release.toolchains import cuobjdump_missing

            version = manifest_data.get("toolkit", {}).get("version")
            problems.append(f"fatbinary not listed: {cuobjdump_missing(version)}")
        else:
            found = list_cuda_targets(library, tool)
            fatbin = {"sass": by_arch(found.sass), "ptx": by_arch(found.ptx)}
            if set(found.sass) != set(manifest_data["targets"].get("sass", [])) or set(
                found.ptx
            ) != set(manifest_data["targets"].get("ptx", [])):
                problems.append("the fatbinary's targets differ from the manifest's")
    if manifest_data and manifest_data["backend"] == "hip":
        try:
            gfx = list_hip_targets(library)
        except OffloadError as exc:
            problems.append(str(exc))
        else:
            fatbin = {"gfx": gfx}
            if set(gfx) != set(manifest_data["targets"].get("gfx", [])):
                problems.append("the offload bundles' gfx targets differ from the manifest's")
    return dataclasses.replace(report, manifest=manifest_data, problems=problems, fatbin=fatbin)


def _read_library(library: Path, platform: Platform, abi: str) -> LibraryReport | str:
    """The report's link fields, read in the library's platform's format, or why it cannot
    be read."""
    name = library.name
    fmt = platform.binary_format
    if fmt == "ELF":
        from elftools.common.exceptions import ELFError

        try:
            elf = audit_elf(library, abi)
        except (ELFError, OSError, ValueError) as exc:
            return f"{name}: not a readable ELF library ({exc})"
        return LibraryReport(name, None, list(elf.needed), list(elf.rpath), [], None)
    if fmt == "Mach-O":
        from ptkit.release.macho_audit import read_macho

        try:
            macho = read_macho(library, abi)
        except ImportError as exc:  # macholib: in ptkit[build], not in ptkit itself
            return _reader_missing(name, fmt, "macholib", exc)
        except (ValueError, OSError, struct.error, EOFError, IndexError, KeyError) as exc:
            return f"{name}: not a readable Mach-O library ({exc})"
        linkage = macho.linkage
        return LibraryReport(
            name,
            None,
            list(linkage.needed),
            list(linkage.rpath),
            [],
            None,
            fmt,
            install_name=macho.install_name,
            minimum_os=macho.minimum_os_text,
            architectures=list(macho.archs),
        )
    if fmt == "PE":
        try:
            import pefile  # type: ignore[import-untyped]
        except ImportError as exc:  # in ptkit[build], not in ptkit itself
            return _reader_missing(name, fmt, "pefile", exc)
        from ptkit.release.pe_audit import read_pe

        try:
            pe = read_pe(library, abi)
        except (pefile.PEFormatError, OSError, ValueError, struct.error, IndexError) as exc:
            return f"{name}: not a readable PE library ({exc})"
        return LibraryReport(
            name,
            None,
            list(pe.linkage.needed),
            [],
            [],
            None,
            fmt,
            architectures=[pe.machine],
            imports={dll: list(names) for dll, names in pe.imports.items()},
        )
    return not_audited(name, platform)


def _reader_missing(name: str, fmt: str, package: str, exc: ImportError) -> str:
    return (
        f"{name}: not read: the {fmt} reader {package} is not installed ({exc}); install "
        f"it: pip install 'ptkit[build]' (or pip install {package})"
    )


def inspect_path(path: Path, *, cuobjdump: str | None = None) -> list[LibraryReport]:
    """Reports for every native library of a wheel, or for one library file."""
    if not path.exists():
        raise FileNotFoundError(f"ptkit inspect: {path} does not exist")
    with _native_files(path) as native:
        return [_report(lib, native, cuobjdump) for lib in native.libraries]


def reports_json(reports: list[LibraryReport]) -> str:
    return json.dumps([r.to_json() for r in reports], indent=2)


def _abi_text(torch_binding: dict[str, Any]) -> str:
    """How the library binds to torch, as the build report says it."""
    if torch_binding.get("abi", DEFAULT_ABI) == "torch":
        return f"torch (classic C++ API: torch {torch_binding['target_version']} only)"
    return f"stable (torch {torch_binding['target_version']} and later)"
