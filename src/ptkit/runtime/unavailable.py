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

The definitions are fragments (``torch.library.Library(ns, "FRAGMENT")``), never the
namespace's block, and an op something else already defines is left alone.
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

__all__ = ["define_unavailable", "is_unavailable_stub", "unavailable_message"]

logger = logging.getLogger("ptkit.runtime")

# Namespace -> ptkit's fragment holding the stand-in definitions (kept alive: dropping
# it would unregister them).
_fragments: dict[str, Any] = {}
# torch.library.Library is untyped.
_new_fragment: Callable[[str, str], Any] = torch.library.Library
# Qualified op -> the message its stand-in raises.
_stand_ins: dict[str, str] = {}
_lock = threading.Lock()


def is_unavailable_stub(qualified_op: str) -> bool:
    """Whether ``qualified_op`` is one of ptkit's stand-ins (nothing really serves it)."""
    return qualified_op in _stand_ins


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
        fragment = _fragments.get(namespace)
        if fragment is None:
            fragment = _fragments[namespace] = _new_fragment(namespace, "FRAGMENT")
        fragment.define(schema)
        fragment.impl(name, _raiser(message), "CompositeExplicitAutograd")
        _stand_ins[qualified] = message
        return True
