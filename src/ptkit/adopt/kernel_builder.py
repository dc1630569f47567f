"""``ptkit adopt`` of a Hugging Face kernel-builder project: ``build.toml`` and
``torch-ext/``.

``[general] name`` names the package (``torch-ext/<name>/``) and the op namespace;
``[torch] src`` (the binding: ``torch_binding.cpp`` with its ``TORCH_LIBRARY_EXPAND``
schemas) goes into every library; each ``[kernel.<k>]`` goes into the library of its
``backend`` (cuda, cpu), with its ``include`` folders and ``cuda-capabilities`` (the cu13
recipe's targets). As kernel-builder builds one extension per backend, each library holds
the binding and that backend's kernels, compiled with ``TORCH_EXTENSION_NAME=<name>`` and
the backend's macro (``CUDA_KERNEL``, ``CPU_KERNEL``) that the binding's ``#if`` blocks
test; a variant builds one of them (cu13: the CUDA one, cpu: the CPU one), so that one
library defines the namespace.

kernel-builder's glue makes a Python module (``registration.h``'s ``REGISTER_EXTENSION``
defines ``PyInit_<name>`` with Python.h) and generates ``_ops.py`` at build time; ptkit
adopt edits the first to define no Python module (the kernels are untouched) and writes
the second, which loads the libraries with ptkit's loader.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from ptkit.adopt.model import (
    AdoptError,
    Adoption,
    Edit,
    Library,
    Untranslated,
    find_namespaces,
    import_name,
)

__all__ = ["capability_targets", "read_build_toml"]

_BACKENDS = {"cuda": "CUDA_KERNEL", "cpu": "CPU_KERNEL"}
_KERNEL_KEYS = {"backend", "src", "depends", "include", "cuda-capabilities", "language"}
_GENERAL_KEYS = {"name", "universal", "backends", "version"}
_TORCH_KEYS = {"src", "include"}
_DEPENDS_KNOWN = {"torch"}
_CAPABILITY = re.compile(r"^(\d+)\.(\d+)(a|f)?(\+PTX)?$")
_PYTHON_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]Python\.h[>"].*$', re.M)


def _fail(expected: str, found: str, fix: str) -> AdoptError:
    return AdoptError(f"ptkit adopt: expected {expected}, found {found}; {fix}")


def capability_targets(capabilities: list[str]) -> list[str]:
    """kernel-builder's ``cuda-capabilities`` (``"8.0"``, ``"9.0a"``, ``"9.0+PTX"``) ->
    ptkit targets: SASS for each, and PTX for the newest (or each ``+PTX`` one)."""
    sass: list[str] = []
    ptx: list[str] = []
    for capability in capabilities:
        match = _CAPABILITY.match(str(capability).strip())
        if match is None:
            raise _fail(
                'cuda-capabilities like "8.0", "9.0a" or "9.0+PTX"',
                repr(capability),
                "fix build.toml",
            )
        number = f"{match.group(1)}{match.group(2)}{match.group(3) or ''}"
        if f"sm_{number}" not in sass:
            sass.append(f"sm_{number}")
        if match.group(4):
            ptx.append(f"compute_{number}")
    if sass and not ptx:
        newest = max(sass, key=lambda t: int(re.sub(r"\D", "", t)))
        if not newest[-1].isalpha():  # arch-specific (9.0a) SASS has no portable PTX
            ptx.append(newest.replace("sm_", "compute_"))
    return sass + ptx


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _fail(f"{where} as a list of strings", repr(value)[:200], "fix build.toml")


def _checked(root: Path, files: list[str], where: str) -> list[str]:
    for name in files:
        if not (root / name).is_file():
            raise _fail(
                f"the files of {where} in the project",
                f"{name}, which does not exist",
                "fix the src list in build.toml",
            )
    return [Path(name).as_posix() for name in files]


def _registration_edit(root: Path, sources: list[str]) -> tuple[list[Edit], list[Untranslated]]:
    """kernel-builder's registration.h (beside the binding) made Python-free: its
    ``#include <Python.h>`` commented out, ``REGISTER_EXTENSION`` defined to nothing."""
    edits: list[Edit] = []
    notes: list[Untranslated] = []
    seen: set[Path] = set()
    for source in sources:
        header = (root / source).parent / "registration.h"
        if header in seen or not header.is_file():
            continue
        seen.add(header)
        text = header.read_text(encoding="utf-8")
        if "PyInit" not in text and not _PYTHON_INCLUDE.search(text):
            continue
        # One logical line per #define (backslash continuations joined) to replace it whole.
        pattern = re.compile(
            r"^[ \t]*#[ \t]*define[ \t]+REGISTER_EXTENSION\b(?:[^\n]*\\\n)*[^\n]*$", re.M
        )
        edited = pattern.sub(
            "// ptkit adopt: no Python module (ptkit's loader loads this library with\n"
            "// torch.ops.load_library); kernel-builder's definition made PyInit_<NAME>.\n"
            "#define REGISTER_EXTENSION(NAME)",
            text,
        )
        edited = _PYTHON_INCLUDE.sub(
            lambda m: f"// ptkit adopt: a ptkit library has no Python: {m.group(0).strip()}",
            edited,
        )
        relative = header.relative_to(root).as_posix()
        if re.search(r"\bPy[A-Z_]\w*", re.sub(r"//[^\n]*", "", edited)):
            notes.append(
                Untranslated(
                    f"{relative}: Python's C API besides REGISTER_EXTENSION",
                    "remove it: a ptkit library links no Python (docs/porting.md)",
                )
            )
        edits.append(
            Edit(
                relative,
                edited,
                "kernel-builder's glue: REGISTER_EXTENSION defined no Python module, "
                "<Python.h> commented out",
            )
        )
    return edits, notes


def _ops_module(namespace: str) -> str:
    return (
        '"""Written by `ptkit adopt` in place of the _ops.py kernel-builder generates: the\n'
        "package's native libraries, loaded with ptkit's loader (which checks each one's\n"
        'manifest and says why one is skipped: `ptkit explain`), and their op namespace."""\n'
        "\n"
        "import torch\n"
        "\n"
        "import ptkit.runtime\n"
        "\n"
        "LOAD = ptkit.runtime.load_package(__package__)\n"
        f"ops = torch.ops.{namespace}\n"
        "\n"
        "\n"
        "def add_op_namespace_prefix(op_name: str) -> str:\n"
        f'    return f"{namespace}::{{op_name}}"\n'
    )


def read_build_toml(root: Path) -> Adoption:
    """The kernel-builder project at ``root`` (which has a build.toml) as ptkit will build it."""
    try:
        config = tomllib.loads((root / "build.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise _fail("build.toml in TOML", f"a syntax error ({exc})", "fix build.toml") from exc
    untranslated: list[Untranslated] = []
    general = config.get("general") or {}
    name = general.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(
            'build.toml with [general] name = "<kernel name>"',
            "no name",
            "add it (it names torch-ext/<name>/ and the op namespace)",
        )
    if general.get("universal"):
        raise _fail(
            "a kernel with C++/CUDA sources",
            "[general] universal = true (a pure-Python kernel)",
            "nothing to build: ship torch-ext/ as a plain Python package",
        )
    package = import_name(name)
    package_dir = f"torch-ext/{package}"
    if not (root / package_dir / "__init__.py").is_file():
        raise _fail(
            f"the package {package_dir}/__init__.py (kernel-builder's layout)",
            "no such file",
            f"put the Python package of kernel {name!r} there",
        )
    for key in sorted(set(general) - _GENERAL_KEYS):
        untranslated.append(
            Untranslated(
                f"build.toml: [general] {key}",
                "not used by ptkit: drop it or carry it over by hand",
            )
        )
    for section in sorted(set(config) - {"general", "torch", "kernel"}):
        untranslated.append(
            Untranslated(
                f"build.toml: [{section}]",
                "not translated: carry it over by hand (CMakeLists.txt, the recipes)",
            )
        )
    torch_section = config.get("torch") or {}
    binding = _checked(root, _strings(torch_section.get("src", []), "[torch] src"), "[torch] src")
    binding_includes = _strings(torch_section.get("include", []), "[torch] include")
    for key in sorted(set(torch_section) - _TORCH_KEYS):
        untranslated.append(
            Untranslated(f"build.toml: [torch] {key}", "not translated: carry it over by hand")
        )
    kernels = config.get("kernel") or {}
    if not kernels:
        raise _fail(
            "build.toml with at least one [kernel.<name>] section",
            "none",
            'add one: [kernel.<name>] backend = "cuda", src = [...]',
        )
    by_backend: dict[str, Library] = {}
    targets: list[str] = []
    for kernel_name, kernel in sorted(kernels.items()):
        backend = kernel.get("backend", "cuda")
        if backend not in _BACKENDS:
            untranslated.append(
                Untranslated(
                    f"build.toml: [kernel.{kernel_name}] backend = {backend!r}",
                    f"not built: ptkit adopt writes {', '.join(_BACKENDS)} libraries; add a "
                    f"ptkit_add_kernel_library(... BACKEND ...) and a recipe by hand",
                )
            )
            continue
        sources = _checked(
            root,
            _strings(kernel.get("src", []), f"[kernel.{kernel_name}] src"),
            f"[kernel.{kernel_name}]",
        )
        library = by_backend.setdefault(
            backend,
            Library(
                name=f"{package}_{backend}",
                backend=backend,
                sources=list(binding),
                include_dirs=[Path(d).as_posix() for d in binding_includes],
                defines=[f"TORCH_EXTENSION_NAME={package}", _BACKENDS[backend]],
                namespace=package,
            ),
        )
        library.sources += [s for s in sources if s not in library.sources]
        for folder in _strings(kernel.get("include", []), f"[kernel.{kernel_name}] include"):
            folder = Path(folder).as_posix()
            if folder not in library.include_dirs:
                library.include_dirs.append(folder)
        for dependency in _strings(kernel.get("depends", []), f"[kernel.{kernel_name}] depends"):
            if dependency not in _DEPENDS_KNOWN:
                untranslated.append(
                    Untranslated(
                        f"build.toml: [kernel.{kernel_name}] depends = {dependency!r}",
                        "give its headers and libraries to the library in CMakeLists.txt "
                        "(INCLUDE_DIRS, LINK_LIBRARIES, or find_package/FetchContent)",
                    )
                )
        if backend == "cuda":
            capabilities = _strings(
                kernel.get("cuda-capabilities", []), f"[kernel.{kernel_name}] cuda-capabilities"
            )
            targets += [t for t in capability_targets(capabilities) if t not in targets]
        for key in sorted(set(kernel) - _KERNEL_KEYS):
            untranslated.append(
                Untranslated(
                    f"build.toml: [kernel.{kernel_name}] {key}",
                    "not translated: carry it over by hand in CMakeLists.txt",
                )
            )
    if not by_backend:
        raise _fail(
            "a [kernel.<name>] with backend cuda or cpu",
            "none ptkit adopt can build",
            "add one, or write CMakeLists.txt by hand (docs/cmake.md)",
        )
    registered, _, python = find_namespaces(root, binding)
    foreign = [ns for ns in registered if ns not in ("TORCH_EXTENSION_NAME", package)]
    if foreign:
        untranslated.append(
            Untranslated(
                f"{', '.join(binding)}: registrations in namespace {', '.join(foreign)}",
                f"ptkit adopt builds namespace {package} (TORCH_EXTENSION_NAME): register "
                "there, or build a library of its own for the other",
            )
        )
    edits, notes = _registration_edit(root, binding)
    untranslated += notes
    for source in python:
        untranslated.append(
            Untranslated(
                f"{source}: a Python module (PYBIND11_MODULE or PyInit_), which needs Python",
                "register the ops with TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) "
                "(docs/porting.md)",
            )
        )
    ops_path = f"{package_dir}/_ops.py"
    init_text = (root / package_dir / "__init__.py").read_text(encoding="utf-8")
    if "_ops" not in init_text:
        untranslated.append(
            Untranslated(
                f"{package_dir}/__init__.py does not import _ops",
                "import it first (from ._ops import ops): it loads the native libraries",
            )
        )
    version = str(general.get("version", "0.1.0"))
    return Adoption(
        source="build.toml",
        distribution=name,
        package=package,
        package_dir=package_dir,
        version=version,
        libraries=[by_backend[b] for b in sorted(by_backend)],
        abi="stable",
        cuda_targets=targets,
        requires=[],
        untranslated=untranslated,
        edits=edits,
        extra_files={ops_path: _ops_module(package)},
        one_backend_per_variant=True,
    )
