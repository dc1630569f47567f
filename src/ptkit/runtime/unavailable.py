"""Ops whose only definition is in a native library that did not load.

A package whose schemas live in C++ (``STABLE_TORCH_LIBRARY(ns, m)``) has no op at all
when that library is not loaded (``PTKIT_FORCE_REFERENCE=1``, ``PTKIT_DISABLE_NATIVE=cpu``,
a build for another machine): ``torch.library.register_fake("ns::op", …)`` in its
``__init__`` would fail the import, and a call would say only "operator … does not
exist". The library's manifest recorded each schema at install time
(``Manifest.registrations``), so ptkit defines the op itself, with one
``CompositeExplicitAutograd`` kernel that raises ``OpUnavailableError`` naming the op,
why and the fix. The package's import works unchanged (fakes and autograd formulas
register as usual, and are only used once the op can run), ``explain()`` says
``unavailable``, and a call says why.

The definitions are fragments (never the namespace's block), and an op something else
already defines is left alone. They are registered below ``torch.library``'s own
bookkeeping, at a source named ``STAND_IN_SOURCE``: a reference the package registers
later for the same key (``torch.library.impl(op, "CompositeExplicitAutograd")``)
overrides the stand-in instead of failing the import, and the dispatcher's dump tells
the two apart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from ptkit.loading.packages import OpUnavailableError
from ptkit.loading.routes import enable_fix
from ptkit.loading.rules import LoadDecision, LoadStatus
from ptkit.loading.switches import RuntimeSwitches
from ptkit.runtime.registrations import op_entry

__all__ = [
    "STAND_IN_SOURCE",
    "define_unavailable",
    "is_stand_in",
    "unavailable_message",
]

# Where the dispatcher says a stand-in was registered ("registered at <…>:0").
STAND_IN_SOURCE = "<ptkit: stand-in for an op whose library did not load>"

logger = logging.getLogger("ptkit.runtime")

# Namespace -> ptkit's fragment holding the stand-in definitions (kept alive: dropping
# it would unregister them).
_fragments: dict[str, Any] = {}
# Qualified op -> the message its stand-in raises.
_stand_ins: dict[str, str] = {}
_lock = threading.Lock()


def is_stand_in(where: str | None) -> bool:
    """Whether a registration the dispatcher dumps as "registered at ``where``" is one of
    ptkit's stand-ins (a schema nothing else defined, a kernel that only raises)."""
    return where is not None and where.startswith(STAND_IN_SOURCE)


def unavailable_message(
    qualified_op: str, decision: LoadDecision, package: str, switches: RuntimeSwitches
) -> str:
    """What calling the op says: the op, the library that defines it, why it did not
    load, and the fix."""
    return (
        f"{qualified_op} is unavailable: it is defined only in {decision.library}, which was "
        f"not loaded ({decision.reason}), and {package} has no reference implementation for "
        f"it. Fix: {enable_fix(decision, switches)}; `ptkit explain` shows what runs where"
    )


def _raiser(message: str) -> Callable[..., NoReturn]:
    def unavailable(*args: Any, **kwargs: Any) -> NoReturn:
        raise OpUnavailableError(message)

    return unavailable


def define_unavailable(
    package: str, decisions: Sequence[LoadDecision], switches: RuntimeSwitches
) -> dict[str, str]:
    """Define a stand-in for every op whose schema only libraries that did not load
    define; returns qualified op -> the message a call raises. Never raises."""
    defined: dict[str, str] = {}
    for decision in decisions:
        manifest = decision.manifest
        if decision.status is LoadStatus.LOADED or manifest is None:
            continue
        if manifest.registrations is None:
            continue
        for qualified, schema in manifest.registrations.schemas.items():
            if qualified in defined:
                continue
            message = unavailable_message(qualified, decision, package, switches)
            try:
                if _define(qualified, schema, message):
                    defined[qualified] = message
            except Exception as exc:  # a schema torch rejects must not fail the import
                logger.warning("ptkit: cannot define a stand-in for %s: %r", qualified, exc)
    return defined


def _define(qualified: str, schema: str, message: str) -> bool:
    with _lock:
        if qualified in _stand_ins:
            return True
        entry = op_entry(qualified)
        if entry is not None and entry.schema is not None:
            return False  # defined elsewhere (Python, another library): it serves, or says why
        namespace, _, name = qualified.partition("::")
        # torch's stubs of the C++ library object lag its methods' signatures.
        fragment: Any = _fragments.get(namespace)
        if fragment is None:
            fragment = torch._C._dispatch_library("FRAGMENT", namespace, "", STAND_IN_SOURCE, 0)
            _fragments[namespace] = fragment
        fragment.define(schema, "", ())
        fragment.impl(name, "CompositeExplicitAutograd", _raiser(message), False)
        _stand_ins[qualified] = message
        return True
