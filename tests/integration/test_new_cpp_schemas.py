"""`ptkit new --schemas cpp` for real: the scaffold whose CPU library defines the op's
schema (STABLE_TORCH_LIBRARY) and whose package has no reference is built by the
installed toolkit (`ptkit build --variant cpu`: build, repair, audit, smoke), and its own
tests pass against the installed wheel; the manifest's registrations show the schema
comes from the library. (The default, --schemas python, is tests/integration/
test_new_project.py's.)"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
from support import fresh_venv, python_env, run

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent


def test_a_cpp_schemas_project_builds_and_passes_its_own_tests(tmp_path: Path) -> None:
    ptkit = str(VENV_BIN / "ptkit")
    run([ptkit, "new", "kc", "--schemas", "cpp", "--dir", str(tmp_path / "kc")], env=python_env())
    proc = run(
        [ptkit, "build", "--source", str(tmp_path / "kc"), "--variant", "cpu",
         "--dist", str(tmp_path / "dist"), "--build-root", str(tmp_path / "build")],
        env=python_env(), timeout=900,
    )  # fmt: skip
    assert "kc smoke test passed" in proc.stdout, proc.stdout
    (wheel,) = (tmp_path / "dist" / "cpu").glob("kc-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        manifest = json.loads(archive.read("kc/_native/kc_cpu.manifest.json"))
    # The schema as torch prints it back: defined by the library, loaded alone at install.
    assert manifest["registrations"]["schemas"] == {
        "kc::scale_add": "kc::scale_add(Tensor x, Tensor y, float alpha=1.) -> Tensor"
    }
    python = fresh_venv(tmp_path / "env", Path(sys.executable))
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
    out = run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
         str(tmp_path / "kc" / "tests")],
        env=python_env(CUDA_VISIBLE_DEVICES=""), cwd=Path("/"),
    ).stdout  # fmt: skip
    assert " passed" in out and "failed" not in out, out
