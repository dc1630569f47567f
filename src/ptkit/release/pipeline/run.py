"""The five stages in order: ``run_pipeline`` (all of them) and ``finish_wheel`` (2-5 for
a wheel built elsewhere), the progress lines, and what makes a build reproducible.

Before the first stage: which build of the recipe this Python makes
(:mod:`ptkit.recipes.torch_builds`: the stable one, or for a torch-mode recipe the one
for this Python's torch, which must be the minor asked for), what the stages need in
this Python (:mod:`.prerequisites`: one message, one install command), and a recipe
toolkit the build would not find is installed into ptkit's toolchain cache
(:mod:`.provision`). After the build stage the wheel must carry that build's label and,
for a torch-mode build, its torch pin: a project whose version provider is not ptkit's
would otherwise ship a wheel that claims every torch. A torch-mode build has a build
folder of its own (``<build root>/torch2.13/``): CMake caches the torch it found."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import time
import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from pathlib import Path
from typing import TypeVar

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ptkit.recipes.model import Recipe, RecipeError, load_recipe, recipe_path
from ptkit.recipes.torch_builds import (
    TorchBuild,
    TorchBuildError,
    build_for_environment,
    recipe_builds,
)
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.audit import audit_stage
from ptkit.release.pipeline.build import BuiltWheel, build_wheel
from ptkit.release.pipeline.dist import publish
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import check_prerequisites
from ptkit.release.pipeline.provision import provision_toolkit
from ptkit.release.pipeline.repair import (
    RepairedWheel,
    is_cross_built,
    platform_tag,
    repair_wheel,
)
from ptkit.release.pipeline.smoke import smoke_test
from ptkit.release.version_provider import ENV_TORCH, installed_torch

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
    cross_built = is_cross_built(wheel)

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
        if cross_built:
            return None, (
                f"skipped: {platform_tag(wheel)} code cannot run on this machine (a cross "
                "build, a compile and link proof); the release smoke-tests it on that platform"
            )
        result = smoke_test(repaired.wheel, recipe=recipe, project=repo, venv_dir=scratch / "venv")
        output = "\n".join(f"      {line}" for line in result.output.splitlines())
        return None, f"fresh venv, wheel installed with --no-deps; {result.command}\n{output}"

    steps.run("smoke", smoke)
    digest = hashlib.sha256(repaired.wheel.read_bytes()).hexdigest()

    def move() -> tuple[Path, str]:
        final = publish(
            repaired.wheel, dist=dist, variant=recipe.name, keep=_other_builds(recipe, wheel)
        )
        return final, f"{final} ({final.stat().st_size / 1e6:.2f} MB, sha256 {digest})"

    final = steps.run("dist", move)
    return PipelineResult(final, repaired.platform, digest, dict(steps.durations))


def _label(wheel: Path) -> str | None:
    try:
        local = parse_wheel_filename(wheel.name)[1].local
    except InvalidWheelFilename:
        return None
    return str(local) if local is not None else None


def _other_builds(recipe: Recipe, wheel: Path) -> Callable[[Path], bool]:
    """Which wheels in ``dist/<variant>/`` the new ``wheel`` leaves there: those of the
    recipe's other builds (a torch-mode recipe's other torch minors) and of other
    platforms (a cross build's beside this machine's)."""
    others = {b.local_version for b in recipe_builds(recipe)} - {_label(wheel)}
    return lambda old: _label(old) in others or platform_tag(old) != platform_tag(wheel)


def _this_build(recipe: Recipe, repo: Path, torch: str | None) -> TorchBuild:
    """The build of ``recipe`` this Python makes (for ``torch``, when given)."""
    try:
        return build_for_environment(
            recipe, installed_torch(), torch, str(recipe_path(recipe.name, repo / "recipes"))
        )
    except TorchBuildError as exc:
        raise BuildError(
            "build python",
            recipe.name,
            str(exc),
            f"`ptkit build --variant {recipe.name} --torch <minor>` finds or installs a "
            "Python with that torch; --build-python names one",
        ) from exc


def _metadata(wheel: Path) -> tuple[str, list[str]]:
    """The version and the ``Requires-Dist`` lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(archive.read(name).decode("utf-8", "replace"))
    return headers.get("Version", ""), headers.get_all("Requires-Dist") or []


def _torch_pins(requires: list[str]) -> list[str]:
    pins = []
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "torch":
            pins.append(str(requirement.specifier))
    return pins


def _wheel_build_problem(wheel: Path, build: TorchBuild) -> str | None:
    """Why the built ``wheel`` is not ``build``'s: another label, or (torch mode) a
    torch requirement other than the build's pin. None when it is."""
    version, requires = _metadata(wheel)
    label = version.partition("+")[2]
    if label != build.local_version:
        return (
            f"{wheel.name} has the version {version}, but the {build.title} build is "
            f"labelled +{build.local_version}: the project's version must come from ptkit's "
            'version provider (provider = "ptkit.release.version_provider" under '
            "[tool.scikit-build.metadata.version])"
        )
    if build.torch_requirement is None:
        return None
    pin = str(Requirement(build.torch_requirement).specifier)
    pins = _torch_pins(requires)
    if pins != [pin]:
        found = ", ".join(f"torch{p}" for p in pins) or "no torch requirement"
        return (
            f"{wheel.name} requires {found}, but a torch-mode wheel must require exactly "
            f"{build.torch_requirement} (the torch it was built against): let ptkit's provider "
            "write the dependencies ([tool.scikit-build.metadata.dependencies], docs/releasing.md)"
        )
    return None


def _load(variant: str, repo: Path) -> Recipe:
    path = repo / "recipes" / f"{variant}.toml"
    try:
        return load_recipe(variant, repo / "recipes")
    except RecipeError as exc:
        fix = f"correct {path} as the message says" if path.is_file() else f"add {path}"
        raise BuildError("build", variant, f"recipe: {exc}", fix) from exc


def _cross_environment(
    variant: str, platform: str, root: Path, echo: Callable[[str], None]
) -> dict[str, str]:
    from ptkit.cross import CrossError, prepare_cross_build

    try:
        cross = prepare_cross_build(platform, root, echo=echo)
    except CrossError as exc:
        raise BuildError(
            "build", variant, str(exc), "do what the message says, then build again"
        ) from exc
    echo(
        f"ptkit build: cross build for {platform} ({cross.wheel_tag}) with zig, against "
        f"torch at {cross.torch}; a compile and link proof, not repaired or smoke-tested"
    )
    return cross.environment()


def run_pipeline(
    variant: str,
    *,
    repo: Path,
    dist: Path,
    build_root: Path | None = None,
    require_backend: bool = True,
    compiler_cache: str = "auto",
    echo: Callable[[str], None] = print,
    torch: str | None = None,
    cross_platform: str | None = None,
) -> PipelineResult:
    """All five stages for ``recipes/<variant>.toml`` of the project ``repo``.

    ``build_root`` (default ``repo/build``) holds the CMake build folders, the compiler
    cache and the scratch folder ``pipeline-<variant>``, which is kept on failure.
    ``torch`` (``"2.13"``): the torch minor a torch-mode recipe is built for, which must
    be this Python's; None: this Python's torch (or the stable build).
    ``cross_platform`` (``macosx_arm64``, ``win_amd64``): a cross build for that release
    platform (:mod:`ptkit.cross`), in ``<build root>/cross-<platform>/``.
    """
    root = (build_root or repo / "build").resolve()
    scratch: Path | None = None  # made once the build is known
    try:
        recipe = _load(variant, repo)  # once: every stage gets this Recipe
        this = _this_build(recipe, repo, torch)
        if this.torch is not None:
            root = root / this.torch.label
        if cross_platform is not None:
            root = root / f"cross-{cross_platform}"
        scratch = root / f"pipeline-{variant}"
        shutil.rmtree(scratch, ignore_errors=True)
        steps = _Progress(echo)
        env = _reproducible_env(repo)
        epoch = env.get("SOURCE_DATE_EPOCH", "unset (no git: not reproducible)")
        echo(f"ptkit build {this.title}: SOURCE_DATE_EPOCH={epoch}")
        if this.torch is not None:
            env[ENV_TORCH] = str(this.torch)  # the version provider checks it again
        check_prerequisites(variant, STAGES, repo)
        if cross_platform is not None:
            env.update(_cross_environment(variant, cross_platform, root, echo))
        else:
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
            problem = _wheel_build_problem(built.wheel, this)
            if problem is not None:
                raise BuildError(
                    "build", variant, problem, "correct pyproject.toml as the message says"
                )
            return built, f"{built.wheel.name}; {built.cache}"

        built = steps.run("build", build)
        result = finish_wheel(
            built.wheel, recipe, repo=repo, dist=dist, scratch=scratch, progress=steps
        )
    except BuildError as exc:
        exc.untouched = dist / variant
        exc.kept = scratch if scratch is not None and scratch.exists() else None
        raise
    shutil.rmtree(scratch, ignore_errors=True)
    total = sum(result.durations.values())
    echo(f"[done] {result.wheel} in {total:.0f} s")
    return result
