"""``ptkit doctor --build``: the build tools this machine has, and which variant recipe
each could build. Each tool is found where the CMake modules look for it (same order),
asked for its version with a timeout (``ptkit.hardware.commands``: never hangs, never
raises), and compared with the recipes' targets."""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ptkit.doctor.model import ToolchainFacts
from ptkit.hardware.commands import CommandResult, run_command

if TYPE_CHECKING:
    from ptkit.recipes.model import Recipe

__all__ = [
    "cuda_could_build",
    "hip_could_build",
    "hip_device_library_targets",
    "probe_toolchains",
]

# pyproject.toml's [tool.scikit-build] cmake.version / ninja.version.
_MIN_VERSIONS = {"cmake": (3, 26), "ninja": (1, 11)}
_CUDA_TARGET = re.compile(r"^(sm|compute)_(\d+)[af]?$")
# The tools whose could_build compares with the recipes' targets.
_RECIPE_TOOLS = ("nvcc", "hipcc", "icpx")


def _version_tuple(text: str | None) -> tuple[int, ...]:
    match = re.match(r"(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def _which(name: str, environ: Mapping[str, str]) -> Path | None:
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    return Path(found) if found else None


def _unique(paths: Sequence[tuple[Path | None, str]]) -> list[tuple[Path, str]]:
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


def _first_line(result: CommandResult) -> str | None:
    if result.output is None:
        return None
    return next((ln.strip() for ln in result.output.splitlines() if ln.strip()), None)


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


# --- CUDA ------------------------------------------------------------------------------


def cuda_could_build(recipe: Recipe, supported: Sequence[str], version: str | None) -> str:
    """``cu13: sm_90 … compute_120`` or ``cu13 needs sm_107, nvcc 13.0 lacks it``; the
    rule of ``ptkit_resolve_cuda_targets`` (a/f variants exist wherever their base does)."""

    def base(target: str) -> str:
        match = _CUDA_TARGET.match(target)
        return f"{match.group(1)}_{match.group(2)}" if match else target

    have = set(supported)
    missing = [t for t in recipe.targets.cuda if base(t) not in have]
    nvcc = f"nvcc {version or '?'}"
    if missing:
        them = "them" if len(missing) > 1 else "it"
        return f"{recipe.name} needs {', '.join(missing)}, {nvcc} lacks {them}"
    dropped = [t for t in recipe.targets.cuda_optional if base(t) not in have]
    built = [t for t in (*recipe.targets.cuda, *recipe.targets.cuda_optional) if t not in dropped]
    text = f"{recipe.name}: {', '.join(built)}"
    if dropped:
        text += f" (optional {', '.join(dropped)} dropped: {nvcc} lacks them)"
    return text


def _cuda_order(target: str) -> tuple[int, int, str]:
    """sm_* before compute_*, each by compute capability (sm_90 < sm_100)."""
    match = _CUDA_TARGET.match(target)
    if match is None:
        return (2, 0, target)
    return (0 if match.group(1) == "sm" else 1, int(match.group(2)), target)


def _nvcc_rows(
    path: Path, source: str, recipes: Sequence[Recipe], timeout_s: float
) -> list[ToolchainFacts]:
    return [_nvcc(path, source, recipes, timeout_s)]


def _nvcc_candidates(
    environ: Mapping[str, str], paths: Sequence[str], repo_roots: Sequence[Path]
) -> list[tuple[Path, str]]:
    found: list[tuple[Path | None, str]] = []
    root = environ.get("PTKIT_CUDA_ROOT")
    if root:
        found.append((Path(root) / "bin" / "nvcc", "PTKIT_CUDA_ROOT"))
    for entry in paths:
        nvidia = Path(entry or ".") / "nvidia"
        if nvidia.is_dir():
            found += [(p, "pip, used by the build") for p in sorted(nvidia.glob("cu*/bin/nvcc"))]
    for repo in repo_roots:
        pattern = "lib/python*/site-packages/nvidia/cu*/bin/nvcc"
        for nvcc in sorted((repo / ".toolchains").glob(f"cu*/{pattern}")):
            found.append((nvcc, f"ptkit's dev environment .toolchains/{nvcc.parents[6].name}"))
    found.append((_which("nvcc", environ), "PATH, used only with -DPTKIT_CUDA_USE_SYSTEM=ON"))
    return _unique(found)


def _nvcc(path: Path, source: str, recipes: Sequence[Recipe], timeout_s: float) -> ToolchainFacts:
    result = run_command([str(path), "--version"], timeout_s)
    match = re.search(r"release (\d+\.\d+), V([\d.]+)", result.output or "")
    version = match.group(2) if match else None
    codes = run_command([str(path), "--list-gpu-code"], timeout_s)
    archs = run_command([str(path), "--list-gpu-arch"], timeout_s)
    listed = {t for r in (codes, archs) for t in (r.output or "").split() if _CUDA_TARGET.match(t)}
    targets = tuple(sorted(listed, key=_cuda_order))
    problem = result.problem or codes.problem or archs.problem
    cuda = [r for r in recipes if r.backend == "cuda"]
    if not targets:
        could = f"nothing: its targets could not be listed ({source})"
    elif not cuda:
        could = f"no cuda recipe to build ({source})"
    else:
        could = "; ".join(cuda_could_build(r, targets, version) for r in cuda) + f" ({source})"
    return ToolchainFacts("nvcc", str(path), version, targets, could, problem)


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


def hip_could_build(
    recipe: Recipe, targets: Sequence[str], where: Path | None, version: str | None
) -> str:
    hip = f"HIP {version or '?'}"
    if where is None:
        return (
            f"{recipe.name}: gfx targets not probed (no device-library folder found); the "
            "build probes each by compiling an empty kernel"
        )
    missing = [t for t in recipe.targets.hip if t not in targets]
    if missing:
        return f"{recipe.name} needs {', '.join(missing)}: no device libraries for them in {where} ({hip})"
    text = f"{recipe.name}: {', '.join(recipe.targets.hip)}"
    want, have = _version_tuple(recipe.toolkit.version)[:1], _version_tuple(version)[:1]
    if want and have and want != have:
        text += (
            f" (a compile proof: {hip} links libamdhip64.so.{have[0]}, a ROCm {want[0]} torch "
            f"has libamdhip64.so.{want[0]})"
        )
    return text


def _hip(
    environ: Mapping[str, str], env_bin: Path, recipes: Sequence[Recipe], timeout_s: float
) -> list[ToolchainFacts]:
    rows: list[ToolchainFacts] = []
    candidates: list[tuple[Path | None, str]] = []
    if environ.get("PTKIT_HIP_ROOT"):
        candidates.append((Path(environ["PTKIT_HIP_ROOT"]) / "bin" / "hipcc", "PTKIT_HIP_ROOT"))
    sdk = _unique([(env_bin / "rocm-sdk", "this Python"), (_which("rocm-sdk", environ), "PATH")])
    if sdk:
        path, _ = sdk[0]
        result = run_command([str(path), "path", "--root"], timeout_s)
        root = (result.output or "").strip().splitlines()[-1:] if result.ok else []
        if root:
            candidates.append((Path(root[0]) / "bin" / "hipcc", "TheRock rocm-sdk"))
            could = f"the HIP toolchain at {root[0]}"
        else:
            could = "nothing: `rocm-sdk path --root` gave no folder; pip install 'rocm[devel]'"
        rows.append(ToolchainFacts("rocm-sdk", str(path), None, (), could, result.problem))
    else:
        rows.append(
            ToolchainFacts(
                "rocm-sdk",
                None,
                None,
                (),
                "nothing: TheRock's SDK is not installed (pip install the rocm recipe's packages)",
                None,
            )
        )
    if environ.get("ROCM_PATH"):
        candidates.append((Path(environ["ROCM_PATH"]) / "bin" / "hipcc", "ROCM_PATH"))
    candidates.append((_which("hipcc", environ), "PATH"))
    candidates.append((Path("/opt/rocm/bin/hipcc"), "/opt/rocm"))
    hip_recipes = [r for r in recipes if r.backend == "hip"]
    found = _unique(candidates)
    if not found:
        rows.append(
            ToolchainFacts(
                "hipcc",
                None,
                None,
                (),
                "nothing: no hipcc (TheRock rocm-sdk, ROCM_PATH, PATH or /opt/rocm); "
                "pip install the rocm recipe's packages or apt install hipcc",
                None,
            )
        )
    for path, source in found:
        # Debian's hipcc picks the NVIDIA platform when nvcc is installed: ask for AMD's.
        result = run_command(["env", "HIP_PLATFORM=amd", str(path), "--version"], timeout_s)
        match = re.search(r"HIP version: ([\w.\-]+)", result.output or "")
        version = match.group(1) if match else None
        targets, where = hip_device_library_targets(path.resolve().parent.parent)
        could = "; ".join(hip_could_build(r, targets, where, version) for r in hip_recipes)
        rows.append(
            ToolchainFacts(
                "hipcc",
                str(path),
                version,
                targets,
                f"{could or 'no hip recipe to build'} ({source})",
                result.problem,
            )
        )
    return rows


# --- icpx, xcrun metal -----------------------------------------------------------------


def _icpx(
    environ: Mapping[str, str], recipes: Sequence[Recipe], timeout_s: float
) -> list[ToolchainFacts]:
    candidates: list[tuple[Path | None, str]] = []
    if environ.get("PTKIT_ICPX"):
        candidates.append((Path(environ["PTKIT_ICPX"]), "PTKIT_ICPX"))
    if environ.get("CMPLR_ROOT"):
        candidates.append((Path(environ["CMPLR_ROOT"]) / "bin" / "icpx", "CMPLR_ROOT"))
    if environ.get("ONEAPI_ROOT"):
        oneapi = Path(environ["ONEAPI_ROOT"]) / "compiler" / "latest" / "bin" / "icpx"
        candidates.append((oneapi, "ONEAPI_ROOT"))
    candidates.append((Path("/opt/intel/oneapi/compiler/latest/bin/icpx"), "/opt/intel/oneapi"))
    candidates.append((_which("icpx", environ), "PATH"))
    found = _unique(candidates)
    xpu = [r for r in recipes if r.backend == "xpu"]
    if not found:
        return [
            ToolchainFacts(
                "icpx",
                None,
                None,
                (),
                "nothing: no icpx; install oneAPI (intel-oneapi-compiler-dpcpp-cpp) and source "
                "/opt/intel/oneapi/setvars.sh, or set PTKIT_ICPX",
                None,
            )
        ]
    path, source = found[0]  # the build takes the first, never falls back
    result = run_command([str(path), "--version"], timeout_s)
    match = re.search(r"Compiler (\d+\.\d+(?:\.\d+)?)", _first_line(result) or "")
    ocloc = (path.parent / "ocloc").is_file() or _which("ocloc", environ) is not None
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
            f"{could} ({source})",
            result.problem,
        )
    ]


def _metal(environ: Mapping[str, str], timeout_s: float) -> list[ToolchainFacts]:
    if platform.system() != "Darwin":
        could = "metal: .metal sources only (compiled at first use); a .metallib needs macOS"
        return [ToolchainFacts("xcrun metal", None, None, (), could, None)]
    xcrun = _which("xcrun", environ)
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
    (a missing or hanging one costs at most its own timeouts)."""
    env = os.environ if environ is None else environ
    search = list(sys.path if paths is None else paths)
    recipe_problem = None
    if recipes is None:
        loaded, recipe_problem = _load_recipes()
        recipes = loaded
    recipes = [_with_overrides(r, env) for r in recipes]
    env_bin = Path(sys.executable).parent
    repo_roots = _unique_dirs([Path.cwd(), Path(__file__).resolve().parents[4]])
    groups: list[Callable[[], list[ToolchainFacts]]] = [
        lambda: _build_tool(
            "cmake",
            _unique([(env_bin / "cmake", "this Python"), (_which("cmake", env), "PATH")]),
            timeout_s,
        ),
        lambda: _build_tool(
            "ninja",
            _unique([(env_bin / "ninja", "this Python"), (_which("ninja", env), "PATH")]),
            timeout_s,
        ),
        lambda: _hip(env, env_bin, recipes, timeout_s),
        lambda: _icpx(env, recipes, timeout_s),
        lambda: _metal(env, timeout_s),
    ]
    # One group per nvcc: each runs three commands, and one that hangs must not cost the
    # others their time.
    nvccs = _nvcc_candidates(env, search, repo_roots)
    nvcc_groups: list[Callable[[], list[ToolchainFacts]]] = [
        functools.partial(_nvcc_rows, path, source, recipes, timeout_s) for path, source in nvccs
    ]
    if not nvccs:
        missing = ToolchainFacts(
            "nvcc",
            None,
            None,
            (),
            "nothing: no nvcc; pip install the cu13 recipe's toolkit packages "
            "(nvidia-cuda-nvcc==13.5.*) or set PTKIT_CUDA_ROOT",
            None,
        )
        nvcc_groups.append(lambda: [missing])
    groups[2:2] = nvcc_groups  # rows in the order cmake, ninja, nvcc, HIP, icpx, metal
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
        rows = [
            dataclasses.replace(r, could_build=f"unknown: {recipe_problem}")
            if r.path is not None and r.name in _RECIPE_TOOLS
            else r
            for r in rows
        ]
    return tuple(rows)


def _with_overrides(recipe: Recipe, environ: Mapping[str, str]) -> Recipe:
    """The build's target overrides (``ptkit_add_kernel_library``): PTKIT_CUDA_ARCHS in
    TORCH_CUDA_ARCH_LIST style (``9.0;10.0+PTX``), PTKIT_HIP_TARGETS (``gfx90a gfx942``)."""
    targets = recipe.targets
    cuda_archs = environ.get("PTKIT_CUDA_ARCHS", "").strip()
    if recipe.backend == "cuda" and cuda_archs:
        parsed: list[str] = []
        for item in re.split(r"[;\s]+", cuda_archs):
            match = re.fullmatch(r"(\d+)\.(\d)([af]?)(\+PTX)?", item)
            if match:
                cc = f"{match.group(1)}{match.group(2)}{match.group(3)}"
                parsed += [f"sm_{cc}"] + ([f"compute_{cc}"] if match.group(4) else [])
        targets = dataclasses.replace(targets, cuda=tuple(parsed), cuda_optional=())
    hip_targets = environ.get("PTKIT_HIP_TARGETS", "").strip()
    if recipe.backend == "hip" and hip_targets:
        hip = tuple(t for t in re.split(r"[ ,;]+", hip_targets) if t)
        targets = dataclasses.replace(targets, hip=hip, hip_optional=())
    return recipe if targets is recipe.targets else dataclasses.replace(recipe, targets=targets)


def _unique_dirs(dirs: Sequence[Path]) -> list[Path]:
    seen: list[Path] = []
    for d in dirs:
        try:
            resolved = d.resolve()
        except OSError:
            continue
        if resolved not in seen and (resolved / ".toolchains").is_dir():
            seen.append(resolved)
    return seen
