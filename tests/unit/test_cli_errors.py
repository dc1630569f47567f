"""Mistakes on the command line get one line with the fix, never a traceback: the CLI's
error boundary (``ptkit.cli.failures``), the shared value types (``ptkit.cli.options``)
and did-you-mean, run as real ``python -m ptkit`` subprocesses from the source tree."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import click
import pytest
from support import make_wheel

from ptkit.cli import COMMANDS, LazyGroup, SuggestingGroup
from ptkit.cli.failures import CommandFailed, boundary, debug_enabled, describe

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
MACHINES = REPO / "tests" / "fixtures" / "machines"
LONG_NAME = "a" * 300


def ptkit(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: int | object = subprocess.PIPE,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    return subprocess.run(
        [sys.executable, "-m", "ptkit", *args],
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,  # a hang fails the test instead of blocking it
        cwd=cwd or Path("/"),
        env={**base, "PYTHONPATH": str(SRC), **(env or {})},
        check=False,
    )


def one_line(proc: subprocess.CompletedProcess[str], status: int) -> str:
    """The single message line of a failed command (click's usage errors: its ``Error:``
    line), after checking the status and that no traceback came with it."""
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if lines and lines[0].startswith("Usage: "):
        errors = [line for line in lines if line.startswith("Error: ")]
        assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
        return errors[0]
    assert len(lines) == 1, proc.stderr
    return lines[0]


# --- issue 17: each of these printed a traceback -----------------------------------------


def test_inspect_of_a_text_file_is_not_a_wheel_or_library() -> None:
    line = one_line(ptkit("inspect", "/etc/passwd"), 2)
    assert line.startswith(
        "ptkit inspect: /etc/passwd is neither a wheel (.whl) nor a native library "
    )
    assert line.endswith("pass a wheel or a native library (.so, .dylib, .dll) built by ptkit")


def test_inspect_of_a_device_is_refused_before_it_is_read() -> None:
    line = one_line(ptkit("inspect", "/dev/null"), 2)
    assert line == (
        "Error: Invalid value for 'PATH': '/dev/null' is not a regular file (a device, FIFO or "
        "socket); pass a file"
    )


def test_inspect_of_an_empty_wheel_says_it_is_not_a_zip(tmp_path: Path) -> None:
    empty = tmp_path / "ptkit_ops-0.1.0+cpu-py3-none-any.whl"
    empty.touch()
    line = one_line(ptkit("inspect", str(empty)), 2)
    assert line == (
        f"ptkit inspect: {empty} is not a wheel: it is not a zip archive (0 bytes; a download "
        "cut short?); pass a wheel built by `ptkit build` or `pip wheel`"
    )


def test_new_with_a_name_too_long_for_the_file_system(tmp_path: Path) -> None:
    line = one_line(ptkit("new", LONG_NAME, cwd=tmp_path), 1)
    assert line == (
        f"ptkit new: {tmp_path}/{'a' * 20}…{'a' * 8} (a name of 300 characters): File name too "
        "long; choose a shorter name (a file or folder name has at most 255 bytes)"
    )
    assert list(tmp_path.iterdir()) == []


def test_index_build_into_proc_is_refused_before_it_starts(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "alpha", "1.0+cpu")
    line = one_line(ptkit("index", "build", str(wheel), "--out", "/proc/self"), 2)
    assert line == (
        "Error: Invalid value for '--out': '/proc/self' is a folder you cannot write; pass a "
        "folder you can write (it is created when missing)"
    )


def test_build_into_dev_null_is_refused_before_any_stage_runs() -> None:
    proc = ptkit("build", "--variant", "cpu", "--source", str(REPO), "--dist", "/dev/null")
    line = one_line(proc, 2)
    assert line == (
        "Error: Invalid value for '--dist': '/dev/null' exists and is not a folder; pass a "
        "folder you can write (it is created when missing)"
    )
    assert "[1/5]" not in proc.stdout  # nothing was built


def test_build_checks_its_default_build_folder_before_any_stage_runs(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    shutil.copyfile(REPO / "recipes" / "cpu.toml", tmp_path / "recipes" / "cpu.toml")
    (tmp_path / "build").write_text("a file where the build folder goes\n")
    proc = ptkit("build", "--variant", "cpu", "--dist", str(tmp_path / "dist"), cwd=tmp_path)
    assert one_line(proc, 2) == (
        f"ptkit build: the build folder {tmp_path / 'build'} exists and is not a folder; pass "
        "--build-root with a folder you can write"
    )
    assert "[1/5]" not in proc.stdout


@pytest.mark.parametrize(
    "command",
    [("explain", "--json"), ("select", "--json", "--root", str(MACHINES / "no_gpu"))],
    ids=["explain", "select"],
)
def test_output_to_a_full_device_is_one_line(command: tuple[str, ...]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = ptkit(*command, stdout=full, timeout=300)  # explain imports torch
    assert one_line(proc, 1) == (
        f"ptkit {command[0]}: cannot write to standard output: No space left on device; send "
        "the output to a file or a pipe that can take it"
    )


def test_index_serve_on_a_port_out_of_range(tmp_path: Path) -> None:
    line = one_line(ptkit("index", "serve", str(tmp_path), "--port", "70000"), 2)
    assert line == "Error: Invalid value for '--port': 70000 is not in the range 0<=x<=65535."


# --- timeouts and ports: usage errors, never a hang ---------------------------------------

TIMEOUT_OPTIONS = [
    ("select", "--root", str(MACHINES / "no_gpu"), "--timeout"),
    ("doctor", "--root", str(MACHINES / "no_gpu"), "--timeout"),
    ("doctor", "--smoke", "--smoke-timeout"),
]


@pytest.mark.parametrize("command", TIMEOUT_OPTIONS, ids=lambda c: f"{c[0]} {c[-1]}")
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("nan", "is not a finite number of seconds"),
        ("inf", "is not a finite number of seconds"),
        ("-inf", "is not a finite number of seconds"),
        ("-1", "is too short"),
        ("0", "is too short"),
        ("soon", "is not a number of seconds"),
    ],
)
def test_a_timeout_must_be_a_finite_positive_number(
    command: tuple[str, ...], value: str, why: str
) -> None:
    proc = ptkit(*command, value, timeout=20)
    line = one_line(proc, 2)
    minimum = "1" if command[-1] == "--smoke-timeout" else "0.1"
    assert line == (
        f"Error: Invalid value for '{command[-1]}': {value!r} {why}; expected a number of "
        f"seconds >= {minimum}"
    )


@pytest.mark.parametrize("port", ["-1", "65536", "http"])
def test_a_port_must_be_0_to_65535(tmp_path: Path, port: str) -> None:
    line = one_line(ptkit("index", "serve", str(tmp_path), "--port", port), 2)
    assert line.startswith("Error: Invalid value for '--port': ")


# --- issue 15: the likely fix ---------------------------------------------------------------


def test_a_misspelt_variant_gets_did_you_mean_and_the_list() -> None:
    proc = ptkit("build", "--variant", "cuda13", "--source", str(REPO))
    assert one_line(proc, 2) == (
        f"ptkit build: --variant 'cuda13' is not a recipe of {REPO} (did you mean 'cu13'?); "
        "expected one of cpu, cu13, metal, rocm7.14, xpu (or add recipes/cuda13.toml)"
    )
    assert "[1/5]" not in proc.stdout


@pytest.mark.parametrize("recipes", [False, True], ids=["no recipes folder", "empty recipes"])
def test_build_outside_a_project_names_source_and_new(tmp_path: Path, recipes: bool) -> None:
    if recipes:
        (tmp_path / "recipes").mkdir()
    proc = ptkit("build", "--variant", "cpu", cwd=tmp_path)
    assert one_line(proc, 2) == (
        f"ptkit build: {tmp_path} is not a ptkit project (it has no recipes/<variant>.toml); "
        "pass --source <project> (the folder with pyproject.toml and recipes/), or start one "
        "with `ptkit new <name>`"
    )
    assert not (tmp_path / "dist").exists()


def test_index_build_of_a_missing_file_says_it_is_missing(tmp_path: Path) -> None:
    proc = ptkit("index", "build", "nonexistent.whl", "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert one_line(proc, 2) == (
        "Error: Invalid value for 'WHEELS...': File 'nonexistent.whl' does not exist."
    )
    assert not (tmp_path / "site").exists()


def _leaf_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(click.Group())
    leaves = []
    for name in sorted(COMMANDS):
        module, _, attribute = COMMANDS[name].partition(":")
        command = getattr(__import__(module, fromlist=[attribute]), attribute)
        if isinstance(command, click.Group):
            leaves += [((name, sub), command.commands[sub]) for sub in command.list_commands(ctx)]
        else:
            leaves.append(((name,), command))
    return leaves


LEAVES = _leaf_commands()


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_every_command_suggests_the_option_meant(path: tuple[str, ...], command: click.Command):
    options = [o for p in command.params for o in p.opts if o.startswith("--") and o != "--help"]
    tested = 0
    for meant in options:
        typo = meant[:-1]  # --compiler-cach, --jso …
        if any(o.startswith(typo) and o != meant for o in options):
            continue  # click would take it as an abbreviation of another option
        tested += 1
        line = one_line(ptkit(*path, typo), 2)
        assert line.startswith(f"Error: No such option '{typo}'."), line
        # click names the closest options: the one meant is among them.
        assert "Did you mean" in line and f"'{meant}'" in line, line
    assert tested, f"ptkit {' '.join(path)} has no long option to misspell"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("doctr",), "Error: No such command 'doctr' (did you mean 'doctor'?); expected one of "),
        (("index", "biuld"), "Error: No such command 'biuld' (did you mean 'build'?); expected "),
    ],
)
def test_a_misspelt_command_gets_did_you_mean(args: tuple[str, ...], expected: str) -> None:
    assert one_line(ptkit(*args), 2).startswith(expected)


def test_a_misspelt_choice_gets_did_you_mean() -> None:
    line = one_line(ptkit("build", "--variant", "cpu", "--compiler-cache", "ccahe"), 2)
    assert line == (
        "Error: Invalid value for '--compiler-cache': 'ccahe' is not one of 'auto', 'sccache', "
        "'ccache', 'none' (did you mean 'ccache'?)."
    )


def test_a_misspelt_ptkit_variant_in_select() -> None:
    proc = ptkit("select", "--root", str(MACHINES / "h200"), env={"PTKIT_VARIANT": "cuda13"})
    assert one_line(proc, 2).startswith(
        "ptkit select: PTKIT_VARIANT='cuda13' is not a variant (did you mean 'cu13'?); "
        "expected one of cpu, cu13,"
    )


# --- PTKIT_DEBUG ------------------------------------------------------------------------------


@pytest.mark.parametrize("switch", ["PTKIT_DEBUG", "PTKIT_DOCTOR_DEBUG"])
def test_the_debug_switch_shows_the_traceback_for_every_command(
    tmp_path: Path, switch: str
) -> None:
    proc = ptkit("new", LONG_NAME, cwd=tmp_path, env={switch: "1"})
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert (
        proc.stderr.rstrip().splitlines()[-1].startswith("OSError: [Errno 36] File name too long")
    )
    one_line(ptkit("new", LONG_NAME, cwd=tmp_path, env={switch: "0"}), 1)


def test_debug_enabled_reads_both_names() -> None:
    assert not debug_enabled({})
    assert not debug_enabled({"PTKIT_DEBUG": "0", "PTKIT_DOCTOR_DEBUG": " "})
    assert debug_enabled({"PTKIT_DEBUG": "1"}) and debug_enabled({"PTKIT_DOCTOR_DEBUG": "yes"})


# --- the boundary, in process -----------------------------------------------------------------


def _app(error: BaseException) -> click.Group:
    """A root group as ptkit's (``LazyGroup``) with a nested group whose command raises."""

    @click.command("leaf")
    def leaf() -> None:
        raise error

    inner = SuggestingGroup("inner", commands={"leaf": leaf})
    return LazyGroup("root", commands={"inner": inner}, lazy_commands={})


def _failure(error: BaseException, monkeypatch: pytest.MonkeyPatch) -> CommandFailed:
    monkeypatch.delenv("PTKIT_DEBUG", raising=False)
    monkeypatch.delenv("PTKIT_DOCTOR_DEBUG", raising=False)
    with pytest.raises(CommandFailed) as info:
        _app(error).main(["inner", "leaf"], prog_name="python -m ptkit", standalone_mode=False)
    return info.value


def test_ptkits_own_error_keeps_its_message_with_the_command(monkeypatch) -> None:
    from ptkit.recipes.model import RecipeError
    from ptkit.selection.recipes import SelectionError

    failure = _failure(RecipeError("recipes/x.toml: bad; fix it"), monkeypatch)
    assert (failure.message, failure.exit_code) == (
        "ptkit inner leaf: recipes/x.toml: bad; fix it",
        1,
    )
    failure = _failure(SelectionError("ptkit select: bad override; unset it"), monkeypatch)
    assert (failure.message, failure.exit_code) == ("ptkit select: bad override; unset it", 2)


def test_an_os_error_names_the_file_and_the_fix_for_its_errno(monkeypatch) -> None:
    error = PermissionError(errno.EACCES, "Permission denied", "/srv/index/cpu")
    failure = _failure(error, monkeypatch)
    assert failure.message == (
        "ptkit inner leaf: /srv/index/cpu: Permission denied; check its permissions, or choose "
        "a path you can write"
    )
    assert failure.exit_code == 1


def test_a_damaged_input_file_is_an_input_error(monkeypatch) -> None:
    failure = _failure(zipfile.BadZipFile("File is not a zip file"), monkeypatch)
    assert failure.message == (
        "ptkit inner leaf: an input file is not a valid zip archive (a wheel cut short?) "
        "(BadZipFile: File is not a zip file); pass a file ptkit built"
    )
    assert failure.exit_code == 1


def test_anything_else_is_a_bug_report_in_one_line(monkeypatch) -> None:
    failure = _failure(ValueError("table\nentry"), monkeypatch)
    assert failure.exit_code == 2
    assert failure.message == (
        "ptkit inner leaf: internal error: ValueError: table entry; this is a bug in ptkit (or a "
        "damaged install: pip install --force-reinstall ptkit): please report it to ptkit's "
        "maintainers with the output of `PTKIT_DEBUG=1 ptkit inner leaf …`"
    )


def test_the_boundary_lets_clicks_own_exits_through(monkeypatch) -> None:
    ctx = click.Context(click.Group())
    for passing in (click.UsageError("bad"), click.exceptions.Exit(3), SystemExit(4)):
        with pytest.raises(type(passing)), boundary(ctx):
            raise passing
    assert describe(ValueError("x"), "ptkit y").exit_code == 2


def test_the_index_url_variable_is_spelt_once() -> None:
    from ptkit.cli.select import ENV_INDEX_URL as cli_spelling
    from ptkit.selection import ENV_INDEX_URL

    assert cli_spelling == ENV_INDEX_URL == "PTKIT_INDEX_URL"


def test_every_expected_error_names_a_class_that_exists() -> None:
    """The boundary matches by qualified name (it imports none of these modules): a class
    that moved would silently become an "internal error"."""
    import importlib

    from ptkit.cli.failures import EXPECTED_ERRORS

    for qualified in EXPECTED_ERRORS:
        module, _, name = qualified.rpartition(".")
        cls = getattr(importlib.import_module(module), name, None)
        assert isinstance(cls, type) and issubclass(cls, BaseException), qualified
        assert f"{cls.__module__}.{cls.__qualname__}" == qualified, qualified
