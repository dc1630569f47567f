"""Run a project's setup.py with recording stand-ins, in a child process of ``ptkit adopt``:
``python _record_setup.py <setup.py> <out.json>``.

``setuptools.setup`` (and ``distutils.core.setup``) and
``torch.utils.cpp_extension.{CppExtension, CUDAExtension, BuildExtension}`` are replaced
by functions that record their arguments; nothing is compiled or installed. torch is
never imported (ptkit's commands are torch-free, and a setup.py needs torch only for
these): ``torch`` is a stand-in whose ``cuda.is_available()`` is True and whose
``CUDA_HOME`` is set, so that a setup.py adding its CUDA extension only where it finds
CUDA shows it; anything else it asks of torch fails, and ptkit adopt says what. Standard
library only: this file is run by path.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import runpy
import sys
import types
from typing import Any

RECORD: dict[str, Any] = {"setup": None, "extensions": []}


def _plain(value: Any) -> Any:
    """Arguments as JSON: paths as strings, tuples as lists, anything else by repr."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, _Extension):
        return {"extension": value.index}
    if isinstance(value, type):
        return f"<class {value.__name__}>"
    return repr(value)


class _Extension:
    """What CppExtension/CUDAExtension/Extension return: the recorded call."""

    def __init__(self, kind: str, name: str, sources: Any = (), *args: Any, **kwargs: Any) -> None:
        self.index = len(RECORD["extensions"])
        self.name = name
        entry = {"kind": kind, "name": name, "sources": _plain(list(sources)), "args": _plain(args)}
        entry["kwargs"] = _plain(kwargs)
        RECORD["extensions"].append(entry)


def CppExtension(name: str, sources: Any = (), *args: Any, **kwargs: Any) -> _Extension:
    return _Extension("cpp", name, sources, *args, **kwargs)


def CUDAExtension(name: str, sources: Any = (), *args: Any, **kwargs: Any) -> _Extension:
    return _Extension("cuda", name, sources, *args, **kwargs)


def Extension(name: str, sources: Any = (), *args: Any, **kwargs: Any) -> _Extension:
    return _Extension("plain", name, sources, *args, **kwargs)


class BuildExtension:
    @classmethod
    def with_options(cls, **_options: Any) -> type[BuildExtension]:
        return cls


def setup(**kwargs: Any) -> None:
    RECORD["setup"] = _plain(kwargs)


def find_packages(where: str = ".", exclude: Any = (), include: Any = ("*",)) -> list[str]:
    """setuptools' find_packages, enough for a stand-in: folders with an __init__.py."""
    import fnmatch

    found = []
    for folder, dirs, files in os.walk(where):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if folder == where or "__init__.py" not in files:
            continue
        name = os.path.relpath(folder, where).replace(os.sep, ".")
        if any(fnmatch.fnmatch(name, p) for p in include) and not any(
            fnmatch.fnmatch(name, p) for p in exclude
        ):
            found.append(name)
    return sorted(found)


def _cpp_extension() -> types.ModuleType:
    module = types.ModuleType("torch.utils.cpp_extension")
    module.CppExtension = CppExtension  # type: ignore[attr-defined]
    module.CUDAExtension = CUDAExtension  # type: ignore[attr-defined]
    module.BuildExtension = BuildExtension  # type: ignore[attr-defined]
    module.CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")  # type: ignore[attr-defined]
    module.ROCM_HOME = None  # type: ignore[attr-defined]
    module.include_paths = lambda *a, **k: []  # type: ignore[attr-defined]
    module.library_paths = lambda *a, **k: []  # type: ignore[attr-defined]
    return module


class _MissingAttribute(AttributeError):
    pass


def _torch_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []

    def missing(attribute: str) -> Any:
        raise _MissingAttribute(
            f"setup.py asked for {name}.{attribute}, which ptkit adopt's stand-in for torch "
            "does not have"
        )

    # A module-level __getattr__ (PEP 562): what torch's stand-in lacks fails with its name.
    setattr(module, "__getattr__", missing)  # noqa: B010
    if name == "torch":
        module.__version__ = "2.14.0"  # type: ignore[attr-defined]
        cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1)
        module.cuda = cuda  # type: ignore[attr-defined]
        module.version = types.SimpleNamespace(cuda="13.0", hip=None)  # type: ignore[attr-defined]
    return module


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the stand-ins: torch, torch.utils and torch.utils.cpp_extension."""

    NAMES = ("torch", "torch.utils", "torch.utils.cpp_extension")

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname in self.NAMES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        if spec.name == "torch.utils.cpp_extension":
            return _cpp_extension()
        return _torch_module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        parent, _, child = module.__name__.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)


def _patch_setuptools() -> None:
    for name in ("setuptools", "distutils.core"):
        try:
            module = __import__(name, fromlist=["setup"])
        except Exception:
            module = types.ModuleType(name)
            sys.modules[name] = module
            module.find_packages = find_packages  # type: ignore[attr-defined]
        module.setup = setup  # type: ignore[attr-defined]
        module.Extension = Extension  # type: ignore[attr-defined]


def main() -> int:
    script, out = sys.argv[1], sys.argv[2]
    for name in _Finder.NAMES:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, _Finder())
    _patch_setuptools()
    sys.argv = [script, "build_ext"]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            RECORD["error"] = f"setup.py exited with status {exc.code}"
    except BaseException as exc:
        RECORD["error"] = f"{type(exc).__name__}: {exc}"
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(RECORD, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
