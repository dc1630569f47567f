"""ptkit.recipes: the one recipe model, its generic parser, the JSON schema and the CMake
feed derived from it, and the two commands CMake and scripts/bootstrap run."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from ptkit.backends import BACKENDS
from ptkit.platforms import RELEASE_PLATFORMS
from ptkit.recipes import model
from ptkit.recipes.model import (
    Recipe,
    RecipeError,
    Targets,
    cmake_feed,
    load_recipe,
    parse_recipe,
    schema_text,
)
from ptkit.release.version_provider import variant_version

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"
SRC = REPO / "src"


def _write(folder: Path, variant: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{variant}.toml"
    path.write_text(text)
    return path


def _problems(folder: Path, variant: str, text: str) -> str:
    _write(folder, variant, text)
    with pytest.raises(RecipeError) as info:
        load_recipe(variant, folder)
    return str(info.value)


def _tool(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ptkit.recipes …`` as CMake runs it: this Python, PYTHONPATH at src/."""
    return subprocess.run(
        [sys.executable, "-m", "ptkit.recipes", *args],
        env={**os.environ, "PYTHONPATH": str(SRC), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- the project's recipes -------------------------------------------------------------


def test_cpu_recipe_is_valid() -> None:
    recipe = load_recipe("cpu", RECIPES)
    assert (recipe.backend, recipe.local_version, recipe.index_path) == ("cpu", "cpu", "cpu")
    assert recipe.targets.isa[-1] == "default"
    assert recipe.release is not None and "win_amd64" in recipe.release.platforms


def test_version_carries_the_variant_label() -> None:
    assert variant_version(REPO, "cpu", "ptkit") == "0.1.0+cpu"
    assert variant_version(REPO, "cu13", "2.3.0") == "2.3.0+cu13"


@pytest.mark.parametrize(
    ("variant", "backend", "targets"),
    [
        (
            "cu13",
            "cuda",
            ("sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120", "compute_120"),
        ),
        ("rocm7.14", "hip", ("gfx942", "gfx950", "gfx1100", "gfx1201")),
        ("xpu", "xpu", ("pvc", "bmg", "spir64")),
        ("metal", "metal", ()),
    ],
)
def test_every_accelerator_recipe_is_valid(
    variant: str, backend: str, targets: tuple[str, ...]
) -> None:
    recipe = load_recipe(variant, RECIPES)
    assert recipe.backend == backend and recipe.local_version == variant == recipe.index_path
    assert recipe.backend_targets() == (targets, ())


def test_rocm_toolkit_comes_from_therocks_index() -> None:
    toolkit = load_recipe("rocm7.14", RECIPES).toolkit
    assert toolkit.index_url.startswith("https://rocm.nightlies.amd.com/")
    assert toolkit.packages == ("rocm[libraries,devel]==7.14.*",)
    assert toolkit.pip_install == (
        f"pip install --index-url {toolkit.index_url} 'rocm[libraries,devel]==7.14.*'"
    )


def test_unknown_variant_lists_known_ones() -> None:
    with pytest.raises(RecipeError, match=r"no recipe for variant 'cu99'.*known variants: cpu"):
        load_recipe("cu99", RECIPES)


def test_the_index_path_defaults_to_the_name(tmp_path: Path) -> None:
    _write(tmp_path, "plain", '[variant]\nname = "plain"\nbackend = "cpu"\nlocal-version = "p"\n')
    recipe = load_recipe("plain", tmp_path)
    assert (recipe.index_path, recipe.release, recipe.targets) == ("plain", None, Targets())


# --- the generic parser: every problem at once ------------------------------------------


def test_every_problem_is_reported_at_once_with_suggestions(tmp_path: Path) -> None:
    message = _problems(
        tmp_path,
        "bad",
        '[variant]\nname = "bad"\nbackend = "cudaa"\nlocal-versoin = "x"\n'
        '[targets]\nisa = "default"\ncuda-optinal = []\n[relase]\n',
    )
    assert message.startswith(f"{tmp_path / 'bad.toml'}: ")
    for expected in (
        "unknown key 'relase' (did you mean 'release'?)",
        "unknown key variant.'local-versoin' (did you mean 'local-version'?)",
        "unknown key targets.'cuda-optinal' (did you mean 'cuda-optional'?)",
        "variant.backend: 'cudaa' is not a backend (did you mean 'cuda'?); expected one of "
        "cpu, cuda, hip, xpu, metal",
        "variant.local-version is missing (a PEP 440 local label (lower-case letters, digits "
        "and dots))",
        "targets.isa must be a list of CPU ISA levels (amx-bf16, avx512-bf16, x86-64-v4, "
        "x86-64-v3, x86-64-v2, neon-bf16, default), got 'default'",
    ):
        assert expected in message, message
    assert message.count("; ") >= 5


def test_isa_levels_are_the_platforms(tmp_path: Path) -> None:
    text = '[variant]\nname = "i"\nbackend = "cpu"\nlocal-version = "i"\n[targets]\nisa = ["x86-64-v5"]\n'
    assert (
        "targets.isa: 'x86-64-v5' is not a CPU ISA level (did you mean 'x86-64-v4'?); expected "
        "one of amx-bf16, avx512-bf16, x86-64-v4, x86-64-v3, x86-64-v2, neon-bf16, default"
    ) in _problems(tmp_path, "i", text)


def test_the_backends_come_from_the_backend_table() -> None:
    assert model._choices(str, dataclasses.fields(Recipe)[1].metadata) == tuple(BACKENDS)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('local-version = "CU 13"', "variant.local-version: 'CU 13' is not a PEP 440 local label"),
        ('local-version = ""', "variant.local-version must not be empty"),
        ("local-version = 13", "variant.local-version must be a string, got 13"),
        (
            'local-version = "x"\ntorch-index-url = "download.pytorch.org"',
            "variant.torch-index-url: 'download.pytorch.org' is not an http(s) URL",
        ),
    ],
)
def test_scalar_values_are_checked(tmp_path: Path, line: str, expected: str) -> None:
    text = f'[variant]\nname = "x"\nbackend = "cpu"\n{line}\n'
    assert expected in _problems(tmp_path, "x", text)


def test_the_file_is_named_after_the_variant(tmp_path: Path) -> None:
    text = '[variant]\nname = "cu12"\nbackend = "cpu"\nlocal-version = "x"\n'
    assert "variant.name is 'cu12' but the file is other.toml" in _problems(tmp_path, "other", text)


def test_missing_and_malformed_tables(tmp_path: Path) -> None:
    assert "the [variant] table is missing" in _problems(tmp_path, "v", "[targets]\n")
    message = _problems(tmp_path, "w", 'variant = "w"\ntargets = []\n')
    assert "variant must be a table ([variant]), got 'w'" in message
    assert "targets must be a table ([targets]), got []" in message


def test_gpu_targets_are_checked_by_their_backend(tmp_path: Path) -> None:
    message = _problems(
        tmp_path,
        "y",
        '[variant]\nname = "y"\nbackend = "cuda"\nlocal-version = "y"\n'
        '[targets]\ncuda = ["sm_90", "sm_9", "sm_90"]\nhip = ["gfx942", "sm_90"]\nxpu = ["PVC!"]\n',
    )
    assert "targets.cuda: 'sm_9' is not a CUDA target (expected sm_90, sm_90a" in message
    assert "targets.cuda: 'sm_90' is listed twice; list it once" in message
    assert "targets.hip: 'sm_90' is not an AMD GPU target" in message
    assert "targets.xpu: 'PVC!' is not an Intel GPU device name" in message
    assert (
        "targets.hip is set but the backend is 'cuda', not 'hip': remove it, or set "
        "variant.backend = 'hip'"
    ) in message


def test_release_platforms_come_from_the_platforms_and_the_backend(tmp_path: Path) -> None:
    head = '[variant]\nname = "r"\nbackend = "hip"\nlocal-version = "r"\n[release]\n'
    message = _problems(
        tmp_path,
        "r",
        head + 'platforms = ["macosx_arm64", "manylinux_2_28_x86_64", "macosx_arm65"]\n',
    )
    assert "release.test-command is missing (a string)" in message
    assert (
        "release.platforms: 'macosx_arm65' is not a platform (did you mean "
        "'macosx_arm64'?); expected one of " + ", ".join(RELEASE_PLATFORMS)
    ) in message
    assert (
        "release.platforms: 'macosx_arm64' is not allowed for backend 'hip' (allowed: "
        "manylinux_2_28_x86_64); remove it or change the backend"
    ) in message
    empty = _problems(tmp_path, "r", head + 'platforms = []\ntest-command = " "\n')
    assert "release.platforms must not be empty (a list of platforms (" in empty
    assert "release.test-command must not be empty" in empty


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Inner:
    mode: Literal["fast", "safe"] = "safe"
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Outer:
    name: str
    inner: _Inner = _Inner()
    extra: _Inner | None = None


def test_the_parser_is_generic_over_dataclasses() -> None:
    """A model the parser has never seen: Literal, nested and optional tables, required
    and defaulted keys, all from the type hints."""
    problems: list[str] = []
    fields = model._fields(_Outer)
    model._parse_table(
        fields, {"inner": {"mode": "fats", "tags": ["a", 1]}, "nme": "x"}, "", problems
    )
    assert problems == [
        "unknown key 'nme' (did you mean 'name'?)",
        "name is missing (a string)",
        "inner.mode: 'fats' is not a value (did you mean 'fast'?); expected one of fast, safe",
        "inner.tags: 1 is not a string",
    ]
    problems.clear()
    values = model._parse_table(fields, {"name": "n", "extra": {"tags": ["t"]}}, "", problems)
    assert problems == []
    assert model._build(_Outer, values) == _Outer(name="n", extra=_Inner(tags=("t",)))


def test_every_backend_with_targets_has_its_lists_in_the_model() -> None:
    owners = {f.metadata.get("backend") for f in dataclasses.fields(Targets)}
    for backend in BACKENDS.values():
        if backend.target_field:
            assert backend.name in owners, backend.name
            assert backend.target_field in {f.name for f in dataclasses.fields(Targets)}


def test_the_cuda_target_syntax_lives_in_the_cuda_backend_only() -> None:
    """The recipes, the CMake package and the build files ask ptkit.backends.cuda."""
    pattern = re.compile(r"\(sm\|compute\)")
    places = [SRC / "ptkit" / "recipes", SRC / "ptkit" / "cmake", SRC / "ptkit" / "scaffold"]
    files = [
        p for folder in places for p in folder.rglob("*") if p.suffix in (".py", ".cmake", ".tmpl")
    ]
    files += [REPO / "CMakeLists.txt", SRC / "ptkit" / "backends" / "cuda.py"]
    holders = [
        p.relative_to(REPO).as_posix() for p in files if pattern.search(p.read_text("utf-8"))
    ]
    assert holders == ["src/ptkit/backends/cuda.py"]


# --- the JSON schema ---------------------------------------------------------------------


def test_the_committed_schema_is_the_models() -> None:
    assert (RECIPES / "recipe.schema.json").read_text(encoding="utf-8") == schema_text(), (
        "recipes/recipe.schema.json is stale: PYTHONPATH=src .venv/bin/python -m ptkit.recipes "
        "schema > recipes/recipe.schema.json"
    )


def test_the_schema_accepts_the_recipes_and_refuses_what_the_parser_refuses(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import tomllib

    schema = json.loads(schema_text())
    for path in sorted(RECIPES.glob("*.toml")):
        jsonschema.validate(tomllib.loads(path.read_text()), schema)
    bad = {
        "variant": {"name": "m", "backend": "metal", "local-version": "m"},
        "targets": {"cuda": ["sm_90"]},
        "release": {"platforms": ["win_amd64"], "test-command": "x"},
    }
    errors = sorted(e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(bad))
    assert any("should be non-empty" in e or "is expected to be empty" in e for e in errors), errors
    assert any("'win_amd64' is not one of ['macosx_arm64']" in e for e in errors), errors
    targets = schema["properties"]["targets"]["properties"]
    assert targets["cuda"]["items"]["pattern"] == BACKENDS["cuda"].target_pattern


# --- the CMake feed and the commands -----------------------------------------------------


def test_the_cmake_feed_has_every_field_once() -> None:
    recipe = load_recipe("cu13", RECIPES)
    feed = cmake_feed(recipe)
    keys = [key for key, _ in feed]
    assert len(keys) == len(set(keys))
    scalars, tables = model._split(Recipe)
    expected = [f.name.upper() for f, _ in scalars] + [
        f"{table.name.upper()}_{sub.name.upper()}"
        for table, hint in tables
        for sub, _ in model._fields(model._table_type(hint))  # type: ignore[arg-type]
    ]
    assert keys == [*expected, "TARGETS", "OPTIONAL_TARGETS", "TOOLKIT_INSTALL"]
    values = dict(feed)
    assert values["TARGETS"] == values["TARGETS_CUDA"] == ";".join(recipe.targets.cuda)
    assert values["TARGETS_ISA"] == "x86-64-v3;default"
    assert values["TOOLKIT_INSTALL"].startswith("pip install 'nvidia-cuda-nvcc==13.5.*' ")


def test_the_cmake_feed_keeps_lists_and_lines_intact() -> None:
    data = {
        "variant": {"name": "z", "backend": "hip", "local-version": "z", "description": "a\nb"},
        "targets": {"hip": ["gfx90a"], "hip-optional": ["gfx942"]},
        "toolkit": {"packages": ["tool; sys_platform == 'linux'"]},
    }
    values = dict(cmake_feed(parse_recipe(data, "z", "z.toml")))
    assert (values["TARGETS"], values["OPTIONAL_TARGETS"]) == ("gfx90a", "gfx942")
    assert values["DESCRIPTION"] == "a b"
    assert values["TOOLKIT_PACKAGES"] == "tool\\; sys_platform == 'linux'"
    assert values["RELEASE_PLATFORMS"] == values["RELEASE_TEST_COMMAND"] == ""


def test_the_cmake_command_prints_the_feed_and_fails_with_every_problem(tmp_path: Path) -> None:
    proc = _tool("cmake", str(RECIPES), "rocm7.14")
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert lines["BACKEND"] == "hip" and lines["TARGETS"] == "gfx942;gfx950;gfx1100;gfx1201"
    _write(tmp_path, "b", '[variant]\nname = "b"\nbackend = "gpu"\n')
    bad = _tool("cmake", str(tmp_path), "b")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "variant.backend: 'gpu' is not a backend" in bad.stderr
    assert "variant.local-version is missing" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert _tool("cmake").returncode == 2


def test_the_toolkit_command_writes_a_requirements_file() -> None:
    proc = _tool("toolkit", str(RECIPES), "rocm7.14")
    assert proc.stdout.splitlines() == [
        "--index-url https://rocm.nightlies.amd.com/v2/gfx94X-dcgpu/",
        "rocm[libraries,devel]==7.14.*",
    ]
    assert _tool("toolkit", str(RECIPES), "cpu").stdout == ""


def test_the_commands_need_the_standard_library_only(tmp_path: Path) -> None:
    """CMake and scripts/bootstrap run them with any Python: nothing outside the standard
    library (and src/) may be imported, torch least of all."""
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['ptkit.recipes', 'cmake', sys.argv[1], 'cu13']\n"
        "try:\n    runpy.run_module('ptkit.recipes', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "stdlib = set(sys.stdlib_module_names)\n"
        "other = sorted({m.split('.')[0] for m in sys.modules} - stdlib - {'ptkit', '__main__'})\n"
        "print('OTHER', other, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(RECIPES)],
        env={"PYTHONPATH": str(SRC), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "NAME=cu13" in proc.stdout, proc.stderr
    assert "OTHER []" in proc.stderr


# --- ABI modes: [variant] abi and [torch] versions ------------------------------------------

_TORCH_MODE = (
    '[variant]\nname = "cpu"\nbackend = "cpu"\nlocal-version = "cpu"\nabi = "torch"\n'
    '[torch]\nversions = ["2.14", "2.13"]\n'
)


def test_a_recipe_is_stable_unless_it_says_torch() -> None:
    recipe = load_recipe("cpu", RECIPES)
    assert (recipe.abi, recipe.torch.versions) == ("stable", ())
    values = dict(cmake_feed(recipe))
    assert (values["ABI"], values["TORCH_VERSIONS"]) == ("stable", "")


def test_a_torch_mode_recipe_lists_its_torch_minors_and_feeds_cmake(tmp_path: Path) -> None:
    _write(tmp_path, "cpu", _TORCH_MODE)
    recipe = load_recipe("cpu", tmp_path)
    assert (recipe.abi, recipe.torch.versions) == ("torch", ("2.14", "2.13"))
    proc = _tool("cmake", str(tmp_path), "cpu")
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert (lines["ABI"], lines["TORCH_VERSIONS"]) == ("torch", "2.14;2.13")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            _TORCH_MODE.replace('abi = "torch"', 'abi = "classic"'),
            "variant.abi: 'classic' is not an ABI mode; expected one of stable, torch",
        ),
        (
            _TORCH_MODE.replace('abi = "torch"', 'abi = "torhc"'),
            "variant.abi: 'torhc' is not an ABI mode (did you mean 'torch'?)",
        ),
        (
            _TORCH_MODE.replace('["2.14", "2.13"]', '["2.14.1", "2.13"]'),
            "torch.versions: '2.14.1' is not a torch minor version (2.14)",
        ),
        (
            _TORCH_MODE.replace('["2.14", "2.13"]', '"2.14"'),
            "torch.versions must be a list of torch minor versions, got '2.14'",
        ),
        (
            _TORCH_MODE.replace('versions = ["2.14", "2.13"]', "versoins = []"),
            "unknown key torch.'versoins' (did you mean 'versions'?)",
        ),
        (
            _TORCH_MODE.split("[torch]")[0],
            "variant.abi is 'torch' but torch.versions lists no torch minor: add [torch] "
            'versions = ["2.13", "2.14"]',
        ),
        (
            _TORCH_MODE.replace('abi = "torch"\n', ""),
            "torch.versions is set but variant.abi is 'stable' (one wheel for every torch its "
            "target allows): remove [torch] versions, or set variant.abi = 'torch'",
        ),
    ],
)
def test_abi_mode_problems_name_the_file_the_field_and_the_fix(
    tmp_path: Path, text: str, expected: str
) -> None:
    message = _problems(tmp_path, "cpu", text)
    assert message.startswith(f"{tmp_path / 'cpu.toml'}: "), message
    assert expected in message, message


def test_the_schema_knows_the_abi_rules() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import tomllib

    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    good = tomllib.loads(_TORCH_MODE)
    assert list(validator.iter_errors(good)) == []
    no_versions = tomllib.loads(_TORCH_MODE.split("[torch]")[0])
    assert any(
        "'torch' is a required property" in e.message for e in validator.iter_errors(no_versions)
    )
    stable_with_versions = tomllib.loads(_TORCH_MODE.replace('abi = "torch"\n', ""))
    assert list(validator.iter_errors(stable_with_versions)), "a stable recipe lists no torch"


# --- the builds of a recipe: names and pins ------------------------------------------------


def test_a_stable_recipe_builds_one_wheel_with_its_label() -> None:
    from ptkit.recipes.torch_builds import recipe_builds

    (build,) = recipe_builds(load_recipe("cpu", RECIPES))
    assert (build.local_version, build.torch, build.torch_requirement) == ("cpu", None, None)


def test_a_torch_mode_recipe_builds_one_wheel_per_minor_oldest_first(tmp_path: Path) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from ptkit.recipes.torch_builds import TorchMinor, recipe_builds

    _write(tmp_path, "cpu", _TORCH_MODE)
    builds = recipe_builds(load_recipe("cpu", tmp_path))
    assert [b.local_version for b in builds] == ["cpu.torch2.13", "cpu.torch2.14"]
    assert [b.torch_requirement for b in builds] == ["torch>=2.13,<2.14", "torch>=2.14,<2.15"]
    assert builds[1].title == "cpu for torch 2.14"
    assert TorchMinor.parse("2.14.1+cu130") == TorchMinor(2, 14)
    # pip and uv compare the labels' digit segments as numbers: 2.9 < 2.10 < 3.0
    versions = [Version(f"0.1.0+cpu.torch{t}") for t in ("2.10", "3.0", "2.9", "2.14")]
    assert [str(v.local) for v in sorted(versions)] == [
        "cpu.torch2.9", "cpu.torch2.10", "cpu.torch2.14", "cpu.torch3.0"
    ]  # fmt: skip
    pin = SpecifierSet(builds[1].torch_requirement.removeprefix("torch"))  # type: ignore[union-attr]
    assert [pin.contains(v) for v in ("2.14.0", "2.14.1+cpu", "2.13.0", "2.15.0", "2.15.0.dev1")] == [
        True, True, False, False, False
    ]  # fmt: skip


def test_labels_split_into_variant_and_torch_minor(tmp_path: Path) -> None:
    from ptkit.recipes.torch_builds import TorchMinor, build_for_label, split_label

    assert split_label("cpu.torch2.14") == ("cpu", TorchMinor(2, 14))
    assert split_label("rocm7.14") == ("rocm7.14", None)
    _write(tmp_path, "cpu", _TORCH_MODE)
    recipe = load_recipe("cpu", tmp_path)
    assert build_for_label(recipe, "cpu.torch2.13").torch == TorchMinor(2, 13)  # type: ignore[union-attr]
    assert build_for_label(recipe, "cpu.torch2.12") is None
    assert build_for_label(recipe, "cpu") is None


@pytest.mark.parametrize(
    ("installed", "requested", "expected"),
    [
        ("2.13.0+cpu", None, "cpu.torch2.13"),
        ("2.14.1", "2.14", "cpu.torch2.14"),
        ("2.14.1", "2.13", "the build is for torch 2.13 but the build Python has torch 2.14.1"),
        ("2.12.0", None, "builds for torch 2.13, 2.14 ([torch] versions), not torch 2.12"),
        (None, None, "this Python has no torch: install one of torch 2.13, 2.14"),
        ("2.14.1", "2.14.1", "the torch minor to build for must look like 2.14, got '2.14.1'"),
    ],
)
def test_the_build_of_an_environment_is_the_torch_installed_there(
    tmp_path: Path, installed: str | None, requested: str | None, expected: str
) -> None:
    from ptkit.recipes.torch_builds import TorchBuildError, build_for_environment

    _write(tmp_path, "cpu", _TORCH_MODE)
    recipe = load_recipe("cpu", tmp_path)
    try:
        label = build_for_environment(
            recipe, installed, requested, "recipes/cpu.toml"
        ).local_version
    except TorchBuildError as exc:
        label = str(exc)
    assert expected in label


def test_a_stable_recipe_has_no_build_for_a_torch_minor() -> None:
    from ptkit.recipes.torch_builds import TorchBuildError, build_for_environment

    with pytest.raises(TorchBuildError, match=r"recipes/cpu.toml is a stable-ABI recipe"):
        build_for_environment(load_recipe("cpu", RECIPES), "2.14.1", "2.14", "recipes/cpu.toml")


# --- the version provider: version and dependencies of one build -----------------------------


def _torch_project(tmp_path: Path, *, dynamic_dependencies: bool = True) -> Path:
    _write(tmp_path / "recipes", "cpu", _TORCH_MODE)
    dependencies = (
        'dynamic = ["version", "dependencies"]\n'
        if dynamic_dependencies
        else 'dynamic = ["version"]\ndependencies = ["torch>=2.10"]\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "x"\n{dependencies}'
        '[tool.scikit-build.metadata.version]\nprovider = "ptkit.release.version_provider"\n'
        'base-version = "1.2.0"\n'
        + (
            '[tool.scikit-build.metadata.dependencies]\nprovider = "ptkit.release.version_provider"\n'
            'requires = ["ptkit>=0.1", "torch>=2.10; sys_platform != \'ios\'"]\n'
            if dynamic_dependencies
            else ""
        )
    )
    return tmp_path


def test_a_torch_mode_version_carries_the_torch_minor(tmp_path: Path) -> None:
    project = _torch_project(tmp_path)
    assert (
        variant_version(project, "cpu", "1.2.0", torch_version="2.13.0+cpu")
        == "1.2.0+cpu.torch2.13"
    )
    with pytest.raises(
        RuntimeError, match=r"ptkit's version provider: .*cpu.toml builds for torch 2.13, 2.14"
    ):
        variant_version(project, "cpu", "1.2.0", torch_version="2.15.0")


def test_the_provider_pins_the_build_python_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This Python's torch (2.14.x, read from its metadata) is the build's."""
    from ptkit.release import version_provider

    torch_minor = ".".join(version_provider.installed_torch().split(".")[:2])  # type: ignore[union-attr]
    assert torch_minor == "2.14", "the unit tests run in .venv (torch 2.14)"
    monkeypatch.chdir(_torch_project(tmp_path))
    monkeypatch.setenv("PTKIT_VARIANT", "cpu")
    monkeypatch.delenv("PTKIT_TORCH", raising=False)
    settings = {"requires": ["ptkit>=0.1", "torch>=2.10; sys_platform != 'ios'"]}
    assert version_provider.dynamic_metadata("dependencies", settings) == [
        "ptkit>=0.1",
        "torch>=2.14,<2.15; sys_platform != 'ios'",
    ]
    assert (
        version_provider.dynamic_metadata("version", {"base-version": "1.2.0"})
        == "1.2.0+cpu.torch2.14"
    )
    monkeypatch.setenv("PTKIT_TORCH", "2.13")
    with pytest.raises(
        RuntimeError, match=r"the build is for torch 2\.13 but the build Python has torch 2\.14"
    ):
        version_provider.dynamic_metadata("version", {"base-version": "1.2.0"})


def test_a_torch_mode_project_with_static_dependencies_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptkit.release import version_provider

    monkeypatch.chdir(_torch_project(tmp_path, dynamic_dependencies=False))
    monkeypatch.setenv("PTKIT_VARIANT", "cpu")
    monkeypatch.delenv("PTKIT_TORCH", raising=False)
    with pytest.raises(RuntimeError) as info:
        version_provider.dynamic_metadata("version", {"base-version": "1.2.0"})
    message = str(info.value)
    assert "each wheel must require the torch minor it is built for" in message
    assert 'list "dependencies" in [project] dynamic' in message
    assert "[tool.scikit-build.metadata.dependencies]" in message


def test_stable_dependencies_are_as_written_and_unknown_settings_are_named() -> None:
    from ptkit.recipes.torch_builds import recipe_builds
    from ptkit.release.version_provider import build_dependencies, dynamic_metadata

    (stable,) = recipe_builds(load_recipe("cpu", RECIPES))
    assert build_dependencies(["ptkit>=0.1", "torch>=2.10"], stable) == [
        "ptkit>=0.1",
        "torch>=2.10",
    ]
    with pytest.raises(
        RuntimeError,
        match=r"unknown setting\(s\) require under \[tool.scikit-build.metadata.dependencies\]; it knows requires",
    ):
        dynamic_metadata("dependencies", {"require": []})
    with pytest.raises(RuntimeError, match="sets 'version' and 'dependencies', not 'readme'"):
        dynamic_metadata("readme", {})
