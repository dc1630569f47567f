"""Installed distributions the checks care about, from ``*.dist-info`` folder names.

``importlib.metadata`` opens every distribution's metadata (slow with hundreds of
them); a folder name already says ``<name>-<version>``. The first folder on the path
wins, as it does for imports. Names are PEP 503-normalised (``nvidia-cuda-runtime``).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Sequence

__all__ = ["WANTED", "normalize", "probe_distributions"]

# What the checks look at: torch and its accelerator stacks (PyTorch's CUDA wheels pull
# nvidia-*; AMD's placeholder `rocm` on PyPI and TheRock's rocm-sdk-*; Intel's runtime
# packages for XPU), Triton, and ptkit itself.
WANTED: tuple[str, ...] = (
    "torch",
    "ptkit",
    "rocm",
    "rocm-sdk*",
    "nvidia-*",
    "cuda-*",
    "triton",
    "pytorch-triton*",
    "intel-*",
    "onemkl-*",
    "tcmlib",
    "umf",
    "numpy",
    "packaging",
    "click",
    "nvidia-ml-py",
)

_SEPARATORS = re.compile(r"[-_.]+")


def normalize(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()


def _split(folder: str) -> tuple[str, str] | None:
    """``nvidia_cuda_runtime-13.0.96.dist-info`` -> (nvidia-cuda-runtime, 13.0.96);
    ``torch-2.1.0-py3.11.egg-info`` -> (torch, 2.1.0)."""
    for suffix in (".dist-info", ".egg-info"):
        if folder.endswith(suffix):
            stem = folder[: -len(suffix)]
            name, sep, version = stem.partition("-")
            if not sep or not name or not version:
                return None
            if suffix == ".egg-info":
                version = version.split("-py", 1)[0]
            return normalize(name), version
    return None


def probe_distributions(
    paths: Sequence[str] | None = None, wanted: Iterable[str] | None = WANTED
) -> dict[str, str]:
    """name -> version of every wanted distribution (``fnmatch`` patterns; None: all)."""
    patterns = None if wanted is None else tuple(wanted)
    found: dict[str, str] = {}
    for entry in sys.path if paths is None else paths:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip, a missing folder
            continue
        for folder in sorted(names):
            parsed = _split(folder)
            if parsed is None:
                continue
            name, version = parsed
            if name in found:
                continue  # shadowed by an earlier path entry, as imports are
            if patterns is None or any(fnmatch.fnmatchcase(name, p) for p in patterns):
                found[name] = version
    return dict(sorted(found.items()))
