"""The installed ``ptkit`` console script (``ptkit.cli:main``): the commands that must not
import torch (select, index, doctor, matrix) do not, and the ones that need the ops
(explain) still load them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, make_wheel, python_env, run

FIXTURES = REPO / "tests" / "fixtures" / "machines"
SCRIPT = Path(sys.executable).parent / "ptkit"

# Runs the console script itself, then reports whether torch was imported.
PROBE = """
import atexit, json, runpy, sys
atexit.register(lambda: sys.stderr.write("\\nTORCH_IMPORTED=" + json.dumps("torch" in sys.modules)))
sys.argv = [sys.argv[1], *json.loads(sys.argv[2])]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def ptkit(*args: str, ok: tuple[int, ...] = (0,)) -> tuple[str, bool, str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(SCRIPT), json.dumps(args)],
        env=python_env(),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode in ok, proc.stdout + proc.stderr
    body, _, flag = proc.stderr.rpartition("TORCH_IMPORTED=")
    return proc.stdout, json.loads(flag), body


def test_the_console_script_is_ptkit_cli_main():
    text = SCRIPT.read_text()
    assert "from ptkit.cli import main" in text, text
    proc = run(
        [str(SCRIPT), "select", "--root", str(FIXTURES / "no_gpu"), "--json"], env=python_env()
    )
    assert json.loads(proc.stdout)["variant"] == "cpu"


def test_select_does_not_import_torch():
    out, torch_imported, _ = ptkit(
        "select",
        "--root",
        str(FIXTURES / "h200"),
        "--json",
        "--index-url",
        "https://example.org/ptkit",
    )
    result = json.loads(out)
    assert result["variant"] == "cu13"
    assert result["commands"]["uv"].startswith(
        "uv pip install ptkit-ops --index https://example.org/ptkit/cu13/simple"
    )
    assert torch_imported is False


def test_index_build_does_not_import_torch(tmp_path):
    wheel = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    _, torch_imported, _ = ptkit("index", "build", str(wheel), "--out", str(tmp_path / "site"))
    assert (tmp_path / "site" / "cpu" / "simple" / "alpha" / "index.html").is_file()
    assert torch_imported is False


def test_doctor_does_not_import_torch():
    out, torch_imported, _ = ptkit("doctor", "--json", ok=(0, 1))
    assert json.loads(out)["schema_version"] == 1
    assert torch_imported is False


def test_matrix_does_not_import_torch():
    out, torch_imported, _ = ptkit("matrix", "--json", "--source", str(REPO))
    assert json.loads(out)
    assert torch_imported is False


@pytest.mark.usefixtures("native_cpu_loaded")
def test_explain_still_loads_the_ops():
    out, torch_imported, _ = ptkit("explain", "--json")
    packages = {p["name"]: p for p in json.loads(out)["packages"]}
    routes = packages["ptkit_ops"]["routes"]
    assert {(r["op"], r["device_type"]) for r in routes} >= {("rms_norm", "cpu")}
    assert torch_imported is True


def test_the_console_script_says_errors_in_one_line(tmp_path):
    """The installed console script runs every command inside the one error boundary: a
    file name too long for the file system is one line with the fix (exit 1), and
    PTKIT_DEBUG=1 (or the doctor's older PTKIT_DOCTOR_DEBUG) shows the traceback."""
    long_name = "a" * 300
    proc = subprocess.run(
        [str(SCRIPT), "new", long_name],
        env=python_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"ptkit new: {tmp_path}/{'a' * 20}…{'a' * 8} (a name of 300 characters): File name too "
        "long; choose a shorter name (a file or folder name has at most 255 bytes)"
    ]
    for switch in ("PTKIT_DEBUG", "PTKIT_DOCTOR_DEBUG"):
        debug = subprocess.run(
            [str(SCRIPT), "new", long_name],
            env=python_env(**{switch: "1"}),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "Traceback (most recent call last)" in debug.stderr, switch
    wheel = tmp_path / "empty.whl"
    wheel.touch()
    _, _, err = ptkit("inspect", str(wheel), ok=(2,))
    assert err.strip() == (
        f"ptkit inspect: {wheel} is not a wheel: it is not a zip archive (0 bytes; a download "
        "cut short?); pass a wheel built by `ptkit build` or `pip wheel`"
    )
