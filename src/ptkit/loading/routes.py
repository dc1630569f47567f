"""Which implementation serves each op on each device type, and why.

Per (op, device type) one of three answers:

* ``native``: a library ptkit loaded registers the op's kernel for the device's dispatch
  key (its manifest's recorded registrations say so, or, for older manifests, its ops);
* ``reference``: no such library, but a reference kernel really is registered for the
  device: a ``CompositeExplicitAutograd`` / ``CompositeImplicitAutograd`` kernel, or a
  kernel of the device's key registered from Python;
* ``unavailable``: nothing serves the op there; the reason says what defines and serves
  it elsewhere ("libx_cpu.so registers it for CPU only"), why no native library serves
  this device, and the fix.

The answer comes from the dispatcher (``has_kernel``: a kernel of exactly this dispatch
key; ``other_kernel``: what else serves the key) and from the loader's recorded decisions
(why not native). The runtime passes torch's dispatcher; ``ptkit doctor`` passes
``predicted_has_kernel`` and leaves ``other_kernel`` out (predicted: an op whose schema
no library defines has the package's reference, as ptkit's own project shape does), and
uses these rules without torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ptkit.backends import BACKENDS, backends_for_device_type
from ptkit.loading.rules import LoadDecision, LoadStatus, TorchFacts
from ptkit.loading.switches import RuntimeSwitches

__all__ = [
    "IMPLEMENTATIONS",
    "OpRoute",
    "OtherKernel",
    "device_types",
    "enable_fix",
    "format_routes",
    "predicted_has_kernel",
    "predicted_has_schema",
    "predicted_other_kernel",
    "routes",
]

# What explain() can answer per (op, device type).
IMPLEMENTATIONS = ("native", "reference", "unavailable")


@dataclasses.dataclass(frozen=True)
class OpRoute:
    """One row of ``explain()``."""

    op: str
    device_type: str
    # "native", "reference" or "unavailable" (nothing serves the op on this device type;
    # the reason says why and the fix): IMPLEMENTATIONS
    implementation: str
    library: str | None
    reason: str
    namespace: str = "ptkit"  # the op's torch.ops namespace (a package's manifests say it)

    def to_json(self) -> dict[str, str | None]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class OtherKernel:
    """A kernel that serves an op's dispatch key without a library ptkit loaded."""

    # "reference" (composite, or registered from Python) or "native" (a library loaded
    # outside ptkit's loader)
    implementation: str
    # e.g. "its CompositeExplicitAutograd kernel, registered at mypkg/__init__.py:12";
    # empty when only predicted (the doctor)
    description: str = ""


def device_types(facts: TorchFacts) -> list[str]:
    """The device types this torch build can create tensors on."""
    return list(dict.fromkeys(b.device_type for b in BACKENDS.values() if b.built_into(facts)))


def _dispatch(device_type: str) -> tuple[str, tuple[str, ...]]:
    """A device type's dispatch key, and the manifest backends whose kernels serve it."""
    backends = backends_for_device_type(device_type)
    return backends[0].dispatch_key, tuple(b.name for b in backends)


def _kernel_keys(decision: LoadDecision) -> dict[str, tuple[str, ...]]:
    """Qualified op -> the dispatch keys the decision's library registers kernels for:
    its recorded registrations, else its manifest's ops at its backend's key."""
    manifest = decision.manifest
    if manifest is None:
        return {}
    if manifest.registrations is not None:
        return dict(manifest.registrations.kernels)
    key = BACKENDS[manifest.backend].dispatch_key
    return {f"{manifest.namespace}::{op}": (key,) for op in manifest.ops}


def _serves(decision: LoadDecision, qualified_op: str, key: str) -> bool:
    return key in _kernel_keys(decision).get(qualified_op, ())


def _defined_by(decisions: Sequence[LoadDecision], qualified_op: str) -> list[LoadDecision]:
    """The decisions whose libraries define ``qualified_op``'s schema."""
    return [
        d
        for d in decisions
        if d.manifest is not None
        and d.manifest.registrations is not None
        and qualified_op in d.manifest.registrations.schemas
    ]


def predicted_has_kernel(
    namespace: str, decisions: Sequence[LoadDecision]
) -> Callable[[str, str], bool]:
    """What the dispatcher would answer once the libraries the decisions mark LOADED are
    loaded: a kernel for a dispatch key exactly where such a library registers one."""
    registered = {
        (op, key)
        for d in decisions
        if d.status is LoadStatus.LOADED
        for op, keys in _kernel_keys(d).items()
        for key in keys
    }
    return lambda qualified_op, key: (qualified_op, key) in registered


def predicted_has_schema(decisions: Sequence[LoadDecision]) -> Callable[[str], bool]:
    """Without torch: an op is defined unless only libraries that would not load define
    it (an op no library defines is defined in Python)."""

    def has_schema(qualified_op: str) -> bool:
        definers = _defined_by(decisions, qualified_op)
        return not definers or any(d.status is LoadStatus.LOADED for d in definers)

    return has_schema


def predicted_other_kernel(
    decisions: Sequence[LoadDecision],
) -> Callable[[str, str], OtherKernel | None]:
    """Without torch: an op whose schema no library defines is defined in Python, with
    the package's reference (ptkit's project shape); one a library defines has none
    (schemas in C++: nothing but the libraries serves it)."""
    in_libraries = {
        op
        for d in decisions
        if d.manifest is not None and d.manifest.registrations is not None
        for op in d.manifest.registrations.schemas
    }

    def other(qualified_op: str, key: str) -> OtherKernel | None:
        return None if qualified_op in in_libraries else OtherKernel("reference")

    return other


def _details(decision: LoadDecision) -> str:
    return "".join(f", {k} {v}" for k, v in decision.details)


def routes(
    ops: Sequence[str],
    namespace: str,
    decisions: Sequence[LoadDecision],
    facts: TorchFacts,
    switches: RuntimeSwitches,
    fallbacks: Mapping[str, str] | None = None,
    *,
    has_kernel: Callable[[str, str], bool],
    other_kernel: Callable[[str, str], OtherKernel | None] | None = None,
    has_schema: Callable[[str], bool] | None = None,
) -> list[OpRoute]:
    """One row per (device type, op). ``fallbacks`` maps a device type to the reason its
    registered native kernels now run the reference (Metal kernels that failed to compile).
    ``has_kernel(qualified_op, dispatch_key)``: whether the dispatcher has a kernel of
    exactly that key. ``other_kernel(qualified_op, dispatch_key)``: what else serves the
    key (None: nothing); ``has_schema(qualified_op)``: whether the op is defined at all.
    Defaults: ``predicted_other_kernel``, ``predicted_has_schema``."""
    other_kernel = other_kernel or predicted_other_kernel(decisions)
    has_schema = has_schema or predicted_has_schema(decisions)
    rows = []
    for device_type in device_types(facts):
        key, backends = _dispatch(device_type)
        relevant = [d for d in decisions if d.backend in backends]
        for op in ops:
            qualified = f"{namespace}::{op}"
            loaded = [
                d
                for d in relevant
                if d.status is LoadStatus.LOADED and d.manifest and op in d.manifest.ops
            ]
            serving = [d for d in loaded if _serves(d, qualified, key)]
            row = _route(op, device_type, namespace)
            if has_kernel(qualified, key):
                fallback = (fallbacks or {}).get(device_type)
                if fallback:
                    library = loaded[0].library if loaded else None
                    rows.append(row("reference", library, fallback))
                elif serving:
                    d = serving[0]
                    assert d.manifest is not None
                    dtypes = ", ".join(d.manifest.ops.get(op, ())) or "not declared"
                    reason = f"{d.library} loaded: {d.reason}{_details(d)}; dtypes {dtypes}"
                    rows.append(row("native", d.library, reason))
                else:
                    other = other_kernel(qualified, key)
                    if other is not None and other.implementation == "reference":
                        why = _why_reference(op, relevant, loaded, switches, backends, decisions)
                        rows.append(row("reference", None, _joined(why, other.description)))
                    else:
                        where = other.description if other is not None else ""
                        reason = _joined(f"a {key} kernel registered outside ptkit's loader", where)
                        rows.append(row("native", None, reason))
                continue
            other = other_kernel(qualified, key)
            why = _why_reference(op, relevant, loaded, switches, backends, decisions)
            if other is not None:
                rows.append(row("reference", None, _joined(why, other.description)))
                continue
            # A library of this device that loaded speaks for itself in the reason.
            device_loaded = any(d.status is LoadStatus.LOADED for d in relevant)
            defined = has_schema(qualified)
            reason = _why_unavailable(
                qualified, key, why, device_loaded, decisions, switches, defined
            )
            rows.append(row("unavailable", None, reason))
    return rows


def _route(op: str, device_type: str, namespace: str) -> Callable[..., OpRoute]:
    def row(implementation: str, library: str | None, reason: str) -> OpRoute:
        return OpRoute(op, device_type, implementation, library, reason, namespace)

    return row


def _joined(first: str, second: str) -> str:
    return f"{first}; {second}" if second else first


def enable_fix(decision: LoadDecision, switches: RuntimeSwitches) -> str:
    """How to make a library that did not load serve, in a few words."""
    if "Fix: " in decision.reason:  # the loader's reason already ends with its fix
        return "see the reason above"
    backend = decision.backend
    switched = switches.enable_fix(backend) if backend else None
    if switched:
        return switched
    if decision.status is LoadStatus.FAILED:
        return "reinstall the package (pip install --force-reinstall --no-deps <its distribution>)"
    return "install the package's build for this machine (`ptkit explain` gives each reason)"


def _why_unavailable(
    qualified: str,
    key: str,
    why_not_native: str,
    device_loaded: bool,
    decisions: Sequence[LoadDecision],
    switches: RuntimeSwitches,
    defined: bool,
) -> str:
    """Nothing serves ``qualified`` on ``key``'s devices: what defines and serves it, why
    no native library does here, and the fix. ``device_loaded``: a library of this device
    loaded (it speaks for itself); ``defined``: the op has a schema."""
    definers = _defined_by(decisions, qualified)
    loaded_definers = [d for d in definers if d.status is LoadStatus.LOADED]
    not_loaded = [d for d in definers if d.status is not LoadStatus.LOADED]
    if not_loaded and not loaded_definers:
        d = not_loaded[0]
        return (
            f"{qualified} is defined only in {d.library}, not loaded: {d.reason}; the package "
            f"has no reference for it, so nothing serves {key} tensors. Fix: "
            f"{enable_fix(d, switches)}"
        )
    if not defined:
        return (
            f"{qualified} is not registered ({why_not_native}); the package must define the "
            "op (a schema and a reference in Python, or a library's TORCH_LIBRARY block) or "
            "ship a library for it"
        )
    clauses: list[str] = []
    registering = False
    for d in decisions:
        keys = _kernel_keys(d).get(qualified, ())
        defines = d in loaded_definers
        if not keys and not defines:
            continue
        parts = ["defines it"] if defines else []
        if keys:
            registering = True
            parts.append(f"registers it for {', '.join(keys)}{'' if key in keys else ' only'}")
        clause = f"{d.library} {' and '.join(parts)}"
        if d.status is not LoadStatus.LOADED:
            clause += f" ({d.status.value} here: {d.reason})"
        clauses.append(clause)
    served = "; ".join(clauses) if clauses else "no library registers a kernel for it"
    reason = (
        f"{qualified} has no {key} kernel: {served}; the package has no reference for it, "
        f"so nothing serves {key} tensors"
    )
    if not registering and not device_loaded:
        reason += f" ({why_not_native})"
    return reason


def _why_reference(
    op: str,
    relevant: Sequence[LoadDecision],
    loaded: Sequence[LoadDecision],
    switches: RuntimeSwitches,
    backends: Sequence[str],
    decisions_all: Sequence[LoadDecision],
) -> str:
    if loaded:
        return f"{loaded[0].library} loaded but registered no kernel for {op}"
    not_loaded = [d for d in relevant if d.status is not LoadStatus.LOADED]
    if not_loaded:
        return "; ".join(f"{d.library} {d.status.value}: {d.reason}" for d in not_loaded)
    # This backend's library loaded but was built without the op (another package's
    # library, or an older build): say so rather than "no library".
    without_op = [d for d in relevant if d.manifest is not None]
    if without_op:
        return "; ".join(
            f"{d.library} is loaded but was built without {op} "
            f"(its manifest lists {', '.join(sorted(d.manifest.ops)) or 'no ops'})"
            for d in without_op
            if d.manifest is not None
        )
    # A manifest that could not be read names no backend: it may be this device's.
    unreadable = [d for d in decisions_all if d.manifest is None]
    if unreadable:
        return "; ".join(f"{d.manifest_path.name} {d.status.value}: {d.reason}" for d in unreadable)
    for backend in backends:
        switched_off = switches.disabled_reason(backend)
        if switched_off:
            return switched_off
    names = " or ".join(backends)
    variants = sorted({d.manifest.variant for d in decisions_all if d.manifest}) or ["none"]
    return (
        f"no native {names} library in this install (variant {', '.join(variants)}); "
        "install the variant for this accelerator from its index"
    )


def format_routes(rows: Sequence[OpRoute]) -> str:
    """A plain-text table, one row per (op, device type); ops of namespaces other than
    ``ptkit`` are qualified (``mypkg::my_op``)."""
    header = ("op", "device", "implementation", "why")
    table = [header] + [
        (
            r.op if r.namespace == "ptkit" else f"{r.namespace}::{r.op}",
            r.device_type,
            r.implementation,
            r.reason,
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = []
    for row in table:
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        lines.append("  ".join([*cells, row[3]]).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 3)
    return "\n".join(lines)
