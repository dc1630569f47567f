"""`ptkit toolchain install` puts a recipe's CUDA toolkit into ptkit's toolchain cache,
complete or not at all, and `ptkit inspect` finds its cuobjdump there.

A real fresh venv with the toolkit wheel and its build extra installed and nothing else
(no torch, no CUDA; the extra's auditwheel lets inspect check the manylinux tag), a cache folder of the test's own (PTKIT_CACHE_DIR), and pip on the local
wheelhouse only (tests/fresh_python.py): the CUDA 13.5 packages of recipes/cu13.toml are
really installed, once for the module.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from fresh_python import fresh_python, offline_env, shell, wheelhouse
from support import REPO, run

pytestmark = pytest.mark.integration

TIMES: dict[str, float] = {}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, toolkit_wheel: Path) -> tuple[Path, Path]:
    wheels = wheelhouse(toolkit_wheel)
    folder = tmp_path_factory.mktemp("toolchain") / "venv"
    python = fresh_python(folder)
    run(
        [str(python), "-m", "pip", "install", "-q", f"{toolkit_wheel}[build]"],
        env=offline_env(folder, wheels),
    )
    return folder, wheels


@pytest.fixture(scope="module")
def installed(
    venv: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """`ptkit toolchain install cu13` outside any project (ptkit's own cu13 recipe)."""
    folder, wheels = venv
    env = offline_env(folder, wheels, PTKIT_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))
    started = time.monotonic()
    proc = shell("ptkit toolchain install cu13", env=env, cwd=tmp_path_factory.mktemp("cwd"))
    TIMES["toolchain install cu13"] = time.monotonic() - started
    print(f"\nptkit toolchain install cu13: {TIMES['toolchain install cu13']:.0f} s")
    return proc, env


def test_install_puts_the_recipes_toolkit_into_a_venv_of_its_own(
    installed: tuple[subprocess.CompletedProcess[str], dict[str, str]], venv: tuple[Path, Path]
) -> None:
    proc, env = installed
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "ptkit toolchain install cu13: cuda 13.5 from ptkit's own recipes/cu13.toml "
        "(nvidia-cuda-nvcc==13.5.* nvidia-cuda-runtime==13.5.* nvidia-cuda-crt==13.5.* "
        "nvidia-cuda-cccl==13.* nvidia-cuda-cuobjdump==13.5.*) into ptkit's toolchain cache, "
        "a venv of its own"
    )
    toolchains = Path(env["PTKIT_CACHE_DIR"]) / "toolchains"
    (folder,) = list(toolchains.iterdir())  # no partial folder left beside it
    assert folder.name.startswith("cuda-13.5-")
    assert lines[1].startswith(f"      pip installs into {toolchains}/.partial-{folder.name}-")
    assert lines[1].endswith(f", renamed to {folder} when complete")
    # pip's own output is shown, then the result.
    assert any(line.startswith("Successfully installed") and "nvidia-cuda-nvcc-13.5" in line
               for line in lines)  # fmt: skip
    nvcc = next(folder.glob("lib/python*/site-packages/nvidia/cu13/bin/nvcc"))
    assert lines[-1].startswith("ptkit toolchain install cu13: ready in ")
    assert lines[-1].endswith(f": {folder} (nvcc at {nvcc})")
    meta = json.loads((folder / "toolchain.json").read_text())
    assert (meta["name"], meta["version"], meta["backend"]) == ("cuda", "13.5", "cuda")
    assert any(p.startswith("nvidia-cuda-nvcc==13.5.") for p in meta["installed"])
    version = run([str(nvcc), "--version"]).stdout
    assert "release 13.5" in version
    # Never into the environment that runs ptkit (torch's, in a user's venv).
    assert not list(venv[0].glob("lib/python*/site-packages/nvidia"))

    listed = shell("ptkit toolchain list --json", env=env, cwd=Path("/"))
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["cache"] == str(toolchains)
    assert [(t["name"], t["version"], t["path"]) for t in data["toolchains"]] == [
        ("cuda", "13.5", str(folder))
    ]
    root = shell("ptkit toolchain path cu13", env=env, cwd=Path("/"))
    assert root.returncode == 0 and root.stdout.strip() == str(nvcc.parent.parent)
    again = shell("ptkit toolchain install cu13", env=env, cwd=Path("/"))
    assert again.returncode == 0
    assert again.stdout.strip() == (
        f"ptkit toolchain install cu13: already in ptkit's toolchain cache: {folder} "
        f"(nvcc at {nvcc})"
    )


def test_a_failed_install_leaves_nothing_behind(venv: tuple[Path, Path], tmp_path: Path) -> None:
    folder, wheels = venv
    recipes = tmp_path / "project" / "recipes"
    recipes.mkdir(parents=True)
    text = (REPO / "recipes" / "cu13.toml").read_text()
    (recipes / "cu99.toml").write_text(
        text.replace('name = "cu13"', 'name = "cu99"').replace(
            '"nvidia-cuda-nvcc==13.5.*"', '"nvidia-cuda-nvcc==99.0.*"'
        )
    )
    env = offline_env(folder, wheels, PTKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = shell("ptkit toolchain install cu99", env=env, cwd=tmp_path / "project")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "nvidia-cuda-nvcc==99.0.*" in proc.stderr  # pip's own words
    (message,) = [line for line in proc.stderr.splitlines() if line.startswith("ptkit ")]
    assert message.startswith(
        "ptkit toolchain install: pip could not install nvidia-cuda-nvcc==99.0.* "
    )
    assert "pip exited with 1; its output is above. Fix: check the network and the index" in message
    assert list((tmp_path / "cache" / "toolchains").iterdir()) == []
    missing = shell("ptkit toolchain path cu99", env=env, cwd=tmp_path / "project")
    assert missing.returncode == 1
    assert "is not in ptkit's toolchain cache" in missing.stderr
    assert "install it with: ptkit toolchain install cu99" in missing.stderr


def test_a_variant_that_is_no_recipe_gets_the_closest_one(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, wheels = venv
    proc = shell("ptkit toolchain install cuda13", env=offline_env(folder, wheels), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(
        "ptkit toolchain install cuda13: no recipe 'cuda13' in ptkit's own recipes (did you "
        "mean 'cu13'?); expected one of cpu, cu13"
    )


def test_inspect_lists_the_cu13_wheels_gpu_code_with_the_caches_cuobjdump(
    installed: tuple[subprocess.CompletedProcess[str], dict[str, str]],
    venv: tuple[Path, Path],
    cu13_wheel: Path,
    tmp_path: Path,
) -> None:
    folder, wheels = venv
    assert installed[0].returncode == 0
    found = shell(f"ptkit inspect {cu13_wheel}", env=installed[1], cwd=tmp_path)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "  fatbinary SASS: sm_90, sm_100, sm_103, sm_107, sm_110, sm_120" in found.stdout
    assert "  fatbinary PTX: compute_120" in found.stdout
    # Without one anywhere: the problem names the command that gets it.
    empty = offline_env(folder, wheels, PTKIT_CACHE_DIR=str(tmp_path / "empty"))
    missing = shell(f"ptkit inspect {cu13_wheel}", env=empty, cwd=tmp_path)
    assert missing.returncode == 1
    assert (
        "  PROBLEM: fatbinary not listed: cuobjdump not found (looked beside the CUDA toolkits "
        "ptkit finds: " in missing.stdout
    )
    assert "Fix: `ptkit toolchain install cu13` (the CUDA toolkit with its cuobjdump" in (
        missing.stdout
    )
    # In ptkit's checkout, scripts/bootstrap's .toolchains/cu13 holds one.
    if list(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu13/bin/cuobjdump")):
        local = shell(f"ptkit inspect {cu13_wheel}", env=empty, cwd=REPO)
        assert local.returncode == 0, local.stdout
        assert "  fatbinary PTX: compute_120" in local.stdout
