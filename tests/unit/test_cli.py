"""``ptkit.cli``: the root group, its lazy commands and what each imports, from the source
tree in fresh interpreters (``python -m ptkit``, as the console script runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import make_wheel

from ptkit.cli import COMMANDS

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
MACHINES = REPO / "tests" / "fixtures" / "machines"

# Runs ``ptkit`` with torch unimportable, then prints the modules it imported.
PROBE = """
import json, sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"{name} is blocked by this test")
        return None

sys.meta_path.insert(0, NoTorch())
sys.argv = ["ptkit", *json.loads(sys.argv[1])]
from ptkit.cli import main
try:
    main()
finally:
    sys.stderr.write("\\nMODULES=" + json.dumps(sorted(sys.modules)))
"""


def ptkit(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(SRC), **(env or {})},
        check=False,
    )
    stderr, _, modules = proc.stderr.rpartition("\nMODULES=")
    return proc.returncode, proc.stdout, stderr, set(json.loads(modules))


def commands_imported(modules: set[str]) -> set[str]:
    return {m.rpartition(".")[2] for m in modules if m.startswith("ptkit.cli.")} - {
        "options",
        "failures",
        "_packages",
    }


def test_help_lists_every_command_and_imports_none_of_their_work() -> None:
    status, out, err, modules = ptkit("--help")
    assert status == 0, err
    for name in COMMANDS:
        assert f"\n  {name} " in out, name
    heavy = {"ptkit.doctor", "ptkit.selection", "ptkit.release", "ptkit.index", "ptkit.runtime"}
    assert not heavy & modules


def test_a_command_imports_its_own_module_only() -> None:
    status, out, err, modules = ptkit("select", "--root", str(MACHINES / "h200"), "--json")
    assert status == 0, err
    assert json.loads(out)["variant"] == "cu13"
    assert commands_imported(modules) == {"select"}
    assert "ptkit.doctor" not in modules and "ptkit.release" not in modules


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_module_imports_first_without_a_cycle(name: str) -> None:
    module = COMMANDS[name].partition(":")[0]
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_version_and_cmake_dir() -> None:
    from ptkit._version import __version__

    status, out, _, _ = ptkit("--version")
    assert (status, out) == (0, f"ptkit, version {__version__}\n")
    status, out, _, modules = ptkit("--cmake-dir")
    assert (status, out.strip()) == (0, str(SRC / "ptkit" / "cmake"))
    assert (SRC / "ptkit" / "cmake" / "ptkit-config.cmake").is_file()
    assert not commands_imported(modules)


@pytest.mark.parametrize("module", ["ptkit", "ptkit.cli"])
def test_python_dash_m(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", module, "select", "--root", str(MACHINES / "no_gpu"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["variant"] == "cpu"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "9.0;bogus;12.0+PTX",
            "ptkit select: PTKIT_CUDA_ARCHS='9.0;bogus;12.0+PTX': 'bogus' is not a compute "
            "capability (expected entries like 9.0, 10.0a, 12.0f or 12.0+PTX)",
        ),
        (
            "9.0,10.0",
            "ptkit select: PTKIT_CUDA_ARCHS='9.0,10.0': separate the entries with ';' or "
            "spaces, as TORCH_CUDA_ARCH_LIST does (9.0;10.0), not ','",
        ),
    ],
)
def test_select_with_a_bad_build_override_is_exit_2_in_one_line(value: str, message: str) -> None:
    status, out, err, _ = ptkit(
        "select", "--root", str(MACHINES / "h200"), env={"PTKIT_CUDA_ARCHS": value}
    )
    assert (status, out, err.strip()) == (2, "", message)


def test_select_says_a_build_override_is_for_local_builds() -> None:
    status, out, err, _ = ptkit(
        "select", "--root", str(MACHINES / "h200"), env={"PTKIT_CUDA_ARCHS": "9.0"}
    )
    assert status == 0, err
    assert (
        "  note: PTKIT_CUDA_ARCHS='9.0' (sm_90) applies to local builds (ptkit build, pip "
        "install from source), not to the published wheels ptkit select chooses from"
    ) in out.splitlines()


def test_the_torch_free_commands_run_without_torch(tmp_path: Path) -> None:
    """select, index, doctor and matrix with torch unimportable (the probe blocks it)."""
    status, out, err, _ = ptkit(
        "doctor", "--json", "--root", str(MACHINES / "no_gpu"), "--select", "PTK101,PTK902"
    )
    assert status in (0, 1), err
    assert json.loads(out)["schema_version"] == 1
    wheel = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    status, out, err, _ = ptkit("index", "build", str(wheel), "--out", str(tmp_path / "site"))
    assert status == 0, err
    assert (tmp_path / "site" / "cpu" / "simple" / "alpha" / "index.html").is_file()
    status, out, err, _ = ptkit("matrix", "--json", "--source", str(REPO))
    assert status == 0, err
    assert json.loads(out)
    status, out, err, _ = ptkit("doctor", "--list-checks")
    assert status == 0 and "PTK101" in out, err


def test_an_unknown_check_is_a_usage_error() -> None:
    status, _, err, _ = ptkit("doctor", "--select", "PTK2020")
    assert status == 2
    assert "did you mean PTK202?" in err and "Traceback" not in err


def test_an_unknown_command_suggests_the_closest() -> None:
    status, _, err, _ = ptkit("doctr")
    assert status == 2
    assert (
        "Error: No such command 'doctr' (did you mean 'doctor'?); expected one of adopt, build,"
        in err
    )
