"""The `ptkit` console script enters through `ptkit_cli`: the commands that must not
import torch (select, index) do not, and the ones that need the ops still get them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import REPO, make_wheel, python_env, run

FIXTURES = REPO / "tests" / "fixtures" / "machines"

# Runs the console script's entry point, then reports whether torch was imported.
PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nTORCH_IMPORTED=" + json.dumps("torch" in sys.modules)))
import ptkit_cli
sys.argv = ["ptkit", *json.loads(sys.argv[1])]
ptkit_cli.main()
"""


def ptkit(*args: str):
    proc = run([sys.executable, "-c", PROBE, json.dumps(args)], env=python_env(), cwd=Path("/"))
    body, _, flag = proc.stderr.rpartition("TORCH_IMPORTED=")
    return proc.stdout, json.loads(flag), body


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
    assert "https://example.org/ptkit/cu13/simple" in json.dumps(result)
    assert torch_imported is False


def test_index_build_does_not_import_torch(tmp_path):
    wheel = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    _, torch_imported, _ = ptkit("index", "build", str(wheel), "--out", str(tmp_path / "site"))
    assert (tmp_path / "site" / "cpu" / "simple" / "alpha" / "index.html").is_file()
    assert torch_imported is False


def test_explain_still_loads_the_ops():
    out, torch_imported, _ = ptkit("explain", "--json")
    routes = json.loads(out)["routes"]
    assert {(r["op"], r["device_type"]) for r in routes} >= {("rms_norm", "cpu")}
    assert torch_imported is True


def test_the_console_script_is_ptkit_cli():
    scripts = Path(sys.executable).parent / "ptkit"
    text = scripts.read_text()
    assert "from ptkit_cli import main" in text, text
    proc = run(
        [str(scripts), "select", "--root", str(FIXTURES / "no_gpu"), "--json"], env=python_env()
    )
    assert json.loads(proc.stdout)["variant"] == "cpu"
