"""``ptkit doctor``: a fast environment check that never crashes and always says the fix.

Flow: ``collect_facts`` (``ptkit.doctor.collect``: probes of Python, the OS, torch's
installed files, the accelerators, the installed packages built with ptkit, each
isolated with a timeout) → ``run_checks`` (``ptkit.doctor.checks``: checks with stable
IDs ``PTK1xx``…``PTK9xx``, each declared once with its severity, fix and the facts it
needs) → ``report`` (text or the versioned JSON document). ``--smoke`` adds a child
process that imports torch and every package built with ptkit, checks how each loaded,
and runs ptkit-ops' ops on every device against their references
(``ptkit.doctor.smoke``).

The doctor's process never imports torch (a missing or crashing torch is a finding,
and the default report stays well under a second); it is standard library only plus
``ptkit.hardware``/``ptkit.selection``/``ptkit.backends``/the loader's rule modules,
valid on CPython 3.10+.

Exit codes (``run_doctor(...).exit_code``):

- 0: no finding of severity error or warning (info findings never count);
- 1: at least one error **or warning** finding: warnings are problems too (something
  runs slower or not as intended, e.g. the reference serves a GPU); ``--ignore`` one
  to accept it;
- 2: the doctor itself failed: a bug (an exception anywhere in it: one line naming it
  and asking for a report; ``PTKIT_DEBUG=1``, or its older name ``PTKIT_DOCTOR_DEBUG=1``,
  shows the traceback), an unknown
  check in ``--select``/``--ignore``, or a report it could not write.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ptkit.doctor.model import Facts, Severity
from ptkit.tracebacks import DEBUG_ENV, debug_enabled

if TYPE_CHECKING:
    from ptkit.doctor.checks.base import Finding

__all__ = [
    "DoctorResult",
    "UnknownCheckError",
    "bug_message",
    "debug_enabled",
    "exit_code_for",
    "run_doctor",
]


class UnknownCheckError(ValueError):
    """``--select``/``--ignore`` named a check that does not exist (a usage error)."""


@dataclasses.dataclass(frozen=True)
class DoctorResult:
    facts: Facts | None
    findings: list[Finding]
    skipped: list[tuple[str, str]]
    exit_code: int
    error: str | None = None
    """The one line saying why the doctor failed (exit code 2)."""


def exit_code_for(findings: Sequence[Finding]) -> int:
    """1 when any finding is an error or a warning, else 0 (see the module docstring)."""
    return int(any(f.severity in (Severity.ERROR, Severity.WARNING) for f in findings))


def bug_message(where: str, exc: BaseException) -> str:
    """One line for an unexpected exception: what failed, and to report it."""
    text = " ".join(str(exc).split())[:300]
    return (
        f"ptkit doctor: internal error while {where}: {type(exc).__name__}: {text}; this is a "
        "bug in ptkit doctor: please report it to ptkit's maintainers with the output of "
        f"`{DEBUG_ENV}=1 ptkit doctor`"
    )


def _default_collect(
    *, root: Path, build: bool, timeout_s: float, environ: Mapping[str, str] | None
) -> Facts:
    from ptkit.doctor.collect import collect_facts

    return collect_facts(root=root, build=build, timeout_s=timeout_s, environ=environ)


def run_doctor(
    *,
    root: Path = Path("/"),
    build: bool = False,
    smoke: bool = False,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    timeout_s: float = 3.0,
    smoke_timeout_s: float | None = None,
    environ: Mapping[str, str] | None = None,
    collect: Callable[..., Facts] | None = None,
    run_smoke: Callable[[float], object] | None = None,
) -> DoctorResult:
    """Collect the facts, add the ``--smoke`` run, run the checks, decide the exit code.

    ``select``/``ignore``: check IDs or names (comma lists allowed); an unknown one
    raises ``UnknownCheckError`` before anything is probed (a usage error), and so does
    a timeout that is not a finite number of seconds > 0 (``ValueError``).
    ``collect`` and ``run_smoke`` replace the probes and the smoke child (tests give
    hand-made facts). Any other exception is a doctor bug: exit code 2 with
    ``bug_message`` (re-raised when ``PTKIT_DEBUG=1``)."""
    try:
        from ptkit.doctor.checks import resolve_ids, run_checks
    except Exception as exc:  # a damaged install of the doctor itself
        if debug_enabled(environ):
            raise
        return DoctorResult(None, [], [], 2, bug_message("importing the checks", exc))

    resolve_ids(select)  # UnknownCheckError: the caller's mistake, not a doctor bug
    resolve_ids(ignore)
    for name, seconds in (("timeout_s", timeout_s), ("smoke_timeout_s", smoke_timeout_s)):
        # NaN or inf would wait forever or overflow a thread's join (the caller's mistake).
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(
                f"run_doctor: {name} must be a finite number of seconds > 0, got {seconds!r}"
            )
    where = "collecting the facts"
    facts: Facts | None = None
    try:
        collector = collect or _default_collect
        facts = collector(root=root, build=build, timeout_s=timeout_s, environ=environ)
        if smoke:
            where = "running the --smoke child"
            if run_smoke is None:
                from ptkit.doctor.smoke import DEFAULT_TIMEOUT_S
                from ptkit.doctor.smoke import run_smoke as default_smoke

                smoke_facts = default_smoke(smoke_timeout_s or DEFAULT_TIMEOUT_S)
            else:
                smoke_facts = run_smoke(smoke_timeout_s or 0.0)  # type: ignore[assignment]
            facts = dataclasses.replace(facts, smoke=smoke_facts)
        where = "running the checks"
        findings, skipped = run_checks(facts, select, ignore)
    except Exception as exc:
        if debug_enabled(environ):
            raise
        return DoctorResult(facts, [], [], 2, bug_message(where, exc))
    return DoctorResult(facts, findings, skipped, exit_code_for(findings))
