"""Progress while a step takes long: ptkit.progress (plain lines off a terminal, rich's
live line on one, NO_COLOR honoured) and the build stage's streaming of pip's output
(a real child process writing Ninja-style lines, stdout and stderr in order)."""

from __future__ import annotations

import io
import os
import pty
import re
import sys
from pathlib import Path

import pytest

from ptkit.progress import STILL_EVERY, Steps, is_terminal
from ptkit.release.pipeline.build import run_streaming, show_line


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def said(lines: list[str]) -> list[str]:
    """The lines without their elapsed time."""
    return [re.sub(r"^\s+\S+ s  ", "", line) for line in lines]


def plain_steps(lines: list[str], clock: FakeClock) -> Steps:
    return Steps("build cu13", lines.append, live=True, stream=io.StringIO(), clock=clock)


def test_off_a_terminal_each_phase_and_part_is_a_line_with_the_elapsed_time() -> None:
    lines: list[str] = []
    clock = FakeClock()
    with plain_steps(lines, clock) as steps:
        steps.phase("Configuring CMake...")
        clock.now += 4.25
        steps.part_done(1, 12, "Building CUDA object cuda/rms_norm.cu.o")
        clock.now += 40
        steps.part_done(2, 12, "Building CUDA object cuda/fused_linear.cu.o")
    assert lines == [
        "       0.0 s  Configuring CMake...",
        "       4.2 s  [1/12] Building CUDA object cuda/rms_norm.cu.o",
        "        44 s  [2/12] Building CUDA object cuda/fused_linear.cu.o",
    ]


def test_a_long_silence_is_said_once_per_period_not_on_every_tick() -> None:
    lines: list[str] = []
    clock = FakeClock()
    steps = plain_steps(lines, clock)
    steps.tick()  # nothing said yet: nothing to be still on
    steps.part_done(3, 12, "Building CUDA object cuda/silu.cu.o")
    for _ in range(3):
        clock.now += STILL_EVERY / 3
        steps.tick()
    clock.now += STILL_EVERY + 1
    steps.tick()
    steps.tick()
    assert lines[1:] == [
        "        30 s  … still working, 30 s since [3/12] was done",
        "        61 s  … still working, 61 s since [3/12] was done",
    ]


def test_dumb_terminals_and_closed_streams_are_not_terminals(monkeypatch) -> None:
    primary, secondary = pty.openpty()
    with os.fdopen(secondary, "w") as tty:
        monkeypatch.setenv("TERM", "xterm")
        assert is_terminal(tty)
        monkeypatch.setenv("TERM", "dumb")
        assert not is_terminal(tty)
    os.close(primary)
    assert not is_terminal(tty)  # closed now
    assert not is_terminal(io.StringIO())


def _on_a_terminal(monkeypatch, *, no_color: bool) -> tuple[str, list[str]]:
    """Drive Steps on a real pseudo-terminal; returns what the terminal got and what went
    to echo."""
    monkeypatch.setenv("TERM", "xterm-256color")
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    primary, secondary = pty.openpty()
    echoed: list[str] = []
    with os.fdopen(secondary, "w") as tty:
        with Steps("build cu13", echoed.append, live=True, stream=tty) as steps:
            steps.phase("Configuring CMake...")
            steps.part_done(1, 2, "Building CXX object ops.cpp.o")
        tty.flush()
    os.set_blocking(primary, False)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    return b"".join(chunks).decode("utf-8", "replace"), echoed


def test_on_a_terminal_rich_draws_the_line_and_the_phases_stay_above_it(monkeypatch) -> None:
    pytest.importorskip("rich", reason="rich comes with ptkit[build] (requirements/dev.txt)")
    screen, echoed = _on_a_terminal(monkeypatch, no_color=False)
    assert echoed == []  # everything went to the terminal, through rich
    assert "Configuring CMake..." in screen
    assert "build cu13" in screen
    assert "\x1b[" in screen  # cursor control and colour


def test_no_color_leaves_the_live_line_without_colour(monkeypatch) -> None:
    pytest.importorskip("rich", reason="rich comes with ptkit[build] (requirements/dev.txt)")
    screen, _ = _on_a_terminal(monkeypatch, no_color=True)
    assert "Configuring CMake..." in screen
    # Colours gone (green spinner, magenta/red bar); styles such as dim are not colour.
    colours = [code for code in ("\x1b[32m", "\x1b[35m", "\x1b[91m", "\x1b[33m") if code in screen]
    assert colours == []


def test_the_build_shows_ninjas_parts_the_backends_phases_and_ptkits_messages() -> None:
    lines: list[str] = []
    steps = plain_steps(lines, FakeClock())
    for line in [
        "  Running command Building wheel for ptkit-ops (pyproject.toml)\n",
        "  *** Configuring CMake...\n",
        "  -- Detecting CXX compiler ABI info\n",
        "  -- ptkit: torch 2.14.1 (headers and libtorch_cpu) at /x\n",
        "  -- ptkit build report (variant cpu):\n",
        "  [1/5] Building CXX object CMakeFiles/ptkit_cpu.dir/cpp/ops.cpp.o\n",
        "  warning: unused variable 'x' [-Wunused-variable]\n",
        "  *** Making wheel...\n",
    ]:
        show_line(line, steps)
    assert said(lines) == [
        "Configuring CMake...",
        "ptkit: torch 2.14.1 (headers and libtorch_cpu) at /x",
        "[1/5] Building CXX object CMakeFiles/ptkit_cpu.dir/cpp/ops.cpp.o",
        "Making wheel...",
    ]


CHILD = r"""
import sys, time
print("  *** Configuring CMake...", flush=True)
print("  [1/2] Building CXX object a.o", flush=True)
print("compiler note on stderr", file=sys.stderr, flush=True)
time.sleep(1.5)
print("  [2/2] Linking CXX shared module liba.so", flush=True)
sys.exit(3)
"""


def test_streaming_keeps_every_line_in_the_log_in_order_and_returns_the_exit_code(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    ticks = []
    steps = plain_steps(lines, FakeClock())
    steps.tick = lambda: ticks.append(1)  # type: ignore[method-assign]
    log = tmp_path / "build.log"
    code, output = run_streaming([sys.executable, "-c", CHILD], dict(os.environ), log, steps)
    assert code == 3
    assert log.read_text() == output
    assert output.splitlines() == [
        "  *** Configuring CMake...",
        "  [1/2] Building CXX object a.o",
        "compiler note on stderr",
        "  [2/2] Linking CXX shared module liba.so",
    ]
    assert said(lines) == [
        "Configuring CMake...",
        "[1/2] Building CXX object a.o",
        "[2/2] Linking CXX shared module liba.so",
    ]
    assert ticks, "the 1.5 s wait between two lines ticks the display"
