"""One cpu wheel of ptkit-ops, built against torch 2.14 for the stable ABI (target 2.10), across
the torch range it is meant for: torch 2.10 (the floor), 2.13, 2.14 and 2.15, each in its own
environment from scripts/bootstrap (.venv-torch210, .venv-torch213, .venv, .venv-torch215).

For each torch, a fresh venv on that environment gets the toolkit and the cpu wheel from their
files (--no-deps: torch comes from the environment); in a child there the library loads
natively and the op tests pass (for torch 2.14, the test environment's own, whose tests the
suite runs anyway, the load and a numeric check only: CI time goes to the torches nothing
else runs). The loader's tests run under the floor, 2.10, alone: they start 16 Pythons that
import torch each, and the torch version enters the loader's decisions only through the
floor, which 2.10 (at it) and 2.9.1 (below it, the next test) cover. A torch below the floor (2.9.1, a real PyPI wheel
that bootstrap keeps) is refused by the loader with the reason, and the reference serves.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import REPO, fresh_venv, python_env, run, run_op_tests, skip_if_bootstrap_left_out

from ptkit_ops import OPS

pytestmark = pytest.mark.integration

# (the torch's environment from scripts/bootstrap, the version it holds)
TORCHES = {
    "torch2.10": (".venv-torch210", "2.10.0"),
    "torch2.13": (".venv-torch213", "2.13.0"),
    "torch2.14": (".venv", "2.14.1"),
    "torch2.15": (".venv-torch215", "2.15.0"),
}

# scripts/bootstrap's folder of wheels from PyPI (it keeps torch 2.9.1's there).
BOOTSTRAP_WHEELS = Path(
    os.environ.get("PTKIT_BOOTSTRAP_WHEELS")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "ptkit"
    / "bootstrap-wheels"
)
FLOOR = TORCHES["torch2.10"][1]  # the stable ABI target
BELOW_FLOOR = "2.9.1"

CHECK_SCRIPT = r"""
import json, torch, ptkit, ptkit.runtime, ptkit_ops
decisions = [(d.library, d.status.value, d.reason) for d in ptkit.runtime.load_decisions("ptkit_ops")]
routes = {r.op: (r.implementation, r.reason) for r in ptkit.runtime.explain("ptkit_ops")
          if r.device_type == "cpu"}
x = torch.randn(4, 64); w = torch.randn(64)
error = (ptkit_ops.rms_norm(x, w) - ptkit_ops.rms_norm_reference(x, w)).abs().max().item()
print(json.dumps({"torch": torch.__version__, "torch_file": torch.__file__,
                  "ptkit": ptkit.__version__, "ptkit_ops": ptkit_ops.__version__,
                  "decisions": decisions, "routes": routes, "error": error}))
"""


def _base_python(base_env: str) -> Path:
    python = REPO / base_env / "bin" / "python"
    skip_if_bootstrap_left_out(base_env)
    if not python.exists():
        pytest.fail(f"{base_env} is missing: run scripts/bootstrap (make test does)")
    return python


def _install_wheels(python: Path, *wheels: Path, options: tuple[str, ...] = ()) -> None:
    """The wheels from their files, nothing resolved or downloaded (the toolkit's CLI
    dependency, click, is not needed to load the ops; the torch environments have none)."""
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", *options, *map(str, wheels)])


def _check(python: Path, cwd: Path) -> dict[str, object]:
    # Without the caller's PTKIT_* switches (python_env), which would change the decisions.
    proc = run([str(python), "-c", CHECK_SCRIPT], cwd=cwd, env=python_env())
    out: dict[str, object] = json.loads(proc.stdout)
    return out


def run_loader_tests(python: Path) -> subprocess.CompletedProcess[str]:
    """tests/integration/test_loader.py in another environment: the loader's decisions on
    real files and the environment switches, under that torch. The manifest-schema test is
    left out: it needs jsonschema, which the torch environments do not hold, and reads no
    torch."""
    return run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(REPO / "tests" / "integration" / "test_loader.py"),
            "-k",
            "not validates_against_the_schema",
        ],
        cwd=REPO,
        env=python_env(),
    )


@pytest.mark.parametrize(("base_env", "torch_version"), TORCHES.values(), ids=TORCHES.keys())
def test_one_wheel_loads_natively_and_passes_the_op_tests_in_every_torch(
    ptkit_wheel: Path, toolkit_wheel: Path, tmp_path: Path, base_env: str, torch_version: str
) -> None:
    python = fresh_venv(tmp_path / "venv", _base_python(base_env))
    _install_wheels(python, toolkit_wheel, ptkit_wheel)
    out = _check(python, tmp_path)
    assert str(out["torch"]).split("+")[0] == torch_version, out["torch"]  # 2.10.0+cu128 …
    assert REPO / base_env in Path(str(out["torch_file"])).parents, out["torch_file"]
    assert (out["ptkit_ops"], out["ptkit"]) == ("0.1.0+cpu", "0.1.0")
    decisions = out["decisions"]
    assert isinstance(decisions, list) and len(decisions) == 1, decisions
    library, status, reason = decisions[0]
    assert (library, status) == ("libptkit_cpu.so", "loaded"), reason
    assert "stable ABI target 2.10" in reason
    routes = out["routes"]
    assert isinstance(routes, dict)
    assert {op: r[0] for op, r in routes.items()} == dict.fromkeys(OPS, "native"), routes
    assert isinstance(out["error"], float) and out["error"] < 1e-5, out["error"]
    if base_env == ".venv":
        return  # the suite's own environment: tests/integration/test_ops.py runs there
    # The op tests (native against reference, every op and dtype) under this torch; the
    # loader's tests under the floor (the module's docstring says why).
    ops = run_op_tests(python)
    assert " passed" in ops.stdout and "failed" not in ops.stdout, ops.stdout
    if torch_version == FLOOR:
        loader = run_loader_tests(python)
        assert " passed" in loader.stdout and "failed" not in loader.stdout, loader.stdout


def test_a_torch_below_the_floor_is_refused_with_the_reason(
    ptkit_wheel: Path, toolkit_wheel: Path, tmp_path: Path
) -> None:
    """torch 2.9.1 from PyPI, installed into a fresh venv over .venv-torch210's torch 2.10 (the
    venv's own torch comes first on sys.path); it uses 2.10's nvidia-* libraries, the same
    CUDA 12.8 builds 2.9.1 pins except nvshmem (3.4.5 for 3.3.20 of the same soname), which
    the CPU ops never call. The real loader reads the real torch's version and refuses."""
    skip_if_bootstrap_left_out(".venv-torch210")
    skip_if_bootstrap_left_out(f"torch-{BELOW_FLOOR}")
    wheels = sorted(BOOTSTRAP_WHEELS.glob(f"torch-{BELOW_FLOOR}-*.whl"))
    if not wheels:
        pytest.fail(
            f"no torch {BELOW_FLOOR} wheel in {BOOTSTRAP_WHEELS}: run scripts/bootstrap "
            "(make test does)"
        )
    python = fresh_venv(tmp_path / "venv", _base_python(".venv-torch210"))
    # --ignore-installed: pip must not try to remove the base environment's torch 2.10.
    _install_wheels(python, wheels[-1], options=("--ignore-installed",))
    _install_wheels(python, toolkit_wheel, ptkit_wheel)
    out = _check(python, tmp_path)
    torch_version = str(out["torch"])  # e.g. 2.9.1+cu128: PyPI's build for CUDA 12.8
    assert torch_version.split("+")[0] == BELOW_FLOOR, torch_version
    assert tmp_path / "venv" in Path(str(out["torch_file"])).parents, out["torch_file"]
    decisions = out["decisions"]
    assert isinstance(decisions, list) and len(decisions) == 1, decisions
    library, status, reason = decisions[0]
    assert (library, status) == ("libptkit_cpu.so", "skipped"), (status, reason)
    assert (
        f"needs torch >= 2.10 (stable ABI target), found {torch_version}; upgrade torch" in reason
    ), reason
    routes = out["routes"]
    assert isinstance(routes, dict) and set(routes) == set(OPS)
    for op, (implementation, why) in routes.items():
        assert implementation == "reference", (op, implementation, why)
        assert "needs torch >= 2.10" in why, (op, why)
    # The reference serves: the op runs and equals itself.
    assert out["error"] == 0.0
