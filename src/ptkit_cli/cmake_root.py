"""The ``cmake.root`` entry point: the ``ptkit`` package folder for scikit-build-core.

scikit-build-core loads every installed ``cmake.root`` entry point in every build and
sets ``<name>_ROOT`` to ``importlib.resources.files(<loaded object>)``; CMake's config
search then finds ``<ptkit_ROOT>/cmake/ptkit-config.cmake``. Loading ``ptkit`` itself
would run its ``__init__`` (torch, the native libraries: seconds, and a broken torch
would break unrelated builds), so the entry point names ``package``: a module object for
the ``ptkit`` package whose ``__init__`` has not run, with the same ``__spec__`` and
``__path__``, which is all ``files()`` and other readers of the group
(``ep.load().__path__[0]``) use. It is not put into ``sys.modules``.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

__all__ = ["package"]


def _unexecuted_ptkit() -> ModuleType:
    spec = importlib.util.find_spec("ptkit")
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError("the ptkit package is not importable from this Python")
    return importlib.util.module_from_spec(spec)


package = _unexecuted_ptkit()
