"""Variant recipes: what a variant is, read from ``recipes/<variant>.toml``.

Standard library only: scikit-build-core's version provider and CMake
(``python -m ptkit.recipes``, ``ptkit_read_recipe``) use it with any Python >= 3.10.

The dataclasses below are the one description of the format. A recipe's TOML layout
follows them: the scalar fields of ``Recipe`` are the ``[variant]`` table, each
dataclass-typed field of ``Recipe`` is a table of its own (``[targets]``, ``[toolkit]``,
``[release]``), field names become keys with ``-`` for ``_``, a field without a default
is a required key, and each field's docstring is its documentation. ``json_schema()``
derives ``recipes/recipe.schema.json`` from them (``python -m ptkit.recipes schema``, or
``ptkit matrix --write``), so the loader, the schema and editors cannot disagree.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import itertools
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "BACKENDS",
    "BACKEND_PLATFORMS",
    "PLATFORMS",
    "Recipe",
    "RecipeError",
    "Release",
    "json_schema",
    "load_recipe",
    "load_recipes",
    "recipe_path",
    "schema_text",
]

Backend = Literal["cpu", "cuda", "hip", "xpu", "metal"]
Platform = Literal["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "macosx_arm64", "win_amd64"]

BACKENDS: tuple[Backend, ...] = typing.get_args(Backend)
# Wheel platforms of the release: manylinux_2_28 because torch's own Linux wheels are
# manylinux_2_28 (an older tag would promise what torch does not).
PLATFORMS: tuple[Platform, ...] = typing.get_args(Platform)
# Where each backend can run at all: a recipe may release on these platforms only.
BACKEND_PLATFORMS: dict[Backend, tuple[Platform, ...]] = {
    "cpu": PLATFORMS,
    "cuda": ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64"),
    "hip": ("manylinux_2_28_x86_64",),
    "xpu": ("manylinux_2_28_x86_64", "win_amd64"),
    "metal": ("macosx_arm64",),
}

_LOCAL_LABEL = re.compile(r"^[a-z0-9]+(?:[.][a-z0-9]+)*$")
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9.]*$")
_CUDA_TARGET = re.compile(r"^(sm|compute)_[0-9]{2,3}[af]?$")
_HIP_TARGET = re.compile(r"^gfx[0-9a-f]+(-[0-9]+)*(-generic)?(:[a-z]+[+-])*$")
_XPU_TARGET = re.compile(r"^[a-z][a-z0-9_.-]*$")
_INDEX_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def _pattern(regex: re.Pattern[str], **kwargs: Any) -> Any:
    """A field whose value (or, for lists, each item) must match ``regex``: the loader
    and the JSON schema read the same pattern from the field's metadata."""
    return dataclasses.field(metadata={"pattern": regex.pattern}, **kwargs)


class RecipeError(ValueError):
    """A recipe file is missing or invalid; the message lists every problem."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Targets:
    """What the variant's native code is compiled for."""

    isa: tuple[str, ...] = ()
    """CPU instruction-set levels dispatched at run time ("default" is the baseline)."""
    cuda: tuple[str, ...] = _pattern(_CUDA_TARGET, default=())
    """CUDA targets: ``sm_XY`` (SASS, ``a``/``f`` suffixes allowed) and ``compute_XY`` (PTX)."""
    cuda_optional: tuple[str, ...] = _pattern(_CUDA_TARGET, default=())
    """CUDA targets that may be dropped (recorded in the manifest) when the toolkit lacks them."""
    hip: tuple[str, ...] = _pattern(_HIP_TARGET, default=())
    """AMD GPU targets: ``gfx942``, ``gfx1100``, generic ``gfx11-generic``, feature-qualified ``gfx90a:xnack+``."""
    hip_optional: tuple[str, ...] = _pattern(_HIP_TARGET, default=())
    """AMD GPU targets that may be dropped (recorded in the manifest) when the compiler lacks them."""
    xpu: tuple[str, ...] = _pattern(_XPU_TARGET, default=())
    """Intel GPU devices compiled ahead of time (``pvc``, ``bmg``…) and ``spir64`` for the JIT fallback."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toolkit:
    """The pinned toolchain of the variant."""

    name: str = ""
    """``gcc`` (system), ``cuda`` …"""
    version: str = ""
    """The toolkit version the recipe is pinned to (``13.5``)."""
    packages: tuple[str, ...] = ()
    """pip requirements that provide it (``nvidia-cuda-nvcc==13.5.*`` …)."""
    index_url: str = ""
    """The package index they come from, when it is not PyPI (TheRock's for ROCm)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Release:
    """How the release pipeline builds and tests the variant (``ptkit matrix`` turns it
    into cibuildwheel's configuration and the release workflow)."""

    platforms: tuple[Platform, ...]
    """Platforms a wheel is built for: one ``py3-none`` wheel each, tested on every CPython. Only those the backend runs on are allowed (metal: ``macosx_arm64``; hip: ``manylinux_2_28_x86_64`` …)."""
    test_command: str
    """Run by cibuildwheel in a fresh environment with the wheel installed, on each CPython, and by `ptkit build`'s smoke stage (``python -m ptkit_ops.smoke``, ``python -m ptkit.runtime.smoke mypkg``); a non-zero exit fails the release."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recipe:
    """One variant: one wheel per platform, one index page."""

    name: str = _pattern(_VARIANT_NAME)
    """Variant name, also the recipe's file stem (``cpu``, ``cu13`` …)."""
    backend: Backend
    """The accelerator backend."""
    description: str = ""
    """One line for humans."""
    local_version: str = _pattern(_LOCAL_LABEL)
    """PEP 440 local label appended to the version (``0.1.0+cpu``)."""
    index_path: str = ""
    """Folder under the index root holding this variant's ``simple/`` tree (default: the name)."""
    torch_index_url: str = _pattern(_INDEX_URL, default="")
    """The package index of the PyTorch build this variant runs with (``https://download.pytorch.org/whl/cu130``; PyPI for macOS). ``ptkit select`` puts it in the install commands beside the variant's own index; empty: torch comes from PyPI."""
    targets: Targets = Targets()
    """Compilation targets."""
    toolkit: Toolkit = Toolkit()
    """The pinned toolchain."""
    release: Release | None = None
    """The release pipeline's platforms and test; a recipe without it is built locally only (``ptkit matrix`` requires it)."""


# Which backend may use which target list (the others must leave it empty).
_TARGET_OWNERS: dict[str, Backend] = {
    "cuda": "cuda",
    "cuda_optional": "cuda",
    "hip": "hip",
    "hip_optional": "hip",
    "xpu": "xpu",
}


def _key(field_name: str) -> str:
    return field_name.replace("_", "-")


def _hints(cls: type) -> dict[str, Any]:
    # globalns: this module may be loaded by path under any name (or none).
    return typing.get_type_hints(cls, globalns=globals())


def _unwrap_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


def _table_fields() -> dict[str, type]:
    """``Recipe``'s dataclass-typed fields: each one is a TOML table of that name."""
    tables = {}
    for name, hint in _hints(Recipe).items():
        hint = _unwrap_optional(hint)
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            tables[name] = hint
    return tables


def _variant_fields() -> list[dataclasses.Field[Any]]:
    """``Recipe``'s scalar fields: the keys of the ``[variant]`` table."""
    tables = _table_fields()
    return [f for f in dataclasses.fields(Recipe) if f.name not in tables]


def _keys(fields: typing.Iterable[dataclasses.Field[Any]]) -> set[str]:
    return {_key(f.name) for f in fields}


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def recipe_path(variant: str, recipes_dir: Path) -> Path:
    return recipes_dir / f"{variant}.toml"


def _did_you_mean(value: str, known: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(value, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(keys: set[str], known: set[str], where: str) -> list[str]:
    return [
        f"unknown key {where}{key!r}{_did_you_mean(key, known)}" for key in sorted(keys - known)
    ]


def _table(data: dict[str, Any], key: str, problems: list[str]) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        problems.append(f"{key} must be a table ([{key}]), got {value!r}")
        return {}
    return value


def _str(table: dict[str, Any], key: str, where: str, problems: list[str]) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        problems.append(f"{where}{key} must be a non-empty string, got {value!r}")
        return ""
    return value


def _optional_str(table: dict[str, Any], key: str, where: str, problems: list[str]) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        problems.append(f"{where}{key} must be a string, got {value!r}")
        return ""
    return value


def _str_list(table: dict[str, Any], key: str, where: str, problems: list[str]) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        problems.append(f"{where}{key} must be a list of strings, got {value!r}")
        return ()
    return tuple(value)


def _parse_targets(table: dict[str, Any], backend: str, problems: list[str]) -> Targets:
    problems.extend(_unknown(set(table), _keys(dataclasses.fields(Targets)), "targets."))
    values = {
        f.name: _str_list(table, _key(f.name), "targets.", problems)
        for f in dataclasses.fields(Targets)
    }
    for target in (*values["cuda"], *values["cuda_optional"]):
        if not _CUDA_TARGET.match(target):
            problems.append(
                f"targets.cuda: {target!r} is not a CUDA target (expected sm_90, sm_90a, "
                "sm_100f or compute_120)"
            )
    for target in (*values["hip"], *values["hip_optional"]):
        if not _HIP_TARGET.match(target):
            problems.append(
                f"targets.hip: {target!r} is not an AMD GPU target (expected gfx942, gfx1100, "
                "gfx11-generic or gfx90a:xnack+)"
            )
    for target in values["xpu"]:
        if not _XPU_TARGET.match(target):
            problems.append(
                f"targets.xpu: {target!r} is not an Intel GPU device name (pvc, bmg, spir64)"
            )
    for owner in ("cuda", "hip", "xpu"):
        used = any(values[f] for f, o in _TARGET_OWNERS.items() if o == owner)
        if backend and backend != owner and used:
            problems.append(f"targets.{owner} is set but the backend is {backend!r}, not {owner!r}")
    return Targets(**values)


def _parse_toolkit(table: dict[str, Any], problems: list[str]) -> Toolkit:
    problems.extend(_unknown(set(table), _keys(dataclasses.fields(Toolkit)), "toolkit."))
    return Toolkit(
        name=_optional_str(table, "name", "toolkit.", problems),
        version=_optional_str(table, "version", "toolkit.", problems),
        packages=_str_list(table, "packages", "toolkit.", problems),
        index_url=_optional_str(table, "index-url", "toolkit.", problems),
    )


def _allowed_platforms(backend: str) -> tuple[Platform, ...]:
    """The platforms ``backend`` runs on; all of them when the backend itself is invalid
    (that is reported once, as its own problem)."""
    for known, platforms in BACKEND_PLATFORMS.items():
        if known == backend:
            return platforms
    return PLATFORMS


def _parse_platforms(
    value: tuple[str, ...], backend: str, problems: list[str]
) -> tuple[Platform, ...]:
    allowed = _allowed_platforms(backend)
    platforms: list[Platform] = []
    for platform in value:
        if platform not in PLATFORMS:
            hint = _did_you_mean(platform, PLATFORMS)
            problems.append(
                f"release.platforms: {platform!r} is not a platform{hint}; "
                f"expected one of {', '.join(PLATFORMS)}"
            )
        elif platform not in allowed:
            problems.append(
                f"release.platforms: {platform!r} is not allowed for backend {backend!r} "
                f"(allowed: {', '.join(allowed)}); remove it or change the backend"
            )
        elif platform in platforms:
            problems.append(f"release.platforms: {platform!r} is listed twice; list it once")
        else:
            platforms.append(platform)
    return tuple(platforms)


def _parse_release(table: dict[str, Any], backend: str, problems: list[str]) -> Release:
    problems.extend(_unknown(set(table), _keys(dataclasses.fields(Release)), "release."))
    raw = _str_list(table, "platforms", "release.", problems)
    if "platforms" not in table or (isinstance(table["platforms"], list) and not raw):
        allowed = ", ".join(_allowed_platforms(backend))
        problems.append(
            f"release.platforms must list at least one platform ({allowed}), "
            f"got {table.get('platforms')!r}"
        )
    return Release(
        platforms=_parse_platforms(raw, backend, problems),
        test_command=_str(table, "test-command", "release.", problems),
    )


def parse_recipe(data: dict[str, Any], variant: str, source: str) -> Recipe:
    """Validate one recipe's parsed TOML; raise ``RecipeError`` listing all problems.

    ``source`` names the file in the message (``recipes/cu13.toml``)."""
    tables = _table_fields()
    problems = _unknown(set(data), {"variant", *(_key(t) for t in tables)}, "")
    table = _table(data, "variant", problems)
    problems.extend(_unknown(set(table), _keys(_variant_fields()), "variant."))

    name = _str(table, "name", "variant.", problems)
    if name and name != variant:
        problems.append(f"variant.name is {name!r} but the file is {variant}.toml")
    if name and not _VARIANT_NAME.match(name):
        problems.append(f"variant.name {name!r} must match {_VARIANT_NAME.pattern}")
    backend = _str(table, "backend", "variant.", problems)
    if backend and backend not in BACKENDS:
        problems.append(
            f"variant.backend must be one of {', '.join(BACKENDS)}, got {backend!r}"
            f"{_did_you_mean(backend, BACKENDS)}"
        )
        backend = ""
    local = _str(table, "local-version", "variant.", problems)
    if local and not _LOCAL_LABEL.match(local):
        problems.append(
            f"variant.local-version {local!r} is not a PEP 440 local label "
            "(lower-case letters, digits and dots)"
        )
    description = _optional_str(table, "description", "variant.", problems)
    index_path = _optional_str(table, "index-path", "variant.", problems) or name
    torch_index_url = _optional_str(table, "torch-index-url", "variant.", problems)
    if torch_index_url and not _INDEX_URL.match(torch_index_url):
        problems.append(
            f"variant.torch-index-url {torch_index_url!r} is not an http(s) URL "
            "(expected https://download.pytorch.org/whl/cu130)"
        )

    targets = _parse_targets(_table(data, "targets", problems), backend, problems)
    toolkit = _parse_toolkit(_table(data, "toolkit", problems), problems)
    release = None
    if "release" in data:
        release = _parse_release(_table(data, "release", problems), backend, problems)

    if problems:
        raise RecipeError(f"{source}: " + "; ".join(problems))
    return Recipe(
        name=name,
        backend=typing.cast("Backend", backend),
        description=description,
        local_version=local,
        index_path=index_path,
        torch_index_url=torch_index_url,
        targets=targets,
        toolkit=toolkit,
        release=release,
    )


def load_recipe(variant: str, recipes_dir: Path) -> Recipe:
    """Read and validate one recipe; raise ``RecipeError`` listing all problems."""
    path = recipe_path(variant, recipes_dir)
    if not path.is_file():
        known = sorted(p.stem for p in recipes_dir.glob("*.toml"))
        raise RecipeError(
            f"no recipe for variant {variant!r}: {path} does not exist "
            f"(known variants: {', '.join(known) or 'none'})"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from exc
    return parse_recipe(data, variant, str(path))


def load_recipes(recipes_dir: Path) -> dict[str, Recipe]:
    """Every ``<variant>.toml`` in ``recipes_dir`` by name ({} for none); the first broken
    one raises ``RecipeError``."""
    return {p.stem: load_recipe(p.stem, recipes_dir) for p in sorted(recipes_dir.glob("*.toml"))}


# --- JSON schema, derived from the dataclasses above -------------------------------


def _docstrings() -> dict[str, dict[str, str]]:
    """Class name -> field name -> the string literal right after the field: Python keeps
    no attribute docstrings at run time, so they are read from this file's source."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    docs: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields = docs.setdefault(node.name, {})
        for stmt, after in itertools.pairwise(node.body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                fields[stmt.target.id] = _plain(after.value.value)
    return docs


def _plain(doc: str) -> str:
    """Docstring text as one line of Markdown-ish prose (``x`` -> `x`)."""
    return " ".join(doc.replace("``", "`").split())


def _type_schema(hint: Any, *, required: bool, pattern: str | None) -> dict[str, Any]:
    """The JSON Schema of one field's type: strings (with the field's pattern), enums from
    ``Literal``, arrays from ``tuple[X, ...]``."""
    hint = _unwrap_optional(hint)
    if typing.get_origin(hint) is Literal:
        return {"type": "string", "enum": list(typing.get_args(hint))}
    if hint is str:
        schema: dict[str, Any] = {"type": "string"}
        if required:
            schema["minLength"] = 1
        if pattern:
            schema["pattern"] = pattern
        return schema
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        schema = {"type": "array", "items": _type_schema(item, required=False, pattern=pattern)}
        if required:
            schema["minItems"] = 1
        if typing.get_origin(item) is Literal:
            schema["uniqueItems"] = True
        return schema
    raise TypeError(f"json_schema: no JSON type for {hint!r}; extend _type_schema")


def _object_schema(
    fields: typing.Iterable[dataclasses.Field[Any]],
    hints: dict[str, Any],
    docs: dict[str, str],
    description: str,
) -> dict[str, Any]:
    fields = list(fields)
    properties = {}
    for field in fields:
        prop = _type_schema(
            hints[field.name], required=_required(field), pattern=field.metadata.get("pattern")
        )
        if field.name in docs:
            prop = {"description": docs[field.name], **prop}
        properties[_key(field.name)] = prop
    schema: dict[str, Any] = {"description": description, "type": "object"}
    required = [_key(f.name) for f in fields if _required(f)]
    if required:
        schema["required"] = required
    schema["properties"] = properties
    schema["additionalProperties"] = False
    return schema


def _backend_rules() -> list[dict[str, Any]]:
    """What depends on the backend: the platforms it may release on, the target lists it
    may set. One ``if``/``then`` per backend, from ``BACKEND_PLATFORMS`` and ``_TARGET_OWNERS``."""
    rules = []
    for backend in BACKENDS:
        forbidden = {
            _key(f): {"maxItems": 0} for f, owner in _TARGET_OWNERS.items() if owner != backend
        }
        rules.append(
            {
                "if": {
                    "properties": {
                        "variant": {
                            "properties": {"backend": {"const": backend}},
                            "required": ["backend"],
                        }
                    },
                    "required": ["variant"],
                },
                "then": {
                    "properties": {
                        "release": {
                            "properties": {
                                "platforms": {"items": {"enum": list(BACKEND_PLATFORMS[backend])}}
                            }
                        },
                        "targets": {"properties": forbidden},
                    }
                },
            }
        )
    return rules


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a recipe file, derived from the dataclasses."""
    docs = _docstrings()
    recipe_hints = _hints(Recipe)
    variant = _object_schema(
        _variant_fields(), recipe_hints, docs["Recipe"], _plain(Recipe.__doc__ or "")
    )
    properties: dict[str, Any] = {"variant": variant}
    required = ["variant"]
    for name, cls in _table_fields().items():
        field = next(f for f in dataclasses.fields(Recipe) if f.name == name)
        description = docs["Recipe"].get(name, "") + " " + _plain(cls.__doc__ or "")
        properties[_key(name)] = _object_schema(
            dataclasses.fields(cls), _hints(cls), docs[cls.__name__], description.strip()
        )
        if _required(field):
            required.append(_key(name))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "Generated from src/ptkit/recipes/model.py by `ptkit matrix --write` "
        "(or `python -m ptkit.recipes schema`): do not edit.",
        "title": "ptkit variant recipe (recipes/<variant>.toml)",
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
        "allOf": _backend_rules(),
    }


def schema_text() -> str:
    """``json_schema()`` as the text of ``recipes/recipe.schema.json``."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
