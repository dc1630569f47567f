"""``ptkit doctor``'s output: the readable report and the versioned JSON document.

Text: one section per kind of fact (Python, OS, torch, accelerators, ptkit, profile,
toolchains, smoke), then the findings with their severity and fix. Colour only when
asked for (``use_colour``: the stream is a terminal and ``NO_COLOR`` is unset, see
https://no-color.org); without colour the text is plain ASCII apart from what the
facts themselves hold (paths, names).

JSON: ``{"schema_version", "ptkit_doctor", "facts", "findings", "skipped",
"exit_code"}``, described by ``report.schema.json`` beside this file (draft 2020-12).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ptkit.doctor.checks.base import Check, Finding
from ptkit.doctor.model import SCHEMA_VERSION, Facts, Severity
from ptkit.progress import is_terminal

__all__ = [
    "SCHEMA_PATH",
    "json_document",
    "render_check_list",
    "render_text",
    "use_colour",
    "write_report",
]

SCHEMA_PATH = Path(__file__).resolve().parent / "report.schema.json"

_RESET = "\033[0m"
_STYLE = {
    "title": "\033[1m",
    Severity.ERROR: "\033[1;31m",
    Severity.WARNING: "\033[33m",
    Severity.INFO: "\033[36m",
    "ok": "\033[32m",
    "dim": "\033[2m",
}

# Typographic characters in messages (the rule modules write "sm_90…sm_120"), spelled in
# ASCII for plain output.
_ASCII = str.maketrans(
    {
        "\u2026": "...",  # ellipsis
        "\u2265": ">=",
        "\u2264": "<=",
        "\u00d7": "x",  # multiplication sign
        "\u2192": "->",
        "\u2013": "-",  # en dash
        "\u2014": "-",  # em dash
        "\u2019": "'",
    }
)

_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def use_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour on a terminal only, and never when ``NO_COLOR`` is set to anything non-empty."""
    env = os.environ if environ is None else environ
    return not env.get("NO_COLOR", "") and is_terminal(stream, env)


def json_document(
    facts: Facts | None,
    findings: Sequence[Finding],
    skipped: Sequence[tuple[str, str]],
    exit_code: int,
    *,
    version: str,
    error: str | None = None,
) -> dict[str, Any]:
    """The ``--json`` document (schema ``report.schema.json``)."""
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "ptkit_doctor": version,
        "facts": None if facts is None else facts.to_json(),
        "findings": [f.to_json() for f in sorted(findings, key=_finding_order)],
        "skipped": [{"check": check, "missing": missing} for check, missing in skipped],
        "exit_code": exit_code,
    }
    if error is not None:
        document["error"] = error
    return document


def _finding_order(finding: Finding) -> tuple[int, str]:
    return (_SEVERITY_ORDER[finding.severity], finding.id)


class _Writer:
    def __init__(self, colour: bool) -> None:
        self.colour = colour
        self.lines: list[str] = []

    def style(self, text: str, style: object) -> str:
        if not self.colour:
            return text
        return f"{_STYLE[style]}{text}{_RESET}"  # type: ignore[index]

    def section(self, title: str) -> None:
        if self.lines:
            self.lines.append("")
        self.lines.append(self.style(title, "title"))

    def line(self, text: str, indent: int = 1) -> None:
        self.lines.append("  " * indent + text)

    def missing(self, facts: Facts, field: str) -> None:
        problem = facts.probe_problems.get(field)
        self.line(f"(not known: {problem})" if problem else "(not known)")

    def text(self) -> str:
        text = "\n".join(self.lines) + "\n"
        return text if self.colour else text.translate(_ASCII)


def _yes_no(value: bool | None, yes: str = "yes", no: str = "no") -> str:
    return "unknown" if value is None else (yes if value else no)


def _python(w: _Writer, facts: Facts) -> None:
    w.section("Python")
    p = facts.python
    if p is None:
        w.missing(facts, "python")
        return
    if p.free_threaded:
        gil = _yes_no(p.gil_enabled, "enabled", "disabled")
        w.line(f"{p.implementation} {p.version}, free-threaded; GIL {gil} at run time")
    else:
        w.line(f"{p.implementation} {p.version} (not free-threaded)")
    w.line(f"executable: {p.executable}")


def _os(w: _Writer, facts: Facts) -> None:
    w.section("OS")
    o = facts.os
    if o is None:
        w.missing(facts, "os")
        return
    w.line(f"{o.name or o.system} ({o.system} {o.release}, {o.machine})")
    if o.system == "Linux" or o.libc or o.manylinux:
        w.line(f"libc: {o.libc or 'unknown'}; newest manylinux tag: {o.manylinux or 'none'}")


def _torch(w: _Writer, facts: Facts) -> None:
    w.section("torch")
    t = facts.torch
    if t is None:
        w.missing(facts, "torch")
        return
    if t.location is None:
        w.line("not installed")
        return
    builds = [f"CUDA {t.cuda}" if t.cuda else "", f"HIP {t.hip}" if t.hip else ""]
    builds.append("XPU" if t.xpu else "")
    build = ", ".join(b for b in builds if b) or "CPU only"
    w.line(f"{t.version or 'unknown version'} ({build}) at {t.location}")
    w.line(f"C++11 ABI: {_yes_no(t.cxx11_abi)}")
    compile_text = _yes_no(t.compile_supported, "available", "unavailable")
    w.line(
        f"torch.compile: {compile_text}" + (f" ({t.compile_reason})" if t.compile_reason else "")
    )
    if t.compile_cpu_reason:
        w.line(f"Inductor CPU code: {t.compile_cpu_reason}")
    if t.cuda_runtimes:
        w.line(f"libcudart: {', '.join(t.cuda_runtimes)}")
    for problem in t.problems:
        w.line(f"problem: {problem}")


def _accelerators(w: _Writer, facts: Facts) -> None:
    w.section("Accelerators")
    m = facts.machine
    if m is None:
        w.missing(facts, "machine")
        return
    if m.nvidia_driver or m.cuda_driver_version:
        cuda = m.cuda_driver_version
        cuda_text = f"CUDA {cuda[0]}.{cuda[1]} ({m.cuda_driver_source})" if cuda else "CUDA unknown"
        w.line(f"NVIDIA driver {m.nvidia_driver or 'unknown'}, supports {cuda_text}")
    for g in m.nvidia:
        bus = f"  {g.pci_bus_id}" if g.pci_bus_id else ""
        w.line(f"nvidia:{g.index}  {g.name}  {g.arch or 'arch unknown'}{bus}  (from {g.source})")
    for a in m.amd:
        bus = f"  {a.pci_bus_id}" if a.pci_bus_id else ""
        w.line(f"amd:{a.node}  {a.name}  {a.gfx_target}{bus}")
    for i, x in enumerate(m.intel):
        family = x.family or "not an XPU family"
        w.line(f"intel:{i}  {x.name}  {family}  {x.pci_bus_id}  driver {x.driver or 'none'}")
    for i, apple in enumerate(m.apple):
        w.line(f"apple:{i}  {apple.chip}  (MPS)")
    if not m.has_gpu:
        w.line("no GPU found")
    for problem in m.problems:
        w.line(f"problem: {problem}")


def _targets(targets: Mapping[str, Sequence[str]]) -> str:
    return "; ".join(f"{k} {','.join(v)}" for k, v in targets.items() if v) or "none"


def _packages(w: _Writer, facts: Facts) -> None:
    w.section("Packages built with ptkit")
    packages = facts.packages
    if packages is None:
        w.missing(facts, "packages")
        return
    if not packages:
        w.line("none installed (no package declares itself in the ptkit.packages entry points)")
    for p in packages:
        w.line(f"{p.name} {p.version} (variant {p.variant or 'unknown'}) at {p.location}")
        if not p.libraries:
            w.line("no native library", 2)
        for lib in p.libraries:
            built = ", ".join(
                part
                for part in (
                    lib.toolkit,
                    f"torch {lib.torch_built_with}" if lib.torch_built_with else None,
                    f"stable ABI {lib.torch_target}" if lib.torch_target else None,
                )
                if part
            )
            w.line(f"{lib.library} [{lib.backend}] {lib.status}: {lib.reason}", 2)
            w.line(f"targets: {_targets(lib.targets)}; built with {built or 'unknown'}", 3)
        if p.routes:
            w.line("routes (op, device type: implementation, why):", 2)
            width = max(len(r.op) for r in p.routes)
            for r in p.routes:
                library = f" {r.library}" if r.library else ""
                w.line(
                    f"{r.op:<{width}}  {r.device_type:<4}  {r.implementation}{library}: {r.reason}",
                    3,
                )


def _profile(w: _Writer, facts: Facts) -> None:
    w.section("Runtime profile")
    p = facts.profile
    if p is None:
        w.missing(facts, "profile")
        return
    w.line(f"graph capture: {p.graph_capture}")
    w.line(f"distributed backend: {p.distributed_backend}")
    w.line(f"GEMM backends: {', '.join(p.gemm_backends) or 'none worth enabling'}")
    for note in p.notes:
        w.line(f"note: {note}")


def _toolchains(w: _Writer, facts: Facts) -> None:
    if facts.toolchains is None:
        return
    w.section("Toolchains (--build)")
    if not facts.toolchains:
        w.line("none found")
    for t in facts.toolchains:
        where = f"{t.version or 'unknown version'} at {t.path}" if t.path else "not found"
        w.line(f"{t.name}: {where}")
        if t.targets:
            w.line(f"targets: {', '.join(t.targets)}", 2)
        w.line(f"could build: {t.could_build}", 2)
        if t.problem:
            w.line(f"problem: {t.problem}", 2)


def _smoke(w: _Writer, facts: Facts) -> None:
    s = facts.smoke
    if s is None:
        return
    w.section("Smoke (--smoke, in a child process)")
    imported = (
        f"torch {s.torch_version or ''} imported".replace("  ", " ")
        + (f" in {s.import_seconds:.2f} s" if s.import_seconds is not None else "")
        if s.torch_imported
        else "torch NOT imported"
    )
    w.line(f"{imported}; the child took {s.seconds:.2f} s")
    if s.error:
        w.line(f"error: {s.error}")
    for p in s.packages:
        verdict = w.style("ok", "ok") if not p.problems else w.style("FAILED", Severity.ERROR)
        w.line(f"{p.name}: load checks {verdict} ({p.kernels_checked} op kernels registered)")
        for problem in p.problems:
            w.line(problem, 2)
    if s.rows:
        w.line(f"{'op':<13} {'device':<7} {'dtype':<9} {'impl':<10} {'max err':>9} {'time':>10}")
    for r in s.rows:
        error = "n/a" if r.max_error is None else f"{r.max_error:.2e}"
        verdict = w.style("ok", "ok") if r.ok else w.style("MISMATCH", Severity.ERROR)
        w.line(
            f"{r.op:<13} {r.device:<7} {r.dtype:<9} {r.implementation:<10} {error:>9} "
            f"{r.seconds * 1e6:>7.0f} us  {verdict}" + (f"  {r.problem}" if r.problem else "")
        )


def _findings(
    w: _Writer, findings: Sequence[Finding], skipped: Sequence[tuple[str, str]], exit_code: int
) -> None:
    w.section("Findings")
    if not findings:
        w.line(w.style("no problems found", "ok"))
    for f in sorted(findings, key=_finding_order):
        label = w.style(f"{f.severity.value:<7}", f.severity)
        w.line(f"{label} {f.id} {f.check.name}: {f.message}")
        w.line(f"        fix: {f.fix}")
    if skipped:
        missing = sorted({need for _, need in skipped})
        w.line(
            f"{len(skipped)} check(s) skipped, their facts are missing ({', '.join(missing)}): "
            "--json lists them"
        )
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    summary = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n) or "no findings"
    w.line(f"{summary}; exit code {exit_code}")


def render_text(
    facts: Facts,
    findings: Sequence[Finding],
    skipped: Sequence[tuple[str, str]],
    exit_code: int,
    *,
    version: str,
    colour: bool = False,
) -> str:
    """The readable report; ``colour`` adds ANSI styles (see ``use_colour``)."""
    w = _Writer(colour)
    total = sum(facts.probe_seconds.values())
    w.lines.append(w.style(f"ptkit doctor {version}", "title") + f" (probes {total:.2f} s)")
    for part in (_python, _os, _torch, _accelerators, _packages, _profile, _toolchains, _smoke):
        part(w, facts)
    _findings(w, findings, skipped, exit_code)
    return w.text()


def render_check_list(checks: Sequence[Check]) -> str:
    """``ptkit doctor --list-checks``: each check's ID, severity, name, the facts it
    needs, its summary, and its fix on the line below."""
    lines = [f"{'ID':<8}{'severity':<9}{'name':<32}{'needs':<18}summary"]
    for c in checks:
        needs = ",".join(c.needs) or "-"
        lines.append(f"{c.id:<8}{c.severity.value:<9}{c.name:<32}{needs:<18}{c.summary}")
        lines.append(f"{'':<8}fix: {c.fix}")
    return "\n".join(lines) + "\n"


def write_report(text: str, stream: TextIO | None = None) -> str | None:
    """Write ``text`` to ``stream`` (stdout); the one-line reason when the stream cannot
    take it (a full disk, a closed pipe): the doctor failing, said once, not a traceback
    at interpreter exit."""
    out = sys.stdout if stream is None else stream
    reconfigure = getattr(out, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")  # a C-locale stream: no UnicodeEncodeError
    try:
        out.write(text)
        out.flush()
    except OSError as exc:
        # Python would flush the stream again at exit and print a second error.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
        except (OSError, ValueError):
            pass
        return f"ptkit doctor: cannot write the report to stdout: {exc}"
    return None
