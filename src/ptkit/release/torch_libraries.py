"""The libraries a wheel takes from the user's torch: never copied into it, always allowed.

A ptkit library links torch (``libtorch_cpu.so``, ``libc10.so``) and, for a GPU backend,
the runtime torch itself loads (``libcudart.so.13``); they come with the torch the user
installed, never from a second copy in the wheel. The table is each backend's
``runtime_libraries`` (:mod:`ptkit.backends`); every variant carries a CPU library, so a
backend's libraries are the CPU's row plus its own. The local repair (``ptkit build``),
cibuildwheel's repair commands (``ptkit matrix``) and the wheel audit (DT_NEEDED) read
them here, so the three cannot disagree.

A library in the ``torch`` ABI mode (the classic C++ API, :mod:`ptkit.torch_abi`) is
built for one torch and entitled to any of its C++ libraries (``libtorch*.so``,
``libc10*.so``); libtorch_python, which those patterns also match, is refused before
they are asked (the Python ties of :mod:`ptkit.release.linkage`, per binary format).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from ptkit.backends import BACKENDS, get_backend
from ptkit.torch_abi import DEFAULT_ABI

__all__ = ["all_torch_libraries", "is_torch_library", "torch_libraries"]


# Every C++ library of a torch build, per OS: what a torch-mode library may link.
_CLASSIC_API_LIBRARIES: dict[str, tuple[str, ...]] = {
    "linux": ("libtorch*.so", "libc10*.so"),
    "macos": ("libtorch*.dylib", "libc10*.dylib"),
    "windows": ("torch*.dll", "c10*.dll"),
}


def torch_libraries(backend: str, os_name: str, abi: str = DEFAULT_ABI) -> tuple[str, ...]:
    """The library patterns (``libcudart.so.*``) a ``backend`` variant's libraries take from
    torch on ``os_name`` (``linux``, ``macos``, ``windows``): the CPU's and the backend's,
    and for an ``abi`` ``torch`` library every one of torch's C++ libraries."""
    cpu = BACKENDS["cpu"].runtime_libraries.get(os_name, ())
    own = get_backend(backend).runtime_libraries.get(os_name, ())
    classic = _CLASSIC_API_LIBRARIES.get(os_name, ()) if abi == "torch" else ()
    return tuple(dict.fromkeys((*cpu, *own, *classic)))


def all_torch_libraries(os_name: str) -> tuple[str, ...]:
    """Every backend's, for a library whose backend is unknown (it has no manifest)."""
    return tuple(dict.fromkeys(p for name in BACKENDS for p in torch_libraries(name, os_name)))


def is_torch_library(file_name: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``file_name`` (a DT_NEEDED entry, a DLL import) matches one of ``patterns``."""
    return any(fnmatchcase(file_name, pattern) for pattern in patterns)
