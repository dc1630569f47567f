"""torch's own refusals of ``torch.compile``, read from the installed torch's source.

torch refuses ``torch.compile`` in two places: ``compile()`` in ``torch/__init__.py``
and ``check_if_dynamo_supported()`` in ``torch/_dynamo/eval_frame.py``, each a chain of
``if <condition>: raise RuntimeError("<message>")`` over the interpreter's facts
(``sys.version_info``, ``sys.platform``, ``sysconfig.get_config_var("Py_GIL_DISABLED")``).
The conditions move between releases (torch 2.14 refuses Python 3.15+, torch 2.15 moved
that to 3.16+), so ptkit reads them from the torch that is installed instead of keeping
a table of one release: ``read_guards(torch_root)`` parses those two functions without
importing torch, and ``Guard.applies(facts)`` evaluates a condition over given facts
(this interpreter's, or another one's for a prediction).

Only the shapes torch uses are understood: comparisons of ``sys.version_info`` (or a
slice or index of it) with tuples and numbers, ``sys.platform`` with strings (``==``,
``!=``, ``in``, ``.startswith(…)``), the ``Py_GIL_DISABLED`` config variable, and
``and``/``or``/``not``. A condition with anything else is kept as *unreadable*, with its
line: it is reported, and ``ptkit.compile`` then learns the answer by asking torch.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Sequence
from pathlib import Path

from ptkit.loading.files import read_regular_file

__all__ = [
    "GUARD_FUNCTIONS",
    "Guard",
    "GuardFacts",
    "TorchGuards",
    "UnreadableGuard",
    "read_guards",
]

# (file under torch's root, function): where torch checks before compiling, in the order
# torch.compile meets them.
GUARD_FUNCTIONS: tuple[tuple[str, str], ...] = (
    ("__init__.py", "compile"),
    ("_dynamo/eval_frame.py", "check_if_dynamo_supported"),
)
_MAX_SOURCE_BYTES = 16 << 20  # torch/__init__.py is ~100 KB


@dataclasses.dataclass(frozen=True)
class GuardFacts:
    """What the conditions may look at."""

    python: tuple[int, int, int]
    gil_disabled: bool
    platform: str


class _Unreadable(Exception):
    """A condition uses something this reader does not evaluate."""


@dataclasses.dataclass(frozen=True)
class Guard:
    """One ``if <condition>: raise RuntimeError(message)`` of torch's."""

    source: str  # "torch/__init__.py:3182"
    condition: str  # the condition's source text
    message: str  # torch's message (an f-string's fields as {…})
    _test: ast.expr = dataclasses.field(repr=False, compare=False)

    def applies(self, facts: GuardFacts) -> bool:
        return bool(_evaluate(self._test, facts))


@dataclasses.dataclass(frozen=True)
class UnreadableGuard:
    source: str
    condition: str
    why: str


@dataclasses.dataclass(frozen=True)
class TorchGuards:
    """torch's refusals as read from one installed torch."""

    torch_root: Path
    guards: tuple[Guard, ...]
    unreadable: tuple[UnreadableGuard, ...]
    missing: tuple[str, ...]  # guard functions not found ("_dynamo/eval_frame.py:check…")

    def refusal(self, facts: GuardFacts) -> Guard | None:
        """The first of torch's refusals that applies to ``facts``, as torch checks them."""
        return next((g for g in self.guards if g.applies(facts)), None)

    def describe(self) -> str:
        """Where the rules came from, for a reason line."""
        where = ", ".join(f"{path}:{fn}()" for path, fn in GUARD_FUNCTIONS)
        return f"torch's own checks ({where} under {self.torch_root})"


def read_guards(torch_root: Path) -> TorchGuards:
    """Parse torch's guard functions under ``torch_root`` (the folder holding torch's
    ``__init__.py``); never imports torch, never raises for what it cannot read."""
    root = Path(torch_root)
    stamp = tuple(_mtime(root / path) for path, _ in GUARD_FUNCTIONS)
    return _read_guards(root, stamp)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


@functools.lru_cache(maxsize=8)
def _read_guards(root: Path, _stamp: tuple[int, ...]) -> TorchGuards:
    guards: list[Guard] = []
    unreadable: list[UnreadableGuard] = []
    missing: list[str] = []
    for relative, function in GUARD_FUNCTIONS:
        label = f"torch/{relative}"
        found = _function_body(root / relative, function)
        if found is None:
            missing.append(f"{label}:{function}")
            continue
        body, lines, parameters = found
        for test, message, line in _raising_branches(body):
            if any(isinstance(n, ast.Name) and n.id in parameters for n in ast.walk(test)):
                continue  # a check of torch.compile's arguments, not of the environment
            condition = _source_segment(lines, test) or ast.dump(test)
            condition = " ".join(condition.split())
            source = f"{label}:{line}"
            try:
                _evaluate(test, GuardFacts((3, 11, 0), False, "linux"))  # readable at all?
            except _Unreadable as exc:
                unreadable.append(UnreadableGuard(source, condition, str(exc)))
                continue
            guards.append(Guard(source, condition, message, test))
    return TorchGuards(root, tuple(guards), tuple(unreadable), tuple(missing))


def _function_body(
    path: Path, name: str
) -> tuple[Sequence[ast.stmt], list[bytes], frozenset[str]] | None:
    """The statements of the last top-level ``def name`` in ``path`` (``compile`` has
    typing overloads before its definition), the file's lines and the parameters' names."""
    try:
        data = read_regular_file(path, _MAX_SOURCE_BYTES)
        definition = _last_definition(data, name)
    except (OSError, SyntaxError, ValueError):
        return None
    if definition is None:
        return None
    arguments = definition.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return definition.body, _LINE.findall(data), frozenset(a.arg for a in every)


# Where a top-level definition starts: the end of the one before it.
_NEXT_DEFINITION = re.compile(rb"^(?:def |async def |class |@)", re.MULTILINE)


def _last_definition(data: bytes, name: str) -> ast.FunctionDef | None:
    """The last top-level ``def name`` in the source ``data``. Parsing all of torch's
    ``__init__.py`` takes ~50 ms, the doctor's budget is 300 ms: so the definition is cut
    out first, from its ``def`` line to the next top-level definition, and the whole file
    is parsed only where that piece is not the function (a ``def`` line inside a string)."""
    head = re.compile(rb"^def " + re.escape(name.encode()) + rb"\b", re.MULTILINE)
    starts = [m.start() for m in head.finditer(data)]
    if starts:
        start = starts[-1]
        following = _NEXT_DEFINITION.search(data, start + 1)
        piece = data[start : following.start() if following else len(data)]
        try:
            body = ast.parse(piece.decode("utf-8", errors="replace")).body
        except (SyntaxError, ValueError):
            body = []
        if body and isinstance(body[0], ast.FunctionDef) and body[0].name == name:
            return ast.increment_lineno(body[0], data.count(b"\n", 0, start))
    tree = ast.parse(data.decode("utf-8", errors="replace"))
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[-1] if found else None


# A line as the parser counts them (\r\n, \r or \n ends one); the columns of ast nodes
# are byte offsets into it.
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _source_segment(lines: Sequence[bytes], node: ast.expr) -> str | None:
    """``node``'s source text: ast.get_source_segment's result, from lines split once
    (that function splits the whole file in Python on every call: ~0.1 s for torch's
    ``__init__.py``)."""
    end_line, end_col = node.end_lineno, node.end_col_offset
    if end_line is None or end_col is None or end_line > len(lines):
        return None
    first, last = node.lineno - 1, end_line - 1
    if first == last:
        return lines[first][node.col_offset : end_col].decode("utf-8", errors="replace")
    pieces = [lines[first][node.col_offset :], *lines[first + 1 : last], lines[last][:end_col]]
    return b"".join(pieces).decode("utf-8", errors="replace")


def _raising_branches(body: Sequence[ast.stmt]) -> list[tuple[ast.expr, str, int]]:
    """(condition, message, line) of each ``if``/``elif`` at the top of ``body`` whose
    branch raises RuntimeError; an ``elif`` also needs the earlier conditions false."""
    found: list[tuple[ast.expr, str, int]] = []
    for statement in body:
        earlier: list[ast.expr] = []
        node: ast.stmt | None = statement
        while isinstance(node, ast.If):
            message = _raised_message(node.body)
            test: ast.expr = node.test
            if earlier:
                test = ast.BoolOp(
                    ast.And(), [*(ast.UnaryOp(ast.Not(), e) for e in earlier), node.test]
                )
                ast.copy_location(test, node.test)
            if message is not None:
                found.append((test, message, node.lineno))
            earlier.append(node.test)
            node = node.orelse[0] if len(node.orelse) == 1 else None
    return found


def _raised_message(body: Sequence[ast.stmt]) -> str | None:
    if not body or not isinstance(body[0], ast.Raise):
        return None
    exc = body[0].exc
    if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)):
        return None
    if exc.func.id != "RuntimeError":
        return None
    return "".join(_text(arg) for arg in exc.args[:1]) or "RuntimeError"


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{…}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return "{…}"


def _evaluate(node: ast.expr, facts: GuardFacts) -> object:
    """The value of a guard's expression over ``facts``; raises _Unreadable."""
    if isinstance(node, ast.BoolOp):
        values = [bool(_evaluate(v, facts)) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, facts)
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, facts)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(right_node, facts)
            if not _compare(op, left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, int | str | bool | type(None)):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e, facts) for e in node.elts)
    dotted = _dotted(node)
    if dotted == "sys.version_info":
        return (*facts.python, "final", 0)
    if dotted == "sys.platform":
        return facts.platform
    if isinstance(node, ast.Subscript) and _dotted(node.value) == "sys.version_info":
        version = (*facts.python, "final", 0)
        index = node.slice
        if isinstance(index, ast.Slice):
            lower = _evaluate(index.lower, facts) if index.lower else None
            upper = _evaluate(index.upper, facts) if index.upper else None
            if isinstance(lower, int | None) and isinstance(upper, int | None) and not index.step:
                return version[lower:upper]
        elif isinstance(index, ast.Constant) and isinstance(index.value, int):
            return version[index.value]
    if isinstance(node, ast.Call):
        function = _dotted(node.func)
        arguments = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if function == "sysconfig.get_config_var" and arguments == ["Py_GIL_DISABLED"]:
            return 1 if facts.gil_disabled else 0
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and _dotted(node.func.value) == "sys.platform"
            and len(arguments) == 1
            and isinstance(arguments[0], str)
        ):
            return facts.platform.startswith(arguments[0])
    raise _Unreadable(f"cannot evaluate {ast.unparse(node)!r}")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _compare(op: ast.cmpop, left: object, right: object) -> bool:
    try:
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.Lt):
            return bool(left < right)  # type: ignore[operator]
        if isinstance(op, ast.LtE):
            return bool(left <= right)  # type: ignore[operator]
        if isinstance(op, ast.Gt):
            return bool(left > right)  # type: ignore[operator]
        if isinstance(op, ast.GtE):
            return bool(left >= right)  # type: ignore[operator]
        if isinstance(op, ast.In):
            return bool(left in right)  # type: ignore[operator]
        if isinstance(op, ast.NotIn):
            return bool(left not in right)  # type: ignore[operator]
    except TypeError as exc:
        raise _Unreadable(f"cannot compare {left!r} with {right!r}") from exc
    raise _Unreadable(f"unknown comparison {type(op).__name__}")
