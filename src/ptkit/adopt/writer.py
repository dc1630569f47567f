"""The files ``ptkit adopt`` writes from an ``Adoption``: pyproject.toml, CMakeLists.txt,
recipes/cpu.toml and recipes/cu13.toml (those of the backends it has), the package's
loader call, and a reader's extra files; then all of them written, or none.

The ABI mode is read from the sources (``ptkit.torch_abi.include_problems``): the
classic C++ API (ATen, torch/library.h …) means ``abi = "torch"``, one wheel per torch
minor of ``TORCH_VERSIONS``; otherwise the stable ABI.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import tempfile
from pathlib import Path

from ptkit.adopt.model import AdoptError, Adoption, Edit, Library, Untranslated
from ptkit.torch_abi import include_problems

__all__ = ["TORCH_VERSIONS", "Written", "plan_files", "write_files"]

TORCH_VERSIONS = ("2.13", "2.14")
DEFAULT_CUDA_TARGETS = ("sm_90", "compute_90")
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_BARE = re.compile(r"[A-Za-z0-9_./=+:,-]+")


@dataclasses.dataclass(frozen=True)
class Written:
    """What ``plan_files`` decided: whole files (path -> text) and in-place edits."""

    files: dict[str, str]
    edits: list[Edit]


def _cmake_arg(value: str) -> str:
    if _BARE.fullmatch(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _in_project(path: str) -> str:
    return (
        "${CMAKE_CURRENT_SOURCE_DIR}"
        if path in (".", "")
        else f"${{CMAKE_CURRENT_SOURCE_DIR}}/{path}"
    )


def _scanned(root: Path, library: Library) -> list[Path]:
    """The library's sources and the project headers they include (quoted, one level
    deep: where a classic header usually hides)."""
    found: list[Path] = []
    for source in library.sources:
        path = root / source
        found.append(path)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in _LOCAL_INCLUDE.findall(text):
            for folder in [path.parent, *(root / d for d in library.include_dirs)]:
                header = folder / name
                if header.is_file() and header not in found:
                    found.append(header)
                    break
    return found


def decide_abi(root: Path, adoption: Adoption) -> None:
    """abi from the sources (as ptkit adopt leaves them: its edits applied); what neither
    mode can build (Python headers) is listed."""
    classic = False
    edited = {(root / e.path).resolve(): e.text for e in adoption.edits}
    with tempfile.TemporaryDirectory(prefix="ptkit-adopt-") as scratch:
        for n, library in enumerate(adoption.libraries):
            files = []
            for i, path in enumerate(_scanned(root, library)):
                if path.resolve() in edited:
                    copy = Path(scratch, f"{n}-{i}", path.name)
                    copy.parent.mkdir()
                    copy.write_text(edited[path.resolve()], encoding="utf-8")
                    path = copy
                files.append(path)
            stable = include_problems(files, "stable")
            torch = include_problems(files, "torch")
            classic = classic or len(stable) > len(torch)
            for problem in torch:
                what, _, fix = problem.partition(". Fix: ")
                adoption.untranslated.append(
                    Untranslated(f"{library.name}: {what}", fix or "see docs/porting.md")
                )
    adoption.abi = "torch" if classic else "stable"


def _library_call(adoption: Adoption, library: Library, target: str) -> str:
    parts = [
        f"ptkit_add_kernel_library({target} BACKEND {library.backend} "
        f"NAMESPACE {library.namespace} ABI {adoption.abi}",
        "VARIANT ${PTKIT_VARIANT}",
        "SOURCES " + " ".join(_cmake_arg(s) for s in library.sources),
    ]
    if library.backend == "cuda":
        parts.append(
            "TARGETS ${PTKIT_RECIPE_TARGETS} OPTIONAL_TARGETS ${PTKIT_RECIPE_OPTIONAL_TARGETS}"
        )
    if library.include_dirs:
        parts.append(
            "INCLUDE_DIRS " + " ".join(_cmake_arg(_in_project(d)) for d in library.include_dirs)
        )
    if library.defines:
        parts.append("DEFINES " + " ".join(_cmake_arg(d) for d in library.defines))
    if library.compile_options:
        parts.append("COMPILE_OPTIONS " + " ".join(_cmake_arg(o) for o in library.compile_options))
    if library.link_libraries:
        parts.append("LINK_LIBRARIES " + " ".join(_cmake_arg(x) for x in library.link_libraries))
    # setup.py and build.toml do not say which dtypes a kernel takes; the smoke stage
    # runs each op with each one listed.
    parts.append("DTYPES float32")
    parts.append(f"INSTALL_DIR {adoption.package}/_native)")
    return "\n  ".join(parts)


def _targets(adoption: Adoption) -> dict[str, str]:
    """Library -> its CMake target: <package>_<backend>, numbered when a backend has two."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for library in adoption.libraries:
        counts[library.backend] = counts.get(library.backend, 0) + 1
        suffix = "" if counts[library.backend] == 1 else str(counts[library.backend])
        names[library.name] = f"{adoption.package}_{library.backend}{suffix}"
    return names


def cmake_lists(adoption: Adoption) -> str:
    targets = _targets(adoption)
    cpu = [lib for lib in adoption.libraries if lib.backend == "cpu"]
    cuda = [lib for lib in adoption.libraries if lib.backend == "cuda"]
    lines = [
        f"# {adoption.package}'s native libraries, written by `ptkit adopt` from {adoption.source}",
        "# (docs/adopting.md): one ptkit_add_kernel_library per extension, built by `ptkit build`.",
        "cmake_minimum_required(VERSION 3.26)",
        f"project({adoption.package} LANGUAGES CXX)",
        "find_package(ptkit CONFIG REQUIRED)",
        "",
        'set(PTKIT_VARIANT "cpu" CACHE STRING "Variant recipe to build (recipes/<variant>.toml)")',
        'ptkit_read_recipe(${PTKIT_VARIANT} RECIPES_DIR "${CMAKE_CURRENT_SOURCE_DIR}/recipes")',
        "",
        f"# DTYPES: {adoption.source} does not say which dtypes a kernel takes; list each one it",
        "# does (the smoke stage runs every op once per dtype listed).",
        "",
    ]
    cuda_block = ["ptkit_enable_backend(cuda REQUIRED)"]
    cuda_block += [_library_call(adoption, lib, targets[lib.name]) for lib in cuda]
    cpu_block = [_library_call(adoption, lib, targets[lib.name]) for lib in cpu]
    if cuda and (adoption.one_backend_per_variant or not cpu):
        lines.append("# Each library holds the binding that defines the ops: a variant builds one.")
        lines.append('if(PTKIT_RECIPE_BACKEND STREQUAL "cuda")')
        lines += [_indent(block) for block in cuda_block]
        if cpu:
            lines.append("else()")
            lines += [_indent(block) for block in cpu_block]
        lines.append("endif()")
    else:
        if cpu:
            lines.append("# Every variant carries the CPU library.")
            lines += cpu_block
        if cuda:
            lines += [
                "",
                "# The cu13 variant adds the CUDA library.",
                'if(PTKIT_RECIPE_BACKEND STREQUAL "cuda")',
            ]
            lines += [_indent(block) for block in cuda_block]
            lines.append("endif()")
    return "\n".join(lines) + "\n"


def _indent(block: str) -> str:
    return "\n".join(f"  {line}" for line in block.splitlines())


def _toml_list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def pyproject(adoption: Adoption, ptkit_requirement: str) -> str:
    requires = [ptkit_requirement, "torch>=2.10", *adoption.requires]
    pin = (
        "# torch>=2.10 becomes torch>=2.14,<2.15 in the wheel built against torch 2.14 (ABI torch).\n"
        if adoption.abi == "torch"
        else ""
    )
    return f"""# {adoption.distribution}: written by `ptkit adopt` from {adoption.source} (docs/adopting.md).
[build-system]
requires = ["scikit-build-core>=1.1", "{ptkit_requirement}", "torch>=2.10"]
build-backend = "scikit_build_core.build"

[project]
name = "{adoption.distribution}"
# The version's variant label and the torch pin come from ptkit's provider, per build.
dynamic = ["version", "dependencies"]
requires-python = ">=3.10"

# `ptkit doctor` and `ptkit explain` list the packages of this group.
[project.entry-points."ptkit.packages"]
{adoption.package} = "{adoption.package}"

[tool.scikit-build]
minimum-version = "build-system.requires"
build-dir = "build/{{wheel_tag}}-{{state}}"
cmake.version = ">=3.26"
ninja.version = ">=1.11"
wheel.py-api = "py3"
wheel.packages = ["{adoption.package_dir}"]
cmake.build-type = "Release"
experimental = true

[tool.scikit-build.metadata.version]
provider = "ptkit.release.version_provider"
base-version = "{adoption.version}"

{pin}[tool.scikit-build.metadata.dependencies]
provider = "ptkit.release.version_provider"
requires = {_toml_list(requires)}

[tool.scikit-build.cmake.define]
PTKIT_VARIANT = {{ env = "PTKIT_VARIANT", default = "cpu" }}
"""


def _torch_lines(adoption: Adoption) -> str:
    if adoption.abi != "torch":
        return ""
    return (
        'abi = "torch"\n'
        'index-path = "{index}"\n'
        'torch-index-url = "{url}"\n\n'
        "# The classic C++ API: one wheel per torch minor, each pinned to it.\n"
        f"[torch]\nversions = {_toml_list(TORCH_VERSIONS)}\n"
    )


def recipe(adoption: Adoption, variant: str) -> str:
    if variant == "cpu":
        index, url = "cpu", "https://download.pytorch.org/whl/cpu"
        head = (
            '# The CPU variant, written by `ptkit adopt`.\n[variant]\nname = "cpu"\n'
            'backend = "cpu"\n'
            f'description = "{adoption.package}\'s CPU library"\nlocal-version = "cpu"\n'
        )
        middle = ""
    else:
        index, url = "cu13", "https://download.pytorch.org/whl/cu130"
        head = (
            "# NVIDIA GPUs with the CUDA 13.5 toolkit from PyPI, written by `ptkit adopt`.\n"
            '[variant]\nname = "cu13"\nbackend = "cuda"\n'
            f'description = "{adoption.package}\'s CUDA library"\nlocal-version = "cu13"\n'
        )
        targets = adoption.cuda_targets or list(DEFAULT_CUDA_TARGETS)
        middle = (
            '\n[toolkit]\nname = "cuda"\nversion = "13.5"\npackages = [\n'
            '  "nvidia-cuda-nvcc==13.5.*",\n  "nvidia-cuda-runtime==13.5.*",\n'
            '  "nvidia-cuda-crt==13.5.*",\n  "nvidia-cuda-cccl==13.*",\n'
            '  "nvidia-cuda-cuobjdump==13.5.*",\n]\n\n'
            "[targets]\n"
            + (
                "# From setup.py's/build.toml's architectures.\n"
                if adoption.cuda_targets
                else "# None given: SASS sm_90 and PTX compute_90 (the driver JIT-compiles it for later GPUs).\n"
            )
            + f"cuda = {_toml_list(targets)}\n"
        )
    if adoption.abi == "torch":
        body = _torch_lines(adoption).format(index=index, url=url)
    else:
        body = f'index-path = "{index}"\ntorch-index-url = "{url}"\n'
    return (
        head
        + body
        + middle
        + '\n[release]\nplatforms = ["manylinux_2_28_x86_64"]\n'
        + f'test-command = "python -m ptkit.runtime.smoke {adoption.package}"\n'
    )


_LOADER = (
    "import ptkit.runtime  # ptkit adopt: ptkit's loader loads the native libraries (_native/)\n"
    "\n"
    "ptkit.runtime.load_package(__name__)\n"
)


def _statement_loads_extension(
    node: ast.stmt, package: str, modules: set[str], source: str
) -> bool:
    segment = ast.get_source_segment(source, node) or ""
    if "torch.ops.load_library" in segment:
        return True
    for sub in ast.walk(node):
        if isinstance(sub, ast.ImportFrom):
            names = {alias.name for alias in sub.names}
            if (sub.level == 1 and not sub.module and names & modules) or (
                sub.module == package and names & modules
            ):
                return True
            if sub.level >= 1 and sub.module in modules:
                return True
        if isinstance(sub, ast.Import) and any(
            alias.name in {f"{package}.{m}" for m in modules} for alias in sub.names
        ):
            return True
    return False


def loader_edit(root: Path, adoption: Adoption) -> tuple[Edit | None, str | None]:
    """The package __init__.py with ptkit's loader call where it loaded the extension
    (``from . import _C``, ``torch.ops.load_library``), or after its imports: (an edit,
    or None with the text of a new file when there is none)."""
    path = root / adoption.package_dir / "__init__.py"
    modules = {lib.name.rpartition(".")[2] for lib in adoption.libraries}
    if not path.is_file():
        return (
            None,
            f'"""{adoption.package}: its native libraries, loaded with ptkit\'s loader."""\n\n{_LOADER}',
        )
    text = path.read_text(encoding="utf-8")
    if "load_package(" in text:
        return None, None
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise AdoptError(
            f"ptkit adopt: expected {path} in Python, found a syntax error (line {exc.lineno}); "
            "fix it, then run ptkit adopt again"
        ) from exc
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    loading = [
        n for n in tree.body if _statement_loads_extension(n, adoption.package, modules, text)
    ]
    if loading:
        first = loading[0]
        for node in reversed(loading[1:]):
            assert node.end_lineno is not None
            for i in range(node.lineno - 1, node.end_lineno):
                lines[i] = f"# ptkit adopt: {lines[i]}"
        assert first.end_lineno is not None
        old = "".join(
            f"# ptkit adopt (replaced): {line}"
            for line in lines[first.lineno - 1 : first.end_lineno]
        )
        lines[first.lineno - 1 : first.end_lineno] = [old + _LOADER]
        why = "the extension's import replaced by ptkit's loader call"
    else:
        after = 0
        for node in tree.body:
            is_doc = isinstance(node, ast.Expr) and isinstance(
                getattr(node, "value", None), ast.Constant
            )
            if isinstance(node, (ast.Import, ast.ImportFrom)) or (is_doc and node is tree.body[0]):
                after = node.end_lineno or node.lineno
            else:
                break
        lines[after:after] = ["\n", _LOADER]
        why = "ptkit's loader call added after its imports"
    edited = "".join(lines)
    # The extension module's name used elsewhere (`_C.fn(...)`): it is no Python module now.
    remaining = ast.parse(edited)
    used = sorted(
        {n.id for n in ast.walk(remaining) if isinstance(n, ast.Name) and n.id in modules}
    )
    for name in used:
        adoption.untranslated.append(
            Untranslated(
                f"{adoption.package_dir}/__init__.py uses {name}, the extension module",
                f"call the ops as torch.ops.<namespace>.<op>: {name} is no Python module now",
            )
        )
    return Edit(Path(adoption.package_dir, "__init__.py").as_posix(), edited, why), None


def plan_files(root: Path, adoption: Adoption, ptkit_requirement: str) -> Written:
    """Everything ``ptkit adopt`` will write, decided before anything is written."""
    decide_abi(root, adoption)
    files = {
        "pyproject.toml": pyproject(adoption, ptkit_requirement),
        "CMakeLists.txt": cmake_lists(adoption),
    }
    backends = adoption.backends()
    if "cpu" in backends:
        files["recipes/cpu.toml"] = recipe(adoption, "cpu")
    if "cuda" in backends:
        files["recipes/cu13.toml"] = recipe(adoption, "cu13")
    files.update(adoption.extra_files)
    edits = list(adoption.edits)
    if not adoption.extra_files:  # kernel-builder loads from its _ops.py
        edit, new = loader_edit(root, adoption)
        if edit is not None:
            edits.append(edit)
        if new is not None:
            files[Path(adoption.package_dir, "__init__.py").as_posix()] = new
    return Written(files, edits)


def write_files(root: Path, written: Written, *, force: bool) -> None:
    """Write every file and edit, or none: existing whole files refused unless ``force``;
    on a failure part-way, what was written is put back."""
    existing = sorted(p for p in written.files if (root / p).exists())
    if existing and not force:
        raise AdoptError(
            f"ptkit adopt: expected a project without {', '.join(existing)}, found "
            f"{'it' if len(existing) == 1 else 'them'}; nothing was written. Run "
            "ptkit adopt --force to replace them (their content is lost), or move them away"
        )
    changes = {**written.files, **{e.path: e.text for e in written.edits}}
    before: dict[Path, bytes | None] = {}
    try:
        for relative, text in changes.items():
            path = root / relative
            before[path] = path.read_bytes() if path.is_file() else None
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch = path.with_name(f".{path.name}.ptkit-adopt")
            scratch.write_text(text, encoding="utf-8")
            os.replace(scratch, path)
    except BaseException:
        for path, content in before.items():
            path.with_name(f".{path.name}.ptkit-adopt").unlink(missing_ok=True)
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(content)
        raise
