"""``ptkit.compile``: ``torch.compile`` where it can run, the original callable where it
cannot, and optionally eager execution where the compiler fails.

Why: ptkit ships one wheel for every CPython >= 3.10 and 3.15t, but a torch release may
refuse ``torch.compile`` on some of them (torch 2.14: Python 3.15+ and free-threaded
Python before 3.13.3; torch 2.15 lifted the first), and Inductor's CPU backend needs a
C++ compiler and ``Python.h``. Code that calls ``ptkit.compile`` runs everywhere, and
says (one ``RuntimeWarning``) where it runs eagerly and why. The refusals are the
installed torch's own checks, read from its source (``ptkit.degradation.torch_guards``).

Decisions, in order:

1. ``ptkit.runtime.compile_support()`` says torch.compile cannot run here (one of the
   installed torch's checks refuses), or Inductor could not compile the CPU graphs of a
   machine without GPUs (no C++ compiler, no ``Python.h``): the original callable is
   returned unchanged (an ``nn.Module`` is the same object), with one
   ``RuntimeWarning`` starting ``ptkit.compile:`` and naming the reason. This happens
   whatever ``fallback`` says: there is no compiler to fail. Where torch's checks could
   not be read and ``torch.compile(...)`` itself refuses (a RuntimeError), the same.
2. ``fallback="raise"`` (the default): ``torch.compile(model_or_fn, **kwargs)`` is
   returned as is; compiler failures raise as torch raises them.
3. ``fallback="eager"``: a wrapper (``EagerFallback``) calls the compiled callable; when
   a call fails because the *compiler* failed (see ``_COMPILER_FAILED`` and
   ``_TRACE_FAILED``), that call and every later call run the original callable
   eagerly, with one ``RuntimeWarning``; compilation is not retried. This holds at the
   first call and at a later call that recompiles (new shapes). The failed call is run
   again from its start: in-place effects of graphs that already ran in that call
   (before a graph break whose next graph failed to compile) happen twice. The user's
   own exceptions propagate unchanged.

Errors that ``torch.compile(...)`` raises before any call (an unknown ``backend=``
name, a bad keyword) propagate in every mode: they are mistakes in the call, not
properties of the machine.

The decision is exposed by ``compile_state(obj)`` for any object ``ptkit.compile``
returned (``None`` for other objects), and, on the wrapper, as its
``ptkit_compile_state`` attribute (it changes from ``"compiled"`` to ``"eager"`` when
the fallback happens).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Literal, ParamSpec, TypeVar

import torch

from ptkit.degradation import compile_rules
from ptkit.degradation.compile_rules import CompileSupport

__all__ = ["CompileState", "EagerFallback", "compile", "compile_state"]

P = ParamSpec("P")
R = TypeVar("R")
Fallback = Literal["raise", "eager"]


def _device_types() -> tuple[str, ...]:
    types = ["cpu"]
    if torch.cuda.is_available():  # NVIDIA, or AMD on a ROCm build of torch
        types.append("cuda")
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        types.append("xpu")
    if torch.backends.mps.is_available():
        types.append("mps")
    return tuple(types)


def compile_support(
    *,
    python: tuple[int, int, int] | None = None,
    gil_disabled: bool | None = None,
    torch_version: str | None = None,
    platform: str | None = None,
    triton_available: bool | None = None,
    device_types: tuple[str, ...] | None = None,
    torch_root: Path | None = None,
    cxx: str | Literal["find"] | None = "find",
    python_h: bool | None = None,
) -> CompileSupport:
    """Predict what ``torch.compile`` does with these facts; each one left out is read
    from this process and its torch (``ptkit.degradation.compile_rules`` decides, from
    torch's own checks in ``torch_root``, default the imported torch's folder)."""
    return compile_rules.compile_support(
        python=python,
        gil_disabled=gil_disabled,
        torch_version=torch_version if torch_version is not None else str(torch.__version__),
        platform=platform,
        triton_available=triton_available,
        device_types=device_types if device_types is not None else _device_types(),
        torch_root=torch_root if torch_root is not None else Path(torch.__file__).parent,
        cxx=cxx,
        python_h=python_h,
    )


@dataclasses.dataclass(frozen=True)
class CompileState:
    """What ``ptkit.compile`` decided for one callable, and why.

    ``mode`` is ``"compiled"`` while calls go through ``torch.compile``'s callable and
    ``"eager"`` when they run the original; ``failure`` names the compiler failure that
    caused a fallback (``None`` otherwise)."""

    mode: Literal["compiled", "eager"]
    reason: str
    fallback: Fallback
    support: CompileSupport
    failure: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "reason": self.reason,
            "fallback": self.fallback,
            "failure": self.failure,
            "support": self.support.to_json(),
        }


def compile(
    model_or_fn: Callable[P, R], *, fallback: Fallback = "raise", **kwargs: Any
) -> Callable[P, R]:
    """``torch.compile(model_or_fn, **kwargs)`` where torch.compile can run here; see the
    module docstring for what happens where it cannot, or when it fails."""
    if fallback not in ("raise", "eager"):
        raise ValueError(f"ptkit.compile: fallback must be 'raise' or 'eager'; got {fallback!r}")
    if not callable(model_or_fn):
        raise TypeError(
            "ptkit.compile: expected a callable (a function or a torch.nn.Module); "
            f"got {type(model_or_fn).__name__}"
        )
    # Looked up on the module at each call so that tests can substitute the decision.
    support = compile_support()
    cpu_only = support.facts.device_types == ("cpu",)
    inductor = kwargs.get("backend", "inductor") == "inductor"
    why_eager = (
        support.reason
        if not support.supported
        else support.cpu_reason
        if cpu_only and inductor and not support.cpu_codegen
        else None
    )
    if why_eager is None:
        try:
            compiled: Callable[P, R] = torch.compile(model_or_fn, **kwargs)
        except RuntimeError as error:
            if support.checks_read:
                raise  # a mistake in the call: torch's checks were read and none refuses
            why_eager = f"torch.compile refused: {_first_line(error)}"
    if why_eager is not None:
        warnings.warn(
            f"ptkit.compile: {why_eager}; {_name(model_or_fn)} runs eagerly",
            RuntimeWarning,
            stacklevel=2,
        )
        _remember(model_or_fn, CompileState("eager", why_eager, fallback, support))
        return model_or_fn
    state = CompileState("compiled", support.reason, fallback, support)
    if fallback == "raise":
        _remember(compiled, state)
        return compiled
    return EagerFallback(model_or_fn, compiled, state)


def compile_state(obj: object) -> CompileState | None:
    """The decision for an object ``ptkit.compile`` returned; ``None`` for any other
    object (and for returned objects that cannot be weakly referenced)."""
    if isinstance(obj, EagerFallback):
        return obj.ptkit_compile_state
    return _states.get(id(obj))


class EagerFallback(Generic[P, R]):
    """The compiled callable, until the compiler fails; the original callable after.

    Attributes the wrapper does not define (``parameters()``, ``eval()``, ``weight`` …)
    are the original's, so a wrapped ``nn.Module`` can still be trained and saved;
    ``isinstance(wrapper, nn.Module)`` is false.
    """

    def __init__(
        self, original: Callable[P, R], compiled: Callable[P, R], state: CompileState
    ) -> None:
        self._original = original
        self._compiled = compiled
        self._lock = threading.Lock()
        self.ptkit_compile_state = state
        functools.update_wrapper(self, original, updated=())

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.ptkit_compile_state.mode == "eager":
            return self._original(*args, **kwargs)
        try:
            return self._compiled(*args, **kwargs)
        except Exception as error:
            kind = _failure_kind(error)
            if kind == "user":
                raise
            failure = _describe(error)
        # Outside the except block, so that an exception of the eager run is raised
        # as itself, not chained to dynamo's.
        if kind == "compiler":
            self._switch_to_eager(failure)
            return self._original(*args, **kwargs)
        # "trace": dynamo's view of an error that may be the user's. Eager decides: if it
        # raises, that exception is the user's and propagates (the next call compiles
        # again, as torch.compile would); if it runs, the compiler was at fault.
        result = self._original(*args, **kwargs)
        self._switch_to_eager(failure)
        return result

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks; "_original" guards against recursion
        # while the object is half built (copy, pickle).
        if name == "_original":
            raise AttributeError(name)
        return getattr(self._original, name)

    def __repr__(self) -> str:
        return f"EagerFallback({self._original!r}, mode={self.ptkit_compile_state.mode!r})"

    def _switch_to_eager(self, failure: str) -> None:
        """Once, even when threads fail together: one warning, and no retry afterwards."""
        with self._lock:
            if self.ptkit_compile_state.mode == "eager":
                return
            reason = f"compiling {_name(self._original)} failed ({failure})"
            self.ptkit_compile_state = dataclasses.replace(
                self.ptkit_compile_state, mode="eager", reason=reason, failure=failure
            )
        warnings.warn(
            f"ptkit.compile: {reason}; running it eagerly from now on (fallback='eager')",
            RuntimeWarning,
            stacklevel=3,
        )


def _failure_kind(error: BaseException) -> Literal["compiler", "trace", "user"]:
    """How a failure of a compiled call is read.

    Dynamo runs a frame it cannot trace eagerly, so an exception the user's code raises
    (a ``ValueError``, a failing ``assert``, an ``IndexError`` for a bad ``dim``) reaches
    the caller as itself, not wrapped: anything outside torch's compiler exceptions is
    the user's ("user"). Of torch's exceptions (torch/_dynamo/exc.py,
    torch/_inductor/exc.py), some can only come from the compiler ("compiler"); the
    others are dynamo's rendering of a tracing problem that may be the user's error seen
    through fake tensors ("trace"): ``TorchRuntimeError`` ("RuntimeError when making
    fake tensor call", e.g. a matmul of mismatched shapes), ``Unsupported`` (with
    ``fullgraph=True`` a user's ``raise ValueError`` becomes ``Unsupported: Observed
    exception``), ``ObservedException``.
    """
    compiler_failed, trace_failed = _torch_failure_types()
    if isinstance(error, compiler_failed):
        return "compiler"
    if isinstance(error, trace_failed):
        return "trace"
    return "user"


@functools.cache
def _torch_failure_types() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """``(_COMPILER_FAILED, _TRACE_FAILED)``, imported when a compiled call first fails."""
    from torch._dynamo import exc as dynamo
    from torch._inductor import exc as inductor

    compiler_failed: tuple[type[Exception], ...] = (
        # "backend='...' raised: ..." wraps any exception of the backend compiler, and
        # InductorError (a subclass) wraps Inductor's: lowering, C++ and Triton codegen.
        dynamo.BackendCompilerFailed,
        # The other ShortenTraceback subclasses: TritonMissing, GPUTooOldForTriton.
        dynamo.ShortenTraceback,
        # convert_frame.py rewraps dynamo's own unexpected exceptions as this.
        dynamo.InternalTorchDynamoError,
        dynamo.TritonUnavailableError,
        dynamo.RecompileError,
        dynamo.FailOnRecompileLimitHit,
        dynamo.ResetRequired,
        dynamo.PackageError,
        dynamo.ResumePrologueTracingError,
        # "errors that would be valid in Eager, but not supported in TorchDynamo".
        dynamo.UserError,
        dynamo.UncapturedHigherOrderOpError,
        dynamo.UnsafeScriptObjectError,
        # Inductor's errors, when raised outside InductorError (lazy compilation).
        inductor.OperatorIssue,
        inductor.CppCompileError,
        inductor.InvalidCxxCompiler,
        inductor.CppWrapperCodegenError,
        inductor.SubgraphLoweringException,
    )
    # Every other dynamo exception: TorchRuntimeError, Unsupported, ObservedException …
    trace_failed: tuple[type[Exception], ...] = (dynamo.TorchDynamoException,)
    return compiler_failed, trace_failed


# id(obj) -> decision, for objects ptkit.compile returned; entries leave with their object.
_states: dict[int, CompileState] = {}


def _remember(obj: object, state: CompileState) -> None:
    """An entry leaves when its object dies, before its id can be reused; so an id
    already present is the same live object, which has its finalizer already."""
    if id(obj) not in _states:
        try:
            weakref.finalize(obj, _states.pop, id(obj), None)
        except TypeError:  # cannot be weakly referenced: compile_state() answers None
            return
    _states[id(obj)] = state


def _name(obj: object) -> str:
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return str(name)


def _describe(error: BaseException) -> str:
    """One line: the exception type and its message's first line; for a backend failure,
    the backend's own exception (the first line of BackendCompilerFailed says nothing)."""
    inner = getattr(error, "inner_exception", None)
    if isinstance(inner, BaseException):
        backend = getattr(error, "backend_name", "?")
        return (
            f"{type(error).__name__}: backend {backend!r} raised "
            f"{type(inner).__name__}: {_first_line(inner)}"
        )
    return f"{type(error).__name__}: {_first_line(error)}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"
