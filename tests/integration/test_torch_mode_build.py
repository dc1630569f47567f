"""ptkit's build environment for a torch-mode build when pip cannot install it: a real venv
and a real pip, offline and finding nothing (the rest of the build environment's rules are
tests/unit/test_torch_mode_build.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO

from ptkit.recipes.model import load_recipe
from ptkit.recipes.torch_builds import TorchMinor
from ptkit.release import build_python, toolchains

FIXTURE = REPO / "tests" / "fixtures" / "projects" / "torchmode_ops"
TORCH_MODE = load_recipe("cpu", FIXTURE / "recipes")
T213 = TorchMinor(2, 13)


def test_a_failed_install_leaves_no_partial_environment(tmp_path: Path) -> None:
    """pip offline, finding nothing: the error names what and how, and the cache holds no
    half-made environment a later build could take."""
    env = build_python.build_environment(TORCH_MODE, T213, (), {"PTKIT_CACHE_DIR": str(tmp_path)})
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_NO_INDEX", "1")
        patch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
        patch.setenv("PIP_CONFIG_FILE", "/dev/null")
        with pytest.raises(toolchains.ToolchainError) as caught:
            toolchains.install_build_environment(env, echo=lines.append)
    assert caught.value.cause.startswith(
        "pip could not install torch==2.13.* (from https://download.pytorch.org/whl/cpu) and the "
        "build's prerequisites: pip exited with 1"
    )
    assert "--build-python with a Python that has that torch and `ptkit[build]`" in caught.value.fix
    assert lines and "renamed to" in lines[0]
    assert list((tmp_path / "build-pythons").iterdir()) == []
