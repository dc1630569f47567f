"""An installed ptkit-ops damaged the ways a real install gets damaged, each diagnosed by
the loader and by the doctor in the same words, naming the file and the cause.

The cpu wheel is installed by pip into a venv of the module (a real RECORD beside it);
each test reinstalls it, damages the installed ``_native/``, and runs the venv's Python:
``import ptkit_ops`` (the loader's decisions) and ``ptkit doctor --json`` (what it
predicts without loading). Unreadable files need a user the permissions apply to: as
root the children run as ``nobody`` (util-linux's ``setpriv``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO, fresh_venv, python_env, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LIBRARY = "libptkit_cpu.so"
MANIFEST = "ptkit_cpu.manifest.json"
NOBODY = 65534

LOADER = r"""
import json
import ptkit.runtime
import ptkit_ops
print(json.dumps([
    {"library": d.library, "status": d.status.value, "reason": d.reason}
    for d in ptkit.runtime.load_decisions("ptkit_ops")
]))
"""


@pytest.fixture(scope="module")
def venv(toolkit_wheel: Path) -> Iterator[tuple[Path, Path]]:
    """(python, site-packages) of a venv with the toolkit, seeing .venv's torch. Outside
    pytest's folder, which only its owner may enter."""
    folder = Path(tempfile.mkdtemp(prefix="ptkit-weak-"))
    try:
        folder.chmod(0o755)
        python = fresh_venv(folder / "venv", REPO / ".venv" / "bin" / "python")
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed",
             str(toolkit_wheel)])  # fmt: skip
        site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
        yield python, Path(site.stdout.strip())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def native(venv: tuple[Path, Path], ptkit_wheel: Path) -> Path:
    """A fresh install of the cpu wheel (no file left from the test before); its _native/."""
    python, site = venv
    for old in [site / "ptkit_ops", *site.glob("ptkit_ops-*.dist-info")]:
        shutil.rmtree(old, ignore_errors=True)
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed",
         str(ptkit_wheel)])  # fmt: skip
    run(["chmod", "-R", "a+rX", str(site.parents[3])])  # readable by nobody, like a system venv
    return site / "ptkit_ops" / "_native"


def _as_user(cmd: list[str]) -> list[str]:
    """``cmd`` as a user that file permissions apply to."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.fail("running as root without util-linux's setpriv: cannot drop to nobody")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]


def _child(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _as_user([str(python), *args]),
        env=python_env(HOME="/tmp"),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _diagnoses(python: Path) -> tuple[list[dict[str, str]], list[dict[str, Any]], list[str]]:
    """The loader's decisions, the doctor's libraries and the doctor's findings' IDs."""
    loaded = _child(python, "-c", LOADER)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "Traceback" not in loaded.stderr, loaded.stderr
    doctor = _child(python, "-m", "ptkit", "doctor", "--json")
    assert "Traceback" not in doctor.stderr, doctor.stderr
    report = json.loads(doctor.stdout)
    (package,) = [p for p in report["facts"]["packages"] if p["name"] == "ptkit_ops"]
    findings = [f["check"] for f in report["findings"]]
    return json.loads(loaded.stdout.splitlines()[-1]), package["libraries"], findings


def _agree(python: Path, library: str, *cause: str) -> str:
    """The library fails in the loader and in the doctor, with one reason naming ``cause``."""
    decisions, libraries, findings = _diagnoses(python)
    (decision,) = [d for d in decisions if d["library"] == library]
    (predicted,) = [lib for lib in libraries if lib["library"] == library]
    assert decision["status"] == predicted["status"] == "failed", (decision, predicted)
    assert predicted["reason"] == decision["reason"], (decision, predicted)
    for part in cause:
        assert part in decision["reason"], decision["reason"]
    assert "PTK303" in findings and "PTK901" not in findings, findings
    return decision["reason"]


def _edit(manifest: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(manifest.read_text())
    change(data)
    manifest.write_text(json.dumps(data))


def test_the_undamaged_install_loads_in_both(venv: tuple[Path, Path], native: Path) -> None:
    """The control: the same children say loaded, so each damage below is what fails."""
    decisions, libraries, findings = _diagnoses(venv[0])
    assert [d["status"] for d in decisions] == [lib["status"] for lib in libraries] == ["loaded"]
    assert "PTK303" not in findings


def test_an_unreadable_library_is_named_with_the_cause(
    venv: tuple[Path, Path], native: Path
) -> None:
    (native / LIBRARY).chmod(0)
    reason = _agree(venv[0], LIBRARY, f"cannot read {native / LIBRARY}: Permission denied")
    assert "PermissionError(" not in reason and "chmod a+r" in reason


def test_an_unreadable_native_folder_is_not_an_empty_one(
    venv: tuple[Path, Path], native: Path
) -> None:
    native.chmod(0)
    try:
        _agree(venv[0], "_native", f"{native}: cannot list the folder", "Permission denied")
    finally:
        native.chmod(0o755)


def test_a_second_cpu_library_for_the_same_ops_is_refused_naming_both(
    venv: tuple[Path, Path], native: Path
) -> None:
    shutil.copy(native / LIBRARY, native / "libptkit_cpu_old.so")
    stale = json.loads((native / MANIFEST).read_text())
    stale["library"] = "libptkit_cpu_old.so"
    # Sorted after ptkit_cpu.manifest.json: the installed library loads first.
    (native / "ptkit_cpu_old.manifest.json").write_text(json.dumps(stale))
    _agree(venv[0], "libptkit_cpu_old.so", "registers cpu kernels for ptkit::",
           f"which {LIBRARY} (of ptkit_ops, ")  # fmt: skip
    decisions, _, _ = _diagnoses(venv[0])
    assert [d["status"] for d in decisions if d["library"] == LIBRARY] == ["loaded"]


def test_a_manifest_edited_after_install_is_not_believed(
    venv: tuple[Path, Path], native: Path
) -> None:
    """A dtype added by hand: explain() would have repeated it as fact."""
    _edit(native / MANIFEST, lambda data: data["ops"]["rms_norm"].append("float64"))
    _agree(venv[0], LIBRARY, f"{MANIFEST} was changed after it was installed", "RECORD")


def test_one_bad_manifest_does_not_stop_the_doctor_probing_the_others(
    venv: tuple[Path, Path], native: Path
) -> None:
    (native / "zz_broken.manifest.json").write_bytes(b"\xff\xfe{")
    _agree(venv[0], "zz_broken.manifest.json", "zz_broken.manifest.json: not UTF-8 text")
    _, libraries, _ = _diagnoses(venv[0])
    assert [lib["status"] for lib in libraries if lib["library"] == LIBRARY] == ["loaded"]
