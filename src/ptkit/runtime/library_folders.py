"""Telling the OS where a kernel library's imports are, just before it is loaded.

Which folders is the platform's rule (``Platform.library_search_folders``, written once
in ``ptkit.platforms``): on Windows torch's ``lib`` folder and the library's own, since
Windows does not search the folder of an already-loaded DLL for a DLL's imports and
Python 3.8+ no longer searches ``PATH``; elsewhere none. This module applies it with
``os.add_dll_directory``: each folder once per process, its handle kept for the life of
the process (closing it removes the folder again, and a DLL's delay-loaded imports are
resolved after the load). The loader (``ptkit.runtime.loader``) and the install-time
child (``ptkit.runtime.registrations``) call it before ``torch.ops.load_library``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import torch

from ptkit.platforms import Platform, current_platform

__all__ = ["add_library_folders", "torch_package_dir"]

# os.path.normcase(folder) -> the handle os.add_dll_directory returned, kept open.
_handles: dict[str, object] = {}
_lock = threading.Lock()


def torch_package_dir() -> Path:
    """The running torch's package folder (the one holding ``lib/``)."""
    # As torch's own DLL setup does: anchored on torch._C, not torch/__init__.py (an
    # editable install runs __init__ from a source tree whose lib/ is empty).
    origin = getattr(torch._C, "__file__", None) or torch.__file__
    return Path(str(origin)).parent


def add_library_folders(
    library: Path,
    platform: Platform | None = None,
    torch_dir: Path | None = None,
    announce: Callable[[str], None] | None = None,
) -> tuple[Path, ...]:
    """Add the folders ``platform`` (default: this machine's) says ``library``'s imports
    need to the DLL search path, and return those added now (a folder added for an
    earlier library is not added twice); ``announce`` gets a line for each. A folder
    that does not exist, or that the OS refuses, is left out: the load that follows then
    names the DLL it could not find."""
    platform = platform or current_platform()
    if platform is None:
        return ()
    folders = platform.library_search_folders(library, torch_dir or torch_package_dir())
    if not folders:
        return ()
    # Looked up at each call: it exists on Windows only (a test names its stand-in).
    add: Callable[[str], object] | None = getattr(os, "add_dll_directory", None)
    if add is None:
        return ()
    added: list[Path] = []
    with _lock:
        for folder in folders:
            key = os.path.normcase(str(folder))
            if key in _handles or not folder.is_dir():
                continue
            try:
                _handles[key] = add(str(folder))
            except OSError:
                continue
            added.append(folder)
    if announce is not None:  # after the lock: announcing is the caller's I/O
        for folder in added:
            announce(f"ptkit: added {folder} to the DLL search path")
    return tuple(added)
