"""What ``ptkit adopt`` read from a project, in one shape whatever it was read from: the
package, its libraries (one per backend) and the recipe targets, plus what could not be
translated (each with its fix). The readers (``setup_py``, ``kernel_builder``) fill it in;
the writer (``writer``) turns it into files. Standard library only."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

from ptkit.scaffold import ScaffoldError

__all__ = [
    "AdoptError",
    "Adoption",
    "Edit",
    "Library",
    "Untranslated",
    "find_namespaces",
    "import_name",
]


class AdoptError(ScaffoldError):
    """The project cannot be adopted; the message names ``ptkit adopt``, what was expected,
    what was found and the fix. (A ScaffoldError, so that the CLI's boundary prints it as
    one line with exit status 1, like ``ptkit new``'s.)"""


@dataclasses.dataclass(frozen=True)
class Untranslated:
    """One thing of the input that the written files do not carry, and what to do."""

    what: str
    fix: str


@dataclasses.dataclass
class Library:
    """One ``ptkit_add_kernel_library`` call."""

    name: str
    backend: str  # cpu | cuda
    sources: list[str]  # relative to the project root, posix
    include_dirs: list[str] = dataclasses.field(default_factory=list)
    defines: list[str] = dataclasses.field(default_factory=list)
    compile_options: list[str] = dataclasses.field(default_factory=list)
    link_libraries: list[str] = dataclasses.field(default_factory=list)
    namespace: str = ""


@dataclasses.dataclass(frozen=True)
class Edit:
    """A file of the project changed in place (glue, never a kernel source)."""

    path: str
    text: str
    why: str


@dataclasses.dataclass
class Adoption:
    """A project as ptkit will build it."""

    source: str  # "setup.py" | "build.toml": what it was read from
    distribution: str
    package: str  # the import name
    package_dir: str  # the package's folder, relative to the root (src/pkg, torch-ext/pkg)
    version: str
    libraries: list[Library]
    abi: str  # stable | torch
    cuda_targets: list[str]
    requires: list[str]
    untranslated: list[Untranslated] = dataclasses.field(default_factory=list)
    edits: list[Edit] = dataclasses.field(default_factory=list)
    # Files the writer adds beside the standard ones (kernel-builder's _ops.py).
    extra_files: dict[str, str] = dataclasses.field(default_factory=dict)
    # kernel-builder: each library holds the binding, so a variant builds one of them
    # (cu13 the CUDA one); setup.py: every variant has the CPU library, cu13 adds CUDA.
    one_backend_per_variant: bool = False

    def backends(self) -> list[str]:
        return sorted({lib.backend for lib in self.libraries})


_NAME = re.compile(r"[^A-Za-z0-9]+")
# The op namespace of a TORCH_LIBRARY-style registration block, in either ABI.
_REGISTRATION = re.compile(
    r"\b(?:STABLE_)?TORCH_LIBRARY(?:_FRAGMENT|_IMPL|_EXPAND|_IMPL_EXPAND)?\s*\(\s*(\w+)\s*,"
)
_DEFINING = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY(?:_EXPAND)?\s*\(\s*(\w+)\s*,")
_PYBIND = re.compile(r"\bPYBIND11_MODULE\s*\(|\bPyInit_\w+|\bPyModule_Create\b")


def import_name(text: str) -> str:
    """``my-kernels`` -> ``my_kernels``: a distribution name as a Python identifier."""
    name = _NAME.sub("_", text).strip("_").lower()
    return name if name and not name[0].isdigit() else f"ext_{name}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def find_namespaces(root: Path, sources: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(namespaces registered, namespaces defined, sources with a Python module init) in
    ``sources``: what ``TORCH_LIBRARY*(<ns>, …)`` names, and the files whose
    ``PYBIND11_MODULE``/``PyInit_`` needs Python."""
    registered: list[str] = []
    defined: list[str] = []
    python: list[str] = []
    for source in sources:
        text = _read(root / source)
        for match in _REGISTRATION.finditer(text):
            if match.group(1) not in registered:
                registered.append(match.group(1))
        for match in _DEFINING.finditer(text):
            if match.group(1) not in defined:
                defined.append(match.group(1))
        if _PYBIND.search(text):
            python.append(source)
    return registered, defined, python
