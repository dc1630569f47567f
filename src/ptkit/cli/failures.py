"""The command line's one error boundary: whatever a command raises becomes one line,
``ptkit <command>: <problem>; <fix>``, on stderr and an exit status, never a traceback
(unless ``PTKIT_DEBUG=1`` asks for it).

- ptkit's own errors (``EXPECTED_ERRORS``) already say what is wrong and the fix: their
  message is printed as it is (prefixed with the command when it does not name one),
  with their exit status: 2 for a usage error (a bad option value, override or check
  ID), 1 for a command that could not do its job.
- ``OSError``: the file it names (or standard output, when writing the command's
  output failed) with the system's reason and the fix for that reason; exit 1.
- Anything else is a bug in ptkit: one line naming the exception and asking for a
  report with ``PTKIT_DEBUG=1``; exit 2.

Commands do not catch these themselves: ``LazyGroup.invoke`` runs every command inside
``boundary()``. Usage errors that click detects (unknown options, bad values) keep
click's own format and exit status 2.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import IO, Any

import click

from ptkit.tracebacks import DEBUG_ALIASES, DEBUG_ENV, debug_enabled

__all__ = [
    "DEBUG_ALIASES",
    "DEBUG_ENV",
    "EXPECTED_ERRORS",
    "CommandFailed",
    "CommandMisused",
    "PtkitBug",
    "boundary",
    "command_failed",
    "debug_enabled",
    "describe",
]


@dataclasses.dataclass(frozen=True)
class ExpectedError:
    """An exception type that means bad input or a failed job, not a bug in ptkit."""

    exit_status: int
    meaning: str | None = None
    """For another project's type: what it means here (its own message is terse)."""


# By qualified class name (the module that defines the class, not one that re-exports
# it), so that the boundary imports none of these modules: an exception cannot be of a
# type whose module was never imported. A unit test imports each one.
EXPECTED_ERRORS: dict[str, ExpectedError] = {
    # Usage errors: a bad value given to ptkit.
    "ptkit.selection.recipes.SelectionError": ExpectedError(2),
    "ptkit.doctor.UnknownCheckError": ExpectedError(2),
    "ptkit.backends.base.TargetError": ExpectedError(2),
    "ptkit.backends.UnknownBackendError": ExpectedError(2),
    "ptkit.release.matrix.plan.MatrixError": ExpectedError(2),
    # A job that could not be done, with the reason and the fix in the message.
    "ptkit.release.pipeline.errors.BuildError": ExpectedError(1),
    "ptkit.release.toolchains.ToolchainError": ExpectedError(1),
    "ptkit.index.wheels.IndexBuildError": ExpectedError(1),
    "ptkit.index.variant_metadata.VariantMetadataError": ExpectedError(1),
    "ptkit.scaffold.ScaffoldError": ExpectedError(1),
    "ptkit.recipes.model.RecipeError": ExpectedError(1),
    "ptkit.loading.manifest.ManifestError": ExpectedError(1),
    "ptkit.loading.packages.PackageLoadError": ExpectedError(1),
    "ptkit.release.offload.OffloadError": ExpectedError(1),
    # Damaged input files found by the libraries that read them.
    "zipfile.BadZipFile": ExpectedError(
        1, "an input file is not a valid zip archive (a wheel cut short?)"
    ),
    "elftools.common.exceptions.ELFError": ExpectedError(
        1, "an input file is not a valid ELF shared library"
    ),
}

# The fix for an OSError, by errno: what the user can do about that reason.
_OS_FIXES: dict[int, str] = {
    errno.ENAMETOOLONG: "choose a shorter name (a file or folder name has at most 255 bytes)",
    errno.ENOSPC: "free space on that file system, or write somewhere else",
    errno.EDQUOT: "free space within your quota, or write somewhere else",
    errno.EFBIG: "write somewhere else: the file is larger than that file system allows",
    errno.EACCES: "check its permissions, or choose a path you can write",
    errno.EPERM: "check its permissions, or choose a path you can write",
    errno.EROFS: "it is on a read-only file system: choose another path",
    errno.ENOENT: "check the path: it, or a folder above it, does not exist",
    errno.ENOTDIR: "check the path: a part of it is a file, not a folder",
    errno.EISDIR: "it is a folder: pass a file",
    errno.EEXIST: "remove it, or choose another path",
    errno.ENOTEMPTY: "remove what is in it, or choose another path",
    errno.EADDRINUSE: "choose another --port (0 picks a free one), or stop what uses it",
    errno.EADDRNOTAVAIL: "choose a --host address this machine has (127.0.0.1 for itself)",
    errno.EIO: "the device reported an I/O error: check the disk, or write somewhere else",
}
_OS_FIX_DEFAULT = "check that path, then run the command again"


class CommandFailed(click.ClickException):
    """The one line for a command that could not do its job (exit status 1); click's
    ``main`` prints it (as it is: no ``Error:``) and exits."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.message, err=file is None, file=file)


class CommandMisused(CommandFailed):
    """A usage error found by the command (a variant that does not exist …): status 2."""

    exit_code = 2


class PtkitBug(CommandFailed):
    """An exception nobody expected: a bug in ptkit, status 2 (as the doctor's)."""

    exit_code = 2


def command_failed(message: str, exit_status: int) -> CommandFailed:
    return CommandMisused(message) if exit_status == 2 else CommandFailed(message)


def _command_name(tb: TracebackType | None) -> str:
    """``ptkit index build``: the innermost command the traceback passed through (the
    contexts click made for it), said as the user types it whatever ``prog_name``."""
    innermost: click.Context | None = None
    while tb is not None:
        scope = tb.tb_frame.f_locals
        for name in ("ctx", "self"):
            if isinstance(scope.get(name), click.Context):
                innermost = scope[name]
                break
        tb = tb.tb_next
    names: list[str] = []
    while innermost is not None and innermost.parent is not None:
        names.insert(0, innermost.info_name or "")
        innermost = innermost.parent
    return " ".join(["ptkit", *names])


def _failed_stream(tb: TracebackType | None) -> str | None:
    """``standard output`` when the innermost Python frame is ``click.echo`` writing to
    stdout (the command's output could not be written), else None."""
    last = None
    while tb is not None:
        last = tb.tb_frame
        tb = tb.tb_next
    if last is None or last.f_code is not click.echo.__code__:
        return None
    stream = last.f_locals.get("file")
    return "standard error" if stream is sys.stderr else "standard output"


def _shown_path(path: object) -> str:
    """The path for a message: as it is, or, when too long to read, with its longest
    name shortened (the usual culprit of ENAMETOOLONG) and the length said."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    if len(text) <= 120:
        return text
    longest = max(text.split(os.sep), key=len)
    if len(longest) > 40:
        shortened = text.replace(longest, f"{longest[:20]}…{longest[-8:]}", 1)
        return f"{shortened} (a name of {len(longest)} characters)"
    return f"{text[:60]}…{text[-40:]} (a path of {len(text)} characters)"


def _silence_stdout() -> None:
    """After stdout failed: Python flushes it again at exit and would print a second
    error ("Exception ignored …"); point it at the null device first."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _expected(exc: BaseException) -> ExpectedError | None:
    for cls in type(exc).__mro__:
        found = EXPECTED_ERRORS.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return found
    return None


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def describe(exc: BaseException, command: str, *, stream: str | None = None) -> CommandFailed:
    """The one line (and exit status) for ``exc`` raised by ``command``; see the module
    docstring. ``stream``: the output stream being written when it was raised."""
    expected = _expected(exc)
    if expected is not None:
        text = str(exc).strip() or type(exc).__name__
        if expected.meaning is not None:
            text = f"{expected.meaning} ({type(exc).__name__}: {_one_line(text)}); pass a file ptkit built"
        if not text.startswith("ptkit "):
            text = f"{command}: {text}"
        return command_failed(text, expected.exit_status)
    if isinstance(exc, OSError):
        reason = exc.strerror or _one_line(str(exc)) or type(exc).__name__
        fix = _OS_FIXES.get(exc.errno or 0, _OS_FIX_DEFAULT)
        if stream is not None:
            return CommandFailed(
                f"{command}: cannot write to {stream}: {reason}; send the output to a file "
                "or a pipe that can take it"
            )
        subject = _shown_path(exc.filename) if exc.filename is not None else "a file"
        if exc.filename2 is not None:
            subject += f" -> {_shown_path(exc.filename2)}"
        return CommandFailed(f"{command}: {subject}: {reason}; {fix}")
    return PtkitBug(
        f"{command}: internal error: {type(exc).__name__}: {_one_line(str(exc))}; this is a "
        "bug in ptkit (or a damaged install: pip install --force-reinstall ptkit): please "
        f"report it to ptkit's maintainers with the output of `{DEBUG_ENV}=1 {command} …`"
    )


@contextmanager
def boundary(ctx: click.Context) -> Iterator[None]:
    """Run the command of the root context ``ctx``; turn what it raises into
    ``CommandFailed`` (see the module docstring). click's own exceptions, ``SystemExit``
    and ``KeyboardInterrupt`` pass; so does a closed pipe (``… | head``: click exits
    quietly)."""
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
        raise
    except Exception as exc:
        if debug_enabled():
            raise
        tb = exc.__traceback__
        stream = _failed_stream(tb) if isinstance(exc, OSError) else None
        if stream == "standard output":
            _silence_stdout()
        raise describe(exc, _command_name(tb), stream=stream) from None
    try:
        sys.stdout.flush()  # output still buffered fails here, not at interpreter exit
    except BrokenPipeError:
        raise
    except OSError as exc:
        if debug_enabled():
            raise
        _silence_stdout()
        command = " ".join(filter(None, ["ptkit", ctx.invoked_subcommand]))
        raise describe(exc, command, stream="standard output") from None
