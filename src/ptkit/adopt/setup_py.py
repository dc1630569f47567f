"""``ptkit adopt`` of a setup.py project: ``torch.utils.cpp_extension``'s ``CppExtension``
and ``CUDAExtension`` (and setuptools' ``Extension``) read by running setup.py in a
child Python with recording stand-ins (``_record_setup.py``), so that source lists built
with ``glob`` or ``os.path.join`` come out as setup.py computes them; nothing is built.

Each extension becomes one library: a CppExtension (or Extension) ``BACKEND cpu``, a
CUDAExtension ``BACKEND cuda`` (built in the cu13 variant). Its ``include_dirs``,
``define_macros``, ``undef_macros``, ``libraries`` and ``extra_compile_args`` (a list, or
the ``cxx``/``nvcc`` dict) carry over; nvcc's ``-gencode``/``-arch``/``--generate-code``
become the cu13 recipe's targets, and ``-std=``, ``extra_link_args``, ``library_dirs``,
``py_limited_api`` and the rest are listed as not translated, each with its fix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ptkit.adopt.model import (
    AdoptError,
    Adoption,
    Library,
    Untranslated,
    find_namespaces,
    import_name,
)

__all__ = ["cuda_targets_of", "read_setup_py"]

_TIMEOUT_S = 120
_RECORDER = Path(__file__).resolve().parent / "_record_setup.py"
# -gencode arch=compute_90,code=sm_90 / code=[sm_90,compute_90] / -arch=sm_80 …
_CODE = re.compile(r"\b(sm_\d+[a-z]?|compute_\d+[a-z]?)\b")
_ARCH_FLAGS = ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code")
# Extension keywords ptkit takes over, the ones it cannot, and the fix for each.
_KNOWN = {
    "include_dirs",
    "define_macros",
    "undef_macros",
    "extra_compile_args",
    "libraries",
    "language",
    "depends",
    "dlink",
}
_FIXES = {
    "extra_link_args": "add them to the library in CMakeLists.txt: target_link_options(<library> "
    "PRIVATE …) after ptkit_add_kernel_library",
    "library_dirs": "give LINK_LIBRARIES the libraries' full paths, or CMake imported targets",
    "runtime_library_dirs": "ptkit's repair sets the wheel's RPATHs; vendor the library or "
    "depend on the wheel that ships it",
    "py_limited_api": "nothing to do: a ptkit library links no Python, and its wheel is "
    "py3-none-<platform> for every CPython",
    "extra_objects": "list the objects in LINK_LIBRARIES in CMakeLists.txt",
    "export_symbols": "a ptkit library exports its TORCH_LIBRARY registrations only: drop it",
    "swig_opts": "SWIG makes a Python module, which a ptkit library cannot be: register the "
    "ops with TORCH_LIBRARY",
}
_SETUP_KEYS_USED = {
    "name",
    "version",
    "ext_modules",
    "cmdclass",
    "packages",
    "package_dir",
    "install_requires",
    "python_requires",
    "zip_safe",
    "description",
}


def _fail(expected: str, found: str, fix: str) -> AdoptError:
    return AdoptError(f"ptkit adopt: expected {expected}, found {found}; {fix}")


def _record(root: Path) -> dict[str, Any]:
    """setup.py's calls, recorded by a child Python (``_record_setup.py``)."""
    with tempfile.TemporaryDirectory(prefix="ptkit-adopt-") as scratch:
        out = Path(scratch) / "record.json"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
        try:
            proc = subprocess.run(
                [sys.executable, str(_RECORDER), str(root / "setup.py"), str(out)],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise _fail(
                "a setup.py that returns once setup() is called",
                f"one still running after {_TIMEOUT_S} s",
                "make it call setup() without building or waiting (ptkit adopt runs it with "
                "stand-ins that record the calls)",
            ) from exc
        if not out.is_file():
            raise _fail(
                "a setup.py that runs to setup()",
                f"the recording Python exited with status {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-400:]}",
                "run `python setup.py --version` to see the error",
            )
        record: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if "error" in record:
        raise _fail(
            "a setup.py that runs to setup() with ptkit adopt's stand-ins for setuptools and "
            "torch.utils.cpp_extension (torch itself is not imported)",
            f"it raised {record['error']}",
            "make that part of setup.py run without torch (or guard it), then run ptkit adopt "
            "again",
        )
    if record.get("setup") is None:
        raise _fail(
            "a setup.py that calls setuptools.setup(...)",
            "one that never called it",
            "call setup(name=…, version=…, ext_modules=[CppExtension(…)]) at the top level",
        )
    return record


def _relative(root: Path, path: str, what: str, untranslated: list[Untranslated]) -> str | None:
    """``path`` (absolute, or relative to the root) relative to the root, or None with a
    note when it is outside the project."""
    full = (root / path).resolve() if not os.path.isabs(path) else Path(path).resolve()
    try:
        return full.relative_to(root.resolve()).as_posix()
    except ValueError:
        untranslated.append(
            Untranslated(
                f"{what} {path} (outside the project)",
                "add it in CMakeLists.txt (INCLUDE_DIRS, or find_package of what provides it)",
            )
        )
        return None


def _codes(value: str) -> list[str]:
    """The targets of one architecture flag's value: ``arch=compute_90,code=[sm_90,compute_90]``
    names its ``code`` part; ``-arch=sm_90`` alone is nvcc's shorthand for SASS sm_90 and PTX
    compute_90."""
    if "code=" in value:
        return _CODE.findall(value.split("code=", 1)[1])
    codes = _CODE.findall(value)
    if len(codes) == 1 and codes[0].startswith("sm_"):
        return [codes[0], codes[0].replace("sm_", "compute_")]
    return codes


def cuda_targets_of(flags: list[str]) -> tuple[list[str], list[str]]:
    """nvcc flags -> (the recipe targets they name: sm_90, compute_90 …, the other flags)."""
    targets: list[str] = []
    rest: list[str] = []
    take_next = False
    for flag in flags:
        if take_next:
            take_next = False
            targets += _codes(flag)
            continue
        head, eq, value = flag.partition("=")
        if head in _ARCH_FLAGS:
            if eq:
                targets += _codes(value)
            else:
                take_next = True
            continue
        rest.append(flag)
    seen: list[str] = []
    for target in sorted(targets, key=lambda t: (t.startswith("compute_"), t)):
        if target not in seen:
            seen.append(target)
    return seen, rest


def _split_flags(
    flags: list[str], language: str | None, library: Library, untranslated: list[Untranslated]
) -> None:
    """Compiler flags onto the library: -D defines, -I include folders, -std= refused (ptkit
    compiles with torch's standard), the rest COMPILE_OPTIONS for ``language`` (None: all)."""
    for flag in flags:
        if flag.startswith("-D") and len(flag) > 2:
            if flag[2:] not in library.defines:
                library.defines.append(flag[2:])
        elif flag.startswith("-I") and len(flag) > 2:
            library.include_dirs.append(flag[2:])
        elif flag.startswith(("-std=", "--std=")):
            untranslated.append(
                Untranslated(
                    f"{library.name}: {flag}",
                    "nothing to do: ptkit compiles with the C++ standard torch's own CMake "
                    "config asks for (C++20 for torch 2.13 and 2.14)",
                )
            )
        elif language is None:
            library.compile_options.append(flag)
        else:
            library.compile_options.append(f"$<$<COMPILE_LANGUAGE:{language}>:{flag}>")


def _flag_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _fail(f"{where} as a list of strings", repr(value)[:200], "fix that argument of setup.py")


def _library(
    root: Path,
    extension: dict[str, Any],
    targets: list[str],
    untranslated: list[Untranslated],
) -> Library:
    name = str(extension["name"])
    backend = "cuda" if extension["kind"] == "cuda" else "cpu"
    kwargs: dict[str, Any] = extension.get("kwargs") or {}
    sources = []
    for source in extension["sources"] or []:
        relative = _relative(root, str(source), f"{name}: source", untranslated)
        if relative is not None:
            if not (root / relative).is_file():
                raise _fail(
                    f"the sources of extension {name} in the project",
                    f"{source}, which does not exist",
                    "fix the source list in setup.py",
                )
            sources.append(relative)
    if not sources:
        raise _fail(f"extension {name} with sources", "none", "list its .cpp/.cu files in setup.py")
    if backend == "cpu" and any(s.endswith(".cu") for s in sources):
        raise _fail(
            f"CppExtension {name} with C++ sources",
            f"CUDA sources ({', '.join(s for s in sources if s.endswith('.cu'))})",
            "make it a CUDAExtension in setup.py",
        )
    library = Library(name=name, backend=backend, sources=sources)
    for folder in kwargs.get("include_dirs") or []:
        relative = _relative(root, str(folder), f"{name}: include_dirs", untranslated)
        if relative is not None:
            library.include_dirs.append(relative)
    for macro in kwargs.get("define_macros") or []:
        if isinstance(macro, list) and len(macro) == 2:
            library.defines.append(macro[0] if macro[1] is None else f"{macro[0]}={macro[1]}")
        else:
            library.defines.append(str(macro))
    for macro in kwargs.get("undef_macros") or []:
        library.compile_options.append(f"-U{macro}")
    library.link_libraries += [str(lib) for lib in kwargs.get("libraries") or []]
    compile_args = kwargs.get("extra_compile_args") or []
    if isinstance(compile_args, dict):
        for key, value in compile_args.items():
            flags = _flag_list(value, f"{name}: extra_compile_args[{key!r}]")
            if key == "nvcc":
                found, flags = cuda_targets_of(flags)
                targets += [t for t in found if t not in targets]
                if backend == "cuda":
                    _split_flags(flags, "CUDA", library, untranslated)
                elif flags:
                    untranslated.append(
                        Untranslated(
                            f"{name}: nvcc flags of a CppExtension ({' '.join(flags)})",
                            "nothing to do: a CppExtension has no CUDA source",
                        )
                    )
            elif key in ("cxx", "cc", "gcc", "clang"):
                _split_flags(flags, "CXX" if backend == "cuda" else None, library, untranslated)
            else:
                untranslated.append(
                    Untranslated(
                        f"{name}: extra_compile_args[{key!r}]",
                        "add the flags in CMakeLists.txt (COMPILE_OPTIONS)",
                    )
                )
    else:
        flags = _flag_list(compile_args, f"{name}: extra_compile_args")
        if backend == "cuda":
            found, flags = cuda_targets_of(flags)
            targets += [t for t in found if t not in targets]
        _split_flags(flags, None, library, untranslated)
    for key, value in sorted(kwargs.items()):
        if key in _KNOWN or not value:
            continue
        fix = _FIXES.get(key, "carry it over by hand in CMakeLists.txt (docs/cmake.md)")
        untranslated.append(Untranslated(f"{name}: {key}={value!r}", fix))
    if extension.get("args"):
        untranslated.append(
            Untranslated(
                f"{name}: positional arguments after the sources ({extension['args']!r})",
                "name them as keyword arguments in setup.py, then run ptkit adopt again",
            )
        )
    return library


def _package_of(setup: dict[str, Any], extensions: list[dict[str, Any]]) -> tuple[str, str]:
    """(import package, its folder relative to the root): the extensions' parent package,
    else setup's first package, else the distribution's name."""
    parents = [str(e["name"]).rpartition(".")[0] for e in extensions]
    packages = [str(p) for p in setup.get("packages") or []]
    top = next((p.split(".")[0] for p in parents if p), None)
    if top is None:
        top = packages[0].split(".")[0] if packages else import_name(str(setup.get("name", "")))
    folders: dict[str, str] = setup.get("package_dir") or {}
    if top in folders:
        folder = folders[top]
    elif "" in folders:
        folder = f"{folders['']}/{top}".lstrip("/")
    else:
        folder = top
    return top, Path(folder).as_posix()


def _requirements(setup: dict[str, Any]) -> list[str]:
    requires = setup.get("install_requires") or []
    if isinstance(requires, str):
        requires = requires.splitlines()
    names = []
    for item in requires:
        text = str(item).strip()
        if text and re.split(r"[<>=!~ ;\[]", text, maxsplit=1)[0].lower() not in ("torch", "ptkit"):
            names.append(text)
    return names


def read_setup_py(root: Path) -> Adoption:
    """The project at ``root`` (which has a setup.py) as ptkit will build it."""
    record = _record(root)
    setup: dict[str, Any] = record["setup"]
    extensions: list[dict[str, Any]] = record["extensions"]
    chosen = [
        extensions[e["extension"]]
        for e in setup.get("ext_modules") or []
        if isinstance(e, dict) and "extension" in e
    ]
    if not chosen:
        raise _fail(
            "setup(ext_modules=[...]) with a CppExtension or CUDAExtension "
            "(torch.utils.cpp_extension)",
            "no extension" if not setup.get("ext_modules") else f"{setup['ext_modules']!r}"[:200],
            "ptkit adopt translates torch C++/CUDA extensions; for a pure-Python project "
            "there is nothing to build",
        )
    untranslated: list[Untranslated] = []
    targets: list[str] = []
    libraries = [_library(root, extension, targets, untranslated) for extension in chosen]
    name = str(setup.get("name") or "")
    if not name:
        raise _fail("setup(name=...)", "no name", "give setup() the distribution's name")
    version = str(setup.get("version") or "")
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        untranslated.append(
            Untranslated(
                f"version {version!r}" if version else "no version",
                "0.1.0 written as base-version: set [tool.scikit-build.metadata.version] "
                "base-version (ptkit adds +<variant>)",
            )
        )
        version = "0.1.0"
    package, package_dir = _package_of(setup, chosen)
    _namespaces(root, libraries, package, untranslated)
    for key, value in sorted(setup.items()):
        if key in _SETUP_KEYS_USED or not value:
            continue
        untranslated.append(
            Untranslated(
                f"setup({key}=…)",
                "carry it over by hand into pyproject.toml's [project] (PEP 621)",
            )
        )
    cmdclass = setup.get("cmdclass") or {}
    for key, value in cmdclass.items() if isinstance(cmdclass, dict) else ():
        if "BuildExtension" not in str(value):
            untranslated.append(
                Untranslated(
                    f"setup(cmdclass={{{key!r}: {value}}})",
                    "scikit-build-core runs the build: move what it does into CMakeLists.txt",
                )
            )
    return Adoption(
        source="setup.py",
        distribution=name,
        package=package,
        package_dir=package_dir,
        version=version,
        libraries=libraries,
        abi="stable",  # decided by the writer from the sources
        cuda_targets=targets,
        requires=_requirements(setup),
        untranslated=untranslated,
    )


def _namespaces(
    root: Path, libraries: list[Library], package: str, untranslated: list[Untranslated]
) -> None:
    """Each library's op namespace, from its TORCH_LIBRARY blocks; a PYBIND11_MODULE is
    listed (it needs Python, which a ptkit library cannot link)."""
    for library in libraries:
        registered, _, python = find_namespaces(root, library.sources)
        for source in python:
            untranslated.append(
                Untranslated(
                    f"{source}: a Python module (PYBIND11_MODULE or PyInit_), which needs "
                    "Python: ptkit builds the library without it and the build refuses it",
                    "register the ops with TORCH_LIBRARY(<ns>, m) (schemas and CPU kernels) "
                    "and TORCH_LIBRARY_IMPL(<ns>, CUDA, m), and call them as torch.ops.<ns>.<op> "
                    "(docs/porting.md)",
                )
            )
        if registered:
            library.namespace = registered[0]
            for other in registered[1:]:
                untranslated.append(
                    Untranslated(
                        f"{library.name}: registrations in a second namespace, {other}",
                        f"a ptkit library serves one namespace ({registered[0]}): move them, "
                        "or build them into a library of their own",
                    )
                )
        else:
            library.namespace = package
            untranslated.append(
                Untranslated(
                    f"{library.name}: no TORCH_LIBRARY block in its sources",
                    f"NAMESPACE {package} written: register its ops with TORCH_LIBRARY"
                    f"({package}, m) / TORCH_LIBRARY_IMPL",
                )
            )
