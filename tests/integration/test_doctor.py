"""``ptkit doctor`` in real subprocesses of the installed toolkit and ptkit-ops: this
machine, a venv without torch (Python 3.10, the toolkit wheel alone), a torch that
raises on import, nvidia-smi scripts that hang or print garbage, recorded machine trees,
the doctor failing, and ``--smoke``."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import pytest
from support import REPO, make_wheel, python_env, run

import ptkit.doctor.report

FIXTURES = REPO / "tests" / "fixtures" / "machines"
PYTHON310 = Path("/root/.pyenv/versions/3.10.13/bin/python")
SCHEMA = json.loads(ptkit.doctor.report.SCHEMA_PATH.read_text())

pytestmark = pytest.mark.integration

# The console script's entry (ptkit.cli:main), then whether torch was imported.
PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nTORCH_IMPORTED=" + json.dumps("torch" in sys.modules)))
from ptkit.cli import main
sys.argv = ["ptkit", *json.loads(sys.argv[1])]
main()
"""


class Doctor:
    def __init__(self, proc: subprocess.CompletedProcess[str], seconds: float) -> None:
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        body, _, flag = proc.stderr.rpartition("TORCH_IMPORTED=")
        self.stderr = body if flag else proc.stderr
        self.torch_imported = json.loads(flag) if flag else None
        self.seconds = seconds

    @property
    def document(self) -> dict:
        return json.loads(self.stdout)

    def checks(self) -> list[str]:
        return [f["check"] for f in self.document["findings"]]


def doctor(
    *args: str,
    python: Path | str = sys.executable,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Doctor:
    start = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-c", PROBE, json.dumps(args)],
        env=env or python_env(),
        cwd=Path("/"),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Doctor(proc, time.perf_counter() - start)


def assert_valid(result: Doctor) -> dict:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    document = result.document
    jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)
    failing = [f for f in document["findings"] if f["severity"] in ("error", "warning")]
    assert document["exit_code"] == result.returncode == (1 if failing else 0), document
    return document


def script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


# --- (a) this machine ----------------------------------------------------------------


def test_this_machine_json_is_valid_and_torch_free():
    result = doctor("doctor", "--json")
    document = assert_valid(result)
    assert result.torch_imported is False
    facts = document["facts"]
    assert facts["python"]["executable"] == sys.executable
    assert facts["torch"]["version"].startswith("2.")
    (package,) = [p for p in facts["packages"] if p["name"] == "ptkit_ops"]
    assert package["distribution"] == "ptkit-ops"
    assert package["libraries"] and package["libraries"][0]["backend"] == "cpu"
    assert {s["missing"] for s in document["skipped"]} == {"smoke"}


def test_this_machine_text_report_plain_when_not_a_terminal():
    result = doctor("doctor")
    assert result.returncode in (0, 1), result.stderr
    titles = ("Python", "OS", "torch", "Accelerators", "Packages built with ptkit", "Findings")
    for title in (*titles, "Runtime profile"):
        assert f"\n{title}\n" in result.stdout, title
    assert "\033[" not in result.stdout
    assert result.torch_imported is False


def _on_a_terminal(env: dict[str, str]) -> str:
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ptkit", "doctor", "--select", "PTK101,PTK301"],
            stdout=secondary,
            stderr=subprocess.PIPE,
            env=env,
            cwd="/",
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=60)
    finally:
        os.close(primary)
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_unless_no_color():
    assert "\033[" in _on_a_terminal(python_env())
    assert "\033[" not in _on_a_terminal(python_env(NO_COLOR="1"))


def test_select_ignore_and_unknown_ids():
    result = doctor(
        "doctor",
        "--json",
        "--select",
        "PTK101",
        "--select",
        "PTK102,package-without-native-library",
    )
    document = assert_valid(result)
    assert set(result.checks()) <= {"PTK101", "PTK102", "PTK301"}
    assert document["skipped"] == []
    unknown = doctor("doctor", "--select", "PTK2020")
    assert unknown.returncode == 2
    assert "did you mean PTK202?" in unknown.stderr and "PTK101" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_list_checks():
    result = doctor("doctor", "--list-checks")
    assert result.returncode == 0
    assert "PTK101" in result.stdout and "torch-missing" in result.stdout
    assert result.torch_imported is False


# --- (b) torch absent: a Python 3.10 venv with the toolkit alone ----------------------


@pytest.fixture(scope="module")
def venv_without_torch(tmp_path_factory: pytest.TempPathFactory, toolkit_wheel: Path) -> Path:
    if not PYTHON310.is_file():
        pytest.skip(f"{PYTHON310} is not installed (pyenv's CPython 3.10)")
    folder = tmp_path_factory.mktemp("no-torch") / "venv"
    run([str(PYTHON310), "-m", "venv", str(folder)])
    python = folder / "bin" / "python"
    # The toolkit as `pip install ptkit` gives it: its dependencies (tomli on 3.10), no torch.
    run(
        [str(python), "-m", "pip", "install", "-q", str(toolkit_wheel)],
        env=python_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    probe = run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch'))"])
    assert probe.stdout.strip() == "None"
    return python


def test_torch_absent(venv_without_torch: Path):
    result = doctor("doctor", "--json", python=venv_without_torch)
    document = assert_valid(result)
    assert result.returncode == 1
    assert document["facts"]["python"]["version"].startswith("3.10.")
    assert document["facts"]["torch"]["location"] is None
    assert document["facts"]["packages"] == []  # the toolkit is not a package of kernels
    (finding,) = [f for f in document["findings"] if f["check"] == "PTK101"]
    # ptkit select's choice for this machine (no GPU: cpu) names torch's CPU index
    assert finding["severity"] == "error"
    assert finding["fix"] == (
        "install torch for the cpu variant `ptkit select` names here: "
        "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    )
    text = doctor("doctor", python=venv_without_torch)
    assert "PTK101 torch-missing" in text.stdout
    assert "fix: install torch for the cpu variant" in text.stdout
    assert "Traceback" not in text.stderr + text.stdout


def test_the_console_script_without_torch(venv_without_torch: Path, tmp_path: Path):
    """select, index, doctor, matrix and build through bin/ptkit, in a Python 3.10 venv that
    has no torch."""
    script = venv_without_torch.parent / "ptkit"
    env = python_env()
    select = run([str(script), "select", "--root", str(FIXTURES / "h200"), "--json"], env=env)
    assert json.loads(select.stdout)["variant"] == "cu13"
    wheel = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    run([str(script), "index", "build", str(wheel), "--out", str(tmp_path / "site")], env=env)
    assert (tmp_path / "site" / "cpu" / "simple" / "alpha" / "index.html").is_file()
    matrix = run([str(script), "matrix", "--json", "--source", str(REPO)], env=env)
    assert json.loads(matrix.stdout)
    checks = run([str(script), "doctor", "--list-checks"], env=env)
    assert "PTK101" in checks.stdout
    # The build CLI on Python 3.10 without torch: its first stage names all it lacks.
    build = subprocess.run(
        [str(script), "build", "--source", str(REPO), "--variant", "cpu",
         "--build-root", str(tmp_path / "build"), "--dist", str(tmp_path / "dist")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert build.returncode == 1, build.stdout + build.stderr
    assert "Traceback" not in build.stdout + build.stderr
    assert "ptkit build: stage 'prerequisites' failed for variant cpu" in build.stderr
    assert "torch>=2.10 (the project's [build-system] requires): not installed" in build.stderr
    assert f"Fix: {venv_without_torch} -m pip install 'ptkit[build]' 'torch>=2.10'" in build.stderr
    assert not list((tmp_path / "dist").rglob("*.whl"))


def test_torch_absent_smoke_names_the_import_error(venv_without_torch: Path):
    result = doctor("doctor", "--json", "--smoke", python=venv_without_torch)
    document = assert_valid(result)
    smoke = document["facts"]["smoke"]
    assert smoke["torch_imported"] is False
    assert "No module named 'torch'" in smoke["error"]
    assert "PTK103" in result.checks()


# --- (c) a torch that raises on import -------------------------------------------------


@pytest.fixture
def broken_torch(tmp_path: Path) -> dict[str, str]:
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise RuntimeError("this torch is broken on purpose")\n')
    return python_env(PYTHONPATH=str(tmp_path / "site"))


def test_broken_torch_default_report(broken_torch: dict[str, str]):
    result = doctor("doctor", "--json", env=broken_torch)
    document = assert_valid(result)
    assert result.returncode == 1
    assert result.torch_imported is False
    (finding,) = [f for f in document["findings"] if f["check"] == "PTK102"]
    assert "looks broken" in finding["message"] and "version.py" in finding["message"]


def test_broken_torch_smoke_reports_the_import_error(broken_torch: dict[str, str]):
    result = doctor("doctor", "--json", "--smoke", env=broken_torch)
    document = assert_valid(result)
    assert result.torch_imported is False  # the parent never imports torch, even with --smoke
    smoke = document["facts"]["smoke"]
    assert smoke["torch_imported"] is False
    assert smoke["error"] == "import torch: RuntimeError: this torch is broken on purpose"
    (finding,) = [f for f in document["findings"] if f["check"] == "PTK103"]
    assert "this torch is broken on purpose" in finding["message"]
    text = doctor("doctor", "--smoke", env=broken_torch)
    assert "RuntimeError: this torch is broken on purpose" in text.stdout
    assert "Traceback" not in text.stdout + text.stderr


# --- (d) nvidia-smi that hangs or prints garbage ---------------------------------------


def _with_smi(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    script(bin_dir, "nvidia-smi", body)
    return python_env(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def test_hanging_nvidia_smi_is_a_finding_not_a_hang(tmp_path: Path):
    env = _with_smi(tmp_path, "sleep 60")
    # The h200 tree has an NVIDIA driver file, so the probe asks nvidia-smi.
    result = doctor(
        "doctor", "--json", "--root", str(FIXTURES / "h200"), "--timeout", "1", env=env, timeout=60
    )
    document = assert_valid(result)
    assert result.seconds < 15, result.seconds
    hung = [f for f in document["findings"] if "no answer within 1 s" in f["message"]]
    assert hung and hung[0]["check"] == "PTK902", document["findings"]
    assert "hangs" in hung[0]["fix"]
    # The GPUs are still listed, from the PCI ids.
    assert [g["arch"] for g in document["facts"]["machine"]["nvidia"]] == ["sm_90", "sm_90"]


def test_garbage_from_nvidia_smi_is_a_finding(tmp_path: Path):
    env = _with_smi(tmp_path, "echo 'this is not CSV'; echo '\\001\\002 garbage'")
    result = doctor("doctor", "--json", "--root", str(FIXTURES / "h200"), env=env)
    document = assert_valid(result)
    garbage = [f for f in document["findings"] if f["check"] == "PTK902"]
    assert garbage and "this is not CSV" in garbage[0]["message"], document["findings"]
    assert "garbage" in garbage[0]["fix"]


# --- (e) recorded machine trees ----------------------------------------------------------


def _no_smi(tmp_path: Path) -> dict[str, str]:
    """nvidia-smi 'not installed': a PATH without it (the recorded tree is the machine)."""
    bin_dir = tmp_path / "empty-bin"
    bin_dir.mkdir(exist_ok=True)
    return python_env(PATH=str(bin_dir))


def test_h200_tree_with_the_cpu_variant(tmp_path: Path):
    result = doctor("doctor", "--json", "--root", str(FIXTURES / "h200"), env=_no_smi(tmp_path))
    document = assert_valid(result)
    machine = document["facts"]["machine"]
    assert [g["name"] for g in machine["nvidia"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert machine["nvidia_driver"] == "580.65.06"
    (covered,) = [f for f in document["findings"] if f["check"] == "PTK202"]
    assert "nvidia:0 (NVIDIA H200, sm_90), nvidia:1 (NVIDIA H200, sm_90)" in covered["message"]
    assert "cu13" in covered["fix"]  # what ptkit select names for an H200
    # torch here is a CUDA build (cu130) and driver 580 supports CUDA 13.0.
    assert "PTK104" not in result.checks() and "PTK201" not in result.checks()
    text = doctor("doctor", "--root", str(FIXTURES / "h200"), env=_no_smi(tmp_path))
    assert "nvidia:0  NVIDIA H200  sm_90" in text.stdout


def test_the_installed_variant_against_selects_answer(tmp_path: Path):
    """The cpu wheel installed here, an H200 tree: PTK308 names the variant `ptkit select`
    recommends and the pip command, with the index of PTKIT_INDEX_URL."""
    env = {**_no_smi(tmp_path), "PTKIT_INDEX_URL": "https://ptkit.example.org/index"}
    root = str(FIXTURES / "h200")
    selected = json.loads(
        run([sys.executable, "-m", "ptkit", "select", "--root", root, "--json"], env=env).stdout
    )
    result = doctor("doctor", "--json", "--root", root, "--select", "PTK308", env=env)
    document = assert_valid(result)
    (finding,) = document["findings"]
    assert finding["severity"] == "warning"
    assert (
        "variant cpu is installed, but `ptkit select` recommends the cu13 variant"
        in (finding["message"])
    )
    assert finding["message"].endswith(selected["reason"])
    version = document["facts"]["packages"][0]["version"].partition("+")[0]
    assert finding["fix"] == (
        f"replace it with the cu13 variant: pip install --no-deps ptkit-ops=={version}+cu13 "
        f"--index-url {selected['variant_index_url']}"
    )


def test_a_cu13_wheel_on_a_machine_without_a_gpu(tmp_path: Path, cu13_wheel: Path):
    """Issue 15: the cu13 wheel installed (pip --target, first on the path), no GPU: the
    doctor said "no problems" while `ptkit select` recommends cpu."""
    target = tmp_path / "site"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--target",
            str(target),
            str(cu13_wheel),
        ]
    )
    env = {**_no_smi(tmp_path), "PYTHONPATH": str(target)}
    root = str(FIXTURES / "no_gpu")
    selected = json.loads(
        run([sys.executable, "-m", "ptkit", "select", "--root", root, "--json"], env=env).stdout
    )
    assert selected["variant"] == "cpu"
    result = doctor("doctor", "--json", "--root", root, env=env)
    document = assert_valid(result)
    (package,) = [p for p in document["facts"]["packages"] if p["name"] == "ptkit_ops"]
    assert package["variant"] == "cu13" and package["location"].startswith(str(target))
    (finding,) = [f for f in document["findings"] if f["check"] == "PTK308"]
    assert result.returncode == 1
    assert finding["message"] == (
        f"ptkit_ops {package['version']}, variant cu13 is installed, but `ptkit select` "
        f"recommends the cpu variant for this machine: {selected['reason']}"
    )
    version = package["version"].partition("+")[0]
    assert f"pip install --no-deps ptkit-ops=={version}+cpu --index-url " in finding["fix"]


def test_h200_tree_with_a_cpu_torch(tmp_path: Path):
    """A torch whose version.py says CPU build (a stand-in folder: import is never tried)."""
    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("raise RuntimeError('not imported by the doctor')\n")
    (site / "version.py").write_text("__version__ = '2.14.1+cpu'\ncuda = None\nhip = None\n")
    env = _no_smi(tmp_path)
    env["PYTHONPATH"] = str(tmp_path / "site")
    result = doctor("doctor", "--json", "--root", str(FIXTURES / "h200"), env=env)
    assert_valid(result)
    assert "PTK104" in result.checks(), result.document["findings"]


@pytest.mark.parametrize(
    ("tree", "expected", "absent"),
    [
        ("rtx4090", {"PTK202"}, set()),
        ("t4", {"PTK202"}, set()),
        ("mi300x", {"PTK202", "PTK105"}, {"PTK104"}),
        ("arc_b580", {"PTK202"}, set()),
        ("no_gpu", set(), {"PTK202", "PTK104", "PTK105"}),
    ],
)
def test_recorded_trees(tmp_path: Path, tree: str, expected: set[str], absent: set[str]):
    result = doctor("doctor", "--json", "--root", str(FIXTURES / tree), env=_no_smi(tmp_path))
    assert_valid(result)
    found = set(result.checks())
    assert expected <= found, result.document["findings"]
    assert not (absent & found), result.document["findings"]


# --- (f) the doctor itself failing: exit code 2 -----------------------------------------


def test_report_that_cannot_be_written_is_exit_2():
    """stdout on /dev/full: the write fails with ENOSPC, a real failure of the doctor."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "ptkit", "doctor", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=python_env(),
            cwd="/",
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2, proc.stderr
    assert "ptkit doctor: cannot write the report to stdout" in proc.stderr
    assert "No space left on device" in proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.fixture
def damaged_ptkit(tmp_path: Path) -> dict[str, str]:
    """A copy of the installed ptkit with a bad edit in one of the doctor's check modules
    (a check that raises), first on PYTHONPATH."""
    import ptkit

    installed = Path(ptkit.__file__).resolve().parent
    copy = tmp_path / "site" / "ptkit"
    shutil.copytree(installed, copy, ignore=shutil.ignore_patterns("__pycache__"))
    devices = copy / "doctor" / "checks" / "devices.py"
    devices.write_text(
        devices.read_text()
        + textwrap.dedent(
            """

            @check("PTK299", "damaged", Severity.ERROR, summary="a bad edit", fix="none")
            def damaged(machine: Machine) -> Iterator[Problem]:
                raise KeyError("damaged on purpose")
            """
        )
    )
    return python_env(PYTHONPATH=str(tmp_path / "site"))


def test_a_doctor_bug_is_exit_2_with_one_line(damaged_ptkit: dict[str, str]):
    result = doctor("doctor", env=damaged_ptkit)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        "ptkit doctor: internal error while running the checks: CheckCrashed: check PTK299 "
        "(damaged) raised KeyError: 'damaged on purpose'"
    )
    assert "bug in ptkit doctor" in lines[0] and "`PTKIT_DEBUG=1 ptkit doctor`" in lines[0]
    assert "Traceback" not in result.stderr
    as_json = doctor("doctor", "--json", env=damaged_ptkit)
    assert as_json.returncode == 2
    assert as_json.document["error"] == lines[0]
    assert "Traceback" not in as_json.stderr
    for switch in ("PTKIT_DEBUG", "PTKIT_DOCTOR_DEBUG"):  # the old name still works
        debug = doctor("doctor", env={**damaged_ptkit, switch: "1"})
        assert debug.returncode != 0 and "Traceback" in debug.stderr, switch


# --- (g) --smoke on this machine ---------------------------------------------------------


def test_smoke_runs_every_op_on_cpu():
    result = doctor("doctor", "--json", "--smoke")
    document = assert_valid(result)
    assert result.torch_imported is False  # the child imports torch, not the doctor
    smoke = document["facts"]["smoke"]
    assert smoke["torch_imported"] is True and smoke["error"] is None
    assert smoke["import_seconds"] > 0 and smoke["seconds"] >= smoke["import_seconds"]
    cpu = [r for r in smoke["rows"] if r["device"] == "cpu"]
    combos = {(r["op"], r["dtype"]) for r in cpu}
    assert combos == {
        (op, dtype)
        for op in ("rms_norm", "fused_linear", "silu_and_mul")
        for dtype in ("float32", "bfloat16")
    }
    for row in cpu:
        assert row["ok"], row
        assert row["implementation"] == "native", row  # the installed wheel's CPU library
        assert row["max_error"] is not None and row["seconds"] > 0
    # The load checks every ptkit-built package gets (ptkit.runtime.smoke.check_loading).
    packages = {p["name"]: p for p in smoke["packages"]}
    assert packages["ptkit_ops"]["problems"] == []
    assert packages["ptkit_ops"]["kernels_checked"] >= 3
    assert not {"PTK103", "PTK305", "PTK306", "PTK307"} & set(result.checks())
