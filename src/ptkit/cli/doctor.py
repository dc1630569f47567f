"""``ptkit doctor``: the command line of ``ptkit.doctor`` (which holds the doctor itself:
its probes, checks and report)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ptkit.cli.options import Seconds, machine_probe_options


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (schema_version 1).")
@click.option(
    "--build", is_flag=True, help="Also probe the build toolchains and what each could build."
)
@click.option(
    "--smoke",
    is_flag=True,
    help="Also import every package built with ptkit and run ptkit-ops' ops on every device "
    "against their references, in a child process that imports torch (the report itself "
    "never does).",
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
@machine_probe_options
@click.option(
    "--smoke-timeout",
    "smoke_timeout_s",
    type=Seconds(minimum=1.0),
    default=120.0,
    show_default=True,
    help="Seconds the --smoke child may take before it is killed.",
)
@click.option(
    "--list-checks", is_flag=True, help="List the checks (ID, severity, needs, fix) and exit."
)
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
    """Check this environment (Python, OS, torch, GPUs and drivers, the installed packages
    built with ptkit) and say how to fix each problem found. Does not import torch
    (--smoke does, in a child process).

    Exit status: 0 no error or warning finding, 1 at least one, 2 the doctor itself
    failed (or a usage error). PTKIT_DEBUG=1 shows a traceback instead of the one-line
    report of a doctor bug.
    """
    # A doctor that cannot even be imported (a damaged install) is the CLI boundary's
    # one-line internal error, exit 2.
    from ptkit._version import __version__
    from ptkit.doctor import run_doctor
    from ptkit.doctor.report import write_report

    def write(text: str) -> None:
        problem = write_report(text)
        if problem is not None:
            click.echo(problem, err=True)
            sys.exit(2)

    if list_checks:
        from ptkit.doctor.checks import CHECKS
        from ptkit.doctor.report import render_check_list

        write(render_check_list(CHECKS))
        return
    # An unknown check in --select/--ignore (UnknownCheckError) is a usage error: the
    # CLI boundary says it, exit 2.
    result = run_doctor(
        root=root,
        build=build,
        smoke=smoke,
        select=select_ids,
        ignore=ignore_ids,
        timeout_s=timeout_s,
        smoke_timeout_s=smoke_timeout_s,
    )

    # A failure while rendering is a doctor bug: the CLI boundary's one line, exit 2.
    if as_json:
        from ptkit.doctor.report import json_document

        document = json_document(
            result.facts,
            result.findings,
            result.skipped,
            result.exit_code,
            version=__version__,
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
            version=__version__,
            colour=use_colour(sys.stdout),
        )
    if result.error is not None:
        click.echo(result.error, err=True)
    write(text)
    sys.exit(result.exit_code)
