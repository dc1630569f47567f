"""Shared by the unit and the integration tests: the wheels under test, and what a run
shows while it goes and writes when it ends.

- In a verbose run (`make integration` passes -v) each test is named as it starts and
  its result carries its time when it took a second or more (setup included: that is
  where the fresh venvs are built); a test still running says so every minute.
- ``PTKIT_TEST_RESULTS=<file>.json``: the run's counts and time are written there
  (scripts/test reads them for `make test`'s summary).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from support import REPO

# A test still running after this many seconds is reported, and again every as many.
STILL_RUNNING_EVERY = 60.0
# The outcomes counted for PTKIT_TEST_RESULTS, as pytest's terminal reporter names them.
COUNTED = {"passed": "passed", "failed": "failed", "error": "errors", "skipped": "skipped",
           "xfailed": "xfailed", "xpassed": "xpassed", "deselected": "deselected"}  # fmt: skip


class _Clock:
    """When the session and the running tests started (several at once under pytest-xdist),
    and each test's setup time."""

    def __init__(self) -> None:
        self.session_started = time.monotonic()
        self.running: dict[str, float] = {}  # nodeid: start
        self.setup_seconds: dict[str, float] = {}


_clock = _Clock()
# Where this run's counts go, taken out of the environment at start-up: a pytest that a test
# starts (a wheel's own tests, a run in a root or a container) must not overwrite them.
_results_target = ""


def pytest_configure(config: pytest.Config) -> None:
    global _results_target
    _results_target = os.environ.pop("PTKIT_TEST_RESULTS", "") or _results_target


def pytest_sessionstart(session: pytest.Session) -> None:
    _clock.session_started = time.monotonic()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and session.config.option.verbose > 0:
        threading.Thread(target=_watch, args=(reporter,), daemon=True).start()


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _clock.running[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _clock.running.pop(nodeid, None)


def _watch(reporter: pytest.TerminalReporter) -> None:
    """Every few seconds: is a test running for another whole minute? Then say so, so
    that a long build or install inside a test is not mistaken for a hang."""
    said: dict[str, int] = {}
    while True:
        time.sleep(2)
        for nodeid, start in list(_clock.running.items()):
            minutes = int((time.monotonic() - start) // STILL_RUNNING_EVERY)
            if minutes >= 1 and said.get(nodeid) != minutes:
                said[nodeid] = minutes
                reporter.write_line(f"    … still running after {minutes} min: {nodeid}")


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    """PASSED/FAILED with the test's time (setup + call) when it took a second or more;
    everything else as pytest says it."""
    if report.when == "setup":
        _clock.setup_seconds[report.nodeid] = report.duration
        return None
    if report.when != "call" or hasattr(report, "wasxfail") or report.skipped:
        return None
    seconds = _clock.setup_seconds.pop(report.nodeid, 0.0) + report.duration
    if seconds < 1:
        return None
    took = f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if report.passed:
        return "passed", ".", (f"PASSED ({took})", {"green": True})
    return "failed", "F", (f"FAILED ({took})", {"red": True})


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """The counts and time of this run into $PTKIT_TEST_RESULTS, for `make test`'s summary."""
    target = _results_target
    if not target:
        return
    counts = {name: len(terminalreporter.stats.get(key, [])) for key, name in COUNTED.items()}
    result = {**counts, "seconds": time.monotonic() - _clock.session_started,
              "exitstatus": int(exitstatus)}  # fmt: skip
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def toolkit_wheel() -> Path:
    """The toolkit wheel: $PTKIT_TEST_TOOLKIT_WHEEL (set by `make test`) or dist/toolkit/'s."""
    given = os.environ.get("PTKIT_TEST_TOOLKIT_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "toolkit").glob("ptkit-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no toolkit wheel to test: run `make toolkit` (dist/toolkit/ptkit-*.whl)")
    return wheels[-1].resolve()


@pytest.fixture(scope="session")
def ptkit_wheel() -> Path:
    """ptkit-ops' cpu wheel: $PTKIT_TEST_WHEEL (set by `make test`) or the one in dist/cpu/."""
    given = os.environ.get("PTKIT_TEST_WHEEL")
    if given:
        path = Path(given)
    else:
        wheels = sorted((REPO / "dist" / "cpu").glob("ptkit_ops-*linux*.whl"))
        if not wheels:
            pytest.fail("no wheel to test: run `make test` (it builds dist/cpu/ptkit_ops-*.whl)")
        path = wheels[-1]
    assert path.is_file(), f"PTKIT_TEST_WHEEL={path} does not exist"
    return path.resolve()


@pytest.fixture(scope="session")
def cu13_wheel() -> Path:
    """The cu13 wheel: $PTKIT_TEST_CU13_WHEEL (set by `make test`) or the one in dist/cu13/."""
    given = os.environ.get("PTKIT_TEST_CU13_WHEEL")
    wheels = (
        [Path(given)] if given else sorted((REPO / "dist" / "cu13").glob("ptkit_ops-*linux*.whl"))
    )
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no cu13 wheel to test: run `make test` (it builds dist/cu13/ptkit_ops-*.whl)")
    return wheels[-1].resolve()


@pytest.fixture(scope="session")
def rocm_wheel() -> Path:
    """The rocm7.14 wheel: $PTKIT_TEST_ROCM_WHEEL (set by `make test`) or dist/rocm7.14/."""
    given = os.environ.get("PTKIT_TEST_ROCM_WHEEL")
    wheels = (
        [Path(given)]
        if given
        else sorted((REPO / "dist" / "rocm7.14").glob("ptkit_ops-*linux*.whl"))
    )
    if not wheels or not wheels[-1].is_file():
        pytest.fail(
            "no rocm7.14 wheel to test: run `make test` (it builds dist/rocm7.14/ptkit_ops-*.whl)"
        )
    return wheels[-1].resolve()


@pytest.fixture(scope="session")
def native_cpu_loaded() -> None:
    """Native-vs-reference tests mean nothing if the native library did not load."""
    import ptkit.runtime
    import ptkit_ops  # noqa: F401  (its import loads the libraries)

    decisions = ptkit.runtime.load_decisions("ptkit_ops")
    cpu = [d for d in decisions if d.backend == "cpu"]
    assert cpu and cpu[0].status.value == "loaded", (
        f"the native CPU library did not load: {[(d.library, d.status, d.reason) for d in decisions]}"
    )
    wanted_isa = os.environ.get("PTKIT_CPU_ISA")
    if wanted_isa:
        assert dict(cpu[0].details).get("isa") == wanted_isa
