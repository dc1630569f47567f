"""The CMake package asks ptkit's Python modules instead of re-deriving their rules: the
version check, the recipe feed, the backend list, the ISA levels, target overrides and
the toolkit messages. Real CMake configures of small projects against the installed
package's CMake folder, no compiler beyond the host's C++ (the GPU builds and
scikit-build-core: test_cmake_package.py). Integration, not unit: each test runs CMake,
about a second apiece."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, python_env

import ptkit
from ptkit.backends import BACKENDS
from ptkit.recipes.model import cmake_feed, load_recipe

pytestmark = pytest.mark.integration

CMAKE_DIR = Path(ptkit.__file__).resolve().parent / "cmake"  # the installed toolkit's
VENV_BIN = Path(sys.executable).parent


def _configure(
    root: Path, body: str, *, find: str = "find_package(ptkit CONFIG REQUIRED)", **env: str
) -> subprocess.CompletedProcess[str]:
    """Configure a project whose CMakeLists is ``body`` after finding the source tree's
    ptkit; the caller's PTKIT_* variables are left out."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.26)\nproject(demo LANGUAGES CXX)\n{find}\n{body}"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    return subprocess.run(
        [
            str(VENV_BIN / "cmake"),
            "-S",
            str(root),
            "-B",
            str(root / "build"),
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={VENV_BIN / 'ninja'}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dptkit_DIR={CMAKE_DIR}",
        ],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _flat(text: str) -> str:
    """CMake wraps its error messages: compare them with whitespace collapsed."""
    return " ".join(text.split())


def _report(root: Path) -> dict[str, dict[str, str]]:
    data = json.loads((root / "build" / "ptkit-build-report.json").read_text())
    return {row["backend"]: row for row in data["backends"]}


@pytest.mark.parametrize(
    ("requested", "compatible"),
    [("", True), ("0.1", True), ("0.1.0", True), ("0", True), ("0.9", False), ("0.2", False),
     ("1.0", False), ("0.1.1", False)],
)  # fmt: skip
def test_find_package_checks_the_version_of_ptkit_version_py(
    tmp_path: Path, requested: str, compatible: bool
) -> None:
    """0.1.0 (ptkit/_version.py) serves requests of its own 0.x minor at or below it."""
    proc = _configure(
        tmp_path,
        'message(STATUS "demo: ptkit ${ptkit_VERSION}")\n',
        find=f"find_package(ptkit {requested} CONFIG REQUIRED)",
    )
    if compatible:
        assert proc.returncode == 0, proc.stderr
        assert "demo: ptkit 0.1.0" in proc.stdout
    else:
        assert proc.returncode != 0
        message = _flat(proc.stderr)
        assert "The version found is not compatible with the version requested" in message
        assert "version: 0.1.0" in message


def test_read_recipe_sets_every_field_of_the_feed(tmp_path: Path) -> None:
    feed = cmake_feed(load_recipe("cu13", REPO / "recipes"))
    prints = "".join(f'message(STATUS "demo: {k}=${{PTKIT_RECIPE_{k}}}")\n' for k, _ in feed)
    proc = _configure(
        tmp_path, f'ptkit_read_recipe(cu13 RECIPES_DIR "{REPO / "recipes"}")\n{prints}'
    )
    assert proc.returncode == 0, proc.stderr
    seen = [line.split("demo: ", 1)[1] for line in proc.stdout.splitlines() if "demo: " in line]
    assert seen == [f"{k}={v}" for k, v in feed]


def test_a_bad_recipe_stops_configure_with_every_problem(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "bad.toml").write_text(
        '[variant]\nname = "bad"\nbackend = "rocm"\n[targets]\nhip = ["gfx9000!"]\n'
    )
    proc = _configure(tmp_path / "p", f'ptkit_read_recipe(bad RECIPES_DIR "{recipes}")\n')
    assert proc.returncode != 0
    message = _flat(proc.stderr)
    assert "ptkit_read_recipe(bad): " in message
    assert "variant.backend: 'rocm' is not a backend; expected one of cpu, cuda" in message
    assert "variant.local-version is missing" in message
    assert "targets.hip: 'gfx9000!' is not an AMD GPU target" in message


def test_the_backends_and_the_report_rows_come_from_ptkit_backends(tmp_path: Path) -> None:
    proc = _configure(tmp_path / "a", 'message(STATUS "demo: ${PTKIT_BACKENDS}")\n')
    assert f"demo: {';'.join(BACKENDS)}" in proc.stdout
    assert list(_report(tmp_path / "a")) == list(BACKENDS)
    wrong = _configure(
        tmp_path / "b",
        "ptkit_add_kernel_library(x BACKEND gpu NAMESPACE d SOURCES a.cpp OPS o DTYPES float32 "
        "INSTALL_DIR d)\n",
    )
    assert f"ptkit_add_kernel_library(x): BACKEND gpu is not one of {', '.join(BACKENDS)}" in _flat(
        wrong.stderr
    )


@pytest.mark.parametrize(
    "value",
    ["9.0;bogus;12.0+PTX", "9.0,10.0", "sm_90"],
)
def test_a_target_override_python_refuses_is_refused_with_its_words(
    tmp_path: Path, value: str
) -> None:
    """The resolver asks python -m ptkit.backends request before it needs a compiler: the
    error is the TargetError Python raises for the same value, word for word."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - the text is what is compared
        BACKENDS["cuda"].parse_override(value)
    proc = _configure(
        tmp_path,
        "ptkit_resolve_targets(cuda TARGETS sm_90 RESULT_PREFIX r)\n"
        'message(STATUS "demo: error=${r_ERROR}")\n',
        PTKIT_CUDA_ARCHS=value,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"demo: error={info.value}" in proc.stdout


def test_the_isa_levels_and_their_flags_come_from_the_platform(tmp_path: Path) -> None:
    (tmp_path / "k.cpp").write_text("int k() { return 1; }\n")
    proc = _configure(
        tmp_path,
        "add_library(t MODULE k.cpp)\n"
        "ptkit_target_cpu_isa(t SOURCES k.cpp ISA default x86-64-v3 BUILT_VAR built)\n"
        "get_target_property(flags t_isa_x86_64_v3 COMPILE_OPTIONS)\n"
        'message(STATUS "demo: ${built} | ${flags}")\n'
        "ptkit_target_cpu_isa(t SOURCES k.cpp ISA x86-64-v9)\n",
    )
    # Compiled like the library (its options first), then the level's flags, which win.
    assert (
        "demo: x86-64-v3;default | $<TARGET_PROPERTY:t,COMPILE_OPTIONS>;-march=x86-64-v3;"
        "-mtune=generic;" in proc.stdout
    )
    assert (
        "ptkit_target_cpu_isa(t): unknown CPU ISA level 'x86-64-v9'; known: amx-bf16, "
        "avx512-bf16, x86-64-v4, x86-64-v3, x86-64-v2, neon-bf16, default"
    ) in _flat(proc.stderr)


def _isa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptkit.platforms", "isa-flags", *args],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_isa_levels_that_do_not_apply_are_skipped() -> None:
    # The processor's own levels, best first, are the order PTKIT_CPU_ISA caps in (KNOWN).
    assert _isa("Linux", "aarch64", "GNU", "x86-64-v3", "default").stdout.splitlines() == [
        "LEVELS=default",
        "SKIPPED=x86-64-v3",
        "FLAGS_0=",
        "KNOWN=neon-bf16;default",
    ]
    # MSVC has no flag for v2 (its copy would be the baseline again), nor for the levels
    # whose paths are GNU intrinsics (its portable kernels would be x86-64-v4's again).
    assert _isa(
        "Windows", "AMD64", "MSVC", "amx-bf16", "x86-64-v2", "x86-64-v3"
    ).stdout.splitlines() == [
        "LEVELS=x86-64-v3;default",
        "SKIPPED=amx-bf16;x86-64-v2",
        "FLAGS_0=/arch:AVX2",
        "FLAGS_1=",
        "KNOWN=amx-bf16;avx512-bf16;x86-64-v4;x86-64-v3;x86-64-v2;default",
    ]
    unknown = _isa("Plan9", "x86_64", "GNU")
    assert unknown.returncode == 1 and "no platform module for system 'Plan9'" in unknown.stderr


def test_a_missing_toolkit_names_ptkit_toolchain_install_and_no_pin_without_a_recipe(
    tmp_path: Path,
) -> None:
    """Where no nvcc is to be found (none on the build Python's path, none in ptkit's
    toolchain cache, no system one asked for), the reason's fix is `ptkit toolchain
    install` of the recipe (never a pip install into torch's environment), else no pin."""
    empty = str(tmp_path / "no-cache")
    with_recipe = _configure(
        tmp_path / "a",
        f'ptkit_read_recipe(cu13 RECIPES_DIR "{REPO / "recipes"}")\n'
        "ptkit_enable_backend(cuda RESULT_VAR have)\n",
        PATH="/usr/bin:/bin",
        PTKIT_CACHE_DIR=empty,
    )
    assert with_recipe.returncode == 0, with_recipe.stderr
    detail = _report(tmp_path / "a")["cuda"]["detail"]
    assert detail.startswith("nvcc not found (searched PTKIT_CUDA_ROOT, then pip's")
    assert "then ptkit's toolchain cache (ptkit toolchain install)" in detail
    assert (
        "Fix: install recipe cu13's toolkit into ptkit's toolchain cache: "
        f"{sys.executable} -m ptkit toolchain install cu13 --source {REPO} (ptkit build does "
        "this by itself), or set PTKIT_CUDA_ROOT" in detail
    )
    assert "nvidia-cuda-nvcc" not in detail
    without = _configure(
        tmp_path / "b",
        "ptkit_enable_backend(cuda RESULT_VAR have)\n",
        PATH="/usr/bin:/bin",
        PTKIT_CACHE_DIR=empty,
    )
    assert without.returncode == 0, without.stderr
    detail = _report(tmp_path / "b")["cuda"]["detail"]
    assert "nvcc not found" in detail and "ptkit toolchain install" in detail
    assert "Fix: set PTKIT_CUDA_ROOT to a CUDA toolkit" in detail
    missing = _configure(
        tmp_path / "c",
        "ptkit_enable_backend(cuda RESULT_VAR have)\n",
        PTKIT_CUDA_ROOT=str(tmp_path / "nowhere"),
    )
    assert missing.returncode == 0, missing.stderr
    assert _report(tmp_path / "c")["cuda"]["detail"] == (
        f"{tmp_path / 'nowhere' / 'bin' / 'nvcc'} (from PTKIT_CUDA_ROOT) does not exist. "
        "Fix: point PTKIT_CUDA_ROOT at the toolkit, or unset it"
    )


def _reconfigure(build: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Configure the build folder ``build`` again (its CMakeCache.txt as it is)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    return subprocess.run(
        [str(VENV_BIN / "cmake"), "-S", str(build.parent), "-B", str(build), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("variable", "backend", "compiler"),
    [
        ("PTKIT_CUDA_ROOT", "cuda", "bin/nvcc"),
        ("PTKIT_HIP_ROOT", "hip", "bin/hipcc"),
        ("PTKIT_ICPX", "xpu", ""),  # the compiler itself
    ],
)
def test_an_environment_override_replaces_what_an_earlier_configure_cached(
    tmp_path: Path, variable: str, backend: str, compiler: str
) -> None:
    """The fix a message gives works when followed in the same build folder: the
    environment variable is read on every configure and never cached (so unsetting it
    takes effect too), and it replaces a -D value an earlier configure cached."""
    root = tmp_path / "p"
    body = f"ptkit_enable_backend({backend} RESULT_VAR have)\n"
    first = _configure(root, body, **{variable: str(tmp_path / "first")})
    assert first.returncode == 0, first.stderr
    assert str(tmp_path / "first") in _report(root)[backend]["detail"]
    cache = (root / "build" / "CMakeCache.txt").read_text()
    assert f"{tmp_path / 'first'}" not in cache  # the environment's value is not cached
    second = _reconfigure(root / "build", **{variable: str(tmp_path / "second")})
    assert second.returncode == 0, second.stderr
    detail = _report(root)[backend]["detail"]
    assert f"{tmp_path / 'second' / compiler} (from {variable}) does not exist" in detail
    # A -D value is cached; its message says how to replace or drop it …
    cached = _reconfigure(root / "build", f"-D{variable}={tmp_path / 'cached'}")
    assert cached.returncode == 0, cached.stderr
    assert _report(root)[backend]["detail"] == (
        f"{tmp_path / 'cached' / compiler} (from -D{variable}, cached in {root / 'build'}) does "
        f"not exist. Fix: set the environment variable {variable} to the toolkit (it replaces "
        f"the cached value), or drop the cached one: cmake -U{variable} {root / 'build'}"
    )
    # … and the environment variable given on the next run replaces it.
    replaced = _reconfigure(root / "build", **{variable: str(tmp_path / "third")})
    assert replaced.returncode == 0, replaced.stderr
    assert (
        f"ptkit: {variable} from the environment ({tmp_path / 'third'}) replaces the cached "
        f"-D{variable}={tmp_path / 'cached'}" in _flat(replaced.stdout)
    )
    assert f"{tmp_path / 'third' / compiler} (from {variable})" in _report(root)[backend]["detail"]


# --- the ABI mode, the library's own arguments ---------------------------------------

STABLE_OPS = (
    "#include <torch/csrc/stable/library.h>\n"
    'STABLE_TORCH_LIBRARY(demo, m) { m.def("noop(Tensor x) -> Tensor"); }\n'
)


def _library(
    root: Path, arguments: str, *, before: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ops.cpp").write_text(STABLE_OPS)
    (root / "kernels.cpp").write_text("int kernel() { return 1; }\n")
    return _configure(
        root,
        f"{before}ptkit_add_kernel_library(demo_cpu BACKEND cpu NAMESPACE demo SOURCES ops.cpp "
        f"{arguments} OPS noop DTYPES float32 INSTALL_DIR demo/_native)\n",
        **env,
    )


def _manifest(root: Path) -> dict[str, object]:
    return json.loads((root / "build" / "demo_cpu.manifest.in.json").read_text())


@pytest.mark.parametrize(
    ("arguments", "before", "cache", "abi"),
    [
        ("", "", "", "stable"),
        ("", "set(PTKIT_RECIPE_ABI torch)\n", "", "torch"),  # what ptkit_read_recipe sets
        ("", "set(PTKIT_RECIPE_ABI torch)\n", "stable", "stable"),
        ("ABI torch", "", "stable", "torch"),
        ("ABI stable", "set(PTKIT_RECIPE_ABI torch)\n", "torch", "stable"),
    ],
)
def test_the_abi_is_the_calls_else_ptkit_abi_else_the_recipes_else_stable(
    tmp_path: Path, arguments: str, before: str, cache: str, abi: str
) -> None:
    body = before + (f'set(PTKIT_ABI "{cache}" CACHE STRING "" FORCE)\n' if cache else "")
    proc = _library(tmp_path, arguments, before=body)
    assert proc.returncode == 0, proc.stderr
    torch = _manifest(tmp_path)["torch"]
    assert isinstance(torch, dict) and torch["abi"] == abi
    import torch as real_torch

    minor = ".".join(real_torch.__version__.split(".")[:2])
    assert torch["target_version"] == (minor if abi == "torch" else "2.10")
    assert ("cxx11_abi" in torch) is (abi == "torch")
    assert torch["built_with"] == real_torch.__version__


def test_a_wrong_abi_names_where_it_came_from(tmp_path: Path) -> None:
    proc = _library(tmp_path / "a", "ABI classic")
    assert proc.returncode != 0
    assert (
        "ptkit_add_kernel_library(demo_cpu): ABI 'classic' is not one of stable, torch: stable "
        "(the LibTorch stable ABI" in _flat(proc.stderr)
    )
    recipe = _library(tmp_path / "b", "", before="set(PTKIT_RECIPE_ABI Torch)\n")
    assert "the recipe's abi 'Torch' is not one of stable, torch (did you mean 'torch'?)" in _flat(
        recipe.stderr
    )


def test_a_classic_include_in_a_stable_library_fails_configure_naming_it(tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "ops.cpp").write_text("#include <torch/all.h>\n#include <c10/cuda/CUDAStream.h>\n")
    proc = _configure(
        tmp_path,
        "ptkit_add_kernel_library(demo_cpu BACKEND cpu NAMESPACE demo SOURCES ops.cpp "
        "OPS noop DTYPES float32 INSTALL_DIR demo/_native)\n",
    )
    assert proc.returncode != 0
    message = _flat(proc.stderr)
    assert (
        "ptkit_add_kernel_library(demo_cpu): ops.cpp:1 includes <torch/all.h>, "
        "<c10/cuda/CUDAStream.h> (line 2): torch's classic C++ API" in message
    )
    assert "Fix: build it in the torch mode (ABI torch" in message
    row = _report(tmp_path)["cpu"]
    assert row["status"] == "failed" and row["detail"].startswith("demo_cpu: ops.cpp:1 includes")


def test_the_librarys_own_arguments_reach_its_compile_and_link_lines(tmp_path: Path) -> None:
    proc = _library(
        tmp_path,
        "ISA_SOURCES kernels.cpp ISA x86-64-v3 DEFINES DEMO_FAST=1 COMPILE_OPTIONS -fno-math-errno "
        "LINK_LIBRARIES m REQUIRES_ISA avx512-bf16",
    )
    assert proc.returncode == 0, proc.stderr
    ninja = (tmp_path / "build" / "build.ninja").read_text()
    commands = [
        line for line in ninja.splitlines() if line.strip().startswith(("DEFINES", "FLAGS"))
    ]
    text = "\n".join(commands)
    # The library and both ISA copies get the defines, the options and the required level.
    assert text.count("-DDEMO_FAST=1") == 3, text
    assert text.count("-fno-math-errno") == 3
    assert text.count("-mavx512bf16") == 3
    assert "-lm" in ninja or "libm" in ninja
    assert _manifest(tmp_path)["requires_isa"] == ["avx512-bf16"]
    assert "ptkit: demo_cpu: requires CPU ISA avx512-bf16" in proc.stdout
    assert "requires CPU ISA avx512-bf16" in _report(tmp_path)["cpu"]["detail"]


def test_an_unknown_required_level_fails_configure_with_the_known_ones(tmp_path: Path) -> None:
    proc = _library(tmp_path, "REQUIRES_ISA avx512bf16")
    assert proc.returncode != 0
    assert (
        "ptkit_add_kernel_library(demo_cpu): REQUIRES_ISA avx512bf16: not a CPU ISA level of "
        "x86_64 (did you mean 'avx512-bf16'?)" in _flat(proc.stderr)
    )
