"""The generated release files read by the real tools: cibuildwheel 4.3.5 (its build
identifiers, its options, its wheel reuse, its test environment with the toolkit) and
check-jsonschema (the workflow)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path, PurePath

import cibuildwheel
import jsonschema
import pytest
from cibuildwheel.options import CommandLineArguments, compute_options
from cibuildwheel.util.helpers import prepare_command
from cibuildwheel.util.packaging import find_compatible_wheel
from ruamel.yaml import YAML  # check-jsonschema's YAML parser
from support import REPO, env_holding_packages_of, python_env, run

from ptkit.recipes.model import load_recipe
from ptkit.release import matrix

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.integration

PLAN = matrix.load_plan(REPO)
JOBS = {f"{job.variant}-{job.platform.name}": job for job in PLAN.jobs}
# Written out here too: the test environment gets this commit's toolkit wheel, and only it.
assert PLAN.toolkit is not None
TOOLKIT_INSTALL = (
    f'python -m pip install "{{project}}/dist/toolkit/ptkit-{PLAN.version}-py3-none-any.whl"'
)
# Written out here, not taken from ptkit: what the release must test on.
CPYTHONS = ["cp310", "cp311", "cp312", "cp313", "cp314", "cp315", "cp315t"]
SUFFIX = {
    "manylinux_2_28_x86_64": "manylinux_x86_64",
    "manylinux_2_28_aarch64": "manylinux_aarch64",
    "macosx_arm64": "macosx_arm64",
    "win_amd64": "win_amd64",
}


def _env() -> dict[str, str]:
    """This environment without CIBW_* settings: only the config file configures it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}


@pytest.fixture(scope="module")
def printed_identifiers() -> dict[str, list[str]]:
    """`cibuildwheel --print-build-identifiers` for every job, run once: it works from
    Linux for the macOS and Windows platforms too (no build, no container)."""
    printed = {}
    for key, job in JOBS.items():
        proc = run(
            [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers",
             *job.cibuildwheel_args(), "."],
            cwd=REPO, env=_env(), timeout=120,
        )  # fmt: skip
        printed[key] = proc.stdout.split()
    return printed


@pytest.mark.parametrize("key", JOBS)
def test_cibuildwheel_lists_exactly_cp310_to_cp315t(
    key: str, printed_identifiers: dict[str, list[str]]
) -> None:
    job = JOBS[key]
    expected = [f"{py}-{SUFFIX[job.platform.name]}" for py in CPYTHONS]
    assert printed_identifiers[key] == expected


def test_identifier_counts_per_platform(printed_identifiers: dict[str, list[str]]) -> None:
    counts = {key: len(ids) for key, ids in printed_identifiers.items()}
    assert set(counts.values()) == {7}, counts
    assert len(counts) == 11  # cpu 4 + cu13 3 + rocm7.14 1 + xpu 2 + metal 1


def test_a_platform_outside_the_recipe_builds_nothing() -> None:
    proc = run(
        [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform",
         "macos", "--archs", "arm64", "--config-file", "ci/cibuildwheel/cu13.toml", "."],
        cwd=REPO, env=_env(), timeout=120,
    )  # fmt: skip
    assert proc.stdout.split() == []


def _plan_blocks(text: str) -> dict[str, tuple[str, list[str]]]:
    """`ptkit matrix`'s text: (variant-platform) -> (the one built wheel, test identifiers)."""
    blocks: dict[str, tuple[str, list[str]]] = {}
    for block in text.split("\n\n")[1:]:
        title, build, test = block.splitlines()
        variant, _, platform = title.split("  [")[0].partition(" x ")
        assert build.startswith("  build once: ") and test.startswith("  test on:    ")
        identifier, wheel = build.removeprefix("  build once: ").split(" -> ")
        tested = test.removeprefix("  test on:    ").split()
        assert identifier == tested[0], "the wheel is built by the first identifier"
        blocks[f"{variant}-{platform}"] = (wheel, tested)
    return blocks


def test_plan_builds_one_py3_none_wheel_per_job_and_tests_it_on_every_identifier(
    printed_identifiers: dict[str, list[str]],
) -> None:
    out: list[str] = []
    assert matrix.matrix_command(REPO, echo=out.append) == 0
    blocks = _plan_blocks(out[0])
    assert set(blocks) == set(JOBS)
    wheels = [wheel for wheel, _ in blocks.values()]
    assert len(set(wheels)) == len(wheels) == len(JOBS)
    for key, (wheel, tested) in blocks.items():
        assert "-py3-none-" in wheel, wheel
        assert tested == printed_identifiers[key]


@pytest.mark.parametrize("key", JOBS)
def test_cibuildwheel_reuses_the_py3_none_wheel_on_every_identifier(key: str) -> None:
    """cibuildwheel's own rule (find_compatible_wheel, called before each build in
    cibuildwheel/platforms/*.py): the wheel built for the first identifier is taken for
    every later one, so each job builds once and tests seven times."""
    job = JOBS[key]
    built = [PurePath(job.wheel)]
    for identifier in job.identifiers[1:]:
        assert find_compatible_wheel(built, identifier) == built[0], identifier
    # A CPython-specific wheel would not be reused: the py3-none tag is what makes it so.
    cp310 = [PurePath(job.wheel.replace("-py3-none-", "-cp310-cp310-"))]
    assert find_compatible_wheel(cp310, job.identifiers[1]) is None


@pytest.mark.parametrize("key", JOBS)
def test_cibuildwheel_reads_every_option_of_the_job(key: str) -> None:
    job = JOBS[key]
    recipe = load_recipe(job.variant, REPO / "recipes")
    assert recipe.release is not None
    args = dataclasses.replace(
        CommandLineArguments.defaults(),
        platform=job.platform.os,
        archs=job.platform.arch,
        config_file=str(REPO / job.config_file),
        package_dir=REPO,
    )
    options = compute_options(platform=job.platform.os, command_line_arguments=args, env=_env())
    options.check_for_invalid_configuration(job.identifiers)
    for identifier in job.identifiers:
        build = options.build_options(identifier)
        env = build.environment.as_dictionary(prev_environment={"PATH": "/usr/bin"})
        assert env["PTKIT_VARIANT"] == job.variant
        assert env["CMAKE_C_COMPILER_LAUNCHER"] == env["CMAKE_CXX_COMPILER_LAUNCHER"] == "sccache"
        # sccache 0.16 cannot wrap nvcc 13.5 (the cu13 toolkit): CUDA stays uncached.
        assert "CMAKE_CUDA_COMPILER_LAUNCHER" not in env
        assert build.test_command == recipe.release.test_command
        assert build.test_requires == ["torch"]
        assert build.before_test == TOOLKIT_INSTALL
        assert build.config_settings == "cmake.define.PTKIT_REQUIRE_BACKEND=ON"
        assert "sccache" in build.before_build
        assert "--exclude" in build.repair_command
        if job.platform.os == "linux":
            assert build.manylinux_images is not None
            arch = job.platform.arch
            assert "manylinux_2_28" in build.manylinux_images[arch]


@pytest.mark.parametrize("variant", sorted({job.variant for job in PLAN.jobs}))
def test_cibuildwheel_files_match_cibuildwheels_own_schema(variant: str) -> None:
    schema_path = Path(cibuildwheel.__file__).parent / "resources" / "cibuildwheel.schema.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    config = tomllib.loads((REPO / "ci" / "cibuildwheel" / f"{variant}.toml").read_text())
    jsonschema.Draft7Validator(schema).validate(config["tool"]["cibuildwheel"])


def test_release_workflow_validates_against_githubs_schema() -> None:
    check = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run(
        [str(check), "--builtin-schema", "vendor.github-workflows",
         str(REPO / ".github" / "workflows" / "release.yml")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_release_workflow_has_a_job_per_variant_and_platform() -> None:
    workflow = YAML(typ="safe").load((REPO / ".github" / "workflows" / "release.yml").read_text())
    wheel = workflow["jobs"]["wheel"]
    include = wheel["strategy"]["matrix"]["include"]
    assert [(i["variant"], i["platform"], i["runner"], i["cibw-platform"], i["cibw-archs"])
            for i in include] == [
        (j.variant, j.platform.name, j.platform.runner, j.platform.os, j.platform.arch)
        for j in PLAN.jobs
    ]  # fmt: skip
    assert {i["runner"] for i in include} == {
        "ubuntu-24.04", "ubuntu-24.04-arm", "macos-15", "windows-2025",
    }  # fmt: skip
    steps = {step.get("uses", step.get("name")): step for step in wheel["steps"]}
    assert wheel["env"]["SCCACHE_GHA_ENABLED"] == "true"
    assert "mozilla-actions/sccache-action@v0.0.9" in steps
    build = steps["cibuildwheel"]["run"]
    assert "pip install cibuildwheel==4.3.5" in build
    assert '--config-file "${{ matrix.config-file }}"' in build
    assert [i["config-file"] for i in include] == [j.config_file for j in PLAN.jobs]
    # The toolkit: one job builds its pure wheel; every wheel job and the index get it.
    toolkit = workflow["jobs"]["toolkit"]
    assert toolkit["runs-on"] == "ubuntu-24.04"
    assert any(
        step.get("run") == "python -m pip wheel --no-deps -w dist/toolkit toolkit/"
        for step in toolkit["steps"]
    )
    upload = next(s for s in toolkit["steps"] if s.get("uses") == "actions/upload-artifact@v4")
    assert upload["with"]["name"] == "toolkit"
    assert wheel["needs"] == "toolkit"
    named = [step.get("name") for step in wheel["steps"]]
    download = wheel["steps"][named.index("the toolkit wheel")]
    assert download["uses"] == "actions/download-artifact@v4"
    assert download["with"] == {"name": "toolkit", "path": "dist/toolkit"}
    assert named.index("the toolkit wheel") < named.index("cibuildwheel")
    index = workflow["jobs"]["index"]
    assert index["needs"] == ["toolkit", "wheel"]
    index_steps = {step.get("name", step.get("uses")): step for step in index["steps"]}
    assert index_steps["the toolkit wheel"]["with"] == {"name": "toolkit", "path": "dist/toolkit"}
    run_index = index_steps["ptkit index build"]["run"]
    assert "python -m pip install dist/toolkit/ptkit-*.whl variantlib==0.2.2" in run_index
    assert (
        "ptkit index build dist/*/*.whl --recipes recipes --out site/ --variant-metadata"
        in run_index
    )
    assert "torch" not in run_index  # the toolkit builds the index without torch


@pytest.fixture(scope="module")
def toolkit_wheel() -> Path:
    """The toolkit wheel: $PTKIT_TEST_TOOLKIT_WHEEL (set by `make test`) or dist/toolkit/'s."""
    given = os.environ.get("PTKIT_TEST_TOOLKIT_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "toolkit").glob("ptkit-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no toolkit wheel to test: run `make toolkit` (make test does)")
    return wheels[-1].resolve()


def test_the_test_environment_gets_the_toolkit_then_runs_the_recipes_test(
    tmp_path: Path, toolkit_wheel: Path, ptkit_wheel: Path
) -> None:
    """cibuildwheel's test step, here (no container): a venv holding torch, before-test as
    cibuildwheel prepares it (the toolkit wheel's file from {project}/dist/toolkit, never a
    ptkit from PyPI), the wheel installed with its dependencies resolved (ptkit met by that
    toolkit), then the recipe's test-command."""
    project = tmp_path / "project"
    (project / "dist" / "toolkit").mkdir(parents=True)
    shutil.copy2(toolkit_wheel, project / "dist" / "toolkit" / toolkit_wheel.name)
    python = env_holding_packages_of(tmp_path / "venv", Path(sys.executable))
    args = dataclasses.replace(
        CommandLineArguments.defaults(),
        platform="linux",
        archs="x86_64",
        config_file=str(REPO / "ci" / "cibuildwheel" / "cpu.toml"),
        package_dir=REPO,
    )
    build = compute_options(platform="linux", command_line_arguments=args, env=_env())
    options = build.build_options("cp311-manylinux_x86_64")
    env = python_env(
        PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(python.parent.parent),
        PIP_CONFIG_FILE="/dev/null",
    )
    before_test = prepare_command(options.before_test, project=project, package=project)
    run(["sh", "-c", before_test], env=env)
    # No index at all: the wheel's requirements must all be met already.
    run([str(python), "-m", "pip", "install", "--no-index", str(ptkit_wheel)], env=env)
    test = run(["sh", "-c", options.test_command], env=env, cwd=tmp_path)
    assert "ptkit-ops smoke test passed" in test.stdout
    installed = run(
        [str(python), "-c", "import ptkit, ptkit_ops; print(ptkit.__file__, ptkit_ops.__file__)"],
        env=env,
    ).stdout.split()
    assert all(str(tmp_path / "venv") in path for path in installed), installed


# --- a torch-mode project: one job and one file per torch minor ------------------------------

TORCH_MODE = REPO / "tests" / "fixtures" / "projects" / "torchmode_ops"


@pytest.fixture(scope="module")
def torch_mode_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, matrix.Plan]:
    """A copy of the torch-mode fixture with its generated release files written."""
    project = tmp_path_factory.mktemp("torchmode") / "project"
    shutil.copytree(TORCH_MODE, project)
    plan = matrix.load_plan(project)
    matrix.write_generated(project, plan)
    return project, plan


def test_cibuildwheel_reads_each_torch_minors_file(
    torch_mode_project: tuple[Path, matrix.Plan],
) -> None:
    project, plan = torch_mode_project
    assert [job.torch for job in plan.jobs] == ["2.13", "2.14"]
    schema_path = Path(cibuildwheel.__file__).parent / "resources" / "cibuildwheel.schema.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    for job in plan.jobs:
        printed = run(
            [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers",
             *job.cibuildwheel_args(), "."],
            cwd=project, env=_env(), timeout=120,
        )  # fmt: skip
        assert printed.stdout.split() == list(job.identifiers)
        config = tomllib.loads((project / job.config_file).read_text())
        jsonschema.Draft7Validator(schema).validate(config["tool"]["cibuildwheel"])
        args = dataclasses.replace(
            CommandLineArguments.defaults(),
            platform=job.platform.os,
            archs=job.platform.arch,
            config_file=str(project / job.config_file),
            package_dir=project,
        )
        options = compute_options(platform=job.platform.os, command_line_arguments=args, env=_env())
        options.check_for_invalid_configuration(job.identifiers)
        for identifier in job.identifiers:
            build = options.build_options(identifier)
            env = build.environment.as_dictionary(prev_environment={"PATH": "/usr/bin"})
            assert (env["PTKIT_VARIANT"], env["PTKIT_TORCH"]) == ("cpu", job.torch)
            # Built without isolation, against the torch before-build installs, and tested with it.
            assert (build.build_frontend.name, list(build.build_frontend.args)) == (
                "build",
                ["--no-isolation"],
            )
            assert f"'torch=={job.torch}.*'" in build.before_build
            assert build.test_requires == [f"torch=={job.torch}.*"]


def test_the_torch_mode_workflow_validates_and_has_a_job_per_torch_minor(
    torch_mode_project: tuple[Path, matrix.Plan],
) -> None:
    project, _ = torch_mode_project
    workflow_file = project / ".github" / "workflows" / "release.yml"
    check = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run(
        [str(check), "--builtin-schema", "vendor.github-workflows", str(workflow_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workflow = YAML(typ="safe").load(workflow_file.read_text())
    include = workflow["jobs"]["wheel"]["strategy"]["matrix"]["include"]
    assert [(i["build"], i["config-file"]) for i in include] == [
        ("cpu-torch2.13", "ci/cibuildwheel/cpu-torch2.13.toml"),
        ("cpu-torch2.14", "ci/cibuildwheel/cpu-torch2.14.toml"),
    ]
    upload = next(
        s
        for s in workflow["jobs"]["wheel"]["steps"]
        if s.get("uses") == "actions/upload-artifact@v4"
    )
    # One artifact per job: the two torch minors' wheels do not overwrite each other.
    assert upload["with"]["name"] == "wheel-${{ matrix.build }}-${{ matrix.platform }}"
