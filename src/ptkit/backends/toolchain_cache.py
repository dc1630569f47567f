"""ptkit's toolchain cache: where the recipes' pinned toolkits from PyPI live, and what it holds.

A recipe's ``[toolkit] packages`` (CUDA 13.5's ``nvidia-cuda-nvcc`` …) are never
installed into torch's environment: torch pins its own CUDA runtime, which they would
replace. ``ptkit toolchain install <variant>`` (and ``ptkit build``, on demand) puts
them into a venv of their own, one per (toolkit name, version, packages), shared by
every project of the user::

    <cache>/toolchains/<name>-<version>-<hash>/     a venv: lib/python3.X/site-packages/nvidia/cu13/bin/nvcc …
    <cache>/toolchains/<name>-<version>-<hash>/toolchain.json   what it is (written last)

``<cache>`` is ``$PTKIT_CACHE_DIR`` when set (tests and CI point it elsewhere), else the
platform's user cache folder: ``$XDG_CACHE_HOME/ptkit`` or ``~/.cache/ptkit`` on Linux,
``~/Library/Caches/ptkit`` on macOS, ``%LOCALAPPDATA%\\ptkit\\Cache`` on Windows.
``<hash>`` covers the package list, the index and the platform, so a recipe that pins
other packages gets another toolchain.

A toolchain is made in a hidden ``.partial-…`` folder beside its final name and renamed
into place when pip is done and its ``toolchain.json`` is written
(:mod:`ptkit.release.toolchains`), so the ones listed here are complete: a half-made one
is never seen. The backends put these toolchains into their ``toolkit_candidates``
(every caller gets them: CMake, ``ptkit build``, ``ptkit inspect``, the doctor).

Standard library only: CMake's Python reads it (``python -m ptkit.backends toolkit``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "CACHE_DIR_VARIABLE",
    "METADATA_FILE",
    "CachedToolchain",
    "ToolchainSpec",
    "cache_root",
    "cached_toolchains",
    "dev_toolchain_paths",
    "find_cached",
    "toolchains_dir",
]

CACHE_DIR_VARIABLE = "PTKIT_CACHE_DIR"
METADATA_FILE = "toolchain.json"
_SCHEMA_VERSION = 1


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """ptkit's cache folder (see the module docstring)."""
    env = os.environ if environ is None else environ
    given = env.get(CACHE_DIR_VARIABLE, "").strip()
    if given:
        return Path(given).expanduser().absolute()
    home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
    if sys.platform == "win32":
        local = env.get("LOCALAPPDATA", "").strip()
        return (Path(local) if local else home / "AppData" / "Local") / "ptkit" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "ptkit"
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else home / ".cache") / "ptkit"


def toolchains_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``<cache>/toolchains``: one venv per toolchain."""
    return cache_root(environ) / "toolchains"


def _platform() -> str:
    """``linux-x86_64``: a toolchain's binaries run on one platform only (a home folder
    shared between machines may hold several)."""
    return sysconfig.get_platform()


@dataclasses.dataclass(frozen=True)
class ToolchainSpec:
    """What a recipe's ``[toolkit]`` table asks for: the toolchain's identity."""

    name: str
    """The toolkit's name (``cuda``)."""
    version: str
    """The version the recipe pins (``13.5``)."""
    backend: str
    """The backend whose compiler it holds (``cuda``): that backend finds it."""
    packages: tuple[str, ...]
    """pip requirements (``nvidia-cuda-nvcc==13.5.*`` …)."""
    index_url: str = ""
    """The index they come from, when it is not pip's default (PyPI)."""

    @property
    def key(self) -> str:
        """``cuda-13.5-1a2b3c4d5e6f``: the folder name, one per (name, version, packages)."""
        text = "\n".join([_platform(), self.index_url, *sorted(self.packages)])
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        return f"{self.name}-{self.version}-{digest}"

    def path(self, environ: Mapping[str, str] | None = None) -> Path:
        """Where this toolchain lives (or will) in the cache."""
        return toolchains_dir(environ) / self.key


@dataclasses.dataclass(frozen=True)
class CachedToolchain:
    """A complete toolchain in the cache (its ``toolchain.json`` says what it is)."""

    path: Path
    spec: ToolchainSpec
    installed: tuple[str, ...]
    """``nvidia-cuda-nvcc==13.5.37`` …: what pip installed."""
    created: str
    """When it was made (ISO 8601, UTC)."""

    @property
    def site_packages(self) -> Path | None:
        """The venv's site-packages (``lib/python3.X/site-packages``, ``Lib/site-packages``)."""
        found = sorted(self.path.glob("lib/python*/site-packages")) or sorted(
            self.path.glob("Lib/site-packages")
        )
        return found[-1] if found else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def read_metadata(folder: Path) -> CachedToolchain | None:
    """The toolchain in ``folder``, or None when it is not a complete one of this platform."""
    try:
        data = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        if data.get("schema_version") != _SCHEMA_VERSION or data.get("platform") != _platform():
            return None
        spec = ToolchainSpec(
            name=str(data["name"]),
            version=str(data["version"]),
            backend=str(data["backend"]),
            packages=tuple(str(p) for p in data["packages"]),
            index_url=str(data.get("index_url", "")),
        )
        return CachedToolchain(
            folder,
            spec,
            tuple(str(p) for p in data.get("installed", ())),
            str(data.get("created", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def metadata(toolchain: CachedToolchain) -> dict[str, object]:
    """``toolchain.json``'s content for ``toolchain`` (written last, when it is complete)."""
    spec = toolchain.spec
    return {
        "schema_version": _SCHEMA_VERSION,
        "name": spec.name,
        "version": spec.version,
        "backend": spec.backend,
        "packages": list(spec.packages),
        "index_url": spec.index_url,
        "platform": _platform(),
        "installed": list(toolchain.installed),
        "created": toolchain.created,
    }


def cached_toolchains(
    environ: Mapping[str, str] | None = None, *, backend: str | None = None
) -> list[CachedToolchain]:
    """The complete toolchains in the cache (of ``backend`` when given), newest version
    first; hidden folders (``.partial-…``: being made, or left by a killed install) are
    never listed."""
    folder = toolchains_dir(environ)
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return []
    found = [t for t in map(read_metadata, entries) if t is not None]
    if backend is not None:
        found = [t for t in found if t.spec.backend == backend]
    return sorted(found, key=lambda t: _version_key(t.spec.version), reverse=True)


def find_cached(
    spec: ToolchainSpec, environ: Mapping[str, str] | None = None
) -> CachedToolchain | None:
    """The complete toolchain of ``spec`` in the cache, or None."""
    found = read_metadata(spec.path(environ))
    return found if found is not None and found.spec.key == spec.key else None


def dev_toolchain_paths(roots: Sequence[Path] | None = None) -> list[str]:
    """The site-packages of ``.toolchains/<variant>`` under each of ``roots`` (default:
    the current folder and the source tree holding this package, when it runs from
    one): ptkit's own development environment (``scripts/bootstrap`` installs each
    recipe's toolkit there), which ``ptkit build``, ``ptkit inspect`` and the doctor use
    in a checkout."""
    if roots is None:
        # src/ptkit/backends/toolchain_cache.py: the checkout is three folders up.
        roots = [Path.cwd(), Path(__file__).resolve().parents[3]]
    found: list[str] = []
    for root in roots:
        found += map(str, sorted(root.glob(".toolchains/*/lib/python*/site-packages")))
    return list(dict.fromkeys(found))
