"""Which implementation serves each op on each device type, and why.

The answer comes from the dispatcher (does the op have a kernel for the device's
dispatch key? ``has_kernel``) and from the loader's recorded decisions (why not). The
runtime passes torch's dispatcher as ``has_kernel``; ``ptkit doctor`` passes
``predicted_has_kernel`` (from the decisions) and uses these rules without torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ptkit.backends import BACKENDS, backends_for_device_type
from ptkit.loading.rules import LoadDecision, LoadStatus, TorchFacts
from ptkit.loading.switches import RuntimeSwitches

__all__ = ["OpRoute", "device_types", "format_routes", "predicted_has_kernel", "routes"]


@dataclasses.dataclass(frozen=True)
class OpRoute:
    """One row of ``explain()``."""

    op: str
    device_type: str
    # "native" or "reference"; "missing": nothing serves another package's op (no
    # library loaded and no reference registered)
    implementation: str
    library: str | None
    reason: str
    namespace: str = "ptkit"  # the op's torch.ops namespace (a package's manifests say it)

    def to_json(self) -> dict[str, str | None]:
        return dataclasses.asdict(self)


def device_types(facts: TorchFacts) -> list[str]:
    """The device types this torch build can create tensors on."""
    return list(dict.fromkeys(b.device_type for b in BACKENDS.values() if b.built_into(facts)))


def _dispatch(device_type: str) -> tuple[str, tuple[str, ...]]:
    """A device type's dispatch key, and the manifest backends whose kernels serve it."""
    backends = backends_for_device_type(device_type)
    return backends[0].dispatch_key, tuple(b.name for b in backends)


def predicted_has_kernel(
    namespace: str, decisions: Sequence[LoadDecision]
) -> Callable[[str, str], bool]:
    """What the dispatcher would answer once the libraries the decisions mark LOADED are
    loaded: a kernel for a dispatch key exactly where such a library lists the op."""
    registered = {
        (f"{namespace}::{op}", key)
        for d in decisions
        if d.status is LoadStatus.LOADED and d.manifest is not None
        for key in (BACKENDS[d.manifest.backend].dispatch_key,)
        for op in d.manifest.ops
    }
    return lambda qualified_op, key: (qualified_op, key) in registered


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
) -> list[OpRoute]:
    """One row per (device type, op). ``fallbacks`` maps a device type to the reason its
    registered native kernels now run the reference (Metal kernels that failed to compile).
    ``has_kernel(qualified_op, dispatch_key)``: whether the dispatcher has a kernel."""
    rows = []
    for device_type in device_types(facts):
        key, backends = _dispatch(device_type)
        relevant = [d for d in decisions if d.backend in backends]
        for op in ops:
            loaded = [
                d
                for d in relevant
                if d.status is LoadStatus.LOADED and d.manifest and op in d.manifest.ops
            ]
            if has_kernel(f"{namespace}::{op}", key):
                fallback = (fallbacks or {}).get(device_type)
                if fallback:
                    library = loaded[0].library if loaded else None
                    rows.append(OpRoute(op, device_type, "reference", library, fallback, namespace))
                elif loaded:
                    d = loaded[0]
                    assert d.manifest is not None
                    dtypes = ", ".join(d.manifest.ops[op])
                    reason = f"{d.library} loaded: {d.reason}{_details(d)}; dtypes {dtypes}"
                    rows.append(OpRoute(op, device_type, "native", d.library, reason, namespace))
                else:
                    reason = f"a {key} kernel registered outside ptkit's loader"
                    rows.append(OpRoute(op, device_type, "native", None, reason, namespace))
                continue
            rows.append(
                OpRoute(
                    op,
                    device_type,
                    "reference",
                    None,
                    _why_reference(op, relevant, loaded, switches, backends, decisions),
                    namespace,
                )
            )
    return rows


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
