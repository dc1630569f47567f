"""``ptkit new NAME``: a new extension project that ptkit builds, ships and loads.

The project depends on the ``ptkit`` toolkit only (its CMake package, version provider,
build pipeline and loader; nobody's kernels). It is written from the templates in
``templates/`` (package data; ``*.tmpl`` files, so that no linter or type checker takes
them for ptkit's own code) with these substitutions: ``{{name}}`` (the package and op
namespace), ``{{ptkit_version}}`` (the ptkit that wrote it: the oldest the project may
build with), ``{{ptkit_requirement}}`` (that version up to the next minor while ptkit is
0.x, as its CMake package's version check allows), ``{{backends}}``, ``{{expected}}`` and
``{{expected_what}}`` (what the tests compare the op with); and one kind of block,
``{{#backend}} … {{/backend}}``, kept only when that backend was chosen, or
``{{#schemas_python}}``/``{{#schemas_cpp}}``, kept for the ``--schemas`` chosen: ``python``
(the op's schema, reference and fake kernel in the package's ``__init__.py``) or ``cpp``
(the schema defined by the CPU library, ``STABLE_TORCH_LIBRARY``, with no reference). The cibuildwheel configuration and the release
workflow are not templates: :mod:`ptkit.release.matrix` generates them from the new
project's recipes, as ``ptkit matrix --write`` would.

Everything is written into a temporary folder beside the target and renamed into place
at the end, so a failure leaves nothing half-written. Standard library only (plus
ptkit.release's matrix): the command does not import torch.
"""

from __future__ import annotations

import keyword
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from ptkit.backends import BACKENDS
from ptkit.backends.base import did_you_mean

__all__ = [
    "SCHEMAS",
    "SUPPORTED_BACKENDS",
    "ScaffoldError",
    "create_project",
    "parse_backends",
    "ptkit_requirement",
    "render",
    "validate_name",
]

TEMPLATES = Path(__file__).resolve().parent / "templates"
# Backends the scaffold has an example op for; cpu is always part of a project (every
# variant carries the CPU library, and GPU variants fall back to it for CPU tensors).
SUPPORTED_BACKENDS = ("cpu", "cuda")
# Where the op's schema is defined: in Python (with a reference), or in C++ (without).
SCHEMAS = ("python", "cpp")
# Where each template goes; "package/" becomes src/<name>/, "gitignore" .gitignore.
# A backend's files are written only when it was chosen.
_BACKEND_FILES = {
    "cuda": ("csrc/cuda/", "recipes/cu13.toml"),
}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# A block whose tags stand alone on their lines drops those lines; one inside a line
# keeps the text around it.
_LINE_BLOCK = re.compile(r"^\{\{#(\w+)\}\}\n(.*?)^\{\{/\1\}\}\n", re.DOTALL | re.MULTILINE)
_BLOCK = re.compile(r"\{\{#(\w+)\}\}(.*?)\{\{/\1\}\}", re.DOTALL)
_FIELD = re.compile(r"\{\{(\w+)\}\}")


class ScaffoldError(ValueError):
    """The project cannot be created; the message says why and how to fix it."""


def validate_name(name: str) -> str:
    """``name`` when it can be the distribution, the import package and the op namespace
    alike (lowercase letters, digits and underscores, starting with a letter, not a
    Python keyword, not a module every project already imports); else ScaffoldError."""
    if not _NAME.match(name) or keyword.iskeyword(name):
        suggestion = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
        if suggestion and not suggestion[0].isalpha():
            suggestion = f"ext_{suggestion}"
        if not suggestion or keyword.iskeyword(suggestion):
            suggestion = "my_kernels"
        raise ScaffoldError(
            f"ptkit new: {name!r} cannot name a project: the name is its import package, its "
            "distribution and its op namespace (torch.ops.<name>), so it must be lowercase "
            "letters, digits and underscores, start with a letter and not be a Python keyword; "
            f"for example: ptkit new {suggestion}"
        )
    if name in {"ptkit", "ptkit_ops", "torch", "test", "tests", "aten", "prim", "prims"}:
        raise ScaffoldError(
            f"ptkit new: {name!r} is taken (by ptkit, torch or Python's own modules); pick "
            f"another, for example: ptkit new {name}_kernels"
        )
    return name


def parse_backends(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"cpu,cuda"`` -> ``("cpu", "cuda")``; cpu is always included; unknown: ScaffoldError."""
    items = text.split(",") if isinstance(text, str) else list(text)
    chosen = [item.strip().lower() for item in items if item.strip()]
    unknown = [b for b in chosen if b not in SUPPORTED_BACKENDS]
    if unknown:
        by_hand = "|".join(b for b in BACKENDS if b not in SUPPORTED_BACKENDS)
        named = ", ".join(f"{b}{did_you_mean(b, SUPPORTED_BACKENDS)}" for b in unknown)
        raise ScaffoldError(
            f"ptkit new: no example op for backend(s) {named}; the scaffold writes "
            f"{', '.join(SUPPORTED_BACKENDS)} (for example --backends cpu,cuda). Other backends "
            f"are added by hand: ptkit_add_kernel_library(... BACKEND {by_hand} ...) and a "
            "recipe for the variant"
        )
    return tuple(b for b in SUPPORTED_BACKENDS if b == "cpu" or b in chosen)


def render(text: str, values: dict[str, str], backends: Sequence[str]) -> str:
    """The template ``text`` with its blocks kept or dropped and its fields filled in."""

    def block(match: re.Match[str]) -> str:
        return match.group(2) if match.group(1) in backends else ""

    text = _BLOCK.sub(block, _LINE_BLOCK.sub(block, text))

    def field(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template field {{{{{key}}}}} has no value")
        return values[key]

    return _FIELD.sub(field, text)


def _destination(relative: str, name: str) -> str:
    relative = relative.removesuffix(".tmpl")
    if relative.startswith("package/"):
        return f"src/{name}/{relative.removeprefix('package/')}"
    if relative == "gitignore":
        return ".gitignore"
    return relative


def _wanted(relative: str, backends: Sequence[str]) -> bool:
    for backend, prefixes in _BACKEND_FILES.items():
        if backend not in backends and any(relative.startswith(p) for p in prefixes):
            return False
    return True


def ptkit_requirement(version: str) -> str:
    """The ptkit a new project needs: this one or newer, below the next breaking release
    (the next minor while the major is 0, else the next major), the same rule as the
    CMake package's version check (``ptkit-config-version.cmake``)."""
    major, minor = (int(part) for part in version.split(".")[:2])
    below = f"0.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"ptkit>={version},<{below}"


def _write_files(root: Path, name: str, backends: Sequence[str], schemas: str) -> list[str]:
    from ptkit._version import __version__

    values = {
        "name": name,
        "ptkit_version": __version__,
        "ptkit_requirement": ptkit_requirement(__version__),
        "backends": ",".join(backends),
        "expected": f"{name}.scale_add_reference" if schemas == "python" else "_expected",
        "expected_what": "the reference" if schemas == "python" else "the same formula in torch",
    }
    blocks = [*backends, f"schemas_{schemas}"]
    written = []
    for template in sorted(p for p in TEMPLATES.rglob("*.tmpl") if p.is_file()):
        relative = template.relative_to(TEMPLATES).as_posix()
        if not _wanted(relative, backends):
            continue
        target = root / _destination(relative, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            render(template.read_text(encoding="utf-8"), values, blocks), encoding="utf-8"
        )
        written.append(target.relative_to(root).as_posix())
    return written


def _generate_release_files(root: Path) -> list[str]:
    """ci/cibuildwheel/<variant>.toml, .github/workflows/release.yml and the recipe
    schema: ptkit's matrix generator run on the new project (``ptkit matrix --write``)."""
    from ptkit.release.matrix import MatrixError, generate, load_plan, write_generated

    try:
        plan = load_plan(root)
    except MatrixError as exc:  # a template bug: the recipes are ours
        raise ScaffoldError(f"ptkit new: the generated recipes are invalid: {exc}") from exc
    write_generated(root, plan)
    return sorted(path.as_posix() for path in generate(plan))


def _refuse(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ScaffoldError(
            f"ptkit new: {target} exists and is not a folder; choose another --dir or name"
        )
    if target.is_dir() and any(target.iterdir()):
        raise ScaffoldError(
            f"ptkit new: {target} is not empty; nothing was written. Choose an empty or new "
            "folder (--dir PATH), or remove this one"
        )


def create_project(
    name: str,
    *,
    backends: Sequence[str] = ("cpu",),
    directory: Path | None = None,
    schemas: str = "python",
) -> tuple[Path, list[str]]:
    """Write the project ``name`` into ``directory`` (default ``./<name>``), which must be
    missing or empty; returns the folder and the files written (relative paths).
    ``schemas``: ``python`` (schema and reference in Python) or ``cpp`` (schema in C++)."""
    validate_name(name)
    if schemas not in SCHEMAS:
        raise ScaffoldError(
            f"ptkit new: --schemas {schemas!r}{did_you_mean(schemas, SCHEMAS)} is not one of "
            f"{', '.join(SCHEMAS)}: python (the schema, reference and fake kernel in Python) or "
            "cpp (the schema in the CPU library, STABLE_TORCH_LIBRARY, no reference)"
        )
    backends = parse_backends(backends)
    target = (directory if directory is not None else Path.cwd() / name).absolute()
    _refuse(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    )
    try:
        files = _write_files(staging, name, backends, schemas)
        files += _generate_release_files(staging)
        _refuse(target)  # created meanwhile?
        if target.is_dir():
            target.rmdir()  # empty: replaced by the finished project
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # mkdtemp makes the folder 0700; a project folder is an ordinary one.
    mask = os.umask(0)
    os.umask(mask)
    target.chmod(0o777 & ~mask)
    return target, sorted(set(files))
