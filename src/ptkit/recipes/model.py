"""Variant recipes: what a variant is, read from ``recipes/<variant>.toml``.

Standard library only: scikit-build-core's version provider and CMake
(``python -m ptkit.recipes``, ``ptkit_read_recipe``) use it with any Python >= 3.10.

The dataclasses below are the one description of the format; everything else is
derived from them by walking their fields and type hints:

- the TOML layout: the scalar fields of ``Recipe`` are the ``[variant]`` table, each
  dataclass-typed field of ``Recipe`` is a table of its own (``[targets]``,
  ``[toolkit]``, ``[torch]``, ``[release]``; ``X | None``: the table may be left out), field names
  become keys with ``-`` for ``_``, a field without a default is a required key;
- the parser (``parse_recipe``): ``str``, ``tuple[str, ...]`` (a list, no duplicates),
  ``Literal`` and the metadata of ``_matching`` (a pattern), ``_one_of`` (a name from a
  registry: ``ptkit.backends.BACKENDS``, ``ptkit.platforms.RELEASE_PLATFORMS``, the ISA
  levels of ``ptkit.platforms``) and
  ``_targets_of`` (a backend's target list, checked by ``Backend.target_problem``);
  unknown keys get a did-you-mean, and every problem of a file is reported at once;
- the JSON schema (``json_schema()``, ``recipes/recipe.schema.json``);
- the CMake feed (``cmake_feed()``, ``python -m ptkit.recipes cmake``).

Only the rules that relate two fields are written by hand (``_cross_field_problems``).
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import re
import shlex
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from ptkit.backends import BACKENDS
from ptkit.backends.base import did_you_mean
from ptkit.platforms import RELEASE_PLATFORMS
from ptkit.platforms.base import known_isa_levels

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ABI_MODES",
    "AbiMode",
    "Recipe",
    "RecipeError",
    "Release",
    "Targets",
    "Toolkit",
    "Torch",
    "cmake_feed",
    "json_schema",
    "load_recipe",
    "load_recipes",
    "parse_recipe",
    "recipe_path",
    "schema_text",
]


_LOCAL_LABEL = re.compile(r"^[a-z0-9]+(?:[.][a-z0-9]+)*$")
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9.]*$")
_INDEX_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")
# A torch minor, major of one digit: the wheel's label spells it torch<major><minor>
# (ptkit.recipes.torch_builds), which a second major digit would make ambiguous.
_TORCH_MINOR = re.compile(r"^[1-9]\.(0|[1-9][0-9]*)$")

AbiMode = Literal["stable", "torch"]
ABI_MODES: tuple[str, ...] = typing.get_args(AbiMode)
"""``[variant] abi``: ``stable`` (the LibTorch stable ABI: one wheel for every torch >= its
target) or ``torch`` (torch's C++ API: one wheel per torch minor of ``[torch] versions``)."""


def _matching(regex: re.Pattern[str], meaning: str, **kwargs: Any) -> Any:
    """A string field (or, for a list, each item) that must match ``regex``; ``meaning``
    says what it is, for messages (``a PEP 440 local label (…)``)."""
    return dataclasses.field(metadata={"pattern": regex.pattern, "meaning": meaning}, **kwargs)


def _one_of(names: Iterable[str], what: str, **kwargs: Any) -> Any:
    """A string field (or each item of a list) that must be one of ``names``: ``what`` is
    one of them called, for messages (``backend``, ``release platform``)."""
    return dataclasses.field(metadata={"choices": tuple(names), "what": what}, **kwargs)


def _targets_of(backend: str, *, optional: bool = False) -> Any:
    """A list of ``backend``'s targets: each one checked by that backend's
    ``target_problem``, set only in a recipe of that backend. ``optional``: the targets
    that may be dropped when the compiler lacks them."""
    if backend not in BACKENDS:
        raise ValueError(f"_targets_of: no backend {backend!r} in ptkit.backends.BACKENDS")
    return dataclasses.field(
        default=(), metadata={"backend": backend, "optional_targets": optional}
    )


class RecipeError(ValueError):
    """A recipe file is missing or invalid; the message lists every problem."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Targets:
    """What the variant's native code is compiled for."""

    isa: tuple[str, ...] = _one_of(known_isa_levels(), "CPU ISA level", default=())
    """CPU instruction-set levels dispatched at run time, best first ("default", the baseline, is always built, last); a level the build machine's processor lacks is skipped."""
    cuda: tuple[str, ...] = _targets_of("cuda")
    """CUDA targets: ``sm_XY`` (SASS, ``a``/``f`` suffixes allowed) and ``compute_XY`` (PTX)."""
    cuda_optional: tuple[str, ...] = _targets_of("cuda", optional=True)
    """CUDA targets that may be dropped (recorded in the manifest) when the toolkit lacks them."""
    hip: tuple[str, ...] = _targets_of("hip")
    """AMD GPU targets: ``gfx942``, ``gfx1100``, generic ``gfx11-generic``, feature-qualified ``gfx90a:xnack+``."""
    hip_optional: tuple[str, ...] = _targets_of("hip", optional=True)
    """AMD GPU targets that may be dropped (recorded in the manifest) when the compiler lacks them."""
    xpu: tuple[str, ...] = _targets_of("xpu")
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
    index_url: str = _matching(
        _INDEX_URL, "an http(s) URL (https://rocm.nightlies.amd.com/v2/gfx94X-dcgpu/)", default=""
    )
    """The package index they come from, when it is not PyPI (TheRock's for ROCm)."""

    @property
    def pip_install(self) -> str:
        """The command that installs the packages (``pip install --index-url … 'a' 'b'``),
        for messages; "" when the toolkit is not on a package index."""
        if not self.packages:
            return ""
        index = ["--index-url", self.index_url] if self.index_url else []
        return shlex.join(["pip", "install", *index, *self.packages])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Torch:
    """The torch minors a ``torch``-mode variant (``abi = "torch"``) is built for: one wheel each, pinned to that minor."""

    versions: tuple[str, ...] = _matching(_TORCH_MINOR, "a torch minor version (2.14)", default=())
    """Each torch minor a wheel is built against (``["2.13", "2.14"]``): its version gets the label ``+<local-version>.torch2.13``, its metadata requires ``torch>=2.13,<2.14``, and the release builds it with that torch. Only for ``abi = "torch"``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Release:
    """How the release pipeline builds and tests the variant (``ptkit matrix`` turns it
    into cibuildwheel's configuration and the release workflow)."""

    platforms: tuple[str, ...] = _one_of(RELEASE_PLATFORMS, "platform")
    """Platforms a wheel is built for: one ``py3-none`` wheel each, tested on every CPython. Only those the backend runs on are allowed (metal: ``macosx_arm64``; hip: ``manylinux_2_28_x86_64`` …)."""
    test_command: str
    """Run by cibuildwheel in a fresh environment with the wheel installed, on each CPython, and by `ptkit build`'s smoke stage (``python -m ptkit_ops.smoke``, ``python -m ptkit.runtime.smoke mypkg``); a non-zero exit fails the release."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recipe:
    """One variant: one wheel per platform, one index page."""

    name: str = _matching(_VARIANT_NAME, "a variant name (lower-case letters, digits and dots)")
    """Variant name, also the recipe's file stem (``cpu``, ``cu13`` …)."""
    backend: str = _one_of(BACKENDS, "backend")
    """The accelerator backend."""
    description: str = ""
    """One line for humans."""
    local_version: str = _matching(
        _LOCAL_LABEL, "a PEP 440 local label (lower-case letters, digits and dots)"
    )
    """PEP 440 local label appended to the version (``0.1.0+cpu``); a ``torch``-mode build adds its torch minor (``0.1.0+cpu.torch2.14``)."""
    abi: AbiMode = dataclasses.field(default="stable", metadata={"what": "ABI mode"})
    """``stable``: the libraries use the LibTorch stable ABI, one wheel serves every torch >= its target. ``torch``: torch's C++ API (ATen, ``TORCH_LIBRARY``), one wheel per torch minor of ``[torch] versions``, each loading only into that minor. CMake gets it as ``PTKIT_RECIPE_ABI``."""
    index_path: str = ""
    """Folder under the index root holding this variant's ``simple/`` tree (default: the name)."""
    torch_index_url: str = _matching(
        _INDEX_URL, "an http(s) URL (https://download.pytorch.org/whl/cu130)", default=""
    )
    """The package index of the PyTorch build this variant runs with (``https://download.pytorch.org/whl/cu130``; PyPI for macOS). ``ptkit select`` puts it in the install commands beside the variant's own index; empty: torch comes from PyPI."""
    targets: Targets = Targets()
    """Compilation targets."""
    toolkit: Toolkit = Toolkit()
    """The pinned toolchain."""
    torch: Torch = Torch()
    """Set only with ``abi = "torch"``."""
    release: Release | None = None
    """The release pipeline's platforms and test; a recipe without it is built locally only (``ptkit matrix`` requires it)."""

    def backend_targets(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The recipe backend's own target lists: (targets, optional targets)."""
        required: list[str] = []
        optional: list[str] = []
        for field in dataclasses.fields(Targets):
            if field.metadata.get("backend") == self.backend:
                into = optional if field.metadata["optional_targets"] else required
                into.extend(getattr(self.targets, field.name))
        return tuple(required), tuple(optional)


# --- the model, walked ------------------------------------------------------------------

_Field = tuple["dataclasses.Field[Any]", Any]


def _key(field_name: str) -> str:
    return field_name.replace("_", "-")


def _fields(cls: type) -> list[_Field]:
    """The fields of a dataclass with their resolved type hints."""
    hints = typing.get_type_hints(cls)
    return [(field, hints[field.name]) for field in dataclasses.fields(cls)]


def _unwrap_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


def _table_type(hint: Any) -> type | None:
    """The dataclass a field's hint names (``Release | None`` -> ``Release``), else None."""
    hint = _unwrap_optional(hint)
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _split(cls: type) -> tuple[list[_Field], list[_Field]]:
    """``Recipe``'s fields: the scalars (the ``[variant]`` table) and the tables."""
    fields = _fields(cls)
    return (
        [f for f in fields if _table_type(f[1]) is None],
        [f for f in fields if _table_type(f[1]) is not None],
    )


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _choices(hint: Any, metadata: Mapping[str, Any]) -> tuple[str, ...]:
    if typing.get_origin(hint) is Literal:
        return tuple(typing.get_args(hint))
    return tuple(metadata.get("choices", ()))


def _item_hint(hint: Any) -> Any:
    """``X`` of ``tuple[X, ...]``; None for any other hint."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0]
    return None


def _expected(hint: Any, metadata: Mapping[str, Any]) -> str:
    """What a value of this field looks like, for messages: ``a string``, ``a list of
    CUDA targets``, ``a backend (cpu, cuda …)``."""
    hint = _unwrap_optional(hint)
    if _table_type(hint) is not None:
        return "a table"
    item = _item_hint(hint)
    plural = "s" if item is not None else ""
    choices = _choices(item if item is not None else hint, metadata)
    if choices:
        noun = f"{metadata.get('what', 'value')}{plural} ({', '.join(choices)})"
    elif "backend" in metadata:
        noun = f"{BACKENDS[metadata['backend']].title} target{plural}"
    elif "meaning" in metadata:
        if item is None:
            return str(metadata["meaning"])  # with its own article: "an http(s) URL (…)"
        noun = str(metadata["meaning"]).split(" (")[0].split(" ", 1)[1] + "s"
    else:
        noun = f"string{plural}"
    if item is not None:
        return f"a list of {noun}"
    return f"{'an' if noun[0].lower() in 'aeiou' else 'a'} {noun}"


# --- parsing ------------------------------------------------------------------------------

_INVALID: Any = object()  # a value that failed (its problem is recorded)


def _unknown_keys(table: Mapping[str, Any], known: Iterable[str], where: str) -> list[str]:
    known = sorted(known)
    return [
        f"unknown key {where}{key!r}{did_you_mean(key, known)}"
        for key in sorted(set(table) - set(known))
    ]


def _string_problem(value: str, hint: Any, metadata: Mapping[str, Any]) -> str | None:
    """Why a string is not a valid value of the field, or None."""
    choices = _choices(hint, metadata)
    if choices and value not in choices:
        what = metadata.get("what", "value")
        article = "an" if what[0].lower() in "aeiou" else "a"
        return (
            f"{value!r} is not {article} {what}{did_you_mean(value, choices)}; expected one of "
            f"{', '.join(choices)}"
        )
    pattern = metadata.get("pattern")
    if pattern and not re.match(pattern, value):
        return f"{value!r} is not {metadata['meaning']}"
    backend = metadata.get("backend")
    if backend:
        return BACKENDS[backend].target_problem(value)
    return None


def _parse_value(
    hint: Any,
    raw: Any,
    where: str,
    field: dataclasses.Field[Any],
    problems: list[str],
) -> Any:
    """One TOML value as the field's type: a dict of parsed values for a table, a tuple
    for a list, the string itself; ``_INVALID`` (the problem recorded) when it is not."""
    hint = _unwrap_optional(hint)
    table = _table_type(hint)
    if table is not None:
        if not isinstance(raw, dict):
            problems.append(f"{where} must be a table ([{where}]), got {raw!r}")
            return _INVALID
        return _parse_table(_fields(table), raw, f"{where}.", problems)
    item = _item_hint(hint)
    if item is not None:
        if not isinstance(raw, list):
            problems.append(f"{where} must be {_expected(hint, field.metadata)}, got {raw!r}")
            return _INVALID
        items: list[Any] = []
        for value in raw:
            if not isinstance(value, str):
                problems.append(f"{where}: {value!r} is not a string")
            elif value in items:
                problems.append(f"{where}: {value!r} is listed twice; list it once")
            elif (problem := _string_problem(value, item, field.metadata)) is not None:
                problems.append(f"{where}: {problem}")
            else:
                items.append(value)
        if _required(field) and not raw:
            problems.append(f"{where} must not be empty ({_expected(hint, field.metadata)})")
        return tuple(items)
    if hint is str or typing.get_origin(hint) is Literal:
        if not isinstance(raw, str):
            problems.append(f"{where} must be a string, got {raw!r}")
            return _INVALID
        if _required(field) and not raw.strip():
            problems.append(f"{where} must not be empty ({_expected(hint, field.metadata)})")
            return _INVALID
        problem = _string_problem(raw, hint, field.metadata) if raw else None
        if problem is not None:
            problems.append(f"{where}: {problem}")
            return _INVALID
        return raw
    raise TypeError(f"ptkit.recipes: no parser for {hint!r} ({where}); extend _parse_value")


def _parse_table(
    fields: list[_Field],
    table: Mapping[str, Any],
    where: str,
    problems: list[str],
    *,
    also_known: Iterable[str] = (),
) -> dict[str, Any]:
    """The fields' values found in ``table`` (keys with ``-``), checked; a problem for
    each unknown key, missing required key and invalid value."""
    problems.extend(_unknown_keys(table, [*(_key(f.name) for f, _ in fields), *also_known], where))
    values: dict[str, Any] = {}
    for field, hint in fields:
        key = _key(field.name)
        if key not in table:
            if _required(field):
                problems.append(f"{where}{key} is missing ({_expected(hint, field.metadata)})")
            continue
        value = _parse_value(hint, table[key], f"{where}{key}", field, problems)
        if value is not _INVALID:
            values[field.name] = value
    return values


def _abi_problems(values: Mapping[str, Any]) -> list[str]:
    """A ``torch``-mode variant lists the torch minors it is built for; a stable one
    lists none (its one wheel serves every torch >= its target)."""
    abi = values.get("abi", "stable")
    versions = (values.get("torch") or {}).get("versions", ())
    if abi == "torch" and not versions:
        return [
            "variant.abi is 'torch' but torch.versions lists no torch minor: add "
            '[torch] versions = ["2.13", "2.14"] (one wheel per torch minor, each pinned to it)'
        ]
    if abi != "torch" and versions:
        return [
            f"torch.versions is set but variant.abi is {abi!r} (one wheel for every torch "
            "its target allows): remove [torch] versions, or set variant.abi = 'torch' to "
            "build one wheel per torch minor"
        ]
    return []


def _cross_field_problems(values: Mapping[str, Any], variant: str) -> list[str]:
    """The rules that relate two fields: the file is named after the variant; a target
    list is only for its own backend; a torch-mode variant names its torch minors; a
    backend releases only where it runs."""
    problems = []
    name = values.get("name")
    if name and name != variant:
        problems.append(
            f"variant.name is {name!r} but the file is {variant}.toml: rename one of them"
        )
    problems.extend(_abi_problems(values))
    backend = values.get("backend")
    if not backend:  # missing or invalid: reported once, as its own problem
        return problems
    targets = values.get("targets", {})
    for field in dataclasses.fields(Targets):
        owner = field.metadata.get("backend")
        if owner and owner != backend and targets.get(field.name):
            problems.append(
                f"targets.{_key(field.name)} is set but the backend is {backend!r}, not "
                f"{owner!r}: remove it, or set variant.backend = {owner!r}"
            )
    allowed = BACKENDS[backend].release_platforms
    release = values.get("release")
    if isinstance(release, dict) and release.get("platforms") == ():
        problems.append(
            f"release.platforms: backend {backend!r} releases on {', '.join(allowed)}: list "
            "at least one of them"
        )
    for platform in (values.get("release") or {}).get("platforms", ()):
        if platform not in allowed:
            problems.append(
                f"release.platforms: {platform!r} is not allowed for backend {backend!r} "
                f"(allowed: {', '.join(allowed)}); remove it or change the backend"
            )
    return problems


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    """The dataclass ``cls`` from parsed values (nested tables built too)."""
    kwargs = {}
    for field, hint in _fields(cls):
        if field.name in values:
            value = values[field.name]
            table = _table_type(hint)
            kwargs[field.name] = _build(table, value) if table is not None else value
    return cls(**kwargs)


def parse_recipe(data: Mapping[str, Any], variant: str, source: str) -> Recipe:
    """Validate one recipe's parsed TOML; raise ``RecipeError`` listing all problems.

    ``source`` names the file in the message (``recipes/cu13.toml``)."""
    problems: list[str] = []
    scalars, tables = _split(Recipe)
    # The tables (and [variant]) at the top level; the scalars inside [variant].
    values = _parse_table(tables, data, "", problems, also_known=["variant"])
    if "variant" not in data:
        problems.append("the [variant] table is missing (name, backend, local-version)")
    elif not isinstance(data["variant"], dict):
        problems.append(f"variant must be a table ([variant]), got {data['variant']!r}")
    else:
        values.update(_parse_table(scalars, data["variant"], "variant.", problems))
    problems.extend(_cross_field_problems(values, variant))
    if problems:
        raise RecipeError(f"{source}: " + "; ".join(problems))
    if not values.get("index_path"):
        values["index_path"] = values["name"]
    recipe: Recipe = _build(Recipe, values)
    return recipe


def recipe_path(variant: str, recipes_dir: Path) -> Path:
    return recipes_dir / f"{variant}.toml"


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


# --- the CMake feed ---------------------------------------------------------------------


def _cmake_name(field_name: str) -> str:
    return field_name.upper()


def _cmake_value(value: str | tuple[str, ...]) -> str:
    """A CMake value on one line: a list joined with ``;`` (an item's own ``;`` escaped as
    CMake does, ``\\;``); line breaks become spaces."""
    text = ";".join(v.replace(";", "\\;") for v in value) if isinstance(value, tuple) else value
    return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text


def cmake_feed(recipe: Recipe) -> list[tuple[str, str]]:
    """What ``ptkit_read_recipe`` sets, as ``(FIELD, value)``: each scalar field of the
    ``[variant]`` table as ``<FIELD>`` (``NAME``, ``BACKEND`` …), each field of a table as
    ``<TABLE>_<FIELD>`` (``TARGETS_CUDA``, ``TOOLKIT_PACKAGES``; a table the recipe leaves
    out gives empty values), then ``TARGETS`` and ``OPTIONAL_TARGETS`` (the recipe
    backend's own target lists) and ``TOOLKIT_INSTALL`` (the pip command of its toolkit)."""
    feed: list[tuple[str, str]] = []
    for field, hint in _fields(Recipe):
        value = getattr(recipe, field.name)
        table = _table_type(hint)
        if table is None:
            feed.append((_cmake_name(field.name), _cmake_value(value)))
            continue
        for sub, sub_hint in _fields(table):
            if _table_type(sub_hint) is not None:
                raise TypeError(f"cmake_feed: a table inside [{field.name}]; extend cmake_feed")
            sub_value = getattr(value, sub.name) if value is not None else ""
            feed.append(
                (f"{_cmake_name(field.name)}_{_cmake_name(sub.name)}", _cmake_value(sub_value))
            )
    targets, optional = recipe.backend_targets()
    feed.append(("TARGETS", _cmake_value(targets)))
    feed.append(("OPTIONAL_TARGETS", _cmake_value(optional)))
    feed.append(("TOOLKIT_INSTALL", recipe.toolkit.pip_install))
    return feed


# --- JSON schema ------------------------------------------------------------------------


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


def _value_schema(hint: Any, metadata: Mapping[str, Any], *, required: bool) -> dict[str, Any]:
    """The JSON Schema of one value: strings (enum, pattern, a backend's target pattern),
    arrays of them (unique items, at least one when required)."""
    hint = _unwrap_optional(hint)
    item = _item_hint(hint)
    if item is not None:
        schema: dict[str, Any] = {
            "type": "array",
            "items": _value_schema(item, metadata, required=False),
            "uniqueItems": True,
        }
        if required:
            schema["minItems"] = 1
        return schema
    if hint is str or typing.get_origin(hint) is Literal:
        schema = {"type": "string"}
        choices = _choices(hint, metadata)
        if choices:
            schema["enum"] = list(choices)
        elif required:
            schema["minLength"] = 1
        pattern = metadata.get("pattern")
        if "backend" in metadata:
            pattern = BACKENDS[metadata["backend"]].target_pattern
        if pattern:
            schema["pattern"] = pattern
        return schema
    raise TypeError(f"json_schema: no JSON type for {hint!r}; extend _value_schema")


def _object_schema(
    fields: list[_Field], docs: Mapping[str, dict[str, str]], cls_name: str, description: str
) -> dict[str, Any]:
    properties = {}
    for field, hint in fields:
        prop = _value_schema(hint, field.metadata, required=_required(field))
        doc = docs[cls_name].get(field.name)
        properties[_key(field.name)] = {"description": doc, **prop} if doc else prop
    schema: dict[str, Any] = {"description": description, "type": "object"}
    required = [_key(f.name) for f, _ in fields if _required(f)]
    if required:
        schema["required"] = required
    schema["properties"] = properties
    schema["additionalProperties"] = False
    return schema


def _backend_rules() -> list[dict[str, Any]]:
    """The cross-field rules the schema can say: per backend, the platforms it may release
    on and the other backends' target lists it must leave empty (``if``/``then``)."""
    rules = []
    owned = {f.name: f.metadata.get("backend") for f in dataclasses.fields(Targets)}
    for name, backend in BACKENDS.items():
        forbidden = {
            _key(f): {"maxItems": 0} for f, owner in owned.items() if owner and owner != name
        }
        rules.append(
            {
                "if": {
                    "properties": {
                        "variant": {
                            "properties": {"backend": {"const": name}},
                            "required": ["backend"],
                        }
                    },
                    "required": ["variant"],
                },
                "then": {
                    "properties": {
                        "release": {
                            "properties": {
                                "platforms": {"items": {"enum": list(backend.release_platforms)}}
                            }
                        },
                        "targets": {"properties": forbidden},
                    }
                },
            }
        )
    return rules


def _abi_rule() -> dict[str, Any]:
    """``abi = "torch"`` needs ``[torch] versions``; otherwise it must stay empty."""
    torch_mode = {
        "properties": {"variant": {"properties": {"abi": {"const": "torch"}}, "required": ["abi"]}},
        "required": ["variant"],
    }
    return {
        "if": torch_mode,
        "then": {
            "required": ["torch"],
            "properties": {
                "torch": {"required": ["versions"], "properties": {"versions": {"minItems": 1}}}
            },
        },
        "else": {"properties": {"torch": {"properties": {"versions": {"maxItems": 0}}}}},
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a recipe file, derived from the dataclasses."""
    docs = _docstrings()
    scalars, tables = _split(Recipe)
    properties: dict[str, Any] = {
        "variant": _object_schema(scalars, docs, "Recipe", _plain(Recipe.__doc__ or ""))
    }
    required = ["variant"]
    for field, hint in tables:
        table = _table_type(hint)
        assert table is not None
        description = docs["Recipe"].get(field.name, "") + " " + _plain(table.__doc__ or "")
        properties[_key(field.name)] = _object_schema(
            _fields(table), docs, table.__name__, description.strip()
        )
        if _required(field):
            required.append(_key(field.name))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "Generated from src/ptkit/recipes/model.py by `ptkit matrix --write` "
        "(or `python -m ptkit.recipes schema`): do not edit.",
        "title": "ptkit variant recipe (recipes/<variant>.toml)",
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
        "allOf": [*_backend_rules(), _abi_rule()],
    }


def schema_text() -> str:
    """``json_schema()`` as the text of ``recipes/recipe.schema.json``."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
