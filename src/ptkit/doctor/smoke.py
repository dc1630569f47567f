"""``ptkit doctor --smoke``: every installed package built with ptkit, in a child that
imports torch.

The doctor's own process never imports torch (it must survive a torch that crashes on
import, and stay fast). The child (``sys.executable -c CHILD``) imports torch, then
every package of the ``ptkit.packages`` entry-point group, and runs the load checks
every ptkit-built package gets (``ptkit.runtime.smoke.check_loading``: no FAILED
library, a loaded CPU library serving the CPU ops, every op a loaded manifest lists
registered at its backend's dispatch key). When ptkit-ops is installed it also runs its
ops (``rms_norm``, ``fused_linear``, ``silu_and_mul``) on each available device (cpu,
every cuda and xpu device, mps) in float32 and bfloat16 (and float16 off the CPU) and
compares each with its reference (``ptkit_ops.*_reference``). It prints one JSON line.
Whatever goes wrong in the child (an import error, a crash, a hang killed after the
timeout) becomes ``SmokeFacts(torch_imported=False or error=…)``, never an exception
here.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from ptkit.doctor.model import SmokeFacts, SmokePackage, SmokeRow
from ptkit.platforms.commands import run_command
from ptkit.selection.recipes import OPS_PACKAGE

__all__ = ["CHILD", "DEFAULT_TIMEOUT_S", "MARKER", "parse_child_output", "run_smoke"]

DEFAULT_TIMEOUT_S = 120.0
MARKER = "PTKIT_SMOKE_JSON "

# Tolerance on max |op - reference| relative to max(1, max |reference|): a smoke test
# finds a broken kernel (wrong row, garbage), not the last ulp (tests/ do that).
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}

# The child. Only the standard library until torch is imported; prints MARKER + JSON.
CHILD = r"""
import importlib, json, sys, time
MARKER = "PTKIT_SMOKE_JSON "
SETTINGS = json.loads(sys.argv[1])
TOLERANCE = SETTINGS["tolerance"]
out = {"torch_imported": False, "error": None, "rows": [], "torch_version": None,
       "import_seconds": None, "gil_enabled": None, "packages": []}

def last_line(exc):
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[-1] if text else type(exc).__name__

def gil():
    probe = getattr(sys, "_is_gil_enabled", None)
    return None if probe is None else bool(probe())

try:
    start = time.perf_counter()
    import torch
    out["import_seconds"] = time.perf_counter() - start
    out["torch_imported"] = True
    out["torch_version"] = torch.__version__
except BaseException as exc:
    out["error"] = "import torch: " + last_line(exc)
    print(MARKER + json.dumps(out), flush=True)
    sys.exit(0)

def run_ops(runtime, ops):
    # ptkit-ops' ops against their references on every device torch has here.
    routes = {(r.op, r.device_type): r.implementation for r in runtime.explain(ops.__name__)}
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        devices += [f"xpu:{i}" for i in range(torch.xpu.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")

    def sync(device):
        kind = device.split(":")[0]
        module = getattr(torch, kind, None)
        if kind != "cpu" and module is not None and hasattr(module, "synchronize"):
            module.synchronize()

    hidden = 512
    for device in devices:
        dtypes = ["float32", "bfloat16"] + ([] if device == "cpu" else ["float16"])
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            gen = torch.Generator().manual_seed(0)
            def rand(*shape, scale=1.0):
                return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)
            cases = {
                "rms_norm": (ops.rms_norm, ops.rms_norm_reference,
                             (rand(8, hidden), rand(hidden), 1e-6)),
                "fused_linear": (ops.fused_linear, ops.fused_linear_reference,
                                 (rand(4, 1, hidden), rand(hidden, hidden, scale=hidden ** -0.5),
                                  rand(hidden), "silu")),
                "silu_and_mul": (ops.silu_and_mul, ops.silu_and_mul_reference,
                                 (rand(8, 2 * hidden),)),
            }
            for op_name, (op, reference, args) in cases.items():
                row = {"op": op_name, "device": device, "dtype": dtype_name,
                       "implementation": routes.get((op_name, device.split(":")[0]), "unknown"),
                       "max_error": None, "seconds": 0.0, "ok": False, "problem": None}
                try:
                    op(*args)  # warm-up (first-call costs: Metal compile, CUDA context)
                    sync(device)
                    start = time.perf_counter()
                    got = op(*args)
                    sync(device)
                    row["seconds"] = time.perf_counter() - start
                    want = reference(*args)
                    err = (got.double() - want.double()).abs().max().item()
                    scale = max(1.0, want.double().abs().max().item())
                    row["max_error"] = err
                    row["ok"] = bool(err <= TOLERANCE[dtype_name] * scale)
                    if not row["ok"]:
                        row["problem"] = (f"allowed {TOLERANCE[dtype_name] * scale:.3g} "
                                          f"({TOLERANCE[dtype_name]:g} x max(1, max |reference|))")
                except Exception as exc:
                    row["problem"] = last_line(exc)
                out["rows"].append(row)

try:
    import ptkit.runtime as runtime
    from ptkit.loading.packages import discover_packages
    from ptkit.runtime.smoke import check_loading
    imported = {}
    for entry in discover_packages():
        try:
            imported[entry.module] = importlib.import_module(entry.module)
            runtime.load_package(entry.module)  # recorded once: a no-op when its __init__ did
        except Exception as exc:  # one broken package must not hide the others
            out["packages"].append({"name": entry.module, "kernels_checked": 0,
                                    "problems": [f"import {entry.module} failed: {last_line(exc)}"]})
            imported.pop(entry.module, None)
    out["gil_enabled"] = gil()
    for load in runtime.package_loads():
        if load.name not in imported:
            continue
        _lines, problems, checked = check_loading(runtime, load.name, load.decisions, load.native_dir)
        out["packages"].append({"name": load.name, "kernels_checked": checked,
                                "problems": problems})
    if SETTINGS["ops_package"] in imported:
        run_ops(runtime, imported[SETTINGS["ops_package"]])
except BaseException as exc:
    out["error"] = last_line(exc)
print(MARKER + json.dumps(out), flush=True)
"""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def parse_child_output(output: str, seconds: float, problem: str | None) -> SmokeFacts:
    """The child's printed JSON as ``SmokeFacts``; any other output is an error line."""
    payload: Any = None
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                payload = json.loads(line[len(MARKER) :])
            except ValueError:
                payload = None
            break
    if not isinstance(payload, dict):
        error = problem or "the child printed no result"
        last = _last_line(output)
        if last and last not in error:
            error = f"{error}: {last}"
        return SmokeFacts(torch_imported=False, error=error, seconds=seconds, rows=())
    try:
        rows = tuple(
            SmokeRow(
                op=str(r["op"]),
                device=str(r["device"]),
                dtype=str(r["dtype"]),
                implementation=str(r["implementation"]),
                max_error=None if r["max_error"] is None else float(r["max_error"]),
                seconds=float(r["seconds"]),
                ok=bool(r["ok"]),
                problem=None if r["problem"] is None else str(r["problem"]),
            )
            for r in payload.get("rows", [])
        )
        packages = tuple(
            SmokePackage(
                name=str(p["name"]),
                kernels_checked=int(p["kernels_checked"]),
                problems=tuple(str(problem) for problem in p["problems"]),
            )
            for p in payload.get("packages", [])
        )
        gil = payload.get("gil_enabled")
        imported = payload.get("import_seconds")
        return SmokeFacts(
            torch_imported=bool(payload.get("torch_imported")),
            error=payload.get("error") or problem,
            seconds=seconds,
            rows=rows,
            torch_version=payload.get("torch_version"),
            import_seconds=None if imported is None else float(imported),
            gil_enabled=None if gil is None else bool(gil),
            packages=packages,
        )
    except (KeyError, TypeError, ValueError) as exc:
        return SmokeFacts(
            torch_imported=bool(payload.get("torch_imported")),
            error=f"the child's result is malformed ({type(exc).__name__}: {exc})",
            seconds=seconds,
            rows=(),
        )


def run_smoke(timeout_s: float = DEFAULT_TIMEOUT_S, python: str | None = None) -> SmokeFacts:
    """Run the smoke child with ``python`` (default: this interpreter), killed (with
    anything it started) after ``timeout_s`` seconds."""
    start = time.perf_counter()
    settings = {"tolerance": TOLERANCE, "ops_package": OPS_PACKAGE}
    argv = [python or sys.executable, "-c", CHILD, json.dumps(settings)]
    result = run_command(argv, timeout_s)
    seconds = time.perf_counter() - start
    problem = None
    if result.output is None:
        problem = (
            f"the smoke child did not finish within {timeout_s:g} s (killed)"
            if result.problem and "no answer" in result.problem
            else f"the smoke child failed: {result.problem or 'it could not be started'}"
        )
        return SmokeFacts(torch_imported=False, error=problem, seconds=seconds, rows=())
    if result.returncode != 0:
        # A crash (segfault in a kernel: -11) after or before the JSON line.
        problem = f"the smoke child exited with status {result.returncode}"
    facts = parse_child_output(result.output, seconds, problem)
    return facts
