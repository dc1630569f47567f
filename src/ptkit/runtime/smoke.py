"""``python -m ptkit.runtime.smoke NAME``: the smoke test of a ptkit-built package's wheel.

A package built with ptkit has ops ptkit knows nothing about, so this checks what each
library's manifest promises, no more (a CUDA-only op set, a wheel without a CPU
library, ops without a reference are all fine):

* ``import NAME`` works and it called ``ptkit.runtime.load_package`` (its libraries were
  loaded with ptkit's loader), with the expected version;
* no library's load decision is FAILED, and a skipped one has a reason;
* each loaded library registers a kernel of its backend's dispatch key for every op its
  manifest declares, and registers nothing it does not declare (the dispatcher, asked
  now; and the registrations recorded at install time against the declared ops);
* each declared dtype of each op of a loaded CPU library runs once on CPU, on the
  native kernel: with the package's sample inputs (``load_package(samples=…)``), else
  with guessed elementwise inputs where the schema makes that safe (tensors in, one
  tensor out); the dtypes that could not be run are listed with the reason;
* a library that cannot load here (a CUDA library on a machine without a GPU): its
  recorded registrations against its declared ops, and the installed file loaded alone
  in a child process, which must register the same; its kernels are not run, and the
  summary says so.

Its own numbers (native vs reference) are the package's tests, or its own smoke module
(``python -m ptkit_ops.smoke`` runs this, then compares ptkit-ops' ops with their
reference). Exit status 0 with a short summary, or 1 with the reasons.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ptkit.backends import BACKENDS

__all__ = ["PackageSmokeFailure", "check_dtypes", "check_loading", "main", "run_package_smoke"]

# The shape of each tensor argument when a schema allows guessing elementwise inputs.
GUESSED_SHAPE = (4, 16)


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


def _recorded_problem(manifest: Any) -> str | None:
    """The install-time registrations against the declared ops (the rule of
    ``ptkit.release.registrations``); None when they agree or none were recorded."""
    from ptkit.release.registrations import RegistrationError, op_table

    if manifest.registrations is None:
        return None
    try:
        op_table(manifest, manifest.registrations, ())
    except RegistrationError as exc:
        return str(exc)
    return None


def _undeclared_kernels(decisions: Sequence[Any]) -> list[str]:
    """Kernels of a loaded library's dispatch key, registered by a library (not from
    Python), for ops of its namespace that no loaded library of that key declares."""
    import torch

    from ptkit.runtime.registrations import op_entry
    from ptkit.runtime.session import is_python_registration

    declared: dict[tuple[str, str], set[str]] = {}
    for d in decisions:
        if d.status.value != "loaded" or d.manifest is None or d.backend == "metal":
            continue
        key = BACKENDS[d.manifest.backend].dispatch_key
        declared.setdefault((d.manifest.namespace, key), set()).update(d.manifest.ops)
    problems = []
    names: list[str] = torch._C._dispatch_get_all_op_names()
    for (namespace, key), ops in sorted(declared.items()):
        for qualified in sorted(n for n in names if n.startswith(f"{namespace}::")):
            entry = op_entry(qualified)
            where = entry.kernels.get(key) if entry is not None else None
            op = qualified.partition("::")[2]
            if where is None or op in ops or is_python_registration(where):
                continue
            problems.append(
                f"{qualified} has a {key} kernel registered at {where}, but no loaded library's "
                "manifest declares it: give it to OPS (or leave OPS out), or stop registering it"
            )
    return problems


def check_loading(
    runtime: Any, name: str, decisions: Sequence[Any], native_dir: Path
) -> tuple[list[str], list[str], int]:
    """The load checks: one summary line per decision and per registered kernel, the
    problems found, and the number of op kernels checked."""
    lines: list[str] = []
    problems: list[str] = []
    checked = 0
    if not decisions:
        problems.append(
            f"{name} has no library with a manifest in {native_dir}: the wheel ships no "
            "native code (ptkit_add_kernel_library(... INSTALL_DIR <package>/_native))"
        )
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
        recorded = _recorded_problem(d.manifest)
        if recorded is not None:
            problems.append(f"{d.library}: its recorded registrations disagree: {recorded}")
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
    problems += _undeclared_kernels(decisions)
    return lines, problems, checked


def _overload(qualified: str) -> Any:
    import torch

    namespace, _, op = qualified.partition("::")
    name, _, overload = op.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")


def _guessable(schema: Any) -> bool:
    """Safe to run on guessed inputs: every argument without a default is a plain tensor
    (not written to), and it returns one tensor."""
    required = [a for a in schema.arguments if not a.has_default_value()]
    return (
        all(str(a.type) == "Tensor" and a.alias_info is None for a in required)
        and len(schema.returns) == 1
        and str(schema.returns[0].type) == "Tensor"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def check_dtypes(
    decisions: Sequence[Any], samples: Mapping[str, Callable[..., Sequence[Any]]]
) -> tuple[list[str], list[str], int]:
    """Each declared dtype of each op of each loaded CPU library, run once on the native
    CPU kernel: summary lines (with the dtypes not run and why), problems, runs done."""
    import torch

    cpu_only = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    lines: list[str] = []
    problems: list[str] = []
    runs = 0
    for d in decisions:
        if d.status.value != "loaded" or d.manifest is None or d.backend == "metal":
            continue
        if d.backend != "cpu":
            key = BACKENDS[d.manifest.backend].dispatch_key
            lines.append(
                f"  {d.library:<26} registration checks only: the smoke test runs CPU kernels, "
                f"its {key} kernels are not run"
            )
            continue
        for op, dtype_names in sorted(d.manifest.ops.items()):
            qualified = f"{d.manifest.namespace}::{op}"
            if not dtype_names:
                lines.append(f"  {qualified:<26} not run: its manifest declares no dtype")
                continue
            try:
                overload = _overload(qualified)
            except AttributeError:
                continue  # no schema: check_loading said so
            sample = samples.get(qualified) or samples.get(op)
            if sample is None and not _guessable(overload._schema):
                lines.append(
                    f"  {qualified:<26} not run ({', '.join(dtype_names)}): its schema "
                    f"({overload._schema}) takes more than tensors; give its inputs to "
                    "load_package(samples={...})"
                )
                continue
            outcomes: dict[str, str | None] = {}
            for dtype_name in dtype_names:
                dtype = getattr(torch, dtype_name)
                try:
                    if sample is not None:
                        args = list(sample(dtype, "cpu"))
                    else:
                        args = [
                            torch.randn(GUESSED_SHAPE).to(dtype)
                            for a in overload._schema.arguments
                            if not a.has_default_value()
                        ]
                    overload.redispatch(cpu_only, *args)
                    outcomes[dtype_name] = None
                except Exception as exc:  # a kernel that refuses a dtype raises
                    outcomes[dtype_name] = _first_line(exc)
            ran = [t for t, error in outcomes.items() if error is None]
            failed = {t: error for t, error in outcomes.items() if error is not None}
            runs += len(outcomes)
            how = "its samples" if sample is not None else "guessed elementwise inputs"
            if failed and (sample is not None or ran):
                for dtype_name, error in failed.items():
                    problems.append(
                        f"{qualified}: {d.library} declares {dtype_name}, but its CPU kernel "
                        f"raised on {how}: {error}; take {dtype_name} out of DTYPES, or make "
                        "the kernel accept it"
                    )
            elif failed:
                error = next(iter(failed.values()))
                lines.append(
                    f"  {qualified:<26} not run ({', '.join(failed)}): the guessed elementwise "
                    f"inputs (each tensor randn{GUESSED_SHAPE}) were refused for every dtype "
                    f"({error}); give its inputs to load_package(samples={{...}})"
                )
            if ran:
                lines.append(f"  {qualified:<26} ran on CPU: {', '.join(ran)} ({how})")
    return lines, problems, runs


def check_unloaded(decisions: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Libraries that cannot load here (no such device, another torch): their recorded
    registrations against their declared ops, and the installed file loaded alone in a
    child process; their kernels are not run."""
    from ptkit.release.registrations import RegistrationError, read_registrations

    lines: list[str] = []
    problems: list[str] = []
    for d in decisions:
        if d.status.value != "skipped" or d.manifest is None or d.backend in ("cpu", "metal"):
            continue
        manifest = d.manifest
        head = f"  {d.library:<26} registration checks only ({d.reason}): kernels not run"
        if manifest.registrations is None:
            lines.append(
                f"{head}; its manifest records no registrations (the build's torch could not "
                "load it, or an older ptkit built it)"
            )
            continue
        recorded = _recorded_problem(manifest)
        if recorded is not None:
            problems.append(f"{d.library}: {recorded}")
            continue
        try:
            found = read_registrations(
                manifest.library_path, manifest.backend, [manifest.namespace]
            )
        except RegistrationError as exc:
            problems.append(f"{d.library}: {exc}")
            continue
        if isinstance(found, str):
            lines.append(f"{head}; registrations as recorded (not loadable here: {found})")
        elif found != manifest.registrations:
            problems.append(
                f"{d.library}: the installed library, loaded alone, registers "
                f"{found.to_json()}, but its manifest recorded {manifest.registrations.to_json()} "
                "(the file changed after the build?): rebuild the wheel"
            )
        else:
            ops = ", ".join(sorted(manifest.ops)) or "none"
            lines.append(f"{head}; loaded alone, it registers the declared ops ({ops})")
    return lines, problems


def run_package_smoke(
    name: str, expect_version: str | None = None, echo: Callable[[str], None] = print
) -> int:
    """The smoke test of package ``name``; returns the number of checks done (op kernels
    and dtype runs), raises PackageSmokeFailure."""
    runtime, module = _import(name)
    import torch

    from ptkit.runtime.session import sample_inputs

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
    if not problems:
        dtype_lines, dtype_problems, runs = check_dtypes(load.decisions, sample_inputs(name))
        unloaded_lines, unloaded_problems = check_unloaded(load.decisions)
        lines += dtype_lines + unloaded_lines
        problems += dtype_problems + unloaded_problems
        checked += runs
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
    print(
        f"{args.package} smoke test passed: libraries load as their manifests say, "
        f"{count} checks (op kernels registered, declared dtypes run)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
