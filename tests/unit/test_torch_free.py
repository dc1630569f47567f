"""The toolkit cannot import torch: every module outside ``ptkit.runtime`` imports in a
process where torch is unimportable (ruff's TID251 refuses the import statement; this
proves the modules it leaves, and their dependencies, stay torch-free)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# A child process: torch raises ImportError there whatever is installed.
_CHILD = r"""
import importlib, importlib.abc, json, pkgutil, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch is unimportable in this test ({name})")
        return None

sys.meta_path.insert(0, NoTorch())
import ptkit

failed, imported = {}, []
for module in pkgutil.walk_packages(ptkit.__path__, "ptkit."):
    name = module.name
    if name.startswith("ptkit.runtime.") or name.endswith(".__main__"):
        continue
    try:
        importlib.import_module(name)
        imported.append(name)
    except Exception as exc:
        failed[name] = repr(exc)
print(json.dumps({"failed": failed, "imported": imported, "torch": "torch" in sys.modules}))
"""


def test_every_module_outside_the_runtime_imports_without_torch() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(proc.stdout)
    assert result["failed"] == {}
    assert result["torch"] is False
    # Not vacuous: the packages the doctor, select, index and build use were imported.
    for name in (
        "ptkit.backends.cuda",
        "ptkit.platforms.linux",
        "ptkit.loading.rules",
        "ptkit.recipes.model",
        "ptkit.hardware.detect",
        "ptkit.doctor.collect",
        "ptkit.index.builder",
        "ptkit.release.pipeline",
        "ptkit.cli",
    ):
        assert name in result["imported"], name
    assert len(result["imported"]) > 50


def test_importing_ptkit_and_its_runtime_package_imports_no_torch() -> None:
    code = "import sys, ptkit, ptkit.runtime; print('torch' in sys.modules)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert proc.stdout.strip() == "False"
