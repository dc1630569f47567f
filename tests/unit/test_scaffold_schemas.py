"""`ptkit new --schemas python|cpp`: where the example op's schema is defined. python (the
default) is the scaffold as it was: schema, reference and fake kernel in the package; cpp:
the CPU library defines the schema (STABLE_TORCH_LIBRARY), the package has no reference and
registers the fake kernel after loading it. From the source tree; the cpp project is built
and its tests run by tests/integration/test_new_cpp_schemas.py."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import python_env

from ptkit.scaffold import ScaffoldError, create_project

SRC = Path(__file__).resolve().parents[2] / "src"


def _read(root: Path, relative: str) -> str:
    return (root / relative).read_text(encoding="utf-8")


def _no_template_left(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert not re.search(r"\{\{[#/]?\w+\}\}", path.read_text(encoding="utf-8")), path


@pytest.mark.parametrize("backends", [("cpu",), ("cpu", "cuda")])
def test_cpp_schemas_define_the_op_in_the_cpu_library_and_no_reference(
    tmp_path: Path, backends: tuple[str, ...]
) -> None:
    root, files = create_project("kc", backends=backends, directory=tmp_path / "kc", schemas="cpp")
    _no_template_left(root)
    ops = _read(root, "csrc/cpu/ops.cpp")
    assert (
        'STABLE_TORCH_LIBRARY(kc, m) {\n  m.def("scale_add(Tensor x, Tensor y, float alpha=1.0) -> Tensor");'
        in ops
    )
    assert ops.index("STABLE_TORCH_LIBRARY(kc, m)") < ops.index(
        "STABLE_TORCH_LIBRARY_IMPL(kc, CPU, m)"
    )
    init = _read(root, "src/kc/__init__.py")
    tree = ast.parse(init)
    assert "torch.library.Library" not in init and "reference" not in init.split('"""')[2]
    assert init.index("ptkit.runtime.load_package(__name__)") < init.index("register_fake")
    assert {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} == {
        "_scale_add_fake",
        "scale_add",
    }
    tests = _read(root, "tests/test_ops.py")
    ast.parse(tests)
    assert "scale_add_reference" not in tests and "def _expected(x, y, alpha=1.0):" in tests
    if "cuda" in backends:
        # The CUDA library only adds its kernel: one library defines the namespace.
        cuda = _read(root, "csrc/cuda/ops.cpp")
        assert (
            "STABLE_TORCH_LIBRARY(" not in cuda and "STABLE_TORCH_LIBRARY_IMPL(kc, CUDA, m)" in cuda
        )
    assert "no reference" in _read(root, "README.md")
    assert "tests/test_ops.py" in files


def test_python_schemas_are_the_default_scaffold(tmp_path: Path) -> None:
    default, _ = create_project("kp", backends=("cpu", "cuda"), directory=tmp_path / "a")
    python, _ = create_project(
        "kp", backends=("cpu", "cuda"), directory=tmp_path / "b", schemas="python"
    )
    files = sorted(p.relative_to(default) for p in default.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(python) for p in python.rglob("*") if p.is_file())
    for relative in files:
        assert (default / relative).read_bytes() == (python / relative).read_bytes(), relative
    _no_template_left(default)
    init = _read(default, "src/kp/__init__.py")
    assert '_LIBRARY.define("scale_add(Tensor x, Tensor y, float alpha=1.0) -> Tensor")' in init
    assert "STABLE_TORCH_LIBRARY(" not in _read(default, "csrc/cpu/ops.cpp")
    assert "kp.scale_add_reference(x, y, 0.5)" in _read(default, "tests/test_ops.py")


def test_an_unknown_schemas_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=r"--schemas 'c\+\+' is not one of python, cpp"):
        create_project("kx", directory=tmp_path / "kx", schemas="c++")
    assert not (tmp_path / "kx").exists()
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "new", "kx", "--schemas", "rust"],
        cwd=tmp_path,
        env=python_env(PYTHONPATH=str(SRC)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "'rust' is not one of 'python', 'cpp'" in proc.stderr
    assert list(tmp_path.iterdir()) == []
