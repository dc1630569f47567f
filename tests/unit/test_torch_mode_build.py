"""The parts of a torch-mode ``ptkit build`` that run without building: which Python
builds (``ptkit.release.build_python``, ``provision_build_python``), the toolkit staged
for it, ptkit's build environment (its name, its pip command, its console scripts; an
install that fails cleanly is tests/integration/test_torch_mode_build.py: it makes a venv), the pipeline's checks of the build Python's torch and of
the built wheel, and dist/ keeping the other torch minors' wheels. The whole build for
torch 2.13 and 2.14 is tests/integration/test_torch_mode_release.py."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from support import REPO, make_wheel

from ptkit.recipes.model import load_recipe
from ptkit.recipes.torch_builds import TorchMinor, recipe_builds
from ptkit.release import build_python, toolchains
from ptkit.release.pipeline import BuildError, dist, prerequisites, provision, run

FIXTURE = REPO / "tests" / "fixtures" / "projects" / "torchmode_ops"
TORCH_MODE = load_recipe("cpu", FIXTURE / "recipes")
STABLE = load_recipe("cpu", REPO / "recipes")
T213, T214 = TorchMinor(2, 13), TorchMinor(2, 14)


# --- which Python builds ----------------------------------------------------------------------


def test_this_python_describes_itself_without_importing_torch() -> None:
    python = build_python.probe_python(sys.executable, "this Python")
    assert python.is_this_python
    assert python.torch_minor == T214, "the unit tests run in .venv (torch 2.14)"
    assert python.missing == ()
    assert python.describe().startswith(f"{sys.executable} (Python 3.")


def test_a_python_whose_torch_is_that_minor_builds_here(tmp_path: Path) -> None:
    chosen = provision.provision_build_python(
        TORCH_MODE, T214, environ={"PTKIT_CACHE_DIR": str(tmp_path)}
    )
    assert chosen.is_this_python and chosen.source == "this Python"
    assert not any(tmp_path.iterdir()), "nothing installed"


def test_a_given_python_with_another_torch_is_refused_with_the_fix() -> None:
    with pytest.raises(BuildError) as caught:
        provision.provision_build_python(TORCH_MODE, T213, given=Path(sys.executable))
    error = caught.value
    assert error.stage == "build python"
    assert error.cause == (
        f"the build for torch 2.13 needs a Python whose torch is 2.13; {sys.executable} "
        f"(--build-python) has torch {build_python.probe_python(sys.executable, '').torch}"
    )
    assert error.fix.startswith(f"install torch==2.13.* into it ({sys.executable} -m pip install")
    assert (
        "leave --build-python out: ptkit then uses (or installs) its own build environment"
        in error.fix
    )


def test_a_given_file_that_is_no_python_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    with pytest.raises(BuildError) as caught:
        provision.provision_build_python(TORCH_MODE, T213, given=fake)
    assert (
        f"--build-python {fake} does not run as a Python: {fake} is not a Python"
        in caught.value.cause
    )


def test_a_python_without_click_cannot_run_ptkit(tmp_path: Path) -> None:
    """A venv without pip's packages (no click, no packaging): named before anything runs."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = build_python.probe_python(tmp_path / "v" / "bin" / "python", "--build-python")
    assert (python.torch, python.missing) == (None, ("click", "packaging"))
    with pytest.raises(BuildError) as caught:
        provision.provision_build_python(TORCH_MODE, None, given=tmp_path / "v" / "bin" / "python")
    assert caught.value.cause.endswith("cannot run ptkit: it lacks click, packaging")
    assert caught.value.fix.startswith(
        f"{tmp_path / 'v' / 'bin' / 'python'} -m pip install 'ptkit[build]'"
    )


# --- ptkit's build environment per torch minor -------------------------------------------------


def test_the_build_environment_is_named_by_torch_minor_build_platform_and_python(
    tmp_path: Path,
) -> None:
    env = build_python.build_environment(
        TORCH_MODE,
        T213,
        prerequisites.build_environment_requirements(),
        {"PTKIT_CACHE_DIR": str(tmp_path)},
    )
    major, minor = sys.version_info[:2]
    assert env.path.parent == tmp_path / "build-pythons"
    assert env.path.name.startswith("torch2.13-cpu-linux_x86_64-py") or sys.platform != "linux"
    assert env.path.name.endswith(f"-py{major}.{minor}")
    command = env.pip_install("python")
    assert command[:6] == [
        "python",
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--extra-index-url",
    ]
    assert command[6:8] == ["https://download.pytorch.org/whl/cpu", "torch==2.13.*"]
    assert "scikit-build-core>=1.1" in command and "click>=8.1" in command
    assert not env.complete()
    pypi = dataclasses.replace(TORCH_MODE, torch_index_url="")
    assert "-pypi-" in build_python.build_environment(pypi, T213, (), {}).path.name


def test_the_build_environment_holds_the_toolkits_dependencies_and_the_build_extra() -> None:
    toolkit = tomllib.loads((REPO / "toolkit" / "pyproject.toml").read_text())["project"]
    assert [str(Requirement(r)) for r in prerequisites.TOOLKIT_REQUIRES] == [
        str(Requirement(r)) for r in toolkit["dependencies"]
    ]
    names = [Requirement(r).name for r in prerequisites.build_environment_requirements()]
    assert len(names) == len(set(names))
    assert {"click", "scikit-build-core", "cmake", "ninja", "auditwheel", "rich"} <= set(names)


def test_console_scripts_follow_the_environment_to_its_final_folder(tmp_path: Path) -> None:
    partial, final = tmp_path / ".partial-x", tmp_path / "x"
    (partial / "bin").mkdir(parents=True)
    script = partial / "bin" / "auditwheel"
    script.write_text(f"#!{partial}/bin/python\nimport sys\n")
    other = partial / "bin" / "activate"
    other.write_text(f"VIRTUAL_ENV={partial}\n")
    (partial / "bin" / "python").symlink_to(sys.executable)
    toolchains._move_scripts(partial, final)
    assert script.read_text() == f"#!{final}/bin/python\nimport sys\n"
    assert other.read_text() == f"VIRTUAL_ENV={partial}\n"


def test_console_scripts_over_the_shebang_limit_follow_the_environment_too(
    tmp_path: Path,
) -> None:
    """pip writes a /bin/sh header where the interpreter's path is over 127 bytes (a deep
    cache folder: pytest-xdist's popen-gw0/ made one so in make test)."""
    deep = tmp_path / ("d" * 120)
    partial, final = deep / ".partial-torch2.13-cpu-abc", deep / "torch2.13-cpu"
    (partial / "bin").mkdir(parents=True)
    (partial / "bin" / "python").symlink_to(sys.executable)
    header = "#!/bin/sh\n'''exec' '{}/bin/python' \"$0\" \"$@\"\n' '''\n"
    body = "import sys\nprint(sys.argv[0])  # bin/python of the partial folder\n"
    (partial / "bin" / "auditwheel").write_text(header.format(partial) + body)
    (partial / "bin" / "auditwheel").chmod(0o755)
    toolchains._move_scripts(partial, final)
    partial.rename(final)
    moved = final / "bin" / "auditwheel"
    assert moved.read_text() == header.format(final) + body
    ran = subprocess.run([moved], capture_output=True, text=True, check=False)
    assert ran.returncode == 0 and ran.stdout.strip() == str(moved), ran.stderr


# --- ptkit build in the build Python ------------------------------------------------------------


def test_the_staged_toolkit_is_this_ptkit_and_its_entry_points(tmp_path: Path) -> None:
    staged = build_python.stage_toolkit(tmp_path / "toolkit")
    assert (staged / "ptkit" / "cmake" / "ptkit-config.cmake").is_file()
    assert (staged / "ptkit" / "_recipes" / "cpu.toml").is_file(), "links are followed"
    assert not list(staged.rglob("__pycache__"))
    info = next(staged.glob("ptkit-*.dist-info"))
    entry_points = (info / "entry_points.txt").read_text()
    assert "[cmake.root]\nptkit = ptkit\n" in entry_points
    # Another Python sees exactly this toolkit, its CMake package through the entry point.
    code = (
        "import importlib.metadata as m, ptkit; "
        "print(ptkit.__file__); print([e.value for e in m.entry_points(group='cmake.root')])"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(staged)!r}); {code}"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    file, points = proc.stdout.splitlines()
    assert file == str(staged / "ptkit" / "__init__.py")
    assert points.startswith("['ptkit'")


def test_the_delegated_command_spells_out_every_option(tmp_path: Path) -> None:
    python = build_python.probe_python(sys.executable, "this Python")
    command = build_python.delegated_command(
        python, variant="cpu", torch=T213, source=FIXTURE, dist=Path("dist"),
        build_root=tmp_path, allow_missing_backend=True, compiler_cache="none",
    )  # fmt: skip
    assert command[:5] == [sys.executable, "-m", "ptkit", "build", "--variant"]
    assert command[command.index("--build-python") + 1] == sys.executable
    assert command[command.index("--torch") + 1] == "2.13"
    assert command[command.index("--dist") + 1] == str(Path("dist").absolute())
    assert command[-1] == "--allow-missing-backend"
    env = build_python.delegated_environment(tmp_path / "staged")
    assert env["PYTHONPATH"] == str(tmp_path / "staged")


# --- the pipeline's checks -------------------------------------------------------------------------


def test_the_pipeline_refuses_a_build_python_of_another_torch(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        run.run_pipeline(
            "cpu", repo=FIXTURE, dist=tmp_path / "dist", build_root=tmp_path, torch="2.13"
        )
    error = caught.value
    assert error.stage == "build python"
    assert "the build is for torch 2.13 but the build Python has torch 2.14" in error.cause
    assert error.kept is None and not (tmp_path / "dist").exists()


def _built(folder: Path, version: str, requires: tuple[str, ...]) -> Path:
    metadata = f"Metadata-Version: 2.4\nName: torchmode-ops\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    return make_wheel(
        folder, "torchmode-ops", version, tag="py3-none-linux_x86_64",
        extra={f"torchmode_ops-{version}.dist-info/METADATA": metadata.encode()},
    )  # fmt: skip


def test_a_built_wheel_must_carry_its_builds_label_and_pin(tmp_path: Path) -> None:
    build = recipe_builds(TORCH_MODE)[0]
    good = _built(tmp_path / "a", "0.3.0+cpu.torch2.13", ("ptkit>=0.1", "torch<2.14,>=2.13"))
    assert run._wheel_build_problem(good, build) is None
    unpinned = _built(tmp_path / "b", "0.3.0+cpu.torch2.13", ("torch>=2.10",))
    problem = run._wheel_build_problem(unpinned, build)
    assert (
        problem is not None
        and "requires torch>=2.10, but a torch-mode wheel must require exactly torch>=2.13,<2.14"
        in problem
    )
    unlabelled = _built(tmp_path / "c", "0.3.0", ())
    problem = run._wheel_build_problem(unlabelled, build)
    assert (
        problem is not None and "the cpu for torch 2.13 build is labelled +cpu.torch2.13" in problem
    )
    stable = recipe_builds(STABLE)[0]
    assert (
        run._wheel_build_problem(_built(tmp_path / "d", "0.1.0+cpu", ("torch>=2.10",)), stable)
        is None
    )


def test_dist_keeps_the_other_torch_minors_wheels(tmp_path: Path) -> None:
    names = {
        "old213": "torchmode_ops-0.2.0+cpu.torch2.13-py3-none-linux_x86_64.whl",
        "new214": "torchmode_ops-0.3.0+cpu.torch2.14-py3-none-linux_x86_64.whl",
        "stable": "torchmode_ops-0.2.0+cpu-py3-none-linux_x86_64.whl",
        "dropped": "torchmode_ops-0.2.0+cpu.torch2.12-py3-none-linux_x86_64.whl",
    }
    target = tmp_path / "dist" / "cpu"
    target.mkdir(parents=True)
    for key in ("old213", "stable", "dropped"):
        (target / names[key]).write_bytes(b"old")
    new = tmp_path / names["new214"]
    new.write_bytes(b"new")
    dist.publish(
        new, dist=tmp_path / "dist", variant="cpu", keep=run._other_builds(TORCH_MODE, new)
    )
    assert sorted(p.name for p in target.iterdir()) == sorted([names["old213"], names["new214"]])
