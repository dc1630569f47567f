"""ptkit: build, ship and load PyTorch extension kernels for every accelerator.

``import ptkit`` defines the ``torch.ops.ptkit`` ops with their reference
implementations, then loads the native libraries whose manifests match this
machine. It never fails because of a native library: ``ptkit.runtime.explain()``
says what runs where and why.

Graceful degradation, as an API: ``ptkit.compile`` (``torch.compile`` where it works,
the model eagerly with one warning where not), ``ptkit.graphs.capture`` (CUDA / XPU
graphs or eager), ``ptkit.distributed.init_process_group`` (the best backend that
initialises), and ``ptkit.runtime.profile()`` for the whole picture.
"""

from __future__ import annotations

from pathlib import Path

from ptkit import distributed, graphs, ops, runtime
from ptkit._version import BASE_VERSION
from ptkit.compiling import compile, compile_state
from ptkit.runtime.session import load_own_libraries

__all__ = ["__version__", "compile", "compile_state", "distributed", "graphs", "ops", "runtime"]


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptkit")
    except PackageNotFoundError:  # running from a source tree
        return BASE_VERSION


__version__ = _installed_version()

load_own_libraries(Path(__file__).resolve().parent / "_native", version=__version__)
