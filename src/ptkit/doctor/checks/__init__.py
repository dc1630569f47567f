"""``ptkit doctor``'s checks, one module per area, and the registry built from them.

Each check is declared once, beside its body (``base.check``): its stable ID, name,
severity, one-line fix and the facts it needs. IDs by group, one module each:

- ``torch_python``: ``PTK1xx`` torch and Python;
- ``devices``: ``PTK2xx`` drivers and devices;
- ``packages``: ``PTK3xx`` the installed packages built with ptkit and the ``--smoke`` run;
- ``libraries``: ``PTK4xx`` shared libraries and distributions beside torch;
- ``probes``: ``PTK9xx`` the doctor's own probes.

A new check is a decorated function in its area's module; ``CHECKS`` finds it. Standard
library only, valid on CPython 3.10; no torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from ptkit.doctor import UnknownCheckError
from ptkit.doctor.checks import devices, libraries, packages, probes, torch_python
from ptkit.doctor.checks.base import Check, CheckCrashed, Finding, Problem, check, checks_in
from ptkit.doctor.model import Facts

__all__ = [
    "CHECKS",
    "Check",
    "CheckCrashed",
    "Finding",
    "Problem",
    "UnknownCheckError",
    "check",
    "check_by_id",
    "resolve_ids",
    "run_checks",
]

CHECKS: tuple[Check, ...] = checks_in(torch_python, devices, packages, libraries, probes)

_BY_ID = {c.id: c for c in CHECKS}
_BY_NAME = {c.name: c for c in CHECKS}


def check_by_id(check_id: str) -> Check:
    return _BY_ID[check_id]


def resolve_ids(names: Iterable[str]) -> tuple[str, ...]:
    """IDs (``PTK101``, any case) or names (``torch-missing``), also comma lists, as IDs;
    an unknown one raises ``UnknownCheckError`` with a did-you-mean and the valid IDs."""
    ids: list[str] = []
    for raw in names:
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            if item.upper() in _BY_ID:
                ids.append(item.upper())
            elif item.lower() in _BY_NAME:
                ids.append(_BY_NAME[item.lower()].id)
            else:
                close = difflib.get_close_matches(item.upper(), list(_BY_ID), n=1)
                close = close or difflib.get_close_matches(item.lower(), [*_BY_ID, *_BY_NAME], n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise UnknownCheckError(
                    f"ptkit doctor: unknown check {item!r}{hint}; valid checks: "
                    f"{', '.join(_BY_ID)} (`ptkit doctor --list-checks` describes them)"
                )
    return tuple(dict.fromkeys(ids))


def run_checks(
    facts: Facts, select: Sequence[str] = (), ignore: Sequence[str] = ()
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The findings of every check (``select``: only these; ``ignore``: not these), and
    the checks skipped as (ID, the missing fact). Unknown IDs raise ``UnknownCheckError``.

    A check that raises is a bug in the doctor: ``CheckCrashed`` names it (``run_doctor``
    turns it into exit code 2 with one line)."""
    chosen = set(resolve_ids(select)) if select else set(_BY_ID)
    chosen -= set(resolve_ids(ignore))
    findings: list[Finding] = []
    skipped: list[tuple[str, str]] = []
    for found in CHECKS:
        if found.id not in chosen:
            continue
        missing = found.missing(facts)
        if missing is not None:
            skipped.append((found.id, missing))
            continue
        try:
            findings.extend(found.run(facts))
        except Exception as exc:
            raise CheckCrashed(found, exc) from exc
    return findings, skipped
