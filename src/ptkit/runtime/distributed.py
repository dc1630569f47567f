"""Choose and initialise a ``torch.distributed`` backend that works on this machine.

``torch.distributed.init_process_group()`` needs the caller to name a backend, and
the right one depends on the accelerator: NCCL (or its torchcomms-based ``nccl2``)
on NVIDIA GPUs, NCCL (RCCL) on AMD GPUs, XCCL on Intel GPUs, gloo on CPUs. A
backend can be built into torch and still fail here (``nccl`` without a GPU), so
``init_process_group()`` tries the candidates in order and falls back, and says
which one it used and why the others were passed over.

Rendezvous, once for all attempts. With ``env://`` or ``tcp://``, torch's own
rendezvous makes rank 0 bind ``MASTER_PORT`` for a ``TCPStore`` server. Retrying
``torch.distributed.init_process_group`` with the same port after a failed attempt
races: the failed attempt's store may still hold the port (or still be the one the
other ranks connect to), and keys it wrote are still there. So ptkit rendezvouses
once (``torch.distributed.rendezvous`` with the caller's ``init_method``, default
``env://``; or the caller's ``store=``, never re-created), and gives every attempt
its own ``PrefixStore`` over that one store. The ranks also agree through the store
after each attempt: if any rank failed, every rank drops the backend (and destroys
the process group it may have created) and moves on together, so no two ranks end
on different backends. After a dropped attempt every rank also resets torch's group
counter (a private of torch 2.14's distributed_c10d, advanced even by a failed init):
group names are part of the store keys, and the ranks must name the next group alike.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

# The pure choice lives in a torch-free module (ptkit doctor applies it to probed devices).
from ptkit.degradation.distributed_choice import BackendChoice
from ptkit.degradation.distributed_choice import choose_backends as _choose_backends

if TYPE_CHECKING:
    # Types only: torch.distributed's submodules fail to import on torch builds
    # without it, and ``import ptkit`` must not.
    from torch.distributed.distributed_c10d import Store

__all__ = [
    "BackendChoice",
    "DistributedChoice",
    "DistributedPlan",
    "choose_backends",
    "distributed_backend_plan",
    "init_process_group",
]

logger = logging.getLogger("ptkit.runtime")

# What a failing backend raises while it initialises: DistBackendError, DistStoreError
# and DistNetworkError are RuntimeErrors; "no GPUs found" is a ValueError; torch checks
# some preconditions with assert. A TypeError (a wrong keyword) is the caller's bug and
# is raised at once.
_INIT_ERRORS = (RuntimeError, ValueError, AssertionError, OSError)


@dataclasses.dataclass(frozen=True)
class DistributedChoice:
    """The backend ``init_process_group()`` initialised, and what it passed over first."""

    backend: str
    # (backend, why it was skipped or how it failed), in the order tried.
    tried: tuple[tuple[str, str], ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "reason": self.reason,
            "tried": [{"backend": b, "why": why} for b, why in self.tried],
        }


@dataclasses.dataclass(frozen=True)
class DistributedPlan:
    """What ``init_process_group()`` would try on this machine, initialising nothing."""

    device_types: tuple[str, ...]
    rocm: bool
    candidates: tuple[BackendChoice, ...]
    # The first available candidate (what would be tried first), or None.
    backend: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "device_types": list(self.device_types),
            "rocm": self.rocm,
            "candidates": [c.to_json() for c in self.candidates],
            "backend": self.backend,
            "reason": self.reason,
        }


def choose_backends(
    device_types: Collection[str],
    is_available: Callable[[str], bool],
    *,
    rocm: bool = False,
) -> list[BackendChoice]:
    """``ptkit.degradation.distributed_choice.choose_backends`` naming this torch's version."""
    return _choose_backends(
        device_types, is_available, rocm=rocm, torch_version=str(torch.__version__)
    )


def distributed_backend_plan() -> DistributedPlan:
    """The candidates for this machine and the first available one, for the runtime
    profile and ``ptkit doctor``: nothing is initialised and no port is bound."""
    device_types, rocm = _visible_device_types()
    if not dist.is_available():
        reason = f"torch {torch.__version__} was built without torch.distributed"
        return DistributedPlan(device_types, rocm, (), None, reason)
    candidates = tuple(choose_backends(device_types, dist.is_backend_available, rocm=rocm))
    first = next((c for c in candidates if c.available), None)
    if first is None:
        names = ", ".join(c.backend for c in candidates)
        reason = f"none of the candidates ({names}) is built into torch {torch.__version__}"
        return DistributedPlan(device_types, rocm, candidates, None, reason)
    return DistributedPlan(device_types, rocm, candidates, first.backend, first.reason)


def init_process_group(
    *,
    backend: str | None = None,
    candidates: Sequence[BackendChoice] | None = None,
    **kwargs: Any,
) -> DistributedChoice:
    """``torch.distributed.init_process_group`` with a backend chosen for this machine.

    ``backend=``: exactly that backend, no fallback; torch's error is raised as is.
    Otherwise the candidates (``distributed_backend_plan()``'s, or ``candidates=``) are
    tried in order over one shared rendezvous (see the module docstring); every other
    keyword (``init_method``, ``store``, ``rank``, ``world_size``, ``timeout``,
    ``device_id`` …) goes to torch. Raises RuntimeError naming every backend and its
    error when none initialises.
    """
    if not dist.is_available():
        raise RuntimeError(
            f"ptkit.distributed.init_process_group: torch {torch.__version__} was built "
            "without torch.distributed"
        )
    if dist.is_initialized():
        raise RuntimeError(
            "ptkit.distributed.init_process_group: the default process group is already "
            f"initialised (backend {dist.get_backend()}); call "
            "torch.distributed.destroy_process_group() first"
        )
    if backend is not None:
        if candidates is not None:
            raise ValueError(
                "ptkit.distributed.init_process_group: expected backend= or candidates=, "
                f"got both (backend={backend!r}, candidates={list(candidates)!r})"
            )
        try:
            dist.init_process_group(backend=backend, **kwargs)
        except BaseException:
            _destroy_default_group()  # leave nothing half-initialised behind
            raise
        choice = DistributedChoice(str(backend), (), f"backend={backend!r} given by the caller")
        logger.info("ptkit.distributed: using %s (%s)", choice.backend, choice.reason)
        return choice
    chosen = list(candidates) if candidates is not None else _plan_candidates()
    if not any(c.available for c in chosen):
        listed = "; ".join(f"{c.backend}: {c.reason}" for c in chosen) or "none"
        raise RuntimeError(
            "ptkit.distributed.init_process_group: expected at least one available "
            f"backend, got none ({listed})"
        )
    return _try_candidates(chosen, kwargs)


def _plan_candidates() -> list[BackendChoice]:
    device_types, rocm = _visible_device_types()
    return choose_backends(device_types, dist.is_backend_available, rocm=rocm)


def _visible_device_types() -> tuple[tuple[str, ...], bool]:
    """Accelerator device types with at least one device here, and whether torch is
    a ROCm build (its AMD GPUs appear as ``cuda``)."""
    types: list[str] = []
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        types.append("cuda")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available() and xpu.device_count() > 0:
        types.append("xpu")
    return tuple(types), bool(getattr(torch.version, "hip", None))


@dataclasses.dataclass(frozen=True)
class _Rendezvous:
    store: Store
    rank: int
    world_size: int
    timeout: timedelta


def _rendezvous_once(kwargs: dict[str, Any]) -> _Rendezvous:
    """One store for every attempt: the caller's ``store=``, or torch's rendezvous of
    the caller's ``init_method`` (default ``env://``). Pops the keywords it consumes."""
    from torch.distributed.constants import default_pg_timeout
    from torch.distributed.distributed_c10d import PrefixStore
    from torch.distributed.rendezvous import rendezvous

    # torch's rendezvous carries no annotations; this is its real signature.
    rendezvous_typed: Callable[..., Iterator[tuple[Store, int, int]]] = rendezvous
    timeout = kwargs.get("timeout") or default_pg_timeout
    if not isinstance(timeout, timedelta):
        raise TypeError(
            "ptkit.distributed.init_process_group: expected timeout to be a "
            f"datetime.timedelta, got {type(timeout).__name__}"
        )
    store = kwargs.pop("store", None)
    init_method = kwargs.pop("init_method", None)
    rank = int(kwargs.pop("rank", -1))
    world_size = int(kwargs.pop("world_size", -1))
    if store is not None:
        if init_method is not None:
            raise ValueError(
                "ptkit.distributed.init_process_group: expected store= or init_method=, "
                f"got both (init_method={init_method!r})"
            )
        if rank < 0 or world_size <= 0:
            raise ValueError(
                "ptkit.distributed.init_process_group: with store=, expected rank >= 0 and "
                f"world_size > 0, got rank={rank}, world_size={world_size}"
            )
        return _Rendezvous(store, rank, world_size, timeout)
    url = str(init_method or "env://")
    try:
        store, rank, world_size = next(rendezvous_typed(url, rank, world_size, timeout=timeout))
    except (*_INIT_ERRORS, StopIteration) as exc:
        raise RuntimeError(
            f"ptkit.distributed.init_process_group: rendezvous via {url} failed: {exc}"
        ) from exc
    store.set_timeout(timeout)
    # As torch does, keep the process group's keys apart from other users of the store.
    return _Rendezvous(PrefixStore("default_pg", store), rank, world_size, timeout)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else '(no message)'}"


def _agree(rdv: _Rendezvous, prefix: str, error: str | None) -> str | None:
    """Every rank reports its attempt; returns None when all succeeded, else one
    failure (this rank's own if it failed), the same decision on every rank.

    O(1) store operations per rank (rank 0: one wait on world_size - 1 keys): a
    failure counter, the failures' messages by arrival number, an arrival counter
    whose last increment releases everyone, and a "read" key per rank so that rank 0
    leaves last (see _release_host)."""
    store = rdv.store
    if error is not None:
        index = store.add(f"{prefix}/failures", 1)
        store.set(f"{prefix}/failure/{index}", f"rank {rdv.rank}: {error}")
    if store.add(f"{prefix}/arrived", 1) == rdv.world_size:
        store.set(f"{prefix}/done", "1")
    store.wait([f"{prefix}/done"], rdv.timeout)
    failures = store.add(f"{prefix}/failures", 0)
    shown = None
    if failures and error is None:
        shown = store.get(f"{prefix}/failure/1").decode(errors="replace")
    _release_host(rdv, f"{prefix}/read")
    if failures == 0:
        return None
    if error is not None:
        shown = f"rank {rdv.rank}: {error}"
    return f"{failures} of {rdv.world_size} ranks failed; {shown}"


def _release_host(rdv: _Rendezvous, prefix: str) -> None:
    """Rank 0 leaves only after every other rank has done its last store operation.

    torch's rendezvous (env://, tcp://) runs the TCPStore server in rank 0's process,
    which may exit right after this call (when every backend failed); a rank still
    talking to the store then gets "Connection was likely closed". So each other rank
    ends with a set (the TCPStore client sends it and reads no reply) and goes, and
    rank 0 waits for all of those sets. A shared "everyone has read" key that every
    rank waits on is not enough: the rank whose set releases rank 0 still has its own
    wait in flight when rank 0's process goes."""
    if rdv.rank != 0:
        rdv.store.set(f"{prefix}/{rdv.rank}", "1")
        return
    others = [f"{prefix}/{rank}" for rank in range(1, rdv.world_size)]
    if others:
        rdv.store.wait(others, rdv.timeout)


def _attempt(
    choice: BackendChoice, rdv: _Rendezvous, prefix: str, kwargs: dict[str, Any]
) -> str | None:
    """Initialise one backend; returns None on success, else the (agreed) failure,
    with no default process group left behind."""
    from torch.distributed.distributed_c10d import PrefixStore

    error: str | None = None
    try:
        dist.init_process_group(
            backend=choice.backend,
            store=PrefixStore(prefix, rdv.store),
            rank=rdv.rank,
            world_size=rdv.world_size,
            **kwargs,
        )
    except _INIT_ERRORS as exc:
        error = _first_line(exc)
    try:
        failure = _agree(rdv, f"{prefix}/outcome", error)
    except _INIT_ERRORS as exc:
        _destroy_default_group()
        raise RuntimeError(
            f"ptkit.distributed.init_process_group: rank {rdv.rank} waited {rdv.timeout} "
            f"for every rank to report on {choice.backend}, got {_first_line(exc)}"
        ) from exc
    if failure is not None:
        _destroy_default_group()
    return failure


def _destroy_default_group() -> None:
    """After an attempt that failed on any rank, every rank must be back where it
    started: no default group, and torch's group counter at 0.

    torch names groups by a per-process counter that it advances even when the
    initialisation fails (``_process_group_name`` in torch 2.14's distributed_c10d),
    and the name is part of every store key the backend uses. A rank whose attempt
    failed and one that destroyed its working group (which resets the counter) would
    otherwise name the next group differently and wait on different keys.
    """
    if dist.is_initialized():
        dist.destroy_process_group()  # resets the counter too
        return
    from torch.distributed import distributed_c10d

    world = getattr(distributed_c10d, "_world", None)
    if world is not None and hasattr(world, "group_count"):
        world.group_count = 0


def _try_candidates(chosen: Sequence[BackendChoice], kwargs: dict[str, Any]) -> DistributedChoice:
    kwargs = dict(kwargs)
    rdv = _rendezvous_once(kwargs)
    # A per-rank call counter: a caller's long-lived store (torchelastic's) never
    # mixes this call's agreement keys with an earlier call's.
    call = rdv.store.add(f"ptkit/distributed/calls/{rdv.rank}", 1)
    tried: list[tuple[str, str]] = []
    for index, choice in enumerate(chosen):
        if not choice.available:
            tried.append((choice.backend, f"skipped: {choice.reason}"))
            continue
        prefix = f"ptkit/distributed/{call}/{index}"
        failure = _attempt(choice, rdv, prefix, kwargs)
        if failure is None:
            result = DistributedChoice(choice.backend, tuple(tried), choice.reason)
            logger.info("ptkit.distributed: using %s (%s)", result.backend, result.reason)
            return result
        logger.warning(
            "ptkit.distributed: %s is not usable on every rank, trying the next backend: %s",
            choice.backend,
            failure,
        )
        tried.append((choice.backend, f"failed: {failure}"))
    listed = "; ".join(f"{b}: {why}" for b, why in tried)
    raise RuntimeError(f"ptkit.distributed.init_process_group: no backend initialised ({listed})")
