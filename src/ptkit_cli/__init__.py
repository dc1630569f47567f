"""The ``ptkit`` command's entry point: the command line without importing torch.

``import ptkit`` imports torch and registers the ops: that is the package's contract.
Most commands (``select``, ``index``, ``build``, ``matrix``, ``doctor``) must not pay
for it (about 1.5 s) and must work where torch is missing or broken. So the console
script enters here: ``ptkit`` is put into ``sys.modules`` with its ``__init__`` not run
yet, its subpackages import as usual, and the commands that need the ops call
``import_ptkit()``, which runs it. ``python -m ptkit_cli …`` does the same.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["import_ptkit", "main"]

# Set on the ptkit module object while its __init__ has not run.
_DEFERRED = "_ptkit_init_deferred"


def _defer_ptkit_init() -> None:
    if "ptkit" in sys.modules:
        return
    spec = importlib.util.find_spec("ptkit")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise SystemExit(
            "ptkit: the ptkit package is not importable from this Python "
            f"({sys.executable}); reinstall it: pip install --force-reinstall ptkit"
        )
    module = importlib.util.module_from_spec(spec)
    setattr(module, _DEFERRED, True)
    sys.modules["ptkit"] = module


def import_ptkit() -> ModuleType:
    """The ``ptkit`` package with its ``__init__`` run: ops registered, libraries loaded."""
    module = sys.modules.get("ptkit")
    if module is None:
        return importlib.import_module("ptkit")
    if getattr(module, _DEFERRED, False):
        delattr(module, _DEFERRED)
        spec = module.__spec__
        assert spec is not None
        assert spec.loader is not None
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules["ptkit"]  # a later import retries instead of seeing half a package
            raise
    return module


def main() -> None:
    _defer_ptkit_init()
    from ptkit.cli import main as cli_main

    cli_main()
