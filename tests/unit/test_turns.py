"""tests/turns.py: which of the slowest integration files a run takes, for the integration
conftest and scripts/bootstrap alike."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from turns import IN_TURNS, REPO, TURNS, TurnError, left_to_other_turns, turn_of

TURNS_PY = REPO / "tests" / "turns.py"


def test_the_turns_split_the_slow_files_between_them() -> None:
    taken = [set(IN_TURNS) - left_to_other_turns(turn) for turn in range(TURNS)]
    assert all(taken), taken
    assert set().union(*taken) == set(IN_TURNS)
    assert sum(len(t) for t in taken) == len(IN_TURNS)  # each file in one turn only
    assert left_to_other_turns(None) == set()


def test_every_file_in_turns_is_an_integration_test() -> None:
    missing = [name for name in IN_TURNS if not (REPO / "tests" / "integration" / name).is_file()]
    assert not missing


@pytest.mark.parametrize(
    ("given", "head", "expected"),
    [
        ("all", "c0ffee", None),
        ("", None, None),  # git cannot name HEAD: every file
        ("", "3", 0),
        (
            "",
            "71a53bd44f4cc9175f0a689705c5ee7a1ced8b8b",
            0x71A53BD44F4CC9175F0A689705C5EE7A1CED8B8B % TURNS,
        ),
        (" 1 ", "3", 1),
    ],
)
def test_the_turn_comes_from_the_variable_or_the_commits_hash(
    given: str, head: str | None, expected: int | None
) -> None:
    assert turn_of(given, head) == expected


@pytest.mark.parametrize("given", ["3", "-1", "first", "0,1"])
def test_a_turn_that_does_not_exist_is_refused_naming_the_choices(given: str) -> None:
    with pytest.raises(
        TurnError,
        match=rf"PTKIT_TEST_TURN='{re.escape(given)}': expected 'all' or a turn from 0 to 2",
    ):
        turn_of(given, "3")


def _runs(name: str, turn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTKIT_TEST_TURN": turn}
    return subprocess.run(
        [sys.executable, str(TURNS_PY), "runs", name],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_bootstrap_asks_whether_this_run_takes_a_file() -> None:
    name = IN_TURNS[1]
    own = str(1 % TURNS)
    assert _runs(name, own).returncode == 0
    assert _runs(name, "all").returncode == 0
    other = _runs(name, str((1 + 1) % TURNS))
    assert other.returncode == 1
    assert (
        other.stdout.strip()
        == f"{name} runs in turn {own} and this run's turn is {(1 + 1) % TURNS} of {TURNS} (the commit's hash, or PTKIT_TEST_TURN)"
    )
    assert _runs("test_docs.py", "0").returncode == 0  # not a slow file: every run takes it
    bad = _runs(name, "9")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert "PTKIT_TEST_TURN='9'" in bad.stderr


def test_every_file_bootstrap_names_takes_turns() -> None:
    """A part bootstrap ties to a file outside the turns would be made every run: a typo."""
    text = (REPO / "scripts" / "bootstrap").read_text(encoding="utf-8")
    named = set(re.findall(r"\b(test_\w+\.py)\b", text))
    assert named, "scripts/bootstrap names no test file"
    assert named <= set(IN_TURNS), named - set(IN_TURNS)
