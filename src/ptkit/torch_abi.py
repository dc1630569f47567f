"""The two ways a kernel library binds to torch, and the facts of a torch build it binds to.

``stable`` (the default)
    LibTorch's stable ABI: ``torch/csrc/stable/`` and ``torch/headeronly/`` headers only
    (``TORCH_STABLE_ONLY``), the C shim in libtorch_cpu. One library loads into every
    torch >= its target version (same major): one ``py3-none-<platform>`` wheel per
    (platform, variant).
``torch``
    The classic C++ API without Python: ``torch/all.h``, ``torch/library.h`` and
    ``TORCH_LIBRARY``, ATen, c10's CUDA stream; linked to libtorch_cpu and libc10 (and the
    backend's libtorch_cuda, libc10_cuda …), never to libpython or libtorch_python. The
    library loads only into the torch minor it was built with (and the same C++ ABI), so
    a release has one wheel per torch minor; the tag stays ``py3-none-<platform>``.

Who asks: CMake (``python -m ptkit.torch_abi``: where torch is and what it was built
with, the sources' includes, the compile-time guard headers), the loader's rule
(:mod:`ptkit.loading.rules`), the audit (:mod:`ptkit.release.elf_audit`) and the build
stage (its failure's cause). Standard library only: any build Python runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.machinery
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "ABI_MODES",
    "DEFAULT_ABI",
    "PORTING_GUIDE",
    "TorchInstall",
    "check_abi",
    "classic_api_refused",
    "include_problems",
    "locate_torch",
]

ABI_MODES = ("stable", "torch")
DEFAULT_ABI = "stable"
PORTING_GUIDE = "ptkit's docs/porting.md"

# An #include line and the header it names.
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# Headers of the stable ABI: everything else under these roots is the classic C++ API.
_STABLE_HEADERS = ("torch/csrc/stable/", "torch/headeronly/", "torch/csrc/inductor/aoti_torch/")
_CLASSIC_ROOTS = ("torch/", "ATen/", "c10/", "caffe2/")
# Headers that bring in Python itself, refused in both modes.
_PYTHON_HEADERS = re.compile(r"^(Python\.h|pybind11/.*|torch/extension\.h|torch/python\.h)$")
# The fix for each Python header, named once.
_EXTENSION_H = (
    "includes Python.h (pybind11, libtorch_python), and a ptkit library "
    "has no Python: torch.ops.load_library loads it into any Python. Fix: include "
    "<torch/all.h> and <torch/library.h> instead and register the ops with TORCH_LIBRARY "
    f"(ABI torch, {PORTING_GUIDE})"
)
_PYTHON_API = (
    "is Python's C API, and a ptkit library has no Python (torch.ops.load_library loads it "
    "into any Python, so the wheel stays py3-none). Fix: register the ops with TORCH_LIBRARY "
    f"(ABI torch) or STABLE_TORCH_LIBRARY, with no Python module ({PORTING_GUIDE})"
)
# The compile-time guards: where a source's include cannot be seen by the configure-time
# scan (a header includes it), the compiler stops with the same message.
_GUARDED = {
    "stable": ("torch/all.h", "torch/torch.h", "torch/extension.h", "torch/library.h"),
    "torch": ("torch/extension.h", "torch/python.h"),
}
_STABLE_ONLY_ERROR = "should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION"


def check_abi(value: str, where: str) -> str:
    """``value`` when it is an ABI mode; ``ValueError`` naming ``where`` and the modes."""
    if value in ABI_MODES:
        return value
    close = difflib.get_close_matches(value, ABI_MODES, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(
        f"{where} {value!r} is not one of {', '.join(ABI_MODES)}{hint}: stable (the "
        "LibTorch stable ABI, one wheel for every torch >= its target) or torch (the classic "
        f"C++ API, one wheel per torch minor; {PORTING_GUIDE})"
    )


_CLASSIC_FIX = (
    "Fix: build it in the torch mode (ABI torch: the classic C++ API, one wheel per torch "
    f"minor), or port it to torch/csrc/stable/ ({PORTING_GUIDE})"
)


def classic_api_refused(headers: str) -> str:
    """Why a stable-ABI library cannot include ``headers`` (classic C++ API ones), and the fix."""
    return (
        f"{headers}: torch's classic C++ API (ATen, c10, torch/all.h, torch/library.h), which a "
        f"stable-ABI library cannot use (TORCH_STABLE_ONLY). {_CLASSIC_FIX}"
    )


def _header_problem(header: str, abi: str) -> tuple[str, str] | None:
    """(kind, reason) of a header a library of ``abi`` cannot include, or None."""
    if header in ("torch/extension.h", "torch/python.h"):
        return "extension", f"<{header}> {_EXTENSION_H}"
    if _PYTHON_HEADERS.match(header):
        return "python", f"<{header}> {_PYTHON_API}"
    classic = header.startswith(_CLASSIC_ROOTS) and not header.startswith(_STABLE_HEADERS)
    if abi == "stable" and classic:
        return "classic", classic_api_refused(f"<{header}>")
    return None


def include_problems(sources: Iterable[Path], abi: str) -> list[str]:
    """What the sources include that a library of ``abi`` cannot: ``muladd.cpp:9 includes
    <ATen/cpu/vec/vec.h>, :10 <torch/all.h>: torch's classic C++ API …``, one line per
    source and kind (classic API; Python)."""
    problems = []
    for source in sources:
        try:
            text = source.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # a generated source: the compiler reads it, and the guards stand
        found: dict[str, list[tuple[int, str, str]]] = {}
        for match in _INCLUDE.finditer(text):
            header = match.group(1)
            problem = _header_problem(header, abi)
            if problem:
                line = text.count("\n", 0, match.start()) + 1
                found.setdefault(problem[0], []).append((line, header, problem[1]))
        for kind, hits in found.items():
            first_line = hits[0][0]
            listed = ", ".join(
                f"<{header}>" + (f" (line {line})" if line != first_line else "")
                for line, header, _ in hits
            )
            if kind == "classic":
                problems.append(
                    f"{source.name}:{first_line} includes {classic_api_refused(listed)}"
                )
            else:
                problems.append(f"{source.name}:{first_line}: {hits[0][2]}")
    return problems


def guard_header(header: str, abi: str) -> str:
    """The compile-time guard that stands in for ``header`` in an ``abi`` library."""
    problem = _header_problem(header, abi)
    reason = problem[1] if problem else classic_api_refused(f"<{header}>")
    text = reason.replace("\\", "\\\\").replace('"', '\\"')
    return (
        f"// Written by ptkit for an ABI {abi} library: <{header}> cannot be used there.\n"
        f'#error "ptkit: {text}"\n'
    )


def write_guards(folder: Path, abi: str) -> list[Path]:
    """The guard headers of ``abi`` under ``folder`` (an include folder searched before
    torch's), each replacing one header a library of that mode cannot include."""
    written = []
    for header in _GUARDED[abi]:
        path = folder / header
        path.parent.mkdir(parents=True, exist_ok=True)
        text = guard_header(header, abi)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def compile_error_cause(output: str) -> str | None:
    """A failed build's cause in ptkit's words, from the compiler's output: a guard's
    ``#error "ptkit: …"``, or torch's own TORCH_STABLE_ONLY ``#error`` (a classic header
    reached through another one)."""
    guard = re.search(r'#error\s+"?ptkit: (.*?)"?\s*$', output, re.M)
    if guard:
        return guard.group(1)
    stable = re.search(
        # GCC: `…/Tensor.h:99:2: error: #error "This file …"`; Clang drops the "#error".
        rf"^\s*(\S+?):\d+:\d+: error: (?:#error )?.*{re.escape(_STABLE_ONLY_ERROR)}",
        output,
        re.M,
    )
    if stable:
        header = re.sub(r"^.*?/include/", "", stable.group(1))
        return classic_api_refused(f"<{header}>")
    return None


# --- the torch a build compiles against, read from its files --------------------------


@dataclasses.dataclass(frozen=True)
class TorchInstall:
    root: Path
    version: str
    cuda: str
    hip: str
    cxx11_abi: bool | None
    """``_GLIBCXX_USE_CXX11_ABI`` of the build (libstdc++ only; None elsewhere)."""
    cxx_standard: str
    """The C++ standard torch's own CMake config asks of its users (``20``)."""


def _version_field(text: str, name: str) -> str:
    match = re.search(rf"^{name}\b[^=]*= *'?([^'\n]*)'?", text, re.M)
    return match.group(1) if match and match.group(1) != "None" else ""


def _own_search_path() -> list[str]:
    """This interpreter's ``sys.path`` without what ``PYTHONPATH`` added, except its own
    site folders: CMake runs ptkit with ``PYTHONPATH`` at ptkit's install, whose torch is
    not the build Python's when the two differ."""
    added = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    own = {
        os.path.abspath(p)
        for p in (
            *site.getsitepackages(),
            sysconfig.get_path("purelib"),
            sysconfig.get_path("platlib"),
        )
    }
    return [p for p in sys.path if os.path.abspath(p or ".") not in added - own]


TARGET_TORCH_FIX = (
    "point PTKIT_TARGET_TORCH at the torch folder of the target platform's wheel, unpacked: "
    "pip download --no-deps --only-binary=:all: --platform <tag> torch==<version> -d wheels; "
    "python -m zipfile -e wheels/torch-*.whl target-torch (then PTKIT_TARGET_TORCH="
    "target-torch/torch)"
)


def locate_torch(target: Path | None = None) -> TorchInstall:
    """The torch a build compiles against, read from its files without importing it:
    ``target``, a torch package folder of another platform (a cross build's:
    ``PTKIT_TARGET_TORCH``), else the one this Python would import; ``LookupError`` with
    the fix when there is none."""
    if target is not None:
        root = target
        if not (root / "version.py").is_file() or not (root / "include").is_dir():
            raise LookupError(
                f"PTKIT_TARGET_TORCH={root} is not a torch package folder (expected "
                f"version.py and include/ in it): {TARGET_TORCH_FIX}"
            )
    else:
        spec = importlib.machinery.PathFinder.find_spec("torch", _own_search_path())
        if spec is None or not spec.submodule_search_locations:
            raise LookupError("torch is not installed in this Python: pip install 'torch>=2.10'")
        root = Path(next(iter(spec.submodule_search_locations)))
    # The doctor's reading of the C++ ABI from torch's files, the one there is.
    from ptkit.doctor.probes.torch_install import cxx11_abi

    text = (root / "version.py").read_text(encoding="utf-8")
    config = root / "share" / "cmake" / "Torch" / "TorchConfig.cmake"
    standard = re.search(r"CXX_STANDARD\s+(\d+)", config.read_text()) if config.is_file() else None
    return TorchInstall(
        root=root,
        version=_version_field(text, "__version__"),
        cuda=_version_field(text, "cuda"),
        hip=_version_field(text, "hip"),
        cxx11_abi=cxx11_abi(root),
        cxx_standard=standard.group(1) if standard else "17",
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m ptkit.torch_abi``, for CMake (one ``KEY=value`` a line):

    ``locate [--target FOLDER]``: ``ROOT``, ``VERSION``, ``CUDA``, ``HIP``, ``CXX11_ABI`` (1, 0 or empty),
    ``CXX_STANDARD``. ``check ABI`` (exit 1 with the message for a bad mode).
    ``includes ABI SOURCE…``: ``PROBLEMS=…`` (a CMake list). ``guards ABI FOLDER``:
    writes the guard headers."""
    parser = argparse.ArgumentParser(prog="python -m ptkit.torch_abi")
    commands = parser.add_subparsers(dest="command", required=True)
    locate = commands.add_parser("locate")
    locate.add_argument("--target", type=Path, default=None)
    check = commands.add_parser("check")
    check.add_argument("abi")
    check.add_argument("--where", default="ABI")
    includes = commands.add_parser("includes")
    includes.add_argument("abi", choices=ABI_MODES)
    includes.add_argument("sources", nargs="*")
    guards = commands.add_parser("guards")
    guards.add_argument("abi", choices=ABI_MODES)
    guards.add_argument("folder")
    args = parser.parse_args(argv)
    try:
        if args.command == "locate":
            torch = locate_torch(args.target)
            cxx11 = "" if torch.cxx11_abi is None else str(int(torch.cxx11_abi))
            print(f"ROOT={torch.root.as_posix()}\nVERSION={torch.version}\nCUDA={torch.cuda}")
            print(f"HIP={torch.hip}\nCXX11_ABI={cxx11}\nCXX_STANDARD={torch.cxx_standard}")
        elif args.command == "check":
            check_abi(args.abi, args.where)
        elif args.command == "includes":
            found = include_problems((Path(s) for s in args.sources), args.abi)
            print("PROBLEMS=" + ";".join(p.replace(";", ",") for p in found))
        else:
            write_guards(Path(args.folder), args.abi)
    except (LookupError, ValueError, OSError) as exc:
        print(f"ptkit: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
