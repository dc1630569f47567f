"""A torch-mode recipe's release, for real: ``ptkit build --torch all`` of the fixture
project tests/fixtures/projects/torchmode_ops (abi = "torch", [torch] versions = 2.13,
2.14) makes one wheel per torch minor, the one for torch 2.14 in this Python (.venv) and
the one for torch 2.13 in ptkit's own build environment for it, which the build installs
into a cache of the test's own (pip offline, from a wheelhouse filled once under build/)
and runs itself in, with this toolkit staged. ``ptkit index build`` puts both on the
variant's page; ``ptkit index serve`` serves it on 127.0.0.1; real pip and real uv
install from it into a torch 2.13 environment (.venv-torch213's torch) and a torch 2.14
one (.venv's): each gets the build for its torch and keeps its torch, and the op runs.

With PyPI as an index too, both installers would rather upgrade torch to take the
newest build; the command ``ptkit select`` prints pins the installed torch, so they
cannot (checked with --dry-run against the real PyPI; skipped when it is unreachable).
The doctor names a build made for another torch, without importing torch.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fresh_python import TORCH213, build_index, downloaded, serve_folder, torch_env
from support import REPO, python_env, run

from ptkit.release.pipeline.prerequisites import build_environment_requirements

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
UV = shutil.which("uv", path=str(VENV_BIN)) or shutil.which("uv")
FIXTURE = REPO / "tests" / "fixtures" / "projects" / "torchmode_ops"
# The wheels ptkit's build environment for torch 2.13 is made of, downloaded once.
WHEELHOUSE = REPO / "build" / "wheelhouse-torch2.13"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # the fixture recipe's torch-index-url
TIMES: dict[str, float] = {}

CHECK = """
import json, torch, ptkit, torchmode_ops
y = torchmode_ops.twice(torch.arange(4.0))
decisions = {d.library: [d.status.value, d.reason] for d in ptkit.runtime.load_decisions("torchmode_ops")}
print(json.dumps({"torch": torch.__version__, "version": torchmode_ops.__version__,
                  "files": [ptkit.__file__, torchmode_ops.__file__], "y": y.tolist(),
                  "decisions": decisions}))
"""


def _wheelhouse() -> Path:
    """torch 2.13 (the recipe's torch build, beside PyPI's) and the build environment's
    other requirements as wheels, downloaded when missing or stale."""
    # --retries 1: an unreachable torch index costs seconds, not minutes (pip then takes
    # torch from the indexes and find-links it is configured with).
    return downloaded(
        WHEELHOUSE,
        ["torch==2.13.*", *build_environment_requirements()],
        ["--retries", "1", "--extra-index-url", TORCH_INDEX],
    )


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`ptkit build --variant cpu --torch all` of a copy of the fixture, with the
    installed toolkit (.venv/bin/ptkit) and a cache of its own, pip offline."""
    if not TORCH213.exists():
        pytest.fail(".venv-torch213 is missing: run scripts/bootstrap (make test does)")
    wheels = _wheelhouse()
    root = tmp_path_factory.mktemp("torchmode")
    source = root / "source"
    shutil.copytree(FIXTURE, source)
    env = python_env(
        PTKIT_CACHE_DIR=str(root / "cache"),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
        PIP_CONFIG_FILE="/dev/null",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    started = time.monotonic()
    proc = subprocess.run(
        [str(VENV_BIN / "ptkit"), "build", "--source", str(source), "--variant", "cpu",
         "--torch", "all", "--dist", str(root / "dist"), "--build-root", str(root / "build")],
        env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    TIMES["ptkit build --torch all"] = time.monotonic() - started
    print(f"\nptkit build --torch all: {TIMES['ptkit build --torch all']:.0f} s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, root / "dist" / "cpu"


def _metadata(wheel: Path) -> tuple[str, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    version = re.search(r"^Version: (.+)$", text, re.M)
    assert version is not None
    return version.group(1), re.findall(r"^Requires-Dist: (.+)$", text, re.M)


def test_one_wheel_per_torch_minor_each_pinned_to_it(
    built: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, dist = built
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    assert [re.sub(r"-py3-none-.*", "", w) for w in wheels] == [
        "torchmode_ops-0.3.0+cpu.torch2.13",
        "torchmode_ops-0.3.0+cpu.torch2.14",
    ]
    assert all(re.search(r"-py3-none-manylinux_2_\d+_x86_64\.whl$", w) for w in wheels), wheels
    pins = {_metadata(p)[0]: _metadata(p)[1] for p in dist.glob("*.whl")}
    assert pins == {
        "0.3.0+cpu.torch2.13": ["ptkit<0.2,>=0.1.0", "torch<2.14,>=2.13"],
        "0.3.0+cpu.torch2.14": ["ptkit<0.2,>=0.1.0", "torch<2.15,>=2.14"],
    }
    out = proc.stdout
    # torch 2.14: this Python; torch 2.13: ptkit's build environment, installed now, the
    # build run there with this toolkit; each smoke-tested against its own torch.
    assert "ptkit build cpu for torch 2.14: SOURCE_DATE_EPOCH=" in out
    assert (
        "ptkit build cpu for torch 2.13: installing ptkit's build environment for torch 2.13 (torch==2.13.*"
        in out
    )
    assert re.search(
        r"ptkit build cpu for torch 2\.13: in \S+/build-pythons/torch2\.13-cpu-\S+/bin/python "
        r"\(Python 3\.\d+, torch 2\.13\.0\S*; ptkit's build environment for torch 2\.13\), "
        r"with this ptkit \(\S+/torch2\.13/toolkit\)",
        out,
    ), out
    assert re.search(r"torchmode_ops 0\.3\.0\+cpu\.torch2\.13 at .*\n\s+torch 2\.13\.0", out), out
    assert re.search(r"torchmode_ops 0\.3\.0\+cpu\.torch2\.14 at .*\n\s+torch 2\.14\.1", out), out


def test_a_second_build_reuses_the_buildtorch_env(
    built: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    _, dist = built
    root = dist.parent.parent
    env = python_env(PTKIT_CACHE_DIR=str(root / "cache"), PIP_NO_INDEX="1")
    proc = run(
        [str(VENV_BIN / "ptkit"), "build", "--source", str(root / "source"), "--variant", "cpu",
         "--torch", "2.13", "--dist", str(tmp_path / "dist"), "--build-root", str(root / "build")],
        env=env, timeout=900,
    )  # fmt: skip
    assert "installing" not in proc.stdout
    assert "ptkit's build environment for torch 2.13), with this ptkit" in proc.stdout


# --- the index, and pip and uv picking the build for the environment's torch ---------------


@pytest.fixture(scope="module")
def index_url(
    built: tuple[subprocess.CompletedProcess[str], Path],
    toolkit_wheel: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    _, dist = built
    out = tmp_path_factory.mktemp("index") / "site"
    pages = build_index(sorted(dist.glob("*.whl")), toolkit_wheel, FIXTURE / "recipes", out)
    (page,) = pages.values()
    assert page["index_path"] == "cpu"
    assert len(page["files"]) == 3  # both builds and the toolkit
    yield from serve_folder(out)


def _pip(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [
        str(python),
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        *args,
    ]
    env = python_env(PIP_CONFIG_FILE="/dev/null")
    if check:
        return run(cmd, env=env, timeout=600)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)


def _uv(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert UV, "uv is not installed in the test environment (requirements/dev.txt pins it)"
    cmd = [UV, "pip", "install", "--python", str(python), "--no-cache", *args]
    return run(cmd, env=python_env(UV_NO_CONFIG="1"), timeout=600)


def _installed(python: Path) -> dict[str, object]:
    return json.loads(run([str(python), "-c", CHECK], env=python_env(), cwd=Path("/")).stdout)


@pytest.mark.parametrize("installer", ["pip", "uv"])
@pytest.mark.parametrize("torch_minor", ["2.13", "2.14"])
def test_the_installer_picks_the_build_for_the_torch_here_and_keeps_torch(
    index_url: str, tmp_path: Path, installer: str, torch_minor: str
) -> None:
    python = torch_env(tmp_path / "env", torch_minor)
    simple = f"{index_url}/cpu/simple"
    if installer == "pip":
        proc = _pip(python, "torchmode-ops", "--index-url", simple)
        line = next(x for x in proc.stdout.splitlines() if x.startswith("Successfully installed"))
        assert sorted(line.split()[2:]) == [
            "ptkit-0.1.0",
            f"torchmode-ops-0.3.0+cpu.torch{torch_minor}",
        ]
    else:
        proc = _uv(python, "torchmode-ops", "--index-url", simple)
        assert f"+ torchmode-ops==0.3.0+cpu.torch{torch_minor}" in proc.stderr
        assert "torch==" not in proc.stderr  # torch was neither added nor removed
    result = _installed(python)
    assert str(result["torch"]).startswith(f"{torch_minor}.")
    assert result["version"] == f"0.3.0+cpu.torch{torch_minor}"
    assert result["y"] == [0.0, 2.0, 4.0, 6.0]
    assert result["decisions"]["libtorchmode_ops_cpu.so"][0] == "loaded"
    files = result["files"]
    assert isinstance(files, list) and all(str(tmp_path / "env") in f for f in files), files


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/torch/", timeout=10) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_with_pypi_too_the_select_command_keeps_the_installed_torch(
    index_url: str, tmp_path: Path
) -> None:
    """What pip and uv do with PyPI among the indexes (--dry-run: nothing is installed):
    unpinned they would replace torch 2.13 with PyPI's 2.14 to take the newest build;
    `ptkit select`'s command pins the installed torch and gets the torch 2.13 build."""
    if not _pypi_reachable():
        pytest.skip(
            "https://pypi.org is unreachable from here: the behaviour with PyPI as an index needs it"
        )
    python = torch_env(tmp_path / "env", "2.13")
    simple = f"{index_url}/cpu/simple"
    unpinned = _pip(python, "--dry-run", "torchmode-ops", "--index-url", simple,
                    "--extra-index-url", "https://pypi.org/simple")  # fmt: skip
    would = next(x for x in unpinned.stdout.splitlines() if x.startswith("Would install"))
    assert "torchmode-ops-0.3.0+cpu.torch2.14" in would and re.search(r"\btorch-2\.14\.", would), (
        would
    )
    # ptkit select, run in that environment after the toolkit is there: the build for its torch.
    _pip(python, "--no-deps", "ptkit", "--index-url", simple)
    selected = json.loads(
        run(
            [
                str(python),
                "-m",
                "ptkit",
                "select",
                "--source",
                str(FIXTURE),
                "--index-url",
                index_url,
                "--json",
            ],
            env=python_env(),
            cwd=Path("/"),
        ).stdout
    )
    assert (selected["build"], selected["torch"]) == ("cpu.torch2.13", "2.13.0+cpu")
    pip_command = shlex.split(selected["commands"]["pip"])
    assert pip_command[:4] == ["pip", "install", "torchmode-ops", "torch==2.13.0+cpu"]
    assert "https://pypi.org/simple" in pip_command
    # The torch index of the recipe is unreachable from some machines: PyPI stands for it.
    args = [a if a != TORCH_INDEX else "https://pypi.org/simple" for a in pip_command[2:]]
    pinned = _pip(python, "--dry-run", *args)
    would = next(x for x in pinned.stdout.splitlines() if x.startswith("Would install"))
    assert would.split()[2:] == ["torchmode-ops-0.3.0+cpu.torch2.13"]  # ptkit is there already
    uv_command = shlex.split(selected["commands"]["uv"])
    assert uv_command[:5] == ["uv", "pip", "install", "torchmode-ops", "torch==2.13.0+cpu"]
    uv_args = list(uv_command[3:])
    if TORCH_INDEX in uv_args:  # uv asks its indexes in order: drop the unreachable one
        at = uv_args.index(TORCH_INDEX)
        del uv_args[at - 1 : at + 1]
    proc = _uv(python, "--dry-run", *uv_args)
    assert "+ torchmode-ops==0.3.0+cpu.torch2.13" in proc.stderr
    assert "torch==" not in proc.stderr


def test_the_doctor_names_a_build_for_another_torch(index_url: str, tmp_path: Path) -> None:
    """The torch 2.14 build forced into a torch 2.13 environment (--no-deps): PTK109 says
    so with the build to install, from the installed metadata alone."""
    python = torch_env(tmp_path / "env", "2.13")
    simple = f"{index_url}/cpu/simple"
    _pip(python, "--no-deps", "ptkit", "torchmode-ops==0.3.0+cpu.torch2.14", "--index-url", simple)
    proc = subprocess.run(
        [str(python), "-m", "ptkit", "doctor", "--json", "--select", "PTK109"],
        env=python_env(), capture_output=True, text=True, timeout=300, cwd="/", check=False,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    (finding,) = [f for f in report["findings"] if f["check"] == "PTK109"]
    assert finding["severity"] == "error"
    assert finding["message"].startswith(
        "torchmode-ops 0.3.0+cpu.torch2.14 is the build for torch 2.14, built with torch 2.14.1"
    )
    assert "(it requires torch>=2.14,<2.15), but this is torch 2.13.0+cpu" in finding["message"]
    assert (
        "'torchmode-ops==0.3.0+cpu.torch2.13' --index-url <its index>/cpu/simple" in finding["fix"]
    )
    assert proc.returncode != 0


# --- what ptkit build refuses, with the fix ------------------------------------------------------


def _ptkit_build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "ptkit"), "build", *args],
        env=python_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_torch_minor_the_recipe_does_not_list_is_a_usage_error(tmp_path: Path) -> None:
    proc = _ptkit_build("--source", str(FIXTURE), "--variant", "cpu", "--torch", "2.12",
                        "--build-root", str(tmp_path))  # fmt: skip
    assert proc.returncode == 2
    assert (
        "ptkit build: --torch 2.12: " in proc.stderr
        and "builds for torch 2.13, 2.14 ([torch] versions), not torch 2.12: build for one of "
        'those, or add "2.12" to [torch] versions'
        in proc.stderr.replace("'2.12'", '"2.12"')
    ), proc.stderr
    stable = _ptkit_build("--source", str(REPO), "--variant", "cpu", "--torch", "2.14",
                          "--build-root", str(tmp_path))  # fmt: skip
    assert stable.returncode == 2
    assert (
        "is a stable-ABI recipe (abi = 'stable'): its one wheel serves every torch" in stable.stderr
    )
    assert "Traceback" not in proc.stderr + stable.stderr


def test_a_build_python_that_cannot_run_ptkit_is_named_with_the_fix(tmp_path: Path) -> None:
    """.venv-torch213 has torch 2.13 but not the toolkit's dependencies (click)."""
    proc = _ptkit_build("--source", str(FIXTURE), "--variant", "cpu", "--torch", "2.13",
                        "--build-python", str(TORCH213), "--build-root", str(tmp_path))  # fmt: skip
    assert proc.returncode == 1
    assert "stage 'build python' failed for variant cpu:" in proc.stderr
    assert f"{TORCH213} (--build-python) cannot run ptkit: it lacks click" in proc.stderr
    assert f"Fix: {TORCH213} -m pip install 'ptkit[build]'" in proc.stderr
    wrong = _ptkit_build("--source", str(FIXTURE), "--variant", "cpu", "--torch", "2.14",
                         "--build-python", str(TORCH213), "--build-root", str(tmp_path))  # fmt: skip
    assert wrong.returncode == 1
    assert "the build for torch 2.14 needs a Python whose torch is 2.14; " in wrong.stderr
    assert "has torch 2.13.0" in wrong.stderr
    assert "Traceback" not in proc.stderr + wrong.stderr


def test_a_torch_mode_project_whose_dependencies_are_static_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(FIXTURE, source)
    pyproject = source / "pyproject.toml"
    text = pyproject.read_text().replace(
        'dynamic = ["version", "dependencies"]',
        'dynamic = ["version"]\ndependencies = ["torch>=2.10"]',
    )
    # Without the provider's [tool.scikit-build.metadata.dependencies] table.
    start, end = text.index("# torch>=2.10 becomes"), text.index("[tool.scikit-build.cmake.define]")
    pyproject.write_text(text[:start] + text[end:])
    proc = _ptkit_build("--source", str(source), "--variant", "cpu", "--torch", "2.14",
                        "--dist", str(tmp_path / "dist"), "--build-root", str(tmp_path / "build"))  # fmt: skip
    assert proc.returncode == 1
    assert "stage 'build' failed for variant cpu" in proc.stderr
    assert "each wheel must require the torch minor it is built for" in proc.stdout + proc.stderr
    assert not (tmp_path / "dist").exists()
