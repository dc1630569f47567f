"""The slowest integration files take turns, and which of them this run takes: one rule for
the integration conftest (it deselects the others) and scripts/bootstrap (it makes only what
this run's files need: `python tests/turns.py runs <file>`).

All of them do not fit CI's 90 minutes on a 2-core Zen 1 (the whole suite ran past 5400 s
there). Each run takes one turn of TURNS, the commit's hash modulo TURNS, so that consecutive
commits go round them; PTKIT_TEST_TURN=all runs every one (=0, 1 or 2: that turn)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

IN_TURNS = (
    "test_cross_build.py",
    "test_adopt.py",
    "test_release_local.py",
    "test_torch_range.py",
    "test_torch_abi.py",
    "test_linux_aarch64.py",
    "test_cpython315.py",
)
TURNS = 3
REPO = Path(__file__).resolve().parents[1]


class TurnError(ValueError):
    """PTKIT_TEST_TURN holds something other than 'all' or a turn."""


def turn_of(given: str, head: str | None) -> int | None:
    """The turn for PTKIT_TEST_TURN's value ``given`` and the checkout's HEAD ``head`` (None
    where git cannot name it): None means every file."""
    given = given.strip()
    if given == "all":
        return None
    if given:
        if given not in {str(t) for t in range(TURNS)}:
            raise TurnError(
                f"PTKIT_TEST_TURN={given!r}: expected 'all' or a turn from 0 to {TURNS - 1}"
            )
        return int(given)
    if head is None:
        return None
    return int(head, 16) % TURNS


def _head() -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except OSError:  # no git: the Debian roots' nested runs of named files
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None  # else not a git checkout


def this_turn() -> int | None:
    """This run's turn, or None for all of them."""
    return turn_of(os.environ.get("PTKIT_TEST_TURN", ""), _head())


def left_to_other_turns(turn: int | None) -> set[str]:
    if turn is None:
        return set()
    return {name for place, name in enumerate(IN_TURNS) if place % TURNS != turn}


def describe(turn: int | None) -> str:
    """One line: which slow files this run takes and which it leaves."""
    if turn is None:
        why = "PTKIT_TEST_TURN=all, or git cannot name the checkout's HEAD"
        return f"slow jobs: all {len(IN_TURNS)} ({why})"
    left = left_to_other_turns(turn)
    runs = [name for name in IN_TURNS if name not in left]
    return (
        f"slow jobs, turn {turn} of {TURNS}: {', '.join(runs)}; left to the other turns: "
        f"{', '.join(sorted(left))} (PTKIT_TEST_TURN=all runs every one)"
    )


def main(argv: list[str]) -> int:
    """`runs <file>`: exit 0 where this run takes tests/integration/<file>, else 1 and a line
    saying so; 2 for a bad PTKIT_TEST_TURN or arguments."""
    if len(argv) != 2 or argv[0] != "runs":
        print("usage: python tests/turns.py runs <test file name>", file=sys.stderr)
        return 2
    name = argv[1]
    try:
        turn = this_turn()
    except TurnError as e:
        print(e, file=sys.stderr)
        return 2
    if name not in left_to_other_turns(turn):
        return 0
    print(
        f"{name} runs in turn {IN_TURNS.index(name) % TURNS} and this run's turn is {turn} of "
        f"{TURNS} (the commit's hash, or PTKIT_TEST_TURN)"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
