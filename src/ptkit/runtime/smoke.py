"""``python -m ptkit.runtime.smoke NAME``: the smoke test of a ptkit-built package's wheel.

A package built with ptkit has ops ptkit knows nothing about, so this checks what ptkit
can know from the manifests, the loader and the dispatcher:

* ``import NAME`` works and it called ``ptkit.runtime.load_package`` (its libraries were
  loaded with ptkit's loader), with the expected version;
* no library's load decision is FAILED, and a skipped one has a reason;
* it ships a CPU library, and that LOADED (every wheel carries one);
* every op a loaded library's manifest lists has a kernel for that backend's dispatch
  key, and ``explain(NAME)`` routes each op to the native kernel on CPU.

Its own numbers (native vs reference) are the package's tests, or its own smoke module
(``python -m ptkit_ops.smoke`` runs this, then compares ptkit-ops' ops with their
reference). Exit status 0 with a short summary, or 1 with the reasons.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ptkit.backends import BACKENDS

__all__ = ["PackageSmokeFailure", "check_loading", "main", "run_package_smoke"]


class PackageSmokeFailure(RuntimeError):
    """The installed package does not work; the message says what failed and why."""


def _import(name: str) -> tuple[Any, Any]:
    try:
        import importlib

        import ptkit.runtime

        module = importlib.import_module(name)
    except Exception as exc:  # the point is to report any import failure
        raise PackageSmokeFailure(f"import {name} failed: {type(exc).__name__}: {exc}") from exc
    return ptkit.runtime, module


def _has_kernel(qualified: str, key: str) -> bool:
    import torch

    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key))
    except RuntimeError:  # no schema at all
        return False


def check_loading(
    runtime: Any, name: str, decisions: Sequence[Any], native_dir: Path
) -> tuple[list[str], list[str], int]:
    """The load checks: one summary line per decision and per registered kernel, the
    problems found, and the number of op kernels checked."""
    lines: list[str] = []
    problems: list[str] = []
    checked = 0
    for d in decisions:
        details = ", ".join(f"{k}={v}" for k, v in d.details)
        lines.append(
            f"  {d.library:<26} {d.status.value:<8} {d.reason}{f' ({details})' if details else ''}"
        )
        if d.status.value == "failed":
            problems.append(f"{d.library} FAILED to load: {d.reason}")
        elif d.status.value == "skipped" and not d.reason.strip():
            problems.append(f"{d.library} was skipped without a reason")
        # Metal kernels register from Python (the package's binding), not a library.
        if d.status.value != "loaded" or d.manifest is None or d.backend == "metal":
            continue
        key = BACKENDS[d.manifest.backend].dispatch_key
        for op in sorted(d.manifest.ops):
            qualified = f"{d.manifest.namespace}::{op}"
            checked += 1
            if _has_kernel(qualified, key):
                lines.append(f"  {qualified:<26} {key} kernel registered")
            else:
                problems.append(
                    f"{d.library} loaded but registered no {key} kernel for {qualified}: its "
                    "manifest's OPS and its STABLE_TORCH_LIBRARY_IMPL disagree"
                )
    cpu = [d for d in decisions if d.backend == "cpu"]
    if not cpu:
        problems.append(
            f"the wheel has no CPU library with a manifest in {native_dir}: add "
            "ptkit_add_kernel_library(... BACKEND cpu ...) to CMakeLists.txt"
        )
    elif not any(d.status.value == "loaded" for d in cpu):
        problems.append("the CPU library did not load: see its decision above")
    else:
        slow = sorted(
            r.op
            for r in runtime.explain(name)
            if r.device_type == "cpu" and r.implementation != "native"
        )
        if slow:
            problems.append(f"the CPU library loaded but {', '.join(slow)} do not run it on CPU")
    return lines, problems, checked


def run_package_smoke(
    name: str, expect_version: str | None = None, echo: Callable[[str], None] = print
) -> int:
    """The smoke test of package ``name``; returns the number of op kernels checked,
    raises PackageSmokeFailure."""
    runtime, module = _import(name)
    import torch

    loads = {p.name: p for p in runtime.package_loads()}
    load = loads.get(name)
    if load is None:
        raise PackageSmokeFailure(
            f"{name} was imported but loaded no native library with ptkit: its __init__.py "
            "must call ptkit.runtime.load_package(__name__) after defining its ops"
        )
    echo(
        f"{name} {load.version} at {getattr(module, '__file__', '?').rsplit('__init__', 1)[0]}\n"
        f"  torch {torch.__version__}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}"
    )
    if expect_version is not None and load.version != expect_version:
        raise PackageSmokeFailure(
            f"{name} {load.version} was imported, not {expect_version}: another copy shadows "
            "the one under test"
        )
    lines, problems, checked = check_loading(runtime, name, load.decisions, load.native_dir)
    if problems:
        raise PackageSmokeFailure("\n".join(lines + [f"FAILED: {p}" for p in problems]))
    for line in lines:
        echo(line)
    return checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ptkit.runtime.smoke",
        description="Smoke-test an installed package built with ptkit.",
    )
    parser.add_argument("package", help="the package's import name (its folder holds _native/)")
    parser.add_argument("--expect-version", help="fail unless this version is the one imported")
    args = parser.parse_args(argv)
    try:
        count = run_package_smoke(args.package, args.expect_version)
    except PackageSmokeFailure as exc:
        print(f"{args.package} smoke test FAILED:\n{exc}", file=sys.stderr)
        return 1
    print(f"{args.package} smoke test passed: libraries load, {count} op kernels registered")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
