"""Running a probe command (nvidia-smi, sysctl) that may hang or flood: never waits
past its timeout, never reads more than a bounded amount, never raises.

``subprocess.run(timeout=…)`` is not enough: it kills the command, then waits for its
pipe to close, and a child the command started (a wrapper script's ``sleep``) keeps
the pipe open. The command runs in its own process group here, and the whole group
is killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import subprocess
import threading

__all__ = ["CommandResult", "run_command"]

# nvidia-smi's answers are a few lines per GPU; more than this is garbage.
OUTPUT_LIMIT = 256 * 1024


@dataclasses.dataclass(frozen=True)
class CommandResult:
    output: str | None
    """stdout and stderr together; None when the command did not run or did not finish."""
    returncode: int | None
    problem: str | None
    """Why there is no usable output; None when the command is simply not installed."""

    @property
    def ok(self) -> bool:
        return self.output is not None and self.returncode == 0


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()


def run_command(argv: list[str], timeout_s: float) -> CommandResult:
    """Run ``argv`` (found on PATH); its output, or the reason there is none."""
    shown = " ".join(argv)
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        # NaN would wait forever (every comparison with it is false), inf overflows.
        return CommandResult(
            None,
            None,
            f"{shown}: not run: the timeout {timeout_s!r} is not a number of seconds > 0",
        )
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=os.name == "posix",
        )
    except FileNotFoundError:
        return CommandResult(None, None, None)
    except OSError as exc:
        return CommandResult(None, None, f"{shown}: cannot be started ({exc.strerror or exc})")

    chunks: list[bytes] = []
    flooded = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        total = 0
        with contextlib.suppress(OSError, ValueError):
            # os.read returns what is there now: no waiting for a full buffer.
            while data := os.read(process.stdout.fileno(), 65536):
                chunks.append(data)
                total += len(data)
                if total > OUTPUT_LIMIT:
                    flooded.set()
                    _kill(process)
                    return

    reader = threading.Thread(target=read, name="ptkit-probe-reader", daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1.0)
    reader.join(timeout=1.0)
    if reader.is_alive():
        # The command exited but something it started still holds the pipe: end the
        # group. One that left the group is abandoned with the daemon reader.
        _kill(process)
        reader.join(timeout=1.0)
    if process.stdout is not None and not reader.is_alive():
        process.stdout.close()

    if timed_out:
        return CommandResult(None, None, f"{shown}: no answer within {timeout_s:g} s (killed)")
    if flooded.is_set():
        return CommandResult(
            None, None, f"{shown}: printed more than {OUTPUT_LIMIT // 1024} KiB (killed)"
        )
    output = b"".join(chunks).decode("utf-8", errors="replace")
    if process.returncode != 0:
        first = next((line.strip() for line in output.splitlines() if line.strip()), "")
        return CommandResult(
            output,
            process.returncode,
            f"{shown}: exit status {process.returncode}" + (f": {first[:200]}" if first else ""),
        )
    return CommandResult(output, 0, None)
