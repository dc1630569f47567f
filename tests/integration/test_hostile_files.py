"""Random corruptions of manifests and wheels, driven through the loader and the index
builder in a child process with a memory and a time cap.

What must hold for every case: the child finishes in time (no hang), stays under its
memory cap (no blow-up), prints no traceback, and each rejection names the file. The
corruptions come from seeded generators (the seed is in the case's name, so a failure
replays exactly): truncations, byte flips, values of the wrong type, deep nesting, huge
strings, invalid UTF-8, special files in place of a manifest; for wheels, flipped bytes,
truncation, duplicate and hostile entry names, symlink entries, and entries that inflate
far beyond their compressed size.
"""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import python_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the caps are Linux limits")

CASES_PER_KIND = 12
MEMORY_CAP = 3 << 30  # bytes of data segment the child may use (torch's import included)
CASE_SECONDS = 20

# The child: each case is (name, path, action); it runs the action under an alarm and
# prints one JSON line per case. Tracebacks are caught here only to be reported.
CHILD = r"""
import contextlib, io, json, resource, signal, sys, traceback
from pathlib import Path
resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))

class Hang(Exception):
    pass

def alarm(signum, frame):
    raise Hang()

signal.signal(signal.SIGALRM, alarm)

def load(path):
    from ptkit.runtime.loader import load_native_libraries
    (decision,) = load_native_libraries([Path(path)])
    return decision.status.value, decision.reason

def index(path, out):
    from ptkit.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["index", "build", path, "--out", out])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()

for name, action, args in json.loads(sys.stdin.read()):
    signal.alarm(CASE_SECONDS)
    try:
        result = {"load": load, "index": index}[action](*args)
        row = {"case": name, "result": result}
    except Hang:
        row = {"case": name, "hang": True}
    except BaseException:
        row = {"case": name, "traceback": traceback.format_exc()}
    finally:
        signal.alarm(0)
    print(json.dumps(row), flush=True)
"""


def _run_child(cases: list[tuple[str, str, list[str]]]) -> dict[str, dict[str, object]]:
    code = CHILD.replace("MEMORY_CAP", str(MEMORY_CAP)).replace("CASE_SECONDS", str(CASE_SECONDS))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=CASE_SECONDS * len(cases) + 60,
        env=python_env(PTKIT_LOG="off"),
        check=False,
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, f"the child died (rc {proc.returncode}): {proc.stderr[-3000:]}"
    return {str(row["case"]): row for row in rows}


# ---- manifests ---------------------------------------------------------------------------


def _a_manifest(ptkit_wheel: Path) -> bytes:
    with zipfile.ZipFile(ptkit_wheel) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith("ptkit_cpu.manifest.json"))
        return wheel.read(name)


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _manifest_corruptions(good: bytes) -> Iterator[tuple[str, Callable[[Path], None]]]:
    """(name, writer): each writer puts one hostile manifest at the path it is given."""
    document = json.loads(good)
    for seed in range(CASES_PER_KIND):
        rng = random.Random(seed)

        def truncated(path: Path, rng: random.Random = rng) -> None:
            path.write_bytes(good[: rng.randrange(len(good))])

        def flipped(path: Path, rng: random.Random = rng) -> None:
            data = bytearray(good)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))

        def retyped(path: Path, rng: random.Random = rng) -> None:
            changed = json.loads(good)
            key = rng.choice(sorted(changed))
            changed[key] = rng.choice(
                [None, 7, -1, 1e308, "x" * 2_000_000, [], {}, [[["deep"]]], {"a": {"b": [1]}}]
            )
            path.write_text(json.dumps(changed))

        yield f"manifest-truncated-{seed}", truncated
        yield f"manifest-flipped-{seed}", flipped
        yield f"manifest-retyped-{seed}", retyped

    yield "manifest-deep", lambda p: p.write_bytes(_deep(200_000))
    yield (
        "manifest-deep-inside",
        lambda p: p.write_text(
            json.dumps({**document, "ops": "@"}).replace('"@"', _deep(100_000).decode())
        ),
    )
    yield "manifest-not-utf8", lambda p: p.write_bytes(good[:20] + b"\xff\xfe\xc3(" + good[20:])
    yield "manifest-huge", lambda p: p.write_bytes(b" " * (64 << 20) + good)
    yield "manifest-empty", lambda p: p.write_bytes(b"")
    yield "manifest-fifo", lambda p: os.mkfifo(p)
    yield "manifest-dev-zero", lambda p: p.symlink_to("/dev/zero")
    yield "manifest-directory", lambda p: p.mkdir()
    yield "manifest-dangling-link", lambda p: p.symlink_to(p.parent / "nowhere")
    yield "manifest-link-loop", lambda p: p.symlink_to(p)


def test_hostile_manifests_are_refused_by_the_loader_naming_the_file(
    ptkit_wheel: Path, tmp_path: Path
) -> None:
    cases = []
    for name, write in _manifest_corruptions(_a_manifest(ptkit_wheel)):
        folder = tmp_path / name
        folder.mkdir()
        path = folder / "ptkit_cpu.manifest.json"
        write(path)
        cases.append((name, "load", [str(path)]))
    rows = _run_child(cases)
    problems = []
    for name, _, (path,) in cases:
        row = rows.get(name)
        if row is None or "result" not in row:
            problems.append(f"{name}: {row and ('hang' if row.get('hang') else row['traceback'])}")
            continue
        status, reason = row["result"]  # type: ignore[misc]
        if status == "loaded":
            continue  # a corruption that left a valid manifest (a flipped space)
        if Path(path).name not in reason:
            problems.append(f"{name}: {status} without naming the file: {reason}")
        if "Traceback" in reason or "Error(" in reason:
            problems.append(f"{name}: {reason}")
    assert not problems, "\n".join(problems)


# ---- wheels ------------------------------------------------------------------------------


def _entries(wheel: Path) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(wheel) as archive:
        return [(info, archive.read(info)) for info in archive.infolist()]


def _rewrite(
    wheel: Path, out: Path, edit: Callable[[zipfile.ZipFile], None], drop: str = ""
) -> None:
    """``out``: the wheel's entries (less ``drop``), then whatever ``edit`` adds."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in _entries(wheel):
            if info.filename != drop:
                archive.writestr(info, data)
        edit(archive)


def _inflating(archive: zipfile.ZipFile, name: str, size: int) -> None:
    """An entry of ``size`` zero bytes (a few hundred KiB compressed), written in chunks."""
    with archive.open(zipfile.ZipInfo(name), "w", force_zip64=True) as entry:
        chunk = bytes(1 << 20)
        for _ in range(size >> 20):
            entry.write(chunk)


def _wheel_corruptions(good: Path) -> Iterator[tuple[str, Callable[[Path], None]]]:
    data = good.read_bytes()
    dist_info = next(
        i.filename for i, _ in _entries(good) if i.filename.endswith(".dist-info/METADATA")
    )
    for seed in range(CASES_PER_KIND):
        rng = random.Random(1000 + seed)

        def flipped(path: Path, rng: random.Random = rng) -> None:
            changed = bytearray(data)
            for _ in range(rng.randint(1, 16)):
                changed[rng.randrange(len(changed))] = rng.randrange(256)
            path.write_bytes(bytes(changed))

        def truncated(path: Path, rng: random.Random = rng) -> None:
            path.write_bytes(data[: rng.randrange(len(data))])

        yield f"wheel-flipped-{seed}", flipped
        yield f"wheel-truncated-{seed}", truncated

    def symlink_entry(archive: zipfile.ZipFile) -> None:
        info = zipfile.ZipInfo("ptkit_ops/_native/libc.so.6")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/lib/x86_64-linux-gnu/libc.so.6")

    yield "wheel-empty", lambda p: p.write_bytes(b"")
    yield "wheel-not-a-zip", lambda p: p.write_bytes(b"PK\x03\x04" + bytes(100))
    yield (
        "wheel-duplicate-metadata",
        lambda p: _rewrite(
            good, p, lambda a: a.writestr(dist_info, "Metadata-Version: 2.1\nRequires-Dist: evil\n")
        ),
    )
    yield (
        "wheel-parent-entry",
        lambda p: _rewrite(good, p, lambda a: a.writestr("../../evil.py", "x")),
    )
    yield (
        "wheel-absolute-entry",
        lambda p: _rewrite(good, p, lambda a: a.writestr("/etc/evil", "x")),
    )
    yield "wheel-drive-entry", lambda p: _rewrite(good, p, lambda a: a.writestr("C:/evil", "x"))
    yield "wheel-symlink-entry", lambda p: _rewrite(good, p, symlink_entry)
    manifest = next(i.filename for i, _ in _entries(good) if i.filename.endswith(".manifest.json"))
    yield (
        "wheel-inflating-metadata",
        lambda p: _rewrite(good, p, lambda a: _inflating(a, dist_info, 1 << 30), drop=dist_info),
    )
    yield (
        "wheel-inflating-manifest",
        lambda p: _rewrite(good, p, lambda a: _inflating(a, manifest, 1 << 30), drop=manifest),
    )


def test_hostile_wheels_are_refused_by_the_index_builder_naming_the_file(
    ptkit_wheel: Path, tmp_path: Path
) -> None:
    cases = []
    for name, write in _wheel_corruptions(ptkit_wheel):
        folder = tmp_path / name
        folder.mkdir()
        path = folder / ptkit_wheel.name
        write(path)
        cases.append((name, "index", [str(path), str(folder / "site")]))
    rows = _run_child(cases)
    problems = []
    for name, _, (path, _out) in cases:
        row = rows.get(name)
        if row is None or "result" not in row:
            problems.append(f"{name}: {row and ('hang' if row.get('hang') else row['traceback'])}")
            continue
        code, stderr = row["result"]  # type: ignore[misc]
        if code == 0:
            if name.startswith(
                (
                    "wheel-duplicate",
                    "wheel-parent",
                    "wheel-absolute",
                    "wheel-drive",
                    "wheel-symlink",
                    "wheel-inflating",
                    "wheel-empty",
                    "wheel-not",
                )
            ):
                problems.append(f"{name}: accepted")
            continue  # a flipped byte the archive shrugs off (a timestamp, a comment)
        if code != 1 or "Traceback" in stderr or "internal error" in stderr:
            problems.append(f"{name}: exit {code}: {stderr.strip()[-400:]}")
        elif Path(path).name not in stderr:
            problems.append(f"{name}: the message does not name the file: {stderr.strip()}")
        elif len(stderr.strip().splitlines()) > 2:
            problems.append(f"{name}: not one line: {stderr.strip()}")
    assert not problems, "\n".join(problems)
