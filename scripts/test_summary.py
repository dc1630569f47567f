"""The end of `make test` (scripts/test): each phase with its time and result, the wheels
this run built with their tags and sizes, and the unit and integration test counts.

    python scripts/test_summary.py <results folder> --since <epoch seconds> --status <exit>

The results folder holds scripts/test's ``phases.tsv`` and one ``<suite>.json`` per
pytest run (tests/conftest.py writes it where ``PTKIT_TEST_RESULTS`` says). The last line
is ``total: N passed, N failed, N skipped``, the form CI logs are read for.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITES = ("unit", "integration")
# How pytest's outcomes are counted in the summary line, in pytest's order.
OUTCOMES = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed", "deselected")


def wheel_tags(wheel: Path) -> list[str]:
    """The ``Tag:`` lines of the wheel's WHEEL file (what installers check)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
        text = archive.read(name).decode("utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]


def built_wheels(since: float) -> list[Path]:
    """The wheels under dist/ written by this run (older ones may be left from before)."""
    return sorted(w for w in (REPO / "dist").glob("*/*.whl") if w.stat().st_mtime >= since)


def counts_line(counts: dict[str, int]) -> str:
    shown = [f"{counts.get(k, 0)} {k}" for k in OUTCOMES if counts.get(k) or k in ("passed",)]
    return ", ".join(shown)


# scripts/test ends with these when a signal stops it (SIGINT: ^C; SIGTERM: a time limit).
STOPPED = {130: "SIGINT", 143: "SIGTERM"}


def outcome(status: int) -> str:
    if status in STOPPED:
        return f"STOPPED by {STOPPED[status]} (exit {status})"
    return f"FAILED (exit {status})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--since", type=float, required=True)
    parser.add_argument("--status", type=int, required=True)
    args = parser.parse_args(argv)

    print("\n== make test: summary")
    phases = []
    table = args.results / "phases.tsv"
    if table.is_file():
        phases = [line.split("\t") for line in table.read_text().splitlines() if line]
    width = max([len(p[0]) for p in phases] + [10])
    for title, seconds, status in phases:
        result = "ok" if status == "0" else outcome(int(status))
        print(f"  {title:<{width}}  {int(seconds):>5} s  {result}")

    wheels = built_wheels(args.since)
    print("  wheels built:" if wheels else "  wheels built: none")
    for wheel in wheels:
        size = wheel.stat().st_size / 1e6
        where = wheel.relative_to(REPO)
        print(f"    {where}\n      tags {', '.join(wheel_tags(wheel))}; {size:.2f} MB")

    total: dict[str, int] = {}
    print("  tests:")
    for suite in SUITES:
        path = args.results / f"{suite}.json"
        if not path.is_file():
            print(f"    {suite:<12} no counts: not run, or stopped before its end")
            continue
        result = json.loads(path.read_text())
        counts = {k: int(result.get(k, 0)) for k in OUTCOMES}
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
        print(f"    {suite:<12} {counts_line(counts)} in {result['seconds']:.0f} s")

    minutes = (sum(int(p[1]) for p in phases)) / 60
    verdict = "passed" if args.status == 0 else outcome(args.status)
    print(f"  make test {verdict} in {minutes:.1f} min")
    passed, failed = total.get("passed", 0), total.get("failed", 0) + total.get("errors", 0)
    print(f"total: {passed} passed, {failed} failed, {total.get('skipped', 0)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
