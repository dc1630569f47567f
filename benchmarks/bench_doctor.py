"""``ptkit doctor``'s speed against ``import torch`` and torch's own ``collect_env``, in one run.

Usage::

    python benchmarks/bench_doctor.py [--runs 7] [--smoke-runs 3] [--out benchmarks/results]

Run it with the Python whose *installed* ptkit is measured (``.venv/bin/python``, after
``make install``): each command is that interpreter in a fresh subprocess, started from
a scratch folder with ``PYTHONPATH`` and ``PTKIT_*`` removed, so ``src/`` is never
imported. The script refuses to run against a ptkit imported from a source tree.

What is measured (wall time of the whole subprocess, interpreter start included;
median of ``--runs``, the commands interleaved round-robin so that drift and background
load hit them alike):

* ``python -c pass``: the interpreter's own start, for scale;
* ``python -m ptkit doctor --json``: the default report (what the ``ptkit`` console
  script runs; it must not import torch);
* ``python -c "import torch"``;
* ``python -m torch.utils.collect_env``: torch's environment report;
* ``python -m ptkit doctor --smoke --json`` (``--smoke-runs`` times): the report
  plus a child that imports torch and every package built with ptkit, and runs
  ptkit-ops' ops on every device.

Goals (the issue's): doctor < 0.3 s; collect_env / doctor >= 5; smoke < import torch + 2 s.
Writes ``doctor.json`` and ``doctor.md`` into ``--out`` and prints the markdown; exits
with status 1 when a goal is missed or a command fails (the doctor may exit 0 or 1:
that is its verdict on this machine, not a failure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCTOR_GOAL_S = 0.3
COLLECT_ENV_RATIO_GOAL = 5.0
SMOKE_EXTRA_GOAL_S = 2.0


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    env.pop("PYTHONPATH", None)
    return env


def run_once(argv: list[str], cwd: Path, ok_codes: tuple[int, ...]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=600, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok_codes:
        raise SystemExit(
            f"bench_doctor: {' '.join(argv)} exited with {proc.returncode}:\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return elapsed, proc.stdout


def installed_ptkit(python: str, cwd: Path) -> str:
    out = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('ptkit').origin)"],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    repo_src = Path(__file__).resolve().parents[1] / "src"
    if repo_src in Path(out).resolve().parents:
        raise SystemExit(
            f"bench_doctor: ptkit comes from the source tree ({out}); install the wheel "
            "(make install) and run this with the venv's Python"
        )
    return out


def measure(python: str, runs: int, smoke_runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-doctor-") as scratch:
        cwd = Path(scratch)
        location = installed_ptkit(python, cwd)
        commands: dict[str, tuple[list[str], tuple[int, ...]]] = {
            "python -c pass": ([python, "-c", "pass"], (0,)),
            "ptkit doctor --json": ([python, "-m", "ptkit", "doctor", "--json"], (0, 1)),
            "python -c 'import torch'": ([python, "-c", "import torch"], (0,)),
            "python -m torch.utils.collect_env": ([python, "-m", "torch.utils.collect_env"], (0,)),
        }
        smoke_cmd = [python, "-m", "ptkit", "doctor", "--smoke", "--json"]
        # One warm-up each: the first run pays for cold page cache and .pyc writing.
        for argv, ok in commands.values():
            run_once(argv, cwd, ok)
        _, doctor_json = run_once(commands["ptkit doctor --json"][0], cwd, (0, 1))
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, (argv, ok) in commands.items():
                times[name].append(run_once(argv, cwd, ok)[0])
        smoke_times = []
        smoke_json = ""
        for _ in range(smoke_runs):
            elapsed, smoke_json = run_once(smoke_cmd, cwd, (0, 1))
            smoke_times.append(elapsed)
    times["ptkit doctor --smoke --json"] = smoke_times
    report = json.loads(doctor_json)
    smoke_report = json.loads(smoke_json)["facts"]["smoke"]
    return {
        "ptkit_location": location,
        "doctor_exit_code": report["exit_code"],
        "doctor_findings": [f["check"] for f in report["findings"]],
        "smoke_rows": len(smoke_report["rows"]),
        "smoke_packages": [p["name"] for p in smoke_report["packages"]],
        "smoke_all_ok": smoke_report["torch_imported"]
        and all(r["ok"] for r in smoke_report["rows"])
        and not any(p["problems"] for p in smoke_report["packages"]),
        "times": times,
    }


def summarize(result: dict[str, object], runs: int, smoke_runs: int) -> dict[str, object]:
    times = result["times"]
    assert isinstance(times, dict)
    median = {name: statistics.median(values) for name, values in times.items()}
    doctor = median["ptkit doctor --json"]
    torch_import = median["python -c 'import torch'"]
    collect_env = median["python -m torch.utils.collect_env"]
    smoke = median["ptkit doctor --smoke --json"]
    goals = {
        "doctor_under_0.3s": {
            "value": doctor,
            "goal": DOCTOR_GOAL_S,
            "met": doctor < DOCTOR_GOAL_S,
        },
        "collect_env_over_doctor_at_least_5": {
            "value": collect_env / doctor,
            "goal": COLLECT_ENV_RATIO_GOAL,
            "met": collect_env / doctor >= COLLECT_ENV_RATIO_GOAL,
        },
        "smoke_under_import_torch_plus_2s": {
            "value": smoke,
            "goal": torch_import + SMOKE_EXTRA_GOAL_S,
            "met": smoke < torch_import + SMOKE_EXTRA_GOAL_S,
        },
    }
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "runs": runs,
        "smoke_runs": smoke_runs,
        "median_s": median,
        "min_s": {name: min(values) for name, values in times.items()},
        "all_s": times,
        "goals": goals,
        **{k: v for k, v in result.items() if k != "times"},
    }


def to_markdown(summary: dict[str, object]) -> str:
    median = summary["median_s"]
    low = summary["min_s"]
    goals = summary["goals"]
    assert isinstance(median, dict)
    assert isinstance(low, dict)
    assert isinstance(goals, dict)
    lines = [
        "# ptkit doctor: speed",
        "",
        f"- Python {summary['python']} on {summary['platform']}, {summary['cpus']} CPUs",
        f"- ptkit: {summary['ptkit_location']}",
        f"- wall time of each command as a fresh subprocess (interpreter start included); "
        f"median of {summary['runs']} interleaved runs ({summary['smoke_runs']} for --smoke)",
        f"- the doctor's verdict here: exit code {summary['doctor_exit_code']}, findings "
        f"{', '.join(summary['doctor_findings']) or 'none'}; --smoke ran "  # type: ignore[arg-type]
        f"{summary['smoke_rows']} op/device/dtype rows, all within tolerance: "
        f"{'yes' if summary['smoke_all_ok'] else 'NO'}",
        "",
        "| command | median s | min s |",
        "|---|---:|---:|",
    ]
    for name, value in median.items():
        lines.append(f"| `{name}` | {value:.3f} | {low[name]:.3f} |")
    lines += ["", "| goal | measured | target | met |", "|---|---:|---:|---|"]
    labels = {
        "doctor_under_0.3s": ("doctor --json, s", "< {:.2f}"),
        "collect_env_over_doctor_at_least_5": ("collect_env / doctor", ">= {:.1f}"),
        "smoke_under_import_torch_plus_2s": ("doctor --smoke, s", "< {:.2f} (import torch + 2 s)"),
    }
    for key, goal in goals.items():
        label, target = labels[key]
        lines.append(
            f"| {label} | {goal['value']:.3f} | {target.format(goal['goal'])} | "
            f"{'yes' if goal['met'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each fast command")
    parser.add_argument("--smoke-runs", type=int, default=3, help="runs of doctor --smoke")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter to measure (default: this one)"
    )
    args = parser.parse_args(argv)
    result = measure(args.python, args.runs, args.smoke_runs)
    summary = summarize(result, args.runs, args.smoke_runs)
    markdown = to_markdown(summary)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "doctor.md").write_text(markdown)
    (args.out / "doctor.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(markdown)
    goals = summary["goals"]
    assert isinstance(goals, dict)
    met = all(goal["met"] for goal in goals.values()) and summary["smoke_all_ok"]
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
