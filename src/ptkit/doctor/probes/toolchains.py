"""``ptkit doctor --build``: the build tools this machine has, and what each could build.

The GPU compilers are found where the build finds them: each backend's
``toolkit_candidates``, in the build's order; every candidate is listed with its source
and the one the build takes (``find_toolkit``) is marked. What each could build of each
recipe is the build's own resolution: ``Backend.requested_targets`` (the recipe's
targets, or the override variable: ``PTKIT_CUDA_ARCHS``, ``PTKIT_HIP_TARGETS``) then
``Backend.resolve`` against what the compiler lists, so a bad override is the error
CMake and ``ptkit select`` give, and a missing target names the toolkit that has it.
The fixes name the recipe's ``[toolkit] packages``. Every command has a timeout
(``ptkit.platforms.commands``: never hangs, never raises).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import shlex
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ptkit.backends import BACKENDS, Backend, TargetError
from ptkit.backends.base import ToolkitCandidate, on_path
from ptkit.backends.cuda import BACKEND as CUDA
from ptkit.backends.hip import therock_sdk
from ptkit.backends.toolchain_cache import dev_toolchain_paths
from ptkit.doctor.model import ToolchainFacts
from ptkit.platforms.commands import CommandResult, run_command
from ptkit.recipes.model import Recipe

__all__ = [
    "could_build",
    "hip_device_library_targets",
    "probe_toolchains",
]

# pyproject.toml's [tool.scikit-build] cmake.version / ninja.version.
_MIN_VERSIONS = {"cmake": (3, 26), "ninja": (1, 11)}


def _version_tuple(text: str | None) -> tuple[int, ...]:
    match = re.match(r"(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def _first_line(result: CommandResult) -> str | None:
    if result.output is None:
        return None
    return next((ln.strip() for ln in result.output.splitlines() if ln.strip()), None)


def _existing(paths: Sequence[tuple[Path | None, str]]) -> list[tuple[Path, str]]:
    """The paths that are files, each once (by where it resolves to)."""
    seen: set[str] = set()
    result: list[tuple[Path, str]] = []
    for path, source in paths:
        if path is None or not path.is_file():
            continue
        try:
            key = str(path.resolve())
        except OSError:
            key = str(path)
        if key not in seen:
            seen.add(key)
            result.append((path, source))
    return result


# --- cmake, ninja ----------------------------------------------------------------------


def _build_tool(
    name: str, candidates: list[tuple[Path, str]], timeout_s: float
) -> list[ToolchainFacts]:
    minimum = _MIN_VERSIONS[name]
    need = ".".join(map(str, minimum))
    if not candidates:
        return [
            ToolchainFacts(
                name,
                None,
                None,
                (),
                f"nothing: every variant needs {name} >= {need}; pip install '{name}>={need}'",
                None,
            )
        ]
    rows = []
    for path, source in candidates:
        result = run_command([str(path), "--version"], timeout_s)
        line = _first_line(result) or ""
        match = re.search(r"(\d+\.\d+(?:\.\d+)?)", line)
        version = match.group(1) if match else None
        if version is None:
            could = f"unknown ({source}): its version could not be read"
        elif _version_tuple(version) < minimum:
            could = (
                f"nothing ({source}): {name} {version} is older than {need}; "
                f"pip install '{name}>={need}'"
            )
        else:
            could = f"every variant ({source})"
        rows.append(ToolchainFacts(name, str(path), version, (), could, result.problem))
    return rows


# --- what a compiler could build -------------------------------------------------------


def _toolkit_install(recipe: Recipe) -> str:
    """The command that installs the recipe's ``[toolkit] packages`` where the build finds
    them ("" when it lists none): ``ptkit toolchain install <variant>`` (ptkit's toolchain
    cache, never torch's environment) for a backend the cache serves, else pip into the
    build Python (TheRock's ROCm SDK)."""
    if not recipe.toolkit.packages:
        return ""
    if BACKENDS[recipe.backend].cached_toolkits:
        from ptkit.release.toolchains import install_command

        return install_command(recipe.name)
    argv = ["pip", "install", *recipe.toolkit.packages]
    if recipe.toolkit.index_url:
        argv += ["--index-url", recipe.toolkit.index_url]
    return shlex.join(argv)


def _toolkit_fix(recipe: Recipe) -> str:
    install = _toolkit_install(recipe)
    return f"install the {recipe.name} recipe's toolkit: {install}" if install else ""


def could_build(
    backend: Backend,
    recipe: Recipe,
    supported: Sequence[str],
    compiler: str,
    environ: Mapping[str, str] | None = None,
) -> str:
    """What a compiler that lists ``supported`` builds of ``recipe``, as the build
    resolves it: ``cu13: sm_90, …, compute_120``, or why nothing (a bad override, a
    target it lacks: the build's own error with its fix). ``compiler``: ``nvcc 13.5.37``."""
    field = backend.target_field
    if field is None:
        return f"{recipe.name}: no {backend.title} targets to build"
    try:
        request = backend.requested_targets(
            getattr(recipe.targets, field),
            getattr(recipe.targets, f"{field}_optional", ()),
            environ or {},
        )
    except TargetError as exc:
        return f"{recipe.name}: nothing: {exc}"
    resolution = backend.resolve(request, supported, compiler, _toolkit_fix(recipe))
    if resolution.error:
        return f"{recipe.name}: nothing: {resolution.error}"
    text = f"{recipe.name}: {', '.join(resolution.built)}"
    if request.source != "recipe":
        text += f" (from {request.source})"
    if resolution.dropped:
        text += f" (optional {', '.join(resolution.dropped)} dropped: {compiler} lacks them)"
    return text


def _source(candidate: ToolkitCandidate, chosen: ToolkitCandidate | None) -> str:
    return f"{candidate.source}, used by the build" if candidate == chosen else candidate.source


def _found(
    backend: Backend, environ: Mapping[str, str], search_paths: Sequence[str]
) -> tuple[list[ToolkitCandidate], ToolkitCandidate | None, list[ToolchainFacts]]:
    """The candidates whose compiler exists, the one the build takes, and a row for an
    explicitly named compiler that does not exist (the build fails on it)."""
    candidates = backend.toolkit_candidates(environ, search_paths)
    chosen = backend.find_toolkit(environ, search_paths)
    existing = [c for c in candidates if c.compiler.is_file()]
    broken = [
        ToolchainFacts(
            backend.compiler_name,
            str(c.compiler),
            None,
            (),
            f"nothing ({c.source}): the build fails: {c.source} names {c.compiler}, which "
            "does not exist",
            f"{c.compiler} does not exist",
        )
        for c in candidates
        if c.explicit and not c.compiler.is_file()
    ]
    return existing, chosen, broken


def _not_found(
    backend: Backend, environ: Mapping[str, str], search_paths: Sequence[str], fix: str
) -> ToolchainFacts:
    looked = backend.toolkit_candidates(environ, search_paths)
    where = ", ".join(f"{c.compiler} ({c.source})" for c in looked)
    return ToolchainFacts(
        backend.compiler_name,
        None,
        None,
        (),
        f"nothing: no {backend.compiler_name} ({f'looked at: {where}' if where else 'no candidate'}"
        f"); {fix}",
        None,
    )


def _recipes_of(backend: Backend, recipes: Sequence[Recipe]) -> list[Recipe]:
    return [r for r in recipes if r.backend == backend.name]


def _install_fixes(backend: Backend, recipes: Sequence[Recipe], otherwise: str) -> str:
    fixes = [_toolkit_fix(r) for r in _recipes_of(backend, recipes) if r.toolkit.packages]
    return "; or ".join([*fixes, otherwise]) if fixes else otherwise


# --- CUDA ------------------------------------------------------------------------------


def _nvcc(
    candidate: ToolkitCandidate,
    chosen: ToolkitCandidate | None,
    recipes: Sequence[Recipe],
    environ: Mapping[str, str],
    timeout_s: float,
) -> list[ToolchainFacts]:
    path = str(candidate.compiler)
    source = _source(candidate, chosen)
    result = run_command([path, "--version"], timeout_s)
    match = re.search(r"release (\d+\.\d+), V([\d.]+)", result.output or "")
    version = match.group(2) if match else None
    codes = run_command([path, "--list-gpu-code"], timeout_s)
    archs = run_command([path, "--list-gpu-arch"], timeout_s)
    targets = CUDA.listed_targets(f"{codes.output or ''}\n{archs.output or ''}")
    problem = result.problem or codes.problem or archs.problem
    cuda = _recipes_of(CUDA, recipes)
    if not targets:
        could = f"nothing: its targets could not be listed ({source})"
    elif not cuda:
        could = f"no cuda recipe to build ({source})"
    else:
        nvcc = f"nvcc {version or '?'} at {path}"
        could = "; ".join(could_build(CUDA, r, targets, nvcc, environ) for r in cuda)
        could += f" ({source})"
    return [ToolchainFacts("nvcc", path, version, targets, could, problem)]


# --- HIP -------------------------------------------------------------------------------


def hip_device_library_targets(root: Path) -> tuple[tuple[str, ...], Path | None]:
    """The gfx targets whose device libraries (``oclc_isa_version_<id>.bc``) the toolchain
    at ``root`` has: clang needs them to compile HIP for a target, so they say what it
    can build (Debian's clang knows gfx1100 but ships no device library for it)."""
    patterns = (
        "amdgcn/bitcode",
        "lib/llvm/amdgcn/bitcode",
        "llvm/amdgcn/bitcode",
        "lib/*/amdgcn/bitcode",
        "lib/llvm/lib/clang/*/lib/amdgcn/bitcode",
    )
    for pattern in patterns:
        for folder in sorted(root.glob(pattern)):
            ids = sorted(
                (
                    f"gfx{p.name[len('oclc_isa_version_') : -len('.bc')]}"
                    for p in folder.glob("oclc_isa_version_*.bc")
                ),
                key=lambda t: (len(t), t),  # gfx90a before gfx1100
            )
            if ids:
                return tuple(ids), folder
    return (), None


def _hip_could_build(
    recipe: Recipe,
    targets: Sequence[str],
    where: Path | None,
    version: str | None,
    environ: Mapping[str, str],
) -> str:
    hip = BACKENDS["hip"]
    if where is None:
        return (
            f"{recipe.name}: gfx targets not probed (no device-library folder found); the "
            "build probes each by compiling an empty kernel"
        )
    text = could_build(
        hip, recipe, targets, f"HIP {version or '?'} (device libraries in {where})", environ
    )
    want, have = _version_tuple(recipe.toolkit.version)[:1], _version_tuple(version)[:1]
    if want and have and want != have and ": nothing: " not in text:
        text += (
            f" (a compile proof: HIP {version} links libamdhip64.so.{have[0]}, a ROCm "
            f"{want[0]} torch has libamdhip64.so.{want[0]})"
        )
    return text


def _hipcc(
    candidate: ToolkitCandidate,
    chosen: ToolkitCandidate | None,
    recipes: Sequence[Recipe],
    environ: Mapping[str, str],
    timeout_s: float,
) -> list[ToolchainFacts]:
    path = str(candidate.compiler)
    # Debian's hipcc picks the NVIDIA platform when nvcc is installed: ask for AMD's.
    result = run_command(["env", "HIP_PLATFORM=amd", path, "--version"], timeout_s)
    match = re.search(r"HIP version: ([\w.\-]+)", result.output or "")
    version = match.group(1) if match else None
    targets, where = hip_device_library_targets(candidate.compiler.resolve().parent.parent)
    hip = _recipes_of(BACKENDS["hip"], recipes)
    could = "; ".join(_hip_could_build(r, targets, where, version, environ) for r in hip)
    return [
        ToolchainFacts(
            "hipcc",
            path,
            version,
            targets,
            f"{could or 'no hip recipe to build'} ({_source(candidate, chosen)})",
            result.problem,
        )
    ]


def _therock_row(environ: Mapping[str, str], recipes: Sequence[Recipe]) -> ToolchainFacts:
    """TheRock's ``rocm-sdk`` command (the HIP candidates say what its root holds)."""
    sdk = therock_sdk(environ)
    if sdk is not None:
        return ToolchainFacts("rocm-sdk", str(sdk), None, (), "TheRock's ROCm SDK", None)
    fix = _install_fixes(BACKENDS["hip"], recipes, "see https://github.com/ROCm/TheRock")
    return ToolchainFacts(
        "rocm-sdk", None, None, (), f"nothing: TheRock's SDK is not installed; {fix}", None
    )


# --- icpx, xcrun metal -----------------------------------------------------------------


def _icpx(
    candidate: ToolkitCandidate,
    chosen: ToolkitCandidate | None,
    recipes: Sequence[Recipe],
    environ: Mapping[str, str],
    timeout_s: float,
) -> list[ToolchainFacts]:
    path = candidate.compiler
    result = run_command([str(path), "--version"], timeout_s)
    match = re.search(r"Compiler (\d+\.\d+(?:\.\d+)?)", _first_line(result) or "")
    ocloc = (path.parent / "ocloc").is_file() or on_path("ocloc", environ) is not None
    xpu = _recipes_of(BACKENDS["xpu"], recipes)
    parts = []
    for recipe in xpu:
        aot = [t for t in recipe.targets.xpu if t != "spir64"]
        jit = [t for t in recipe.targets.xpu if t == "spir64"]
        if aot and not ocloc:
            parts.append(f"{recipe.name} needs ocloc for AOT {', '.join(aot)}: not found")
        else:
            parts.append(f"{recipe.name}: {', '.join([*aot, *jit])}")
    targets = tuple(t for r in xpu for t in r.targets.xpu)
    could = "; ".join(parts) or "no xpu recipe to build"
    return [
        ToolchainFacts(
            "icpx",
            str(path),
            match.group(1) if match else None,
            targets,
            f"{could} ({_source(candidate, chosen)})",
            result.problem,
        )
    ]


def _metal(environ: Mapping[str, str], timeout_s: float) -> list[ToolchainFacts]:
    if platform.system() != "Darwin":
        could = "metal: .metal sources only (compiled at first use); a .metallib needs macOS"
        return [ToolchainFacts("xcrun metal", None, None, (), could, None)]
    xcrun = on_path("xcrun", environ)
    if xcrun is None:
        could = "metal: .metal sources only; install Xcode for a .metallib"
        return [ToolchainFacts("xcrun metal", None, None, (), could, None)]
    result = run_command([str(xcrun), "-sdk", "macosx", "metal", "--version"], timeout_s)
    if not result.ok:
        could = "metal: .metal sources only (xcrun metal does not run: install Xcode)"
        return [ToolchainFacts("xcrun metal", str(xcrun), None, (), could, result.problem)]
    match = re.search(r"metal.*?(\d+(?:\.\d+)+)", _first_line(result) or "", re.IGNORECASE)
    return [
        ToolchainFacts(
            "xcrun metal",
            str(xcrun),
            match.group(1) if match else None,
            (),
            "metal: a .metallib",
            None,
        )
    ]


# --- all -------------------------------------------------------------------------------

_Row = Callable[
    [ToolkitCandidate, ToolkitCandidate | None, Sequence[Recipe], Mapping[str, str], float],
    list[ToolchainFacts],
]
# Per GPU backend: how one of its compilers is asked, and what to do when none is found.
_COMPILERS: tuple[tuple[str, _Row, str], ...] = (
    ("cuda", _nvcc, "point PTKIT_CUDA_ROOT at a CUDA toolkit"),
    ("hip", _hipcc, "install ROCm (apt install hipcc), or point PTKIT_HIP_ROOT at it"),
    (
        "xpu",
        _icpx,
        "install oneAPI (intel-oneapi-compiler-dpcpp-cpp) and source "
        "/opt/intel/oneapi/setvars.sh, or set PTKIT_ICPX",
    ),
)


def _rows(rows: list[ToolchainFacts]) -> list[ToolchainFacts]:
    return rows


def _load_recipes() -> tuple[list[Recipe], str | None]:
    try:
        from ptkit.selection import load_all_recipes, recipes_dir

        return list(load_all_recipes(recipes_dir()).values()), None
    except Exception as exc:  # RecipeError, SelectionError, no tomli on Python 3.10
        return [], f"recipes unreadable: {type(exc).__name__}: {exc}"


def probe_toolchains(
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = 3.0,
    recipes: Sequence[Recipe] | None = None,
    paths: Sequence[str] | None = None,
) -> tuple[ToolchainFacts, ...]:
    """Every build tool and what it could build; each tool's commands run concurrently
    (a missing or hanging one costs at most its own timeouts). ``paths``: where pip
    toolkits are looked for (default: ``sys.path`` and ptkit's dev environment; ptkit's
    toolchain cache is the backends' own candidate)."""
    env = os.environ if environ is None else environ
    search = [*sys.path, *dev_toolchain_paths()] if paths is None else list(paths)
    recipe_problem = None
    if recipes is None:
        loaded, recipe_problem = _load_recipes()
        recipes = loaded
    env_bin = Path(sys.executable).parent
    groups: list[Callable[[], list[ToolchainFacts]]] = [
        lambda: _build_tool(
            "cmake",
            _existing([(env_bin / "cmake", "this Python"), (on_path("cmake", env), "PATH")]),
            timeout_s,
        ),
        lambda: _build_tool(
            "ninja",
            _existing([(env_bin / "ninja", "this Python"), (on_path("ninja", env), "PATH")]),
            timeout_s,
        ),
    ]
    for name, ask, otherwise in _COMPILERS:
        backend = BACKENDS[name]
        if name == "hip":
            groups.append(functools.partial(_rows, [_therock_row(env, recipes)]))
        existing, chosen, broken = _found(backend, env, search)
        groups.append(functools.partial(_rows, broken))
        # One group per compiler: each runs up to three commands, and one that hangs
        # must not cost the others their time.
        for candidate in existing:
            groups.append(functools.partial(ask, candidate, chosen, recipes, env, timeout_s))
        if not existing and not broken:
            fix = _install_fixes(backend, recipes, otherwise)
            groups.append(functools.partial(_rows, [_not_found(backend, env, search, fix)]))
    groups.append(lambda: _metal(env, timeout_s))
    results: list[list[ToolchainFacts]] = [[] for _ in groups]

    def run(index: int) -> None:
        try:
            results[index] = groups[index]()
        except Exception as exc:  # a probe bug: one row says so, the others still come
            results[index] = [
                ToolchainFacts(
                    "?", None, None, (), "unknown", f"crashed: {type(exc).__name__}: {exc}"
                )
            ]

    threads = [
        threading.Thread(target=run, args=(i,), name=f"ptkit-doctor-tool-{i}", daemon=True)
        for i in range(len(groups))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()  # each command has its own timeout; collect_facts bounds the whole
    rows = [row for group in results for row in group]
    if recipe_problem:
        # Found compilers, but no recipe to compare with: say so instead of "nothing".
        compilers = {BACKENDS[name].compiler_name for name, _, _ in _COMPILERS}
        rows = [
            dataclasses.replace(r, could_build=f"unknown: {recipe_problem}")
            if r.path is not None and r.name in compilers
            else r
            for r in rows
        ]
    return tuple(rows)
