"""How a check is declared: once, beside its body, with everything about it.

::

    @check("PTK101", "torch-missing", Severity.ERROR,
           summary="torch is not installed",
           fix="install torch (pick the build at https://pytorch.org/get-started/locally/)")
    def torch_missing(torch: TorchInstall, machine: Machine | None = None) -> Iterator[Problem]:
        if torch.location is None:
            yield Problem("torch is not installed …")

The body's parameters name the ``Facts`` fields it reads, and they are passed in by name
(repo-review's "fixtures"): a parameter without a default is a fact the check needs (the
check is skipped, not run, when that fact is missing: its probe failed or was not run),
one with a default is used when it is there. The body yields a ``Problem`` per thing
wrong: its message, and a fix only when it knows a more specific one than the check's.
The ID and severity are the check's; a ``Finding`` is the two together.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from types import ModuleType

from ptkit.doctor.model import Facts, Severity

__all__ = ["Check", "CheckCrashed", "Finding", "Problem", "check", "checks_in"]

_FACT_FIELDS = frozenset(f.name for f in dataclasses.fields(Facts))


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing a check found wrong."""

    message: str
    """One line: what is wrong, with the facts that show it."""
    fix: str | None = None
    """One line, when this problem has a more specific fix than the check's own."""
    severity: Severity | None = None
    """Only to raise the check's severity for this problem (PTK401: two CUDA majors)."""


@dataclasses.dataclass(frozen=True)
class Check:
    """One check: made by ``@check`` from its body."""

    id: str
    """``PTK101``: stable, never reused, never renumbered."""
    name: str
    """``torch-missing``: what ``--select``/``--ignore`` accept besides the ID."""
    severity: Severity
    summary: str
    """One line for ``ptkit doctor --list-checks`` and the docs."""
    fix: str
    """One line: what to do about a problem it finds (unless the problem says better)."""
    needs: tuple[str, ...]
    """The ``Facts`` fields it cannot run without."""
    uses: tuple[str, ...]
    """The ``Facts`` fields it reads when they are there."""
    body: Callable[..., Iterable[Problem]] = dataclasses.field(repr=False, compare=False)

    def missing(self, facts: Facts) -> str | None:
        """The first fact it needs that ``facts`` lacks (it is skipped then), or None."""
        return next((need for need in self.needs if getattr(facts, need) is None), None)

    def run(self, facts: Facts) -> list[Finding]:
        """Its findings on ``facts`` (which have what it needs)."""
        given = {name: getattr(facts, name) for name in (*self.needs, *self.uses)}
        return [Finding(self, problem) for problem in self.body(**given)]


@dataclasses.dataclass(frozen=True)
class Finding:
    """A problem a check found: the check's ID, name and severity, the problem's words."""

    check: Check
    problem: Problem

    @property
    def id(self) -> str:
        return self.check.id

    @property
    def severity(self) -> Severity:
        return self.problem.severity or self.check.severity

    @property
    def message(self) -> str:
        return self.problem.message

    @property
    def fix(self) -> str:
        return self.problem.fix or self.check.fix

    def to_json(self) -> dict[str, str]:
        return {
            "check": self.id,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
        }


class CheckCrashed(RuntimeError):
    """A check raised: a bug in ``ptkit doctor``, named by the check."""

    def __init__(self, found: Check, exc: Exception) -> None:
        super().__init__(f"check {found.id} ({found.name}) raised {type(exc).__name__}: {exc}")
        self.check_id = found.id


def check(
    id: str,
    name: str,
    severity: Severity,
    *,
    summary: str,
    fix: str,
) -> Callable[[Callable[..., Iterable[Problem]]], Check]:
    """Declare the check whose body follows (see the module docstring)."""

    def declare(body: Callable[..., Iterable[Problem]]) -> Check:
        needs: list[str] = []
        uses: list[str] = []
        for parameter in inspect.signature(body).parameters.values():
            if parameter.name not in _FACT_FIELDS:
                raise TypeError(
                    f"check {id} ({body.__name__}): parameter {parameter.name!r} is not a "
                    f"fact; expected some of {', '.join(sorted(_FACT_FIELDS))}"
                )
            optional = parameter.default is not inspect.Parameter.empty
            (uses if optional else needs).append(parameter.name)
        return Check(id, name, severity, summary, fix, tuple(needs), tuple(uses), body)

    return declare


def checks_in(*modules: ModuleType) -> tuple[Check, ...]:
    """Every check declared in ``modules``, by ID; a repeated ID or name is a bug here."""
    by_id: dict[str, Check] = {}
    names: set[str] = set()
    for module in modules:
        for value in vars(module).values():
            if not isinstance(value, Check):
                continue
            if value.id in by_id or value.name in names:
                raise ValueError(
                    f"two doctor checks have the ID {value.id} or the name {value.name} "
                    f"(the second in {module.__name__})"
                )
            by_id[value.id] = value
            names.add(value.name)
    return tuple(by_id[key] for key in sorted(by_id))
