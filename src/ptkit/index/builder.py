"""``ptkit index build``: one static PEP 503/691/658 index per accelerator variant.

Layout under the output folder (``DIR``)::

    DIR/index.html                     links to every variant's index
    DIR/<index-path> -> .generations/<index-path>/<digest>   (a symlink)
    DIR/.generations/<index-path>/<digest>/
        simple/index.html, index.json             the project list
        simple/<project>/index.html, index.json   the files, with hashes
        files/<wheel>, files/<wheel>.metadata     the wheels and their PEP 658 metadata

What goes where: a wheel of a variant (its manifests' ``variant``, else its version's
local label) into that variant's index, at its recipe's ``index-path``, every build of a
torch-mode variant on the same page (``+cpu.torch2.13`` and ``+cpu.torch2.14``: installers
take the one whose torch requirement the environment meets); a universal wheel
(pure Python, neither: the toolkit ``ptkit-0.1.0-py3-none-any.whl``) into every variant's
index, those of the recipes, of this run's wheels and of the indexes already under
``DIR``, so that ``pip install ptkit-ops --index-url <root>/<variant>/simple`` finds the
toolkit it depends on on the same page.

Why this shape:
- One index per variant (docs/architecture.md, the flow): pip sorts local labels as
  strings, so one page holding ``+cpu`` and ``+cu13`` always yields ``+cu13``.
- Generations: a run writes a complete new tree, then swaps the variant's symlink with
  one ``rename``; a reader sees the old index or the new one, never half of one. The
  previous generation stays for readers still downloading from it; older ones go.
- A generation is named by the digest of its pages, so rebuilding with the same wheels
  changes nothing, and ``upload-time`` is kept from the first run that added a file.
- Runs on one folder take turns (an exclusive lock on ``DIR/.ptkit-index.lock``), and
  each run starts from the index the previous one left, so concurrent runs add up.
- Everything is checked before anything is written: malformed or self-contradicting
  wheels, unsafe names, a file name already published with other bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ptkit.index.pages import IndexFile, project_html, project_json, root_html, root_json
from ptkit.index.wheels import (
    IndexBuildError,
    IndexedWheel,
    inspect_wheel,
    valid_variant_name,
)
from ptkit.loading.manifest import file_sha256
from ptkit.recipes.model import Recipe, RecipeError, load_recipes
from ptkit.recipes.torch_builds import build_for_label, recipe_builds, split_label

__all__ = ["VariantIndex", "build_index"]

_GENERATIONS = ".generations"
_LOCK = ".ptkit-index.lock"


@dataclasses.dataclass(frozen=True)
class VariantIndex:
    """What one run did to one variant's index."""

    variant: str
    index_path: str
    generation: str  # relative to DIR
    files: tuple[str, ...]
    added: tuple[str, ...]
    changed: bool  # False: the index already held exactly this content

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class _Plan:
    variant: str
    index_path: str
    recipe: Recipe | None
    wheels: dict[str, IndexedWheel]  # new wheels by file name
    existing: dict[str, dict[str, Any]]  # file name -> its PEP 691 entry (with "project")
    current: Path | None  # the generation the symlink points at


def _fail(problem: str) -> IndexBuildError:
    return IndexBuildError(f"ptkit index build: {problem}")


def _check_base_url(base_url: str | None) -> str | None:
    if base_url is None:
        return None
    parts = urlsplit(base_url)
    if parts.scheme not in {"http", "https", "file"} or parts.query or parts.fragment:
        raise _fail(
            f"--base-url must be an http(s) or file URL without query or fragment, "
            f"got {base_url!r} (e.g. https://example.org/ptkit)"
        )
    return base_url.rstrip("/")


def _recipes(recipes_dir: Path | None) -> dict[str, Recipe]:
    if recipes_dir is None:
        return {}
    try:
        return load_recipes(recipes_dir)
    except RecipeError as error:
        raise _fail(f"recipes in {recipes_dir}: {error}") from None


def _inspect_all(paths: Sequence[Path]) -> list[IndexedWheel]:
    if not paths:
        raise _fail("no wheels given; pass the built wheels, e.g. dist/*/*.whl")
    by_name: dict[str, IndexedWheel] = {}
    for path in paths:
        wheel = inspect_wheel(path)
        other = by_name.get(wheel.filename)
        if other is not None and other.sha256 != wheel.sha256:
            raise _fail(
                f"{other.path} and {path} share the file name {wheel.filename} but not their "
                "bytes; an index can hold only one of them"
            )
        by_name[wheel.filename] = wheel
    return list(by_name.values())


def _recipe_index_path(recipe: Recipe) -> str:
    return recipe.index_path or recipe.name


def _expected_labels(variant: str, recipe: Recipe | None, label: str | None) -> list[str]:
    """The local labels a wheel of ``variant`` may have, or [] when ``label`` is one:
    those of the recipe's builds (``cpu``; ``cpu.torch2.13``, ``cpu.torch2.14`` for a
    torch-mode recipe); without the recipe, the variant's name with or without a torch
    minor."""
    if recipe is not None:
        builds = recipe_builds(recipe)
        if label is not None and build_for_label(recipe, label) is not None:
            return []
        return [b.local_version for b in builds]
    if label is not None and split_label(label)[0] == variant:
        return []
    return [variant, f"{variant}.torch<major>.<minor>"]


def _index_path(
    wheel: IndexedWheel, variant: str, recipes: dict[str, Recipe]
) -> tuple[str, Recipe | None]:
    recipe = recipes.get(variant)
    label = str(wheel.version.local) if wheel.version.local is not None else None
    expected = _expected_labels(variant, recipe, label)
    if expected:
        torch_note = (
            " (a torch-mode recipe: one label per torch minor of [torch] versions)"
            if recipe is not None and recipe.abi == "torch"
            else ""
        )
        raise _fail(
            f"{wheel.path}: its variant is {variant!r} ({wheel.variant_source}) but its "
            f"version {wheel.version} has the local label {label!r}, expected "
            f"{' or '.join(repr(e) for e in expected)}{torch_note}; installers tell variants "
            "and builds apart by that label. Rebuild it with ptkit build --variant " + variant
        )
    index_path = _recipe_index_path(recipe) if recipe else variant
    if not valid_variant_name(index_path):
        raise _fail(f"the index path {index_path!r} of variant {variant!r} is not safe")
    return index_path, recipe


def _every_index(
    out: Path, recipes: dict[str, Recipe], plans: dict[str, _Plan]
) -> dict[str, tuple[str, Recipe | None]]:
    """Where a universal wheel goes: index path -> (variant, recipe) of every recipe, of
    this run's wheels and of the indexes already under ``out``."""
    targets: dict[str, tuple[str, Recipe | None]] = {}
    for recipe in recipes.values():
        targets.setdefault(_recipe_index_path(recipe), (recipe.name, recipe))
    for plan in plans.values():
        targets.setdefault(plan.index_path, (plan.variant, plan.recipe))
    by_path = {_recipe_index_path(r): r for r in recipes.values()}
    if out.is_dir():
        for link in sorted(out.iterdir()):
            if link.is_symlink() and valid_variant_name(link.name):
                known = by_path.get(link.name)
                targets.setdefault(link.name, (known.name if known else link.name, known))
    return targets


def _existing_entries(generation: Path | None) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    if generation is None:
        return entries
    for page in sorted((generation / "simple").glob("*/index.json")):
        document = json.loads(page.read_text(encoding="utf-8"))
        for entry in document["files"]:
            try:  # plain wheels; variant wheels and variants.json are not distributions here
                version: str | None = str(parse_wheel_filename(entry["filename"])[1])
            except InvalidWheelFilename:
                version = None
            entries[entry["filename"]] = {**entry, "project": document["name"], "version": version}
    return entries


def _current_generation(link: Path) -> Path | None:
    if not link.is_symlink():
        if link.exists():
            raise _fail(
                f"{link} exists and is not an index generation link made by ptkit index build; "
                "move it away, or build into a new folder"
            )
        return None
    target = link.parent / os.readlink(link)
    return target if target.is_dir() else None


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold the folder's lock; a second run waits here until the first is done."""
    with (out / _LOCK).open("a+b") as handle:
        if sys.platform == "win32":
            import msvcrt

            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s; keep waiting
                    time.sleep(0.1)
            try:
                yield
            finally:
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _now() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = (
        datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
        if epoch and epoch.isdigit()
        else datetime.datetime.now(datetime.timezone.utc)
    )
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _place(source: Path, target: Path) -> None:
    """Carry a file from the previous generation: a hard link where the file system allows
    one (files in an index never change, and wheels are large), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _file_url(base_url: str | None, index_path: str, filename: str) -> str:
    if base_url is None:
        return f"../../files/{filename}"
    return f"{base_url}/{index_path}/files/{filename}"


def _write_generation(
    plan: _Plan, tmp: Path, base_url: str | None, upload_time: str, variant_metadata: bool
) -> tuple[dict[str, list[IndexFile]], list[str]]:
    """Write files/ and simple/ into ``tmp``; return the pages' files and the new names."""
    files_dir = tmp / "files"
    files_dir.mkdir(parents=True)
    pages: dict[str, list[IndexFile]] = {}
    added = []
    carried_extras = []
    for filename, entry in plan.existing.items():
        assert plan.current is not None
        is_wheel = entry["version"] is not None
        if not is_wheel and variant_metadata:
            continue  # regenerated below from every wheel
        _place(plan.current / "files" / filename, files_dir / filename)
        if entry.get("core-metadata"):
            _place(
                plan.current / "files" / f"{filename}.metadata",
                files_dir / f"{filename}.metadata",
            )
        pages.setdefault(entry["project"], []).append(
            IndexFile(
                filename=filename,
                url=_file_url(base_url, plan.index_path, filename),
                sha256=entry["hashes"]["sha256"],
                size=entry["size"],
                upload_time=entry["upload-time"],
                requires_python=entry.get("requires-python"),
                metadata_sha256=(entry.get("core-metadata") or {}).get("sha256"),
                version=entry.get("version"),
            )
        )
        if not is_wheel:
            carried_extras.append(filename)
    for wheel in plan.wheels.values():
        if wheel.filename in plan.existing:
            continue  # same bytes, already published: keeps its upload-time
        # Copied, not linked: a later in-place edit of the input must not change the index.
        shutil.copyfile(wheel.path, files_dir / wheel.filename)
        (files_dir / f"{wheel.filename}.metadata").write_bytes(wheel.metadata)
        pages.setdefault(wheel.project, []).append(
            IndexFile(
                filename=wheel.filename,
                url=_file_url(base_url, plan.index_path, wheel.filename),
                sha256=wheel.sha256,
                size=wheel.size,
                upload_time=upload_time,
                requires_python=wheel.requires_python,
                metadata_sha256=wheel.metadata_sha256,
                version=str(wheel.version),
            )
        )
        added.append(wheel.filename)
    if variant_metadata:
        added += _add_variant_files(plan, pages, files_dir, base_url, upload_time)
    for project, files in pages.items():
        files.sort(key=lambda f: f.filename)
        folder = tmp / "simple" / project
        folder.mkdir(parents=True)
        (folder / "index.html").write_text(project_html(project, files), encoding="utf-8")
        (folder / "index.json").write_text(project_json(project, files), encoding="utf-8")
    projects = sorted(pages)
    (tmp / "simple" / "index.html").write_text(root_html(projects), encoding="utf-8")
    (tmp / "simple" / "index.json").write_text(root_json(projects), encoding="utf-8")
    return pages, added


def _add_variant_files(
    plan: _Plan,
    pages: dict[str, list[IndexFile]],
    files_dir: Path,
    base_url: str | None,
    upload_time: str,
) -> list[str]:
    """PEP 825 variant wheels and ``*-variants.json`` beside the plain wheels."""
    from ptkit.index.variant_metadata import write_variant_files

    if plan.recipe is None:
        raise _fail(
            f"--variant-metadata needs the recipe of variant {plan.variant!r} "
            "(pass --recipes DIR with <variant>.toml)"
        )
    previous = {f.filename: f for files in pages.values() for f in files}
    # The variant's own wheels (they have its local label); a universal one gets no
    # variant properties.
    wheel_names = sorted(
        name
        for name, f in previous.items()
        if name.endswith(".whl") and f.version is not None and Version(f.version).local
    )
    created = write_variant_files([files_dir / n for n in wheel_names], plan.recipe, files_dir)
    names = []
    for path in created:
        # A variant wheel is <plain wheel stem>-<label>.whl: same project, version, metadata.
        plain = previous.get(path.name.rsplit("-", 1)[0] + ".whl")
        project = canonicalize_name(path.name.split("-", 1)[0])
        if plain is not None:
            _place(files_dir / f"{plain.filename}.metadata", files_dir / f"{path.name}.metadata")
        old = plan.existing.get(path.name)
        digest = file_sha256(path)
        same = old is not None and old["hashes"]["sha256"] == digest
        pages.setdefault(project, []).append(
            IndexFile(
                filename=path.name,
                url=_file_url(base_url, plan.index_path, path.name),
                sha256=digest,
                size=path.stat().st_size,
                upload_time=old["upload-time"] if same and old else upload_time,
                requires_python=plain.requires_python if plain else None,
                metadata_sha256=plain.metadata_sha256 if plain else None,
                version=None,
            )
        )
        if not same:
            names.append(path.name)
    return names


def _digest(tmp: Path) -> str:
    digest = hashlib.sha256()
    for page in sorted((tmp / "simple").rglob("index.json")):
        digest.update(page.relative_to(tmp).as_posix().encode() + b"\0" + page.read_bytes())
    return digest.hexdigest()[:16]


def _swap(link: Path, target: Path) -> None:
    temporary = link.parent / f".{link.name}.{os.getpid()}.link"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    os.symlink(os.path.relpath(target, link.parent), temporary)
    os.replace(temporary, link)  # atomic: readers follow the old or the new generation


def _prune(generations: Path, keep: set[str]) -> None:
    """Remove the generations no link uses, and the ``.tmp-*`` ones a killed run left: a
    run writes only while it holds the lock, which this one holds."""
    for old in generations.iterdir():
        if old.name not in keep:
            shutil.rmtree(old, ignore_errors=True)


def _wheel_key(filename: str) -> tuple[str, Version, frozenset[str]] | None:
    """(normalised name, version, tags): what installers see of a wheel file name (a
    Version compares 1.0 and 1.0.0 equal, as they do)."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return str(name), version, frozenset(map(str, tags))


def _refuse_second_spellings(plan: _Plan) -> None:
    """One file per (name, version, tags): ``PTKIT-0.1.0+cpu-…`` or ``ptkit-0.1.0.0+cpu-…``
    beside ``ptkit-0.1.0+cpu-…`` is the same release to pip, with other bytes or not."""
    published: dict[tuple[str, Version, frozenset[str]], str] = {}
    for filename in [*plan.existing, *plan.wheels]:
        key = _wheel_key(filename)
        if key is None:
            continue
        first = published.setdefault(key, filename)
        if first != filename:
            raise _fail(
                f"{filename} and {first} are one release to installers ({key[0]} {key[1]}, "
                f"tags {', '.join(sorted(key[2]))}) in the {plan.index_path} index: a "
                "published version has one file. Keep the first, or bump the version"
            )


def _landing_page(out: Path) -> None:
    variants = sorted(
        p.name for p in out.iterdir() if p.is_symlink() and (p / "simple" / "index.html").exists()
    )
    links = "\n".join(
        f'    <a href="{v}/simple/">{v}</a>: pip install &lt;project&gt; --index-url '
        f"&lt;this URL&gt;/{v}/simple<br>"
        for v in variants
    )
    page = (
        "<!DOCTYPE html>\n<html>\n  <head><title>ptkit package indexes</title></head>\n"
        f"  <body>\n    <h1>One index per accelerator variant</h1>\n{links}\n  </body>\n</html>\n"
    )
    temporary = out / f".index.html.{os.getpid()}"
    temporary.write_text(page, encoding="utf-8")
    os.replace(temporary, out / "index.html")


def build_index(
    wheels: Sequence[Path],
    out: Path,
    *,
    base_url: str | None = None,
    recipes_dir: Path | None = None,
    variant_metadata: bool = False,
) -> list[VariantIndex]:
    """Add ``wheels`` to the per-variant indexes under ``out``; see the module docstring."""
    base_url = _check_base_url(base_url)
    recipes = _recipes(recipes_dir)
    inspected = _inspect_all(wheels)
    if out.exists() and not out.is_dir():
        raise _fail(f"--out {out} exists and is not a folder")

    plans: dict[str, _Plan] = {}
    for wheel in inspected:
        if wheel.variant is None:
            continue
        index_path, recipe = _index_path(wheel, wheel.variant, recipes)
        plan = plans.setdefault(index_path, _Plan(wheel.variant, index_path, recipe, {}, {}, None))
        if plan.variant != wheel.variant:
            raise _fail(
                f"variants {plan.variant!r} and {wheel.variant!r} share the index path "
                f"{index_path!r}; give each recipe its own index-path"
            )
        plan.wheels[wheel.filename] = wheel
    universal = [wheel for wheel in inspected if wheel.universal]
    if universal:
        targets = _every_index(out, recipes, plans)
        if not targets:
            raise _fail(
                f"{universal[0].path} is a universal wheel (pure Python, no variant): it goes "
                "into every variant's index, and there is none here; pass the variants' "
                "wheels too, or --recipes DIR"
            )
        for index_path, (variant, recipe) in targets.items():
            plan = plans.setdefault(index_path, _Plan(variant, index_path, recipe, {}, {}, None))
            plan.wheels.update((wheel.filename, wheel) for wheel in universal)
    for index_path in plans:  # refuse a foreign folder before writing anything
        _current_generation(out / index_path)

    out.mkdir(parents=True, exist_ok=True)
    results = []
    with _exclusive(out):
        # 1. Read the index as the previous run left it; refuse republished names.
        for plan in plans.values():
            plan.current = _current_generation(out / plan.index_path)
            plan.existing = _existing_entries(plan.current)
            _refuse_second_spellings(plan)
            for wheel in plan.wheels.values():
                old = plan.existing.get(wheel.filename)
                if old is not None and old["hashes"]["sha256"] != wheel.sha256:
                    raise _fail(
                        f"{wheel.filename} is already in the {plan.index_path} index with "
                        f"other bytes (sha256 {old['hashes']['sha256'][:12]}…, this one "
                        f"{wheel.sha256[:12]}…); a published file never changes. Bump the "
                        "version, or add a build number: ptkit build … (SOURCE_DATE_EPOCH keeps "
                        "rebuilds identical)"
                    )
        # 2. Write every new generation beside the live ones.
        upload_time = _now()
        staged: list[tuple[_Plan, Path, list[str]]] = []
        try:
            for plan in plans.values():
                generations = out / _GENERATIONS / plan.index_path
                generations.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=generations))
                tmp.chmod(0o755)  # mkdtemp makes it private; an index is for everyone to read
                pages, added = _write_generation(plan, tmp, base_url, upload_time, variant_metadata)
                target = generations / _digest(tmp)
                if target.exists():  # the same content: keep the folder readers may use
                    shutil.rmtree(tmp)
                else:
                    os.rename(tmp, target)
                names = sorted(f.filename for files in pages.values() for f in files)
                staged.append((plan, target, names))
                results.append(
                    VariantIndex(
                        variant=plan.variant,
                        index_path=plan.index_path,
                        generation=target.relative_to(out).as_posix(),
                        files=tuple(names),
                        added=tuple(sorted(added)),
                        changed=plan.current is None or target.resolve() != plan.current.resolve(),
                    )
                )
        except BaseException:
            for generations in (out / _GENERATIONS).glob("*"):
                for tmp in generations.glob(".tmp-*"):
                    shutil.rmtree(tmp, ignore_errors=True)
            raise
        # 3. Swap each variant to its new generation; keep the previous one for readers.
        for plan, target, _names in staged:
            if plan.current is None or target.resolve() != plan.current.resolve():
                _swap(out / plan.index_path, target)
            keep = {target.name} | ({plan.current.name} if plan.current is not None else set())
            _prune(out / _GENERATIONS / plan.index_path, keep)
        _landing_page(out)
    return results
