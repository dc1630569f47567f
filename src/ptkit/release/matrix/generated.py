"""The files generated from a plan: written (``--write``), compared (``--check``), and the
``ptkit matrix`` command that prints the plan."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Callable
from pathlib import Path

from ptkit.recipes.model import schema_text
from ptkit.release.matrix.cibuildwheel import cibuildwheel_toml
from ptkit.release.matrix.plan import (
    CIBW_DIR,
    MatrixError,
    Plan,
    config_name,
    format_plan,
    load_plan,
    plan_json,
)
from ptkit.release.matrix.workflow import workflow_yaml

__all__ = [
    "FIX",
    "SCHEMA_FILE",
    "WORKFLOW_FILE",
    "Stale",
    "check_generated",
    "generate",
    "matrix_command",
    "write_generated",
]

SCHEMA_FILE = Path("recipes/recipe.schema.json")
WORKFLOW_FILE = Path(".github/workflows/release.yml")
FIX = "run `ptkit matrix --write` and commit the result"


@dataclasses.dataclass(frozen=True)
class Stale:
    """A generated file that differs from what the recipes generate."""

    path: Path
    """Relative to the project root."""
    reason: str

    def format(self) -> str:
        return f"{self.path.as_posix()}: {self.reason}; {FIX}"


def generate(plan: Plan) -> dict[Path, str]:
    """Every generated file (path relative to the project root) and its text."""
    files = {SCHEMA_FILE: schema_text()}
    for build in plan.builds():
        files[CIBW_DIR / f"{config_name(build)}.toml"] = cibuildwheel_toml(
            build.recipe, plan, build
        )
    files[WORKFLOW_FILE] = workflow_yaml(plan)
    return files


def _orphans(repo: Path, files: dict[Path, str]) -> list[Path]:
    """cibuildwheel files of variants (or torch minors) that no longer have a recipe."""
    return sorted(
        p.relative_to(repo)
        for p in (repo / CIBW_DIR).glob("*.toml")
        if p.relative_to(repo) not in files
    )


def _diff(old: str, new: str, limit: int = 12) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), "committed", "generated", lineterm="", n=0
        )
    )
    shown = lines[2 : 2 + limit]
    more = f"\n    … {len(lines) - 2 - limit} more lines" if len(lines) - 2 > limit else ""
    return "\n".join(f"    {line}" for line in shown) + more


def _minor_of_a_recipe(path: Path, plan: Plan) -> str | None:
    """The variant whose torch minor ``<variant>-torch2.12.toml`` was, when its recipe is
    still there (the minor was dropped from ``[torch] versions``); else None."""
    variant = path.stem.split("-torch", 1)[0]
    return variant if variant != path.stem and variant in {r.name for r in plan.recipes} else None


def _orphan_reason(path: Path, plan: Plan) -> str:
    variant = _minor_of_a_recipe(path, plan)
    if variant is not None:
        return f"belongs to no torch minor of recipes/{variant}.toml ([torch] versions)"
    return f"belongs to no recipe (no recipes/{path.stem}.toml)"


def check_generated(repo: Path, plan: Plan) -> list[Stale]:
    """The generated files that are missing, differ, or belong to no recipe."""
    files = generate(plan)
    stale = []
    for path, text in files.items():
        target = repo / path
        if not target.is_file():
            stale.append(Stale(path, "missing"))
            continue
        committed = target.read_text(encoding="utf-8")
        if committed != text:
            stale.append(
                Stale(path, "differs from what recipes/ generates:\n" + _diff(committed, text))
            )
    for path in _orphans(repo, files):
        stale.append(Stale(path, _orphan_reason(path, plan)))
    return stale


def write_generated(repo: Path, plan: Plan) -> list[str]:
    """Write what changed, remove orphans; return one line per file touched."""
    files = generate(plan)
    touched = []
    for path, text in files.items():
        target = repo / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        touched.append(f"wrote {path.as_posix()}")
    for path in _orphans(repo, files):
        (repo / path).unlink()
        gone = (
            "no recipe"
            if _orphan_reason(path, plan).startswith("belongs to no recipe")
            else "no such torch minor"
        )
        touched.append(f"removed {path.as_posix()} ({gone})")
    return touched


def matrix_command(
    repo: Path,
    *,
    check: bool = False,
    write: bool = False,
    as_json: bool = False,
    echo: Callable[[str], None] = print,
    echo_err: Callable[[str], None] = print,
) -> int:
    """``ptkit matrix``: print the plan; ``write``: regenerate the files; ``check``: exit 1
    naming each stale file. Returns the exit status (2: invalid recipes or options)."""
    if check and write:
        echo_err(
            "ptkit matrix: --check and --write exclude each other: --write regenerates the "
            "files, --check verifies the committed ones; pass one"
        )
        return 2
    try:
        plan = load_plan(repo)
    except MatrixError as exc:
        echo_err(str(exc))
        return 2
    if as_json:
        echo(json.dumps(plan_json(plan), indent=2))
    elif not check:
        echo(format_plan(plan))
    if write:
        touched = write_generated(repo, plan)
        echo("\n".join(touched) if touched else "ptkit matrix: generated files are up to date")
    if check:
        stale = check_generated(repo, plan)
        if stale:
            echo_err(
                f"ptkit matrix --check: {len(stale)} generated file(s) out of date:\n"
                + "\n".join(s.format() for s in stale)
            )
            return 1
        echo(f"ptkit matrix --check: {len(generate(plan))} generated files are up to date")
    return 0
