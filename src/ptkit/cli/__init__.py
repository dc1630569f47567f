"""The ``ptkit`` command. Heavy imports (torch) happen inside the commands that need
them (``explain``, ``profile``); the others never import torch."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["main"]


def _print_cmake_dir(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    # The CMake package ships inside the ptkit package, in the source tree as installed.
    click.echo(Path(__file__).resolve().parent.parent / "cmake")
    ctx.exit(0)


F = TypeVar("F", bound=Callable[..., Any])


def _machine_probe_options(command: F) -> F:
    """``--root`` and ``--timeout``, the same for every command that probes the machine
    (``select``, ``doctor``): ``ptkit.hardware.detect``'s two parameters."""
    command = click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=0.1),
        default=3.0,
        show_default=True,
        help="Seconds each probe (nvidia-smi, NVML, a subprocess) may take.",
    )(command)
    return click.option(
        "--root",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=Path("/"),
        show_default=True,
        help="Read /proc and /sys under this folder (a recorded machine tree); NVML is asked "
        "only for /, nvidia-smi is the one on PATH (put a recorded one first).",
    )(command)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ptkit")
@click.option(
    "--cmake-dir",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_cmake_dir,
    help="Print the folder of ptkit's CMake package (for -Dptkit_DIR=…) and exit.",
)
def main() -> None:
    """Build, ship and load PyTorch extension kernels for every accelerator."""


def _import_packages() -> dict[str, str]:
    """Import every installed package of the ptkit.packages group: its __init__ loads its
    libraries (load_package is idempotent, so one that does not call it is loaded here
    all the same). Returns the ones that failed, with why."""
    import importlib

    import ptkit.runtime as runtime

    problems: dict[str, str] = {}
    for name, module in runtime.installed_packages().items():
        try:
            importlib.import_module(module)
            runtime.load_package(module)
        except Exception as exc:  # a broken package must not hide the others
            problems[name] = f"import {module} failed: {type(exc).__name__}: {exc}"
    return problems


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def explain(as_json: bool) -> None:
    """Which implementation serves each op on each device type, and why: for every
    installed package that uses ptkit (the ptkit.packages entry-point group)."""
    import ptkit
    import ptkit.runtime as runtime

    problems = _import_packages()
    if as_json:
        payload = {
            "ptkit": ptkit.__version__,
            "packages": [
                *(
                    {**p.to_json(), "routes": [r.to_json() for r in runtime.explain(p.name)]}
                    for p in runtime.package_loads()
                ),
                *({"name": name, "error": error} for name, error in problems.items()),
            ],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(runtime.format_explain())
        for name, error in problems.items():
            click.echo(f"error: {name}: {error}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def profile(as_json: bool) -> None:
    """What this machine and torch can do: devices, torch.compile, graph capture, the
    distributed backend, Inductor GEMM backends, and which implementation serves each op."""
    import ptkit.runtime

    _import_packages()
    runtime_profile = ptkit.runtime.profile()
    if as_json:
        click.echo(json.dumps(runtime_profile.to_json(), indent=2))
    else:
        click.echo(runtime_profile.format())


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--cuobjdump",
    envvar="PTKIT_CUOBJDUMP",
    help="cuobjdump to list CUDA fatbinaries with [env PTKIT_CUOBJDUMP; default: pip's, then PATH].",
)
def inspect(path: Path, as_json: bool, cuobjdump: str | None) -> None:
    """What a wheel or native library contains: manifest, links, symbols, GPU code.

    Exits with status 1 when the audit finds a problem.
    """
    try:
        from ptkit.release.inspection import inspect_path, reports_json
    except ImportError as exc:  # pyelftools is an extra
        raise click.ClickException(f"{exc}; install it with: pip install 'ptkit[test]'") from exc

    reports = inspect_path(path, cuobjdump=cuobjdump)
    if not reports:
        raise click.ClickException(f"{path} contains no native library")
    click.echo(reports_json(reports) if as_json else "\n\n".join(r.format() for r in reports))
    if any(r.problems for r in reports):
        sys.exit(1)


@main.command()
@click.option("--variant", required=True, help="Recipe to build: recipes/<variant>.toml.")
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path.cwd,
    show_default="current directory",
    help="The project to build (its pyproject.toml and recipes/).",
)
@click.option(
    "--dist",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("dist"),
    show_default=True,
    help="Finished wheels go to DIST/<variant>/.",
)
@click.option(
    "--build-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    show_default="SOURCE/build",
    help="CMake build folders, the scratch folder and the compiler cache go here.",
)
@click.option(
    "--allow-missing-backend",
    is_flag=True,
    help="Build even when the variant's GPU toolchain is missing (a CPU-only wheel).",
)
@click.option(
    "--compiler-cache",
    type=click.Choice(["auto", "sccache", "ccache", "none"]),
    default="auto",
    show_default=True,
    help="Compiler launcher: auto = ccache if installed (it wraps nvcc too), else sccache.",
)
def build(
    variant: str,
    source: Path,
    dist: Path,
    build_root: Path | None,
    allow_missing_backend: bool,
    compiler_cache: str,
) -> None:
    """Build one variant's wheel here as the release does: build, repair, audit, smoke, dist.

    Each stage is printed with its duration; a failure names the stage, the cause and
    the fix, exits with status 1 and leaves DIST untouched. SOURCE_DATE_EPOCH defaults
    to the last commit's time (git log -1 --format=%ct), so rebuilding a commit gives
    the same bytes. ccache (or else sccache) is used when installed; CCACHE_DIR defaults
    to BUILD_ROOT/ccache (SCCACHE_DIR to BUILD_ROOT/sccache).
    """
    from ptkit.release.pipeline import BuildError, run_pipeline

    try:
        run_pipeline(
            variant,
            repo=source.resolve(),
            dist=dist,
            build_root=build_root,
            require_backend=not allow_missing_backend,
            compiler_cache=compiler_cache,
            echo=click.echo,
        )
    except BuildError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)


@main.command()
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 naming each generated file that differs from what recipes/ generates.",
)
@click.option(
    "--write",
    is_flag=True,
    help="Regenerate ci/cibuildwheel/<variant>.toml, .github/workflows/release.yml and "
    "recipes/recipe.schema.json from recipes/.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path.cwd,
    show_default="current directory",
    help="The project whose recipes/ make the plan.",
)
def matrix(check: bool, write: bool, as_json: bool, source: Path) -> None:
    """The release plan: variant x platform x CPython (cp310-cp315, cp315t).

    One py3-none wheel per (variant, platform), built once with the first CPython and
    tested on every CPython by cibuildwheel. --write regenerates the files made from
    the recipes; --check exits 1 while a committed one is stale (exit 2: invalid recipes).
    """
    from ptkit.release.matrix import matrix_command

    status = matrix_command(
        source.resolve(),
        check=check,
        write=write,
        as_json=as_json,
        echo=click.echo,
        echo_err=lambda message: click.echo(message, err=True),
    )
    if status:
        sys.exit(status)


@main.command()
@click.argument("name")
@click.option(
    "--backends",
    default="cpu",
    show_default=True,
    help="Comma list of backends to write an example op for: cpu, cuda (cpu is always in).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=None,
    show_default="./NAME",
    help="Where to write the project (missing or empty).",
)
def new(name: str, backends: str, directory: Path | None) -> None:
    """Write a new extension project NAME that ptkit builds, ships and loads.

    pyproject.toml (scikit-build-core, ptkit), a CMakeLists.txt of a few lines, one
    example op (NAME::scale_add) per backend with its reference and fake kernel, the
    recipes, tests, and the cibuildwheel configuration and release workflow generated
    from the recipes. Nothing is written unless all of it is (exit 1 with the reason).
    """
    from ptkit.scaffold import ScaffoldError, create_project

    try:
        root, files = create_project(name, backends=backends.split(","), directory=directory)
    except ScaffoldError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"ptkit new: wrote {len(files)} files into {root}:")
    click.echo("\n".join(f"  {f}" for f in files))
    click.echo(
        f"Next: cd {root} && ptkit build --variant cpu && pip install dist/cpu/{name}-*.whl "
        "&& pytest (or: make test)"
    )


@main.group()
def index() -> None:
    """The package index: one PEP 503/691/658 index per accelerator variant."""


@index.command("build")
@click.argument("wheels", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Index root: <out>/<variant>/simple/ is written for each wheel's variant.",
)
@click.option(
    "--base-url",
    envvar="PTKIT_INDEX_BASE_URL",
    help="Absolute URL the files will be served from (default: relative links). "
    "Env: PTKIT_INDEX_BASE_URL.",
)
@click.option(
    "--recipes",
    "recipes",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Recipes that map variants to index paths and labels (default: ptkit's own).",
)
@click.option(
    "--variant-metadata",
    is_flag=True,
    help="Also write WheelNext (PEP 825, draft) variant wheels and {name}-{version}-variants.json.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what changed as JSON.")
def index_build(
    wheels: tuple[Path, ...],
    out: Path,
    base_url: str | None,
    recipes: Path | None,
    variant_metadata: bool,
    as_json: bool,
) -> None:
    """Add WHEELS to the per-variant indexes under --out.

    The variant of each wheel is read from its manifests (else its version label).
    Existing files stay; rebuilding with the same wheels changes nothing; each variant's
    new index replaces the old one atomically; concurrent runs take turns. A malformed
    or self-contradicting wheel is refused (exit 1) and nothing is written.
    """
    from ptkit.index import IndexBuildError, build_index
    from ptkit.selection import recipes_dir

    try:
        results = build_index(
            list(wheels),
            out,
            base_url=base_url,
            recipes_dir=recipes if recipes is not None else recipes_dir(),
            variant_metadata=variant_metadata,
        )
    except IndexBuildError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
        return
    for r in results:
        state = f"{len(r.added)} added" if r.changed else "unchanged"
        click.echo(f"{r.index_path}/simple/: {len(r.files)} files, {state} ({r.generation})")
        for name in r.added:
            click.echo(f"  + {name}")


@index.command("serve")
@click.argument("root", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=int, help="0 picks a free port.")
def index_serve(root: Path, host: str, port: int) -> None:
    """Serve an index folder over HTTP (HTML and PEP 691 JSON, chosen by Accept)."""
    from ptkit.index import IndexServer

    try:
        server = IndexServer(root, host, port)
    except OSError as exc:
        click.echo(f"ptkit index serve: cannot listen on {host}:{port}: {exc}", err=True)
        sys.exit(1)
    variants = sorted(p.name for p in root.iterdir() if (p / "simple").is_dir())
    click.echo(f"Serving {root} at {server.url}/ (Ctrl-C stops)", err=True)
    for variant in variants:
        click.echo(f"  pip install <project> --index-url {server.url}/{variant}/simple", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@main.command("select")
@click.option(
    "--index-url",
    envvar="PTKIT_INDEX_URL",
    help="Root of ptkit's index (<root>/<variant>/simple); the commands need it. "
    "Env: PTKIT_INDEX_URL.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema_version 1).")
@_machine_probe_options
def select_command(index_url: str | None, as_json: bool, root: Path, timeout_s: float) -> None:
    """Which variant fits this machine, and the pip and uv commands that install it.

    Reads the NVIDIA driver and each GPU's compute capability, AMD gfx targets (KFD
    topology), Intel GPUs (PCI ids) and Apple silicon without importing torch, then
    picks the variant whose recipe targets cover every device. PTKIT_VARIANT overrides.
    Exit 2 on a bad option or override.
    """
    from ptkit.selection import SelectionError, render_text, select

    try:
        result = select(root, index_url=index_url, timeout_s=timeout_s)
    except SelectionError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(render_text(result).rstrip("\n"))


def _ptkit_version(facts: Any) -> str:
    """The installed ptkit's version (with its variant label), without torch and without
    importlib.metadata's scan of every installed distribution (~40 ms of the doctor's
    budget): the packages probe's answer, else the dist-info beside this package."""
    for package in getattr(facts, "packages", None) or ():
        if package.name == "ptkit":
            return str(package.version)
    site = Path(__file__).resolve().parents[1]
    for dist_info in sorted(site.glob("ptkit-*.dist-info")):
        try:
            for line in (dist_info / "METADATA").read_text(encoding="utf-8").splitlines():
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
        except OSError:
            continue
    from ptkit._version import __version__

    return f"{__version__} (not installed)"


def _write_report(text: str) -> None:
    """Write to stdout; a stream that cannot take it (a full disk, a closed pipe) is the
    doctor failing (exit 2), said in one line, not a traceback at interpreter exit."""
    import os

    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")  # a C-locale stream: no UnicodeEncodeError
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        # Python would flush the stream again at exit and print a second error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        click.echo(f"ptkit doctor: cannot write the report to stdout: {exc}", err=True)
        sys.exit(2)


def _list_checks() -> str:
    from ptkit.doctor.checks import CHECKS

    lines = [f"{'ID':<8}{'severity':<9}{'name':<32}{'needs':<18}summary"]
    for check in CHECKS:
        needs = ",".join(check.needs) or "-"
        lines.append(
            f"{check.id:<8}{check.severity.value:<9}{check.name:<32}{needs:<18}{check.summary}"
        )
    return "\n".join(lines) + "\n"


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema_version 1).")
@click.option(
    "--build", is_flag=True, help="Also probe the build toolchains and what each could build."
)
@click.option(
    "--smoke",
    is_flag=True,
    help="Also run every op on every device against its reference, in a child process "
    "that imports torch (the report itself never does).",
)
@click.option(
    "--select",
    "select_ids",
    multiple=True,
    metavar="ID",
    help="Run only these checks (IDs or names; repeat or comma-separate).",
)
@click.option(
    "--ignore",
    "ignore_ids",
    multiple=True,
    metavar="ID",
    help="Do not run these checks (IDs or names; repeat or comma-separate).",
)
@_machine_probe_options
@click.option(
    "--smoke-timeout",
    "smoke_timeout_s",
    type=click.FloatRange(min=1.0),
    default=120.0,
    show_default=True,
    help="Seconds the --smoke child may take before it is killed.",
)
@click.option("--list-checks", is_flag=True, help="List the checks (ID, severity, needs) and exit.")
def doctor(
    as_json: bool,
    build: bool,
    smoke: bool,
    select_ids: tuple[str, ...],
    ignore_ids: tuple[str, ...],
    root: Path,
    timeout_s: float,
    smoke_timeout_s: float,
    list_checks: bool,
) -> None:
    """Check this environment (Python, OS, torch, GPUs and drivers, the installed ptkit)
    and say how to fix each problem found. Does not import torch (--smoke does, in a
    child process).

    Exit status: 0 no error or warning finding, 1 at least one, 2 the doctor itself
    failed (or a usage error). PTKIT_DOCTOR_DEBUG=1 shows a traceback instead of the
    one-line report of a doctor bug.
    """
    try:
        from ptkit.doctor import bug_message, debug_enabled, run_doctor
        from ptkit.doctor.checks import UnknownCheckError
    except Exception as exc:  # a broken install of the doctor itself
        if _debug_env():
            raise
        click.echo(_import_bug(exc), err=True)
        sys.exit(2)

    if list_checks:
        _write_report(_list_checks())
        return
    try:
        result = run_doctor(
            root=root,
            build=build,
            smoke=smoke,
            select=select_ids,
            ignore=ignore_ids,
            timeout_s=timeout_s,
            smoke_timeout_s=smoke_timeout_s,
        )
    except UnknownCheckError as exc:
        raise click.UsageError(str(exc)) from exc

    version = _ptkit_version(result.facts)
    try:
        if as_json:
            from ptkit.doctor.report import json_document

            document = json_document(
                result.facts,
                result.findings,
                result.skipped,
                result.exit_code,
                version=version,
                error=result.error,
            )
            text = json.dumps(document, indent=2) + "\n"
        elif result.error is not None:
            text = ""
        else:
            from ptkit.doctor.report import render_text, use_colour

            assert result.facts is not None
            text = render_text(
                result.facts,
                result.findings,
                result.skipped,
                result.exit_code,
                version=version,
                colour=use_colour(sys.stdout),
            )
    except Exception as exc:
        if debug_enabled():
            raise
        click.echo(bug_message("rendering the report", exc), err=True)
        sys.exit(2)
    if result.error is not None:
        click.echo(result.error, err=True)
    _write_report(text)
    sys.exit(result.exit_code)


def _debug_env() -> bool:
    import os

    return os.environ.get("PTKIT_DOCTOR_DEBUG", "").strip() not in ("", "0")


def _import_bug(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return (
        f"ptkit doctor: internal error while importing ptkit.doctor: {type(exc).__name__}: "
        f"{text}; this is a bug in ptkit doctor (or a damaged install: pip install "
        "--force-reinstall ptkit): please report it to ptkit's maintainers with the output "
        "of `PTKIT_DOCTOR_DEBUG=1 ptkit doctor`"
    )


if __name__ == "__main__":
    main()
