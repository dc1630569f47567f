"""torch as its installed files describe it, without importing it.

``import torch`` costs over a second and may crash (a broken install, a fake ``torch``
folder on PYTHONPATH, a missing CUDA library). The doctor reads instead: where the
package is (``importlib`` finds it without executing it), ``torch/version.py`` parsed as
text, the ``*.dist-info`` metadata beside it, the C++ ABI evidence in its files, and the
CUDA runtimes on disk.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import re
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from ptkit.doctor.model import TorchInstall

__all__ = ["cuda_runtimes", "cxx11_abi", "probe_torch", "read_version_file"]

_REINSTALL = "reinstall torch: pip install --force-reinstall torch (from the index of your variant)"


def read_version_file(path: Path) -> dict[str, object]:
    """The module-level constants ``torch/version.py`` assigns (``__version__``, ``cuda``,
    ``hip``, ``xpu`` …); raises OSError, or SyntaxError/ValueError for a file that is
    not Python."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        value = node.value
        if not isinstance(value, ast.Constant):
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = value.value
    return values


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _locate(paths: Sequence[str] | None) -> tuple[Path | None, list[str]]:
    """The folder ``import torch`` would execute, found without executing it."""
    problems: list[str] = []
    try:
        if paths is None:
            # Does not import: find_spec of a top-level name only consults the finders
            # (or sys.modules, when torch is already imported).
            spec = importlib.util.find_spec("torch")
        else:
            spec = importlib.machinery.PathFinder.find_spec("torch", list(paths))
    except (ImportError, ValueError) as exc:
        return None, [f"torch cannot be located: {type(exc).__name__}: {exc}; {_REINSTALL}"]
    if spec is None:
        return None, problems
    locations = list(spec.submodule_search_locations or [])
    if spec.origin is None or spec.origin == "namespace":
        where = locations[0] if locations else "?"
        problems.append(
            f"torch at {where} is a folder without __init__.py (a namespace package): a "
            f"broken or partial install; {_REINSTALL}"
        )
        return (Path(where) if locations else None), problems
    origin = Path(spec.origin)
    if origin.name != "__init__.py":
        problems.append(
            f"torch resolves to the module {origin}, not a package: something named torch "
            "shadows it; rename or remove that file"
        )
    return origin.parent, problems


def _shadowed(location: Path, paths: Sequence[str]) -> list[Path]:
    """Other torch packages on the path that the found one hides."""
    found: list[Path] = []
    for entry in paths:
        candidate = Path(entry or ".") / "torch"
        try:
            if (candidate / "__init__.py").is_file() and candidate.resolve() != location.resolve():
                found.append(candidate)
        except OSError:
            continue
    return found


def _metadata(location: Path) -> tuple[str | None, Path | None]:
    """torch's version from the ``torch-*.dist-info`` (or egg-info) beside the package."""
    parent = location.parent
    try:
        candidates = sorted(parent.glob("torch-*.dist-info")) + sorted(
            parent.glob("torch-*.egg-info")
        )
    except OSError:
        return None, None
    for folder in candidates:
        for name in ("METADATA", "PKG-INFO"):
            try:
                with (folder / name).open(encoding="utf-8", errors="replace") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.partition(":")[2].strip(), folder
                        if not line.strip():  # the headers end at the first blank line
                            break
            except OSError:
                continue
    return None, None


_CMAKE_ABI = re.compile(r"_GLIBCXX_USE_CXX11_ABI=([01])")
# torch >= 2.7 hard-codes the answer: `def compiled_with_cxx11_abi() -> builtins.bool:
# r"""Returns whether PyTorch was built with _GLIBCXX_USE_CXX11_ABI=1""" return True`.
_INIT_ABI = re.compile(
    r"def compiled_with_cxx11_abi\(\)[^:]*:\s*(?:[rbu]?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?''')\s*)?"
    r"return (True|False)\b"
)


def cxx11_abi(location: Path) -> bool | None:
    """``_GLIBCXX_USE_CXX11_ABI`` of the build, from the files that record it: the
    ``TORCH_CXX_FLAGS`` of ``TorchConfig.cmake`` (torch < 2.7), else the literal that
    ``torch.compiled_with_cxx11_abi()`` returns in ``torch/__init__.py`` (torch >= 2.7);
    None when neither says (older torch returns ``_C._GLIBCXX_USE_CXX11_ABI``)."""
    for relative, pattern in (
        ("share/cmake/Torch/TorchConfig.cmake", _CMAKE_ABI),
        ("__init__.py", _INIT_ABI),
    ):
        try:
            text = (location / relative).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        match = pattern.search(text)
        if match:
            return match.group(1) in ("1", "True")
    return None


def cuda_runtimes(
    location: Path | None, paths: Sequence[str], environ: Mapping[str, str]
) -> tuple[str, ...]:
    """Every CUDA runtime library a process could load: torch's own folder, the
    ``nvidia/*/lib`` folders of pip's CUDA packages, and LD_LIBRARY_PATH."""
    folders: list[Path] = []
    if location is not None:
        folders.append(location / "lib")
    for entry in paths:
        nvidia = Path(entry or ".") / "nvidia"
        try:
            if nvidia.is_dir():
                folders += sorted(p / "lib" for p in nvidia.iterdir()) + sorted(
                    p / "bin" for p in nvidia.iterdir()
                )
        except OSError:
            continue
    folders += [Path(d) for d in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    found: list[str] = []
    for folder in folders:
        try:
            if not folder.is_dir():
                continue
            hits = sorted(folder.glob("libcudart.so*")) + sorted(folder.glob("cudart64_*.dll"))
        except OSError:
            continue
        for hit in hits:
            if str(hit) not in found:
                found.append(str(hit))
    return tuple(found)


def _compile_verdict(
    version: str | None, paths: Sequence[str], location: Path
) -> tuple[bool | None, str | None, bool | None, str | None]:
    """torch.compile's verdict (torch's own checks, read from the files at ``location``)
    and Inductor's CPU prerequisites, each with its reason."""
    if version is None:
        return None, "not evaluated: torch's version is unknown", None, None
    from ptkit.degradation.compile_rules import compile_support

    triton = any((Path(p or ".") / "triton" / "__init__.py").is_file() for p in paths)
    try:
        # Every fact is given or read from files, so compile_support imports no torch.
        support = compile_support(
            python=(sys.version_info[0], sys.version_info[1], sys.version_info[2]),
            gil_disabled=sysconfig.get_config_var("Py_GIL_DISABLED") == 1,
            torch_version=version,
            platform=sys.platform,
            triton_available=triton,
            device_types=("cpu",),
            torch_root=location,
        )
    except ValueError as exc:  # a version that is not PEP 440
        return None, str(exc), None, None
    return support.supported, support.reason, support.cpu_codegen, support.cpu_reason


def probe_torch(
    *, paths: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> TorchInstall:
    """torch from its files. ``paths``: where to look (default ``sys.path``, through the
    import system's own finders)."""
    env = os.environ if environ is None else environ
    search = list(sys.path if paths is None else paths)
    location, problems = _locate(paths)
    if location is None:
        return TorchInstall(
            location=None,
            version=None,
            cuda=None,
            hip=None,
            xpu=False,
            cxx11_abi=None,
            compile_supported=None,
            compile_reason=None,
            cuda_runtimes=cuda_runtimes(None, search, env),
            problems=tuple(problems),
        )
    values: dict[str, object] = {}
    version_py = location / "version.py"
    try:
        values = read_version_file(version_py)
    except FileNotFoundError:
        problems.append(
            f"torch/version.py is missing at {location}: a broken or fake torch "
            f"(import torch would fail or not be PyTorch); {_REINSTALL}"
        )
    except (OSError, SyntaxError, ValueError) as exc:
        problems.append(
            f"torch/version.py at {location} is unreadable ({type(exc).__name__}: {exc}); "
            f"{_REINSTALL}"
        )
    file_version = _str_or_none(values.get("__version__"))
    if version_py.is_file() and file_version is None and not problems:
        problems.append(f"torch/version.py at {location} sets no __version__; {_REINSTALL}")
    meta_version, dist_info = _metadata(location)
    if dist_info is None:
        problems.append(
            f"no torch-*.dist-info beside {location}: pip does not know this torch (a copied "
            f"folder or a stray torch on PYTHONPATH?); {_REINSTALL}"
        )
    elif file_version and meta_version and file_version.split("+")[0] != meta_version.split("+")[0]:
        # PyPI's CUDA wheels say 2.14.1 in METADATA and 2.14.1+cu130 in version.py: only
        # the public versions must agree.
        problems.append(
            f"torch/version.py says {file_version} but {dist_info.name} says {meta_version}: "
            f"two installs overwrote each other; {_REINSTALL}"
        )
    if problems:
        others = _shadowed(location, search)
        if others:
            problems.append(
                f"another torch at {others[0]} is hidden by the one at {location}: remove "
                f"{location.parent} from PYTHONPATH (or sys.path) if that one is meant"
            )
    version = file_version or meta_version
    supported, reason, cpu_codegen, cpu_reason = _compile_verdict(version, search, location)
    return TorchInstall(
        location=str(location),
        version=version,
        cuda=_str_or_none(values.get("cuda")),
        hip=_str_or_none(values.get("hip")),
        xpu=bool(values.get("xpu")),
        cxx11_abi=cxx11_abi(location),
        compile_supported=supported,
        compile_reason=reason,
        cuda_runtimes=cuda_runtimes(location, search, env),
        problems=tuple(problems),
        compile_cpu_codegen=cpu_codegen,
        compile_cpu_reason=cpu_reason,
    )
