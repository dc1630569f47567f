"""ptkit: build, ship and load PyTorch extension kernels for every accelerator.

``import ptkit`` defines the ``torch.ops.ptkit`` ops with their reference
implementations, then loads the native libraries whose manifests match this
machine. It never fails because of a native library: ``ptkit.runtime.explain()``
says what runs where and why.
"""

from __future__ import annotations

from pathlib import Path

from ptkit import ops, runtime
from ptkit._version import BASE_VERSION

__all__ = ["__version__", "ops", "runtime"]


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptkit")
    except PackageNotFoundError:  # running from a source tree
        return BASE_VERSION


__version__ = _installed_version()

runtime._load_own_libraries(Path(__file__).resolve().parent / "_native")
