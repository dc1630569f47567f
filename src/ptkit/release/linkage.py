"""What a native library links, needs and offers, whatever its binary format, and the
rules on it that every format shares.

Each binary format has a reader that fills one :class:`Linkage` (ELF:
:mod:`ptkit.release.elf_audit`, Mach-O: :mod:`ptkit.release.macho_audit`, PE:
:mod:`ptkit.release.pe_audit`): the libraries it links (DT_NEEDED, LC_LOAD_DYLIB, the
import table), its run-time search path, the symbols it needs from others and the ones it
offers, with names as C and the Itanium ABI write them (a Mach-O reader drops the leading
underscore its symbols carry; PE keeps MSVC's ``?name@scope@@…`` decorations). The rules
here read that data only, so a Python tie or a torch C++ symbol in a stable-ABI library is
the same problem, with the same words, on every platform:

* no libpython, Python framework or ``python3XX.dll`` linked, no torch_python, no
  symbol of Python's C API needed, no ``PyInit_*`` exported: one wheel serves every CPython;
* a library on the LibTorch stable ABI needs nothing of torch's C++ API (``c10::``,
  ``at::``, ``torch::``, ``caffe2::``) outside the header-only ``torch::stable``;
* every linked library is torch's, or one the platform always has (the format's module
  says which).

What only one format has (symbol versions against a manylinux tag, the minimum macOS,
the machine type) stays in that format's module. Standard library only.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ptkit.torch_abi import DEFAULT_ABI, PORTING_GUIDE

__all__ = [
    "ELF",
    "MACH_O",
    "NO_PYTHON_FIX",
    "PE",
    "PYTHON_SYMBOL",
    "BinaryFormat",
    "Linkage",
    "demangle",
    "first_few",
    "torch_cxx_namespace",
]


@dataclasses.dataclass(frozen=True)
class BinaryFormat:
    """What a binary format calls its links, and which of them tie a library to Python."""

    name: str
    """``ELF``, ``Mach-O``, ``PE``: :attr:`ptkit.platforms.base.Platform.binary_format`."""
    link_entry: str
    """What a link is called in the file (``DT_NEEDED``), for the messages."""
    libpython: re.Pattern[str]
    """A link to Python itself (searched in the whole entry)."""
    torch_python: re.Pattern[str]
    """A link to torch's Python bindings."""
    libpython_note: str = ""
    """What else goes wrong with a libpython link in this format (its repair tool)."""
    limited_api: str = ""
    """The link of Python's limited API in this format (lower case), which every CPython of
    one build kind has, not one version: its tie is said differently."""


ELF = BinaryFormat(
    "ELF",
    "DT_NEEDED",
    re.compile(r"^libpython\d"),
    re.compile(r"^libtorch_python\.so"),
    ", and auditwheel's repair drops the entry, which hides it",
)
# Mach-O links are paths: @rpath/libpython3.11.dylib, a Python.framework's Python.
MACH_O = BinaryFormat(
    "Mach-O",
    "LC_LOAD_DYLIB",
    re.compile(r"(?:^|/)(?:libpython\d[^/]*\.dylib|Python\.framework/(?:.*/)?Python)$"),
    re.compile(r"(?:^|/)libtorch_python\.dylib$"),
)
# DLL names are case-insensitive: python3.dll (the limited API), python311.dll,
# python313t.dll (free-threaded), python311_d.dll (debug).
PE = BinaryFormat(
    "PE",
    "import",
    re.compile(r"^python3\d*t?(?:_d)?\.dll$", re.IGNORECASE),
    re.compile(r"^torch_python\.dll$", re.IGNORECASE),
    limited_api="python3.dll",
)

# Itanium-mangled names in torch's C++ namespaces (c10::, at::, torch::, caffe2::).
_TORCH_CXX = re.compile(r"^_ZN(?:K|St)?(3c10|2at|5torch|6caffe2)")
_TORCH_STABLE = re.compile(r"^_ZN(?:K)?5torch6stable")
_TORCH_NAMESPACES = frozenset({"c10", "at", "torch", "caffe2"})
# Python's C API (PyModule_Create2, _Py_Dealloc, PyExc_RuntimeError), torch's Python
# bindings (THPVariable_Wrap) and pybind11's: symbols only a Python process resolves.
PYTHON_SYMBOL = re.compile(r"^(?:_?Py(?:_|[A-Z])|THP|_ZN\w*?8pybind11)")
_PYTHON_INIT = re.compile(r"^PyInit_")
# How many symbols a summary names.
_FIRST = 3
# The way out of every Python tie, said once.
NO_PYTHON_FIX = (
    "a kernel library links no Python (no Python.h, pybind11 module or torch/extension.h): "
    "register the ops with TORCH_LIBRARY (ABI torch: torch/all.h + torch/library.h) or "
    f"STABLE_TORCH_LIBRARY ({PORTING_GUIDE})"
)


def _msvc_scopes(symbol: str) -> list[str]:
    """The scopes of an MSVC-decorated name, outermost first (``?call@detail@stable@torch@@
    YAXXZ`` is ``torch::stable::detail::call``: [torch, stable, detail]). The qualified name
    ends at the first ``@@``; its first part is the name itself (``?call``, ``??0Tensor``)."""
    return symbol.split("@@", 1)[0].split("@")[1:][::-1]


def torch_cxx_namespace(symbol: str) -> tuple[str, bool] | None:
    """The torch namespace (``c10``, ``at``, ``torch``, ``caffe2``) of a C++ symbol, Itanium-
    mangled (``_ZN3c10…``) or MSVC-decorated (``?…@c10@@…``), and whether it is in
    ``torch::stable``; None for any other symbol (C names, std::, the library's own)."""
    match = _TORCH_CXX.match(symbol)
    if match:
        return re.sub(r"^\d+", "", match.group(1)), bool(_TORCH_STABLE.match(symbol))
    if symbol.startswith("?"):
        scopes = _msvc_scopes(symbol)
        if scopes and scopes[0] in _TORCH_NAMESPACES:
            return scopes[0], scopes[:2] == ["torch", "stable"]
    return None


def demangle(symbols: Sequence[str]) -> list[str]:
    """``symbols`` as C++ names (binutils' c++filt, which knows Itanium's mangling and
    leaves MSVC's as they are), or as they are where it is missing."""
    tool = shutil.which("c++filt")
    if tool is None or not symbols:
        return list(symbols)
    try:
        proc = subprocess.run(
            [tool],
            input="\n".join(symbols),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return list(symbols)
    names = proc.stdout.splitlines()
    return names if proc.returncode == 0 and len(names) == len(symbols) else list(symbols)


def first_few(symbols: Sequence[str]) -> str:
    """The first few of ``symbols``, demangled and shortened, and how many more."""
    shown = [name if len(name) <= 100 else name[:97] + "..." for name in demangle(symbols[:_FIRST])]
    more = f" and {len(symbols) - _FIRST} more" if len(symbols) > _FIRST else ""
    return ", ".join(shown) + more


@dataclasses.dataclass(frozen=True)
class Linkage:
    """One native library as its reader saw it, and the rules every format shares."""

    path: Path
    needed: tuple[str, ...]
    """The libraries it links, as the file names them."""
    undefined: tuple[str, ...]
    """The symbols it needs from other libraries (C and Itanium spelling)."""
    rpath: tuple[str, ...]
    """Its run-time search path entries (DT_RPATH/DT_RUNPATH, LC_RPATH; none in PE)."""
    exported: tuple[str, ...] = ()
    """The symbols it defines for the process."""
    abi: str = DEFAULT_ABI
    """The library's torch ABI mode (its manifest's ``torch.abi``): what it may need."""
    binary_format: BinaryFormat = ELF

    @property
    def python_problems(self) -> list[str]:
        """What ties the library to Python: libpython or torch_python linked, Python's C
        API needed, a Python module init exported. The build stage checks these on the
        unrepaired wheel (a repair may drop libpython's link), the audit again."""
        name = self.path.name
        fmt = self.binary_format
        python = [sym for sym in self.undefined if PYTHON_SYMBOL.match(sym)]
        needing = (
            f" for {len(python)} symbol{'s' if len(python) > 1 else ''} of Python's C API or "
            f"torch's Python bindings ({first_few(python)})"
            if python
            else ""
        )
        found = []
        for lib in self.needed:
            if fmt.libpython.search(lib):
                tie = (
                    "only where a CPython that provides it has loaded it (not the free-threaded "
                    "build, whose limited-API DLL is python3t.dll)"
                    if fmt.limited_api and lib.lower() == fmt.limited_api
                    else "on one Python only"
                )
                found.append(
                    f"{name} links {lib} ({fmt.link_entry}){needing}: the wheel would run "
                    f"{tie}{fmt.libpython_note}. Fix: {NO_PYTHON_FIX}"
                )
                needing = ""  # said once
            elif fmt.torch_python.search(lib):
                found.append(
                    f"{name} links {lib} ({fmt.link_entry}), torch's Python bindings: the wheel "
                    f"would be tied to one Python and one torch build. Fix: {NO_PYTHON_FIX}"
                )
        if needing:
            found.append(
                f"{name} needs{needing.removeprefix(' for')}: only a Python process that has "
                f"them resolves them, so the library is tied to one Python. Fix: {NO_PYTHON_FIX}"
            )
        inits = [sym for sym in self.exported if _PYTHON_INIT.match(sym)]
        if inits:
            found.append(
                f"{name} exports {', '.join(inits)}: it is a Python extension module "
                "(PYBIND11_MODULE, setup.py's CppExtension), which torch.ops.load_library "
                f"does not import. Fix: drop the module init; {NO_PYTHON_FIX}"
            )
        return found

    @property
    def torch_problems(self) -> list[str]:
        """Torch C++ symbols a stable-ABI library needs, as one summary (a ``torch``-mode
        library is entitled to them)."""
        if self.abi != "stable":
            return []
        counts: dict[str, int] = {}
        outside = []
        for sym in self.undefined:
            found = torch_cxx_namespace(sym)
            if found is not None and not found[1]:
                outside.append(sym)
                counts[found[0]] = counts.get(found[0], 0) + 1
        if not outside:
            return []
        by_namespace = ", ".join(
            f"{n} {ns}::" for ns, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return [
            f"{self.path.name} needs {len(outside)} torch C++ symbol"
            f"{'s' if len(outside) > 1 else ''} outside the stable ABI ({by_namespace}; "
            f"first: {first_few(outside)}): it uses torch's classic C++ API. Fix: build it in "
            "the torch mode (ptkit_add_kernel_library(… ABI torch): one wheel per torch "
            f"minor), or port it to the stable ABI (torch/csrc/stable/; {PORTING_GUIDE})"
        ]

    @property
    def problems(self) -> list[str]:
        """The Python ties, then torch C++ symbols a stable-ABI library may not need."""
        return [*self.python_problems, *self.torch_problems]

    def is_python_link(self, lib: str) -> bool:
        """Whether ``lib`` is a link :attr:`python_problems` reports."""
        fmt = self.binary_format
        return bool(fmt.libpython.search(lib) or fmt.torch_python.search(lib))

    def link_problems(
        self,
        allowed: Callable[[str], bool],
        *,
        backend: str,
        torch_patterns: tuple[str, ...],
        runtime: str,
    ) -> list[str]:
        """The links that are neither Python's (:attr:`python_problems` says those) nor
        ``allowed``: torch's for ``backend`` (``torch_patterns``) or ``runtime``, what every
        system the wheel's tag names has."""
        return [
            f"{self.path.name} links {lib}, which is neither what torch provides to {backend} "
            f"code ({', '.join(torch_patterns)}) nor {runtime}: users would not have it; link "
            "it statically or drop the dependency"
            for lib in self.needed
            if not self.is_python_link(lib) and not allowed(lib)
        ]
