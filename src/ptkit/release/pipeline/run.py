"""The five stages in order: ``run_pipeline`` (all of them) and ``finish_wheel`` (2-5 for
a wheel built elsewhere), the progress lines, and what makes a build reproducible.

Before the first stage: what the stages need in this Python is checked
(:mod:`.prerequisites`: one message, one install command), and a recipe toolkit the
build would not find is installed into ptkit's toolchain cache (:mod:`.provision`)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ptkit.recipes.model import Recipe, RecipeError, load_recipe
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.audit import audit_stage
from ptkit.release.pipeline.build import BuiltWheel, build_wheel
from ptkit.release.pipeline.dist import publish
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import check_prerequisites
from ptkit.release.pipeline.provision import provision_toolkit
from ptkit.release.pipeline.repair import RepairedWheel, repair_wheel
from ptkit.release.pipeline.smoke import smoke_test

__all__ = ["STAGES", "PipelineResult", "finish_wheel", "run_pipeline", "source_date_epoch"]

STAGES = ("build", "repair", "audit", "smoke", "dist")

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class PipelineResult:
    wheel: Path  # in dist/<variant>/
    platform: str
    sha256: str
    durations: dict[str, float]


class _Progress:
    """Prints ``[i/5] <stage> …`` and, when it is done, its duration and summary."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.durations: dict[str, float] = {}

    def run(self, name: str, action: Callable[[], tuple[_T, str]]) -> _T:
        index = STAGES.index(name) + 1
        self.echo(f"[{index}/{len(STAGES)}] {name} …")
        started = time.monotonic()
        result, summary = action()
        self.durations[name] = time.monotonic() - started
        self.echo(f"[{index}/{len(STAGES)}] {name} ok in {self.durations[name]:.1f} s: {summary}")
        return result


def source_date_epoch(repo: Path) -> str | None:
    """``$SOURCE_DATE_EPOCH``, else the last commit's time; None outside a git checkout.

    The wheel's zip timestamps follow it, so a rebuild of the same commit gives the
    same bytes whenever it runs.
    """
    given = os.environ.get("SOURCE_DATE_EPOCH")
    if given:
        return given
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%ct"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value.isdigit() else None


def _reproducible_env(repo: Path) -> dict[str, str]:
    epoch = source_date_epoch(repo)
    return {"SOURCE_DATE_EPOCH": epoch} if epoch else {}


def finish_wheel(
    wheel: Path,
    recipe: Recipe,
    *,
    repo: Path,
    dist: Path,
    scratch: Path,
    echo: Callable[[str], None] = print,
    progress: _Progress | None = None,
) -> PipelineResult:
    """Stages 2-5 for a built ``wheel`` of ``recipe``'s variant: repair, audit, smoke
    test, and into ``dist/<variant>``; a failure leaves ``dist`` as it was."""
    steps = progress or _Progress(echo)
    try:
        if progress is None:  # run_pipeline checked them all before stage 1
            check_prerequisites(recipe.name, STAGES[1:], None)
        return _finish(wheel, recipe, repo=repo, dist=dist, scratch=scratch, steps=steps)
    except BuildError as exc:
        exc.untouched = dist / recipe.name
        raise


def _finish(
    wheel: Path, recipe: Recipe, *, repo: Path, dist: Path, scratch: Path, steps: _Progress
) -> PipelineResult:
    env = _reproducible_env(repo)

    def repair() -> tuple[RepairedWheel, str]:
        result = repair_wheel(wheel, recipe=recipe, out_dir=scratch / "repaired", env=env)
        return result, f"{result.platform} ({result.note})"

    repaired = steps.run("repair", repair)

    def audit() -> tuple[None, str]:
        tool = cuda_toolkit.cuobjdump(cuda_toolkit.find_cuda_toolkit(repo, recipe))
        summary = audit_stage(repaired.wheel, recipe=recipe, cuobjdump=tool)
        return None, f"{repaired.wheel.name}\n{summary}"

    steps.run("audit", audit)

    def smoke() -> tuple[None, str]:
        result = smoke_test(repaired.wheel, recipe=recipe, project=repo, venv_dir=scratch / "venv")
        output = "\n".join(f"      {line}" for line in result.output.splitlines())
        return None, f"fresh venv, wheel installed with --no-deps; {result.command}\n{output}"

    steps.run("smoke", smoke)
    digest = hashlib.sha256(repaired.wheel.read_bytes()).hexdigest()

    def move() -> tuple[Path, str]:
        final = publish(repaired.wheel, dist=dist, variant=recipe.name)
        return final, f"{final} ({final.stat().st_size / 1e6:.2f} MB, sha256 {digest})"

    final = steps.run("dist", move)
    return PipelineResult(final, repaired.platform, digest, dict(steps.durations))


def _load(variant: str, repo: Path) -> Recipe:
    path = repo / "recipes" / f"{variant}.toml"
    try:
        return load_recipe(variant, repo / "recipes")
    except RecipeError as exc:
        fix = f"correct {path} as the message says" if path.is_file() else f"add {path}"
        raise BuildError("build", variant, f"recipe: {exc}", fix) from exc


def run_pipeline(
    variant: str,
    *,
    repo: Path,
    dist: Path,
    build_root: Path | None = None,
    require_backend: bool = True,
    compiler_cache: str = "auto",
    echo: Callable[[str], None] = print,
) -> PipelineResult:
    """All five stages for ``recipes/<variant>.toml`` of the project ``repo``.

    ``build_root`` (default ``repo/build``) holds the CMake build folders, the compiler
    cache and the scratch folder ``pipeline-<variant>``, which is kept on failure.
    """
    root = (build_root or repo / "build").resolve()
    scratch = root / f"pipeline-{variant}"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        recipe = _load(variant, repo)  # once: every stage gets this Recipe
        steps = _Progress(echo)
        env = _reproducible_env(repo)
        epoch = env.get("SOURCE_DATE_EPOCH", "unset (no git: not reproducible)")
        echo(f"ptkit build {variant}: SOURCE_DATE_EPOCH={epoch}")
        check_prerequisites(variant, STAGES, repo)
        provision_toolkit(recipe, repo, echo=echo, required=require_backend)

        def build() -> tuple[BuiltWheel, str]:
            built = build_wheel(
                recipe,
                repo=repo,
                build_root=root,
                out_dir=scratch / "wheel",
                require_backend=require_backend,
                compiler_cache=compiler_cache,
                env=env,
                echo=echo,
            )
            return built, f"{built.wheel.name}; {built.cache}"

        built = steps.run("build", build)
        result = finish_wheel(
            built.wheel, recipe, repo=repo, dist=dist, scratch=scratch, progress=steps
        )
    except BuildError as exc:
        exc.untouched = dist / variant
        exc.kept = scratch if scratch.exists() else None
        raise
    shutil.rmtree(scratch, ignore_errors=True)
    total = sum(result.durations.values())
    echo(f"[done] {result.wheel} in {total:.0f} s")
    return result
