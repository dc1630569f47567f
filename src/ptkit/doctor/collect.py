"""Run the doctor's probes, each isolated, and gather their ``Facts``.

Each probe runs in a daemon thread with a time budget: one that raises becomes
``probe_problems[name] = "crashed: <type>: <message>"``, one that overruns its budget is
abandoned (``"timed out after N s"``; the thread is left to finish or die with the
process) and its field stays None. Independent probes run concurrently: the ones that
read files overlap with the ones that wait on commands (nvidia-smi, --build's tools).
Nothing here imports torch.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ptkit.doctor.model import Facts, TorchInstall
from ptkit.doctor.probes.distributions import probe_distributions
from ptkit.doctor.probes.os_facts import probe_os
from ptkit.doctor.probes.packages import probe_packages
from ptkit.doctor.probes.profile import probe_profile
from ptkit.doctor.probes.python import probe_python
from ptkit.doctor.probes.torch_install import probe_torch
from ptkit.hardware.detect import detect
from ptkit.selection.commands import ENV_INDEX_URL

__all__ = ["collect_facts"]


class _Probe:
    """One probe in its own daemon thread."""

    def __init__(self, name: str, fn: Callable[[], Any]) -> None:
        self.name = name
        self.result: Any = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=f"ptkit-doctor-{name}", daemon=True)
        self._started = 0.0

    def _run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as exc:  # SystemExit from a probe must not end the doctor
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - self._started

    def start(self) -> _Probe:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def finish(
        self,
        budget_s: float,
        facts: dict[str, Any],
        problems: dict[str, str],
        seconds: dict[str, float],
    ) -> None:
        """Wait for the rest of the budget (counted from the start); record the outcome."""
        remaining = budget_s - (time.perf_counter() - self._started)
        self._thread.join(max(remaining, 0.0))
        if self._thread.is_alive():
            problems[self.name] = (
                f"timed out after {budget_s:g} s: the {self.name} probe was abandoned; "
                "run `ptkit doctor --timeout` with more seconds, or find what it waits on"
            )
            seconds[self.name] = budget_s
            return
        seconds[self.name] = round(self.seconds, 6)
        if self.error is not None:
            exc = self.error
            problems[self.name] = f"crashed: {type(exc).__name__}: {exc}"
            return
        facts[self.name] = self.result


def collect_facts(
    *,
    root: Path = Path("/"),
    build: bool = False,
    timeout_s: float = 3.0,
    environ: Mapping[str, str] | None = None,
) -> Facts:
    """Every probe's facts (``toolchains`` only with ``build``). ``root``: where /proc,
    /sys and /etc are read from (a fixture tree in tests). ``timeout_s``: each command's
    timeout and each file probe's budget; a probe that runs commands gets room for them."""
    env = dict(os.environ if environ is None else environ)
    paths = list(sys.path)
    facts: dict[str, Any] = {}
    problems: dict[str, str] = {}
    seconds: dict[str, float] = {}
    # Budgets: a file probe gets timeout_s; detect() runs nvidia-smi (timeout_s, then up to
    # 2 s to reap it); --build runs up to three commands per tool, tools concurrently.
    budgets = {"machine": timeout_s + 2.0, "toolchains": 3 * timeout_s + 2.0}
    first = [
        _Probe("python", lambda: probe_python()),
        _Probe("os", lambda: probe_os(root)),
        _Probe("torch", lambda: probe_torch(environ=env)),
        _Probe("machine", lambda: detect(root, timeout_s=timeout_s)),
        _Probe("distributions", lambda: probe_distributions(paths)),
    ]
    if build:
        # Imported here: shutil and the recipe model are not needed for the default report.
        from ptkit.doctor.probes.toolchains import probe_toolchains

        first.append(
            _Probe("toolchains", lambda: probe_toolchains(environ=env, timeout_s=timeout_s))
        )
    for probe in first:
        probe.start()
    # packages and profile need torch and the machine: they start as soon as both are in.
    for probe in first:
        if probe.name in ("torch", "machine"):
            probe.finish(budgets.get(probe.name, timeout_s), facts, problems, seconds)
    torch: TorchInstall | None = facts.get("torch")
    machine = facts.get("machine")
    second: list[_Probe] = []
    if torch is None:
        for name in ("packages", "profile"):
            problems[name] = "not run: the torch probe gave no facts (see its problem)"
    else:
        second = [
            _Probe(
                "packages",
                lambda: probe_packages(torch=torch, machine=machine, environ=env, paths=paths),
            ).start(),
            _Probe("profile", lambda: probe_profile(torch, machine, paths=paths)).start(),
        ]
    for probe in first:
        if probe.name not in ("torch", "machine"):
            probe.finish(budgets.get(probe.name, timeout_s), facts, problems, seconds)
    for probe in second:
        probe.finish(budgets.get(probe.name, timeout_s), facts, problems, seconds)
    return Facts(
        python=facts.get("python"),
        os=facts.get("os"),
        torch=torch,
        machine=machine,
        distributions=facts.get("distributions"),
        packages=facts.get("packages"),
        profile=facts.get("profile"),
        toolchains=facts.get("toolchains"),
        index_url=env.get(ENV_INDEX_URL, "").strip() or None,
        probe_problems=problems,
        probe_seconds=seconds,
    )
