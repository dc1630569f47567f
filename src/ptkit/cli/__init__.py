"""The ``ptkit`` command: the root group here, one module per command beside it.

Every command runs inside one error boundary (``ptkit.cli.failures``): what it raises
becomes one line ``ptkit <command>: <problem>; <fix>`` and an exit status (traceback
only with ``PTKIT_DEBUG=1``), so commands do not catch errors to print them. A
command's module is imported only when that command runs (or when ``--help`` lists
the commands), and it imports what the command needs inside the command: ``ptkit
--help`` stays instant and no command imports torch unless it needs it (``explain``,
``profile``). The options several commands share are written once, in ``options``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ptkit._version import __version__

__all__ = ["COMMANDS", "LazyGroup", "SuggestingGroup", "main"]

# Command name -> "module:attribute" of its click command.
COMMANDS: dict[str, str] = {
    "adopt": "ptkit.cli.adopt:adopt",
    "build": "ptkit.cli.build:build",
    "doctor": "ptkit.cli.doctor:doctor",
    "explain": "ptkit.cli.explain:explain",
    "index": "ptkit.cli.index:index",
    "inspect": "ptkit.cli.inspect:inspect",
    "matrix": "ptkit.cli.matrix:matrix",
    "new": "ptkit.cli.new:new",
    "profile": "ptkit.cli.profile:profile",
    "select": "ptkit.cli.select:select",
    "toolchain": "ptkit.cli.toolchain:toolchain",
}


class SuggestingGroup(click.Group):
    """A group whose unknown-command error names the closest command and the valid ones
    (click 8.1 names neither)."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            from ptkit.backends.base import did_you_mean  # only on this error path

            ctx.fail(
                f"No such command {name!r}{did_you_mean(name, self.list_commands(ctx))}; "
                f"expected one of {', '.join(self.list_commands(ctx))}."
            )
        return super().resolve_command(ctx, args)


class LazyGroup(SuggestingGroup):
    """The root group: its commands are imported from ``lazy_commands`` when first asked
    for, and each runs inside the one error boundary (``ptkit.cli.failures``)."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        from ptkit.cli.failures import boundary

        with boundary(ctx):
            return super().invoke(ctx)


def _print_cmake_dir(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    # The CMake package ships inside the ptkit package, in the source tree as installed.
    click.echo(Path(__file__).resolve().parent.parent / "cmake")
    ctx.exit(0)


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="ptkit")
@click.option(
    "--cmake-dir",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_cmake_dir,
    help="Print the folder of ptkit's CMake package (for -Dptkit_DIR=…) and exit.",
)
def main() -> None:
    """Build, ship and load PyTorch extension kernels for every accelerator."""
