"""``ptkit inspect``: what a wheel or a native library really contains.

For each native library: its manifest, what it links (DT_NEEDED, RPATH), the
stable-ABI symbol audit, and the GPU code inside compared with the manifest: SASS/PTX
of the CUDA fatbinary (``cuobjdump``), gfx code objects of the HIP offload bundles.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ptkit.loading.manifest import MANIFEST_SUFFIX, ManifestError, read_manifest
from ptkit.release.audit import audit_elf
from ptkit.release.fatbin import find_cuobjdump, list_cuda_targets
from ptkit.release.offload import OffloadError, list_hip_targets

__all__ = ["LibraryReport", "inspect_path"]


@dataclasses.dataclass
class LibraryReport:
    library: str
    manifest: dict[str, Any] | None
    needed: list[str]
    rpath: list[str]
    problems: list[str]
    fatbin: dict[str, list[str]] | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def format(self) -> str:
        lines = [f"{self.library}"]
        if self.manifest:
            m = self.manifest
            lines.append(
                f"  manifest: {m['backend']} / variant {m['variant']} / {m['toolkit']['name']} "
                f"{m['toolkit']['version']} / torch target {m['torch']['target_version']}, built with "
                f"{m['torch']['built_with']}"
            )
            for kind, targets in m["targets"].items():
                lines.append(f"  targets.{kind}: {', '.join(targets) or '-'}")
            if m["dropped_targets"]:
                lines.append(f"  dropped (optional): {', '.join(m['dropped_targets'])}")
        lines.append(f"  DT_NEEDED: {', '.join(self.needed)}")
        lines.append(f"  RPATH: {', '.join(self.rpath) or '(none)'}")
        if self.fatbin is not None and "gfx" in self.fatbin:
            lines.append(f"  offload bundle gfx: {', '.join(self.fatbin['gfx']) or '-'}")
        elif self.fatbin is not None:
            lines.append(f"  fatbinary SASS: {', '.join(self.fatbin['sass']) or '-'}")
            lines.append(f"  fatbinary PTX: {', '.join(self.fatbin['ptx']) or '-'}")
        lines += [f"  PROBLEM: {p}" for p in self.problems] or ["  audit: ok"]
        return "\n".join(lines)


@contextmanager
def _native_files(path: Path) -> Iterator[list[Path]]:
    """The native libraries of a wheel (extracted) or the library itself."""
    if path.suffix == ".whl":
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(path) as wheel:
            names = [n for n in wheel.namelist() if n.endswith((".so", MANIFEST_SUFFIX))]
            for name in names:
                wheel.extract(name, tmp)
            yield sorted(Path(tmp, n) for n in names if n.endswith(".so"))
    else:
        yield [path]


def _by_arch(targets: set[str]) -> list[str]:
    """sm_90 before sm_100: numeric order."""
    return sorted(targets, key=lambda t: (int("".join(c for c in t if c.isdigit()) or 0), t))


def _report(library: Path, cuobjdump: str | None) -> LibraryReport:
    manifest_data = None
    problems: list[str] = []
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
    elf = audit_elf(library)
    problems += elf.problems
    fatbin = None
    if manifest_data and manifest_data["backend"] == "cuda":
        tool = find_cuobjdump(cuobjdump)
        if tool is None:
            problems.append(
                "cuobjdump not found (pip install nvidia-cuda-cuobjdump): fatbinary not listed"
            )
        else:
            found = list_cuda_targets(library, tool)
            fatbin = {"sass": _by_arch(found.sass), "ptx": _by_arch(found.ptx)}
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
    return LibraryReport(
        library.name, manifest_data, list(elf.needed), list(elf.rpath), problems, fatbin
    )


def inspect_path(path: Path, *, cuobjdump: str | None = None) -> list[LibraryReport]:
    """Reports for every native library of a wheel, or for one library file."""
    if not path.exists():
        raise FileNotFoundError(f"ptkit inspect: {path} does not exist")
    with _native_files(path) as libraries:
        return [_report(lib, cuobjdump) for lib in libraries]


def reports_json(reports: list[LibraryReport]) -> str:
    return json.dumps([r.to_json() for r in reports], indent=2)
