"""ptkit: build, ship and load PyTorch extension kernels for every accelerator.

This package is the toolkit: the recipes, the build and release pipeline, the CMake
package, the package index, ``ptkit select``, ``ptkit doctor`` and the loader that
other packages' ``__init__`` calls (``ptkit.runtime.load_package``). Importing it, or
any module outside ``ptkit.runtime``, never imports torch (``docs/architecture.md``).

Graceful degradation, as an API (these import torch when used): ``ptkit.compile``
(``torch.compile`` where it works, the model eagerly with one warning where not),
``ptkit.graphs.capture`` (CUDA / XPU graphs or eager),
``ptkit.distributed.init_process_group`` (the best backend that initialises) and
``ptkit.runtime.profile()`` for the whole picture.

ptkit's own ops (``rms_norm``, ``fused_linear``, ``silu_and_mul``) are the
``ptkit-ops`` distribution: ``import ptkit_ops``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ptkit._version import __version__

if TYPE_CHECKING:
    from ptkit import runtime
    from ptkit.runtime import distributed, graphs
    from ptkit.runtime.compiling import compile, compile_state

__all__ = ["__version__", "compile", "compile_state", "distributed", "graphs", "runtime"]

# Public name -> the module that defines it (imported on first use: they import torch).
_LAZY = {
    "compile": ("ptkit.runtime.compiling", "compile"),
    "compile_state": ("ptkit.runtime.compiling", "compile_state"),
    "distributed": ("ptkit.runtime.distributed", None),
    "graphs": ("ptkit.runtime.graphs", None),
    "runtime": ("ptkit.runtime", None),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'ptkit' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
